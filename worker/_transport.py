"""The one provider call's bounds below the SDK: time, bytes and the ``sent`` truth.

Bounded per call: through the real proxy path a hostile upstream
once cost the worker +513 MB (a 256 MiB body), +2 GB (a gzip bomb) or unbounded
growth (an endless chunked body), because the SDK reads and inflates the whole
body and its 3 s timeout is per phase. This module bounds one call three ways,
each enforced in the call's own thread:

1. **Time** (design §9). Every socket operation of a call — connect, TLS
   handshake, each read and write, on a new or a kept-alive connection — has
   its timeout clamped to what is left of the call's total deadline
   (`Call.remaining`), so the thread returns at the deadline by itself. At the
   deadline the caller also *cuts* the call (`Call.cut`): every socket the call
   is using is shut down (``shutdown(SHUT_RDWR)`` at the fd, which wakes a
   blocked ``recv``/handshake in the call thread). A call that overstays is
   cut, never abandoned. What cannot be cut: a DNS lookup (``getaddrinfo``);
   with an egress proxy it is the proxy's name only.
2. **Bytes.** The request says ``Accept-Encoding: identity``; a response with
   any other ``Content-Encoding`` is refused before its body is read, so what
   is counted is what is parsed (nothing is inflated). The body is read with a
   hard cap of `BODY_CAP_BYTES`; a ``Content-Length`` above it is refused at
   the headers, a body that grows past it is refused when it does, and the
   connection is closed, not returned to the pool. Both are ``invalid_response``:
   no acceptable answer can be that large or encoded.
3. **The ``sent`` truth** (``calls`` in the worker status). A call is *sent*
   when its request is handed to the transport with time left on its deadline
   (httpx's request hook, `_on_request`); from there it may reach the provider.
   A call whose deadline had passed before that, or that was cut first, is
   refused there and never sent. `Call.cut` and `Call.mark_sent` decide under
   one lock, so the caller's answer ("was it sent?") is final.

`BODY_CAP_BYTES` = 48 KiB (49,152 bytes): the contract's 16 KiB content limit
(``MAX_RESPONSE_BYTES``) twice over — the content travels as a JSON string, and
every character an acceptable answer can hold escapes to at most twice its
UTF-8 bytes (``"``, ``\\`` and whitespace: 2 bytes for 1; Hangul as
``\\uXXXX``: 6 for 3) — plus 16 KiB for the envelope (id, model, choice,
usage: under 1 KiB in the API's documented shape). ``max_tokens=384`` keeps
real answers near 2 KiB. Headers are bounded by httpcore's h11 limit (100 KiB)
and reads come 64 KiB at a time, so one call holds well under 1 MiB of response
whatever the upstream sends.

Rules of this module: no ``openai`` import (the client is built in
`kexpr.worker.provider`); nothing here logs or carries content; the bounds
hold for any ``httpx.Client`` given to `install_bounds` (the unit tests' mock
transports included), and `bounded_http_client` adds the socket deadline and
builds the production client with httpx's own environment handling
(``HTTPS_PROXY``/``NO_PROXY``, ``SSL_CERT_FILE``/``SSL_CERT_DIR``), exactly as
the SDK's default client does, but ``follow_redirects=False``: a redirect would
be a second request (design §9: at most one).
"""

from __future__ import annotations

import contextlib
import enum
import math
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, Final

import httpcore
import httpx

from kexpr.spool.contract import MAX_RESPONSE_BYTES
from kexpr.spool.outcomes import Outcome, ProviderFailure

__all__ = [
    "BODY_CAP_BYTES",
    "AnswerRefused",
    "Call",
    "TransportUnsupported",
    "bound",
    "bounded_http_client",
    "current_call",
    "install_bounds",
]

_ENVELOPE_BYTES: Final = 16 * 1024
BODY_CAP_BYTES: Final = 2 * MAX_RESPONSE_BYTES + _ENVELOPE_BYTES
_IDENTITY: Final = "identity"

# One lock for every call's state and every stream's owner: a kept-alive
# connection passes from one call to the next, and a cut must never reach a
# socket that another call has taken over meanwhile.
_LOCK: Final = threading.Lock()


class TransportUnsupported(RuntimeError):
    """httpx's transport is not laid out as this module reaches it (see
    `_with_deadline`): raised at client construction, so the worker refuses to
    start (``kexpr.worker.main``: exit 69) instead of calling without its
    deadline."""


class AnswerRefused(Exception):
    """Raised inside the SDK's read when the transport refuses an answer.

    The call's `Call.refused` holds the outcome; the SDK wraps this in an
    ``APIConnectionError`` (it never retries: ``max_retries=0``)."""


class _Phase(enum.Enum):
    PENDING = "pending"  # not handed to the transport yet
    SENT = "sent"  # handed to the transport with time left
    CUT = "cut"  # the caller gave up at the deadline
    FINISHED = "finished"  # call_once returned


class Call:
    """The state of one provider call, shared by its thread and its caller."""

    __slots__ = ("_deadline", "_phase", "_sent", "_streams", "refused")

    def __init__(self, seconds: float) -> None:
        # +inf: no deadline (call_once used on its own, e.g. by bench/).
        self._deadline = time.monotonic() + seconds if math.isfinite(seconds) else math.inf
        self._phase = _Phase.PENDING
        self._sent = False
        self._streams: set[_DeadlineStream] = set()
        self.refused: ProviderFailure | None = None

    @property
    def sent(self) -> bool:
        with _LOCK:
            return self._sent

    @property
    def was_cut(self) -> bool:
        with _LOCK:
            return self._phase is _Phase.CUT

    def remaining(self) -> float:
        return self._deadline - time.monotonic()

    def mark_sent(self) -> bool:
        """The request is handed to the transport now: True, or False (and it
        must not be) when the call was cut or its deadline has passed."""
        with _LOCK:
            if self._phase is not _Phase.PENDING or self.remaining() <= 0:
                return False
            self._phase = _Phase.SENT
            self._sent = True
            return True

    def refuse(self, outcome: ProviderFailure) -> None:
        with _LOCK:
            if self.refused is None:
                self.refused = outcome

    def cut(self) -> bool:
        """The caller's deadline passed: shut down every socket this call is
        using and refuse any further I/O. Returns whether the call was sent."""
        with _LOCK:
            if self._phase is not _Phase.FINISHED:
                self._phase = _Phase.CUT
                for stream in self._streams:
                    stream.shutdown()
            return self._sent

    def finish(self) -> None:
        with _LOCK:
            if self._phase is not _Phase.CUT:
                self._phase = _Phase.FINISHED
            for stream in self._streams:
                stream.owner = None
            self._streams.clear()

    def _clamp(self, timeout: float | None, stream: _DeadlineStream | None) -> float | None:
        """The timeout for one socket operation of this call; takes ``stream``
        over for this call. Raises when nothing is left (cut or past the deadline)."""
        with _LOCK:
            if stream is not None:
                stream.adopt(self)
            if self._phase is _Phase.CUT:
                raise _Expired
        left = self.remaining()
        if left <= 0:
            raise _Expired
        if math.isinf(left):
            return timeout  # no deadline: the phase timeout alone
        return left if timeout is None else min(timeout, left)


class _Expired(Exception):
    """Internal: the call has no time left (mapped to an httpcore timeout)."""


_local = threading.local()


@contextlib.contextmanager
def bound(call: Call) -> Iterator[Call]:
    """Run the body as ``call``: its thread's I/O is bounded by it."""
    previous: Call | None = getattr(_local, "call", None)
    _local.call = call
    try:
        yield call
    finally:
        _local.call = previous
        call.finish()


def current_call() -> Call | None:
    """The call bound to this thread, or None (for a transport that waits on
    the call's deadline itself: `kexpr.worker.rehearsal`)."""
    call: Call | None = getattr(_local, "call", None)
    return call


def _current() -> Call:
    call: Call | None = getattr(_local, "call", None)
    if call is None:
        # Fail closed: the client is only ever used inside `bound` (call_once).
        raise AnswerRefused("no call bound to this thread")
    return call


# --- the hooks: sent, identity, the byte cap (any httpx.Client) ---------------------


def install_bounds(client: httpx.Client) -> httpx.Client:
    """Add the request/response bounds (items 2 and 3) to ``client``'s hooks."""
    hooks = client.event_hooks
    if _on_request in hooks.get("request", []):
        return client  # already bounded: a second hook would refuse the send
    hooks["request"] = [*hooks.get("request", []), _on_request]
    hooks["response"] = [*hooks.get("response", []), _on_response]
    client.event_hooks = hooks
    return client


def _on_request(request: httpx.Request) -> None:
    call = _current()
    if not call.mark_sent():
        # Never handed to the transport: not a call (`calls` stays put).
        raise httpx.ConnectTimeout("deadline passed before the request was sent")
    request.headers["Accept-Encoding"] = _IDENTITY


def _on_response(response: httpx.Response) -> None:
    call = _current()
    encodings = [
        part.strip().lower()
        for value in response.headers.get_list("content-encoding")
        for part in value.split(",")
    ]
    if any(e not in ("", _IDENTITY) for e in encodings):
        call.refuse(Outcome.INVALID_RESPONSE)
        raise AnswerRefused("encoded body refused")
    length = response.headers.get("content-length")
    if length is not None and (not length.strip().isdigit() or int(length) > BODY_CAP_BYTES):
        call.refuse(Outcome.INVALID_RESPONSE)
        raise AnswerRefused("body over the cap")
    stream = response.stream
    if not isinstance(stream, httpx.SyncByteStream):  # an async stream: not ours
        call.refuse(Outcome.INVALID_RESPONSE)
        raise AnswerRefused("unexpected response stream")
    network = response.extensions.get("network_stream")
    response.stream = _CappedStream(stream, call, network)


class _CappedStream(httpx.SyncByteStream):
    """The body as read from the transport, at most `BODY_CAP_BYTES` of it.
    Once the body is complete, its connection is checked for bytes beyond it
    (`_DeadlineStream.check_trailing`)."""

    def __init__(self, inner: httpx.SyncByteStream, call: Call, network: object) -> None:
        self._inner = inner
        self._call = call
        self._network = network

    def __iter__(self) -> Iterator[bytes]:
        total = 0
        for chunk in self._inner:
            total += len(chunk)
            if total > BODY_CAP_BYTES:
                self._call.refuse(Outcome.INVALID_RESPONSE)
                raise AnswerRefused("body over the cap")
            yield chunk
        # The whole body was read, the connection is not back in the pool yet.
        # (A transport this module did not build, as the unit tests' mock
        # transports, has no network stream of ours and nothing to check.)
        if isinstance(self._network, _DeadlineStream):
            self._network.check_trailing()

    def close(self) -> None:
        self._inner.close()


# --- the socket deadline (the production client) -------------------------------------


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every operation is bounded by the current call.

    Never reused after a response whose length disagreed with its header: a
    body longer than its ``Content-Length`` leaves the extra bytes in h11's
    buffer, and on a kept-alive connection the next call would read them as
    its own answer (checked: without this, it did). `check_trailing` looks at
    that buffer when a body is complete, before the connection returns to the
    pool; a stream that had any is *spent*: it reports itself readable, which
    httpcore's pool takes as a server disconnect (``has_expired``) and closes
    the connection instead of handing it to the next call."""

    def __init__(self, inner: httpcore.NetworkStream, pool: object = None) -> None:
        self._inner = inner
        self.owner: Call | None = None
        self._closed = False
        self._pool = pool
        self.spent = False

    def check_trailing(self) -> None:
        """Spend this stream if its connection buffered bytes past the body
        just read, or if that cannot be told (fail closed: a new connection)."""
        connection = _http11_of(self._pool, self)
        trailing: object = getattr(getattr(connection, "_h11_state", None), "trailing_data", None)
        if not (isinstance(trailing, tuple) and trailing[:1] == (b"",)):
            self.spent = True

    # Called with _LOCK held.
    def adopt(self, call: Call) -> None:
        if self._closed or self.owner is call:
            return
        if self.owner is not None:
            self.owner._streams.discard(self)
        self.owner = call
        call._streams.add(self)

    # Called with _LOCK held.
    def shutdown(self) -> None:
        if self._closed:
            return
        sock = self._inner.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                # The fd-level shutdown (bypassing SSLSocket.shutdown, which is not
                # safe from another thread) wakes a recv blocked in the call thread.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def _detach(self) -> None:
        with _LOCK:
            self._closed = True
            if self.owner is not None:
                self.owner._streams.discard(self)
                self.owner = None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            left = _current()._clamp(timeout, self)
        except _Expired:
            raise httpcore.ReadTimeout("call deadline") from None
        return self._inner.read(max_bytes, left)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            left = _current()._clamp(timeout, self)
        except _Expired:
            raise httpcore.WriteTimeout("call deadline") from None
        self._inner.write(buffer, left)

    def close(self) -> None:
        self._detach()
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        call = _current()
        left = _connect_left(call, timeout, self)
        # The TLS stream owns the socket from here on (the plain one is detached).
        inner = self._inner.start_tls(ssl_context, server_hostname, left)
        self._detach()
        return _connected(call, _DeadlineStream(inner, self._pool))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self.spent:
            return True  # httpcore's pool: expired, closed, never reused
        return self._inner.get_extra_info(info)


def _connect_left(
    call: Call, timeout: float | None, stream: _DeadlineStream | None
) -> float | None:
    """The time one connect phase has (the phase timeout clamped to the call's);
    ``ConnectTimeout`` once the call is spent."""
    try:
        return call._clamp(timeout, stream)
    except _Expired:
        raise httpcore.ConnectTimeout("call deadline") from None


def _connected(call: Call, stream: _DeadlineStream) -> _DeadlineStream:
    """A new connection's stream, taken over by the call; closed if the call
    was spent while it connected."""
    try:
        call._clamp(None, stream)
    except _Expired:
        stream.close()
        raise httpcore.ConnectTimeout("call deadline") from None
    return stream


def _http11_of(pool: object, stream: _DeadlineStream) -> object:
    """The pool's HTTP/1.1 connection over ``stream`` (httpcore's
    ``ConnectionPool._connections``, each an ``HTTPConnection`` or a proxy's
    ``TunnelHTTPConnection`` holding an ``HTTP11Connection`` as ``_connection``),
    or None."""
    connections: object = getattr(pool, "_connections", None)
    if not isinstance(connections, list):
        return None
    for connection in list(connections):
        inner: object = connection
        for _ in range(3):
            if getattr(inner, "_network_stream", None) is stream:
                return inner
            inner = getattr(inner, "_connection", None)
            if inner is None:
                break
    return None


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sync backend, with `_DeadlineStream` streams."""

    def __init__(self, inner: httpcore.NetworkBackend, pool: object = None) -> None:
        self._inner = inner
        self._pool = pool

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        call = _current()
        left = _connect_left(call, timeout, None)
        stream = _DeadlineStream(
            self._inner.connect_tcp(host, port, left, local_address, socket_options), self._pool
        )
        return _connected(call, stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not a provider path")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _with_deadline(transport: httpx.BaseTransport) -> httpx.BaseTransport:
    """Put `_DeadlineBackend` under an httpx transport's connection pool.

    httpx does not take a network backend; its pool (httpcore's, which does)
    is reached at ``HTTPTransport._pool._network_backend`` (httpx 0.28,
    httpcore 1.0). If that ever moves, this raises at client construction —
    the worker fails to start — rather than run a call without its deadline.
    """
    pool: Any = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if not isinstance(transport, httpx.HTTPTransport) or not isinstance(
        backend, httpcore.NetworkBackend
    ):
        raise TransportUnsupported("httpx transport layout changed: no socket deadline")
    pool._network_backend = _DeadlineBackend(backend, pool)
    return transport


class _BoundedClient(httpx.Client):
    """httpx.Client whose every transport (direct and each environment proxy's)
    runs over `_DeadlineBackend`; httpx itself reads the environment."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx.BaseTransport:
        return _with_deadline(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx.BaseTransport:
        return _with_deadline(super()._init_proxy_transport(*args, **kwargs))


def bounded_http_client(*, timeout: float, limits: httpx.Limits) -> httpx.Client:
    """The production HTTP client: environment proxies and CA bundle as the SDK's
    default client (``trust_env``), no redirects, all three bounds."""
    client = _BoundedClient(timeout=timeout, limits=limits, follow_redirects=False)
    return install_bounds(client)

"""A loopback HTTPS proxy that is also the fake OpenAI API behind it.

Clients reach it exactly like production reaches the real API through an egress
proxy: ``HTTPS_PROXY=http://127.0.0.1:PORT`` makes httpx send
``CONNECT api.openai.com:443``; the fake answers ``200``, terminates TLS itself
with a trustme certificate for ``api.openai.com`` (trusted only through
``SSL_CERT_FILE=<ca.pem>``) and serves HTTP/1.1 (keep-alive) with h11.

One thread accepts; one thread serves each connection, so a reply that waits
(``FakeReply.delay_s``, or the model writing its answer: `fakeapi.generation`) waits
in its own connection's thread and never holds up another connection. Test code
only.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import h11
import trustme

from .generation import INSTANT, FakeModel, encoding, generate
from .hostile import HostileReply
from .replies import (
    Behaviour,
    FakeReply,
    RecordedRequest,
    accept_behaviour,
    chat_completion,
    error_reply,
)

__all__ = ["API_HOST", "CHAT_PATH", "ModelAnswer", "FakeOpenAI"]

API_HOST = "api.openai.com"
CHAT_PATH = "/v1/chat/completions"

_POLL_S = 0.2  # recv/accept granularity for noticing shutdown
_HANDSHAKE_TIMEOUT_S = 3.0
_SEND_TIMEOUT_S = 5.0
_DRIP_TICK_S = 0.05
_MAX_REQUEST_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """One answer the fake's model wrote (`FakeReply.answer`): for whom, how many
    tokens, and how long it takes to arrive. ``seconds`` is the model's writing
    time alone (without the reply's own ``delay_s``). Recorded when writing
    starts: the client may give up before the reply is due."""

    artifact_key: str | None
    completion_tokens: int
    prompt_tokens: int
    finish_reason: str
    seconds: float


class _Stopped(Exception):
    """The fake is shutting down (or the peer went away): drop the connection."""


class FakeOpenAI:
    """Context manager: HTTPS proxy + fake ``POST /v1/chat/completions``.

    ``with FakeOpenAI(tmp_path) as fake: env = {**base_env, **fake.env()}``.

    ``model`` (also settable as ``fake.model`` between requests) is how the fake's
    model writes answers: its speed and layout (`fakeapi.generation`).
    ``answer_log``: one JSON line per model answer, like ``ModelAnswer`` plus
    ``"t"`` (``time.time()`` when the model started writing it).
    """

    def __init__(
        self,
        tmp_dir: Path,
        *,
        behaviour: Behaviour | None = None,
        allowed_targets: Iterable[str] = (f"{API_HOST}:443",),
        port: int = 0,
        request_log: Path | None = None,
        model: FakeModel = INSTANT,
        answer_log: Path | None = None,
    ) -> None:
        self.tmp_dir = Path(tmp_dir)
        self.ca_file = self.tmp_dir / "ca.pem"
        self.behaviour: Behaviour = behaviour or accept_behaviour
        self._allowed_targets = frozenset(allowed_targets)
        self._port = port
        self._request_log = request_log
        self.model = model
        self._answer_log = answer_log
        self._model_answers: list[ModelAnswer] = []

        self._cond = threading.Condition()  # guards every list/counter below
        self._requests: list[RecordedRequest] = []
        self._refused: list[str] = []
        self._tunnels: list[str] = []
        self._tls_failures: list[str] = []
        self._errors: list[str] = []
        self._live: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._conn_seq = 0

        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._ssl_ctx: ssl.SSLContext | None = None
        self.port = 0
        self.proxy_url = ""

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        # The tokenizer takes ~0.6 s to load: here, once per process, never on the
        # clock of the first request (its client has a 3 s timeout).
        encoding()
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(self.ca_file))
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(API_HOST).configure_cert(ctx)
        ctx.set_alpn_protocols(["http/1.1"])
        self._ssl_ctx = ctx

        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self._port))
            listener.listen(64)
            listener.settimeout(_POLL_S)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        self.proxy_url = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(
            target=self._accept_loop, name="fakeapi-accept", daemon=True
        )
        self._acceptor.start()

    def close(self, join_timeout_s: float = 3.0) -> None:
        """Stop accepting, unblock delayed replies, close every socket, join."""
        if self._stop.is_set():
            return
        self._stop.set()
        with self._cond:
            live = list(self._live)
            self._cond.notify_all()
        for sock in live:
            try:  # the fd-level shutdown (bypasses SSLSocket.shutdown) wakes a blocked recv/handshake
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + join_timeout_s
        if self._acceptor is not None:
            self._acceptor.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._listener is not None:
            self._listener.close()

    # ------------------------------------------------------------------ recording
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    @property
    def model_answers(self) -> list[ModelAnswer]:
        """Every answer the model has started writing, in order (`ModelAnswer`)."""
        with self._cond:
            return list(self._model_answers)

    @property
    def refused_connects(self) -> list[str]:
        """``host:port`` targets of CONNECTs answered with 403."""
        with self._cond:
            return list(self._refused)

    @property
    def tunnels(self) -> list[str]:
        """``host:port`` of every CONNECT answered with 200 (one per connection)."""
        with self._cond:
            return list(self._tunnels)

    @property
    def tls_failures(self) -> list[str]:
        """Server-side TLS handshake failures (e.g. the client rejected our cert)."""
        with self._cond:
            return list(self._tls_failures)

    @property
    def errors(self) -> list[str]:
        """Unexpected exceptions in the fake (e.g. a behaviour that raised)."""
        with self._cond:
            return list(self._errors)

    def artifact_keys_seen(self) -> list[str]:
        """The capsule ``artifact_key`` of each request that carried one, in order."""
        return [k for k in (r.artifact_key for r in self.requests) if k is not None]

    def count_for(self, artifact_key: str) -> int:
        return sum(1 for r in self.requests if r.artifact_key == artifact_key)

    def wait_for_requests(self, n: int, timeout: float) -> bool:
        """True once at least ``n`` requests were recorded; False after ``timeout``."""
        return self.wait_until(lambda: len(self._requests) >= n, timeout)

    def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait (on the fake's Condition, no polling) until ``predicate()`` holds.
        The predicate runs with the fake's (re-entrant) lock held and is re-checked
        whenever the fake records anything (request, tunnel, refusal, failure)."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def env(self) -> dict[str, str]:
        return {"HTTPS_PROXY": self.proxy_url, "SSL_CERT_FILE": str(self.ca_file)}

    def _note(self, bucket: list[str], item: str) -> None:
        with self._cond:
            bucket.append(item)
            self._cond.notify_all()

    # ------------------------------------------------------------------ threads
    def _accept_loop(self) -> None:
        assert self._listener is not None
        try:
            while not self._stop.is_set():
                try:
                    sock, _ = self._listener.accept()
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except TimeoutError:
                    continue
                except OSError:
                    if self._stop.is_set():
                        return
                    raise
                sock.settimeout(_POLL_S)
                thread = threading.Thread(
                    target=self._connection, args=(sock,), name="fakeapi-conn", daemon=True
                )
                with self._cond:
                    if self._stop.is_set():
                        sock.close()
                        return
                    self._live.add(sock)
                    self._threads.add(thread)
                thread.start()
        except Exception as exc:  # noqa: BLE001 - never leak a thread exception into pytest
            self._note(self._errors, f"accept: {exc!r}")

    def _connection(self, raw: socket.socket) -> None:
        tls: ssl.SSLSocket | None = None
        try:
            if not self._proxy_phase(raw):
                return
            tls = self._tls_phase(raw)
            if tls is None:
                return
            with self._cond:
                self._conn_seq += 1
                conn_id = self._conn_seq
            self._serve_api(tls, conn_id)
        except (_Stopped, OSError, h11.ProtocolError):
            pass  # peer went away, or shutdown
        except Exception as exc:  # noqa: BLE001 - recorded in .errors instead of leaking
            self._note(self._errors, f"connection: {exc!r}")
        finally:
            with self._cond:
                self._live.discard(raw)
                if tls is not None:
                    self._live.discard(tls)
                self._threads.discard(threading.current_thread())
                raw.close()  # no-op once detached by wrap_socket
                if tls is not None:
                    tls.close()

    # ------------------------------------------------------------------ I/O helpers
    def _recv(self, sock: socket.socket) -> bytes:
        while True:
            if self._stop.is_set():
                raise _Stopped
            try:
                return sock.recv(65536)
            except TimeoutError:
                continue

    def _send(self, sock: socket.socket, data: bytes | None) -> None:
        if not data:
            return
        sock.settimeout(_SEND_TIMEOUT_S)
        try:
            sock.sendall(data)
        finally:
            sock.settimeout(_POLL_S)

    def _next_event(self, conn: h11.Connection, sock: socket.socket) -> Any:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(self._recv(sock))
                continue
            return event

    def _send_simple(
        self,
        conn: h11.Connection,
        sock: socket.socket,
        status: int,
        body: bytes,
        *,
        reason: bytes = b"",
        close: bool = True,
        content_type: bytes = b"application/json",
    ) -> None:
        headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
        if close:
            headers.append((b"connection", b"close"))
        self._send(
            sock, conn.send(h11.Response(status_code=status, headers=headers, reason=reason))
        )
        self._send(sock, conn.send(h11.Data(data=body)))
        self._send(sock, conn.send(h11.EndOfMessage()))

    # ------------------------------------------------------------------ phases
    def _proxy_phase(self, sock: socket.socket) -> bool:
        conn = h11.Connection(h11.SERVER)
        event = self._next_event(conn, sock)
        if not isinstance(event, h11.Request):
            return False
        if event.method != b"CONNECT":
            body = json.dumps({"error": "this proxy only supports CONNECT"}).encode()
            self._send_simple(conn, sock, 405, body, reason=b"Method Not Allowed")
            return False
        target = event.target.decode("ascii", "replace")
        if target not in self._allowed_targets:
            self._note(self._refused, target)
            body = json.dumps({"error": f"CONNECT to {target} refused"}).encode()
            self._send_simple(conn, sock, 403, body, reason=b"Forbidden")
            return False
        while True:  # consume the (empty) CONNECT body so h11 may switch protocols
            event = self._next_event(conn, sock)
            if isinstance(event, h11.EndOfMessage) or event is h11.PAUSED:
                break
            if isinstance(event, h11.ConnectionClosed):
                return False
        self._send(
            sock,
            conn.send(h11.Response(status_code=200, headers=[], reason=b"Connection established")),
        )
        trailing, closed = conn.trailing_data
        if trailing or closed:  # a client must wait for 200 before its ClientHello
            return False
        self._note(self._tunnels, target)
        return True

    def _tls_phase(self, raw: socket.socket) -> ssl.SSLSocket | None:
        assert self._ssl_ctx is not None
        tls = self._ssl_ctx.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        with self._cond:
            self._live.discard(raw)
            self._live.add(tls)
        tls.settimeout(_HANDSHAKE_TIMEOUT_S)
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            if not self._stop.is_set():
                self._note(self._tls_failures, f"{type(exc).__name__}: {exc}")
            with self._cond:
                self._live.discard(tls)
            tls.close()
            return None
        tls.settimeout(_POLL_S)
        return tls

    def _serve_api(self, sock: ssl.SSLSocket, conn_id: int) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        while not self._stop.is_set():
            event = self._next_event(conn, sock)
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return
            if not isinstance(event, h11.Request):
                return
            request = event
            body = bytearray()
            while True:
                event = self._next_event(conn, sock)
                if isinstance(event, h11.Data):
                    body += event.data
                    if len(body) > _MAX_REQUEST_BYTES:
                        self._send_simple(conn, sock, 413, b'{"error":"too large"}')
                        return
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    return
            recorded = self._record(request, bytes(body), conn_id)
            if recorded.method == "POST" and recorded.path == CHAT_PATH:
                try:
                    reply = self.behaviour(recorded)
                except Exception as exc:  # noqa: BLE001 - a test's behaviour may raise
                    self._note(self._errors, f"behaviour: {exc!r}")
                    reply = error_reply(500, "fake behaviour raised")
            else:
                reply = error_reply(
                    404,
                    f"Unknown request URL: {recorded.method} {recorded.path}.",
                    type_="invalid_request_error",
                    code="unknown_url",
                )
            if reply.answer is not None:
                reply = self._write_answer(recorded, reply)
            if reply.delay_s > 0 and self._stop.wait(reply.delay_s):
                return
            if reply.close_without_reply:
                return
            if isinstance(reply, HostileReply) and reply.writer is not None:
                reply.writer(sock, self._stop)  # owns the connection to its end (hostile.py)
                return
            self._reply(conn, sock, reply)
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()

    def _write_answer(self, recorded: RecordedRequest, reply: FakeReply) -> FakeReply:
        """The model writes ``reply.answer`` (`fakeapi.generation`): the reply
        becomes its chat completion, due after the writing time. Recorded (and
        logged) now, before the wait: a client that gives up first never reads it,
        and a bench still learns what it would have cost."""
        assert reply.answer is not None
        gen = generate(self.model, recorded.json, reply.answer)
        written = ModelAnswer(
            artifact_key=recorded.artifact_key,
            completion_tokens=gen.completion_tokens,
            prompt_tokens=gen.prompt_tokens,
            finish_reason=gen.finish_reason,
            seconds=gen.seconds,
        )
        with self._cond:
            self._model_answers.append(written)
            self._cond.notify_all()
        self._log_answer(written)
        body = chat_completion(
            gen.content,
            finish_reason=gen.finish_reason,
            prompt_tokens=gen.prompt_tokens,
            completion_tokens=gen.completion_tokens,
        )
        return replace(
            reply,
            body=body,
            answer=None,
            delay_s=reply.delay_s + gen.seconds,
            headers={"openai-processing-ms": str(round(gen.seconds * 1000)), **reply.headers},
        )

    def _log_answer(self, answered: ModelAnswer) -> None:
        """One line of ``answer_log``; ``t`` is when the model started writing."""
        if self._answer_log is None:
            return
        line = {
            "artifact_key": answered.artifact_key,
            "completion_tokens": answered.completion_tokens,
            "prompt_tokens": answered.prompt_tokens,
            "finish_reason": answered.finish_reason,
            "seconds": answered.seconds,
            "t": time.time(),
        }
        with self._cond, self._answer_log.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def _record(self, request: h11.Request, body: bytes, conn_id: int) -> RecordedRequest:
        headers: dict[str, str] = {}
        for name, value in request.headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        try:
            parsed: Any | None = json.loads(body) if body else None
        except ValueError:
            parsed = None
        recorded = RecordedRequest(
            method=request.method.decode("ascii", "replace"),
            path=request.target.decode("ascii", "replace"),
            headers=headers,
            body=body,
            json=parsed,
            received_at=time.monotonic(),
            connection_id=conn_id,
        )
        with self._cond:
            self._requests.append(recorded)
            if self._request_log is not None:
                line = {
                    "artifact_key": recorded.artifact_key,
                    "t": time.time(),
                    "method": recorded.method,
                    "path": recorded.path,
                }
                with self._request_log.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(line) + "\n")
            self._cond.notify_all()
        return recorded

    def _reply(self, conn: h11.Connection, sock: ssl.SSLSocket, reply: FakeReply) -> None:
        body = reply.body_bytes()
        with self._cond:
            request_no = len(self._requests)
        extra = {k.lower(): v for k, v in reply.headers.items()}
        headers: list[tuple[bytes, bytes]] = [
            (b"content-type", reply.content_type.encode("latin-1")),
            (b"content-length", str(len(body)).encode()),
            (b"x-request-id", f"req_fake{request_no:08d}".encode()),
            (b"openai-processing-ms", extra.pop("openai-processing-ms", "1").encode()),
        ]
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
        head = conn.send(h11.Response(status_code=reply.status, headers=headers)) or b""
        rate = reply.drip_bytes_per_s
        if rate is None or rate <= 0:
            # One write for head + body + end: separate small writes meet the
            # client's delayed ACK (Nagle) and cost ~40 ms per reply, which would
            # inflate every latency measured against this fake.
            tail = (conn.send(h11.Data(data=body)) or b"") + (conn.send(h11.EndOfMessage()) or b"")
            self._send(sock, head + tail)
            return
        self._send(sock, head)
        chunk = max(1, int(rate * _DRIP_TICK_S))
        for start in range(0, len(body), chunk):
            piece = body[start : start + chunk]
            if start and self._stop.wait(len(piece) / rate):
                raise _Stopped
            self._send(sock, conn.send(h11.Data(data=piece)))
        self._send(sock, conn.send(h11.EndOfMessage()))

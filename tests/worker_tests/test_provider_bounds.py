"""The provider call's byte cap, identity encoding and ``sent`` truth,
over an injected ``httpx.MockTransport``: the hooks `build_client` installs are
the production ones, so what is counted here is what the worker reads.

The socket deadline needs real sockets: tests/worker_tests/test_provider_hostile.py.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import openai
import pytest
from worker_tests.test_provider import CAPSULE, CAPSULE_OBJ
from worker_tests.test_provider import CONTENT as PRETTY_CONTENT
from worker_tests.worker_kit import Clock, submit

from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import Outcome
from kexpr.worker import provider
from kexpr.worker._transport import BODY_CAP_BYTES, Call
from kexpr.worker.daemon import Worker
from kexpr.worker.provider import build_client, call_once, call_with_deadline

# The capsule of the provider tests; their answer, compact (what the bounds are for).
CONTENT = json.dumps(json.loads(PRETTY_CONTENT), ensure_ascii=False)
COMPLETION = json.dumps(
    {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": CONTENT, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
    },
    ensure_ascii=False,
).encode("utf-8")

Handler = Callable[[httpx.Request], httpx.Response]


class Pulled:
    """A response body the test hands out piece by piece, counting what was read."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.bytes = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.bytes += len(chunk)
            yield chunk


def endless(chunk: int = 4096) -> Iterator[bytes]:
    """As good as endless to a reader capped at 48 KiB: 8 MiB (finite, so that a
    reader without the cap fails its assertion instead of exhausting memory)."""
    yield COMPLETION[:40]
    for _ in range(8 * 1024 * 1024 // chunk):
        yield b" " * chunk


@pytest.fixture(autouse=True)
def worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("OPENAI_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


@pytest.fixture
def connect() -> Iterator[Callable[[Handler], tuple[openai.OpenAI, list[httpx.Request]]]]:
    opened: list[httpx.Client] = []

    def make(handler: Handler) -> tuple[openai.OpenAI, list[httpx.Request]]:
        seen: list[httpx.Request] = []

        def record(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return handler(request)

        http_client = httpx.Client(transport=httpx.MockTransport(record))
        opened.append(http_client)
        client = build_client(http_client=http_client)
        assert client is not None
        return client, seen

    yield make
    for http_client in opened:
        http_client.close()


def _padded(size: int) -> bytes:
    # Trailing whitespace is valid JSON: the same completion, exactly `size` bytes.
    assert len(COMPLETION) <= size
    return COMPLETION + b" " * (size - len(COMPLETION))


# --- the byte cap ---------------------------------------------------------------


def test_the_cap_is_the_contract_limit_twice_plus_the_envelope() -> None:
    from kexpr.spool.contract import MAX_RESPONSE_BYTES

    assert BODY_CAP_BYTES == 2 * MAX_RESPONSE_BYTES + 16 * 1024 == 49_152
    assert provider.BODY_CAP_BYTES == BODY_CAP_BYTES


@pytest.mark.parametrize("announced", [True, False])
def test_a_body_of_exactly_the_cap_is_read(connect, announced: bool) -> None:
    body = _padded(BODY_CAP_BYTES)
    headers = {"content-type": "application/json"}

    def handler(request: httpx.Request) -> httpx.Response:
        if announced:
            return httpx.Response(200, content=body, headers=headers)
        return httpx.Response(200, content=Pulled(iter([body])), headers=headers)

    client, seen = connect(handler)
    result = call_once(client, CAPSULE)
    assert (result.outcome, result.content, result.sent) == (None, CONTENT, True)
    assert len(seen) == 1


@pytest.mark.parametrize("announced", [True, False])
def test_one_byte_over_the_cap_is_invalid_response(connect, announced: bool) -> None:
    body = _padded(BODY_CAP_BYTES + 1)
    pulled = Pulled(iter([body[:BODY_CAP_BYTES], body[BODY_CAP_BYTES:]]))

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json"}
        if announced:
            headers["content-length"] = str(len(body))
        return httpx.Response(200, stream=_Sync(pulled), headers=headers)

    client, seen = connect(handler)
    result = call_once(client, CAPSULE)
    assert (result.outcome, result.sent) == (Outcome.INVALID_RESPONSE, True)
    assert len(seen) == 1
    # Announced: refused at the headers, not a byte of the body read.
    assert pulled.bytes == (0 if announced else len(body))


class _Sync(httpx.SyncByteStream):
    def __init__(self, body: Pulled) -> None:
        self._body = body

    def __iter__(self) -> Iterator[bytes]:
        yield from self._body


def test_an_endless_body_is_read_no_further_than_the_cap(connect) -> None:
    pulled = Pulled(endless(4096))
    client, seen = connect(
        lambda request: httpx.Response(
            200, stream=_Sync(pulled), headers={"content-type": "application/json"}
        )
    )
    result = call_once(client, CAPSULE)
    assert (result.outcome, result.sent) == (Outcome.INVALID_RESPONSE, True)
    assert len(seen) == 1
    # Structural: what was read is the cap plus at most the one chunk that crossed it.
    assert BODY_CAP_BYTES < pulled.bytes <= BODY_CAP_BYTES + 4096


def test_an_error_status_with_an_endless_body_is_bounded_too(connect) -> None:
    pulled = Pulled(endless(4096))
    client, seen = connect(lambda request: httpx.Response(500, stream=_Sync(pulled)))
    result = call_once(client, CAPSULE)
    assert (result.outcome, result.sent) == (Outcome.INVALID_RESPONSE, True)
    assert len(seen) == 1 and pulled.bytes <= BODY_CAP_BYTES + 4096


# --- encodings ----------------------------------------------------------------------


def test_identity_is_asked_for(connect) -> None:
    client, seen = connect(lambda request: httpx.Response(200, content=COMPLETION))
    assert call_once(client, CAPSULE).outcome is None
    (request,) = seen
    assert request.headers.get_list("accept-encoding") == ["identity"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd", "GZIP", "identity, gzip"])
def test_an_encoded_body_is_refused_unread(connect, encoding: str) -> None:
    # A gzip bomb is refused at its headers: nothing is inflated, nothing is read.
    pulled = Pulled(iter([gzip.compress(COMPLETION)]))
    client, seen = connect(
        lambda request: httpx.Response(
            200, stream=_Sync(pulled), headers={"content-encoding": encoding}
        )
    )
    result = call_once(client, CAPSULE)
    assert (result.outcome, result.sent) == (Outcome.INVALID_RESPONSE, True)
    assert len(seen) == 1 and pulled.bytes == 0


@pytest.mark.parametrize("headers", [{}, {"content-encoding": "identity"}])
def test_an_identity_body_is_read(connect, headers: dict[str, str]) -> None:
    client, _ = connect(lambda request: httpx.Response(200, content=COMPLETION, headers=headers))
    assert call_once(client, CAPSULE).content == CONTENT


def test_a_redirect_is_one_request(connect) -> None:
    location = {"location": "https://api.openai.com/v1/chat/completions"}
    client, seen = connect(lambda request: httpx.Response(307, headers=location))
    result = call_once(client, CAPSULE)
    assert (result.outcome, result.sent) == (Outcome.PROVIDER_ERROR, True)
    assert len(seen) == 1


# --- sent -----------------------------------------------------------------------------


def test_bounds_are_installed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two clients over one httpx.Client: still one request hook, and the call is sent.
    http_client = httpx.Client(
        transport=httpx.MockTransport(lambda request: httpx.Response(200, content=COMPLETION))
    )
    try:
        build_client(http_client=http_client)
        client = build_client(http_client=http_client)
        assert client is not None
        assert len(http_client.event_hooks["request"]) == 1
        assert call_once(client, CAPSULE).content == CONTENT
    finally:
        http_client.close()


def test_the_client_sends_nothing_outside_a_call(connect) -> None:
    client, seen = connect(lambda request: httpx.Response(200, content=COMPLETION))
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(**provider.wire_kwargs(CAPSULE))
    assert seen == []


def test_a_call_past_its_deadline_or_cut_is_never_sent() -> None:
    late = Call(0.01)
    time.sleep(0.05)
    assert not late.mark_sent() and not late.sent
    cut = Call(60.0)
    assert cut.cut() is False
    assert not cut.mark_sent() and not cut.sent
    sent = Call(60.0)
    assert sent.mark_sent() and sent.cut() is True and sent.sent


@pytest.mark.parametrize("seconds", [0.0, -1.0])
def test_no_time_left_is_not_sent(connect, seconds: float) -> None:
    client, seen = connect(lambda request: httpx.Response(200, content=COMPLETION))
    result = call_with_deadline(client, CAPSULE, seconds=seconds)
    assert (result.outcome, result.sent) == (Outcome.TIMEOUT, False)
    assert seen == []


def test_a_timeout_after_the_send_is_sent(connect) -> None:
    release = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        release.wait(5)
        return httpx.Response(200, content=COMPLETION)

    client, seen = connect(handler)
    try:
        result = call_with_deadline(client, CAPSULE, seconds=0.2)
    finally:
        release.set()
    assert (result.outcome, result.sent) == (Outcome.TIMEOUT, True)
    assert len(seen) == 1


def test_a_thread_that_cannot_start_sends_nothing(
    connect,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, seen = connect(lambda request: httpx.Response(200, content=COMPLETION))
    _no_threads(monkeypatch)
    with pytest.raises(RuntimeError):
        call_with_deadline(client, CAPSULE, seconds=2.0)
    assert seen == []


def _no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """No idle call thread, and a new one cannot start (the process's limit)."""
    monkeypatch.setattr(provider, "_CALL_THREADS", provider._CallThreads())

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)


# --- `calls` in the worker status counts only what was sent ------------------------


def _worker(root: DataRoot, handler: Handler, clock: Clock) -> tuple[Worker, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    client = build_client(http_client=httpx.Client(transport=httpx.MockTransport(record)))
    env = {"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin"}
    w = Worker(
        root, environ=env, client_factory=lambda: client, clock=clock, monotonic=clock.monotonic
    )
    w.prepare()
    assert w.journal_ok
    return w, seen


def _submit(root: DataRoot, clock: Clock, rid: str) -> str:
    return f"{submit(root, clock, akey=CAPSULE_OBJ.artifact_key, rid=rid)}.json"


def test_calls_counts_a_request_that_left(root: DataRoot) -> None:
    clock = Clock()
    w, seen = _worker(root, lambda request: httpx.Response(200, content=COMPLETION), clock)
    w.handle_claimed(_submit(root, clock, "1" * 32))
    assert len(seen) == 1 and w.counters.calls == 1


def test_calls_does_not_count_a_call_whose_deadline_passed_before_it_left(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The start row takes the whole budget (a slow disk): the deadline has passed
    # when the call would be made, so it is not made, and not counted.
    clock = Clock()
    w, seen = _worker(root, lambda request: httpx.Response(200, content=COMPLETION), clock)
    real = Journal.append_start

    def slow_append(self: Journal, **kw: object) -> object:
        row = real(self, **kw)  # type: ignore[arg-type]
        clock.mono += 10.0
        return row

    monkeypatch.setattr(Journal, "append_start", slow_append)
    w.handle_claimed(_submit(root, clock, "2" * 32))
    assert seen == []
    assert w.counters.calls == 0


def test_calls_does_not_count_a_call_whose_thread_could_not_start(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    w, seen = _worker(root, lambda request: httpx.Response(200, content=COMPLETION), clock)
    _no_threads(monkeypatch)
    try:
        w.handle_claimed(_submit(root, clock, "3" * 32))
    except RuntimeError:
        pass  # what becomes of the attempt is the attempt handler's
    assert seen == []
    assert w.counters.calls == 0


# --- the call thread is taken before its call is known ------------


def test_a_taken_thread_given_back_unused_parks_and_the_surplus_ends(
    monkeypatch: pytest.MonkeyPatch,
    connect: Callable[[Handler], tuple[openai.OpenAI, list[httpx.Request]]],
) -> None:
    """The worker takes a call thread before the start row and gives it back
    when no call follows (no time, a refused row): it parks as idle, at most
    KEEP are kept, the others end; none is left waiting for a call."""
    threads = provider._CallThreads()
    monkeypatch.setattr(provider, "_CALL_THREADS", threads)
    taken = [provider.take_call_thread() for _ in range(threads.KEEP + 2)]
    names = {t._thread.name for t in taken}
    assert names == {"kexpr-provider-call"}
    for t in taken:
        t.give_back()
        t.give_back()  # idempotent
    assert len(threads._idle) == threads.KEEP
    assert all(th.name == "kexpr-provider-idle" for _, th in threads._idle)
    surplus = [t._thread for t in taken if (t._inbox, t._thread) not in threads._idle]
    assert len(surplus) == 2
    for th in surplus:
        th.join(5)
        assert not th.is_alive()
    # A given-back thread serves the next call.
    client, seen = connect(lambda request: httpx.Response(200, content=COMPLETION))
    parked = {th for _, th in threads._idle}
    again = provider.take_call_thread()
    assert again._thread in parked  # taken idle, not started anew
    result = provider.call_with_deadline(client, CAPSULE, seconds=5.0, thread=again)
    assert result.outcome is None and len(seen) == 1


def test_a_thread_that_cannot_start_raises_at_take_with_nothing_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _no_threads(monkeypatch)
    with pytest.raises(RuntimeError):
        provider.take_call_thread()
    assert provider._CALL_THREADS._idle == []

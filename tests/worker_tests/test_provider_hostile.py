"""Hostile upstreams through the real proxy path.

Every test here reaches the loopback fake exactly as production reaches the API:
``HTTPS_PROXY`` (a real CONNECT proxy) and ``SSL_CERT_FILE`` (a test CA), read by
the production client (`build_client()`, no injected transport). The fake's
hostile writers (tests/fakeapi/hostile.py) never end a response on their own.

Two levels:

- in this process, `call_with_deadline` on the production client: the outcome,
  exactly one request, ``sent``, no call thread left running after the return,
  and the server sees the client go away (the socket was cut, not abandoned);
- a real supervised worker process: its RSS (``/proc/<pid>/status`` VmHWM, the
  peak, against VmRSS before) grows < 50 MB, and the attempt ends within the
  shim's 4 s deadline (+2 s of slack: a correctness bound, not a benchmark).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RunningWorker, journal_rows, start_supervised_worker
from fakeapi import FakeOpenAI, FakeReply, compose_reply, default_style
from fakeapi.hostile import HOSTILE_MODES, HostileReply, Tally, hostile_behaviour
from fakeapi.replies import chat_completion, compose
from kit.bodies import STYLED_SURFACE, present_styled
from kit.poll import poll
from kit.spool import STYLED_SLOT

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    exact_block,
)
from kexpr.spool.contract import Capsule
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import Outcome
from kexpr.worker.provider import build_client, call_once, call_with_deadline

pytestmark = pytest.mark.e2e

CAPSULE = Capsule(
    schema_version="korean-expression-v4",
    surface=STYLED_SURFACE,
    artifact_key="0123456789abcdef" * 4,
    slots=(STYLED_SLOT,),
).to_json()

# What each hostile upstream ends as: refused bytes are an invalid answer; a
# drip that never completes is a timeout.
EXPECTED = {
    "huge": Outcome.INVALID_RESPONSE,
    "unannounced": Outcome.INVALID_RESPONSE,
    "gzip_bomb": Outcome.INVALID_RESPONSE,
    "endless": Outcome.INVALID_RESPONSE,
    "drip": Outcome.TIMEOUT,
    "drip_head": Outcome.TIMEOUT,
}
assert set(EXPECTED) == set(HOSTILE_MODES)

DEADLINE_S = 4.0  # the shim's wait, design §4
SLACK_S = 2.0
RSS_GROWTH_LIMIT_KB = 50 * 1024


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch, fake_api: FakeOpenAI) -> FakeOpenAI:
    import os

    for name in list(os.environ):
        if name.startswith("OPENAI_") or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name, value in fake_api.env().items():
        monkeypatch.setenv(name, value)
    return fake_api


def _calls_running() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kexpr-provider-call"]


def _calls_end_within(seconds: float) -> bool:
    """True once no thread runs a call (a returned one parks as ``-idle``)."""
    end = time.monotonic() + seconds
    while _calls_running():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


# --- in this process: the production client ------------------------------------------


def test_the_production_client_still_goes_through_the_proxy(proxied: FakeOpenAI) -> None:
    proxied.behaviour = compose_reply(default_style)
    client = build_client()
    assert client is not None
    try:
        result = call_with_deadline(client, CAPSULE, seconds=DEADLINE_S)
    finally:
        client.close()
    assert result.outcome is None and result.sent
    assert proxied.tunnels == ["api.openai.com:443"]
    (request,) = proxied.requests
    assert request.headers["accept-encoding"] == "identity"


def test_call_once_without_a_deadline_uses_the_phase_timeouts(proxied: FakeOpenAI) -> None:
    # bench/ calls call_once on its own: no total deadline, the same client.
    proxied.behaviour = compose_reply(default_style)
    client = build_client()
    assert client is not None
    try:
        result = call_once(client, CAPSULE)
    finally:
        client.close()
    assert result.outcome is None and result.sent
    assert len(proxied.requests) == 1


def test_a_redirect_is_not_followed(proxied: FakeOpenAI) -> None:
    # The SDK's default client follows redirects: a second request. Ours does not.
    from fakeapi import FakeReply

    proxied.behaviour = lambda req: FakeReply(
        status=307, headers={"location": "https://api.openai.com/v1/chat/completions"}
    )
    client = build_client()
    assert client is not None
    try:
        result = call_with_deadline(client, CAPSULE, seconds=DEADLINE_S)
    finally:
        client.close()
    assert len(proxied.requests) == 1
    assert result.outcome is Outcome.PROVIDER_ERROR and result.sent


@pytest.mark.parametrize("mode", HOSTILE_MODES)
def test_a_hostile_call_is_cut_at_its_deadline(proxied: FakeOpenAI, mode: str) -> None:
    tally = Tally()
    proxied.behaviour = hostile_behaviour(mode, tally)
    client = build_client()
    assert client is not None
    seconds = 1.5
    try:
        started = time.monotonic()
        result = call_with_deadline(client, CAPSULE, seconds=seconds)
        returned = time.monotonic()
        # The thread ended with the call (the cut woke it) and parked: none is left
        # running. On the code before the per-call bound it ran on, reading, for as long as
        # the upstream sent.
        assert _calls_end_within(SLACK_S)
    finally:
        client.close()
    assert result.outcome is EXPECTED[mode]
    assert result.sent and result.content is None
    assert len(proxied.requests) == 1
    assert returned - started < seconds + SLACK_S
    # The server side saw the client go: its writer ended (a write failed), well
    # before the fake is closed. The drip writes every 0.5 s, so allow for that.
    assert proxied.wait_until(lambda: tally.ended_at is not None, SLACK_S + 1.0)
    assert tally.peer_gone


# --- a real worker process ---------------------------------------------------------


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])  # "VmRSS:   12345 kB"
    raise AssertionError(f"no {field} for pid {pid}")


def _present(root: Path, key: str) -> Outcome:
    """Present the styled weekly body as artifact ``key`` once, and report what the
    host published, as Hermes does."""
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    coord = KoreanExpressionCoordinator(cfg, root)
    try:
        cand = present_styled(coord, key)
        if cand.status is CandidateStatus.SELECTED:
            coord.report(cand, "selected")
    finally:
        coord.close()
    return Outcome(cand.outcome.value)


def _wait_terminal(root: Path, n: int, timeout: float) -> list[object]:
    def done() -> list[object]:
        return [r["outcome"] for r in journal_rows(root) if r["state"] == "finalized"]

    return poll(done, lambda outcomes: len(outcomes) >= n, timeout, 0.02)


@pytest.fixture
def worker(data_root: Path, fake_api: FakeOpenAI) -> Iterator[RunningWorker]:
    w = start_supervised_worker(data_root, fake_api)
    yield w
    w.stop()


@pytest.mark.parametrize("mode", HOSTILE_MODES)
def test_a_hostile_upstream_costs_the_worker_under_50_mb(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker, mode: str
) -> None:
    status = json.loads(DataRoot(data_root).status_file.read_bytes())
    pid = int(status["pid"])
    # One ordinary call first: what the first call loads (TLS, the SDK's models)
    # is not what a hostile answer costs.
    fake_api.behaviour = compose_reply(default_style)
    assert _present(data_root, "evt-warm-up") is Outcome.ACCEPTED
    assert _wait_terminal(data_root, 1, DEADLINE_S + SLACK_S) == ["selected"]
    before_kb = _proc_kb(pid, "VmRSS")
    threads_before = _proc_kb(pid, "Threads")

    tally = Tally()
    fake_api.behaviour = hostile_behaviour(mode, tally)
    started = time.monotonic()
    _present(data_root, f"evt-hostile-{mode}")
    outcomes = _wait_terminal(data_root, 2, DEADLINE_S + SLACK_S)
    ended = time.monotonic()
    assert outcomes[1:] == [EXPECTED[mode].value]
    assert ended - started < DEADLINE_S + SLACK_S
    assert fake_api.wait_until(lambda: tally.ended_at is not None, SLACK_S + 1.0)
    assert tally.peer_gone  # the worker cut the connection
    time.sleep(0.5)  # nothing keeps growing after the attempt ended
    peak_kb = _proc_kb(pid, "VmHWM")
    after_kb = _proc_kb(pid, "VmRSS")
    assert peak_kb - before_kb < RSS_GROWTH_LIMIT_KB, (mode, before_kb, peak_kb)
    assert after_kb - before_kb < RSS_GROWTH_LIMIT_KB, (mode, before_kb, after_kb)
    # The call thread was reused and parked again: no thread left behind.
    assert _proc_kb(pid, "Threads") <= threads_before
    assert len(fake_api.requests) == 2
    # `calls` counts the two requests that left.
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        counters = json.loads(DataRoot(data_root).status_file.read_bytes())["counters"]
        if counters["calls"] == 2:
            break
        time.sleep(0.05)
    assert counters["calls"] == 2


# --- a body longer than its Content-Length on a kept-alive connection


def _capsule(key: str) -> str:
    return Capsule(
        schema_version="korean-expression-v4",
        surface=STYLED_SURFACE,
        artifact_key=key,
        slots=(STYLED_SLOT,),
    ).to_json()


def _completion_bytes(capsule_json: str, generated: str) -> bytes:
    capsule = json.loads(capsule_json)
    answer = compose(capsule, {s["slot_id"]: generated for s in capsule["slots"]})
    return json.dumps(chat_completion(json.dumps(answer, ensure_ascii=False))).encode()


def test_a_connection_whose_body_overran_its_length_is_never_reused(
    proxied: FakeOpenAI,
) -> None:
    """The first answer's body is longer than its Content-Length: the extra bytes
    are a whole second response, the answer to the *next* call's capsule. On a
    kept-alive connection the next call read them as its own answer (checked on
    the code before: it did, with no second request reaching the upstream). Now
    the overrun connection is not reused: the next call opens its own and gets
    the upstream's real answer."""
    first, second = _capsule("1" * 64), _capsule("2" * 64)
    body = _completion_bytes(first, "[[P:01]]. 다만 [[A:01]].")
    smuggled_body = _completion_bytes(second, "[[P:01]]. 몰래, [[A:01]].")
    smuggled = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (len(smuggled_body), smuggled_body)
    )
    reused: list[bytes] = []

    def overrun(sock: Any, stop: threading.Event) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
            % len(body)
        )
        sock.sendall(head + body + smuggled)  # one write: the client reads it in one go
        while not stop.is_set():  # a request on this connection is a reuse
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            reused.append(data)

    calls: list[int] = []

    def behaviour(req: Any) -> FakeReply:
        calls.append(1)
        if len(calls) == 1:
            return HostileReply(writer=overrun)
        return compose_reply(default_style)(req)

    proxied.behaviour = behaviour
    client = build_client()
    assert client is not None
    try:
        one = call_with_deadline(client, first, seconds=DEADLINE_S)
        two = call_with_deadline(client, second, seconds=DEADLINE_S)
    finally:
        client.close()
    assert one.outcome is None and one.content is not None and "다만" in one.content
    assert two.outcome is None and two.content is not None
    assert "몰래" not in two.content  # not the smuggled answer
    assert json.loads(two.content)["artifact_key"] == "2" * 64
    assert reused == []  # the overrun connection carried no second request
    assert len(proxied.requests) == 2
    assert proxied.requests[0].connection_id != proxied.requests[1].connection_id


def test_a_clean_connection_is_still_reused(proxied: FakeOpenAI) -> None:
    """The check costs nothing on honest answers: one connection, two calls."""
    proxied.behaviour = compose_reply(default_style)
    client = build_client()
    assert client is not None
    try:
        for key in ("3" * 64, "4" * 64):
            assert call_with_deadline(client, _capsule(key), seconds=DEADLINE_S).outcome is None
    finally:
        client.close()
    assert len(proxied.requests) == 2
    assert proxied.requests[0].connection_id == proxied.requests[1].connection_id

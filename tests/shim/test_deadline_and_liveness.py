"""One deadline from the host's call, and no wait when nothing can answer
(coordinator rules 4 and 13).

The clocks are injected: a set-up that "takes" seconds advances the fake
clocks, so nothing here depends on the machine's speed. The liveness tests use
the heartbeat file as a worker writes it (its state, its mtime); the real
worker's stop and restart are in `test_a_stopped_worker_costs_no_wait_and_a_restarted_one_serves`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import start_supervised_worker
from kit.bodies import STYLED_BODY, STYLED_SELECTED, apresent_styled, present_styled
from reference_host.scripted_worker import heartbeat

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)
from gateway_shim._identity_store import Identity
from gateway_shim._setup import MAX_WAIT as WAIT
from kexpr.spool.journal import format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import MAX_WAIT
from kexpr.spool.status import STALE_AFTER_S
from shim.test_coordinator import ScriptedWorker, accepted

T0 = dt.datetime(2026, 12, 2, 3, 0, 0, 123456, tzinfo=dt.UTC)


class Clocks:
    """A wall and a monotonic clock that move only when told to."""

    def __init__(self) -> None:
        self.offset = 0.0

    def wall(self) -> dt.datetime:
        return T0 + dt.timedelta(seconds=self.offset)

    def mono(self) -> float:
        return 1000.0 + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def make(root: DataRoot, clocks: Clocks, **kw: object) -> KoreanExpressionCoordinator:
    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    return KoreanExpressionCoordinator(
        config,
        root.root,
        clock=clocks.wall,
        monotonic=clocks.mono,
        **kw,  # type: ignore[arg-type]
    )


def slow_set_up(coord: KoreanExpressionCoordinator, clocks: Clocks, seconds: float) -> None:
    """The set-up (directories, key, observer) takes ``seconds`` on the fake clocks."""
    real = coord._hold.ensure_started

    def slow() -> Identity:
        clocks.advance(seconds)
        return real()

    coord._hold.ensure_started = slow  # type: ignore[method-assign]


def request_files(root: DataRoot) -> list[Path]:
    return sorted(root.requests.glob("*.json")) if root.requests.exists() else []


# ------------------------------------------------------------ one deadline


def test_the_wait_is_the_protocols_one_constant() -> None:
    assert WAIT == MAX_WAIT == dt.timedelta(seconds=4)


@pytest.mark.parametrize("asyncio_host", [False, True], ids=["present", "apresent"])
def test_the_request_carries_the_call_instant_and_its_deadline(
    root: DataRoot, asyncio_host: bool
) -> None:
    """Before: ``submitted_at_utc`` was read after parse and set-up, so the worker's
    deadline fell later than the shim's (paid answers the shim had stopped waiting for)."""
    clocks = Clocks()
    coord = make(root, clocks)
    slow_set_up(coord, clocks, 1.5)
    with ScriptedWorker(root, accepted()) as w:
        if asyncio_host:
            cand = asyncio.run(apresent_styled(coord, "e"))
        else:
            cand = present_styled(coord, "e")
    coord.close()
    assert (cand.outcome, cand.body) == (Outcome.ACCEPTED, STYLED_SELECTED)
    [req] = w.requests
    assert req["submitted_at_utc"] == format_ts(T0)
    assert req["deadline_at_utc"] == format_ts(T0 + MAX_WAIT)


def test_a_set_up_that_takes_the_whole_wait_writes_no_request(root: DataRoot) -> None:
    clocks = Clocks()
    coord = make(root, clocks)
    slow_set_up(coord, clocks, MAX_WAIT.total_seconds())
    with ScriptedWorker(root, accepted()) as w:
        cand = present_styled(coord, "e")
    coord.close()
    assert cand.outcome is Outcome.TIMEOUT and cand.status is CandidateStatus.CANONICAL
    assert w.requests == [] and request_files(root) == []


def test_an_answer_after_the_calls_deadline_is_late_on_the_monotonic_clock(
    root: DataRoot,
) -> None:
    """The set-up took 3 s, the worker 1.5 s more: 4.5 s after the host's call the
    answer is late, although it came 1.5 s after the request was written."""
    clocks = Clocks()
    coord = make(root, clocks)
    slow_set_up(coord, clocks, 3.0)
    answer = accepted()

    def late(req: dict[str, object]) -> dict[str, object] | bytes | None:
        clocks.advance(1.5)
        return answer(req)

    with ScriptedWorker(root, late):
        cand = present_styled(coord, "e")
    coord.close()
    assert cand.outcome is Outcome.TIMEOUT and cand.body == STYLED_BODY


# ---------------------------------------------- no wait when nothing can answer


def test_no_worker_ever_is_worker_unavailable_at_once_with_no_request(
    root: DataRoot, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kexpr")
    events: list[dict[str, str]] = []
    clocks = Clocks()
    coord = make(root, clocks, telemetry=lambda e: events.append(dict(e)))
    cands = [
        present_styled(coord, "a"),
        asyncio.run(apresent_styled(coord, "b")),
    ]
    coord.close()
    for cand in cands:
        assert cand.outcome is Outcome.WORKER_UNAVAILABLE
        assert cand.status is CandidateStatus.CANONICAL and cand.body == STYLED_BODY
        assert cand.publication_permitted and cand.attempt_id is None
    assert request_files(root) == []
    assert [e["outcome"] for e in events] == ["worker_unavailable"] * 2
    assert {e["latency_bucket"] for e in events} == {"lt_100ms"}  # the fake clocks never moved
    said = [r.getMessage() for r in caplog.records if r.name == "kexpr.shim"]
    named = f"data_root={quote(str(root.root))}"  # the operator's own path
    assert said.count(f"worker_unavailable reason=absent {named}") == 1  # said once


@pytest.mark.parametrize("state", ["starting", "stopping", "stopped", "quarantined"])
def test_a_worker_not_ready_is_worker_unavailable(root: DataRoot, state: str) -> None:
    heartbeat(root, state)
    coord = make(root, Clocks())
    cand = present_styled(coord, "a")
    coord.close()
    assert cand.outcome is Outcome.WORKER_UNAVAILABLE and request_files(root) == []


@pytest.mark.parametrize(
    "planted",
    [b"{not json", b"[]", json.dumps({"schema": "other", "state": "ready"}).encode()],
    ids=["not_json", "not_object", "other_schema"],
)
def test_an_unreadable_heartbeat_is_worker_unavailable(root: DataRoot, planted: bytes) -> None:
    heartbeat(root)
    root.status_file.write_bytes(planted)
    coord = make(root, Clocks())
    cand = present_styled(coord, "a")
    coord.close()
    assert cand.outcome is Outcome.WORKER_UNAVAILABLE and request_files(root) == []


def test_a_symlinked_heartbeat_is_not_trusted(root: DataRoot, tmp_path: Path) -> None:
    heartbeat(root)
    real = tmp_path / "elsewhere.json"
    real.write_bytes(root.status_file.read_bytes())
    root.status_file.unlink()
    root.status_file.symlink_to(real)
    coord = make(root, Clocks())
    cand = present_styled(coord, "a")
    coord.close()
    assert cand.outcome is Outcome.WORKER_UNAVAILABLE and request_files(root) == []


@pytest.mark.parametrize(
    ("age_s", "served"),
    [(STALE_AFTER_S + 5, False), (-(STALE_AFTER_S + 5), False), (STALE_AFTER_S - 5, True)],
    ids=["stale", "from_the_future", "fresh_enough"],
)
def test_the_heartbeats_age_decides(root: DataRoot, age_s: float, served: bool) -> None:
    coord = make(root, Clocks())
    with ScriptedWorker(root, accepted()) as w:
        heartbeat(root, age_s=age_s)
        cand = present_styled(coord, "a")
    coord.close()
    assert (cand.outcome is Outcome.ACCEPTED) is served
    assert len(w.requests) == (1 if served else 0)


def test_the_first_presentation_after_the_worker_is_back_is_served(
    root: DataRoot, caplog: pytest.LogCaptureFixture
) -> None:
    """No cached verdict outlives the file it was read from."""
    caplog.set_level(logging.DEBUG, logger="kexpr")
    coord = make(root, Clocks())
    heartbeat(root, "stopped")
    assert present_styled(coord, "a").outcome is Outcome.WORKER_UNAVAILABLE
    with ScriptedWorker(root, accepted()):  # writes `ready` before it answers
        back = present_styled(coord, "b")
    heartbeat(root, "stopped")
    again = present_styled(coord, "c")
    coord.close()
    assert back.outcome is Outcome.ACCEPTED
    assert again.outcome is Outcome.WORKER_UNAVAILABLE
    said = [r.getMessage() for r in caplog.records if r.name == "kexpr.shim"]
    said = [m for m in said if m.startswith("worker_")]
    named = f"data_root={quote(str(root.root))}"
    assert said == [
        f"worker_unavailable reason=not_ready {named}",
        "worker_serving",
        f"worker_unavailable reason=not_ready {named}",
    ]


def test_the_heartbeat_is_read_only_when_it_changes(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway_shim import _heartbeat

    reads: list[Path] = []
    real_read: Callable[..., tuple[bytes, object]] = _heartbeat.read_private_identified

    def counting(path: Path, **kw: object) -> tuple[bytes, object]:
        reads.append(path)
        return real_read(path, **kw)

    monkeypatch.setattr(_heartbeat, "read_private_identified", counting)
    coord = make(root, Clocks())
    heartbeat(root, "stopped")
    for i in range(5):
        present_styled(coord, f"a{i}")
    assert len(reads) == 1
    heartbeat(root, "stopped")  # rewritten: a new file
    present_styled(coord, "b")
    coord.close()
    assert len(reads) == 2


@pytest.mark.e2e
def test_a_stopped_worker_costs_no_wait_and_a_restarted_one_serves(data_root: Path) -> None:
    """Real processes: ``kexpr supervise`` (no key: the worker answers
    ``credential_unavailable``, a served answer), stopped, restarted."""
    root = DataRoot(data_root)
    config = KoreanExpressionConfig.from_block(exact_block(Mode.SHADOW, weekly=True))
    coord = KoreanExpressionCoordinator(config, data_root)
    try:
        worker = start_supervised_worker(data_root, None, key=None)
        try:
            first = present_styled(coord, "before")
        finally:
            assert worker.stop() == 0
        assert json.loads(root.status_file.read_bytes())["state"] == "stopped"
        down = present_styled(coord, "down")
        assert down.outcome is Outcome.WORKER_UNAVAILABLE
        assert request_files(root) == []  # no request written
        worker = start_supervised_worker(data_root, None, key=None)
        try:
            back = present_styled(coord, "back")
        finally:
            worker.stop()
    finally:
        coord.close()
    assert first.outcome is Outcome.CREDENTIAL_UNAVAILABLE
    assert back.outcome is Outcome.CREDENTIAL_UNAVAILABLE


def test_a_heartbeat_replaced_between_its_lstat_and_its_read_is_looked_at_again(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker rewrites its heartbeat every second: a presentation that meets a
    rewrite is served (before: one ``worker_unavailable`` in a served burst)."""
    from gateway_shim import _heartbeat

    reads: list[Path] = []
    real_read: Callable[..., tuple[bytes, object]] = _heartbeat.read_private_identified

    def racing(path: Path, **kw: object) -> tuple[bytes, object]:
        if not reads:
            heartbeat(root)  # the worker's rewrite lands right now
        reads.append(path)
        return real_read(path, **kw)

    coord = make(root, Clocks())
    with ScriptedWorker(root, accepted()):
        monkeypatch.setattr(_heartbeat, "read_private_identified", racing)
        cand = present_styled(coord, "a")
    coord.close()
    assert cand.outcome is Outcome.ACCEPTED
    assert len(reads) == 2

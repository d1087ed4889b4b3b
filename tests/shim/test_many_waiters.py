"""Many waiters, one loop; nothing kept per abandoned wait; a watch that notices
its death (coordinator rules 4 and 12).

Behaviour, never time: reads and scans are counted with instrumented readers,
the table's size is read, the watch is proven by a file that arrives through
it (`_wake_via_watcher`). The figures are bench/guest.py's.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kit.bodies import apresent_styled, present_styled
from reference_host.scripted_worker import heartbeat

from gateway_shim import (
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    _data_root,
    _responses,
    _setup,
    _waits,
    exact_block,
)
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import CandidateOutcome
from shim.test_coordinator import ScriptedWorker, accepted, coordinator
from shim.test_deadline_and_liveness import Clocks
from shim.test_guest_process import GatedResponder, _wake_via_watcher, request_files

# The styled weekly's interpretation slot, as the fit table allows it (design §6.1):
# every presentation here writes a request and waits for its answer.
STYLED = "[[P:01]]. 다만 [[A:01]]."


def make(root: DataRoot, clocks: Clocks) -> KoreanExpressionCoordinator:
    """A coordinator for the styled weekly on ``clocks``."""
    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    return KoreanExpressionCoordinator(config, root.root, clock=clocks.wall, monotonic=clocks.mono)


@pytest.fixture(autouse=True)
def long_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 30 s wait: every wait here ends on its answer long before."""
    monkeypatch.setattr(_setup, "MAX_WAIT", dt.timedelta(seconds=30))


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*a: Any, **kw: Any) -> Any:
            self.n += 1
            return fn(*a, **kw)

        return counted


# ------------------------------------------------------------ one wake each


@pytest.mark.parametrize("asyncio_host", [True, False], ids=["apresent", "present"])
def test_waiters_read_their_file_once_and_the_recheck_is_one_scan(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch, asyncio_host: bool
) -> None:
    """Before: every waiter re-read its response every 0.25 s while the watcher
    worked (2,000 waiters: 8,000 reads/s on the executor set-up queued behind)."""
    reads, scans, listings = Counter(), Counter(), Counter()
    monkeypatch.setattr(_waits, "try_read", reads.wrap(_waits.try_read))
    monkeypatch.setattr(
        _responses.ResponseWaiters,
        "scan_once",
        scans.wrap(_responses.ResponseWaiters.scan_once),
    )
    monkeypatch.setattr(_responses, "list_dir", listings.wrap(_responses.list_dir))
    n = 40
    coord = coordinator(root.root, weekly=True)
    with GatedResponder(root, accepted(STYLED)) as responder:

        async def wait_for_scans(at_least: int) -> None:
            while len(request_files(root)) < n or scans.n < at_least:
                await asyncio.sleep(0.01)

        async def main() -> list[CandidateOutcome]:
            tasks = [asyncio.create_task(apresent_styled(coord, f"e{i}")) for i in range(n)]
            await wait_for_scans(6)  # every request out, six re-checks passed meanwhile
            before = reads.n
            responder.gate.set()
            out = [c.outcome for c in await asyncio.gather(*tasks)]
            assert before == 0  # no waiter read anything before its answer came
            return out

        if asyncio_host:
            outcomes = asyncio.run(main())
        else:
            with ThreadPoolExecutor(max_workers=n) as pool:
                futures = [pool.submit(present_styled, coord, f"e{i}") for i in range(n)]
                asyncio.run(wait_for_scans(6))
                assert reads.n == 0
                responder.gate.set()
                outcomes = [f.result().outcome for f in futures]
    coord.close()
    assert outcomes == [Outcome.ACCEPTED] * n
    assert reads.n == n  # one read per response, none per re-check
    assert listings.n == scans.n  # each re-check is one listing, for all the waiters


# ------------------------------------------------- nothing kept when abandoned


def test_waits_whose_loop_was_stopped_and_closed_leave_no_entry(root: DataRoot) -> None:
    """Before: 300 torn-down loops left 300 entries for the process's life."""
    clocks = Clocks()
    coord = make(root, clocks)
    heartbeat(root)  # said serving, answering nothing
    kept: list[asyncio.Task[Any]] = []  # the host keeps its tasks: no GC unwinding
    for i in range(20):
        loop = asyncio.new_event_loop()
        task = loop.create_task(apresent_styled(coord, f"{i}"))
        kept.append(task)

        async def published(k: int = i) -> None:
            while len(request_files(root)) <= k:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # the task is in its wait

        loop.run_until_complete(published())
        loop.close()  # stopped and closed, the task never cancelled
    assert len(coord._waiters) == 20
    clocks.advance(_setup.MAX_WAIT.total_seconds() + _responses.EXPIRY_GRACE_S + 1)
    coord._waiters.scan_once()  # what the shared scan does every 0.25 s
    assert len(coord._waiters) == 0
    coord.close()
    assert all(not t.done() for t in kept)


def test_the_waiter_table_is_bounded(root: DataRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_responses, "MAX_WAITERS", 5)
    waiters = _responses.ResponseWaiters(root.responses, clock=lambda: 0.0)
    for i in range(12):
        waiters.register(f"{i:032x}", lambda: None, 100.0)
    assert len(waiters) == 5
    waiters.close()


# ---------------------------------------------------- a watch that notices


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kexpr.shim"]


def _replace(root: DataRoot, how: str) -> None:
    """responses/ moved away and recreated, as an operator's cleanup or a restore."""
    old = root.root / "responses.old"
    os.rename(root.responses, old)
    if how == "removed":
        for f in old.iterdir():
            f.unlink()
        old.rmdir()  # IN_DELETE_SELF, IN_IGNORED: the emitter stops
    root.ensure()  # recreated with its mode


@pytest.mark.parametrize("how", ["moved", "removed"])
def test_a_replaced_responses_directory_is_watched_again(
    root: DataRoot, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """Before: the watch stayed on the old directory (or stopped) and `watching`
    said True; every wait fell to the re-check for the coordinator's life."""
    caplog.set_level(logging.DEBUG, logger="kexpr")
    coord = coordinator(root.root, weekly=True)
    with ScriptedWorker(root, accepted(STYLED)):
        assert present_styled(coord, "a").outcome is (Outcome.ACCEPTED)
        assert _wake_via_watcher(coord, root, "1" * 32)
        _replace(root, how)
        # Served by the shared re-check, whose pass finds the watch lost.
        assert present_styled(coord, "b").outcome is (Outcome.ACCEPTED)
        assert _wake_via_watcher(coord, root, "2" * 32)  # the new directory is watched
        assert coord.watching
    coord.close()
    lost = [m for m in _messages(caplog) if m.startswith("watch_")]
    assert lost in (
        ["watch_lost reason=replaced", "watch_reestablished"],
        ["watch_lost reason=stopped", "watch_reestablished"],
    )


def test_a_lost_watch_that_cannot_be_had_again_says_so_once_then_retries(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kexpr")
    coord = coordinator(root.root, weekly=True)
    with ScriptedWorker(root, accepted(STYLED)):
        assert present_styled(coord, "a").outcome is (Outcome.ACCEPTED)
        from gateway_shim import _watch

        real = _watch.watch_responses

        def exhausted(*a: Any) -> Any:
            raise OSError(24, "EMFILE")

        monkeypatch.setattr(_watch, "watch_responses", exhausted)
        _replace(root, "moved")
        for i in range(3):  # waits on the re-check; watching is False
            cand = present_styled(coord, f"b{i}")
            assert cand.outcome is Outcome.ACCEPTED
        assert coord.watching is False
        monkeypatch.setattr(_watch, "watch_responses", real)
        monkeypatch.setattr(_data_root, "WATCHER_RETRY_S", 0.0)
        coord._waiters.scan_once()  # the next pass retries
        assert coord.watching is True
        assert _wake_via_watcher(coord, root, "3" * 32)
    coord.close()
    said = [m for m in _messages(caplog) if m.startswith(("watch", "watcher"))]
    assert said == [
        "watch_lost reason=replaced",
        "watcher_unavailable fallback_recheck=true",
        "watcher_restored",
    ]

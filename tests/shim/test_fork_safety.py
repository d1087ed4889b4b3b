"""Fork-safe all the way down (coordinator rule 12).

Every lock the gateway's modules hold (module-level ones in kexpr.spool too) is
held by another thread at the fork, instrumented; then the natural case: many
threads presenting while the process forks. Every child must present within
the bound. A child that hangs is killed after a generous deadline (a hang is
the failure; nothing here measures time).
"""

from __future__ import annotations

import json
import os
import select
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kit.bodies import present_styled

from gateway_shim import KoreanExpressionCoordinator, Outcome, PresentationCandidate
from kexpr.spool import _walk
from kexpr.spool.layout import DataRoot
from shim.test_coordinator import ScriptedWorker, accepted, coordinator

# A child that has not presented by then hangs (its wait is 4 s).
CHILD_BOUND_S = 30.0

LOCKS: dict[str, Callable[[KoreanExpressionCoordinator], Any]] = {
    "walk_pin_lock": lambda c: _walk._pin_lock,
    "hold_setup_lock": lambda c: c._hold._setup_lock,
    "waiters_lock": lambda c: c._waiters._lock,
    "executor_lock": lambda c: c._executor._lock,
    "telemetry_lock": lambda c: c._telemetry._lock,
    "awaiting_lock": lambda c: c._awaiting._lock,
    "heartbeat_lock": lambda c: c._setup.heartbeat._lock,
    "spool_said_lock": lambda c: c._setup.spool_said._lock,
}


def fork_and_present(
    coord: KoreanExpressionCoordinator,
    event_id: str,
    said: Callable[[PresentationCandidate], object] = lambda cand: cand.outcome.value,
) -> tuple[int, int]:
    """Fork; the child presents once and writes ``said(candidate)`` (its outcome).
    (pid, read end)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(r)
            cand = present_styled(coord, event_id)
            os.write(w, json.dumps(said(cand)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def child_outcome(pid: int, r: int) -> object:
    """What the child wrote (its outcome), or None if it did not present within
    the bound."""
    try:
        ready, _, _ = select.select([r], [], [], CHILD_BOUND_S)
        data = os.read(r, 4096) if ready else b""
    finally:
        os.close(r)
    if not data:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return json.loads(data) if data else None


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_a_fork_while_a_lock_is_held_leaves_a_child_that_presents(
    root: DataRoot, name: str
) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()):
        # Everything started (observer, executor, telemetry, pins) before the fork.
        assert present_styled(coord, "p").outcome is Outcome.ACCEPTED
        lock = LOCKS[name](coord)
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with lock:
                held.set()
                release.wait(60)

        holder = threading.Thread(target=hold, daemon=True)
        holder.start()
        assert held.wait(10)
        try:
            pid, r = fork_and_present(coord, f"child-{name}")
        finally:
            release.set()
            holder.join(10)
        outcome = child_outcome(pid, r)
        after = present_styled(coord, "q").outcome
    coord.close()
    assert outcome == "accepted", f"the child forked while {name} was held: {outcome}"
    assert after is Outcome.ACCEPTED  # the parent is untouched


def test_forks_while_many_threads_present_leave_children_that_present(root: DataRoot) -> None:
    coord = coordinator(root.root)
    stop = threading.Event()
    errors: list[BaseException] = []

    def present_in_a_loop(i: int) -> None:
        n = 0
        while not stop.is_set():
            try:
                present_styled(coord, f"t{i}-{n}")
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
            n += 1

    with ScriptedWorker(root, accepted()):
        workers = [threading.Thread(target=present_in_a_loop, args=(i,)) for i in range(8)]
        for t in workers:
            t.start()
        try:
            outcomes = [child_outcome(*fork_and_present(coord, f"c{k}")) for k in range(20)]
        finally:
            stop.set()
            for t in workers:
                t.join(30)
    coord.close()
    assert errors == []
    assert None not in outcomes, outcomes  # no child hung
    assert set(outcomes) <= {"accepted", "timeout"}


def test_a_reset_that_fails_in_the_child_is_counted_and_the_others_still_run(
    root: DataRoot,
) -> None:
    """The fork hook survives a part whose reset raises (a child must never die
    in kexpr's hook): the fault is counted (`_guest.fork_faults`), and the
    coordinators after it are still reset, so the child presents."""
    from gateway_shim import _guest

    class Broken:
        def _after_fork_in_child(self) -> None:
            raise RuntimeError("reset failed")

    broken = Broken()
    _guest.track(broken)  # reset in the child beside the coordinator, in any order
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()):
        assert present_styled(coord, "p").outcome is Outcome.ACCEPTED
        pid, r = fork_and_present(coord, "c", lambda cand: [_guest.fork_faults, cand.outcome.value])
        before = _guest.fork_faults
        out = child_outcome(pid, r)
    coord.close()
    del broken
    assert out == [before + 1, "accepted"]
    assert _guest.fork_faults == before  # counted in the child only

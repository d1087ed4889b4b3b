"""A wrong clock at a worker's start cannot remove the dedupe history
(`kexpr.spool.journal` rule 7a, `kexpr.spool.retention`): a fresh process
that starts 40 days ahead, or a journal written 400 days behind and then
corrected, keeps every segment, and every artifact already paid is answered
``already_attempted`` with no second call; the status says why retention holds.

The worker in process on a controllable clock (`worker_kit.Clock`: ``step``
moves the wall clock alone) and a scripted provider; each ``make_worker`` is a
restart (its start-up sweep runs retention).
"""

from __future__ import annotations

import itertools
import os

from worker_tests.worker_kit import Clock, Provider, make_worker, response, rid, status, submit

from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import Outcome
from kexpr.worker import housekeeping
from kexpr.worker.daemon import Worker

DAY = 86400.0
_requests = itertools.count(1)


def present(w: Worker, root: DataRoot, clock: Clock, artifact: int) -> Outcome | None:
    request_id = submit(root, clock, f"{artifact:032x}", rid=rid(next(_requests)))
    w.handle_claimed(f"{request_id}.json")
    clock.advance(1.0)
    r = response(root, request_id)
    return Outcome.ALREADY_ATTEMPTED if r.status is ResponseStatus.ALREADY_ATTEMPTED else r.outcome


def tick(w: Worker) -> None:
    housekeeping.sweep(w.parts)
    w.status.write()


def test_a_worker_started_forty_days_ahead_removes_no_segment(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    for day in range(3):  # three days, four artifacts each, a restart every day
        w = make_worker(root, provider, clock, env)
        assert [present(w, root, clock, 4 * day + n) for n in range(4)] == [Outcome.ACCEPTED] * 4
        tick(w)
        clock.advance(DAY)
    assert len(provider.calls) == 12 and len(os.listdir(root.outcomes)) == 3
    clock.step(40 * DAY)
    w = make_worker(root, provider, clock, env)  # a restart on the wrong clock
    tick(w)
    assert len(os.listdir(root.outcomes)) == 3
    assert status(root)["retention_held"] == "clock_ahead_of_record"
    # It pays a new artifact on the wrong clock: the journal now agrees with
    # that clock, and still nothing of the three days goes.
    assert present(w, root, clock, 100) is Outcome.ACCEPTED
    tick(w)
    clock.advance(3600)
    tick(w)
    assert len(os.listdir(root.outcomes)) == 4
    clock.step(-40 * DAY)  # corrected, then a restart
    w = make_worker(root, provider, clock, env)
    tick(w)
    assert len(os.listdir(root.outcomes)) == 4
    assert status(root)["retention_held"] is not None
    assert [present(w, root, clock, n) for n in range(12)] == [Outcome.ALREADY_ATTEMPTED] * 12
    assert len(provider.calls) == 13


def test_a_journal_written_four_hundred_days_behind_outlives_the_correction(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    clock.step(-400 * DAY)  # a boot without a time source, from the first start
    w = make_worker(root, provider, clock, env)
    assert [present(w, root, clock, n) for n in range(6)] == [Outcome.ACCEPTED] * 6
    tick(w)
    (behind,) = os.listdir(root.outcomes)
    clock.step(400 * DAY)  # corrected, then a restart
    w = make_worker(root, provider, clock, env)
    tick(w)
    assert status(root)["retention_held"] == "clock_ahead_of_record"
    # A new artifact on the right clock: the journal's newest row agrees with
    # the clock now, and the segment named 400 days ago still stays.
    assert present(w, root, clock, 100) is Outcome.ACCEPTED
    tick(w)
    clock.advance(3600)
    w = make_worker(root, provider, clock, env)
    tick(w)
    assert behind in os.listdir(root.outcomes)
    assert [present(w, root, clock, n) for n in range(6)] == [Outcome.ALREADY_ATTEMPTED] * 6
    assert len(provider.calls) == 7


def test_retention_runs_again_once_the_hold_has_settled(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """The hold is not forever: 36 days of a steady clock after the step, a
    segment written under the wrong clock is old by any reading and goes."""
    clock = Clock()
    clock.step(-400 * DAY)
    w = make_worker(root, provider, clock, env)
    assert present(w, root, clock, 1) is Outcome.ACCEPTED
    tick(w)
    (behind,) = os.listdir(root.outcomes)
    clock.step(400 * DAY)
    w = make_worker(root, provider, clock, env)
    tick(w)
    for _ in range(37):  # a running worker, a new artifact every day
        clock.advance(DAY)
        tick(w)
        assert present(w, root, clock, 1000 + next(_requests)) is Outcome.ACCEPTED
        tick(w)
    assert behind not in os.listdir(root.outcomes)
    assert status(root)["retention_held"] is None

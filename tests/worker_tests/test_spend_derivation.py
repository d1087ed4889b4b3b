"""The spend count is a function of the journal and of a clock that cannot step
(`kexpr.worker.spend` rules 2 and 3): an operator's clear, a restart in
quarantine, and a step of the worker's wall clock either way lower nothing
below what the journal holds, and the status file says what the journal holds.

The worker in process on a controllable clock (`worker_kit.Clock`: ``step``
moves the wall clock alone) and a scripted provider; caps of 5 an hour and 7
a day, as an operator would set them to watch the bound.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os

import httpx
from worker_tests.worker_kit import Clock, Provider, make_worker, response, rid, status, submit

from kexpr.spool.fsio import publish
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import Outcome
from kexpr.worker import housekeeping
from kexpr.worker.daemon import Worker
from kexpr.worker.provider import build_client
from kexpr.worker.resume import ClearResult, clear_if_asked, request_bytes
from kexpr.worker.spend import SpendCaps

CAPS = SpendCaps(per_hour=5, per_day=7)
TWO_DAYS = dt.timedelta(days=2).total_seconds()
_requests = itertools.count(1)
_artifacts = itertools.count(1)


def present(w: Worker, root: DataRoot, clock: Clock) -> Outcome:
    """A new artifact in a request of its own; the outcome it is answered with."""
    request_id = submit(root, clock, f"{next(_artifacts):032x}", rid=rid(next(_requests)))
    w.handle_claimed(f"{request_id}.json")
    clock.advance(1.0)
    return response(root, request_id).outcome


def start_rows(root: DataRoot) -> int:
    return len(Journal(root).load().by_attempt)


def last_hour_and_today(w: Worker, root: DataRoot) -> tuple[object, object]:
    w.status.write()
    spend = status(root)["spend"]
    assert isinstance(spend, dict)
    return spend["last_hour"], spend["today"]


def tick(w: Worker) -> None:
    """What the run loop does once a second: housekeeping, then the status file."""
    housekeeping.sweep(w.parts)
    w.status.write()


def pay_the_hours_cap(w: Worker, root: DataRoot, clock: Clock, provider: Provider) -> None:
    assert [present(w, root, clock) for _ in range(5)] == [Outcome.ACCEPTED] * 5
    assert present(w, root, clock) is Outcome.SPEND_CAP_REACHED
    assert len(provider.calls) == start_rows(root) == 5


def test_a_clear_after_a_restart_in_quarantine_hands_out_no_fresh_cap(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    pay_the_hours_cap(make_worker(root, provider, clock, env, spend=CAPS), root, clock, provider)
    client = build_client(http_client=httpx.Client(transport=httpx.MockTransport(provider.handler)))
    for _ in range(3):
        # A slip before a restart: the new worker starts in quarantine, the
        # operator fixes the mode and clears; the journal's five still count.
        os.chmod(root.outcomes, 0o755)
        w = Worker(
            root,
            environ=env,
            client_factory=lambda: client,
            clock=clock,
            monotonic=clock.monotonic,
            spend=CAPS,
        )
        w.prepare()
        assert w.quarantine == "bad_mode"
        os.chmod(root.outcomes, 0o700)
        publish(root.tmp, root.quarantine_clear, request_bytes("ab" * 16))
        cleared = clear_if_asked(w.parts)
        assert cleared is not None and cleared.result is ClearResult.CLEARED
        assert w.quarantine is None
        assert present(w, root, clock) is Outcome.SPEND_CAP_REACHED
        assert last_hour_and_today(w, root) == (5, 5)
    assert len(provider.calls) == start_rows(root) == 5


def test_a_clock_excursion_ahead_frees_no_budget_and_status_agrees_with_the_journal(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env, spend=CAPS)
    pay_the_hours_cap(w, root, clock, provider)
    for _ in range(3):
        # Two days ahead for 3.5 s, the status file written meanwhile, then back.
        clock.step(TWO_DAYS)
        tick(w)
        assert w.clock_step
        assert present(w, root, clock) is Outcome.SPEND_CAP_REACHED
        tick(w)
        clock.advance(1.5)
        clock.step(-TWO_DAYS)
        tick(w)
        assert present(w, root, clock) is Outcome.SPEND_CAP_REACHED
        assert last_hour_and_today(w, root) == (5, 5)
    assert len(provider.calls) == start_rows(root) == 5


def test_rows_written_during_a_step_back_still_count_once_the_clock_returns(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env, spend=CAPS)
    assert [present(w, root, clock) for _ in range(2)] == [Outcome.ACCEPTED] * 2
    # Two days behind: the two rows are in the clock's future and count; three
    # more fill the hour, stamped two days back.
    clock.step(-TWO_DAYS)
    tick(w)
    assert [present(w, root, clock) for _ in range(3)] == [Outcome.ACCEPTED] * 3
    assert present(w, root, clock) is Outcome.SPEND_CAP_REACHED
    # Corrected: the three rows are two days old by their stamps, yet they were
    # paid minutes ago.
    clock.step(TWO_DAYS)
    tick(w)
    assert present(w, root, clock) is Outcome.SPEND_CAP_REACHED
    assert last_hour_and_today(w, root)[0] == 5
    assert len(provider.calls) == start_rows(root) == 5
    # An hour later on both clocks the hour has room again.
    clock.advance(3600)
    tick(w)
    assert present(w, root, clock) is Outcome.ACCEPTED


def test_a_step_back_puts_back_a_row_the_count_had_forgotten(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env, spend=CAPS)
    assert present(w, root, clock) is Outcome.ACCEPTED
    # 50 hours on both clocks: neither window can hold the row, it is forgotten.
    clock.advance(50 * 3600)
    tick(w)
    assert last_hour_and_today(w, root) == (0, 0)
    # The wall clock steps back three days: the journal's row is stamped in the
    # clock's future, so it is in both windows again, and the count says so.
    clock.step(-3 * 24 * 3600)
    tick(w)
    assert last_hour_and_today(w, root) == (1, 1)

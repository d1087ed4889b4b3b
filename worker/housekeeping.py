"""The worker's housekeeping on its rescan timer: expiry (`kexpr.spool.lifecycle.
expiry_due`), retention (`kexpr.spool.journal` rule 7) unless a wall-clock step was
observed (`kexpr.spool.lifecycle` rule 7) or while the clock, the journal and the
retention record disagree (`kexpr.spool.journal` rule 7a), the spend count derived again from the
journal after each observed step (`kexpr.worker.spend` rule 2), and uncollected
responses (RESPONSE_TTL).
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from kexpr.spool.journal import Journal
from kexpr.spool.lifecycle import Phase, expiry_due, step_observed
from kexpr.worker.quarantine import JOURNAL_ERRORS
from kexpr.worker.terminal import expire

if TYPE_CHECKING:
    from kexpr.worker.parts import Parts


class ClockWatch:
    """kexpr.spool.lifecycle rule 7: a wall clock that diverged from the monotonic
    one since start-up is a step; ``step`` is sticky for this process's life.
    ``steps`` counts every step: each is measured from the reading at which the
    previous one was seen, so a step back after a step forward is a second one."""

    __slots__ = ("_clock", "_mono", "_mono0", "_wall0", "step", "steps")

    def __init__(self, clock: Callable[[], dt.datetime], monotonic: Callable[[], float]) -> None:
        self._clock, self._mono = clock, monotonic
        self._wall0, self._mono0 = clock(), monotonic()
        self.step = False
        self.steps = 0

    def observe(self) -> bool:
        """True once a step was observed (then retention stops)."""
        now, mono = self._clock(), self._mono()
        if step_observed((now - self._wall0).total_seconds(), mono - self._mono0):
            if not self.step:
                print("kexpr worker: clock_step_observed", file=sys.stderr, flush=True)
            self.step = True
            self.steps += 1
            self._wall0, self._mono0 = now, mono
        return self.step


def sweep(p: Parts) -> None:
    """Terminalize what nobody can finish any more (`kexpr.spool.lifecycle.
    expiry_due`), remove uncollected responses, then apply retention
    unless a wall-clock step was observed."""
    p.clockwatch.observe()
    p.outbox.remove_litter()
    if not p.quarantine.journal_ok:
        return
    try:
        with p.journal.locked() as j:
            mono = p.mono()
            for rec in list(j.index.open_attempts()):
                if expiry_due(rec.outcome, p.attempts.held.get(rec.attempt_id), mono):
                    expire(p, rec)
            recount_after_step(p, j)
            retain(p, j)
    except JOURNAL_ERRORS as e:
        p.quarantine.failed(e)


def recount_after_step(p: Parts, j: Journal) -> None:
    """After every observed wall-clock step (caller holds the lock): the spend
    count derived again from the journal's start rows (`kexpr.worker.spend`
    rule 2), so that no row it forgot under the old reading of the clock is
    missing under the new one."""
    steps = p.clockwatch.steps
    if steps != p.spend.derived_at_step:
        p.spend.seed(j.index, p.clock(), p.mono(), step=steps)


def retain_if_due(p: Parts, j: Journal) -> None:
    """Before a new attempt: retention, if a segment in memory has aged out."""
    if j.has_expired(p.clock().date()):
        retain(p, j)


def retain(p: Parts, j: Journal) -> None:
    """Rule 7 (caller holds the lock): terminalize open attempts in expiring
    segments ``claim_expired_canonical``, then remove those segments whole.
    Never after a wall-clock step (spool.lifecycle rule 7), and only when the
    clock, the journal and the retention record agree (spool.journal rule 7a,
    `kexpr.worker.retention_guard`)."""
    if p.retention.look(j.newest_start(), step=p.clockwatch.observe()) is not None:
        return
    today = p.clock().date()
    for day in j.expired(today):
        for rec in j.open_in(day):
            held = p.attempts.held.get(rec.attempt_id)
            if held is None or not (held.live and held.phase is Phase.OPEN):
                expire(p, rec)
    removed, _ = j.remove_expired(today)
    p.counters.bump("retired_segments", len(removed))

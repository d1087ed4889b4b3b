"""The worker's housekeeping on its rescan timer: expiry (`kexpr.spool.lifecycle.
expiry_due`), retention (`kexpr.spool.journal` rule 7) unless a wall-clock step was
observed (`kexpr.spool.lifecycle` rule 7), and uncollected responses (RESPONSE_TTL).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from kexpr.spool.fsio import UnsafePath
from kexpr.spool.journal import Journal, JournalUnverified
from kexpr.spool.lifecycle import RESPONSE_TTL, Phase, expiry_due, step_observed

if TYPE_CHECKING:
    from kexpr.worker.daemon import Worker


def sweep(w: Worker) -> None:
    """Terminalize what nobody can finish any more (`kexpr.spool.lifecycle.
    expiry_due`), remove uncollected responses, then apply retention
    unless a wall-clock step was observed."""
    observe_clock(w)
    remove_litter(w)
    if not w.journal_ok:
        return
    try:
        with w.journal.locked() as j:
            mono = w._mono()
            for rec in list(j.index.open_attempts()):
                if expiry_due(rec.outcome, w._held.get(rec.attempt_id), mono):
                    w._expire(rec)
            retain(w, j)
    except (JournalUnverified, UnsafePath, OSError) as e:
        w._journal_failed(e)


def observe_clock(w: Worker) -> None:
    """kexpr.spool.lifecycle rule 7: a wall clock that diverged from the monotonic
    one since start-up is a step; retention stops for this process's life."""
    if w.clock_step:
        return
    wall = (w._clock() - w._wall0).total_seconds()
    mono = w._mono() - w._mono0
    if step_observed(wall, mono):
        w.clock_step = True
        print("kexpr worker: clock_step_observed", file=sys.stderr, flush=True)


def retain_if_due(w: Worker, j: Journal) -> None:
    """Before a new attempt: retention, if a segment in memory has aged out."""
    if j.has_expired(w._clock().date()):
        retain(w, j)


def retain(w: Worker, j: Journal) -> None:
    """Rule 7 (caller holds the lock): terminalize open attempts in expiring
    segments ``claim_expired_canonical``, then remove those segments whole.
    Never after a wall-clock step (spool.lifecycle rule 7)."""
    observe_clock(w)
    if w.clock_step:
        return
    today = w._clock().date()
    for day in j.expired(today):
        for rec in j.open_in(day):
            held = w._held.get(rec.attempt_id)
            if held is None or not (held.live and held.phase is Phase.OPEN):
                w._expire(rec)
    removed, _ = j.remove_expired(today)
    w.counters.bump("retired_segments", len(removed))


def remember_litter(w: Worker, rid: str, mono: float) -> None:
    with w._litter_lock:
        w._litter.setdefault(rid, mono + RESPONSE_TTL.total_seconds())


def remove_litter(w: Worker) -> None:
    """Responses nobody collected within RESPONSE_TTL (spool.lifecycle
    `Move.UNCOLLECTED`); a collected one is already gone."""
    mono = w._mono()
    with w._litter_lock:
        due = [rid for rid, t in w._litter.items() if mono >= t]
        for rid in due:
            del w._litter[rid]
    for rid in due:
        w._remove_response(rid)

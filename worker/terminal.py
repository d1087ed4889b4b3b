"""An attempt's end in this process: its terminal row, then forgetting it and
removing its accepted answer (spool.lifecycle `SPOOL_FILE_MOVES`:
`Move.TERMINAL_DURABLE`). Used by the attempt handler, the report journaling
and the housekeeping alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kexpr.spool.journal import AttemptRecord, Journal
from kexpr.spool.lifecycle import SELECTED_OUTCOMES, Event, Outcome

if TYPE_CHECKING:
    from kexpr.worker.parts import Parts


def finalize(p: Parts, j: Journal, rec: AttemptRecord, event: Event, outcome: Outcome) -> None:
    """Write the terminal row (caller holds the lock), then `finalized`."""
    j.append_terminal(rec, p.attempts.phase(rec.attempt_id), event, outcome, p.clock())
    finalized(p, rec.attempt_id, outcome)


def finalized(p: Parts, attempt_id: str, outcome: Outcome) -> None:
    """After the terminal row is durable: forget the attempt and remove its
    accepted response file."""
    rid = p.attempts.forget(attempt_id)
    if rid is not None:
        p.outbox.remove_accepted(rid)
    p.counters.outcome(outcome)
    if outcome not in SELECTED_OUTCOMES:
        p.counters.bump("canonical")


def expire(p: Parts, rec: AttemptRecord) -> None:
    """Terminalize an attempt nobody can finish any more (caller holds the lock)."""
    finalize(p, p.journal, rec, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL)

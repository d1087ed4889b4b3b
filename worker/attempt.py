"""The attempt handler: one claimed request to its answer (design §4, §9).

Every decision is `kexpr.spool.lifecycle`'s (`admit_request`, `answer_existing`,
`conclude`); this module does what they decide, under the journal lock. Its
functions take the `kexpr.worker.daemon.Worker` whose state they change.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import TYPE_CHECKING

from kexpr.spool.contract import judge
from kexpr.spool.fsio import UnsafePath
from kexpr.spool.journal import AppendRefused, AttemptRecord, Journal, JournalUnverified
from kexpr.spool.lifecycle import (
    SELECTED_OUTCOMES,
    Admission,
    Answer,
    Event,
    Held,
    Mode,
    Phase,
    Reply,
    admit_request,
    answer_existing,
    conclude,
    remaining_budget,
    transition,
)
from kexpr.spool.messages import (
    SPOOL_VERSION,
    ResponseStatus,
    SpoolRequest,
    SpoolResponse,
)
from kexpr.spool.outcomes import (
    OUTCOME_FOR_VERDICT,
    ConcludedOutcome,
    ContractRejection,
    Outcome,
)
from kexpr.worker.provider import ProviderResult, call_with_deadline
from kexpr.worker.status import Fault

if TYPE_CHECKING:
    from kexpr.worker.daemon import Worker


class _Quarantined(Exception):
    """Internal: the worker is in quarantine (rule 6)."""


def handle_request(
    w: Worker, req: SpoolRequest, submitted: dt.datetime, deadline: dt.datetime
) -> None:
    rid = req.request_id
    wall, mono = w._clock(), w._mono()
    admission = admit_request(submitted, deadline, wall)
    if admission is Admission.EXPIRED:
        # The shim has already given up: no row, no call, no response.
        w.counters.bump("expired_requests")
        return
    if admission is Admission.CLOCK_SKEW:
        # Its timestamps cannot be trusted against ours: canonical, no call.
        w.counters.bump("clock_skew")
        w._respond(rid, None, ResponseStatus.CANONICAL, Outcome.CLOCK_SKEW)
        return
    if not w.journal_ok:
        w._respond(rid, None, ResponseStatus.CANONICAL, Outcome.JOURNAL_UNAVAILABLE)
        return
    # The call budget: read once from the wall deadline, then counted down
    # on the monotonic clock (spool.lifecycle rule 6).
    until = mono + remaining_budget(deadline, wall)
    capsule = req.capsule
    mode = Mode(req.mode)
    try:
        with w.journal.locked() as j:
            if not w.journal_ok:
                raise _Quarantined
            w._retain_if_due(j)
            if capsule.artifact_key in j.index.sealed:
                # Attempted in a quarantined segment: never again (spool.journal).
                w.counters.bump("already_attempted")
                w._respond(
                    rid,
                    None,
                    ResponseStatus.ALREADY_ATTEMPTED,
                    Outcome.ALREADY_ATTEMPTED,
                )
                return
            rec = j.index.by_artifact.get(capsule.artifact_key)
            if rec is not None:
                _answer_existing(w, rid, rec)
                return
            rec = j.append_start(
                artifact_key=capsule.artifact_key,
                surface=capsule.surface,
                mode=mode,
                attempt_id=secrets.token_hex(16),
                started_at=w._clock(),
                deadline_at_utc=req.deadline_at_utc,
            )
            w._held[rec.attempt_id] = Held(Phase.OPEN, live=True, starter=rid, until=until)
            w.refusing = None
    except (_Quarantined, JournalUnverified, UnsafePath, OSError) as e:
        if isinstance(e, AppendRefused) and e.finding.value == Fault.SEGMENT_FULL.value:
            w.refusing = Fault.SEGMENT_FULL.value
        w._journal_failed(e)
        w._respond(rid, None, ResponseStatus.CANONICAL, Outcome.JOURNAL_UNAVAILABLE)
        return

    if w._client is None:
        result = ProviderResult(Outcome.CREDENTIAL_UNAVAILABLE, None)
    else:
        w.counters.bump("calls")
        t0 = w._mono()
        seconds = until - w._mono()
        result = call_with_deadline(w._client, capsule.to_json(), seconds=max(seconds, 0.0))
        # The call's margin, content-free (worker.histograms; issue 19 item 6).
        w.counters.record_call(
            capsule.surface, w._mono() - t0, result.outcome, result.completion_tokens
        )
    _conclude(w, rid, rec, until, result, req)


def _answer_existing(w: Worker, rid: str, rec: AttemptRecord) -> None:
    """Dedupe (caller holds the journal lock). Never a call."""
    answer = answer_existing(rec.outcome, w._held.get(rec.attempt_id), rid, w._mono())
    if answer is Answer.ALREADY_ATTEMPTED:
        w.counters.bump("already_attempted")
        w._respond(rid, None, ResponseStatus.ALREADY_ATTEMPTED, Outcome.ALREADY_ATTEMPTED)
    elif answer is Answer.IN_FLIGHT:
        # Our own call is running: the owner writes the terminal row.
        w.counters.bump("in_flight")
        w._respond(rid, None, ResponseStatus.IN_FLIGHT, Outcome.IN_FLIGHT)
    elif answer is Answer.EXPIRE_CANONICAL:
        expire(w, rec)
        w._respond(rid, None, ResponseStatus.CANONICAL, Outcome.CLAIM_EXPIRED_CANONICAL)
    # Answer.NONE: the starter itself; its answer comes from its call.


def _conclude(
    w: Worker,
    rid: str,
    rec: AttemptRecord,
    until: float,
    result: ProviderResult,
    req: SpoolRequest,
) -> None:
    try:
        accepted, outcome = _conclude_locked(w, rec, until, result, req, rid)
    except (JournalUnverified, UnsafePath, OSError) as e:
        # The terminal row could not be written: quarantine, and nothing the
        # call produced is delivered (rule 6).
        w._held.pop(rec.attempt_id, None)
        w._journal_failed(e)
        w._respond(rid, rec.attempt_id, ResponseStatus.CANONICAL, Outcome.JOURNAL_UNAVAILABLE)
        return
    if accepted is not None:
        w._publish_response(accepted, durable=True)
    elif outcome is not None:
        w._respond(rid, rec.attempt_id, ResponseStatus.CANONICAL, outcome)


def _conclude_locked(
    w: Worker,
    rec: AttemptRecord,
    until: float,
    result: ProviderResult,
    req: SpoolRequest,
    rid: str,
) -> tuple[SpoolResponse | None, ConcludedOutcome | None]:
    """Judge the one result once, under the lock (`kexpr.spool.lifecycle.conclude`).
    (accepted response, None) or (None, terminal outcome to answer with) or
    (None, None): no answer."""
    with w.journal.locked() as j:
        current = j.index.by_attempt.get(rec.attempt_id)
        if current is None or current.outcome is not None:
            return None, None  # terminalized meanwhile (retention): discard, say nothing
        late = w._mono() >= until
        failed = result.outcome  # None: content came back; it is judged next
        if late and result.outcome is not Outcome.TIMEOUT:
            w.counters.bump("late_results")
        rejected: ContractRejection | None = None
        composition = None
        if w.journal_ok and not late and failed is None:
            if result.content is None:
                failed = Outcome.INVALID_RESPONSE
            else:
                verdict = judge(req.capsule, result.content)
                judged = OUTCOME_FOR_VERDICT[verdict.verdict]
                rejected = None if judged is Outcome.ACCEPTED else judged
                composition = verdict.composition
                if rejected is None and composition is None:
                    rejected = Outcome.INVALID_RESPONSE
        c = conclude(failed, rejected, late=late, quarantined=not w.journal_ok)
        if c.reply is Reply.ACCEPTED:
            assert composition is not None
            transition(Phase.OPEN, c.event, None, rec.mode)
            w._held[rec.attempt_id] = Held(
                Phase.AWAITING_REPORT,
                live=True,
                starter=rid,
                until=until + w._grace.total_seconds(),
            )
            w._answers[rec.attempt_id] = rid
            w.counters.bump("accepted")
            accepted = SpoolResponse(
                spool_version=SPOOL_VERSION,
                request_id=rid,
                attempt_id=rec.attempt_id,
                status=ResponseStatus.ACCEPTED,
                outcome=Outcome.ACCEPTED,
                composition=composition,
            )
            return accepted, None
        assert c.outcome is not None
        _finalize(w, j, rec, c.event, c.outcome)
        return None, (c.outcome if c.reply is Reply.CANONICAL else None)


def _finalize(w: Worker, j: Journal, rec: AttemptRecord, event: Event, outcome: Outcome) -> None:
    held = w._held.get(rec.attempt_id)
    phase = held.phase if held is not None else Phase.OPEN
    j.append_terminal(rec, phase, event, outcome, w._clock())
    finalized(w, rec.attempt_id, outcome)


def finalized(w: Worker, attempt_id: str, outcome: Outcome) -> None:
    """After the terminal row is durable: forget the attempt and remove its
    accepted response file (spool.lifecycle `SPOOL_FILE_MOVES`)."""
    w._held.pop(attempt_id, None)
    rid = w._answers.pop(attempt_id, None)
    if rid is not None:
        w._remove_response(rid)
    w.counters.outcome(outcome)
    if outcome not in SELECTED_OUTCOMES:
        w.counters.bump("canonical")


def expire(w: Worker, rec: AttemptRecord) -> None:
    """Terminalize an attempt nobody can finish any more (caller holds the lock)."""
    _finalize(w, w.journal, rec, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL)

"""The attempt handler: one claimed request to its answer (design §4, §9).

Every decision is `kexpr.spool.lifecycle`'s (`admit_request`, `answer_existing`,
`conclude`); this module does what they decide, under the journal lock, on the
worker's parts (`kexpr.worker.parts`).
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from typing import TYPE_CHECKING, Final

from kexpr.spool import _journal_identity as journal_identity
from kexpr.spool.contract import judge
from kexpr.spool.contract.budget import answer_token_bound, min_answer_seconds
from kexpr.spool.fsio import Reservation, reserve
from kexpr.spool.journal import AppendRefused, AttemptRecord, Finding, JournalUnverified
from kexpr.spool.lifecycle import (
    Admission,
    Answer,
    Event,
    File,
    Held,
    Move,
    Phase,
    Reply,
    SpoolMode,
    admit_request,
    answer_existing,
    conclude,
    remaining_budget,
    transition,
)
from kexpr.spool.messages import (
    ResponseStatus,
    SpoolRequest,
    SpoolResponse,
    SpoolVersion,
)
from kexpr.spool.outcomes import (
    OUTCOME_FOR_VERDICT,
    ConcludedOutcome,
    ContractRejection,
    Outcome,
    ResponseOutcome,
)
from kexpr.worker.cooldown import Pass
from kexpr.worker.housekeeping import retain_if_due
from kexpr.worker.outbox import target
from kexpr.worker.provider import (
    CallThread,
    ProviderResult,
    call_with_deadline,
    take_call_thread,
)
from kexpr.worker.quarantine import JOURNAL_ERRORS, Quarantined
from kexpr.worker.status import Fault
from kexpr.worker.terminal import expire, finalize

if TYPE_CHECKING:
    from kexpr.worker.parts import Parts


class _Unpublished(Exception):
    """Internal: an accepted response could not be published (`_abandon` ends it)."""


# What `reserve` allocates for a request's answer before its row and its call
# The inode is what an exhausted root lacked; the bytes: a canonical
# answer is ~250 bytes, and a filesystem allocates whole blocks (4 KiB on ext4
# and tmpfs), which hold the accepted answer of every capsule the surfaces build
# (1-3 KiB). What a longer answer needs beyond is written at publication; a
# failure there is `respond_failed` and the attempt ends (`_abandon`). Kept
# small so that the reservation is never what a nearly full disk refuses first.
RESPONSE_RESERVE_BYTES: Final = 512

# What delivering an accepted answer costs after the worker has decided it is
# in time: judging and building the response under the lock, publishing it
# (write, fsync, move, directory fsync), the shim's inotify wake-up and its read
# and parse. Both sides judge against the request's deadline; an answer whose
# publication would land after ``deadline - PUBLISH_MARGIN_S`` would reach a shim
# that has stopped waiting: paid for and never used. So the call is cut there,
# and a result concluded later is discarded as late (``timeout``, counted
# ``late_for_publish``; never a second call). Measured by bench/publish_margin.py
# through the real watcher path on this project's shared 2-core machine
# (docs/performance.md, "Publish margin"): 100 ms covers the p99 of 8 answers
# published at once (the worker's call pool) with headroom for a loaded host, and
# costs the call 2.5 % of its 4 s.
PUBLISH_MARGIN_S: Final = 0.1


def handle_request(
    p: Parts, req: SpoolRequest, submitted: dt.datetime, deadline: dt.datetime
) -> None:
    rid = req.request_id
    version = req.spool_version
    wall, mono = p.clock(), p.mono()
    admission = admit_request(submitted, deadline, wall)
    if admission is Admission.EXPIRED:
        # The shim has already given up: no row, no call, no response.
        p.counters.bump("expired_requests")
        return
    if admission is Admission.CLOCK_SKEW:
        # Its timestamps cannot be trusted against ours: canonical, no call.
        p.counters.bump("clock_skew")
        p.outbox.respond(rid, None, ResponseStatus.CANONICAL, Outcome.CLOCK_SKEW, version=version)
        return
    if not p.quarantine.journal_ok:
        p.outbox.respond(
            rid, None, ResponseStatus.CANONICAL, Outcome.JOURNAL_UNAVAILABLE, version=version
        )
        return
    # The call budget: read once from the wall deadline, then counted down
    # on the monotonic clock (spool.lifecycle rule 6).
    until = mono + remaining_budget(deadline, wall)
    reservation: Reservation | None = None
    thread: CallThread | None = None
    try:
        rec, reservation, thread = _start(p, req, until)
        if rec is not None:
            _run_attempt(p, req, rec, until, reservation, thread)
    finally:
        if thread is not None:
            thread.give_back()  # a no-op once its call was handed over
        _ensure_ended(p, req, reservation)


def _ensure_ended(p: Parts, req: SpoolRequest, reservation: Reservation | None) -> None:
    """The last net, judged on the worker's state, not on how
    far the code got: an attempt this request started that is still held OPEN
    by its live owner here, once its handling is over, can only have been left
    by an exception (a normal end pops it or makes it AWAITING_REPORT). It is
    counted and ended (`_abandon`). Then the reservation is given back."""
    try:
        rid = req.request_id
        for aid in p.attempts.left_open_by(rid):
            p.counters.fault(Fault.ATTEMPT_ERROR)
            rec = p.journal.index.by_attempt.get(aid)
            if rec is None:
                p.attempts.held.pop(aid, None)
            else:
                _abandon(p, req, rec, reservation)
    finally:
        if reservation is not None:
            reservation.release()


def _start(
    p: Parts, req: SpoolRequest, until: float
) -> tuple[AttemptRecord | None, Reservation | None, CallThread | None]:
    """Dedupe, reserve, admit and write the start row, under one journal lock.
    (the new attempt, its reservation, its call thread), or (None, ...) when
    this request is answered without one. Nothing here calls."""
    rid, version, capsule = req.request_id, req.spool_version, req.capsule
    reservation: Reservation | None = None
    thread: CallThread | None = None
    try:
        with p.journal.locked() as j:
            if not p.quarantine.journal_ok:
                raise Quarantined
            retain_if_due(p, j)
            # The journal names the key its rows are written under; a request
            # under another key gets no row and no call, before dedupe (under
            # another key every artifact looks new: kexpr.spool._journal_identity).
            if not _key_proven(p, req):
                p.counters.bump("identity_mismatch")
                return _refuse(p, req, Outcome.IDENTITY_MISMATCH, reservation)
            # The artifact's identity is its key's first 32 hex, so a 64-hex key
            # an earlier release journaled and this release's 32-hex key of the
            # same artifact find each other here (`kexpr.spool.journal`). Its
            # keys under sealed identity keys (a rotation on purpose: the
            # request's ``prior_artifact_keys``, `kexpr.spool.messages`) are
            # the same artifact too.
            keys = req.dedupe_keys()
            if any(j.index.is_sealed(k) for k in keys):
                # Attempted in a quarantined segment: never again (spool.journal).
                _already_attempted(p, rid, version)
                return None, None, None
            existing = next((r for k in keys if (r := j.index.get(k)) is not None), None)
            if existing is not None:
                _answer_existing(p, rid, existing, version)
                return None, None, None
            # What publishing the answer needs is taken before the row
            # and the call (an inode and its bytes in tmp/). Without it there is
            # no row and no call: the one request is not spent on an answer that
            # could not be delivered (docs/lifecycle.md "Before the start row").
            try:
                final = target(p.root, File.ANSWER, Move.PUBLISH) / f"{rid}.json"
                reservation = reserve(p.root.tmp, final, RESPONSE_RESERVE_BYTES)
            except OSError:
                p.counters.fault(Fault.RESERVE_FAILED)
                p.outbox.respond(
                    rid,
                    None,
                    ResponseStatus.CANONICAL,
                    Outcome.ANSWER_UNPUBLISHABLE,
                    version=version,
                )
                return None, None, None
            # Admission judged again right before the start row, on
            # the monotonic clock read under the lock: a request whose time left
            # cannot hold even its minimal answer at the fastest published rate
            # gets no row and no call (the scan or the lock may have taken the
            # time since it was first seen). A capsule with no bound (the shim
            # refuses those as ineligible) cannot be shown to fit: refused too.
            bound = answer_token_bound(capsule)
            # The call is cut at deadline - PUBLISH_MARGIN_S (an answer concluded
            # later cannot reach the shim), so that is the time the answer has.
            if bound is None or until - PUBLISH_MARGIN_S - p.mono() < min_answer_seconds(bound):
                p.counters.bump("no_time_to_answer")
                return _refuse(p, req, Outcome.NO_TIME_TO_ANSWER, reservation)
            # The operator's spend bound: the start rows of the rolling hour and
            # of the UTC day, counted from the journal, against their caps; at a
            # cap no row and no call (kexpr.worker.spend). Judged before the
            # cool-down, so that a refusal here never takes the cool-down's probe.
            if not p.spend.admit(p.clock(), p.mono()):
                p.counters.bump("spend_cap_reached")
                return _refuse(p, req, Outcome.SPEND_CAP_REACHED, reservation)
            # The provider's cool-down: no row and no call for a provider that
            # keeps failing (docs/lifecycle.md, docs/budget.md).
            cooling, probe = _cooling_down(p, capsule.surface)
            if cooling:
                return _refuse(p, req, Outcome.PROVIDER_COOLING_DOWN, reservation)
            # The call's thread is started (or taken idle) before the start row:
            # at a thread limit (RLIMIT_NPROC, TasksMax=) it cannot start, and
            # after the row that would spend the artifact's one attempt with no
            # request. Here it costs only this presentation: no row, no call.
            if p.client is not None:
                try:
                    thread = take_call_thread()
                except RuntimeError:
                    p.counters.fault(Fault.THREAD_START_FAILED)
                    return _refuse(p, req, Outcome.ANSWER_UNPUBLISHABLE, reservation)
            rec = j.append_start(
                artifact_key=capsule.artifact_key,
                surface=capsule.surface,
                mode=SpoolMode(req.mode),
                attempt_id=secrets.token_hex(16),
                started_at=p.clock(),
                deadline_at_utc=req.deadline_at_utc,
                # Found under each of them too, for a request written under an
                # old key before the rotation (kexpr.spool._journal_prior).
                prior=req.prior_artifact_keys,
            )
            p.spend.started(rec.attempt_id, rec.started_at_utc, p.clock(), p.mono())
            if probe:
                p.cooldown.bind_probe(rec.attempt_id)
            p.attempts.held[rec.attempt_id] = Held(Phase.OPEN, live=True, starter=rid, until=until)
            p.quarantine.refusing = None
            return rec, reservation, thread
    except (Quarantined, *JOURNAL_ERRORS) as e:
        if thread is not None:
            thread.give_back()
        if isinstance(e, AppendRefused) and e.finding.value == Fault.SEGMENT_FULL.value:
            p.quarantine.refusing = Fault.SEGMENT_FULL.value
        p.quarantine.failed(e)
        p.outbox.respond(
            rid,
            None,
            ResponseStatus.CANONICAL,
            Outcome.JOURNAL_UNAVAILABLE,
            version=version,
            reservation=reservation,
        )
        return None, reservation, None
    except BaseException:
        # Anything else (MemoryError, a bug) is the caller's to count; the
        # reservation is not left behind. A start row already written has no
        # holder now, so the next presentation expires it (`answer_existing`).
        if reservation is not None:
            reservation.release()
        if thread is not None:
            thread.give_back()
        raise


def _key_proven(p: Parts, req: SpoolRequest) -> bool:
    """`kexpr.spool._journal_identity` rule 2 (caller holds the journal lock):
    the record adopted or moved on durably before any row, or the refusal. A
    request naming no fingerprint (an earlier release's shim) changes nothing.
    A record not in its format is the journal's failure (`JournalUnverified`)."""
    fp = req.identity_fingerprint
    if fp is None:
        return True
    try:
        recorded = journal_identity.read(p.root)
    except journal_identity.InvalidRecord as e:
        raise JournalUnverified(Finding.FIELD_FORMAT, journal_identity.NAME) from e
    verdict = journal_identity.judge(recorded, fp, req.earlier_fingerprints)
    if verdict is journal_identity.Verdict.REFUSE:
        return False
    if verdict is not journal_identity.Verdict.SAME:
        journal_identity.write(p.root, fp)
    return True


def _refuse(
    p: Parts, req: SpoolRequest, outcome: ResponseOutcome, reservation: Reservation | None
) -> tuple[None, Reservation | None, None]:
    """A request answered canonical before its start row (no row, no call): its
    answer is written into its own reservation, which the caller then holds."""
    p.outbox.respond(
        req.request_id,
        None,
        ResponseStatus.CANONICAL,
        outcome,
        version=req.spool_version,
        reservation=reservation,
    )
    return None, reservation, None


def _cooling_down(p: Parts, surface: str) -> tuple[bool, bool]:
    """The cool-down's admission (kexpr.worker.cooldown; caller holds the journal
    lock), after the fastest-rate rule and the spend caps: (refused, whether this
    request's call is the cool-down's probe). A refusal is counted for its surface."""
    admitted = p.cooldown.admit(p.mono())
    if admitted is Pass.REFUSE:
        p.counters.refused(Outcome.PROVIDER_COOLING_DOWN, surface)
        return True, False
    return False, admitted is Pass.PROBE


def _run_attempt(
    p: Parts,
    req: SpoolRequest,
    rec: AttemptRecord,
    until: float,
    reservation: Reservation | None,
    thread: CallThread | None = None,
) -> None:
    """After the start row: the one call and its conclusion. Whatever is raised here (``RuntimeError("can't start new thread")`` at a
    thread limit, ``MemoryError``, a bug), the attempt does not stay live: it
    ends in a terminal row, or in its durable "answered" state if its accepted
    response is already published, and the fault is counted."""
    try:
        if p.client is None:
            result = ProviderResult(Outcome.CREDENTIAL_UNAVAILABLE, None)
            p.cooldown.give_back(p.mono(), rec.attempt_id)
        else:
            t0 = p.mono()
            # Nothing that comes back after deadline - margin can be delivered.
            seconds = until - PUBLISH_MARGIN_S - t0
            capsule = req.capsule
            result = call_with_deadline(
                p.client, capsule.to_json(), seconds=max(seconds, 0.0), thread=thread
            )
            if result.sent:
                # Only a request that left the process is a call: not one
                # whose deadline had passed, nor one whose thread could not start; and
                # only such a call has a margin to record, content-free
                # (worker.histograms).
                took, now = p.mono() - t0, p.mono()
                p.counters.bump("calls")
                p.counters.record_call(
                    capsule.surface, took, result.outcome, result.completion_tokens
                )
                p.counters.record_tokens(
                    capsule.surface, result.prompt_tokens, result.completion_tokens
                )
                # The provider's health, from the call's outcome alone.
                p.cooldown.observe(now, rec.attempt_id, result.outcome)
            else:
                p.cooldown.give_back(p.mono(), rec.attempt_id)
        _conclude(p, req.request_id, rec, until, result, req, reservation)
    except Exception as e:  # noqa: BLE001 -- counted and ended below, never left live
        if not isinstance(e, _Unpublished):  # already counted: respond_failed
            p.counters.fault(Fault.ATTEMPT_ERROR)
        _abandon(p, req, rec, reservation)


def _abandon(
    p: Parts, req: SpoolRequest, rec: AttemptRecord, reservation: Reservation | None
) -> None:
    """End an attempt whose handling raised. Answered (its
    accepted response is in responses/, the durable AWAITING_REPORT): left to
    its report window. Otherwise ``claim_expired_canonical`` (the EXPIRE edge
    from OPEN: no owner can finish it) and the starter answered canonical. If
    even that row cannot be written, this process forgets the attempt, so the
    next presentation expires it (`answer_existing`: open, no holder) and is
    publishable; never ``in_flight``."""
    rid = req.request_id
    answered = False
    try:
        answered = p.attempts.answers.get(rec.attempt_id) == rid and os.path.lexists(
            p.root.responses / f"{rid}.json"
        )
        if answered:
            return
        with p.journal.locked() as j:
            current = j.index.by_attempt.get(rec.attempt_id)
            if current is not None and current.outcome is None:
                finalize(p, j, current, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL)
                p.outbox.respond(
                    rid,
                    rec.attempt_id,
                    ResponseStatus.CANONICAL,
                    Outcome.CLAIM_EXPIRED_CANONICAL,
                    version=req.spool_version,
                    reservation=reservation,
                )
    except JOURNAL_ERRORS as e:
        p.quarantine.failed(e)
    except Exception:  # noqa: BLE001 -- the fault that brought us here is already counted
        # (the caller's ATTEMPT_ERROR or respond_failed); a second failure while ending
        # the attempt is the same fault, and the finally below lets the next
        # presentation expire it.
        pass
    finally:
        if not answered:
            p.attempts.forget(rec.attempt_id)


def _already_attempted(p: Parts, rid: str, version: SpoolVersion) -> None:
    p.counters.bump("already_attempted")
    p.outbox.respond(
        rid, None, ResponseStatus.ALREADY_ATTEMPTED, Outcome.ALREADY_ATTEMPTED, version=version
    )


def _answer_existing(p: Parts, rid: str, rec: AttemptRecord, version: SpoolVersion) -> None:
    """Dedupe (caller holds the journal lock). Never a call."""
    answer = answer_existing(rec.outcome, p.attempts.held.get(rec.attempt_id), rid, p.mono())
    if answer is Answer.ALREADY_ATTEMPTED:
        _already_attempted(p, rid, version)
    elif answer is Answer.IN_FLIGHT:
        # Our own call is running: the owner writes the terminal row.
        p.counters.bump("in_flight")
        p.outbox.respond(rid, None, ResponseStatus.IN_FLIGHT, Outcome.IN_FLIGHT, version=version)
    elif answer is Answer.EXPIRE_CANONICAL:
        expire(p, rec)
        p.outbox.respond(
            rid,
            None,
            ResponseStatus.CANONICAL,
            Outcome.CLAIM_EXPIRED_CANONICAL,
            version=version,
        )
    # Answer.NONE: the starter itself; its answer comes from its call.


def _conclude(
    p: Parts,
    rid: str,
    rec: AttemptRecord,
    until: float,
    result: ProviderResult,
    req: SpoolRequest,
    reservation: Reservation | None,
) -> None:
    version = req.spool_version
    try:
        accepted, outcome = _conclude_locked(p, rec, until, result, req, rid)
    except JOURNAL_ERRORS as e:
        # The terminal row could not be written: quarantine, and nothing the
        # call produced is delivered (rule 6).
        p.attempts.held.pop(rec.attempt_id, None)
        p.quarantine.failed(e)
        p.outbox.respond(
            rid,
            rec.attempt_id,
            ResponseStatus.CANONICAL,
            Outcome.JOURNAL_UNAVAILABLE,
            version=version,
            reservation=reservation,
        )
        return
    if accepted is not None:
        if not p.outbox.publish(accepted, durable=True, reservation=reservation):
            # Not published, so not answered (rule 3): the attempt must not
            # wait for a report that cannot come; it ends now.
            p.attempts.answers.pop(rec.attempt_id, None)
            raise _Unpublished
    elif outcome is not None:
        p.outbox.respond(
            rid,
            rec.attempt_id,
            ResponseStatus.CANONICAL,
            outcome,
            version=version,
            reservation=reservation,
        )


def _conclude_locked(
    p: Parts,
    rec: AttemptRecord,
    until: float,
    result: ProviderResult,
    req: SpoolRequest,
    rid: str,
) -> tuple[SpoolResponse | None, ConcludedOutcome | None]:
    """Judge the one result once, under the lock (`kexpr.spool.lifecycle.conclude`).
    (accepted response, None) or (None, terminal outcome to answer with) or
    (None, None): no answer."""
    with p.journal.locked() as j:
        current = j.index.by_attempt.get(rec.attempt_id)
        if current is None or current.outcome is not None:
            return None, None  # terminalized meanwhile (retention): discard, say nothing
        now = p.mono()
        # Late: its publication could not reach the shim in time (PUBLISH_MARGIN_S).
        late = now >= until - PUBLISH_MARGIN_S
        failed = result.outcome  # None: content came back; it is judged next
        if late and result.outcome is not Outcome.TIMEOUT:
            p.counters.bump("late_results")
            if now < until and result.outcome is None:
                p.counters.bump("late_for_publish")
        rejected: ContractRejection | None = None
        composition = None
        if p.quarantine.journal_ok and not late and failed is None:
            if result.content is None:
                failed = Outcome.INVALID_RESPONSE
            else:
                verdict = judge(req.capsule, result.content)
                judged = OUTCOME_FOR_VERDICT[verdict.verdict]
                rejected = None if judged is Outcome.ACCEPTED else judged
                composition = verdict.composition
                if rejected is None and composition is None:
                    rejected = Outcome.INVALID_RESPONSE
        c = conclude(failed, rejected, late=late, quarantined=not p.quarantine.journal_ok)
        if c.reply is Reply.ACCEPTED:
            assert composition is not None
            transition(Phase.OPEN, c.event, None, rec.mode)
            p.attempts.held[rec.attempt_id] = Held(
                Phase.AWAITING_REPORT,
                live=True,
                starter=rid,
                until=until + p.grace.total_seconds(),
            )
            p.attempts.answers[rec.attempt_id] = rid
            p.counters.bump("accepted")
            p.counters.record_style(composition)
            accepted = SpoolResponse(
                spool_version=req.spool_version,
                request_id=rid,
                attempt_id=rec.attempt_id,
                status=ResponseStatus.ACCEPTED,
                outcome=Outcome.ACCEPTED,
                composition=composition,
            )
            return accepted, None
        assert c.outcome is not None
        finalize(p, j, rec, c.event, c.outcome)
        return None, (c.outcome if c.reply is Reply.CANONICAL else None)

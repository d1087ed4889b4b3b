"""One attempt's lifecycle and its spool files' lifecycle, stated once (design §4, §5).

Pure: no I/O, no clock, no randomness. Every decision below is a function of
(the journal's record, what the worker durably knows from the spool, the
caller's monotonic and wall time, who is asking). The worker, the journal and the
coordinator call these functions; none of them re-derives a phase by trying
transitions. ``docs/lifecycle.md`` draws both tables.

Rules:

1. The attempt lifecycle is `TRANSITIONS`: a missing key is an illegal step
   (`IllegalTransition`), never a silent no-op. FINALIZED has no outgoing edge:
   a terminal attempt stays terminal, nothing retries it.
2. Which terminal outcome an event may carry is `EVENT_OUTCOMES`, narrowed by the
   mode (`MODE_FORBIDS`). The journal verifies a terminal row against
   `LEGAL_TERMINALS`, which is computed from those two tables (no trial).
3. The journal holds only OPEN and FINALIZED (its 13 fields are fixed by
   design §5). AWAITING_REPORT is held durably by the spool instead: an attempt whose
   accepted response file (``responses/<request_id>.json`` naming the attempt,
   published with fsync) is still there is *answered*; the worker removes that
   file only once the attempt's terminal row is durable (`SPOOL_FILE_MOVES`). So
   a worker that inherits an open attempt from a dead predecessor classifies it
   with `inherited_phase`: *answered* -> AWAITING_REPORT (its report window runs
   on), *lost* (no accepted response: the call died with the worker) ->
   terminalized ``claim_expired_canonical`` with no call, ever. A report in
   ``reports/`` for an inherited open attempt is stronger evidence than either
   (the host published; an older shim deleted the accepted response on read):
   it is looked at first and journaled at start-up (`Inherited.REPORTED`).
4. ``in_flight`` means "a live owner exists": it is answered only while the
   process that started the attempt is alive and holds it OPEN, and never to the
   request that started it (`answer_existing`).
5. A report is removed only after its terminal row is durable, or once it is
   judged inadmissible (`report_admissible`), never merely because it was read.
6. Time: every duration (call budget, lateness, report window, litter) is
   measured on the deciding process's monotonic clock, anchored when that
   process first sees the attempt or file. Wall time only stamps rows. A wall
   timestamp written by another process (a request's submission and deadline) is
   trusted within `CLOCK_SKEW` of this process's wall clock; outside it the
   request is answered canonical with no call (`admit_request`).
7. A process that has seen its wall clock diverge from its monotonic clock by
   more than `step_tolerance` has observed a wall-clock *step*. From then on it
   never runs retention (which is the only thing that dates by wall time what
   to forget), and the journal never removes the segment that holds its newest
   row (`kexpr.spool.journal`). A step is sticky for the life of the process.
8. The spool's files move only as `SPOOL_FILE_MOVES` says: (file, move) ->
   (from, to, the one actor allowed). The table is the gate the code passes
   through: the worker and the shim take every move's directories from
   `kexpr.spool.layout.DataRoot.route` (which reads it), so a move it lacks, or
   one made by the other side, raises `IllegalMove` instead of happening.

The outcome words (`Outcome`, re-exported here) and each role's subset of them
are `kexpr.spool.outcomes`.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kexpr.spool.outcomes import (
    CALL_FAILURES,
    REPORT_OUTCOMES,
    TERMINAL_OUTCOMES,
    ConcludedOutcome,
    ContractRejection,
    Outcome,
    ProviderFailure,
)

# The spool protocol's wait: a request's deadline is at most this after submission.
MAX_WAIT: Final = dt.timedelta(seconds=4)
# Rule 6: the shim and the worker read one host clock; a few seconds at most.
CLOCK_SKEW: Final = dt.timedelta(seconds=2)
# An answered attempt whose shim never reports is terminalized this long after
# its deadline (design §4). Long enough for a host's durable write + Telegram edit.
COMMIT_GRACE: Final = dt.timedelta(minutes=10)
# A response that is not an accepted one, or whose attempt is terminal, is removed
# by the worker this long (its monotonic clock) after it wrote or first saw it:
# the shim stops waiting at the request's deadline, at most MAX_WAIT after
# submission, and the two wall clocks agree within CLOCK_SKEW.
RESPONSE_TTL: Final = MAX_WAIT + CLOCK_SKEW + CLOCK_SKEW
# Rule 7: divergence between the wall and the monotonic clock beyond this is a
# step. NTP slews at most 500 ppm; the base absorbs scheduling and a leap second.
STEP_BASE_S: Final = 5.0
STEP_SLEW: Final = 0.0005


class SpoolMode(enum.StrEnum):
    """The mode a request and a journal row carry (the config's ``disabled``
    never reaches the spool: `gateway_shim.config.Mode`)."""

    SHADOW = "shadow"
    ENABLED = "enabled"


SELECTED_OUTCOMES: Final = frozenset({Outcome.SELECTED, Outcome.SHADOW_SELECTED})


class Phase(enum.StrEnum):
    """Where an attempt is. The journal shows OPEN and FINALIZED; AWAITING_REPORT
    is carried by the accepted response file in ``responses/`` (rule 3)."""

    OPEN = "open"
    AWAITING_REPORT = "awaiting_report"
    FINALIZED = "finalized"


class Event(enum.StrEnum):
    START = "start"
    CALL_ACCEPTED = "call_accepted"  # contract accepted the content; response published
    CALL_FAILED = "call_failed"  # credential/provider/timeout/parse/contract failure
    REPORT = "report"  # the shim's report of what the host did
    EXPIRE = "expire"  # no owner can finish it any more (lost, grace over, retention)


# Rule 1: one transition table, looked up, never tried.
TRANSITIONS: Final[Mapping[tuple[Phase | None, Event], Phase]] = {
    (None, Event.START): Phase.OPEN,
    (Phase.OPEN, Event.CALL_ACCEPTED): Phase.AWAITING_REPORT,
    (Phase.OPEN, Event.CALL_FAILED): Phase.FINALIZED,
    (Phase.OPEN, Event.EXPIRE): Phase.FINALIZED,
    (Phase.AWAITING_REPORT, Event.REPORT): Phase.FINALIZED,
    (Phase.AWAITING_REPORT, Event.EXPIRE): Phase.FINALIZED,
}

# Rule 2: which terminal outcome each event may carry.
EVENT_OUTCOMES: Final[Mapping[Event, frozenset[Outcome]]] = {
    Event.CALL_FAILED: CALL_FAILURES,
    Event.REPORT: REPORT_OUTCOMES,
    Event.EXPIRE: frozenset({Outcome.CLAIM_EXPIRED_CANONICAL}),
}

# A shadow attempt ends shadow_selected when selected; an enabled one selected.
MODE_FORBIDS: Final[Mapping[SpoolMode, frozenset[Outcome]]] = {
    SpoolMode.SHADOW: frozenset(
        {Outcome.SELECTED, Outcome.COMMIT_FAILED, Outcome.PUBLICATION_FAILED}
    ),
    SpoolMode.ENABLED: frozenset({Outcome.SHADOW_SELECTED}),
}


class IllegalTransition(Exception):
    def __init__(self, phase: Phase | None, event: Event, outcome: Outcome | None) -> None:
        super().__init__(f"{phase}:{event}:{outcome}")
        self.phase, self.event, self.outcome = phase, event, outcome


def transition(
    phase: Phase | None, event: Event, outcome: Outcome | None, mode: SpoolMode
) -> Phase:
    """The one place a lifecycle step is judged."""
    nxt = TRANSITIONS.get((phase, event))
    if nxt is None:
        raise IllegalTransition(phase, event, outcome)
    allowed = EVENT_OUTCOMES.get(event)
    if allowed is not None and (outcome not in allowed or outcome in MODE_FORBIDS[mode]):
        raise IllegalTransition(phase, event, outcome)
    return nxt


# Rule 2: a terminal row (mode, outcome) is legal iff some edge of the table into
# FINALIZED carries that outcome in that mode. Read off the tables, not tried.
LEGAL_TERMINALS: Final[frozenset[tuple[SpoolMode, Outcome]]] = frozenset(
    (mode, outcome)
    for (_, event), nxt in TRANSITIONS.items()
    if nxt is Phase.FINALIZED
    for mode in SpoolMode
    for outcome in EVENT_OUTCOMES.get(event, frozenset())
    if outcome not in MODE_FORBIDS[mode]
)


# ------------------------------------------------------------------ the attempt


@dataclass(frozen=True, slots=True)
class Held:
    """What one worker process knows of an open attempt (never persisted: after a
    restart it is rebuilt from the journal and the spool, rule 3).

    ``live``: this process started it (its call is its own). ``starter``: the
    request that started it (None when inherited). ``until``: on this process's
    monotonic clock, the end of the call budget (OPEN) or of the report window
    (AWAITING_REPORT)."""

    phase: Phase
    live: bool
    starter: str | None
    until: float


class Answer(enum.StrEnum):
    """What a request for an artifact that already has an attempt gets."""

    IN_FLIGHT = "in_flight"  # a live owner exists; not publishable (rule 4)
    ALREADY_ATTEMPTED = "already_attempted"  # canonical, publication permitted
    EXPIRE_CANONICAL = "expire_canonical"  # terminalize claim_expired_canonical, answer canonical
    NONE = (
        "none"  # the starter asking again while its own call runs: its answer comes from the call
    )


def answer_existing(
    outcome: Outcome | None, held: Held | None, asker: str, mono_now: float
) -> Answer:
    """Dedupe: the journal's record (``outcome``, None while open), this process's
    knowledge of it (``held``) and the asking request. Never a call."""
    if outcome is not None:
        return Answer.ALREADY_ATTEMPTED
    if held is None:
        # Open in the journal, unknown to this process: no owner can finish it.
        return Answer.EXPIRE_CANONICAL
    if held.phase is Phase.AWAITING_REPORT:
        return Answer.ALREADY_ATTEMPTED
    if held.phase is Phase.OPEN and held.live:
        return Answer.NONE if asker == held.starter else Answer.IN_FLIGHT
    return Answer.EXPIRE_CANONICAL


class Inherited(enum.StrEnum):
    """An open attempt a dead worker left (rule 3), known from the spool."""

    REPORTED = "reported"  # a report for it is in reports/: the host published
    ANSWERED = "answered"  # its accepted response is in responses/
    LOST = "lost"  # its call died with the worker


def inherited_phase(answered: bool, reported: bool = False) -> Inherited:
    """Rule 3, evidence first: a report on disk for an open
    attempt proves the host published, whatever responses/ holds. A shim of
    the older protocol (``kexpr-spool-v1``) deletes the accepted response when
    it reads it, so for its attempts the report is the only evidence left; it
    is looked at before anything may expire an inherited attempt."""
    if reported:
        return Inherited.REPORTED
    return Inherited.ANSWERED if answered else Inherited.LOST


def remaining_budget(deadline: dt.datetime, wall_now: dt.datetime) -> float:
    """Seconds of a request's deadline left, read once when first seen and then
    counted down on the monotonic clock; never more than MAX_WAIT (rule 6)."""
    left = (deadline - wall_now).total_seconds()
    return min(max(left, 0.0), MAX_WAIT.total_seconds())


def held_inherited(
    kind: Inherited, deadline: dt.datetime, wall_now: dt.datetime, mono_now: float, grace: float
) -> Held | None:
    """A worker's knowledge of an inherited attempt, anchored now: an answered one
    awaits its report until its deadline + COMMIT_GRACE, read once from the wall
    clock and bounded by MAX_WAIT + COMMIT_GRACE, then counted on the monotonic
    clock; a lost one has no holder (it is expired at once)."""
    if kind is Inherited.LOST:
        return None
    if kind is Inherited.REPORTED:
        # The report was written while no worker ran (an upgrade, a restart):
        # its lateness is the worker's, not the host's. Its window opens now.
        return Held(Phase.AWAITING_REPORT, live=False, starter=None, until=mono_now + grace)
    left = (deadline - wall_now).total_seconds() + grace
    return Held(
        Phase.AWAITING_REPORT,
        live=False,
        starter=None,
        until=mono_now + min(max(left, 0.0), MAX_WAIT.total_seconds() + grace),
    )


def expiry_due(outcome: Outcome | None, held: Held | None, mono_now: float) -> bool:
    """Must the sweep terminalize this attempt ``claim_expired_canonical`` now?"""
    if outcome is not None:
        return False
    if held is None:
        return True  # lost, or open with no holder in this process
    if held.phase is Phase.OPEN and held.live:
        return False  # our own call is running; it concludes by its deadline
    return mono_now >= held.until


class Inadmissible(enum.StrEnum):
    """Why a report is removed without a row (enum only)."""

    UNKNOWN_ATTEMPT = "unknown_attempt"
    TERMINAL = "terminal"
    NOT_AWAITING = "not_awaiting"
    OUTSIDE_GRACE = "outside_grace"
    WRONG_OUTCOME = "wrong_outcome"


def report_admissible(
    outcome: Outcome | None,
    mode: SpoolMode | None,
    held: Held | None,
    reported: Outcome,
    mono_now: float,
) -> Inadmissible | None:
    """None if the report may be journaled now as ``reported``; else the reason
    it is removed unjournaled (rule 5). ``outcome``/``mode`` are the journal's
    record (``mode`` None: no such attempt)."""
    if mode is None:
        return Inadmissible.UNKNOWN_ATTEMPT
    if outcome is not None:
        return Inadmissible.TERMINAL
    if held is None or held.phase is not Phase.AWAITING_REPORT:
        return Inadmissible.NOT_AWAITING
    if mono_now >= held.until:
        return Inadmissible.OUTSIDE_GRACE
    if reported not in EVENT_OUTCOMES[Event.REPORT] or reported in MODE_FORBIDS[mode]:
        return Inadmissible.WRONG_OUTCOME
    return None


class Reply(enum.StrEnum):
    """What the request that started an attempt is answered when its call ends."""

    ACCEPTED = "accepted"
    CANONICAL = "canonical"
    NONE = "none"  # past the deadline: the shim has stopped waiting


@dataclass(frozen=True, slots=True)
class Conclusion:
    event: Event
    outcome: ConcludedOutcome | None  # None: AWAITING_REPORT (no terminal row yet)
    reply: Reply


def conclude(
    failed: ProviderFailure | None,
    rejected: ContractRejection | None,
    *,
    late: bool,
    quarantined: bool,
) -> Conclusion:
    """The one result of the one call, judged once.

    ``failed``: the call's failure as a terminal outcome (None: content came
    back); ``rejected``: the contract's refusal of that content (None: accepted);
    ``late``: the monotonic budget was spent; ``quarantined``: the worker entered
    quarantine meanwhile (nothing the call produced is delivered)."""
    if quarantined:
        return Conclusion(Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, Reply.CANONICAL)
    if late:
        return Conclusion(Event.CALL_FAILED, Outcome.TIMEOUT, Reply.NONE)
    if failed is not None:
        # A call that timed out BEFORE the deadline (the SDK's 3 s read timeout) is
        # answered canonical like any failure: the shim is still waiting, and
        # saying so now spares the host the rest of its 4 s wait.
        return Conclusion(Event.CALL_FAILED, failed, Reply.CANONICAL)
    if rejected is not None:
        return Conclusion(Event.CALL_FAILED, rejected, Reply.CANONICAL)
    return Conclusion(Event.CALL_ACCEPTED, None, Reply.ACCEPTED)


class Admission(enum.StrEnum):
    """A claimed request's timestamps against this process's wall clock (rule 6)."""

    ADMIT = "admit"
    EXPIRED = "expired"  # its deadline has passed: no row, no call, no answer
    CLOCK_SKEW = "clock_skew"  # outside CLOCK_SKEW: canonical, no row, no call


def admit_request(
    submitted: dt.datetime, deadline: dt.datetime, wall_now: dt.datetime
) -> Admission:
    """``deadline`` is at most MAX_WAIT after ``submitted`` (the parser checks)."""
    age = wall_now - submitted
    if age < -CLOCK_SKEW or age > MAX_WAIT + CLOCK_SKEW:
        return Admission.CLOCK_SKEW  # from this clock's future, or from long ago
    if wall_now >= deadline:
        return Admission.EXPIRED
    return Admission.ADMIT


def step_observed(wall_elapsed_s: float, mono_elapsed_s: float) -> bool:
    """Rule 7: has the wall clock stepped since this process's anchor?"""
    return abs(wall_elapsed_s - mono_elapsed_s) > STEP_BASE_S + STEP_SLEW * mono_elapsed_s


# ------------------------------------------------------------ the spool's files


class File(enum.StrEnum):
    REQUEST = "request"  # requests/<request_id>.json, then claimed/<request_id>.json
    ANSWER = "answer"  # responses/<request_id>.json that is not accepted
    ACCEPTED_ANSWER = "accepted_answer"  # responses/<request_id>.json, accepted: rule 3
    REPORT = "report"  # reports/<attempt_id>.json


class Where(enum.StrEnum):
    REQUESTS = "requests"
    CLAIMED = "claimed"
    RESPONSES = "responses"
    REPORTS = "reports"
    REMOVED = "removed"


class Move(enum.StrEnum):
    PUBLISH = "publish"  # tmp/ -> place, atomically (link; never replaces)
    CLAIM = "claim"  # rename requests/ -> claimed/: exactly one claimer wins
    HANDLED = "handled"  # claimed and answered, or unreadable/invalid: its file goes
    REFUSED = "refused"  # the claim rename failed: answered canonical, removed unclaimed
    COLLECT = "collect"  # the shim read it
    UNCOLLECTED = "uncollected"  # RESPONSE_TTL after the worker wrote or first saw it
    TERMINAL_DURABLE = "terminal_durable"  # the attempt's terminal row is fsynced
    # report_admissible gave a reason, or the file is no report (unreadable,
    # malformed, misnamed). A newer protocol's report is kept: it makes no move.
    INADMISSIBLE = "inadmissible"


class Actor(enum.StrEnum):
    SHIM = "shim"
    WORKER = "worker"


# The spool files' lifecycle: (file, move) -> (from, to, the only actor allowed).
# It is the gate, not a description: every spool file move takes its directories
# from `kexpr.spool.layout.DataRoot.route`, which reads this table, so a move
# missing here (or made by the other actor) raises `IllegalMove`.
SPOOL_FILE_MOVES: Final[Mapping[tuple[File, Move], tuple[Where | None, Where, Actor]]] = {
    (File.REQUEST, Move.PUBLISH): (None, Where.REQUESTS, Actor.SHIM),
    (File.REQUEST, Move.CLAIM): (Where.REQUESTS, Where.CLAIMED, Actor.WORKER),
    (File.REQUEST, Move.HANDLED): (Where.CLAIMED, Where.REMOVED, Actor.WORKER),
    (File.REQUEST, Move.REFUSED): (Where.REQUESTS, Where.REMOVED, Actor.WORKER),
    (File.ANSWER, Move.PUBLISH): (None, Where.RESPONSES, Actor.WORKER),
    (File.ANSWER, Move.COLLECT): (Where.RESPONSES, Where.REMOVED, Actor.SHIM),
    (File.ANSWER, Move.UNCOLLECTED): (Where.RESPONSES, Where.REMOVED, Actor.WORKER),
    # Published with fsync before the shim can see it; the shim reads it and
    # leaves it: it is the durable AWAITING_REPORT of its attempt (rule 3).
    (File.ACCEPTED_ANSWER, Move.PUBLISH): (None, Where.RESPONSES, Actor.WORKER),
    (File.ACCEPTED_ANSWER, Move.TERMINAL_DURABLE): (Where.RESPONSES, Where.REMOVED, Actor.WORKER),
    (File.ACCEPTED_ANSWER, Move.UNCOLLECTED): (Where.RESPONSES, Where.REMOVED, Actor.WORKER),
    (File.REPORT, Move.PUBLISH): (None, Where.REPORTS, Actor.SHIM),
    (File.REPORT, Move.TERMINAL_DURABLE): (Where.REPORTS, Where.REMOVED, Actor.WORKER),
    (File.REPORT, Move.INADMISSIBLE): (Where.REPORTS, Where.REMOVED, Actor.WORKER),
}


class IllegalMove(Exception):
    def __init__(self, file: File, move: Move, actor: Actor) -> None:
        super().__init__(f"{file}:{move}:{actor}")


def file_route(file: File, move: Move, actor: Actor) -> tuple[Where | None, Where]:
    """Where ``file`` is and where it goes when ``actor`` makes ``move``
    (`kexpr.spool.layout.DataRoot.route` turns them into directories);
    `IllegalMove` otherwise."""
    row = SPOOL_FILE_MOVES.get((file, move))
    if row is None or row[2] is not actor:
        raise IllegalMove(file, move, actor)
    return row[0], row[1]


def file_move(file: File, move: Move, actor: Actor) -> Where:
    """Where ``file`` goes when ``actor`` makes ``move``; `IllegalMove` otherwise."""
    return file_route(file, move, actor)[1]


def answer_file(accepted: bool, attempt_open: bool) -> File:
    """How the worker treats a response file it finds in responses/: an accepted
    one for an open attempt is that attempt's durable phase; anything else is
    litter once RESPONSE_TTL has passed."""
    return File.ACCEPTED_ANSWER if accepted and attempt_open else File.ANSWER


__all__ = [
    "CLOCK_SKEW",
    "COMMIT_GRACE",
    "EVENT_OUTCOMES",
    "LEGAL_TERMINALS",
    "MAX_WAIT",
    "MODE_FORBIDS",
    "RESPONSE_TTL",
    "SELECTED_OUTCOMES",
    "SPOOL_FILE_MOVES",
    "TERMINAL_OUTCOMES",
    "TRANSITIONS",
    "Actor",
    "Admission",
    "Answer",
    "Conclusion",
    "Event",
    "File",
    "Held",
    "IllegalMove",
    "IllegalTransition",
    "Inadmissible",
    "Inherited",
    "SpoolMode",
    "Move",
    "Outcome",
    "Phase",
    "Reply",
    "Where",
    "admit_request",
    "answer_existing",
    "answer_file",
    "conclude",
    "expiry_due",
    "file_move",
    "file_route",
    "held_inherited",
    "inherited_phase",
    "remaining_budget",
    "report_admissible",
    "step_observed",
    "transition",
]

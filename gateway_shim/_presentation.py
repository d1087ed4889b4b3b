"""One presentation's steps as a table, and the values that carry it.

A presentation goes through at most three steps (the coordinator's rules 1, 2,
4): it is SET UP (the host's arguments read, parsed, judged; nothing written or
only the data root's key), PUBLISHED (a request written, its waiter
registered) and CONCLUDED (an answer read and judged). It ends exactly once, at
one step, with one outcome; which outcomes may end which step is data here
(`ENDS`), the way `kexpr.spool.lifecycle` holds the worker's transitions, and
`Recorder.end` refuses any other (`IllegalEnd`, a programming error the last
guard turns into ``spool_unavailable``). `ZERO_FILES` are the set-up ends that
come before the data root is touched (rule 2); `RECHECKED` the outcomes after which the data root's
identity is checked again (rule 10).

The carriers: `Call` (the host's call instant), `Recorder` (how the
presentation ends: candidate, telemetry, debug record), `Pending` (a published
request and what concluding it needs) and `Wait` (how a wait ended without
data).
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from gateway_shim._candidate import PresentationCandidate, build_candidate
from gateway_shim.config import SURFACE_SWITCH, Mode
from gateway_shim.surfaces import CanonicalSurface, RenderedBody
from gateway_shim.telemetry import Telemetry
from kexpr.spool import log
from kexpr.spool.contract import Capsule
from kexpr.spool.outcomes import RESPONSE_OUTCOMES, CandidateOutcome, Outcome

# Content-free records (spool.log); silent unless the host configures `kexpr`.
_log = log.logger("shim")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Step(enum.StrEnum):
    """Where a presentation is when it ends."""

    SET_UP = "set_up"
    PUBLISHED = "published"
    CONCLUDED = "concluded"


def _outcomes(*words: Outcome) -> frozenset[Outcome]:
    return frozenset(words)


# Before the data root is touched: nothing written, nothing started (rule 2).
ZERO_FILES: Final = _outcomes(
    Outcome.CLOSED, Outcome.DISABLED, Outcome.INELIGIBLE, Outcome.NOTHING_TO_STYLE
)

# The outcomes that may end each step.
# Every `CandidateOutcome` ends some step (tests/shim/test_presentation_steps.py).
ENDS: Final[Mapping[Step, frozenset[Outcome]]] = {
    # No request written: the zero-file ends, what the data root, the identity or
    # the heartbeat refused, and a set-up that took the whole wait.
    Step.SET_UP: ZERO_FILES
    | _outcomes(
        Outcome.IDENTITY_MISMATCH,
        Outcome.SPOOL_UNAVAILABLE,
        Outcome.WORKER_UNAVAILABLE,
        Outcome.TIMEOUT,
    ),
    # A request written and no answer read: the deadline, `close`, or the guard.
    Step.PUBLISHED: _outcomes(Outcome.TIMEOUT, Outcome.CLOSED, Outcome.SPOOL_UNAVAILABLE),
    # An answer read: the worker's word, or the shim's judgement of it.
    Step.CONCLUDED: RESPONSE_OUTCOMES
    | _outcomes(
        Outcome.SHADOW_SELECTED,
        Outcome.VALIDATION_REJECTED,
        Outcome.INVALID_RESPONSE,
        Outcome.TIMEOUT,
        Outcome.SPOOL_UNAVAILABLE,
    ),
}

# Outcomes after which the data root's identity is checked again (rule 10).
# ``worker_unavailable`` too: a data root replaced at its path may hold a serving
# worker's heartbeat while this coordinator still walks the old one.
RECHECKED: Final = _outcomes(Outcome.TIMEOUT, Outcome.SPOOL_UNAVAILABLE, Outcome.WORKER_UNAVAILABLE)


class IllegalEnd(Exception):
    """An end `ENDS` does not give its step: a programming error."""

    def __init__(self, step: Step, outcome: Outcome) -> None:
        super().__init__(f"{step.value}:{outcome.value}")
        self.step = step
        self.outcome = outcome


class Wait(enum.Enum):
    """How a wait ended without data."""

    NOT_YET = "not_yet"
    EXPIRED = "expired"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Call:
    """The instant the host called ``present_*`` / ``apresent_*`` (rule 4): the
    artifact's one deadline is this plus `MAX_WAIT`, on the monotonic clock for the
    wait and on the wall clock in the request."""

    mono: float
    wall: dt.datetime


@dataclass(frozen=True, slots=True)
class Recorder:
    """How one presentation ends (rules 1, 6): `end` checks the step's table,
    builds its candidate, emits its telemetry event and writes its debug record.
    `SetUp.begin` makes one per presentation from what it read of the host's
    arguments."""

    surface_version: str
    binding: str
    # The host's body untouched ("" for a body that is not a str: rule 9).
    host_body: str
    mode: Mode
    # The host's call instant on the monotonic clock: the latency counts from it.
    called: float
    mono: Callable[[], float]
    telemetry: Telemetry

    def end(
        self,
        step: Step,
        outcome: CandidateOutcome,
        *,
        surface: CanonicalSurface | None = None,
        rendered: RenderedBody | None = None,
        attempt_id: str | None = None,
        akey: str | None = None,
        permitted: bool = True,
        generated: tuple[tuple[str, str], ...] = (),
    ) -> PresentationCandidate:
        if outcome not in ENDS[step]:
            raise IllegalEnd(step, outcome)
        cand = build_candidate(
            outcome,
            surface_version=self.surface_version,
            binding=self.binding,
            host_body=self.host_body,
            # Once parsed, the canonical body is the surface's (for a physique
            # card, its projection); before that, the host's body untouched.
            canon=surface.canonical() if surface is not None else None,
            rendered=rendered,
            attempt_id=attempt_id,
            akey=akey,
            permitted=permitted,
            generated=generated,
        )
        self.telemetry.emit(
            surface=self.surface_version,
            mode=self.mode.value,
            outcome=outcome.value,
            seconds=self.mono() - self.called,
        )
        log.event(
            _log,
            logging.DEBUG,
            "presentation",
            mode=self.mode,
            outcome=outcome,
            surface=log.known(self.surface_version, SURFACE_SWITCH),
            publication_permitted=permitted,
        )
        return cand


@dataclass(frozen=True, slots=True)
class Pending:
    """A published request and what concluding it needs (rules 3, 4)."""

    surface_version: str
    surface: CanonicalSurface
    capsule: Capsule
    akey: str
    rid: str
    mono_deadline: float
    response_path: Path
    record: Recorder
    # Who concludes: the read that found the answer, or the wait whose deadline
    # passed while that read queued on the executor (rule 4); exactly one does.
    _conclusion: threading.Lock = field(default_factory=threading.Lock)

    def take_conclusion(self) -> bool:
        """True for the first caller only: it concludes."""
        return self._conclusion.acquire(blocking=False)

    def end(
        self,
        step: Step,
        outcome: CandidateOutcome,
        *,
        attempt_id: str | None = None,
        permitted: bool = True,
        rendered: RenderedBody | None = None,
        generated: tuple[tuple[str, str], ...] = (),
    ) -> PresentationCandidate:
        """`Recorder.end` for this request's surface and artifact key."""
        return self.record.end(
            step,
            outcome,
            surface=self.surface,
            akey=self.akey,
            attempt_id=attempt_id,
            permitted=permitted,
            rendered=rendered,
            generated=generated,
        )

"""The coordinator: canonical body in, `PresentationCandidate` out (design §4, §8).

Rules:

1. Any doubt means canonical. Disabled config or surface, an ineligible body, an
   unusable data root, no response within the wait, a response that does not
   re-validate, a render that moves one locked byte: the candidate carries the
   canonical body the host already rendered. Nothing is repaired or retried.
2. Disabled or ineligible writes *zero* files (the data root is not touched).
3. The shim re-validates every composition it receives with its own capsule
   before expanding anything: a compromised worker cannot make the gateway
   publish outside the grammar (design §1).
4. One deadline: the host's call instant (taken first thing in ``present_*`` /
   ``apresent_*``, before parse and set-up) plus `MAX_WAIT` (4 s, `kexpr.spool.lifecycle`). The request
   carries it (``submitted_at_utc`` = the call, ``deadline_at_utc`` = + 4 s) and
   the shim judges the answer against the same instant on its (injectable)
   monotonic clock. The wait is bounded by that deadline and ends on a
   watchdog notification, with ONE shared re-check scan of ``responses/`` every
   0.25 s for all waiters as the safety net (`gateway_shim._responses`): one
   read per wake, never a per-waiter periodic read, never a busy poll. A
   response read after the deadline is ignored. `apresent_*` waits
   natively: an `asyncio.Event` set from the watcher's thread
   through ``loop.call_soon_threadsafe``; its blocking file work (set-up,
   publish, each read, the report) runs on the coordinator's own bounded
   executor (`gateway_shim._guest`), never on the loop's default executor.
5. This process never holds, reads or forwards the provider key, and never
   imports the provider SDK: it only writes redacted capsules to the spool.
6. Telemetry carries the six fields of `gateway_shim.telemetry` and nothing else.
7. One entry point per surface, each with the plan's artifact-key inputs
   ("Outcome journal"): daily (surface, finalized_event_id); weekly (surface,
   schedule_key, kind, kst_day); adaptive (surface version, session_id,
   proposal_digest, revision, card kind). Raw inputs only enter the HMAC.
8. The host integration contract (design §8) is two pure functions,
   `binding_digest` and `revalidate` (`gateway_shim._binding`, whose header
   carries this rule in full): neither does I/O; neither needs the coordinator.
9. Nothing escapes into the host: for every
   state of the data root, every OS error and every argument of any type and
   value (lone surrogates included), `present_*` and `apresent_*` return (a
   canonical candidate unless fully validated) within the wait plus a small
   bound and never raise; `report` raises only its documented ``ValueError``
   (an enum word, never the input). Every artifact input is checked to be
   UTF-8-encodable ``str`` before anything is hashed or created, so an input
   that is not is ``ineligible`` with zero files; the binding digest is
   computed under the same guard. Cleanup on a failure path is itself guarded
   (`collect`); a last guard turns any other exception into
   ``spool_unavailable``.
10. A moved data root: after a presentation that timed out
   or found the spool unavailable, the identity of the pinned parent and of
   the root (device, inode) is compared with a fresh walk; if either changed,
   the pin, the observer and the key are dropped and the next presentation
   starts over on what is at the path now (re-pinned). A root that cannot be
   checked is ``spool_unavailable`` at once, not a 4 s wait.
11. Closed stays closed: after `close` every presentation
   is ``closed`` (canonical, nothing written, nothing started) and a wait in
   flight ends ``closed`` at once; `close` stops every thread and watch the
   coordinator started (observer, telemetry, executor) and is idempotent.
   `report` still writes the report of a candidate handed out before.
   A coordinator the host drops without `close` releases the same when it is
   collected: no thread it started holds it (they hold its parts, never the
   coordinator), and a `weakref.finalize` gives back its watch and stops its
   threads without joining any (it may run on any thread, at any collection).
   The watch of ``responses/`` is shared by every coordinator of the process on
   that directory (`gateway_shim._watch`): one inotify instance, not one per
   coordinator, released with its last user.
12. A guest in a forking, limited host: in a child of
   ``os.fork`` the coordinator forgets its parent's observer, executor,
   telemetry thread, waiters and awaited attempts without stopping any
   (stopping the observer would unwatch the parent: one open file
   description) and starts its own on first use. When no watcher can be had
   (the per-user inotify limit), the wait runs on its periodic re-check
   instead of failing: ``watching`` is False and the ``kexpr.shim`` logger
   says ``watcher_unavailable`` once; a new watcher is tried a minute later.
   A watch that died (its emitter or observer stopped, ``responses/``
   replaced) is found by the shared re-check and re-established
   (``watch_lost`` said once), else it is the case above. Every lock the
   gateway's modules hold is fresh in a child, module-level ones in
   `kexpr.spool` included (their own fork hooks). The memory of attempts
   awaiting a report is bounded (`_awaiting`), and so is the waiter table
   (`_responses`: entries expire with their deadline).

13. No wait when nothing can answer: right before a request would be
   written, the worker's heartbeat (``worker.status.json``) is asked
   (`gateway_shim._heartbeat`, whose header states the rule and its numbers:
   ``ready`` and written within 10 s; one ``lstat`` per presentation, a read
   only when the file changed). A worker that is not serving (no status file
   ever, ``starting`` / ``stopping`` / ``stopped``, stale, unreadable) makes
   the presentation canonical at once, ``worker_unavailable``, with no
   request written; telemetry counts it, and the ``kexpr.shim`` logger says
   ``worker_unavailable reason=...`` once per change (``worker_serving`` when
   it is back). The next presentation after a ``ready`` write is served.

14. The identity is part of the evidence (`gateway_shim.identity`, whose
   header states the rules; `gateway_shim._identity_store` the files): a data
   root whose ``identity.key`` is missing, or is not the key its record names,
   beside a journal with rows makes every presentation canonical at once,
   ``identity_mismatch``, with no request written and no key minted; the
   ``kexpr.shim`` logger says ``identity_mismatch reason=...`` once per change
   (``identity_restored`` when it is right again), and every presentation
   looks again. Each request carries the artifact's key under every sealed
   key too (``prior_artifact_keys``), so a rotation on purpose never makes an
   artifact new; a rotation while the gateway runs is seen at the next
   presentation (one ``lstat`` of the record).
15. Nothing fails silently: each reason the coordinator cannot serve is one
   WARNING on the ``kexpr.shim`` logger, said once per change (not per
   presentation), in enum words only, never a path or a value:
   ``spool_unavailable reason=<SpoolProblem> unsafe=<UnsafeReason|none>`` (the
   data root missing, a symlink, unsafe, not permitted, its identity key
   unusable; ``spool_available`` at INFO once a request is written again),
   ``glossary_unusable problem=<GlossaryProblem>`` (dual cards are then
   canonical; ``glossary_usable`` at INFO when it reads again) and
   ``unknown_surface`` (the host named an adaptive surface kexpr does not know:
   its cards are canonical). Rule 13's ``worker_unavailable`` and the config's
   ``config_inexact`` are the other two.
16. A report that could not be written is visible: `report` returns False
   (True once written), the coordinator's `reports_unwritten` counts it (the
   shim's own ``shadow_selected`` / ``validation_rejected`` reports too). No
   record of its own: a data root that refuses writes is rule 15's
   ``spool_unavailable`` at the next presentation. The worker still ends such
   an attempt ``claim_expired_canonical`` after the commit grace.

The code is split by seam, every public name staying importable from here:
this module holds the coordinator class (rules 1-7, 9, 11, 15, 16);
`gateway_shim._candidate` the candidate and outcome types and their maps;
`gateway_shim._binding` the host integration contract (rule 8);
`gateway_shim._responses` the response waiters and the observer (rule 4);
`gateway_shim._data_root` the set-up key, identity and observer (rules 10, 12);
`gateway_shim._guest` the own executor and the fork hook (rules 4, 12);
`gateway_shim._awaiting` the bounded memory of attempts awaiting a report;
`gateway_shim._heartbeat` the worker's heartbeat (rule 13);
`gateway_shim.identity` and `gateway_shim._identity_store` the identity (rule 14).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import functools
import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable, Collection, Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, Final, ParamSpec

from gateway_shim._awaiting import AwaitingReports
from gateway_shim._binding import (
    BINDING_DIGEST_VERSION,
    RevalidationError,
    RevalidationReason,
    _artifact_binding,
    _digest,
    binding_digest,
    revalidate,
)
from gateway_shim._candidate import (
    _PUBLISHABLE,
    CandidateStatus,
    PresentationCandidate,
    build_candidate,
)
from gateway_shim._data_root import DataRootHold, HoldClosed, SetupFailed, spool_problem
from gateway_shim._guest import ExecutorClosed, OwnExecutor, track
from gateway_shim._heartbeat import Liveness, WorkerHeartbeat
from gateway_shim._responses import RECHECK_S, ResponseWaiters, Wake, collect
from gateway_shim.config import SURFACE_SWITCH, KoreanExpressionConfig, Mode, inexact_warning
from gateway_shim.identity import (
    IdentityRefused,
    artifact_key,
    new_request_id,
    prior_artifact_keys,
)
from gateway_shim.operator_glossary import DualGlossary, GlossaryError, glossary_for_data_root
from gateway_shim.surfaces import (
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    RenderedBody,
    RenderError,
)
from gateway_shim.surfaces.adaptive import adaptive_card, parse_adaptive
from gateway_shim.surfaces.card import ADAPTIVE_SURFACES, DUAL_SURFACE, CardOrigin
from gateway_shim.surfaces.daily import DailyFacts, parse_daily
from gateway_shim.surfaces.weekly import parse_weekly
from gateway_shim.telemetry import Telemetry, TelemetrySink
from kexpr.spool import log
from kexpr.spool.canonical import format_ts
from kexpr.spool.contract import CONTRACT_VERSION, Capsule, Verdict, judge
from kexpr.spool.fsio import publish, read_private
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import MAX_WAIT, Actor, File, Move, SpoolMode
from kexpr.spool.messages import (
    MAX_MESSAGE_BYTES,
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    SpoolReport,
    SpoolRequest,
    parse_response,
)
from kexpr.spool.outcomes import (
    CandidateOutcome,
    HostOutcome,
    Outcome,
    ReportOutcome,
    host_outcome,
)

__all__ = [
    "ADAPTIVE_UNKNOWN_SURFACE",
    "BINDING_DIGEST_VERSION",
    "CandidateOutcome",
    "CandidateStatus",
    "HostOutcome",
    "KoreanExpressionCoordinator",
    "Outcome",
    "PresentationCandidate",
    "RevalidationError",
    "RevalidationReason",
    "binding_digest",
    "revalidate",
    "utcnow",
]

# The candidate label of a payload that names no known adaptive schema: a
# constant, never the payload's own (unknown) schema string (telemetry rule 6).
ADAPTIVE_UNKNOWN_SURFACE: Final = "adaptive.unknown"
# A digest that no revalidation can ever match: the binding of an input that
# could not be read (rule 9).
_UNREADABLE_BINDING: Final = _digest({"version": BINDING_DIGEST_VERSION, "unreadable": True})
# Content-free records (spool.log); silent unless the host configures `kexpr`.
_log = log.logger("shim")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _is_text(value: object) -> bool:
    """A ``str`` that UTF-8 can encode (no lone surrogate): rule 9."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class _Spec:
    """What one presentation is about, read from the host's arguments."""

    surface_version: str
    body: str
    parse: Callable[[], CanonicalSurface]
    key_fields: tuple[object, ...]
    binding: str | None = None
    enabled: bool | None = None


class _Wait(enum.Enum):
    """How a wait ended without data."""

    NOT_YET = "not_yet"
    EXPIRED = "expired"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class _Call:
    """The instant the host called ``present_*`` / ``apresent_*`` (rule 4): the
    artifact's one deadline is this plus `MAX_WAIT`, on the monotonic clock for the
    wait and on the wall clock in the request."""

    mono: float
    wall: dt.datetime


class _Once:
    """A flag taken once, by whichever thread comes first."""

    __slots__ = ("_lock", "_taken")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken = False

    def take(self) -> bool:
        with self._lock:
            if self._taken:
                return False
            self._taken = True
            return True


class _Said:
    """The last state said on the log (rule 14): a change is said once, by
    whichever thread sees it first. None is "nothing wrong"."""

    __slots__ = ("_lock", "_state")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: object = None

    def change(self, state: object) -> tuple[bool, object]:
        """(changed, the state before)."""
        with self._lock:
            before = self._state
            if state == before:
                return False, before
            self._state = state
            return True, before


@dataclass(frozen=True, slots=True)
class _Recorder:
    """How one presentation ends (rules 1, 6): `finish` builds its candidate,
    emits its telemetry event and writes its debug record. `_begin` makes one
    per presentation from what it read of the host's arguments."""

    surface_version: str
    binding: str
    # The host's body untouched ("" for a body that is not a str: rule 9).
    host_body: str
    mode: Mode
    # The host's call instant on the monotonic clock: the latency counts from it.
    called: float
    mono: Callable[[], float]
    telemetry: Telemetry

    def finish(
        self,
        outcome: CandidateOutcome,
        *,
        surface: CanonicalSurface | None = None,
        rendered: RenderedBody | None = None,
        attempt_id: str | None = None,
        akey: str | None = None,
        permitted: bool = True,
        generated: tuple[tuple[str, str], ...] = (),
    ) -> PresentationCandidate:
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
class _Pending:
    """A published request and what concluding it needs (rules 3, 4)."""

    surface_version: str
    surface: CanonicalSurface
    capsule: Capsule
    akey: str
    rid: str
    mono_deadline: float
    response_path: Path
    record: _Recorder
    # Who concludes: the read that found the answer, or the wait whose deadline
    # passed while that read queued on the executor (rule 4); exactly one does.
    concluder: _Once = field(default_factory=_Once)

    def end(
        self,
        outcome: CandidateOutcome,
        *,
        attempt_id: str | None = None,
        permitted: bool = True,
        rendered: RenderedBody | None = None,
        generated: tuple[tuple[str, str], ...] = (),
    ) -> PresentationCandidate:
        """`_Recorder.finish` for this request's surface and artifact key."""
        return self.record.finish(
            outcome,
            surface=self.surface,
            akey=self.akey,
            attempt_id=attempt_id,
            permitted=permitted,
            rendered=rendered,
            generated=generated,
        )


_P = ParamSpec("_P")
_SpecOf = Callable[Concatenate["KoreanExpressionCoordinator", _P], _Spec]


def _blocking(
    spec: _SpecOf[_P], name: str
) -> Callable[Concatenate[KoreanExpressionCoordinator, _P], PresentationCandidate]:
    """The blocking entry point of the surface ``spec`` reads: the host's
    arguments are read lazily, inside the presentation's guard (rule 9)."""
    bind = inspect.signature(spec).bind

    @functools.wraps(spec)
    def present(
        self: KoreanExpressionCoordinator, /, *args: _P.args, **kwargs: _P.kwargs
    ) -> PresentationCandidate:
        bind(self, *args, **kwargs)  # arguments its signature refuses: TypeError, as before
        return self._present(lambda: spec(self, *args, **kwargs))

    _name(present, spec, name)
    return present


def _awaitable(
    spec: _SpecOf[_P], name: str
) -> Callable[
    Concatenate[KoreanExpressionCoordinator, _P], Coroutine[Any, Any, PresentationCandidate]
]:
    """`_blocking` for asyncio hosts: the same presentation, awaited natively
    (rule 4)."""
    bind = inspect.signature(spec).bind

    @functools.wraps(spec)
    async def present(
        self: KoreanExpressionCoordinator, /, *args: _P.args, **kwargs: _P.kwargs
    ) -> PresentationCandidate:
        bind(self, *args, **kwargs)  # arguments its signature refuses: TypeError, as before
        return await self._apresent(lambda: spec(self, *args, **kwargs))

    _name(present, spec, name)
    present.__doc__ = f"`{name[1:]}` for asyncio hosts: awaits natively (rule 4)."
    return present


def _name(present: Callable[..., object], spec: Callable[..., _Spec], name: str) -> None:
    """The entry point's own name, and the host's signature with its own result."""
    present.__name__ = name
    present.__qualname__ = f"KoreanExpressionCoordinator.{name}"
    sig = inspect.signature(spec).replace(return_annotation="PresentationCandidate")
    present.__signature__ = sig  # type: ignore[attr-defined]


class KoreanExpressionCoordinator:
    def __init__(
        self,
        config: KoreanExpressionConfig,
        data_root: Path | str,
        *,
        telemetry: TelemetrySink | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        # A present block that is not exact disables the feature: said once, loudly.
        inexact_warning(config, _log)
        self.root = DataRoot(Path(data_root))
        self._telemetry = Telemetry(telemetry)
        self._clock = clock
        self._mono = monotonic
        self._waiters = ResponseWaiters(self.root.responses, monotonic)
        # The key, the root's identity and the observer (rules 2, 10, 12).
        self._hold = DataRootHold(self.root, self._waiters, monotonic)
        self._waiters.on_tick = self._hold.check_watch
        # Rule 13: the worker's heartbeat; said once per change (None: not yet asked).
        self._heartbeat = WorkerHeartbeat(self.root)
        self._worker_seen_serving: bool | None = None
        # Rule 14: what was last said about the data root, the glossary, the surface.
        self._spool_said = _Said()
        self._glossary_said = _Said()
        self._surface_said = _Said()
        self._executor = OwnExecutor()
        self._awaiting = AwaitingReports(monotonic)
        # Rule 16: reports that could not be written.
        self._unwritten_lock = threading.Lock()
        self._reports_unwritten = 0
        self._closed = False
        # Rule 11: dropped without `close`, it still releases what it started.
        self._finalizer = weakref.finalize(
            self, _release, self._hold, self._waiters, self._executor, self._telemetry
        )
        self._finalizer.atexit = False
        track(self)

    # ------------------------------------------------------------------ public

    @property
    def closed(self) -> bool:
        """True after `close` (rule 11)."""
        return self._closed

    @property
    def reports_unwritten(self) -> int:
        """How many reports (the host's, and the shim's own shadow and rejection
        reports) could not be written since this coordinator was built (rule 16)."""
        return self._reports_unwritten

    @property
    def watching(self) -> bool:
        """False while no watcher could be had and waits run on their periodic
        re-check alone (rule 12); True otherwise (also before first use)."""
        return self._hold.watching

    # One definition per surface: the spec builder below, with the host's
    # signature; `_blocking` and `_awaitable` make its ``present_*`` and
    # ``apresent_*`` from it (one presentation core each, rule 4).

    def _daily_spec(
        self,
        canonical_body: str,
        *,
        finalized_event_id: str,
        facts: DailyFacts | None = None,
    ) -> _Spec:
        """Daily check-in reply (``daily.v1``); artifact = (surface, finalized event).

        ``facts``: the host's typed completeness, if it has one (a disagreement
        with the seven rendered facts makes the body ineligible).
        """
        return _Spec(
            "daily.v1",
            canonical_body,
            lambda: parse_daily(canonical_body, facts),
            (finalized_event_id,),
        )

    def _weekly_spec(
        self,
        canonical_body: str,
        *,
        explicit_fields: Collection[str],
        schedule_key: str,
        kind: str,
        kst_day: str,
    ) -> _Spec:
        """Weekly report (``weekly.v1``); artifact = (surface, schedule_key, kind, kst_day).

        ``explicit_fields``: the names of the fields present in the summary the
        host rendered from (an explicit prose field makes the body ineligible).
        Call it BEFORE the scheduled-delivery reservation, never after: the host
        reserves the candidate's body and a restart sends that pinned body
        without presenting again.
        """
        return _Spec(
            "weekly.v1",
            canonical_body,
            lambda: parse_weekly(canonical_body, explicit_fields=explicit_fields),
            (schedule_key, kind, kst_day),
        )

    def _adaptive_spec(
        self,
        canonical_payload: Mapping[str, object],
        *,
        callback_data: str,
        origin: CardOrigin = CardOrigin.FRESH,
        surface: str | None = None,
        authority_pins: tuple[str, ...] = (),
    ) -> _Spec:
        """Adaptive operator card: the host's payload for the pressed button.

        ``callback_data``: the pressed button's (``an1:<session>:<action>``);
        ``origin``: ``RECOVERY`` for a republished ``card_payload`` (canonical,
        no call); ``surface``: the deployed profile's card surface
        (``DUAL_SURFACE`` / ``PHYSIQUE_SURFACE``), or None to let the body's
        grammar decide. Artifact = (surface version, session_id from the
        callback, proposal_digest, revision, card kind = the surface). The
        candidate's ``body`` is the card TEXT (for a physique card presented
        with the feature on, its canonical projection); the host persists it
        only through `revalidate`, which returns the payload with only ``text``
        replaced. A payload that is not a fresh, eligible card is canonical with
        zero files written. A dual card is read with `dual_glossary()`.
        """
        return self._adaptive(canonical_payload, callback_data, origin, surface, authority_pins)

    present_daily = _blocking(_daily_spec, "present_daily")
    apresent_daily = _awaitable(_daily_spec, "apresent_daily")
    present_weekly = _blocking(_weekly_spec, "present_weekly")
    apresent_weekly = _awaitable(_weekly_spec, "apresent_weekly")
    present_adaptive = _blocking(_adaptive_spec, "present_adaptive")
    apresent_adaptive = _awaitable(_adaptive_spec, "apresent_adaptive")

    def dual_glossary(self) -> DualGlossary:
        """The dual glossary in force: ``<data root>/operator-glossary.json`` plus the
        shipped texts, or the shipped texts alone when the file is absent. Raises
        `GlossaryError` for a file that is present but invalid. Read, never written."""
        return glossary_for_data_root(self.root.root)

    def dual_glossary_or_ineligible(self) -> DualGlossary:
        try:
            glossary = self.dual_glossary()
        except GlossaryError as e:
            changed, _ = self._glossary_said.change(e.problem)
            if changed:  # rule 14
                log.event(_log, logging.WARNING, "glossary_unusable", problem=e.problem)
            raise Ineligible(IneligibleReason.GLOSSARY_INVALID) from e
        changed, before = self._glossary_said.change(None)
        if changed and before is not None:
            log.event(_log, logging.INFO, "glossary_usable")
        return glossary

    def report(self, candidate: PresentationCandidate, outcome: HostOutcome | str) -> bool:
        """The host's result for an enabled-mode selected candidate (design §4).

        ``Outcome.SELECTED`` only after the durable write / Telegram edit
        succeeded; ``Outcome.COMMIT_FAILED`` / ``Outcome.PUBLICATION_FAILED``
        otherwise (a `HostOutcome`; its string value is accepted too). Exactly
        once per attempt this coordinator handed out as ``accepted``, within
        the worker's commit grace; anything else is a programming error:
        `ValueError` with the reason ``not_host_outcome`` or
        ``report_not_expected`` (never the input).

        Returns True when the report was written; False when it could not be
        (rule 16: the attempt will end ``claim_expired_canonical`` after the
        commit grace; `reports_unwritten` counts it).
        """
        try:
            host = host_outcome(outcome)
        except Exception:  # noqa: BLE001 - rule 9: an odd str subclass is not a word
            host = None
        if host is None:
            raise ValueError("not_host_outcome")
        try:
            attempt_id = _reportable_id(candidate)
            # Only an exact ``str`` reaches the table (rule 9): a subclass's own
            # ``__hash__`` / ``__eq__`` are never called.
            expected = attempt_id is not None and self._awaiting.take(attempt_id)
        except Exception:  # noqa: BLE001 - rule 9: a forged candidate is not ours
            attempt_id, expected = None, False
        if attempt_id is None or not expected:
            raise ValueError("report_not_expected")
        return self._write_report(attempt_id, host)

    def close(self) -> None:
        """Stop every thread and watch this coordinator started; later
        presentations are ``closed`` (rule 11). Idempotent."""
        self._closed = True
        self._finalizer.detach()
        self._hold.close()
        self._waiters.wake_all()
        _release(self._hold, self._waiters, self._executor, self._telemetry, wait=True)

    # ------------------------------------------------------- the host's inputs

    def _adaptive(
        self,
        payload: Mapping[str, object],
        callback_data: str,
        origin: CardOrigin,
        surface: str | None,
        authority_pins: tuple[str, ...],
    ) -> _Spec:
        text = payload.get("text") if isinstance(payload, Mapping) else None
        label = surface if surface in ADAPTIVE_SURFACES else ADAPTIVE_UNKNOWN_SURFACE
        # Rule 14: a surface the host names that kexpr does not know (never its value).
        unknown = surface is not None and label == ADAPTIVE_UNKNOWN_SURFACE
        if self._surface_said.change(unknown)[0] and unknown:
            log.event(_log, logging.WARNING, "unknown_surface")
        key_fields: tuple[object, ...] = ()
        readable = True
        try:
            card, resolved = adaptive_card(
                payload, callback_data=callback_data, origin=origin, surface=surface
            )
            label = resolved
            key_fields = (card.session_id, card.proposal_digest, str(card.revision), resolved)
            digest = binding_digest(
                payload,
                callback_data=callback_data,
                origin=origin,
                surface=surface,
                authority_pins=authority_pins,
            )
        except Exception:  # noqa: BLE001 - rule 9: nothing escapes into the host
            # Unreadable or ineligible: ineligible below; a digest that no
            # revalidation can ever match.
            digest = _UNREADABLE_BINDING
            readable = False

        def parse() -> CanonicalSurface:
            if not readable:
                raise Ineligible(IneligibleReason.NOT_TEXT)
            glossary: DualGlossary | None = None
            if label == DUAL_SURFACE:
                glossary = self.dual_glossary_or_ineligible()
            return parse_adaptive(
                payload,
                callback_data=callback_data,
                origin=origin,
                surface=surface,
                glossary=glossary,
            )

        return _Spec(
            label,
            text if isinstance(text, str) else "",
            parse,
            key_fields,
            binding=digest,
            # Both schemas share the `adaptive_operator` switch (config.SURFACE_SWITCH).
            enabled=self.config.enabled_for(DUAL_SURFACE),
        )

    # ------------------------------------------------- one presentation, sync

    def _called(self) -> _Call:
        """The host's call instant (rule 4); never raises (a broken injected
        clock: the real ones)."""
        try:
            return _Call(self._mono(), self._clock())
        except Exception:  # noqa: BLE001 - rule 9: nothing escapes into the host
            return _Call(time.monotonic(), utcnow())

    def _present(self, spec: Callable[[], _Spec]) -> PresentationCandidate:
        call = self._called()
        try:
            event = threading.Event()
            step = self._begin(spec, event.set, call)
            if isinstance(step, PresentationCandidate):
                return self._after(step)
            try:
                data = self._wait_sync(step, event)
            finally:
                self._waiters.forget(step.rid)
            return self._after(self._finish(step, data))
        except Exception:  # noqa: BLE001 - rule 9, the last guard
            return _last_guard(spec)

    def _wait_step(self, remaining: float) -> float:
        """How long one wait may block: to the deadline while the shared scan
        runs (it and the watcher wake us); else one `RECHECK_S` re-check."""
        return remaining if self._waiters.scanning else min(remaining, RECHECK_S)

    def _wait_sync(self, p: _Pending, arrived: threading.Event) -> bytes | _Wait:
        """Wait for the response until the deadline (rule 4).

        Waits first: the waiter was registered (and the observer started) before
        the request was published, so a response that is already there has set
        ``arrived``; a read before the first wait would only fail (one walk and
        one open per artifact)."""
        while True:
            block = self._block_for(p)
            if isinstance(block, _Wait):
                return block
            woke = arrived.wait(block)
            arrived.clear()
            then = self._after_wake(woke)
            if then is _Wait.NOT_YET:
                continue
            if then is not None:
                return then
            data = _try_read(p.response_path)
            if data is not _Wait.NOT_YET:
                return data

    # The wait's two decisions, one definition for both drivers (`_wait_sync`
    # blocks the host's thread, `_wait_async` a timer on the loop).

    def _block_for(self, p: _Pending) -> float | _Wait:
        """How long the next wait may block, or ``EXPIRED`` at the deadline."""
        remaining = p.mono_deadline - self._mono()
        if remaining <= 0:
            return _Wait.EXPIRED
        return self._wait_step(remaining)

    def _after_wake(self, woke: bool) -> _Wait | None:
        """After one wait: ``CLOSED``; ``NOT_YET`` when nothing arrived and the
        shared scan would have woken us (wait again, no read); None: read now."""
        if self._closed:
            return _Wait.CLOSED
        if not woke and self._waiters.scanning:
            return _Wait.NOT_YET
        return None

    # ----------------------------------------------- one presentation, asyncio

    async def _apresent(self, spec: Callable[[], _Spec]) -> PresentationCandidate:
        call = self._called()
        try:
            loop = asyncio.get_running_loop()
            arrived = asyncio.Event()

            def wake() -> None:
                # Called on the watcher's thread: the loop's own thread sets it.
                loop.call_soon_threadsafe(arrived.set)

            try:
                step = await self._offload_begin(spec, wake, call)
            except ExecutorClosed:
                # Closed: _begin answers ``closed`` without any I/O (rule 11).
                step = self._begin(spec, wake, call)
            if isinstance(step, PresentationCandidate):
                cand = step
            else:
                try:
                    result = await self._wait_async(step, arrived)
                finally:
                    self._waiters.forget(step.rid)
                if isinstance(result, PresentationCandidate):
                    return result
                # Expired or closed: concluded on the loop, no file work.
                cand = self._finish(step, result)
            if cand.outcome in _RECHECKED and self._hold.recheck_due():
                # In the background: it serves the next presentation, and this
                # one's answer must not queue behind it (rule 4).
                self._submit_or_skip(self._hold.recheck_identity)
            return cand
        except Exception:  # noqa: BLE001 - rule 9, the last guard
            return _last_guard(spec)

    async def _wait_async(
        self, p: _Pending, arrived: asyncio.Event
    ) -> PresentationCandidate | _Wait:
        """`_wait_sync` as an awaitable: no thread is held while waiting (a
        timer on the loop, no task per wait); the one read per wake and the
        conclusion run together on the coordinator's own executor."""
        while True:
            block = self._block_for(p)
            if isinstance(block, _Wait):
                return block
            woke = arrived.is_set()
            if not woke:
                try:
                    async with asyncio.timeout(block):
                        await arrived.wait()
                    woke = True
                except TimeoutError:
                    pass
            arrived.clear()
            then = self._after_wake(woke)
            if then is _Wait.NOT_YET:
                continue
            if then is not None:
                return then
            try:
                out = await self._read_by_deadline(p)
            except ExecutorClosed:
                return _Wait.CLOSED
            if out is not _Wait.NOT_YET:
                return out

    async def _read_by_deadline(self, p: _Pending) -> PresentationCandidate | _Wait:
        """One read and conclusion on our executor, but never past the deadline
        (rule 4): with many waiters the executor may hold this read in its queue
        until after it; the wait then ends ``timeout`` at its deadline and the
        read, when it runs, only collects what it finds (`_Pending.concluder`)."""
        job = self._executor.submit(lambda: self._read_and_conclude(p))
        result = asyncio.wrap_future(job)
        try:
            async with asyncio.timeout(max(0.0, p.mono_deadline - self._mono())):
                return await asyncio.shield(result)
        except TimeoutError:
            if p.concluder.take():
                job.cancel()  # not started: it never runs
                return _Wait.EXPIRED
        # The read took the conclusion as the deadline passed: it is moments away.
        return await result

    def _read_and_conclude(self, p: _Pending) -> PresentationCandidate | _Wait:
        """One read; if the answer is there, its conclusion (one executor hop),
        unless the wait has already ended at its deadline."""
        data = _try_read(p.response_path)
        if data is _Wait.NOT_YET:
            return data
        if not p.concluder.take():
            _collect_late(p.response_path, data)
            return _Wait.EXPIRED
        return self._after(self._finish(p, data))

    async def _offload_begin(
        self, spec: Callable[[], _Spec], wake: Wake, call: _Call
    ) -> PresentationCandidate | _Pending:
        """`_begin` on our executor. If the host cancels the awaiting task
        meanwhile, the request may still be published: its waiter is then
        forgotten when `_begin` returns, so no entry outlives it."""
        future = self._executor.submit(lambda: self._begin(spec, wake, call))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(self._forget_abandoned)
            raise

    def _forget_abandoned(self, future: Future[PresentationCandidate | _Pending]) -> None:
        if not future.cancelled() and future.exception() is None:
            step = future.result()
            if isinstance(step, _Pending):
                self._waiters.forget(step.rid)

    def _submit_or_skip(self, fn: Callable[[], None]) -> None:
        """``fn`` on our executor, not awaited (it never raises); skipped after
        `close`."""
        try:
            self._executor.submit(fn)
        except ExecutorClosed:
            pass

    # ------------------------------------------------------ the shared steps

    def _after(self, cand: PresentationCandidate) -> PresentationCandidate:
        if cand.outcome in _RECHECKED and self._hold.recheck_due():
            self._hold.recheck_identity()
        return cand

    def _begin(
        self, make_spec: Callable[[], _Spec], wake: Wake, call: _Call
    ) -> PresentationCandidate | _Pending:
        """Everything up to a published request: a final candidate when there
        is nothing to wait for (rules 1, 2, 9, 11). ``call``: the host's call
        instant, from which the deadline counts (rule 4)."""
        spec = make_spec()
        surface_version = spec.surface_version
        canonical_body = spec.body
        binding = spec.binding
        if binding is None:
            try:
                binding = _artifact_binding(surface_version, canonical_body, spec.key_fields)
            except Exception:  # noqa: BLE001 - rule 9: e.g. a lone surrogate
                binding = _UNREADABLE_BINDING
        enabled = spec.enabled
        if enabled is None:
            enabled = self.config.enabled_for(surface_version)

        rec = _Recorder(
            surface_version=surface_version,
            binding=binding,
            host_body=canonical_body if isinstance(canonical_body, str) else "",
            mode=self.config.mode,
            called=call.mono,
            mono=self._mono,
            telemetry=self._telemetry,
        )
        if self._closed:
            return rec.finish(Outcome.CLOSED)
        if not enabled:
            return rec.finish(Outcome.DISABLED)
        # Rule 9: the artifact's raw inputs enter the HMAC and the digest only
        # as UTF-8 text; anything else is not eligible (zero files).
        if binding == _UNREADABLE_BINDING or not all(_is_text(f) for f in spec.key_fields):
            return rec.finish(Outcome.INELIGIBLE)
        # The parse: right after it, an `Ineligible` is the ineligible candidate
        # (canonical, zero files); every eligibility check on the parsed surface
        # belongs here, before anything is set up.
        try:
            surface = spec.parse()
            # No call that cannot succeed: a surface whose answer cannot fit its
            # budget is ineligible (zero files, like any ineligible body).
            surface.require_answer_budget()
        except Ineligible:
            return rec.finish(Outcome.INELIGIBLE)
        except Exception:  # noqa: BLE001 - rule 9: nothing escapes into the host
            # Rule 9: an input the adapter could not even judge is not eligible;
            # the host's body, untouched, zero files.
            return rec.finish(Outcome.INELIGIBLE)
        # Every slot was locked by the fit table (design §6.1): no word may be
        # written anywhere, so nothing is asked (zero files).
        if not surface.slots:
            return rec.finish(Outcome.NOTHING_TO_STYLE, surface=surface)

        try:
            try:
                identity = self._hold.ensure_started()
            except (OSError, ValueError, RuntimeError) as e:
                self._say_spool(spool_problem(e, self.root))
                raise
            fields = (surface_version, *(str(f) for f in spec.key_fields))
            akey = artifact_key(identity.key, fields)
            # Rule 14: the same artifact under every sealed key (HMACs only).
            prior = prior_artifact_keys(identity.sealed, identity.key, fields)
            capsule = Capsule(
                schema_version=CONTRACT_VERSION,
                surface=surface_version,
                artifact_key=akey,
                slots=tuple(slot.policy() for slot in surface.slots),
            )
        except HoldClosed:
            return rec.finish(Outcome.CLOSED, surface=surface)
        except IdentityRefused:
            # Rule 14: said once by the hold; nothing written, nothing minted.
            return rec.finish(Outcome.IDENTITY_MISMATCH, surface=surface)
        except (OSError, ValueError, RuntimeError):  # UnsafePath is an OSError
            return rec.finish(Outcome.SPOOL_UNAVAILABLE, surface=surface)
        # Rule 13: nothing can answer -> canonical now, no request written.
        if not self._worker_serving():
            return rec.finish(Outcome.WORKER_UNAVAILABLE, surface=surface, akey=akey)
        try:
            step = self._publish(surface_version, surface, capsule, akey, prior, call, rec, wake)
        except Exception as e:  # noqa: BLE001 - rule 9: nothing escapes into the host
            # Whatever the data root did, the host gets the canonical body.
            if isinstance(e, OSError):
                self._say_spool(spool_problem(e, self.root))
            return rec.finish(Outcome.SPOOL_UNAVAILABLE, surface=surface, akey=akey)
        if isinstance(step, _Pending):  # a request written: the data root serves
            self._say_spool(None)
        return step

    def _say_spool(self, problem: SetupFailed | None) -> None:
        """Rule 14: the data root's state, said once per change."""
        state = None if problem is None else (problem.problem, problem.unsafe)
        changed, before = self._spool_said.change(state)
        if not changed:
            return
        if problem is not None:
            log.event(
                _log,
                logging.WARNING,
                "spool_unavailable",
                reason=problem.problem,
                unsafe=problem.unsafe,
            )
        elif before is not None:
            log.event(_log, logging.INFO, "spool_available")

    def _worker_serving(self) -> bool:
        """Rule 13: is a worker serving the data root? A change is said once
        (logger ``kexpr.shim``, enum words only)."""
        liveness = self._heartbeat.liveness()
        serving = liveness is Liveness.SERVING
        if serving != self._worker_seen_serving:
            self._worker_seen_serving = serving
            if serving:
                log.event(_log, logging.INFO, "worker_serving")
            else:
                log.event(_log, logging.WARNING, "worker_unavailable", reason=liveness)
        return serving

    def _publish(
        self,
        surface_version: str,
        surface: CanonicalSurface,
        capsule: Capsule,
        akey: str,
        prior: tuple[str, ...],
        call: _Call,
        rec: _Recorder,
        wake: Wake,
    ) -> PresentationCandidate | _Pending:
        """Register the waiter, then publish the request (rule 4): submitted at
        the host's call, due `MAX_WAIT` after it. A set-up that took the whole wait
        publishes nothing (the worker could only refuse it as expired). ``prior``:
        the artifact's keys under the sealed keys (rule 14)."""
        mono_deadline = call.mono + MAX_WAIT.total_seconds()
        if self._mono() >= mono_deadline:
            return rec.finish(Outcome.TIMEOUT, surface=surface, akey=akey)
        rid = new_request_id()
        submitted = call.wall
        deadline = submitted + MAX_WAIT
        request = SpoolRequest(
            spool_version=SPOOL_VERSION,
            request_id=rid,
            submitted_at_utc=format_ts(submitted),
            deadline_at_utc=format_ts(deadline),
            # Only shadow/enabled reach here: disabled returned before parsing.
            mode=SpoolMode(self.config.mode),
            capsule=capsule,
            prior_artifact_keys=prior,
        )
        self._waiters.register(rid, wake, mono_deadline)
        try:
            # Not fsynced (fsio rule 5 is for files that must survive a
            # crash): a request is worthless after its 4 s deadline, and a
            # torn one left by a power loss is refused by the worker's
            # strict parser (invalid_request: no row, no call).
            publish(
                self.root.tmp,
                _place(self.root, File.REQUEST, Move.PUBLISH) / f"{rid}.json",
                request.to_bytes(),
                durable=False,
            )
        except BaseException:
            self._waiters.forget(rid)
            raise
        return _Pending(
            surface_version=surface_version,
            surface=surface,
            capsule=capsule,
            akey=akey,
            rid=rid,
            mono_deadline=mono_deadline,
            # The answer is read, then collected, from where the shim collects it.
            response_path=_source(self.root, File.ANSWER, Move.COLLECT) / f"{rid}.json",
            record=rec,
        )

    def _finish(self, p: _Pending, data: bytes | _Wait) -> PresentationCandidate:
        """Conclude a published request: parse, re-validate, render (rules 1, 3)."""
        try:
            return self._conclude(p, data)
        except Exception:  # noqa: BLE001 - rule 9, the last guard
            return p.end(Outcome.SPOOL_UNAVAILABLE)

    def _conclude(self, p: _Pending, data: bytes | _Wait) -> PresentationCandidate:
        if data is _Wait.CLOSED:
            return p.end(Outcome.CLOSED)
        if not isinstance(data, bytes):
            return p.end(Outcome.TIMEOUT)
        try:
            response = parse_response(data)
            if response.request_id != p.rid:
                raise MessageError("request_id")
        except MessageError:
            response = None
        # The shim collects (removes) every answer but an accepted one: that file
        # is its attempt's durable AWAITING_REPORT, removed by the worker once
        # the terminal row is durable (spool.lifecycle `SPOOL_FILE_MOVES`).
        if response is None or response.status is not ResponseStatus.ACCEPTED:
            collect(p.response_path)
        # Judged on the monotonic clock against the host's call instant
        # (spool.lifecycle rule 6): the request's own deadline, never a later one.
        if self._mono() >= p.mono_deadline:
            return p.end(Outcome.TIMEOUT)
        if response is None:
            return p.end(Outcome.INVALID_RESPONSE)

        if response.status is not ResponseStatus.ACCEPTED or response.composition is None:
            return p.end(
                response.outcome,
                attempt_id=response.attempt_id,
                permitted=_PUBLISHABLE[response.status],
            )
        attempt_id = response.attempt_id
        if attempt_id is None:
            return p.end(Outcome.INVALID_RESPONSE)

        # Re-validate with our own capsule (rule 3), then render and prove locked bytes.
        verdict = judge(p.capsule, response.composition.to_json())
        rendered: RenderedBody | None = None
        generated: tuple[tuple[str, str], ...] = ()
        if verdict.verdict is Verdict.ACCEPTED and verdict.composition == response.composition:
            generated = tuple((s.slot_id, s.generated_ko) for s in response.composition.slots)
            try:
                rendered = p.surface.render(dict(generated))
            except RenderError:
                rendered = None
        if rendered is None:
            self._write_report(attempt_id, Outcome.VALIDATION_REJECTED)
            return p.end(Outcome.VALIDATION_REJECTED, attempt_id=attempt_id)
        if self.config.mode is Mode.SHADOW:
            # Shadow: the expression is proven renderable, the canonical body is
            # what gets published; the shim records that itself.
            self._write_report(attempt_id, Outcome.SHADOW_SELECTED)
            return p.end(Outcome.SHADOW_SELECTED, attempt_id=attempt_id)
        # Only an attempt handed out as accepted may be reported, once (rule 9).
        self._awaiting.add(attempt_id)
        return p.end(
            Outcome.ACCEPTED, attempt_id=attempt_id, rendered=rendered, generated=generated
        )

    def _write_report(self, attempt_id: str, outcome: ReportOutcome) -> bool:
        """Publish one report (rule 16); False when it could not be written."""
        try:
            report = SpoolReport(
                spool_version=SPOOL_VERSION, attempt_id=attempt_id, outcome=outcome
            )
            reports = _place(self.root, File.REPORT, Move.PUBLISH)
            publish(self.root.tmp, reports / f"{attempt_id}.json", report.to_bytes())
        except (OSError, ValueError):
            # Rule 16: the worker terminalizes an unreported attempt after
            # COMMIT_GRACE; the host is told now, and the count shows it.
            with self._unwritten_lock:
                self._reports_unwritten += 1
            return False
        return True

    def _after_fork_in_child(self) -> None:
        """Rule 12 (`gateway_shim._guest.track`): forget the parent's threads,
        watch and waiters without stopping any; start our own on first use."""
        self._hold.after_fork_in_child()
        self._heartbeat.after_fork_in_child()
        self._waiters.after_fork_in_child()
        self._executor.after_fork_in_child()
        self._telemetry.after_fork_in_child()
        self._awaiting.after_fork_in_child()
        self._unwritten_lock = threading.Lock()


def _release(
    hold: DataRootHold,
    waiters: ResponseWaiters,
    executor: OwnExecutor,
    telemetry: Telemetry,
    *,
    wait: bool = False,
) -> None:
    """Rule 11: give back the watch, stop the scan, the executor and the
    telemetry thread. From `close` (``wait``: each thread joined, bounded) or
    from the finalizer of a coordinator the host dropped (no join: it runs on
    whichever thread collected it). Idempotent; never raises."""
    for stop in (
        functools.partial(hold.close, wait=wait),
        functools.partial(waiters.close, wait=wait),
        functools.partial(executor.close, wait=wait),
        functools.partial(telemetry.close, wait=wait),
    ):
        try:
            stop()
        except Exception:  # noqa: BLE001 - a release must finish whatever one part did
            pass


# Outcomes after which the data root's identity is checked again (rule 10).
# ``worker_unavailable`` too: a data root replaced at its path may hold a serving
# worker's heartbeat while this coordinator still walks the old one.
_RECHECKED: Final = frozenset(
    {Outcome.TIMEOUT, Outcome.SPOOL_UNAVAILABLE, Outcome.WORKER_UNAVAILABLE}
)


def _place(root: DataRoot, file: File, move: Move) -> Path:
    """Where the shim's ``move`` puts ``file`` (spool.lifecycle `SPOOL_FILE_MOVES`
    gates it: a move the table does not give the shim raises `IllegalMove`)."""
    _, dst = root.route(file, move, Actor.SHIM)
    assert dst is not None, (file, move)
    return dst


def _source(root: DataRoot, file: File, move: Move) -> Path:
    """Where the shim's ``move`` takes ``file`` from (gated like `_place`)."""
    src, _ = root.route(file, move, Actor.SHIM)
    assert src is not None, (file, move)
    return src


def _try_read(path: Path) -> bytes | _Wait:
    """Read ``path`` with O_NOFOLLOW if it is there. The caller removes it
    unless it is an accepted answer (spool.lifecycle `SPOOL_FILE_MOVES`: the
    worker removes that one)."""
    try:
        return read_private(path, max_bytes=MAX_MESSAGE_BYTES)
    except FileNotFoundError:
        return _Wait.NOT_YET
    except OSError:
        # Unsafe (`UnsafePath`) or unreadable (a FIFO, a directory, responses/
        # made 0755 or swapped for a symlink): canonical, and the removal may
        # fail the same way (it never raises into the host).
        collect(path)
        return _Wait.EXPIRED


def _collect_late(path: Path, data: bytes | _Wait) -> None:
    """An answer read after its wait ended: collected as `_conclude` collects a
    late one (removed unless it is accepted: the worker removes that one)."""
    try:
        if isinstance(data, bytes) and parse_response(data).status is ResponseStatus.ACCEPTED:
            return
    except MessageError:
        pass
    collect(path)


def _reportable_id(candidate: object) -> str | None:
    """The attempt id of an accepted candidate, only as an exact ``str`` (rule 9)."""
    if not isinstance(candidate, PresentationCandidate):
        return None
    if candidate.outcome is not Outcome.ACCEPTED:
        return None
    attempt_id = candidate.attempt_id
    return attempt_id if type(attempt_id) is str else None


def _last_guard(make_spec: Callable[[], _Spec]) -> PresentationCandidate:
    """Rule 9, the last guard: a canonical candidate from as little as can be
    read; never raises. No telemetry (that may be what failed)."""
    label, body = ADAPTIVE_UNKNOWN_SURFACE, ""
    try:
        spec = make_spec()
        label = spec.surface_version
        body = spec.body if isinstance(spec.body, str) else ""
    except Exception:  # noqa: BLE001 - rule 9
        pass
    return PresentationCandidate(
        surface_version=label,
        attempt_id=None,
        artifact_key=None,
        binding_digest=_UNREADABLE_BINDING,
        status=CandidateStatus.CANONICAL,
        body=body,
        publication_permitted=True,
        outcome=Outcome.SPOOL_UNAVAILABLE,
    )

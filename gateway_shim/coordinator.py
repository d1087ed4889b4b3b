"""The coordinator: canonical body in, `PresentationCandidate` out (SPEC §4, §8).

Rules:

1. Any doubt means canonical. Disabled config or surface, an ineligible body, an
   unusable data root, no response within the wait, a response that does not
   re-validate, a render that moves one locked byte: the candidate carries the
   canonical body the host already rendered. Nothing is repaired or retried.
2. Disabled or ineligible writes *zero* files (the data root is not touched).
3. The shim re-validates every composition it receives with its own capsule
   before expanding anything: a compromised worker cannot make the gateway
   publish outside the grammar (SPEC §1).
4. The wait is bounded by the request's deadline (4 s after submission) and uses
   a watchdog notification with a slow periodic re-check as a safety net; never a
   busy poll. A response read after the deadline is ignored.
5. This process never holds, reads or forwards the provider key, and never
   imports the provider SDK: it only writes redacted capsules to the spool.
6. Telemetry carries the six fields of `gateway_shim.telemetry` and nothing else.
7. One entry point per surface, each with the plan's artifact-key inputs
   ("Outcome journal"): daily (surface, finalized_event_id); weekly (surface,
   schedule_key, kind, kst_day); adaptive (surface version, session_id,
   proposal_digest, revision, card kind). Raw inputs only enter the HMAC.
8. The host integration contract (SPEC §8) is two pure functions:
   `binding_digest` and `revalidate`, which an adaptive host calls under its
   own service locks before persisting a pending card (plan "Adaptive
   validation and persistence are one locked service operation"). Neither does
   I/O; neither needs the coordinator.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import enum
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from spool import log
from spool.contract import CONTRACT_VERSION, Capsule, Verdict, judge
from spool.fsio import UnsafePath, publish, read_private, unlink_quiet
from spool.journal import canonical_json, format_ts
from spool.layout import DataRoot
from spool.messages import (
    MAX_MESSAGE_BYTES,
    SPOOL_VERSION,
    MessageError,
    ReportOutcome,
    ResponseStatus,
    SpoolReport,
    SpoolRequest,
    parse_response,
)
from watchdog.events import (
    FileCreatedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from gateway_shim.config import SURFACE_SWITCH, KoreanExpressionConfig, Mode
from gateway_shim.identity import artifact_key, load_or_create_key, new_request_id
from gateway_shim.surfaces import CanonicalSurface, Ineligible, RenderedBody, RenderError
from gateway_shim.surfaces.adaptive import parse_adaptive
from gateway_shim.surfaces.card import (
    DUAL_SURFACE,
    AdaptiveBinding,
    adaptive_surface_of,
    read_card,
)
from gateway_shim.surfaces.daily import DailyFacts, parse_daily
from gateway_shim.surfaces.dual import DualFacts
from gateway_shim.surfaces.weekly import WeeklyFacts, parse_weekly
from gateway_shim.telemetry import Telemetry, TelemetrySink

WAIT: Final = dt.timedelta(seconds=4)
# The candidate label of a payload that names no known adaptive schema: a
# constant, never the payload's own (unknown) schema string (telemetry rule 6).
ADAPTIVE_UNKNOWN_SURFACE: Final = "adaptive.unknown"
BINDING_DIGEST_VERSION: Final = "kexpr-binding-v1"
# Safety-net re-check while waiting (SPEC §4 trap 2: an inotify overflow delivers
# no event at all). Not a poll loop: the watchdog event normally ends the wait.
_RECHECK_S: Final = 0.25
# Content-free records (spool.log); silent unless the host configures `kexpr`.
_log = log.logger("shim")


class CandidateStatus(enum.StrEnum):
    SELECTED = "selected"
    CANONICAL = "canonical"


class CandidateOutcome(enum.StrEnum):
    """Why the candidate is what it is. Enum only, never content."""

    ACCEPTED = "accepted"  # enabled: selected body, host must commit then report
    SHADOW_SELECTED = "shadow_selected"  # shadow: render succeeded, canonical published
    DISABLED = "disabled"
    INELIGIBLE = "ineligible"
    SPOOL_UNAVAILABLE = "spool_unavailable"
    TIMEOUT = "timeout"
    CREDENTIAL_UNAVAILABLE = "credential_unavailable"
    PROVIDER_ERROR = "provider_error"
    INVALID_RESPONSE = "invalid_response"
    VALIDATION_REJECTED = "validation_rejected"
    CLAIM_EXPIRED_CANONICAL = "claim_expired_canonical"
    IN_FLIGHT = "in_flight"
    ALREADY_ATTEMPTED = "already_attempted"
    JOURNAL_UNAVAILABLE = "journal_unavailable"
    INVALID_REQUEST = "invalid_request"


class HostOutcome(enum.StrEnum):
    """What the host reports after an enabled-mode selected candidate."""

    SELECTED = "selected"
    COMMIT_FAILED = "commit_failed"
    PUBLICATION_FAILED = "publication_failed"


@dataclass(frozen=True, slots=True)
class PresentationCandidate:
    """What the host publishes. ``body`` is always publishable as is when
    ``publication_permitted``; ``status`` says whether it is the selected
    expression or the canonical body. In-process only: never persisted."""

    surface_version: str
    attempt_id: str | None
    artifact_key: str | None
    binding_digest: str
    status: CandidateStatus
    body: str
    publication_permitted: bool
    outcome: CandidateOutcome
    # UTF-16 [start, end) of each locked segment in the canonical body and in
    # ``body`` (equal when canonical), so a host can shift message entities.
    canonical_locked_spans_utf16: tuple[tuple[int, int], ...] = ()
    locked_spans_utf16: tuple[tuple[int, int], ...] = ()
    # The strict-parsed composition (slot_id, generated_ko) behind a SELECTED
    # body, in slot order; empty otherwise. `revalidate` re-renders from it.
    generated: tuple[tuple[str, str], ...] = ()


def _digest(parts: Mapping[str, object]) -> str:
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


def _artifact_binding(surface_version: str, body: str, key_fields: tuple[str, ...]) -> str:
    """Daily/weekly binding digest: the surface, the canonical body, the artifact."""
    return _digest(
        {
            "version": BINDING_DIGEST_VERSION,
            "surface": surface_version,
            "body": body,
            "artifact": list(key_fields),
        }
    )


# --- the host integration contract (SPEC §8), pure -----------------------------------


def binding_digest(canonical_payload: Mapping[str, object], binding: AdaptiveBinding) -> str:
    """SHA-256 over canonical JSON of what an adaptive presentation is bound to.

    The fresh callback/session action, session, proposal digest, revision, card
    kind, origin provenance (message id and origin), the host's authority pins,
    and the enveloped canonical payload: status, text, buttons and envelope
    (which carries the source schema version). Internal: never persisted, sent,
    journaled or emitted (plan "Adaptive validation and persistence are one
    locked service operation").

    Raises ``Ineligible`` (``PAYLOAD_MALFORMED``/``UNKNOWN_SCHEMA``/...) when the
    payload is not a well-formed v1 card payload; ``TypeError`` for a binding of
    the wrong type.
    """
    if not isinstance(binding, AdaptiveBinding):
        raise TypeError("binding must be an AdaptiveBinding")
    card = read_card(canonical_payload)
    return _digest(
        {
            "version": BINDING_DIGEST_VERSION,
            "binding": binding.to_json_object(),
            "payload": card.to_json_object(),
            "source_schema_version": card.envelope.schema_version,
        }
    )


class RevalidationReason(enum.Enum):
    """Why `revalidate` refused a candidate. Enum only, never content."""

    NOT_A_CANDIDATE = "not_a_candidate"
    NOT_PUBLISHABLE = "not_publishable"
    INELIGIBLE = "ineligible"
    SURFACE_MISMATCH = "surface_mismatch"
    BINDING_MISMATCH = "binding_mismatch"
    RENDER_MISMATCH = "render_mismatch"


class RevalidationError(Exception):
    """The candidate is stale or invalid for this payload and binding: persist
    nothing from it and edit nothing. The message is the enum value only."""

    def __init__(self, reason: RevalidationReason) -> None:
        super().__init__(reason.value)
        self.reason: Final = reason


def revalidate(
    candidate: PresentationCandidate,
    canonical_payload: Mapping[str, object],
    binding: AdaptiveBinding,
    facts: DualFacts | None = None,
) -> dict[str, object]:
    """Re-prove an adaptive candidate against the host's CURRENT state. Pure.

    For the host to call while holding its own service locks, right before it
    persists the pending card (plan "Adaptive validation ...", steps 2 and 3):

    1. re-parse ``canonical_payload`` with the versioned adapter, against the
       ``binding`` the host rebuilt from its reloaded session (fresh card, same
       session/proposal/revision/kind);
    2. recompute `binding_digest` and require equality with the candidate's;
    3. re-run slot and render validation: a selected body must re-render from
       its own strict-parsed composition, byte for byte with the same locked
       spans; a canonical body must be the surface's canonical body (or, for a
       ``disabled`` candidate, the payload text unchanged).

    Returns the payload to persist: a deep copy of ``canonical_payload`` with
    only ``text`` replaced by the candidate's body, so status, buttons and
    envelope are identical. Raises `RevalidationError` otherwise. (The artifact
    key is not recomputed: that needs ``identity.key``; the digest binds the
    same inputs and more.)
    """
    if not isinstance(candidate, PresentationCandidate):
        raise RevalidationError(RevalidationReason.NOT_A_CANDIDATE)
    if not candidate.publication_permitted:
        raise RevalidationError(RevalidationReason.NOT_PUBLISHABLE)
    try:
        surface = parse_adaptive(canonical_payload, binding, facts)
        digest = binding_digest(canonical_payload, binding)
    except (Ineligible, TypeError) as e:
        raise RevalidationError(RevalidationReason.INELIGIBLE) from e
    if candidate.surface_version != surface.surface:
        raise RevalidationError(RevalidationReason.SURFACE_MISMATCH)
    if candidate.binding_digest != digest:
        raise RevalidationError(RevalidationReason.BINDING_MISMATCH)
    if candidate.status is CandidateStatus.SELECTED:
        if candidate.outcome is not CandidateOutcome.ACCEPTED:
            raise RevalidationError(RevalidationReason.RENDER_MISMATCH)
        try:
            rendered = surface.render(dict(candidate.generated))
        except RenderError as e:
            raise RevalidationError(RevalidationReason.RENDER_MISMATCH) from e
        if (rendered.body, rendered.locked_spans_utf16) != (
            candidate.body,
            candidate.locked_spans_utf16,
        ):
            raise RevalidationError(RevalidationReason.RENDER_MISMATCH)
    else:
        # Canonical: the surface's canonical body (a physique card's projection),
        # or, when the feature was off for this card, the source text untouched.
        source_text = canonical_payload.get("text")
        disabled = candidate.outcome is CandidateOutcome.DISABLED
        if candidate.body != surface.canonical().body and not (
            disabled and candidate.body == source_text
        ):
            raise RevalidationError(RevalidationReason.RENDER_MISMATCH)
    persisted = copy.deepcopy(dict(canonical_payload))
    persisted["text"] = candidate.body
    return persisted


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class _ResponseWaiters(FileSystemEventHandler):
    """request_id -> Event, set by watchdog when ``responses/<id>.json`` appears."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}

    def register(self, rid: str) -> threading.Event:
        ev = threading.Event()
        with self._lock:
            self._events[rid] = ev
        return ev

    def forget(self, rid: str) -> None:
        with self._lock:
            self._events.pop(rid, None)

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = event.dest_path or event.src_path
        name = os.path.basename(path if isinstance(path, str) else path.decode())
        if name.endswith(".json"):
            with self._lock:
                ev = self._events.get(name[:-5])
            if ev is not None:
                ev.set()


class KoreanExpressionCoordinator:
    def __init__(
        self,
        config: KoreanExpressionConfig,
        data_root: Path | str,
        *,
        telemetry: TelemetrySink | None = None,
        clock: Callable[[], dt.datetime] = utcnow,
    ) -> None:
        self.config = config
        self.root = DataRoot(Path(data_root))
        self._telemetry = Telemetry(telemetry)
        self._clock = clock
        self._waiters = _ResponseWaiters()
        self._observer: BaseObserver | None = None
        self._setup_lock = threading.Lock()
        self._key: bytes | None = None
        self._reported: set[str] = set()

    # ------------------------------------------------------------------ public

    def present_daily(
        self, canonical_body: str, *, facts: DailyFacts, finalized_event_id: str
    ) -> PresentationCandidate:
        """Daily check-in summary (``daily.v1``); artifact = (surface, finalized event)."""
        return self._present(
            "daily.v1",
            canonical_body,
            lambda: parse_daily(canonical_body, facts),
            (finalized_event_id,),
        )

    async def apresent_daily(
        self, canonical_body: str, *, facts: DailyFacts, finalized_event_id: str
    ) -> PresentationCandidate:
        """`present_daily` for asyncio hosts: the wait runs off the event loop."""
        return await asyncio.to_thread(
            self.present_daily,
            canonical_body,
            facts=facts,
            finalized_event_id=finalized_event_id,
        )

    def present_weekly(
        self,
        canonical_body: str,
        *,
        facts: WeeklyFacts,
        schedule_key: str,
        kind: str,
        kst_day: str,
    ) -> PresentationCandidate:
        """Weekly report (``weekly.v1``); artifact = (surface, schedule_key, kind, kst_day).

        Call it BEFORE the scheduled-delivery reservation, never after: the host
        reserves the candidate's body and a restart sends that pinned body
        without presenting again (plan "Weekly pin-before-send and restart").
        """
        return self._present(
            "weekly.v1",
            canonical_body,
            lambda: parse_weekly(canonical_body, facts),
            (schedule_key, kind, kst_day),
        )

    async def apresent_weekly(
        self,
        canonical_body: str,
        *,
        facts: WeeklyFacts,
        schedule_key: str,
        kind: str,
        kst_day: str,
    ) -> PresentationCandidate:
        """`present_weekly` for asyncio hosts: the wait runs off the event loop."""
        return await asyncio.to_thread(
            self.present_weekly,
            canonical_body,
            facts=facts,
            schedule_key=schedule_key,
            kind=kind,
            kst_day=kst_day,
        )

    def present_adaptive(
        self,
        canonical_payload: Mapping[str, object],
        *,
        binding: AdaptiveBinding,
        facts: DualFacts | None = None,
    ) -> PresentationCandidate:
        """Adaptive operator card (either schema, read from the payload's envelope).

        Artifact = (surface version, session_id, proposal_digest, revision, card
        kind), from ``binding``. ``facts``: `DualFacts` for a dualcoachtest card,
        ``None`` for a physique card. The candidate's ``body`` is the card TEXT
        (for a physique card presented with the feature on, its canonical
        projection); the host persists it only through `revalidate`, which
        returns the payload with only ``text`` replaced. A payload that is not
        a fresh, eligible card is canonical with zero files written.
        """
        surface_version = adaptive_surface_of(canonical_payload) or ADAPTIVE_UNKNOWN_SURFACE
        text = canonical_payload.get("text") if isinstance(canonical_payload, Mapping) else None
        try:
            digest = binding_digest(canonical_payload, binding)
        except (Ineligible, TypeError):
            # Unreadable payload or binding: ineligible below; a digest that no
            # revalidation can ever match.
            digest = _digest({"version": BINDING_DIGEST_VERSION, "unreadable": True})
        return self._present(
            surface_version,
            text if isinstance(text, str) else "",
            lambda: parse_adaptive(canonical_payload, binding, facts),
            (
                binding.session_id,
                binding.proposal_digest,
                str(binding.revision),
                binding.card_kind,
            )
            if isinstance(binding, AdaptiveBinding)
            else (),
            binding=digest,
            # Both schemas share the `adaptive_operator` switch (config.SURFACE_SWITCH).
            enabled=self.config.enabled_for(DUAL_SURFACE),
        )

    async def apresent_adaptive(
        self,
        canonical_payload: Mapping[str, object],
        *,
        binding: AdaptiveBinding,
        facts: DualFacts | None = None,
    ) -> PresentationCandidate:
        """`present_adaptive` for asyncio hosts: the wait runs off the event loop."""
        return await asyncio.to_thread(
            self.present_adaptive, canonical_payload, binding=binding, facts=facts
        )

    def report(self, candidate: PresentationCandidate, outcome: HostOutcome | str) -> None:
        """The host's result for an enabled-mode selected candidate (SPEC §4).

        ``selected`` only after the durable write / Telegram edit succeeded;
        ``commit_failed`` / ``publication_failed`` otherwise. Exactly once per
        attempt; anything else is a programming error (`ValueError`).
        """
        host = HostOutcome(outcome)
        if (
            candidate.outcome is not CandidateOutcome.ACCEPTED
            or candidate.attempt_id is None
            or candidate.attempt_id in self._reported
        ):
            raise ValueError("report_not_expected")
        self._reported.add(candidate.attempt_id)
        self._write_report(candidate.attempt_id, ReportOutcome(host.value))

    def close(self) -> None:
        with self._setup_lock:
            if self._observer is not None:
                self._observer.stop()
                self._observer.join(timeout=5)
                self._observer = None

    # ---------------------------------------------------------------- internal

    def _present(
        self,
        surface_version: str,
        canonical_body: str,
        parse: Callable[[], CanonicalSurface],
        key_fields: tuple[str, ...],
        *,
        binding: str | None = None,
        enabled: bool | None = None,
    ) -> PresentationCandidate:
        t0 = time.monotonic()
        if binding is None:
            binding = _artifact_binding(surface_version, canonical_body, key_fields)
        if enabled is None:
            enabled = self.config.enabled_for(surface_version)

        def done(
            outcome: CandidateOutcome,
            *,
            surface: CanonicalSurface | None = None,
            rendered: RenderedBody | None = None,
            attempt_id: str | None = None,
            akey: str | None = None,
            permitted: bool = True,
            generated: tuple[tuple[str, str], ...] = (),
        ) -> PresentationCandidate:
            canon = surface.canonical() if surface is not None else None
            selected = rendered is not None and outcome is CandidateOutcome.ACCEPTED
            # Once parsed, the canonical body is the surface's (for a physique
            # card, its projection); before that, the host's body untouched.
            fallback = canon.body if canon is not None else canonical_body
            body = rendered.body if selected and rendered is not None else fallback
            cand = PresentationCandidate(
                surface_version=surface_version,
                attempt_id=attempt_id,
                artifact_key=akey,
                binding_digest=binding,
                status=CandidateStatus.SELECTED if selected else CandidateStatus.CANONICAL,
                body=body,
                publication_permitted=permitted,
                outcome=outcome,
                canonical_locked_spans_utf16=canon.locked_spans_utf16 if canon else (),
                locked_spans_utf16=(
                    rendered.locked_spans_utf16
                    if selected and rendered is not None
                    else (canon.locked_spans_utf16 if canon else ())
                ),
                generated=generated if selected else (),
            )
            self._telemetry.emit(
                surface=surface_version,
                mode=self.config.mode.value,
                outcome=outcome.value,
                seconds=time.monotonic() - t0,
            )
            log.event(_log, logging.DEBUG, "presentation", mode=self.config.mode, outcome=outcome,
                      surface=log.known(surface_version, SURFACE_SWITCH), publication_permitted=permitted)
            return cand

        if not enabled:
            return done(CandidateOutcome.DISABLED)
        try:
            surface = parse()
        except Ineligible:
            return done(CandidateOutcome.INELIGIBLE)

        try:
            self._ensure_started()
            assert self._key is not None
            akey = artifact_key(self._key, (surface_version, *key_fields))
            capsule = Capsule(
                schema_version=CONTRACT_VERSION,
                surface=surface_version,
                artifact_key=akey,
                slots=tuple(slot.policy() for slot in surface.slots),
            )
        except (UnsafePath, OSError, ValueError):
            return done(CandidateOutcome.SPOOL_UNAVAILABLE, surface=surface)

        rid = new_request_id()
        submitted = self._clock()
        deadline = submitted + WAIT
        mono_deadline = t0 + WAIT.total_seconds()
        request = SpoolRequest(
            spool_version=SPOOL_VERSION,
            request_id=rid,
            submitted_at_utc=format_ts(submitted),
            deadline_at_utc=format_ts(deadline),
            # Only shadow/enabled reach here: disabled returned before parsing.
            mode="shadow" if self.config.mode is Mode.SHADOW else "enabled",
            capsule=capsule,
        )
        response_path = self.root.responses / f"{rid}.json"
        arrived = self._waiters.register(rid)
        try:
            try:
                # Not fsynced (fsio rule 5 is for files that must survive a
                # crash): a request is worthless after its 4 s deadline, and a
                # torn one left by a power loss is refused by the worker's
                # strict parser (invalid_request: no row, no call).
                publish(
                    self.root.tmp,
                    self.root.requests / f"{rid}.json",
                    request.to_bytes(),
                    durable=False,
                )
            except OSError:
                return done(CandidateOutcome.SPOOL_UNAVAILABLE, surface=surface, akey=akey)
            data = self._wait_for(response_path, arrived, mono_deadline)
        finally:
            self._waiters.forget(rid)
        if data is None or self._clock() >= deadline:
            return done(CandidateOutcome.TIMEOUT, surface=surface, akey=akey)
        try:
            response = parse_response(data)
            if response.request_id != rid:
                raise MessageError("request_id")
        except MessageError:
            return done(CandidateOutcome.INVALID_RESPONSE, surface=surface, akey=akey)

        if response.status is not ResponseStatus.ACCEPTED or response.composition is None:
            permitted = response.status is not ResponseStatus.IN_FLIGHT
            return done(
                CandidateOutcome(response.outcome.value),
                surface=surface,
                akey=akey,
                attempt_id=response.attempt_id,
                permitted=permitted,
            )
        attempt_id = response.attempt_id
        if attempt_id is None:
            return done(CandidateOutcome.INVALID_RESPONSE, surface=surface, akey=akey)

        # Re-validate with our own capsule (rule 3), then render and prove locked bytes.
        verdict = judge(capsule, response.composition.to_json())
        rendered: RenderedBody | None = None
        generated: tuple[tuple[str, str], ...] = ()
        if verdict.verdict is Verdict.ACCEPTED and verdict.composition == response.composition:
            generated = tuple((s.slot_id, s.generated_ko) for s in response.composition.slots)
            try:
                rendered = surface.render(dict(generated))
            except RenderError:
                rendered = None
        if rendered is None:
            self._write_report(attempt_id, ReportOutcome.VALIDATION_REJECTED)
            return done(
                CandidateOutcome.VALIDATION_REJECTED,
                surface=surface,
                akey=akey,
                attempt_id=attempt_id,
            )
        if self.config.mode is Mode.SHADOW:
            # Shadow: the expression is proven renderable, the canonical body is
            # what gets published; the shim records that itself.
            self._write_report(attempt_id, ReportOutcome.SHADOW_SELECTED)
            return done(
                CandidateOutcome.SHADOW_SELECTED, surface=surface, akey=akey, attempt_id=attempt_id
            )
        return done(
            CandidateOutcome.ACCEPTED,
            surface=surface,
            rendered=rendered,
            akey=akey,
            attempt_id=attempt_id,
            generated=generated,
        )

    def _wait_for(self, path: Path, arrived: threading.Event, mono_deadline: float) -> bytes | None:
        """Wait for ``path`` until the deadline; read it with O_NOFOLLOW and remove it.

        Waits first: the waiter was registered (and the observer started) before
        the request was published, so a response that is already there has set
        ``arrived``; a read before the first wait would only fail (one walk and
        one open per artifact)."""
        while True:
            remaining = mono_deadline - time.monotonic()
            if remaining <= 0:
                return None
            arrived.wait(min(remaining, _RECHECK_S))
            arrived.clear()
            try:
                data = read_private(path, max_bytes=MAX_MESSAGE_BYTES)
            except FileNotFoundError:
                continue
            except (UnsafePath, OSError):
                unlink_quiet(path)
                return None
            unlink_quiet(path)
            return data

    def _write_report(self, attempt_id: str, outcome: ReportOutcome) -> None:
        report = SpoolReport(spool_version=SPOOL_VERSION, attempt_id=attempt_id, outcome=outcome)
        try:
            publish(self.root.tmp, self.root.reports / f"{attempt_id}.json", report.to_bytes())
        except OSError:
            # The worker terminalizes an unreported attempt after COMMIT_GRACE.
            pass

    def _ensure_started(self) -> None:
        with self._setup_lock:
            if self._key is None:
                self.root.ensure()
                self._key = load_or_create_key(self.root)
            if self._observer is None:
                observer = Observer()
                # Arrivals only: the inotify mask then leaves out the opens,
                # closes and removals of every response read (ours and the
                # other shims'), which would each cost the observer's threads.
                observer.schedule(
                    self._waiters,
                    str(self.root.responses),
                    recursive=False,
                    event_filter=[FileCreatedEvent, FileMovedEvent],
                )
                observer.daemon = True
                observer.start()
                self._observer = observer

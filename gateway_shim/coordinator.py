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
"""

from __future__ import annotations

import asyncio
import datetime as dt
import enum
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from gateway_shim.config import KoreanExpressionConfig, Mode
from gateway_shim.identity import artifact_key, load_or_create_key, new_request_id
from gateway_shim.surfaces import CanonicalSurface, Ineligible, RenderError, RenderedBody
from gateway_shim.surfaces.daily import DailyFacts, parse_daily
from gateway_shim.telemetry import Telemetry, TelemetrySink
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

WAIT: Final = dt.timedelta(seconds=4)
# Safety-net re-check while waiting (SPEC §4 trap 2: an inotify overflow delivers
# no event at all). Not a poll loop: the watchdog event normally ends the wait.
_RECHECK_S: Final = 0.25


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


def _digest(parts: dict[str, object]) -> str:
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


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
    ) -> PresentationCandidate:
        t0 = time.monotonic()
        binding = _digest({"surface": surface_version, "body": canonical_body})

        def done(
            outcome: CandidateOutcome,
            *,
            surface: CanonicalSurface | None = None,
            rendered: RenderedBody | None = None,
            attempt_id: str | None = None,
            akey: str | None = None,
            permitted: bool = True,
        ) -> PresentationCandidate:
            canon = surface.canonical() if surface is not None else None
            selected = rendered is not None and outcome is CandidateOutcome.ACCEPTED
            body = rendered.body if selected and rendered is not None else canonical_body
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
            )
            self._telemetry.emit(
                surface=surface_version,
                mode=self.config.mode.value,
                outcome=outcome.value,
                seconds=time.monotonic() - t0,
            )
            return cand

        if not self.config.enabled_for(surface_version):
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
            mode=self.config.mode.value,
            capsule=capsule,
        )
        response_path = self.root.responses / f"{rid}.json"
        arrived = self._waiters.register(rid)
        try:
            try:
                publish(self.root.tmp, self.root.requests / f"{rid}.json", request.to_bytes())
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
        if verdict.verdict is Verdict.ACCEPTED and verdict.composition == response.composition:
            try:
                rendered = surface.render(
                    {s.slot_id: s.generated_ko for s in response.composition.slots}
                )
            except RenderError:
                rendered = None
        if rendered is None:
            self._write_report(attempt_id, ReportOutcome.VALIDATION_REJECTED)
            return done(
                CandidateOutcome.VALIDATION_REJECTED, surface=surface, akey=akey, attempt_id=attempt_id
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
        )

    def _wait_for(self, path: Path, arrived: threading.Event, mono_deadline: float) -> bytes | None:
        """Wait for ``path`` until the deadline; read it with O_NOFOLLOW and remove it."""
        while True:
            try:
                data = read_private(path, max_bytes=MAX_MESSAGE_BYTES)
            except FileNotFoundError:
                data = None
            except (UnsafePath, OSError):
                unlink_quiet(path)
                return None
            if data is not None:
                unlink_quiet(path)
                return data
            remaining = mono_deadline - time.monotonic()
            if remaining <= 0:
                return None
            arrived.wait(min(remaining, _RECHECK_S))
            arrived.clear()

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
                observer.schedule(self._waiters, str(self.root.responses), recursive=False)
                observer.daemon = True
                observer.start()
                self._observer = observer

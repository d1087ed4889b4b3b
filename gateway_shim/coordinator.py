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
8. The host integration contract (design §8) is two pure functions,
   `binding_digest` and `revalidate` (`gateway_shim._binding`, whose header
   carries this rule in full): neither does I/O; neither needs the coordinator.
9. Nothing escapes into the host (issue 14 item 1): for every state of the
   data root and every OS error, `present_*`, `apresent_*` and `report` return
   (a canonical candidate unless fully validated) within the wait plus a small
   bound, and never raise. Cleanup on a failure path is itself guarded
   (`_discard`); a last guard in `_present` turns any other exception after
   parsing into ``spool_unavailable``.
10. A moved data root (issue 14 item 8): after a presentation that timed out
   or found the spool unavailable, the identity of the pinned parent and of
   the root (device, inode) is compared with a fresh walk; if either changed,
   the pin, the observer and the key are dropped and the next presentation
   starts over on what is at the path now (re-pinned). A root that cannot be
   checked is ``spool_unavailable`` at once, not a 4 s wait.

The code is split by seam, every public name staying importable from here:
this module holds the coordinator class (rules 1-7, 9, 10);
`gateway_shim._candidate` the candidate and outcome types and their maps;
`gateway_shim._binding` the host integration contract (rule 8);
`gateway_shim._responses` the response waiters and the observer (rule 4);
`gateway_shim._data_root` the set-up key, identity and observer (rule 10).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Final

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
from gateway_shim._data_root import DataRootHold
from gateway_shim._responses import ResponseWaiters, collect, discard
from gateway_shim.config import SURFACE_SWITCH, KoreanExpressionConfig, Mode
from gateway_shim.identity import artifact_key, new_request_id
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
from kexpr.spool.contract import CONTRACT_VERSION, Capsule, Verdict, judge
from kexpr.spool.fsio import UnsafePath, publish, read_private
from kexpr.spool.journal import format_ts
from kexpr.spool.layout import DataRoot
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
    "WAIT",
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

WAIT: Final = dt.timedelta(seconds=4)
# The candidate label of a payload that names no known adaptive schema: a
# constant, never the payload's own (unknown) schema string (telemetry rule 6).
ADAPTIVE_UNKNOWN_SURFACE: Final = "adaptive.unknown"
# Safety-net re-check while waiting (design §4 trap 2: an inotify overflow delivers
# no event at all). Not a poll loop: the watchdog event normally ends the wait.
_RECHECK_S: Final = 0.25
# Content-free records (spool.log); silent unless the host configures `kexpr`.
_log = log.logger("shim")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


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
        self._waiters = ResponseWaiters()
        # The key, the root's identity and the observer (rules 2, 10).
        self._hold = DataRootHold(self.root, self._waiters)
        self._reported: set[str] = set()

    # ------------------------------------------------------------------ public

    def present_daily(
        self,
        canonical_body: str,
        *,
        finalized_event_id: str,
        facts: DailyFacts | None = None,
    ) -> PresentationCandidate:
        """Daily check-in reply (``daily.v1``); artifact = (surface, finalized event).

        ``facts``: the host's typed completeness, if it has one (a disagreement
        with the seven rendered facts makes the body ineligible).
        """
        return self._present(
            "daily.v1",
            canonical_body,
            lambda: parse_daily(canonical_body, facts),
            (finalized_event_id,),
        )

    async def apresent_daily(
        self,
        canonical_body: str,
        *,
        finalized_event_id: str,
        facts: DailyFacts | None = None,
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
        explicit_fields: Collection[str],
        schedule_key: str,
        kind: str,
        kst_day: str,
    ) -> PresentationCandidate:
        """Weekly report (``weekly.v1``); artifact = (surface, schedule_key, kind, kst_day).

        ``explicit_fields``: the names of the fields present in the summary the
        host rendered from (an explicit prose field makes the body ineligible).
        Call it BEFORE the scheduled-delivery reservation, never after: the host
        reserves the candidate's body and a restart sends that pinned body
        without presenting again (plan "Weekly pin-before-send and restart").
        """
        return self._present(
            "weekly.v1",
            canonical_body,
            lambda: parse_weekly(canonical_body, explicit_fields=explicit_fields),
            (schedule_key, kind, kst_day),
        )

    async def apresent_weekly(
        self,
        canonical_body: str,
        *,
        explicit_fields: Collection[str],
        schedule_key: str,
        kind: str,
        kst_day: str,
    ) -> PresentationCandidate:
        """`present_weekly` for asyncio hosts: the wait runs off the event loop."""
        return await asyncio.to_thread(
            self.present_weekly,
            canonical_body,
            explicit_fields=explicit_fields,
            schedule_key=schedule_key,
            kind=kind,
            kst_day=kst_day,
        )

    def present_adaptive(
        self,
        canonical_payload: Mapping[str, object],
        *,
        callback_data: str,
        origin: CardOrigin = CardOrigin.FRESH,
        surface: str | None = None,
        authority_pins: tuple[str, ...] = (),
    ) -> PresentationCandidate:
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
        text = canonical_payload.get("text") if isinstance(canonical_payload, Mapping) else None
        label = surface if surface in ADAPTIVE_SURFACES else ADAPTIVE_UNKNOWN_SURFACE
        key_fields: tuple[str, ...] = ()
        try:
            card, resolved = adaptive_card(
                canonical_payload, callback_data=callback_data, origin=origin, surface=surface
            )
            label = resolved
            key_fields = (card.session_id, card.proposal_digest, str(card.revision), resolved)
            digest = binding_digest(
                canonical_payload,
                callback_data=callback_data,
                origin=origin,
                surface=surface,
                authority_pins=authority_pins,
            )
        except (Ineligible, TypeError):
            # Unreadable or ineligible: ineligible below; a digest that no
            # revalidation can ever match.
            digest = _digest({"version": BINDING_DIGEST_VERSION, "unreadable": True})

        def parse() -> CanonicalSurface:
            glossary: DualGlossary | None = None
            if label == DUAL_SURFACE:
                glossary = self.dual_glossary_or_ineligible()
            return parse_adaptive(
                canonical_payload,
                callback_data=callback_data,
                origin=origin,
                surface=surface,
                glossary=glossary,
            )

        return self._present(
            label,
            text if isinstance(text, str) else "",
            parse,
            key_fields,
            binding=digest,
            # Both schemas share the `adaptive_operator` switch (config.SURFACE_SWITCH).
            enabled=self.config.enabled_for(DUAL_SURFACE),
        )

    async def apresent_adaptive(
        self,
        canonical_payload: Mapping[str, object],
        *,
        callback_data: str,
        origin: CardOrigin = CardOrigin.FRESH,
        surface: str | None = None,
        authority_pins: tuple[str, ...] = (),
    ) -> PresentationCandidate:
        """`present_adaptive` for asyncio hosts: the wait runs off the event loop."""
        return await asyncio.to_thread(
            self.present_adaptive,
            canonical_payload,
            callback_data=callback_data,
            origin=origin,
            surface=surface,
            authority_pins=authority_pins,
        )

    def dual_glossary(self) -> DualGlossary:
        """The dual glossary in force: ``<data root>/operator-glossary.json`` plus the
        shipped texts, or the shipped texts alone when the file is absent. Raises
        `GlossaryError` for a file that is present but invalid. Read, never written."""
        return glossary_for_data_root(self.root.root)

    def dual_glossary_or_ineligible(self) -> DualGlossary:
        try:
            return self.dual_glossary()
        except GlossaryError as e:
            raise Ineligible(IneligibleReason.GLOSSARY_INVALID) from e

    def report(self, candidate: PresentationCandidate, outcome: HostOutcome | str) -> None:
        """The host's result for an enabled-mode selected candidate (design §4).

        ``Outcome.SELECTED`` only after the durable write / Telegram edit
        succeeded; ``Outcome.COMMIT_FAILED`` / ``Outcome.PUBLICATION_FAILED``
        otherwise (a `HostOutcome`; its string value is accepted too). Exactly
        once per attempt; anything else is a programming error: `ValueError`
        with the reason ``not_host_outcome`` or ``report_not_expected``.
        """
        host = host_outcome(outcome)
        if host is None:
            raise ValueError("not_host_outcome")
        if (
            candidate.outcome is not Outcome.ACCEPTED
            or candidate.attempt_id is None
            or candidate.attempt_id in self._reported
        ):
            raise ValueError("report_not_expected")
        self._reported.add(candidate.attempt_id)
        self._write_report(candidate.attempt_id, host)

    def close(self) -> None:
        self._hold.close()

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
        cand = self._present_unguarded(
            surface_version, canonical_body, parse, key_fields, binding=binding, enabled=enabled
        )
        if cand.outcome in (Outcome.TIMEOUT, Outcome.SPOOL_UNAVAILABLE):
            self._hold.recheck_identity()
        return cand

    def _present_unguarded(
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
            cand = build_candidate(
                outcome,
                surface_version=surface_version,
                binding=binding,
                host_body=canonical_body,
                # Once parsed, the canonical body is the surface's (for a physique
                # card, its projection); before that, the host's body untouched.
                canon=surface.canonical() if surface is not None else None,
                rendered=rendered,
                attempt_id=attempt_id,
                akey=akey,
                permitted=permitted,
                generated=generated,
            )
            self._telemetry.emit(
                surface=surface_version,
                mode=self.config.mode.value,
                outcome=outcome.value,
                seconds=time.monotonic() - t0,
            )
            log.event(
                _log,
                logging.DEBUG,
                "presentation",
                mode=self.config.mode,
                outcome=outcome,
                surface=log.known(surface_version, SURFACE_SWITCH),
                publication_permitted=permitted,
            )
            return cand

        if not enabled:
            return done(Outcome.DISABLED)
        try:
            surface = parse()
            # Issue 19: no call that cannot succeed (zero files, like any ineligible body).
            surface.require_answer_budget()
        except Ineligible:
            return done(Outcome.INELIGIBLE)
        except Exception:  # noqa: BLE001 - rule 9: nothing escapes into the host
            # Rule 9: an input the adapter could not even judge is not eligible;
            # the host's body, untouched, zero files.
            return done(Outcome.INELIGIBLE)

        try:
            self._hold.ensure_started()
            assert self._hold.key is not None
            akey = artifact_key(self._hold.key, (surface_version, *key_fields))
            capsule = Capsule(
                schema_version=CONTRACT_VERSION,
                surface=surface_version,
                artifact_key=akey,
                slots=tuple(slot.policy() for slot in surface.slots),
            )
        except (UnsafePath, OSError, ValueError, RuntimeError):
            # RuntimeError: the observer's thread could not be started.
            return done(Outcome.SPOOL_UNAVAILABLE, surface=surface)
        try:
            return self._exchange(surface_version, surface, capsule, akey, t0, done)
        except Exception:  # noqa: BLE001 - rule 9: nothing escapes into the host
            # Rule 9, the last guard: whatever the data root did, the host gets
            # the canonical body, never an exception.
            return done(Outcome.SPOOL_UNAVAILABLE, surface=surface, akey=akey)

    def _exchange(
        self,
        surface_version: str,
        surface: CanonicalSurface,
        capsule: Capsule,
        akey: str,
        t0: float,
        done: Callable[..., PresentationCandidate],
    ) -> PresentationCandidate:
        """Publish the request, wait for the response, re-validate (rules 1-4)."""
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
                return done(Outcome.SPOOL_UNAVAILABLE, surface=surface, akey=akey)
            data = self._wait_for(response_path, arrived, mono_deadline)
        finally:
            self._waiters.forget(rid)
        if data is None:
            return done(Outcome.TIMEOUT, surface=surface, akey=akey)
        try:
            response = parse_response(data)
            if response.request_id != rid:
                raise MessageError("request_id")
        except MessageError:
            response = None
        # The shim collects (removes) every answer but an accepted one: that file
        # is its attempt's durable AWAITING_REPORT, removed by the worker once
        # the terminal row is durable (spool.lifecycle `SPOOL_FILE_MOVES`).
        if response is None or response.status is not ResponseStatus.ACCEPTED:
            collect(response_path)
        if self._clock() >= deadline:
            return done(Outcome.TIMEOUT, surface=surface, akey=akey)
        if response is None:
            return done(Outcome.INVALID_RESPONSE, surface=surface, akey=akey)

        if response.status is not ResponseStatus.ACCEPTED or response.composition is None:
            return done(
                response.outcome,
                surface=surface,
                akey=akey,
                attempt_id=response.attempt_id,
                permitted=_PUBLISHABLE[response.status],
            )
        attempt_id = response.attempt_id
        if attempt_id is None:
            return done(Outcome.INVALID_RESPONSE, surface=surface, akey=akey)

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
            self._write_report(attempt_id, Outcome.VALIDATION_REJECTED)
            return done(
                Outcome.VALIDATION_REJECTED,
                surface=surface,
                akey=akey,
                attempt_id=attempt_id,
            )
        if self.config.mode is Mode.SHADOW:
            # Shadow: the expression is proven renderable, the canonical body is
            # what gets published; the shim records that itself.
            self._write_report(attempt_id, Outcome.SHADOW_SELECTED)
            return done(Outcome.SHADOW_SELECTED, surface=surface, akey=akey, attempt_id=attempt_id)
        return done(
            Outcome.ACCEPTED,
            surface=surface,
            rendered=rendered,
            akey=akey,
            attempt_id=attempt_id,
            generated=generated,
        )

    def _wait_for(self, path: Path, arrived: threading.Event, mono_deadline: float) -> bytes | None:
        """Wait for ``path`` until the deadline and read it with O_NOFOLLOW. The
        caller removes it unless it is an accepted answer (spool.lifecycle
        `SPOOL_FILE_MOVES`: the worker removes that one).

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
                # Unsafe or unreadable (a FIFO, a directory, responses/ made
                # 0755 or swapped for a symlink): canonical, and the removal
                # may fail the same way (issue 14 item 1).
                discard(path)
                return None
            # The worker removes the response once its attempt is terminal: the
            # file is the durable "answered" phase (docs/lifecycle.md).
            return data

    def _write_report(self, attempt_id: str, outcome: ReportOutcome) -> None:
        report = SpoolReport(spool_version=SPOOL_VERSION, attempt_id=attempt_id, outcome=outcome)
        try:
            publish(self.root.tmp, self.root.reports / f"{attempt_id}.json", report.to_bytes())
        except OSError:
            # The worker terminalizes an unreported attempt after COMMIT_GRACE.
            pass

"""The coordinator: canonical body in, `PresentationCandidate` out (design §4, §8).

This module is the facade the host calls: the six entry points, `report`,
`close` and the fork hook. A presentation's steps are a table
(`gateway_shim._presentation`; docs/lifecycle.md §5) walked by small parts:
`_specs` reads the host's arguments, `_setup` sets up and publishes, `_waits`
waits and holds the last guard, `_conclusion` concludes and reports. Where a
rule below names a module, that module's header states it in full.

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
   ``apresent_*``, before parse and set-up) plus `MAX_WAIT` (4 s,
   `kexpr.spool.lifecycle`). The request carries it (``submitted_at_utc`` = the
   call, ``deadline_at_utc`` = + 4 s) and the shim judges the answer against the
   same instant on its (injectable) monotonic clock. The wait ends on a watchdog
   notification, with ONE shared re-check of ``responses/`` every 0.25 s for all
   waiters as the safety net (`gateway_shim._responses`): one read per wake,
   never a busy poll. A response read after the deadline is ignored.
   `apresent_*` awaits natively (an `asyncio.Event` set from the watcher's
   thread through ``loop.call_soon_threadsafe``); its blocking file work runs on
   the coordinator's own bounded executor (`gateway_shim._guest`), never on the
   loop's default executor.
5. This process never holds, reads or forwards the provider key, and never
   imports the provider SDK: it only writes redacted capsules to the spool.
6. Telemetry carries the six fields of `gateway_shim.telemetry` and nothing else.
7. One entry point per surface, each with the plan's artifact-key inputs
   ("Outcome journal"): daily (surface, finalized_event_id); weekly (surface,
   schedule_key, kind, kst_day); adaptive (surface version, session_id,
   proposal_digest, revision, card kind). Raw inputs only enter the HMAC.
8. The host integration contract (design §8) is two pure functions,
   `binding_digest` and `revalidate` (`gateway_shim._binding`): neither does
   I/O; neither needs the coordinator.
9. Nothing escapes into the host: for every state of the data root, every OS
   error and every argument of any type and value (lone surrogates included),
   `present_*` and `apresent_*` return (a canonical candidate unless fully
   validated) within the wait plus a small bound and never raise; `report`
   raises only its documented ``ValueError`` (an enum word, never the input).
   Every artifact input is checked to be UTF-8-encodable ``str`` before anything
   is hashed or created (else ``ineligible``, zero files). Cleanup on a failure
   path is itself guarded (`collect`); a last guard turns any other exception
   into ``spool_unavailable``, counted (`presentations_guarded`).
10. A moved data root: after a presentation that timed out or found the spool
   or the worker unavailable, the identity of the pinned parent and of the root
   (device, inode) is compared with a fresh walk; if either changed, the pin,
   the watch and the key are dropped and the next presentation starts over on
   what is at the path now (`gateway_shim._data_root`). A root that cannot be
   checked is ``spool_unavailable`` at once, not a 4 s wait.
11. Closed stays closed: after `close` every presentation is ``closed``
   (canonical, nothing written, nothing started) and a wait in flight ends
   ``closed`` at once; `close` stops every thread and watch the coordinator
   started and is idempotent. `report` still writes the report of a candidate
   handed out before. A coordinator the host drops without `close` releases the
   same when it is collected: no thread it started holds it, and a
   `weakref.finalize` gives back its watch and stops its threads without
   joining any. The watch of ``responses/`` is one per process and directory,
   shared by its coordinators (`gateway_shim._watch`).
12. A guest in a forking, limited host: in a child of ``os.fork`` the
   coordinator forgets its parent's watch, executor, telemetry thread, waiters
   and awaited attempts without stopping any, and starts its own on first use
   (`gateway_shim._guest`; every lock is fresh there, `kexpr.spool`'s
   module-level ones included). Without a watcher (the per-user inotify limit)
   the wait runs on the re-check instead of failing (``watching`` False,
   ``watcher_unavailable`` said once, a new watcher tried a minute later); a
   watch that died is re-established (``watch_lost`` said once). The memory of
   attempts awaiting a report (`_awaiting`) and the waiter table (`_responses`)
   are bounded.
13. No wait when nothing can answer: right before a request would be written,
   the worker's heartbeat is asked (`gateway_shim._heartbeat`). A worker that is
   not serving makes the presentation canonical at once, ``worker_unavailable``,
   with no request written.
14. The identity is part of the evidence (`gateway_shim.identity`): a data root
   whose ``identity.key`` is missing, or is not the key its record names, beside
   a journal with rows makes every presentation canonical at once,
   ``identity_mismatch``, with no request written and no key minted. Each
   request carries the artifact's key under every sealed key too
   (``prior_artifact_keys``), so a rotation never makes an artifact new.
15. Nothing fails silently: each reason the coordinator cannot serve is one
   WARNING on the ``kexpr.shim`` logger, said once per change (not per
   presentation), in enum words only, never a value; the one path said is the
   data root's own (operator configuration, `kexpr.spool.log.OperatorPath`):
   ``spool_unavailable reason=<SpoolProblem> unsafe=<UnsafeReason|none>``
   (``spool_available`` at INFO once a request is written again),
   ``glossary_unusable problem=<GlossaryProblem>`` (``glossary_usable`` when it
   reads again), ``unknown_surface`` (an adaptive surface kexpr does not know),
   ``worker_unavailable reason=... data_root=<path>`` (rule 13; ``worker_serving``),
   ``identity_mismatch reason=...`` (rule 14; ``identity_restored``) and the
   config's ``config_inexact``.
16. A report that could not be written is visible: `report` returns False
   (True once written), and `reports_unwritten` counts it (the shim's own
   ``shadow_selected`` / ``validation_rejected`` reports too). The worker ends
   such an attempt ``claim_expired_canonical`` after the commit grace.
"""

from __future__ import annotations

import datetime as dt
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

from gateway_shim._awaiting import AwaitingReports
from gateway_shim._binding import (
    BINDING_DIGEST_VERSION,
    RevalidationError,
    RevalidationReason,
    binding_digest,
    revalidate,
)
from gateway_shim._candidate import CandidateStatus, PresentationCandidate
from gateway_shim._conclusion import Conclusion
from gateway_shim._data_root import DataRootHold
from gateway_shim._guest import OwnExecutor, release, track
from gateway_shim._presentation import utcnow
from gateway_shim._responses import ResponseWaiters
from gateway_shim._setup import SetUp
from gateway_shim._specs import ADAPTIVE_UNKNOWN_SURFACE, AdaptiveSpecs, daily_spec, weekly_spec
from gateway_shim._waits import Presenter
from gateway_shim.config import KoreanExpressionConfig, inexact_warning
from gateway_shim.operator_glossary import DualGlossary
from gateway_shim.surfaces.card import CardOrigin
from gateway_shim.surfaces.daily import DailyFacts
from gateway_shim.telemetry import Telemetry, TelemetrySink
from kexpr.spool import log
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import CandidateOutcome, HostOutcome, Outcome

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

# Content-free records (spool.log); silent unless the host configures `kexpr`.
_log = log.logger("shim")


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
        self._waiters = ResponseWaiters(self.root.responses, monotonic)
        # The key, the root's identity and the observer (rules 2, 10, 12).
        self._hold = DataRootHold(self.root, self._waiters, monotonic)
        self._waiters.on_tick = self._hold.check_watch
        self._executor = OwnExecutor()
        self._awaiting = AwaitingReports(monotonic)
        self._adaptive = AdaptiveSpecs(config, self.root.root)
        self._setup = SetUp(
            config, self.root, self._hold, self._waiters, self._telemetry, monotonic
        )
        self._conclusion = Conclusion(config, self.root, self._awaiting, monotonic)
        self._presenter = Presenter(
            self._setup,
            self._conclusion,
            self._hold,
            self._waiters,
            self._executor,
            clock,
            monotonic,
        )
        # Rule 11: dropped without `close`, it still releases what it started.
        self._finalizer = weakref.finalize(
            self, release, self._hold, self._waiters, self._executor, self._telemetry
        )
        self._finalizer.atexit = False
        track(self)

    # ------------------------------------------------------------------ state

    @property
    def closed(self) -> bool:
        """True after `close` (rule 11)."""
        return self._setup.closed

    @property
    def reports_unwritten(self) -> int:
        """How many reports (the host's, and the shim's own shadow and rejection
        reports) could not be written since this coordinator was built (rule 16)."""
        return self._conclusion.unwritten

    @property
    def presentations_guarded(self) -> int:
        """How many presentations the last guard ended ``spool_unavailable``
        (rule 9: an exception no step expected; ``presentation_guarded`` is said
        on the ``kexpr.shim`` logger at the first)."""
        return self._presenter.guarded

    @property
    def watching(self) -> bool:
        """False while no watcher could be had and waits run on their periodic
        re-check alone (rule 12); True otherwise (also before first use)."""
        return self._hold.watching

    # ------------------------------------------------------------ the surfaces

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
        return self._presenter.present(
            lambda: daily_spec(canonical_body, finalized_event_id=finalized_event_id, facts=facts)
        )

    async def apresent_daily(
        self,
        canonical_body: str,
        *,
        finalized_event_id: str,
        facts: DailyFacts | None = None,
    ) -> PresentationCandidate:
        """`present_daily` for asyncio hosts: awaits natively (rule 4)."""
        return await self._presenter.apresent(
            lambda: daily_spec(canonical_body, finalized_event_id=finalized_event_id, facts=facts)
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
        without presenting again.
        """
        return self._presenter.present(
            lambda: weekly_spec(
                canonical_body,
                explicit_fields=explicit_fields,
                schedule_key=schedule_key,
                kind=kind,
                kst_day=kst_day,
            )
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
        """`present_weekly` for asyncio hosts: awaits natively (rule 4)."""
        return await self._presenter.apresent(
            lambda: weekly_spec(
                canonical_body,
                explicit_fields=explicit_fields,
                schedule_key=schedule_key,
                kind=kind,
                kst_day=kst_day,
            )
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
        return self._presenter.present(
            lambda: self._adaptive.spec(
                canonical_payload, callback_data, origin, surface, authority_pins
            )
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
        """`present_adaptive` for asyncio hosts: awaits natively (rule 4)."""
        return await self._presenter.apresent(
            lambda: self._adaptive.spec(
                canonical_payload, callback_data, origin, surface, authority_pins
            )
        )

    def dual_glossary(self) -> DualGlossary:
        """The dual glossary in force: ``<data root>/operator-glossary.json`` plus the
        shipped texts, or the shipped texts alone when the file is absent. Raises
        `GlossaryError` for a file that is present but invalid. Read, never written."""
        return self._adaptive.glossary()

    def dual_glossary_or_ineligible(self) -> DualGlossary:
        """`dual_glossary`, or `Ineligible` (``glossary_invalid``) for an invalid
        file, said once per change on the ``kexpr.shim`` logger (rule 15)."""
        return self._adaptive.glossary_or_ineligible()

    # -------------------------------------------------------- report and close

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
        return self._conclusion.host_report(candidate, outcome)

    def close(self) -> None:
        """Stop every thread and watch this coordinator started; later
        presentations are ``closed`` (rule 11). Idempotent."""
        self._setup.closed = True
        self._finalizer.detach()
        self._hold.close()
        self._waiters.wake_all()
        release(self._hold, self._waiters, self._executor, self._telemetry, wait=True)

    def _after_fork_in_child(self) -> None:
        """Rule 12 (`gateway_shim._guest.track`): forget the parent's threads,
        watch and waiters without stopping any; start our own on first use."""
        self._hold.after_fork_in_child()
        self._setup.after_fork_in_child()
        self._waiters.after_fork_in_child()
        self._executor.after_fork_in_child()
        self._telemetry.after_fork_in_child()
        self._awaiting.after_fork_in_child()
        self._adaptive.after_fork_in_child()
        self._conclusion.after_fork_in_child()
        self._presenter.after_fork_in_child()

"""A presentation's first two steps: set up, then published (`SetUp.begin`).

Set up: read the host's arguments (`gateway_shim._specs`), judge them, parse
the body; the zero-file ends (`_presentation.ZERO_FILES`) come before anything
touches the data root (the coordinator's rule 2). Then the data root's key and
identity (rules 10, 14), the worker's heartbeat (rule 13), and the request
published with its waiter registered first (rule 4). Every end is
`Recorder.end` at its step, checked against `_presentation.ENDS`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from gateway_shim._binding import _artifact_binding
from gateway_shim._candidate import PresentationCandidate
from gateway_shim._data_root import DataRootHold, HoldClosed, SetupFailed, spool_problem
from gateway_shim._heartbeat import Liveness, WorkerHeartbeat
from gateway_shim._identity_store import Identity
from gateway_shim._presentation import Call, Pending, Recorder, Step
from gateway_shim._responses import ResponseWaiters, Wake
from gateway_shim._specs import UNREADABLE_BINDING, Said, Spec, is_text
from gateway_shim.config import KoreanExpressionConfig
from gateway_shim.identity import (
    IdentityRefused,
    artifact_key,
    new_request_id,
    prior_artifact_keys,
)
from gateway_shim.surfaces import CanonicalSurface, Ineligible
from gateway_shim.telemetry import Telemetry
from kexpr.spool import log
from kexpr.spool.canonical import format_ts
from kexpr.spool.contract import CONTRACT_VERSION, Capsule
from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import MAX_WAIT, Actor, File, Move, SpoolMode
from kexpr.spool.messages import SPOOL_VERSION, SpoolRequest
from kexpr.spool.outcomes import Outcome

_log = log.logger("shim")


class SetUp:
    """Everything up to a published request, for every presentation of one
    coordinator."""

    def __init__(
        self,
        config: KoreanExpressionConfig,
        root: DataRoot,
        hold: DataRootHold,
        waiters: ResponseWaiters,
        telemetry: Telemetry,
        monotonic: Callable[[], float],
    ) -> None:
        self.config = config
        self.root = root
        self._hold = hold
        self._waiters = waiters
        self._telemetry = telemetry
        self._mono = monotonic
        # Rule 13: the worker's heartbeat; said once per change (None: not yet asked).
        self.heartbeat = WorkerHeartbeat(root)
        self._worker_seen_serving: bool | None = None
        # Rule 15: what was last said about the data root.
        self.spool_said = Said()
        # Rule 11: set by `close`; every later presentation ends ``closed``.
        self.closed = False

    def begin(
        self, make_spec: Callable[[], Spec], wake: Wake, call: Call
    ) -> PresentationCandidate | Pending:
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
            except Exception:  # noqa: BLE001 - rule 9: e.g. a lone surrogate; ineligible below
                binding = UNREADABLE_BINDING
        enabled = spec.enabled
        if enabled is None:
            enabled = self.config.enabled_for(surface_version)

        rec = Recorder(
            surface_version=surface_version,
            binding=binding,
            host_body=canonical_body if isinstance(canonical_body, str) else "",
            mode=self.config.mode,
            called=call.mono,
            mono=self._mono,
            telemetry=self._telemetry,
        )
        if self.closed:
            return rec.end(Step.SET_UP, Outcome.CLOSED)
        if not enabled:
            return rec.end(Step.SET_UP, Outcome.DISABLED)
        # Rule 9: the artifact's raw inputs enter the HMAC and the digest only
        # as UTF-8 text; anything else is not eligible (zero files).
        if binding == UNREADABLE_BINDING or not all(is_text(f) for f in spec.key_fields):
            return rec.end(Step.SET_UP, Outcome.INELIGIBLE)
        # The parse: right after it, an `Ineligible` is the ineligible candidate
        # (canonical, zero files); every eligibility check on the parsed surface
        # belongs here, before anything is set up.
        try:
            surface = spec.parse()
            # No call that cannot succeed: a surface whose answer cannot fit its
            # budget is ineligible (zero files, like any ineligible body).
            surface.require_answer_budget()
        except Ineligible:
            return rec.end(Step.SET_UP, Outcome.INELIGIBLE)
        except Exception:  # noqa: BLE001 - rule 9: an input the adapter cannot judge
            # is not eligible: the host's body, untouched, zero files.
            return rec.end(Step.SET_UP, Outcome.INELIGIBLE)
        # Every slot was locked by the fit table (design §6.1): no word may be
        # written anywhere, so nothing is asked (zero files).
        if not surface.slots:
            return rec.end(Step.SET_UP, Outcome.NOTHING_TO_STYLE, surface=surface)

        try:
            try:
                identity = self._hold.ensure_started()
            except (OSError, ValueError, RuntimeError) as e:
                self.say_spool(spool_problem(e, self.root))
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
            return rec.end(Step.SET_UP, Outcome.CLOSED, surface=surface)
        except IdentityRefused:
            # Rule 14: said once by the hold; nothing written, nothing minted.
            return rec.end(Step.SET_UP, Outcome.IDENTITY_MISMATCH, surface=surface)
        except (OSError, ValueError, RuntimeError):  # UnsafePath is an OSError
            return rec.end(Step.SET_UP, Outcome.SPOOL_UNAVAILABLE, surface=surface)
        # Rule 13: nothing can answer -> canonical now, no request written.
        if not self.worker_serving():
            return rec.end(Step.SET_UP, Outcome.WORKER_UNAVAILABLE, surface=surface, akey=akey)
        try:
            step = self._publish(
                surface_version, surface, capsule, (akey, prior, identity), call, rec, wake
            )
        except Exception as e:  # noqa: BLE001 - rule 9: said below when the root refused
            # Whatever the data root did, the host gets the canonical body.
            if isinstance(e, OSError):
                self.say_spool(spool_problem(e, self.root))
            return rec.end(Step.SET_UP, Outcome.SPOOL_UNAVAILABLE, surface=surface, akey=akey)
        if isinstance(step, Pending):  # a request written: the data root serves
            self.say_spool(None)
        return step

    def say_spool(self, problem: SetupFailed | None) -> None:
        """Rule 15: the data root's state, said once per change."""
        state = None if problem is None else (problem.problem, problem.unsafe)
        changed, before = self.spool_said.change(state)
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

    def worker_serving(self) -> bool:
        """Rule 13: is a worker serving the data root? A change is said once
        (logger ``kexpr.shim``: enum words, and the data root's own path)."""
        liveness = self.heartbeat.liveness()
        serving = liveness is Liveness.SERVING
        if serving != self._worker_seen_serving:
            self._worker_seen_serving = serving
            if serving:
                log.event(_log, logging.INFO, "worker_serving")
            else:
                # The root named: a worker serving another root (or a root that
                # did not exist, a typo the set-up just made) is told apart here.
                log.event(
                    _log,
                    logging.WARNING,
                    "worker_unavailable",
                    reason=liveness,
                    data_root=log.OperatorPath(str(self.root.root)),
                )
        return serving

    def _publish(
        self,
        surface_version: str,
        surface: CanonicalSurface,
        capsule: Capsule,
        keys: tuple[str, tuple[str, ...], Identity],
        call: Call,
        rec: Recorder,
        wake: Wake,
    ) -> PresentationCandidate | Pending:
        """Register the waiter, then publish the request (rule 4): submitted at
        the host's call, due `MAX_WAIT` after it. A set-up that took the whole wait
        publishes nothing (the worker could only refuse it as expired). ``keys``:
        the artifact key, the artifact's keys under the sealed keys, and the
        identity they were computed with (rule 14)."""
        akey, prior, identity = keys
        mono_deadline = call.mono + MAX_WAIT.total_seconds()
        if self._mono() >= mono_deadline:
            return rec.end(Step.SET_UP, Outcome.TIMEOUT, surface=surface, akey=akey)
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
            # Rule 14: the journal judges the key by these (gateway_shim.identity rule 6).
            identity_fingerprint=identity.fingerprint,
            earlier_fingerprints=identity.earlier,
        )
        self._waiters.register(rid, wake, mono_deadline)
        try:
            # Not fsynced (fsio rule 5 is for files that must survive a
            # crash): a request is worthless after its 4 s deadline, and a
            # torn one left by a power loss is refused by the worker's
            # strict parser (invalid_request: no row, no call).
            publish(
                self.root.tmp,
                place(self.root, File.REQUEST, Move.PUBLISH) / f"{rid}.json",
                request.to_bytes(),
                durable=False,
            )
        except BaseException:
            self._waiters.forget(rid)
            raise
        return Pending(
            surface_version=surface_version,
            surface=surface,
            capsule=capsule,
            akey=akey,
            rid=rid,
            mono_deadline=mono_deadline,
            # The answer is read, then collected, from where the shim collects it.
            response_path=source(self.root, File.ANSWER, Move.COLLECT) / f"{rid}.json",
            record=rec,
        )

    def after_fork_in_child(self) -> None:
        self.heartbeat.after_fork_in_child()
        self.spool_said.after_fork_in_child()


def place(root: DataRoot, file: File, move: Move) -> Path:
    """Where the shim's ``move`` puts ``file`` (spool.lifecycle `SPOOL_FILE_MOVES`
    gates it: a move the table does not give the shim raises `IllegalMove`)."""
    _, dst = root.route(file, move, Actor.SHIM)
    assert dst is not None, (file, move)
    return dst


def source(root: DataRoot, file: File, move: Move) -> Path:
    """Where the shim's ``move`` takes ``file`` from (gated like `place`)."""
    src, _ = root.route(file, move, Actor.SHIM)
    assert src is not None, (file, move)
    return src

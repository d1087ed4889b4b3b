"""The worker daemon: claim, dedupe, journal, one call, validate, respond (design §4, §9).

The attempt's lifecycle and every decision about it are `kexpr.spool.lifecycle`'s.
Here: the run loop and reading a claimed request. Beside it: `kexpr.worker.scan`
(listing, claiming, dispatching), `kexpr.worker.attempt` (one request to its
answer), `kexpr.worker.reports` (reports and the restart rule),
`kexpr.worker.housekeeping` (expiry, retention, litter), `kexpr.worker.status`
(counters, the status file), `kexpr.worker.inbox` (the inotify wake).

Invariants (each one is a reason for a line below):

1. One artifact, at most one wire request, ever. The decision "start an attempt"
   and the fsynced ``attempt_started`` row happen under one journal lock, and the
   dedupe index is rebuilt from verified segments at start-up, so neither two
   threads, two shims nor a restart can start a second attempt.
2. ``attempt_started`` is on disk before the call; the call runs in a thread and
   is bounded by the request's deadline (4 s after submission); a result that
   arrives later is discarded under the lock and journaled ``timeout``.
3. Fail closed: an unverifiable journal, an unsafe file, a malformed request, a
   hazardous environment or a missing key means zero calls. A missing key still
   journals ``credential_unavailable`` (the attempt is spent, zero HTTP).
4. The worker is the journal's single writer; a second worker on the same data
   root refuses to start (``worker.lock``).
5. Nothing customer-visible passes through here: the capsule holds IDs and
   tokens only, and the worker never logs content.
6. Quarantine (design §3, §5; `kexpr.spool.journal` "Torn tail"): a journal that does
   not verify at start-up, a data-root directory that is not what it was (a
   symlink, a bad mode or owner, a swapped inode — checked before every scan), a
   lock file that is not the checked inode, or a failed append puts the worker
   in quarantine *until it is restarted*: every request is answered canonical
   (``journal_unavailable``) with zero rows and zero calls; nothing is repaired,
   truncated or retried. The reason is an enum in ``worker.status.json`` and one
   stderr line. An unsafe *file* (symlink, FIFO, bad mode or owner, oversized)
   only makes its own request canonical; it is counted by reason.
7. Retention (`kexpr.spool.journal` rule 7) runs at start-up, after every scan and
   before a new attempt: open attempts in an expiring segment are terminalized
   ``claim_expired_canonical`` first, then the whole segment is removed.
8. One bad entry harms only itself (issue 14): an error while listing,
   claiming, reading or answering one spool entry answers that entry canonical
   (or leaves it untouched for the next scan) and is counted by `Fault` in
   ``worker.status.json`` (``kexpr status`` shows it); every other request is
   still served. EMFILE/ENFILE/ENOMEM (`RESOURCE_ERRNOS`) stop the scan and the
   rescan timer retries it. The worker exits only for what a restart cannot fix
   (`kexpr.worker.exitcodes`: 71, 73, 74, 78), never with a traceback for a spool entry.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kexpr.spool import log
from kexpr.spool.fsio import (
    FileId,
    LockTimeout,
    Reservation,
    Sharing,
    UnsafePath,
    UnsafeReason,
    make_flock,
    publish,
    read_private_identified,
    remove_reservations,
    unlink_if_same,
    unlink_quiet,
)
from kexpr.spool.journal import (
    AppendRefused,
    AttemptRecord,
    Finding,
    Journal,
    JournalUnverified,
    format_ts,
    parse_ts,
)
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import (
    COMMIT_GRACE,
    MAX_WAIT,
    Held,
    Outcome,
)
from kexpr.spool.messages import (
    MAX_MESSAGE_BYTES,
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    SpoolRequest,
    SpoolResponse,
    SpoolVersion,
    UnknownSpoolVersion,
    parse_request,
)
from kexpr.spool.outcomes import ResponseOutcome
from kexpr.spool.rehearsal import MarkerRefusal, mark_rehearsal_root, rehearsal_refusal
from kexpr.worker import attempt, housekeeping, reports, scan
from kexpr.worker.attempt import _Quarantined
from kexpr.worker.cooldown import CoolDown
from kexpr.worker.environment import hazardous_environment, rehearsal_hazards
from kexpr.worker.exitcodes import ExitCode
from kexpr.worker.inbox import _InboxWatch
from kexpr.worker.preload import Preload
from kexpr.worker.provider import build_client
from kexpr.worker.reports import REPORT_GROUP_MAX
from kexpr.worker.scan import RESOURCE_ERRNOS, is_hex32, json_names, resource
from kexpr.worker.speed import SpeedModel
from kexpr.worker.status import (
    FAULT_FOR_REFUSED_APPEND,
    Counters,
    Fault,
    wait_ready,
    write_status,
)

if TYPE_CHECKING:
    import openai

RESCAN_INTERVAL_S: Final = 1.0
_log = log.logger("worker")
# What `_enter_quarantine` may be given: the enum words of its callers (anything
# else is logged as "other": a log record carries enum words only).
_QUARANTINE_REASONS: Final = frozenset(
    {r.value for r in UnsafeReason} | {f.value for f in Finding} | {"io_error", "inode_changed"}
)
POOL_SIZE: Final = 8


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Worker:
    def __init__(
        self,
        root: DataRoot,
        *,
        environ: dict[str, str] | None = None,
        client_factory: Callable[[], openai.OpenAI | None] = build_client,
        clock: Callable[[], dt.datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
        commit_grace: dt.timedelta = COMMIT_GRACE,
        rescan_interval_s: float = RESCAN_INTERVAL_S,
        preload: Preload | None = None,
        rehearsal: bool = False,
    ) -> None:
        self.root = root
        # A rehearsal (`kexpr.worker.rehearsal`): the client_factory is the
        # built-in model's, the data root is marked (`kexpr.spool.rehearsal`).
        self.rehearsal = rehearsal
        self._environ = dict(os.environ) if environ is None else environ
        self._client_factory = client_factory
        # Wall time stamps rows; every duration is measured on ``monotonic``
        # (spool.lifecycle rule 6). Both are injected so tests can step one.
        self._clock = clock
        self._mono = monotonic
        self._wall0, self._mono0 = clock(), monotonic()
        # Rule 7 of spool.lifecycle: sticky once the wall clock was seen to step.
        self.clock_step = False
        self._grace = commit_grace
        self._rescan = rescan_interval_s
        # A child verifying the journal since before the SDK import (worker.preload).
        self._preload = preload
        self.journal = Journal(root)
        self.journal_ok = False
        # Why the worker is in quarantine (rule 6): an enum value, or None.
        self.quarantine: str | None = None
        # Why new attempts are refused while the journal is fine (``segment_full``:
        # spool.journal rule 8), or None. Cleared by the next start row written.
        self.refusing: str | None = None
        self._tree: dict[str, FileId] | None = None
        self._sharing: Sharing | None = None
        self.counters = Counters(clock=monotonic)
        # Admission at the provider's real speed and the provider cool-down
        # (kexpr.worker.speed, kexpr.worker.cooldown): in memory, on ``monotonic``.
        self.speed = SpeedModel()
        self.cooldown = CoolDown()
        # attempt_id -> what *this* process holds of an open attempt (its own
        # call, or an answered attempt awaiting its report; spool.lifecycle).
        # Rebuilt from the journal and responses/ at start-up. Guarded by the
        # journal lock.
        self._held: dict[str, Held] = {}
        # attempt_id -> request_id of its accepted response file (the attempt's
        # durable AWAITING_REPORT; removed once its terminal row is durable).
        self._answers: dict[str, str] = {}
        # request_id -> monotonic time after which its response file is litter
        # (RESPONSE_TTL; spool.lifecycle `SPOOL_FILE_MOVES`).
        self._litter: dict[str, float] = {}
        self._litter_lock = threading.Lock()
        self._busy: set[str] = set()
        self._busy_lock = threading.Lock()
        # Refused entries whose file could not be removed (e.g. a directory
        # planted at ``claimed/<id>.json``): counted once, then skipped while
        # they are still listed, so one stuck entry is not re-handled every scan.
        self._stuck: set[tuple[str, str]] = set()
        # reports/ files of a protocol version this release does not know: kept,
        # counted once, read once per change (kexpr.worker.reports.KeptReports).
        self._kept_reports = reports.KeptReports()
        self._wake = threading.Event()
        self._client: openai.OpenAI | None = None
        self._started_at = format_ts(clock())
        self._state = "starting"

    # ------------------------------------------------------------------ running

    def run(self, stop: threading.Event) -> ExitCode:
        try:
            return self._run(stop)
        finally:
            if self._preload is not None:
                self._preload.discard()

    def _run(self, stop: threading.Event) -> ExitCode:
        if hazardous_environment(self._environ):
            return ExitCode.HAZARDOUS_ENVIRONMENT
        if self.rehearsal and rehearsal_hazards(self._environ):
            return ExitCode.HAZARDOUS_ENVIRONMENT
        try:
            self.root.ensure()
        except (UnsafePath, OSError):
            return ExitCode.UNSAFE_DATA_ROOT
        wlock = make_flock(self.root.worker_lock)
        try:
            wlock.acquire(timeout=0)
        except LockTimeout:
            return ExitCode.ANOTHER_WORKER
        except (UnsafePath, OSError):
            return ExitCode.UNSAFE_DATA_ROOT
        try:
            refused = self._check_rehearsal_marker()
            if refused is not None:
                return refused
            return self._run_locked(stop)
        finally:
            wlock.release()

    def _check_rehearsal_marker(self) -> ExitCode | None:
        """Under ``worker.lock``, before any row (`kexpr.spool.rehearsal` rules 2
        and 3): a rehearsal never writes into a root with real evidence and marks
        its root before its first row; a real worker never writes into a
        rehearsal root. A refusal is one stderr line (an enum word) and exit 74."""
        refusal = rehearsal_refusal(self.root, rehearsal=self.rehearsal)
        if refusal is None and self.rehearsal:
            try:
                mark_rehearsal_root(self.root)
            except (UnsafePath, OSError):
                refusal = MarkerRefusal.UNSAFE_MARKER
        if refusal is None:
            return None
        print(f"kexpr worker: refusing the data root: {refusal.value}", file=sys.stderr, flush=True)
        return ExitCode.UNSAFE_DATA_ROOT

    def prepare(self) -> None:
        """Build the one client (None without a key), remember the data root's
        directories, rebuild the dedupe index from verified segments; then
        terminalize what died with a previous worker and apply retention."""
        self._client = self._client_factory()
        if self._client is not None:
            # Zero requests: the SDK imports its resource modules on first
            # attribute access (~0.3–1 s here); pay that before "ready", not
            # inside the first artifact's 4 s deadline.
            self._client.chat.completions  # noqa: B018
        try:
            self._sharing, self._tree = self.root.verify_tree_sharing()
        except UnsafePath as e:
            self._enter_quarantine(e.reason.value)
            return
        except OSError:
            self._enter_quarantine("io_error")
            return
        try:
            # A SIGKILLed predecessor's answer reservations (kexpr.worker.attempt):
            # we hold worker.lock, so none is anyone's any more.
            remove_reservations(self.root.tmp)
        except (UnsafePath, OSError):
            pass  # the tree check finds an unsafe tmp/; a leftover costs one inode
        try:
            blob = self._preload.result() if self._preload is not None else None
            # adopt() installs the child's index only if every journal file is
            # still the one it read; anything else: the full load, here.
            if blob is None or not self.journal.adopt(blob):
                self.journal.load()
            self.journal_ok = True
        except JournalUnverified as e:
            # Fail closed: answer every request canonical, zero calls, zero rows.
            self._enter_quarantine(e.finding.value)
        except UnsafePath as e:
            self._enter_quarantine(e.reason.value)
        except OSError:
            self._enter_quarantine("io_error")
        if self.journal_ok:
            # What a dead predecessor left open is answered or lost, known from
            # responses/ (spool.lifecycle rule 3); then the reports it left
            # unjournaled (it died before its tick) are judged like any other.
            self._adopt_inherited()
            self._scan_reports()
        self._sweep()

    def _enter_quarantine(self, reason: str) -> None:
        """Rule 6: refuse every new attempt until restarted. Enum only, once."""
        self.journal_ok = False
        if self.quarantine is None:
            self.quarantine = reason
            print(f"kexpr worker: quarantine: {reason}", file=sys.stderr, flush=True)
            log.event(
                _log,
                logging.WARNING,
                "worker_quarantine",
                reason=log.known(reason, _QUARANTINE_REASONS),
            )

    def _check_tree(self, *, walk: bool = True) -> None:
        """Every product directory is still the checked one (rule 6).

        ``walk=False`` (before every scan): one ``lstat`` per directory
        (`DataRoot.glance_tree`, ~10× cheaper); the full no-symlink walk
        (`DataRoot.verify_tree`) runs at start-up and on the rescan timer.
        """
        if not self.journal_ok:
            return
        try:
            if walk or self._sharing is None:
                tree = self.root.verify_tree()
            else:
                tree = self.root.glance_tree(self._sharing)
        except UnsafePath as e:
            self._enter_quarantine(e.reason.value)
            return
        except OSError:
            self._enter_quarantine("io_error")
            return
        if self._tree is not None and tree != self._tree:
            self._enter_quarantine("inode_changed")

    def _run_locked(self, stop: threading.Event) -> ExitCode:
        self.prepare()
        watch: _InboxWatch | None
        try:
            watch = _InboxWatch((self.root.requests, self.root.reports), self._wake)
        except OSError:
            # No inotify (EMFILE, the watch limit, an inbox already gone): the
            # rescan timer alone finds every request, later but never lost.
            self.counters.fault(Fault.WATCH_FAILED)
            watch = None
        pool = cf.ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="kexpr-call")
        try:
            self._state = "ready"
            self._scan(pool)
            self._write_status()
            log.event(
                _log,
                logging.INFO,
                "worker_ready",
                journal_verified=self.journal_ok,
                credential=self._client is not None,
                rehearsal=self.rehearsal,
            )
            next_tick = time.monotonic() + self._rescan
            while not stop.is_set():
                self._wake.wait(max(0.0, next_tick - time.monotonic()))
                self._wake.clear()
                if stop.is_set():
                    break
                due = time.monotonic() >= next_tick
                # The full tree walk on the timer, a glance on every wake;
                # reports as one group on the timer (REPORT_GROUP_MAX).
                self._scan(pool, walk=due, reports=due)
                # Housekeeping on the timer, not on every wake: the sweep takes the
                # journal lock and the status file is a heartbeat. Done per wake,
                # both sat on the hot path of every artifact (bench/run.py profile).
                if due:
                    self._sweep()
                    self._write_status()
                    next_tick = time.monotonic() + self._rescan
        finally:
            self._state = "stopping"
            self._write_status()
            # Graceful stop: in-flight calls finish or hit their deadline (<= 4 s).
            pool.shutdown(wait=True)
            # Reports that arrived since the last tick are journaled now, not
            # left for the next worker (whose restart would expire their attempts).
            self._scan_reports()
            if watch is not None:
                watch.stop()
            self._state = "stopped"
            self._write_status()
            log.event(_log, logging.INFO, "worker_stopped")
        return ExitCode.OK

    # The inbox scan (worker.scan): listing, claiming, dispatching.

    def _scan(
        self, pool: cf.ThreadPoolExecutor, *, walk: bool = True, reports: bool = True
    ) -> None:
        scan.scan(self, pool, walk=walk, reports=reports)

    def _scan_reports(self) -> None:
        scan.scan_reports(self)

    # ----------------------------------------------------------------- requests

    def handle_claimed(self, name: str) -> None:
        """Process one claimed request file to its response (or silent drop)."""
        path = self.root.claimed / name
        rid = name[: -len(".json")]
        try:
            data, fid = read_private_identified(path, max_bytes=MAX_MESSAGE_BYTES)
            req = parse_request(data)
            if req.request_id != rid:
                raise MessageError("request_id")
            submitted = parse_ts(req.submitted_at_utc)
            deadline = parse_ts(req.deadline_at_utc)
            if not dt.timedelta(0) < deadline - submitted <= MAX_WAIT:
                raise MessageError("deadline")
        except FileNotFoundError:
            return
        except (UnsafePath, MessageError, OSError, ValueError) as e:
            if isinstance(e, OSError) and not isinstance(e, UnsafePath) and resource(e):
                # Out of descriptors or memory: untouched, the next scan retries.
                self.counters.fault(Fault.RESOURCE_EXHAUSTED)
                return
            # Canonical, zero calls, zero rows.
            self.counters.bump("invalid_requests")
            if isinstance(e, UnknownSpoolVersion):
                # A newer shim's request: refused closed, and said so.
                self.counters.fault(Fault.UNKNOWN_SPOOL_VERSION)
            if isinstance(e, OSError) and not isinstance(e, UnsafePath):
                self.counters.fault(Fault.READ_FAILED)
            if not self._drop_file(path, e):
                self.counters.fault(Fault.ENTRY_STUCK)
                with self._busy_lock:
                    self._stuck.add(("claimed", name))
            if is_hex32(rid):
                self._respond(rid, None, ResponseStatus.CANONICAL, Outcome.INVALID_REQUEST)
            return
        try:
            self._handle_request(req, submitted, deadline)
        finally:
            try:
                # Remove only the file we read (fsio rule 4); a swapped one is
                # left for the next scan, where it is deduped like any request.
                unlink_if_same(path, fid)
            except UnsafePath as e:
                self.counters.unsafe_file(e)
            except OSError:
                pass

    # ------------------------------------------------------------------ reports

    # The attempt handler (worker.attempt) and report journaling (worker.reports).

    def _handle_request(
        self, req: SpoolRequest, submitted: dt.datetime, deadline: dt.datetime
    ) -> None:
        attempt.handle_request(self, req, submitted, deadline)

    def _finalized(self, attempt_id: str, outcome: Outcome) -> None:
        attempt.finalized(self, attempt_id, outcome)

    def _expire(self, rec: AttemptRecord) -> None:
        attempt.expire(self, rec)

    def _adopt_inherited(self) -> None:
        reports.adopt_inherited(self)

    def _handle_reports(self, names: list[str]) -> None:
        reports.handle_reports(self, names)

    def _names(self, d: Path) -> list[str]:
        return json_names(d)

    def _remove_response(self, rid: str) -> None:
        _quiet(unlink_quiet, self.root.responses / f"{rid}.json")

    def _drop_file(self, path: Path, e: Exception) -> bool:
        """A spool file that could not be read or parsed: removed; an unsafe one
        is also counted by its reason (enum only). False if it is still there."""
        if isinstance(e, UnsafePath):
            self.counters.unsafe_file(e)
        return _quiet(unlink_quiet, path)

    # Housekeeping (worker.housekeeping): expiry, retention, clock step, litter.

    def _sweep(self) -> None:
        housekeeping.sweep(self)

    def _retain_if_due(self, j: Journal) -> None:
        housekeeping.retain_if_due(self, j)

    def _remember_litter(self, rid: str, mono: float) -> None:
        housekeeping.remember_litter(self, rid, mono)

    def _journal_failed(self, e: BaseException) -> None:
        if isinstance(e, AppendRefused):
            # Nothing was written (or it was undone): the journal still
            # verifies. This request is canonical; the next one tries again.
            self.counters.fault(FAULT_FOR_REFUSED_APPEND.get(e.finding, Fault.ENTRY_ERROR))
        elif isinstance(e, JournalUnverified):
            self._enter_quarantine(e.finding.value)
        elif isinstance(e, UnsafePath):
            self._enter_quarantine(e.reason.value)
        elif isinstance(e, _Quarantined):
            self.journal_ok = False
        else:
            self._enter_quarantine("io_error")

    # ---------------------------------------------------------------- responses

    def _respond(
        self,
        rid: str,
        attempt_id: str | None,
        status: ResponseStatus,
        outcome: ResponseOutcome,
        *,
        version: SpoolVersion = SPOOL_VERSION,
        reservation: Reservation | None = None,
    ) -> bool:
        """``version``: the request's own, so a shim of the older protocol can
        parse its answer (`kexpr.spool.messages`)."""
        return self._publish_response(
            SpoolResponse(
                spool_version=version,
                request_id=rid,
                attempt_id=attempt_id,
                status=status,
                outcome=outcome,
                composition=None,
            ),
            reservation=reservation,
        )

    def _publish_response(
        self,
        resp: SpoolResponse,
        *,
        durable: bool = False,
        reservation: Reservation | None = None,
    ) -> bool:
        """``durable``: an accepted response is its attempt's AWAITING_REPORT
        (spool.lifecycle rule 3) and must survive a crash: fsynced, and removed
        by the worker once the terminal row is durable. Any other answer is
        only useful before its deadline (a torn one fails the shim's strict
        parse): not fsynced, and removed as litter after RESPONSE_TTL if the
        shim never collected it. ``reservation``: the staging file reserved
        before the call (`kexpr.worker.attempt`; issue 19), used once.
        False if nothing was published."""
        if not durable:
            self._remember_litter(resp.request_id, self._mono())
        final = self.root.responses / f"{resp.request_id}.json"
        try:
            if reservation is not None and reservation.final_path == final:
                reservation.publish(resp.to_bytes(), durable=durable)
            else:
                publish(self.root.tmp, final, resp.to_bytes(), durable=durable)
        except UnsafePath as e:
            # responses/ is not what it was: the shim times out canonical.
            self._enter_quarantine(e.reason.value)
            return False
        except (OSError, ValueError):
            # FileExistsError included: the shim falls back to canonical.
            # ValueError: the reservation was already used (a caller bug).
            self.counters.fault(Fault.RESPOND_FAILED)
            return False
        return True

    # ------------------------------------------------------------------- status

    def _write_status(self) -> None:
        write_status(self)


def _quiet(fn: Callable[[Path], None], path: Path) -> bool:
    """Best-effort removal of a refused file; an unsafe directory is caught by
    the tree check before the next scan. False if it failed."""
    try:
        fn(path)
    except (OSError, UnsafePath):
        return False
    return True


__all__ = [
    "POOL_SIZE",
    "REPORT_GROUP_MAX",
    "RESCAN_INTERVAL_S",
    "RESOURCE_ERRNOS",
    "Counters",
    "Fault",
    "Worker",
    "wait_ready",
]

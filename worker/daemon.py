"""The worker daemon: claim, dedupe, journal, one call, validate, respond (design §4, §9).

The attempt's lifecycle and every decision about it are `kexpr.spool.lifecycle`'s.
Here: the run loop, which wires the worker's parts (`kexpr.worker.parts`: the
`Outbox`, the `Quarantine`, the attempts held in memory, the counters).
Beside it: `kexpr.worker.scan` (listing, claiming, dispatching, reading a
claimed request), `kexpr.worker.attempt` (one request to its answer),
`kexpr.worker.reports` (reports and the restart rule),
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
   in quarantine *until it is restarted*, or until the operator's clear
   (`kexpr.worker.resume`: the start-up checks run again, and must pass):
   every request is answered canonical
   (``journal_unavailable``) with zero rows and zero calls; nothing is repaired,
   truncated or retried. The reason is an enum in ``worker.status.json`` and one
   stderr line. An unsafe *file* (symlink, FIFO, bad mode or owner, oversized)
   only makes its own request canonical; it is counted by reason.
7. Retention (`kexpr.spool.journal` rule 7) runs at start-up, after every scan and
   before a new attempt: open attempts in an expiring segment are terminalized
   ``claim_expired_canonical`` first, then the whole segment is removed.
8. One bad entry harms only itself: an error while listing,
   claiming, reading or answering one spool entry answers that entry canonical
   (or leaves it untouched for the next scan) and is counted by `Fault` in
   ``worker.status.json`` (``kexpr status`` shows it); every other request is
   still served. EMFILE/ENFILE/ENOMEM (`RESOURCE_ERRNOS`) stop the scan and the
   rescan timer retries it. The worker exits only for what a restart cannot fix
   (`kexpr.worker.exitcodes`: 71, 73, 74, 78), never with a traceback for a spool entry.
9. A stated spend bound (`kexpr.worker.spend`): at most the operator's cap of
   start rows in any rolling hour and any UTC day, counted from the journal (so
   a restart does not reset it); past it a request is answered canonical
   ``spend_cap_reached`` with no row and no call.
10. The data root the supervisor checked, or none (`kexpr.ops.supervisor`
   rule 5): started with ``KEXPR_DATA_ROOT_ID=<dev>:<ino>``, the worker walks
   to its root before creating, locking or claiming anything and refuses to
   start (exit 74, one enum word: ``inode_changed``, ``data_root_missing``,
   ``root_id_malformed``, or the path's own reason) unless it is that
   directory; the tree remembered at start-up and at an operator's clear must
   have that root too (``inode_changed`` quarantine otherwise). So a directory
   swapped in after the supervisor's check is never served: zero claims, zero
   rows, zero calls there. Without the variable (systemd, by hand) the root is
   whatever the path names at start-up, as invariant 6 then checks.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import enum
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from kexpr.spool import log
from kexpr.spool.fsio import (
    LockTimeout,
    UnsafePath,
    UnsafeReason,
    make_flock,
    remove_reservations,
)
from kexpr.spool.journal import Journal
from kexpr.spool.layout import ROOT_ID_VARIABLE, DataRoot, parse_root_id
from kexpr.spool.lifecycle import COMMIT_GRACE
from kexpr.spool.rehearsal import MarkerRefusal, mark_rehearsal_root, rehearsal_refusal
from kexpr.worker import housekeeping, reports, resume, scan
from kexpr.worker.environment import hazardous_environment, rehearsal_hazards, warn_if_root
from kexpr.worker.exitcodes import ExitCode
from kexpr.worker.inbox import _InboxWatch
from kexpr.worker.parts import Parts
from kexpr.worker.preload import Preload
from kexpr.worker.provider import build_client
from kexpr.worker.quarantine import JOURNAL_ERRORS, RESOURCE_ERRNOS
from kexpr.worker.reports import REPORT_GROUP_MAX
from kexpr.worker.signalstop import StopRequest
from kexpr.worker.spend import SpendCaps
from kexpr.worker.status import Counters, Fault, StatusFile, wait_ready

if TYPE_CHECKING:
    import openai

RESCAN_INTERVAL_S: Final = 1.0


class RootRefusal(enum.StrEnum):
    """Why the worker refuses the data root the supervisor handed it (invariant
    10), besides the path's own `UnsafeReason` (``inode_changed``: another
    directory)."""

    ROOT_ID_MALFORMED = "root_id_malformed"
    DATA_ROOT_MISSING = "data_root_missing"
    IO_ERROR = "io_error"


ROOT_REFUSALS: Final = frozenset({r.value for r in RootRefusal} | {r.value for r in UnsafeReason})
_log = log.logger("worker")
POOL_SIZE: Final = 8


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Worker:
    """The run loop. Its parts (``parts``) keep the state; the scan, the
    attempt handler, the reports and the housekeeping act on them."""

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
        spend: SpendCaps | None = None,
    ) -> None:
        self.root = root
        # A rehearsal (`kexpr.worker.rehearsal`): the client_factory is the
        # built-in model's, the data root is marked (`kexpr.spool.rehearsal`).
        self.rehearsal = rehearsal
        self._environ = dict(os.environ) if environ is None else environ
        self._client_factory = client_factory
        # Wall time stamps rows; every duration is measured on ``monotonic``
        # (spool.lifecycle rule 6), the run loop's timer included.
        self._mono = monotonic
        self._rescan = rescan_interval_s
        # A child verifying the journal since before the SDK import (worker.preload).
        self._preload = preload
        # ``spend``: the operator's caps on paid calls (kexpr.worker.spend).
        self.parts = Parts.build(
            root, clock=clock, monotonic=monotonic, grace=commit_grace, spend=spend
        )
        self.status = StatusFile(self.parts, rehearsal=rehearsal)
        # The parts' own objects, for ops and tests to read (never replaced).
        self.journal: Journal = self.parts.journal
        self.counters: Counters = self.parts.counters
        self._wake = threading.Event()

    # What tests and ops read of the parts.

    @property
    def journal_ok(self) -> bool:
        return self.parts.quarantine.journal_ok

    @property
    def quarantine(self) -> str | None:
        """Why the worker is in quarantine (rule 6): an enum value, or None."""
        return self.parts.quarantine.reason

    @property
    def refusing(self) -> str | None:
        return self.parts.quarantine.refusing

    @property
    def clock_step(self) -> bool:
        return self.parts.clockwatch.step

    # ------------------------------------------------------------------ running

    def run(self, stop: StopRequest) -> ExitCode:
        try:
            return self._run(stop)
        finally:
            if self._preload is not None:
                self._preload.discard()

    def _run(self, stop: StopRequest) -> ExitCode:
        if hazardous_environment(self._environ):
            return ExitCode.HAZARDOUS_ENVIRONMENT
        if self.rehearsal and rehearsal_hazards(self._environ):
            return ExitCode.HAZARDOUS_ENVIRONMENT
        refused = self._check_root_identity()
        if refused is not None:
            return refused
        try:
            self.root.ensure()
        except OSError:
            return ExitCode.UNSAFE_DATA_ROOT
        wlock = make_flock(self.root.worker_lock)
        try:
            wlock.acquire(timeout=0)
        except LockTimeout:
            return ExitCode.ANOTHER_WORKER
        except OSError:
            return ExitCode.UNSAFE_DATA_ROOT
        try:
            refused = self._check_rehearsal_marker()
            if refused is not None:
                return refused
            return self.serve(stop)
        finally:
            wlock.release()

    def _check_root_identity(self) -> ExitCode | None:
        """Invariant 10, before anything is created or claimed: with
        ``KEXPR_DATA_ROOT_ID`` (the supervisor's), the root must be that
        directory. A refusal is one stderr line (an enum word) and exit 74;
        without the variable nothing is checked (systemd, by hand)."""
        value = self._environ.get(ROOT_ID_VARIABLE)
        if value is None:
            return None
        expected = parse_root_id(value)
        if expected is None:
            why = RootRefusal.ROOT_ID_MALFORMED.value
        else:
            try:
                ident = self.root.identity()
            except UnsafePath as e:
                why = e.reason.value
            except FileNotFoundError:
                why = RootRefusal.DATA_ROOT_MISSING.value
            except OSError:
                why = RootRefusal.IO_ERROR.value
            else:
                if ident == expected:
                    # Kept: the tree remembered at start-up and at a clear
                    # must have this root too (the swap may come after here).
                    self.parts.quarantine.checked_root = expected
                    return None
                why = UnsafeReason.INODE_CHANGED.value
        print(f"kexpr worker: refusing the data root: {why}", file=sys.stderr, flush=True)
        log.event(
            _log, logging.WARNING, "worker_root_refused", reason=log.known(why, ROOT_REFUSALS)
        )
        return ExitCode.UNSAFE_DATA_ROOT

    def _check_rehearsal_marker(self) -> ExitCode | None:
        """Under ``worker.lock``, before any row (`kexpr.spool.rehearsal` rules 2
        and 3): a rehearsal never writes into a root with real evidence and marks
        its root before its first row; a real worker never writes into a
        rehearsal root. A refusal is one stderr line (an enum word) and exit 74."""
        refusal = rehearsal_refusal(self.root, rehearsal=self.rehearsal)
        if refusal is None and self.rehearsal:
            try:
                mark_rehearsal_root(self.root)
            except OSError:
                refusal = MarkerRefusal.UNSAFE_MARKER
        if refusal is None:
            return None
        print(f"kexpr worker: refusing the data root: {refusal.value}", file=sys.stderr, flush=True)
        return ExitCode.UNSAFE_DATA_ROOT

    def prepare(self) -> None:
        """Build the one client (None without a key), remember the data root's
        directories, rebuild the dedupe index from verified segments; then
        terminalize what died with a previous worker and apply retention."""
        p = self.parts
        p.client = self._client_factory()
        if p.client is None and not self.rehearsal:
            # Invariant 3: served (each request journals credential_unavailable,
            # zero HTTP), but never silently: one line, a WARNING, and the
            # status's ``credential: absent`` makes `kexpr status` not healthy.
            print(
                "kexpr worker: no credential: OPENAI_API_KEY is not set;"
                " every request is answered credential_unavailable",
                file=sys.stderr,
                flush=True,
            )
            log.event(_log, logging.WARNING, "worker_no_credential")
        if p.client is not None:
            # Zero requests: the SDK imports its resource modules on first
            # attribute access (~0.3–1 s here); pay that before "ready", not
            # inside the first artifact's 4 s deadline.
            p.client.chat.completions  # noqa: B018
        if not p.quarantine.remember_tree():
            return
        try:
            # A SIGKILLed predecessor's answer reservations (kexpr.worker.attempt):
            # we hold worker.lock, so none is anyone's any more.
            remove_reservations(self.root.tmp)
        except OSError:
            pass  # the tree check finds an unsafe tmp/; a leftover costs one inode
        try:
            blob = self._preload.result() if self._preload is not None else None
            # adopt() installs the child's index only if every journal file is
            # still the one it read; anything else: the full load, here.
            if blob is None or not p.journal.adopt(blob):
                p.journal.load()
            p.quarantine.journal_ok = True
            # The spend bound counts the journal's start rows, not this
            # process's memory: a restart does not reset it (worker.spend rule 2).
            p.spend.seed(p.journal.index, p.clock(), p.mono(), step=p.clockwatch.steps)
        except JOURNAL_ERRORS as e:
            # Fail closed: answer every request canonical, zero calls, zero rows.
            p.quarantine.failed(e)
        if p.quarantine.journal_ok:
            # What a dead predecessor left open is answered or lost, known from
            # responses/ (spool.lifecycle rule 3); then the reports it left
            # unjournaled (it died before its tick) are judged like any other.
            reports.adopt_inherited(p)
            scan.scan_reports(p)
        housekeeping.sweep(p)

    def serve(self, stop: StopRequest) -> ExitCode:
        """Under ``worker.lock``: prepare, then scan on every wake and on the
        rescan timer until ``stop``."""
        warn_if_root()
        self.prepare()
        p = self.parts
        watch: _InboxWatch | None
        try:
            watch = _InboxWatch((self.root.requests, self.root.reports), self._wake)
        except OSError:
            # No inotify (EMFILE, the watch limit, an inbox already gone): the
            # rescan timer alone finds every request, later but never lost.
            p.counters.fault(Fault.WATCH_FAILED)
            watch = None
        pool = cf.ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="kexpr-call")
        try:
            self.status.state = "ready"
            scan.scan(p, pool)
            self.status.write()
            log.event(
                _log,
                logging.INFO,
                "worker_ready",
                journal_verified=p.quarantine.journal_ok,
                credential=p.client is not None,
                rehearsal=self.rehearsal,
            )
            next_tick = self._mono() + self._rescan
            while not stop.is_set():
                self._wake.wait(max(0.0, next_tick - self._mono()))
                self._wake.clear()
                if stop.is_set():
                    break
                due = self._mono() >= next_tick
                if due:
                    # In quarantine: the operator's clear, if asked (worker.resume).
                    cleared = resume.clear_if_asked(p)
                    if cleared is not None:
                        p.quarantine.last_clear = cleared.to_json()
                        if cleared.result is resume.ClearResult.CLEARED:
                            housekeeping.sweep(p)
                # The full tree walk on the timer, a glance on every wake;
                # reports as one group on the timer (REPORT_GROUP_MAX).
                scan.scan(p, pool, walk=due, reports=due)
                # Housekeeping on the timer, not on every wake: the sweep takes the
                # journal lock and the status file is a heartbeat. Done per wake,
                # both sat on the hot path of every artifact (`make bench`'s profile).
                if due:
                    housekeeping.sweep(p)
                    self.status.write()
                    next_tick = self._mono() + self._rescan
        finally:
            self.status.state = "stopping"
            self.status.write()
            # Graceful stop: in-flight calls finish or hit their deadline (<= 4 s).
            pool.shutdown(wait=True)
            # Reports that arrived since the last tick are journaled now, not
            # left for the next worker (whose restart would expire their attempts).
            scan.scan_reports(p)
            if watch is not None:
                watch.stop()
            self.status.state = "stopped"
            self.status.write()
            log.event(_log, logging.INFO, "worker_stopped")
        return ExitCode.OK

    def handle_claimed(self, name: str) -> None:
        """Process one claimed request file to its response (or silent drop)."""
        scan.handle_claimed(self.parts, name)


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

"""The worker daemon: claim, dedupe, journal, one call, validate, respond (SPEC §4, §9).

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
6. Quarantine (SPEC §3, §5; `spool.journal` "Torn tail"): a journal that does
   not verify at start-up, a data-root directory that is not what it was (a
   symlink, a bad mode or owner, a swapped inode — checked before every scan), a
   lock file that is not the checked inode, or a failed append puts the worker
   in quarantine *until it is restarted*: every request is answered canonical
   (``journal_unavailable``) with zero rows and zero calls; nothing is repaired,
   truncated or retried. The reason is an enum in ``worker.status.json`` and one
   stderr line. An unsafe *file* (symlink, FIFO, bad mode or owner, oversized)
   only makes its own request canonical; it is counted by reason.
7. Retention (`spool.journal` rule 7) runs at start-up, after every scan and
   before a new attempt: open attempts in an expiring segment are terminalized
   ``claim_expired_canonical`` first, then the whole segment is removed.
8. One bad entry harms only itself (issue 14): an error while listing,
   claiming, reading or answering one spool entry answers that entry canonical
   (or leaves it untouched for the next scan) and is counted by `Fault` in
   ``worker.status.json`` (``kexpr status`` shows it); every other request is
   still served. EMFILE/ENFILE/ENOMEM (`RESOURCE_ERRNOS`) stop the scan and the
   rescan timer retries it. The worker exits only for what a restart cannot fix
   (`worker.exitcodes`: 71, 73, 74, 78), never with a traceback for a spool entry.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import enum
import errno
import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spool.contract import Verdict, judge
from spool.fsio import (
    FileId,
    LockTimeout,
    Sharing,
    UnsafePath,
    claim,
    list_dir,
    make_flock,
    publish,
    read_private_identified,
    replace_private,
    unlink_if_same,
    unlink_quiet,
)
from spool.journal import (
    AppendRefused,
    AttemptRecord,
    Journal,
    JournalUnverified,
    format_ts,
    parse_ts,
)
from spool.layout import DataRoot
from spool.lifecycle import (
    COMMIT_GRACE,
    MAX_WAIT,
    RESPONSE_TTL,
    SELECTED_OUTCOMES,
    Admission,
    Answer,
    Event,
    Held,
    Mode,
    Outcome,
    Phase,
    Reply,
    admit_request,
    answer_existing,
    conclude,
    expiry_due,
    held_inherited,
    inherited_phase,
    remaining_budget,
    report_admissible,
    step_observed,
    transition,
)
from spool.messages import (
    MAX_MESSAGE_BYTES,
    RESPONSE_FOR_TERMINAL,
    SPOOL_VERSION,
    TERMINAL_FOR_REPORT,
    MessageError,
    ResponseOutcome,
    ResponseStatus,
    SpoolReport,
    SpoolRequest,
    SpoolResponse,
    parse_report,
    parse_request,
    parse_response,
)
from watchdog.observers.inotify_c import CallbackId, InotifyConstants, InotifyEvent, InotifyFD, Mask

from worker.environment import hazardous_environment
from worker.exitcodes import ExitCode
from worker.preload import Preload
from worker.provider import ProviderOutcome, ProviderResult, build_client, call_with_deadline

if TYPE_CHECKING:
    import openai

RESCAN_INTERVAL_S: Final = 1.0
# Reports are journaled in groups on the rescan timer (group commit): one lock,
# one write and one fsync per segment for every report that arrived in the last
# interval, instead of one fsync per report on the next request's path. A
# report's file is removed only after its row is synced, so a crash leaves it
# in reports/ for the next worker. At most this many rows per group.
REPORT_GROUP_MAX: Final = 256
POOL_SIZE: Final = 8
# Running out of descriptors or memory (``ulimit -n``, a full file table, ENOMEM)
# is the machine's state, not an entry's: the scan stops, nothing is dropped, and
# the next scan (the rescan timer) tries again. Never an exit, never a traceback.
RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


class Fault(enum.StrEnum):
    """Why one spool entry, or one scan, failed (`Counters.faults`; enum only).
    A fault harms only its own entry: that entry is answered canonical, or left
    untouched for the next scan, and every other request is still served."""

    LIST_FAILED = "list_failed"  # listing requests/ or claimed/ failed (this scan)
    CLAIM_FAILED = "claim_failed"  # the claim rename of one request failed
    READ_FAILED = "read_failed"  # reading one claimed request failed (not unsafe)
    ENTRY_STUCK = "entry_stuck"  # a refused entry could not be removed; skipped
    RESPOND_FAILED = "respond_failed"  # publishing one response failed
    RESOURCE_EXHAUSTED = "resource_exhausted"  # EMFILE/ENFILE/ENOMEM: backed off
    ENTRY_ERROR = "entry_error"  # any other OSError while handling one entry
    APPEND_UNDONE = "append_undone"  # a failed append was undone (spool.journal)
    SEGMENT_FULL = "segment_full"  # a new attempt refused: today's segment is full
    WATCH_FAILED = "watch_failed"  # no inotify watch: the rescan timer alone


# Provider -> journal, total over ProviderOutcome: the call's failure as a
# terminal outcome, None when content came back (it is judged next).
_CALL_FAILED: Final[Mapping[ProviderOutcome, Outcome | None]] = {
    ProviderOutcome.CONTENT: None,
    ProviderOutcome.CREDENTIAL_UNAVAILABLE: Outcome.CREDENTIAL_UNAVAILABLE,
    ProviderOutcome.PROVIDER_ERROR: Outcome.PROVIDER_ERROR,
    ProviderOutcome.TIMEOUT: Outcome.TIMEOUT,
    ProviderOutcome.INVALID_RESPONSE: Outcome.INVALID_RESPONSE,
}
# Contract verdict -> journal, total over Verdict (None: accepted).
_VERDICT_OUTCOME: Final[Mapping[Verdict, Outcome | None]] = {
    Verdict.ACCEPTED: None,
    Verdict.INVALID_RESPONSE: Outcome.INVALID_RESPONSE,
    Verdict.VALIDATION_REJECTED: Outcome.VALIDATION_REJECTED,
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(slots=True)
class Counters:
    """Content-free counters for ``worker.status.json`` (trio-style statistics)."""

    claimed: int = 0
    calls: int = 0
    accepted: int = 0
    canonical: int = 0
    in_flight: int = 0
    clock_skew: int = 0
    # Open attempts a dead predecessor left whose call died with it (lifecycle rule 3).
    lost_attempts: int = 0
    already_attempted: int = 0
    expired_requests: int = 0
    invalid_requests: int = 0
    reports: int = 0
    orphan_reports: int = 0
    late_results: int = 0
    retired_segments: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    # Unsafe spool files by `spool.fsio.UnsafeReason` value (enum keys only).
    unsafe: dict[str, int] = field(default_factory=dict)
    # Entry and scan faults by `Fault` value (enum keys only).
    faults: dict[str, int] = field(default_factory=dict)

    def outcome(self, o: Outcome) -> None:
        self.by_outcome[o.value] = self.by_outcome.get(o.value, 0) + 1

    def unsafe_file(self, e: UnsafePath) -> None:
        self.unsafe[e.reason.value] = self.unsafe.get(e.reason.value, 0) + 1

    def fault(self, f: Fault) -> None:
        self.faults[f.value] = self.faults.get(f.value, 0) + 1


# What the kernel queues for the worker (SPEC §4 "waiting"): a file or directory
# arriving in ``requests/`` or ``reports/`` (created there, linked there or moved
# in), and either inbox itself being removed or moved away. Everything else —
# every ``tmp/`` staging write, claims (a move *out of* requests/), responses,
# reads, removals — never leaves the kernel. The watched paths must be the
# checked directories themselves: never a symlink (``IN_DONT_FOLLOW``), only a
# directory (``IN_ONLYDIR``).
INBOX_MASK: Final = Mask(
    InotifyConstants.IN_CREATE
    | InotifyConstants.IN_MOVED_TO
    | InotifyConstants.IN_DELETE_SELF
    | InotifyConstants.IN_MOVE_SELF
    | InotifyConstants.IN_ONLYDIR
    | InotifyConstants.IN_DONT_FOLLOW
)


class _Wake:
    """Called by watchdog's inotify reader thread (its ``WatchCallback``); it only
    wakes the scanner. The scanner, not the events, is the source of truth
    (SPEC §4 trap 2): it lists the folders, at start-up, on every wake and on the
    rescan timer. A queue overflow and a removed watch wake it too.
    """

    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def on_event(self, event: InotifyEvent) -> None:
        self._event.set()

    def on_watch_deleted(self, wd: int) -> None:
        self._event.set()

    def on_queue_overflow(self) -> None:
        self._event.set()


class _InboxWatch:
    """watchdog's inotify descriptor (`InotifyFD`, its own instance and reader
    thread) watching the two inboxes, calling `_Wake` directly. Live from
    construction until `stop`.

    Not an `Observer`: the observer's emitter and dispatcher threads, its event
    objects and its move pairing cost ~1.6 ms of the worker's CPU per artifact
    and two thread hand-offs per wake (docs/performance.md, finding P). The
    observer's 500 ms hold of an unmatched ``IN_MOVED_FROM`` (SPEC §4 trap 1, the
    reason the whole tree was watched) cannot occur: nothing here pairs moves,
    and a move out of an inbox is not in the mask.
    """

    def __init__(self, inboxes: tuple[Path, ...], event: threading.Event) -> None:
        self._fd = InotifyFD()
        self._fd.start()
        try:
            for inbox in inboxes:
                self._fd.add_callback(
                    os.fsencode(inbox), INBOX_MASK, _Wake(event), CallbackId(0)
                )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._fd.stop()
        self._fd.join(5)


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
    ) -> None:
        self.root = root
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
        self.counters = Counters()
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
            return self._run_locked(stop)
        finally:
            wlock.release()

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
        return ExitCode.OK

    def _scan(
        self, pool: cf.ThreadPoolExecutor, *, walk: bool = True, reports: bool = True
    ) -> None:
        self._check_tree(walk=walk)
        try:
            # Orphans from a dead worker first (they are deduped like anything else).
            claimed = self._live_names("claimed", _json_names(self.root.claimed))
            for name in sorted(claimed):
                self._dispatch(pool, name)
            requests = self._live_names("requests", _json_names(self.root.requests))
            for name in sorted(requests):
                if self._claim(name):
                    self._dispatch(pool, name)
        except UnsafePath as e:
            # A spool directory itself is unsafe: nothing in it can be trusted.
            self._enter_quarantine(e.reason.value)
        except (OSError, MemoryError) as e:
            # The listing (or a resource) failed, not one entry: nothing is
            # dropped; the next scan tries again (RESOURCE_ERRNOS: back off).
            self.counters.fault(Fault.RESOURCE_EXHAUSTED if _resource(e) else Fault.LIST_FAILED)
        if reports:
            self._scan_reports()

    def _scan_reports(self) -> None:
        try:
            self._handle_reports(sorted(_json_names(self.root.reports)))
        except UnsafePath as e:
            self._enter_quarantine(e.reason.value)
        except OSError:
            self._enter_quarantine("io_error")

    def _live_names(self, where: str, names: list[str]) -> list[str]:
        """``names`` without the stuck entries of ``where``; a stuck entry that
        is no longer listed is forgotten."""
        listed = set(names)
        with self._busy_lock:
            self._stuck = {s for s in self._stuck if s[0] != where or s[1] in listed}
            return [n for n in names if (where, n) not in self._stuck]

    def _claim(self, name: str) -> bool:
        """Claim one request (rename into ``claimed/``). An error of this entry
        alone (``claimed/<id>.json`` is a directory: EISDIR; EIO on the rename)
        answers it canonical and removes it; a resource error is raised to the
        scan (back off); an unsafe directory is raised (quarantine)."""
        src = self.root.requests / name
        try:
            won = claim(src, self.root.claimed / name)
        except UnsafePath:
            raise
        except OSError as e:
            if _resource(e):
                raise
            self.counters.fault(Fault.CLAIM_FAILED)
            self._refuse_entry("requests", src)
            return False
        if won:
            self.counters.claimed += 1
        return won

    def _refuse_entry(self, where: str, path: Path) -> None:
        """Answer one entry canonical (``invalid_request``, no row, no call) and
        remove its file; one that cannot be removed is skipped from now on."""
        rid = path.name[: -len(".json")]
        if _is_hex32(rid):
            self._respond(rid, None, ResponseStatus.CANONICAL, ResponseOutcome.INVALID_REQUEST)
        try:
            unlink_quiet(path)
        except (OSError, UnsafePath):
            self.counters.fault(Fault.ENTRY_STUCK)
            with self._busy_lock:
                self._stuck.add((where, path.name))

    def _dispatch(self, pool: cf.ThreadPoolExecutor, name: str) -> None:
        with self._busy_lock:
            if name in self._busy:
                return
            self._busy.add(name)

        def job() -> None:
            try:
                self.handle_claimed(name)
            except (OSError, MemoryError) as e:
                # One entry's failure is its own: counted, never the worker's.
                self.counters.fault(Fault.RESOURCE_EXHAUSTED if _resource(e) else Fault.ENTRY_ERROR)
            finally:
                with self._busy_lock:
                    self._busy.discard(name)

        try:
            pool.submit(job)
        except RuntimeError:
            # No thread could be started (ENOMEM, a thread limit): left in
            # claimed/ for the next scan.
            with self._busy_lock:
                self._busy.discard(name)
            self.counters.fault(Fault.RESOURCE_EXHAUSTED)

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
            if isinstance(e, OSError) and not isinstance(e, UnsafePath) and _resource(e):
                # Out of descriptors or memory: untouched, the next scan retries.
                self.counters.fault(Fault.RESOURCE_EXHAUSTED)
                return
            # Canonical, zero calls, zero rows.
            self.counters.invalid_requests += 1
            if isinstance(e, OSError) and not isinstance(e, UnsafePath):
                self.counters.fault(Fault.READ_FAILED)
            if not self._drop_file(path, e):
                self.counters.fault(Fault.ENTRY_STUCK)
                with self._busy_lock:
                    self._stuck.add(("claimed", name))
            if _is_hex32(rid):
                self._respond(rid, None, ResponseStatus.CANONICAL, ResponseOutcome.INVALID_REQUEST)
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

    def _handle_request(
        self, req: SpoolRequest, submitted: dt.datetime, deadline: dt.datetime
    ) -> None:
        rid = req.request_id
        wall, mono = self._clock(), self._mono()
        admission = admit_request(submitted, deadline, wall)
        if admission is Admission.EXPIRED:
            # The shim has already given up: no row, no call, no response.
            self.counters.expired_requests += 1
            return
        if admission is Admission.CLOCK_SKEW:
            # Its timestamps cannot be trusted against ours: canonical, no call.
            self.counters.clock_skew += 1
            self._respond(rid, None, ResponseStatus.CANONICAL, ResponseOutcome.CLOCK_SKEW)
            return
        if not self.journal_ok:
            self._respond(rid, None, ResponseStatus.CANONICAL, ResponseOutcome.JOURNAL_UNAVAILABLE)
            return
        # The call budget: read once from the wall deadline, then counted down
        # on the monotonic clock (spool.lifecycle rule 6).
        until = mono + remaining_budget(deadline, wall)
        capsule = req.capsule
        mode = Mode(req.mode)
        try:
            with self.journal.locked() as j:
                if not self.journal_ok:
                    raise _Quarantined
                self._retain_if_due(j)
                if capsule.artifact_key in j.index.sealed:
                    # Attempted in a quarantined segment: never again (spool.journal).
                    self.counters.already_attempted += 1
                    self._respond(
                        rid,
                        None,
                        ResponseStatus.ALREADY_ATTEMPTED,
                        ResponseOutcome.ALREADY_ATTEMPTED,
                    )
                    return
                rec = j.index.by_artifact.get(capsule.artifact_key)
                if rec is not None:
                    self._answer_existing(rid, rec)
                    return
                rec = j.append_start(
                    artifact_key=capsule.artifact_key,
                    surface=capsule.surface,
                    mode=mode,
                    attempt_id=secrets.token_hex(16),
                    started_at=self._clock(),
                    deadline_at_utc=req.deadline_at_utc,
                )
                self._held[rec.attempt_id] = Held(Phase.OPEN, live=True, starter=rid, until=until)
                self.refusing = None
        except (_Quarantined, JournalUnverified, UnsafePath, OSError) as e:
            if isinstance(e, AppendRefused) and e.finding.value == Fault.SEGMENT_FULL.value:
                self.refusing = Fault.SEGMENT_FULL.value
            self._journal_failed(e)
            self._respond(rid, None, ResponseStatus.CANONICAL, ResponseOutcome.JOURNAL_UNAVAILABLE)
            return

        if self._client is None:
            result = ProviderResult(ProviderOutcome.CREDENTIAL_UNAVAILABLE, None)
        else:
            self.counters.calls += 1
            seconds = until - self._mono()
            result = call_with_deadline(self._client, capsule.to_json(), seconds=max(seconds, 0.0))
        self._conclude(rid, rec, until, result, req)

    def _answer_existing(self, rid: str, rec: AttemptRecord) -> None:
        """Dedupe (caller holds the journal lock). Never a call."""
        answer = answer_existing(rec.outcome, self._held.get(rec.attempt_id), rid, self._mono())
        if answer is Answer.ALREADY_ATTEMPTED:
            self.counters.already_attempted += 1
            self._respond(
                rid, None, ResponseStatus.ALREADY_ATTEMPTED, ResponseOutcome.ALREADY_ATTEMPTED
            )
        elif answer is Answer.IN_FLIGHT:
            # Our own call is running: the owner writes the terminal row.
            self.counters.in_flight += 1
            self._respond(rid, None, ResponseStatus.IN_FLIGHT, ResponseOutcome.IN_FLIGHT)
        elif answer is Answer.EXPIRE_CANONICAL:
            self._expire(rec)
            self._respond(
                rid, None, ResponseStatus.CANONICAL, ResponseOutcome.CLAIM_EXPIRED_CANONICAL
            )
        # Answer.NONE: the starter itself; its answer comes from its call.

    def _conclude(
        self,
        rid: str,
        rec: AttemptRecord,
        until: float,
        result: ProviderResult,
        req: SpoolRequest,
    ) -> None:
        try:
            accepted, outcome = self._conclude_locked(rec, until, result, req, rid)
        except (JournalUnverified, UnsafePath, OSError) as e:
            # The terminal row could not be written: quarantine, and nothing the
            # call produced is delivered (rule 6).
            self._held.pop(rec.attempt_id, None)
            self._journal_failed(e)
            self._respond(
                rid, rec.attempt_id, ResponseStatus.CANONICAL, ResponseOutcome.JOURNAL_UNAVAILABLE
            )
            return
        if accepted is not None:
            self._publish_response(accepted, durable=True)
        elif outcome is not None:
            self._respond(
                rid, rec.attempt_id, ResponseStatus.CANONICAL, RESPONSE_FOR_TERMINAL[outcome]
            )

    def _conclude_locked(
        self,
        rec: AttemptRecord,
        until: float,
        result: ProviderResult,
        req: SpoolRequest,
        rid: str,
    ) -> tuple[SpoolResponse | None, Outcome | None]:
        """Judge the one result once, under the lock (`spool.lifecycle.conclude`).
        (accepted response, None) or (None, terminal outcome to answer with) or
        (None, None): no answer."""
        with self.journal.locked() as j:
            current = j.index.by_attempt.get(rec.attempt_id)
            if current is None or current.outcome is not None:
                return None, None  # terminalized meanwhile (retention): discard, say nothing
            late = self._mono() >= until
            failed = _CALL_FAILED[result.outcome]
            if late and result.outcome is not ProviderOutcome.TIMEOUT:
                self.counters.late_results += 1
            rejected: Outcome | None = None
            composition = None
            if self.journal_ok and not late and failed is None:
                if result.content is None:
                    failed = Outcome.INVALID_RESPONSE
                else:
                    verdict = judge(req.capsule, result.content)
                    rejected = _VERDICT_OUTCOME[verdict.verdict]
                    composition = verdict.composition
                    if rejected is None and composition is None:
                        rejected = Outcome.INVALID_RESPONSE
            c = conclude(failed, rejected, late=late, quarantined=not self.journal_ok)
            if c.reply is Reply.ACCEPTED:
                assert composition is not None
                transition(Phase.OPEN, c.event, None, rec.mode)
                self._held[rec.attempt_id] = Held(
                    Phase.AWAITING_REPORT,
                    live=True,
                    starter=rid,
                    until=until + self._grace.total_seconds(),
                )
                self._answers[rec.attempt_id] = rid
                self.counters.accepted += 1
                accepted = SpoolResponse(
                    spool_version=SPOOL_VERSION,
                    request_id=rid,
                    attempt_id=rec.attempt_id,
                    status=ResponseStatus.ACCEPTED,
                    outcome=ResponseOutcome.ACCEPTED,
                    composition=composition,
                )
                return accepted, None
            assert c.outcome is not None
            self._finalize(j, rec, c.event, c.outcome)
            return None, (c.outcome if c.reply is Reply.CANONICAL else None)

    def _finalize(self, j: Journal, rec: AttemptRecord, event: Event, outcome: Outcome) -> None:
        held = self._held.get(rec.attempt_id)
        phase = held.phase if held is not None else Phase.OPEN
        j.append_terminal(rec, phase, event, outcome, self._clock())
        self._finalized(rec.attempt_id, outcome)

    def _finalized(self, attempt_id: str, outcome: Outcome) -> None:
        """After the terminal row is durable: forget the attempt and remove its
        accepted response file (spool.lifecycle `SPOOL_FILE_MOVES`)."""
        self._held.pop(attempt_id, None)
        rid = self._answers.pop(attempt_id, None)
        if rid is not None:
            _quiet(unlink_quiet, self.root.responses / f"{rid}.json")
        self.counters.outcome(outcome)
        if outcome not in SELECTED_OUTCOMES:
            self.counters.canonical += 1

    def _expire(self, rec: AttemptRecord) -> None:
        """Terminalize an attempt nobody can finish any more (caller holds the lock)."""
        self._finalize(self.journal, rec, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL)

    # ---------------------------------------------------------------- restart

    def _adopt_inherited(self) -> None:
        """Classify every open attempt a dead predecessor left (spool.lifecycle
        rule 3) from responses/: answered (its accepted response file is there)
        -> it awaits its report until deadline + COMMIT_GRACE, anchored now on
        our monotonic clock; lost -> ``claim_expired_canonical`` now, no call.
        Every other response file there is litter after RESPONSE_TTL."""
        mono = self._mono()
        answered: dict[str, str] = {}
        try:
            names = _json_names(self.root.responses)
        except (UnsafePath, OSError) as e:
            self._journal_failed(e)
            return
        for name in names:
            rid = name[: -len(".json")]
            try:
                data, _ = read_private_identified(
                    self.root.responses / name, max_bytes=MAX_MESSAGE_BYTES
                )
                resp = parse_response(data)
            except FileNotFoundError:
                continue
            except (UnsafePath, MessageError, OSError, ValueError) as e:
                if isinstance(e, UnsafePath):
                    self.counters.unsafe_file(e)
                self._remember_litter(rid, mono)
                continue
            rec = self.journal.index.by_attempt.get(resp.attempt_id or "")
            if (
                resp.status is ResponseStatus.ACCEPTED
                and resp.request_id == rid
                and rec is not None
                and rec.outcome is None
            ):
                answered[rec.attempt_id] = rid
            else:
                self._remember_litter(rid, mono)
        try:
            with self.journal.locked() as j:
                wall = self._clock()
                for rec in list(j.index.open_attempts()):
                    if rec.attempt_id in self._held:
                        continue
                    kind = inherited_phase(rec.attempt_id in answered)
                    held = held_inherited(
                        kind, rec.deadline, wall, mono, self._grace.total_seconds()
                    )
                    if held is None:
                        self.counters.lost_attempts += 1
                        self._expire(rec)
                    else:
                        self._held[rec.attempt_id] = held
                        self._answers[rec.attempt_id] = answered[rec.attempt_id]
        except (JournalUnverified, UnsafePath, OSError) as e:
            self._journal_failed(e)

    # ------------------------------------------------------------------ reports

    def _drop_file(self, path: Path, e: Exception) -> bool:
        """A spool file that could not be read or parsed: removed; an unsafe one
        is also counted by its reason (enum only). False if it is still there."""
        if isinstance(e, UnsafePath):
            self.counters.unsafe_file(e)
        return _quiet(unlink_quiet, path)

    def _handle_reports(self, names: list[str]) -> None:
        """Journal the reports in ``reports/`` as one group (REPORT_GROUP_MAX).

        Each report is read and judged on its own (`spool.lifecycle.
        report_admissible`): an unreadable, malformed or misnamed file, or one
        that is inadmissible, is an orphan: counted and removed. The admissible
        ones are appended together, one fsync per segment, and each file is
        removed only after its row is durable (only the one that was read, fsio
        rule 4). If the append fails, or the worker is in quarantine, they stay
        for the next worker."""
        read: list[tuple[Path, FileId, SpoolReport]] = []
        for name in names:
            path = self.root.reports / name
            try:
                data, fid = read_private_identified(path, max_bytes=MAX_MESSAGE_BYTES)
                report = parse_report(data)
                if name != f"{report.attempt_id}.json":
                    raise MessageError("attempt_id")
            except FileNotFoundError:
                continue
            except (UnsafePath, MessageError, OSError, ValueError) as e:
                self.counters.orphan_reports += 1
                self._drop_file(path, e)
                continue
            read.append((path, fid, report))
        if not read or not self.journal_ok:
            return
        done: list[tuple[Path, FileId]] = []
        try:
            with self.journal.locked() as j:
                mono = self._mono()
                items: list[tuple[AttemptRecord, Phase, Event, Outcome]] = []
                files: dict[str, tuple[Path, FileId]] = {}
                for path, fid, report in read:
                    rec = j.index.by_attempt.get(report.attempt_id)
                    reported = TERMINAL_FOR_REPORT[report.outcome]
                    held = self._held.get(report.attempt_id)
                    why = report_admissible(
                        rec.outcome if rec is not None else None,
                        rec.mode if rec is not None else None,
                        held,
                        reported,
                        mono,
                    )
                    if why is not None or rec is None or held is None:
                        self.counters.orphan_reports += 1
                        done.append((path, fid))
                        continue
                    items.append((rec, held.phase, Event.REPORT, reported))
                    files[rec.attempt_id] = (path, fid)
                for i in range(0, len(items), REPORT_GROUP_MAX):
                    group = items[i : i + REPORT_GROUP_MAX]
                    for rec in j.append_terminals(group, self._clock()):
                        assert rec.outcome is not None
                        self._finalized(rec.attempt_id, rec.outcome)
                        self.counters.reports += 1
                        done.append(files[rec.attempt_id])
        except (JournalUnverified, UnsafePath, OSError) as e:
            self._journal_failed(e)
        for path, fid in done:
            try:
                unlink_if_same(path, fid)
            except UnsafePath as e:
                self.counters.unsafe_file(e)
            except OSError:
                pass

    # -------------------------------------------------------------------- sweep

    def _sweep(self) -> None:
        """Terminalize what nobody can finish any more (`spool.lifecycle.
        expiry_due`), remove uncollected responses, then apply retention
        unless a wall-clock step was observed."""
        self._observe_clock()
        self._remove_litter()
        if not self.journal_ok:
            return
        try:
            with self.journal.locked() as j:
                mono = self._mono()
                for rec in list(j.index.open_attempts()):
                    if expiry_due(rec.outcome, self._held.get(rec.attempt_id), mono):
                        self._expire(rec)
                self._retain(j)
        except (JournalUnverified, UnsafePath, OSError) as e:
            self._journal_failed(e)

    def _observe_clock(self) -> None:
        """spool.lifecycle rule 7: a wall clock that diverged from the monotonic
        one since start-up is a step; retention stops for this process's life."""
        if self.clock_step:
            return
        wall = (self._clock() - self._wall0).total_seconds()
        mono = self._mono() - self._mono0
        if step_observed(wall, mono):
            self.clock_step = True
            print("kexpr worker: clock_step_observed", file=sys.stderr, flush=True)

    def _retain_if_due(self, j: Journal) -> None:
        """Before a new attempt: retention, if a segment in memory has aged out."""
        if j.has_expired(self._clock().date()):
            self._retain(j)

    def _retain(self, j: Journal) -> None:
        """Rule 7 (caller holds the lock): terminalize open attempts in expiring
        segments ``claim_expired_canonical``, then remove those segments whole.
        Never after a wall-clock step (spool.lifecycle rule 7)."""
        self._observe_clock()
        if self.clock_step:
            return
        today = self._clock().date()
        for day in j.expired(today):
            for rec in j.open_in(day):
                held = self._held.get(rec.attempt_id)
                if held is None or not (held.live and held.phase is Phase.OPEN):
                    self._expire(rec)
        removed, _ = j.remove_expired(today)
        self.counters.retired_segments += len(removed)

    def _journal_failed(self, e: BaseException) -> None:
        if isinstance(e, AppendRefused):
            # Nothing was written (or it was undone): the journal still
            # verifies. This request is canonical; the next one tries again.
            self.counters.fault(Fault(e.finding.value))
        elif isinstance(e, JournalUnverified):
            self._enter_quarantine(e.finding.value)
        elif isinstance(e, UnsafePath):
            self._enter_quarantine(e.reason.value)
        elif isinstance(e, _Quarantined):
            self.journal_ok = False
        else:
            self._enter_quarantine("io_error")

    # ---------------------------------------------------------------- litter

    def _remember_litter(self, rid: str, mono: float) -> None:
        with self._litter_lock:
            self._litter.setdefault(rid, mono + RESPONSE_TTL.total_seconds())

    def _remove_litter(self) -> None:
        """Responses nobody collected within RESPONSE_TTL (spool.lifecycle
        `Move.UNCOLLECTED`); a collected one is already gone."""
        mono = self._mono()
        with self._litter_lock:
            due = [rid for rid, t in self._litter.items() if mono >= t]
            for rid in due:
                del self._litter[rid]
        for rid in due:
            _quiet(unlink_quiet, self.root.responses / f"{rid}.json")

    # ---------------------------------------------------------------- responses

    def _respond(
        self,
        rid: str,
        attempt_id: str | None,
        status: ResponseStatus,
        outcome: ResponseOutcome,
    ) -> None:
        self._publish_response(
            SpoolResponse(
                spool_version=SPOOL_VERSION,
                request_id=rid,
                attempt_id=attempt_id,
                status=status,
                outcome=outcome,
                composition=None,
            )
        )

    def _publish_response(self, resp: SpoolResponse, *, durable: bool = False) -> None:
        """``durable``: an accepted response is its attempt's AWAITING_REPORT
        (spool.lifecycle rule 3) and must survive a crash: fsynced, and removed
        by the worker once the terminal row is durable. Any other answer is
        only useful before its deadline (a torn one fails the shim's strict
        parse): not fsynced, and removed as litter after RESPONSE_TTL if the
        shim never collected it."""
        if not durable:
            self._remember_litter(resp.request_id, self._mono())
        try:
            publish(
                self.root.tmp,
                self.root.responses / f"{resp.request_id}.json",
                resp.to_bytes(),
                durable=durable,
            )
        except UnsafePath as e:
            # responses/ is not what it was: the shim times out canonical.
            self._enter_quarantine(e.reason.value)
        except OSError:
            # FileExistsError included: the shim falls back to canonical.
            self.counters.fault(Fault.RESPOND_FAILED)

    # ------------------------------------------------------------------- status

    def _write_status(self) -> None:
        c = self.counters
        status = {
            "schema": "kexpr-worker-status-v1",
            "pid": os.getpid(),
            "state": self._state,
            "started_at_utc": self._started_at,
            "heartbeat_at_utc": format_ts(self._clock()),
            "journal": "verified" if self.journal_ok else "unverified",
            "quarantine": self.quarantine,
            "clock_step_observed": self.clock_step,
            "refusing": self.refusing,
            "unsafe": dict(sorted(c.unsafe.items())),
            "faults": dict(sorted(c.faults.items())),
            "credential": "present" if self._client is not None else "absent",
            "counters": {
                "claimed": c.claimed,
                "calls": c.calls,
                "accepted": c.accepted,
                "in_flight": c.in_flight,
                "clock_skew": c.clock_skew,
                "lost_attempts": c.lost_attempts,
                "already_attempted": c.already_attempted,
                "expired_requests": c.expired_requests,
                "invalid_requests": c.invalid_requests,
                "reports": c.reports,
                "orphan_reports": c.orphan_reports,
                "late_results": c.late_results,
                "retired_segments": c.retired_segments,
                "by_outcome": dict(sorted(c.by_outcome.items())),
            },
        }
        try:
            replace_private(
                self.root.status_file,
                json.dumps(status, sort_keys=True).encode("utf-8"),
            )
        except (OSError, UnsafePath):
            pass  # a heartbeat, not evidence; the tree check reports the cause


class _Quarantined(Exception):
    """Internal: the worker is in quarantine (rule 6)."""


def _quiet(fn: Callable[[Path], None], path: Path) -> bool:
    """Best-effort removal of a refused file; an unsafe directory is caught by
    the tree check before the next scan. False if it failed."""
    try:
        fn(path)
    except (OSError, UnsafePath):
        return False
    return True


def _resource(e: BaseException) -> bool:
    """Out of descriptors or memory (RESOURCE_ERRNOS, MemoryError)."""
    return isinstance(e, MemoryError) or (
        isinstance(e, OSError) and e.errno in RESOURCE_ERRNOS
    )


def _json_names(d: Path) -> list[str]:
    """Spool entries (walked and checked by `spool.fsio`; raises `UnsafePath`)."""
    try:
        names = list_dir(d)
    except FileNotFoundError:
        return []
    return [n for n in names if n.endswith(".json") and not n.startswith(".")]


def _is_hex32(s: str) -> bool:
    return len(s) == 32 and all(c in "0123456789abcdef" for c in s)


def wait_ready(
    root: DataRoot, timeout_s: float, *, pid: int | None = None, poll_s: float = 0.05
) -> bool:
    """Block until ``worker.status.json`` says ready (ops and tests use this)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            status = json.loads(root.status_file.read_bytes())
            if status.get("state") == "ready" and (pid is None or status.get("pid") == pid):
                return True
        except (OSError, ValueError):
            pass
        time.sleep(poll_s)
    return False

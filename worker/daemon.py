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
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import json
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from spool import log
from spool.contract import Verdict, judge
from spool.fsio import (
    FileId,
    LockTimeout,
    Sharing,
    UnsafePath,
    UnsafeReason,
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
    AttemptRecord,
    Event,
    Finding,
    IllegalTransition,
    Journal,
    JournalUnverified,
    Mode,
    Outcome,
    Phase,
    format_ts,
    parse_ts,
    transition,
)
from spool.layout import DataRoot
from spool.messages import (
    MAX_MESSAGE_BYTES,
    SPOOL_VERSION,
    MessageError,
    ResponseOutcome,
    ResponseStatus,
    SpoolReport,
    SpoolRequest,
    SpoolResponse,
    parse_report,
    parse_request,
)
from watchdog.observers.inotify_c import CallbackId, InotifyConstants, InotifyEvent, InotifyFD, Mask

from worker.environment import hazardous_environment
from worker.exitcodes import ExitCode
from worker.preload import Preload
from worker.provider import ProviderOutcome, ProviderResult, build_client, call_with_deadline

if TYPE_CHECKING:
    import openai

# An accepted attempt whose shim never reports is terminalized this long after
# its deadline (SPEC §4). Long enough for a host's durable write + Telegram edit.
COMMIT_GRACE: Final = dt.timedelta(minutes=10)
# The spool protocol's wait: a request's deadline is at most this after submission.
MAX_WAIT: Final = dt.timedelta(seconds=4)
RESCAN_INTERVAL_S: Final = 1.0
_log = log.logger("worker")
# What `_enter_quarantine` may be given: the enum words of its callers.
_QUARANTINE_REASONS: Final = frozenset(
    {r.value for r in UnsafeReason} | {f.value for f in Finding} | {"io_error", "inode_changed"}
)
# Reports are journaled in groups on the rescan timer (group commit): one lock,
# one write and one fsync per segment for every report that arrived in the last
# interval, instead of one fsync per report on the next request's path. A
# report's file is removed only after its row is synced, so a crash leaves it
# in reports/ for the next worker. At most this many rows per group.
REPORT_GROUP_MAX: Final = 256
POOL_SIZE: Final = 8


_CALL_FAILED: Final = {
    ProviderOutcome.CREDENTIAL_UNAVAILABLE: Outcome.CREDENTIAL_UNAVAILABLE,
    ProviderOutcome.PROVIDER_ERROR: Outcome.PROVIDER_ERROR,
    ProviderOutcome.TIMEOUT: Outcome.TIMEOUT,
    ProviderOutcome.INVALID_RESPONSE: Outcome.INVALID_RESPONSE,
}
_VERDICT_OUTCOME: Final = {
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

    def outcome(self, o: Outcome) -> None:
        self.by_outcome[o.value] = self.by_outcome.get(o.value, 0) + 1

    def unsafe_file(self, e: UnsafePath) -> None:
        self.unsafe[e.reason.value] = self.unsafe.get(e.reason.value, 0) + 1


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
        commit_grace: dt.timedelta = COMMIT_GRACE,
        rescan_interval_s: float = RESCAN_INTERVAL_S,
        preload: Preload | None = None,
    ) -> None:
        self.root = root
        self._environ = dict(os.environ) if environ is None else environ
        self._client_factory = client_factory
        self._clock = clock
        self._grace = commit_grace
        self._rescan = rescan_interval_s
        # A child verifying the journal since before the SDK import (worker.preload).
        self._preload = preload
        self.journal = Journal(root)
        self.journal_ok = False
        # Why the worker is in quarantine (rule 6): an enum value, or None.
        self.quarantine: str | None = None
        self._tree: dict[str, FileId] | None = None
        self._sharing: Sharing | None = None
        self.counters = Counters()
        # attempt_id -> phase known to *this* process (OPEN while our call runs,
        # AWAITING_REPORT after an accepted response). Guarded by the journal lock.
        self._phases: dict[str, Phase] = {}
        self._busy: set[str] = set()
        self._busy_lock = threading.Lock()
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
            # Reports a previous worker left unjournaled (it died before its
            # tick) are the shims' outcomes of accepted attempts: journal them
            # before the sweep would expire those attempts.
            self._scan_reports(left_by_previous_worker=True)
        self._sweep()

    def _enter_quarantine(self, reason: str) -> None:
        """Rule 6: refuse every new attempt until restarted. Enum only, once."""
        self.journal_ok = False
        if self.quarantine is None:
            self.quarantine = reason
            print(f"kexpr worker: quarantine: {reason}", file=sys.stderr, flush=True)
            log.event(_log, logging.WARNING, "worker_quarantine", reason=log.known(reason, _QUARANTINE_REASONS))

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
        watch = _InboxWatch((self.root.requests, self.root.reports), self._wake)
        pool = cf.ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="kexpr-call")
        try:
            self._state = "ready"
            self._scan(pool)
            self._write_status()
            log.event(_log, logging.INFO, "worker_ready", journal_verified=self.journal_ok,
                      credential=self._client is not None)
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
            watch.stop()
            self._state = "stopped"
            self._write_status()
            log.event(_log, logging.INFO, "worker_stopped")
        return ExitCode.OK

    def _scan(
        self, pool: cf.ThreadPoolExecutor, *, walk: bool = True, reports: bool = True
    ) -> None:
        self._check_tree(walk=walk)
        try:
            # Orphans from a dead worker first (they are deduped like anything else).
            for name in sorted(_json_names(self.root.claimed)):
                self._dispatch(pool, name)
            for name in sorted(_json_names(self.root.requests)):
                if claim(self.root.requests / name, self.root.claimed / name):
                    self.counters.claimed += 1
                    self._dispatch(pool, name)
        except UnsafePath as e:
            # A spool directory itself is unsafe: nothing in it can be trusted.
            self._enter_quarantine(e.reason.value)
        if reports:
            self._scan_reports()

    def _scan_reports(self, *, left_by_previous_worker: bool = False) -> None:
        try:
            self._handle_reports(
                sorted(_json_names(self.root.reports)),
                left_by_previous_worker=left_by_previous_worker,
            )
        except UnsafePath as e:
            self._enter_quarantine(e.reason.value)
        except OSError:
            self._enter_quarantine("io_error")

    def _dispatch(self, pool: cf.ThreadPoolExecutor, name: str) -> None:
        with self._busy_lock:
            if name in self._busy:
                return
            self._busy.add(name)

        def job() -> None:
            try:
                self.handle_claimed(name)
            finally:
                with self._busy_lock:
                    self._busy.discard(name)

        pool.submit(job)

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
            # Canonical, zero calls, zero rows.
            self.counters.invalid_requests += 1
            self._drop_file(path, e)
            if _is_hex32(rid):
                self._respond(rid, None, ResponseStatus.CANONICAL, ResponseOutcome.INVALID_REQUEST)
            return
        try:
            self._handle_request(req, deadline)
        finally:
            try:
                # Remove only the file we read (fsio rule 4); a swapped one is
                # left for the next scan, where it is deduped like any request.
                unlink_if_same(path, fid)
            except UnsafePath as e:
                self.counters.unsafe_file(e)
            except OSError:
                pass

    def _handle_request(self, req: SpoolRequest, deadline: dt.datetime) -> None:
        rid = req.request_id
        if self._clock() >= deadline:
            # The shim has already given up: no row, no call, no response.
            self.counters.expired_requests += 1
            return
        if not self.journal_ok:
            self._respond(rid, None, ResponseStatus.CANONICAL, ResponseOutcome.JOURNAL_UNAVAILABLE)
            return
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
                self._phases[rec.attempt_id] = Phase.OPEN
        except (_Quarantined, JournalUnverified, UnsafePath, OSError) as e:
            self._journal_failed(e)
            self._respond(rid, None, ResponseStatus.CANONICAL, ResponseOutcome.JOURNAL_UNAVAILABLE)
            return

        if self._client is None:
            result = ProviderResult(ProviderOutcome.CREDENTIAL_UNAVAILABLE, None)
        else:
            self.counters.calls += 1
            seconds = (deadline - self._clock()).total_seconds()
            result = call_with_deadline(self._client, capsule.to_json(), seconds=max(seconds, 0.0))
        self._conclude(rid, rec, deadline, result, req)

    def _answer_existing(self, rid: str, rec: AttemptRecord) -> None:
        """Dedupe (caller holds the journal lock). Never a call."""
        phase = self._phases.get(rec.attempt_id)
        if rec.outcome is not None or phase is Phase.AWAITING_REPORT:
            self.counters.already_attempted += 1
            self._respond(
                rid, None, ResponseStatus.ALREADY_ATTEMPTED, ResponseOutcome.ALREADY_ATTEMPTED
            )
        elif self._clock() < rec.deadline or phase is Phase.OPEN:
            # Unexpired, or our own call is still concluding at its deadline: the
            # owner writes the terminal row, never an observer (no row, no call).
            self.counters.in_flight += 1
            self._respond(rid, None, ResponseStatus.IN_FLIGHT, ResponseOutcome.IN_FLIGHT)
        else:
            self._expire(rec)
            self._respond(
                rid, None, ResponseStatus.CANONICAL, ResponseOutcome.CLAIM_EXPIRED_CANONICAL
            )

    def _conclude(
        self,
        rid: str,
        rec: AttemptRecord,
        deadline: dt.datetime,
        result: ProviderResult,
        req: SpoolRequest,
    ) -> None:
        try:
            accepted, outcome = self._conclude_locked(rec, deadline, result, req, rid)
        except (JournalUnverified, UnsafePath, OSError) as e:
            # The terminal row could not be written: quarantine, and nothing the
            # call produced is delivered (rule 6).
            self._phases.pop(rec.attempt_id, None)
            self._journal_failed(e)
            self._respond(
                rid, rec.attempt_id, ResponseStatus.CANONICAL, ResponseOutcome.JOURNAL_UNAVAILABLE
            )
            return
        if accepted is not None:
            self._publish_response(accepted)
        elif outcome is not None:
            self._respond(
                rid, rec.attempt_id, ResponseStatus.CANONICAL, ResponseOutcome(outcome.value)
            )

    def _conclude_locked(
        self,
        rec: AttemptRecord,
        deadline: dt.datetime,
        result: ProviderResult,
        req: SpoolRequest,
        rid: str,
    ) -> tuple[SpoolResponse | None, Outcome | None]:
        """Judge the one result under the lock. (accepted response, None) or
        (None, terminal outcome to answer with) or (None, None): no answer."""
        accepted: SpoolResponse | None = None
        outcome: Outcome | None = None
        with self.journal.locked() as j:
            now = self._clock()
            current = j.index.by_attempt.get(rec.attempt_id)
            if current is None or current.outcome is not None:
                return None, None  # terminalized meanwhile (retention): discard, say nothing
            if not self.journal_ok:
                # Quarantined while the call ran (rule 6): nothing it produced is
                # delivered; the attempt ends canonical, no answer but canonical.
                self._finalize(
                    j, rec, Phase.OPEN, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, now
                )
                return None, Outcome.CLAIM_EXPIRED_CANONICAL
            if now >= deadline or result.outcome is ProviderOutcome.TIMEOUT:
                # Late result: discarded here, under the lock. No response: the
                # shim stopped waiting at the same deadline.
                if result.outcome is not ProviderOutcome.TIMEOUT:
                    self.counters.late_results += 1
                self._finalize(j, rec, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT, now)
                return None, None
            if result.outcome is ProviderOutcome.CONTENT and result.content is not None:
                verdict = judge(req.capsule, result.content)
                if verdict.verdict is Verdict.ACCEPTED and verdict.composition is not None:
                    self._phases[rec.attempt_id] = transition(
                        Phase.OPEN, Event.CALL_ACCEPTED, None, rec.mode
                    )
                    self.counters.accepted += 1
                    accepted = SpoolResponse(
                        spool_version=SPOOL_VERSION,
                        request_id=rid,
                        attempt_id=rec.attempt_id,
                        status=ResponseStatus.ACCEPTED,
                        outcome=ResponseOutcome.ACCEPTED,
                        composition=verdict.composition,
                    )
                else:
                    outcome = _VERDICT_OUTCOME[verdict.verdict]
                    self._finalize(j, rec, Phase.OPEN, Event.CALL_FAILED, outcome, now)
            else:
                outcome = _CALL_FAILED.get(result.outcome, Outcome.PROVIDER_ERROR)
                self._finalize(j, rec, Phase.OPEN, Event.CALL_FAILED, outcome, now)
        return accepted, outcome

    def _finalize(
        self,
        j: Journal,
        rec: AttemptRecord,
        phase: Phase,
        event: Event,
        outcome: Outcome,
        now: dt.datetime,
    ) -> None:
        j.append_terminal(rec, phase, event, outcome, now)
        self._finalized(rec.attempt_id, outcome)

    def _finalized(self, attempt_id: str, outcome: Outcome) -> None:
        self._phases.pop(attempt_id, None)
        self.counters.outcome(outcome)
        if outcome not in (Outcome.SELECTED, Outcome.SHADOW_SELECTED):
            self.counters.canonical += 1

    def _expire(self, rec: AttemptRecord) -> None:
        """Terminalize an attempt nobody owns any more (caller holds the lock)."""
        phase = self._phases.get(rec.attempt_id, Phase.OPEN)
        self._finalize(
            self.journal, rec, phase, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, self._clock()
        )

    # ------------------------------------------------------------------ reports

    def _drop_file(self, path: Path, e: Exception) -> None:
        """A spool file that could not be read or parsed: removed; an unsafe one
        is also counted by its reason (enum only)."""
        if isinstance(e, UnsafePath):
            self.counters.unsafe_file(e)
        _quiet(unlink_quiet, path)

    def _handle_reports(self, names: list[str], *, left_by_previous_worker: bool = False) -> None:
        """Journal the reports in ``reports/`` as one group (REPORT_GROUP_MAX).

        Each report is read and judged on its own: an unreadable, malformed or
        misnamed file, or one for no attempt awaiting a report, or an outcome the
        table forbids (e.g. shadow_selected for an enabled attempt) is an orphan
        and only counted. The rest are appended together, one fsync per segment;
        every file is then removed (only the one that was read, fsio rule 4).

        ``left_by_previous_worker`` (start-up, before the first sweep): an open
        attempt this process never saw is taken as awaiting its report when a
        report names it and its deadline + COMMIT_GRACE has not passed. Only an
        accepted attempt can have one: the shim learns an attempt's id from an
        accepted response, and every other answer that names an attempt
        follows its terminal row (SPEC §4). Without this, a report written in
        the last interval before a crash would be ignored and its attempt
        expired ``claim_expired_canonical``."""
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
        if not read:
            return
        if self.journal_ok:
            try:
                with self.journal.locked() as j:
                    items: list[tuple[AttemptRecord, Phase, Event, Outcome]] = []
                    for _, _, report in read:
                        rec = j.index.by_attempt.get(report.attempt_id)
                        phase = self._phases.get(report.attempt_id)
                        if (
                            left_by_previous_worker
                            and phase is None
                            and rec is not None
                            and rec.outcome is None
                            and self._clock() < rec.deadline + self._grace
                        ):
                            phase = Phase.AWAITING_REPORT
                        outcome = _OUTCOMES.get(report.outcome.value)
                        if (
                            outcome is None
                            or rec is None
                            or rec.outcome is not None
                            or phase is not Phase.AWAITING_REPORT
                            or not _legal(phase, outcome, rec.mode)
                        ):
                            self.counters.orphan_reports += 1
                            continue
                        items.append((rec, phase, Event.REPORT, outcome))
                    for i in range(0, len(items), REPORT_GROUP_MAX):
                        group = items[i : i + REPORT_GROUP_MAX]
                        for done in j.append_terminals(group, self._clock()):
                            assert done.outcome is not None
                            self._finalized(done.attempt_id, done.outcome)
                            self.counters.reports += 1
            except (JournalUnverified, UnsafePath, OSError) as e:
                self._journal_failed(e)
        for path, fid, _ in read:
            try:
                unlink_if_same(path, fid)
            except UnsafePath as e:
                self.counters.unsafe_file(e)
            except OSError:
                pass

    # -------------------------------------------------------------------- sweep

    def _sweep(self) -> None:
        """Terminalize what nobody can finish any more (restart-after-expiry,
        COMMIT_GRACE for accepted-but-unreported), then apply retention."""
        if not self.journal_ok:
            return
        now = self._clock()
        try:
            with self.journal.locked() as j:
                for rec in list(j.index.open_attempts()):
                    phase = self._phases.get(rec.attempt_id)
                    if phase is Phase.OPEN:
                        continue  # our own call is running; it concludes by the deadline
                    limit = rec.deadline + (
                        self._grace if phase is Phase.AWAITING_REPORT else dt.timedelta(0)
                    )
                    if now >= limit:
                        self._expire(rec)
                self._retain(j)
        except (JournalUnverified, UnsafePath, OSError) as e:
            self._journal_failed(e)

    def _retain_if_due(self, j: Journal) -> None:
        """Before a new attempt: retention, if a segment in memory has aged out."""
        if j.has_expired(self._clock().date()):
            self._retain(j)

    def _retain(self, j: Journal) -> None:
        """Rule 7 (caller holds the lock): terminalize open attempts in expiring
        segments ``claim_expired_canonical``, then remove those segments whole."""
        today = self._clock().date()
        for day in j.expired(today):
            for rec in j.open_in(day):
                if self._phases.get(rec.attempt_id) is not Phase.OPEN:
                    self._expire(rec)
        removed, _ = j.remove_expired(today)
        self.counters.retired_segments += len(removed)

    def _journal_failed(self, e: BaseException) -> None:
        if isinstance(e, JournalUnverified):
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

    def _publish_response(self, resp: SpoolResponse) -> None:
        if resp.status is not ResponseStatus.ACCEPTED:
            self.counters.canonical += 0  # counted at finalization
        try:
            # Not fsynced (neither file nor directory): a response is only
            # useful before its 4 s deadline, and after a crash the shim falls
            # back to canonical anyway (a torn one fails its strict parse).
            publish(
                self.root.tmp,
                self.root.responses / f"{resp.request_id}.json",
                resp.to_bytes(),
                durable=False,
            )
        except UnsafePath as e:
            # responses/ is not what it was: the shim times out canonical.
            self._enter_quarantine(e.reason.value)
        except OSError:
            pass  # FileExistsError included: the shim falls back to canonical

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
            "unsafe": dict(sorted(c.unsafe.items())),
            "credential": "present" if self._client is not None else "absent",
            "counters": {
                "claimed": c.claimed,
                "calls": c.calls,
                "accepted": c.accepted,
                "in_flight": c.in_flight,
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


_OUTCOMES: Final = {o.value: o for o in Outcome}


def _legal(phase: Phase, outcome: Outcome, mode: Mode) -> bool:
    try:
        transition(phase, Event.REPORT, outcome, mode)
    except IllegalTransition:
        return False
    return True


def _quiet(fn: Callable[[Path], None], path: Path) -> None:
    """Best-effort removal of a refused file; an unsafe directory is caught by
    the tree check before the next scan."""
    try:
        fn(path)
    except (OSError, UnsafePath):
        pass


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

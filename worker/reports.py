"""Report journaling and the restart rule (design §4; `kexpr.spool.lifecycle` rules 3, 5).

Its functions act on the worker's parts (`kexpr.worker.parts`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kexpr.spool.fsio import FileId, UnsafePath, read_private_identified
from kexpr.spool.journal import AttemptRecord
from kexpr.spool.lifecycle import (
    EVENT_OUTCOMES,
    MODE_FORBIDS,
    Event,
    File,
    Move,
    Outcome,
    Phase,
    held_inherited,
    inherited_phase,
    report_admissible,
)
from kexpr.spool.messages import (
    MAX_MESSAGE_BYTES,
    MessageError,
    ResponseStatus,
    SpoolReport,
    UnknownSpoolVersion,
    parse_report,
    parse_response,
)
from kexpr.worker.listing import json_names
from kexpr.worker.outbox import source
from kexpr.worker.quarantine import JOURNAL_ERRORS
from kexpr.worker.status import Fault
from kexpr.worker.terminal import expire, finalized

if TYPE_CHECKING:
    from kexpr.worker.parts import Parts

# Reports are journaled in groups on the rescan timer (group commit): one lock,
# one write and one fsync per segment for every report that arrived in the last
# interval, instead of one fsync per report on the next request's path. A
# report's file is removed only after its row is synced, so a crash leaves it
# in reports/ for the next worker. At most this many rows per group.
REPORT_GROUP_MAX: Final = 256

# Kept report files (a newer protocol's: never ours to judge, never dropped)
# cost nothing at rest: each is read and parsed once per (name, change), not on
# every tick (10,000 of them once cost the idle worker 29-34 % of a core).
# `KeptReports` remembers them; the report scan skips the whole folder while it
# is unchanged and settled, and re-checks every kept file's identity every
# `KEPT_RECHECK_TICKS` ticks (a file rewritten in place changes no directory).
# At most `KEPT_MAX` names are remembered (beyond: read again on each change of
# the folder), and a name no longer listed is forgotten.
KEPT_MAX: Final = 100_000
KEPT_RECHECK_TICKS: Final = 60
# A folder changed this recently is not trusted as settled: its mtime's clock
# is coarse (a jiffy), so a file added in the same tick could leave it equal.
_SETTLED_AGE_S: Final = 1.0


def _signature(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class KeptReports:
    """What the report scan remembers between ticks (one per worker)."""

    __slots__ = ("files", "folder", "ticks")

    def __init__(self) -> None:
        # name -> its file's signature when it was read and kept.
        self.files: dict[str, tuple[int, int, int, int, int]] = {}
        # The folder's signature after a scan that left only kept files.
        self.folder: tuple[int, int, int, int, int] | None = None
        self.ticks = 0

    def unchanged_since_settled(self, reports: Path) -> bool:
        """True when reports/ is as the last settled scan left it (then there is
        nothing to do); otherwise remembers nothing and the scan lists it."""
        self.ticks += 1
        if self.folder is None or self.ticks % KEPT_RECHECK_TICKS == 0:
            return False
        try:
            st = os.lstat(reports)
        except OSError:
            return False
        return _signature(st) == self.folder

    def settled(self, reports: Path, before: os.stat_result | None) -> None:
        """The scan that listed the folder as ``before`` left only kept files."""
        self.folder = None
        # The kernel's wall clock, not the worker's injected one: an mtime is
        # stamped by the kernel, so only its own clock measures its age.
        if before is not None and time.time() - before.st_mtime >= _SETTLED_AGE_S:
            self.folder = _signature(before)

    def unsettle(self) -> None:
        self.folder = None

    def is_kept(self, path: Path, name: str) -> bool:
        """``name`` was kept and is (as far as this tick re-checks) the same file."""
        sig = self.files.get(name)
        if sig is None:
            return False
        if self.ticks % KEPT_RECHECK_TICKS != 0:
            return True
        try:
            return _signature(os.lstat(path)) == sig
        except OSError:
            return False

    def keep(self, path: Path, name: str) -> bool:
        """Remember a kept file; True the first time this name is kept."""
        first = name not in self.files
        try:
            sig = _signature(os.lstat(path))
        except OSError:
            return first
        if first and len(self.files) >= KEPT_MAX:
            return True
        self.files[name] = sig
        return first

    def forget_except(self, listed: set[str]) -> None:
        for name in [n for n in self.files if n not in listed]:
            del self.files[name]


# ---------------------------------------------------------------- restart


def adopt_inherited(p: Parts) -> None:
    """Classify every open attempt a dead predecessor left (spool.lifecycle
    rule 3) from responses/: answered (its accepted response file is there)
    -> it awaits its report until deadline + COMMIT_GRACE, anchored now on
    our monotonic clock; lost -> ``claim_expired_canonical`` now, no call.
    Every other response file there is litter after RESPONSE_TTL."""
    mono = p.mono()
    answered: dict[str, str] = {}
    try:
        names = json_names(p.root.responses)
    except OSError as e:
        p.quarantine.failed(e)
        return
    for name in names:
        rid = name[: -len(".json")]
        try:
            data, _ = read_private_identified(p.root.responses / name, max_bytes=MAX_MESSAGE_BYTES)
            resp = parse_response(data)
        except FileNotFoundError:
            continue
        except (MessageError, OSError, ValueError) as e:
            if isinstance(e, UnsafePath):
                p.counters.unsafe_file(e)
            p.outbox.remember_litter(rid, mono)
            continue
        rec = p.journal.index.by_attempt.get(resp.attempt_id or "")
        if (
            resp.status is ResponseStatus.ACCEPTED
            and resp.request_id == rid
            and rec is not None
            and rec.outcome is None
        ):
            answered[rec.attempt_id] = rid
        else:
            p.outbox.remember_litter(rid, mono)
    reported = _reported_attempts(p)
    try:
        with p.journal.locked() as j:
            wall = p.clock()
            for rec in list(j.index.open_attempts()):
                if rec.attempt_id in p.attempts.held:
                    continue
                kind = inherited_phase(
                    rec.attempt_id in answered, _evidence(rec, reported.get(rec.attempt_id))
                )
                held = held_inherited(kind, rec.deadline, wall, mono, p.grace.total_seconds())
                if held is None:
                    p.counters.bump("lost_attempts")
                    expire(p, rec)
                else:
                    p.attempts.held[rec.attempt_id] = held
                    if rec.attempt_id in answered:
                        p.attempts.answers[rec.attempt_id] = answered[rec.attempt_id]
    except JOURNAL_ERRORS as e:
        p.quarantine.failed(e)


def _reported_attempts(p: Parts) -> dict[str, Outcome]:
    """attempt_id -> reported outcome of every readable report in reports/
    (the evidence looked at before any inherited attempt is expired: a report
    is stronger evidence than a missing response). What cannot be read here is judged by `handle_reports` as usual."""
    out: dict[str, Outcome] = {}
    try:
        names = json_names(p.root.reports)
    except OSError:
        return out  # the report scan right after meets the same error and says so
    for name in names:
        try:
            data, _ = read_private_identified(p.root.reports / name, max_bytes=MAX_MESSAGE_BYTES)
            report = parse_report(data)
        except (MessageError, OSError, ValueError):
            continue
        if name == f"{report.attempt_id}.json":
            out[report.attempt_id] = report.outcome
    return out


def _evidence(rec: AttemptRecord, reported: Outcome | None) -> bool:
    """A report is evidence only if it is one the table allows for the mode."""
    return (
        reported is not None
        and reported in EVENT_OUTCOMES[Event.REPORT]
        and reported not in MODE_FORBIDS[rec.mode]
    )


def handle_reports(p: Parts, names: list[str]) -> None:
    """Journal the reports in ``reports/`` as one group (REPORT_GROUP_MAX).

    Each report is read and judged on its own (`kexpr.spool.lifecycle.
    report_admissible`): an unreadable, malformed or misnamed file, or one
    that is inadmissible, is an orphan: counted and removed. The admissible
    ones are appended together, one fsync per segment, and each file is
    removed only after its row is durable (only the one that was read, fsio
    rule 4). If the append fails, or the worker is in quarantine, they stay
    for the next worker."""
    read: list[tuple[str, FileId, SpoolReport]] = []
    kept = p.kept_reports
    # A report leaves reports/ once judged inadmissible, or once its terminal
    # row is durable (spool.lifecycle rule 5).
    inadmissible = source(p.root, File.REPORT, Move.INADMISSIBLE)
    durable = source(p.root, File.REPORT, Move.TERMINAL_DURABLE)
    for name in names:
        path = p.root.reports / name
        if kept.is_kept(path, name):
            continue  # read once already: a newer protocol's, kept
        try:
            data, fid = read_private_identified(path, max_bytes=MAX_MESSAGE_BYTES)
            report = parse_report(data)
            if name != f"{report.attempt_id}.json":
                raise MessageError("attempt_id")
        except FileNotFoundError:
            continue
        except UnknownSpoolVersion:
            # A newer protocol's report: not ours to judge, and never dropped.
            # Counted once; kept for a worker that knows it.
            if kept.keep(path, name):
                p.counters.fault(Fault.UNKNOWN_SPOOL_VERSION)
            continue
        except (MessageError, OSError, ValueError) as e:
            p.counters.bump("orphan_reports")
            p.outbox.drop(inadmissible / name, e)
            continue
        read.append((name, fid, report))
    if not read or not p.quarantine.journal_ok:
        return
    done: list[tuple[Path, FileId]] = []
    try:
        with p.journal.locked() as j:
            mono = p.mono()
            items: list[tuple[AttemptRecord, Phase, Event, Outcome]] = []
            files: dict[str, tuple[Path, FileId]] = {}
            for name, fid, report in read:
                rec = j.index.by_attempt.get(report.attempt_id)
                reported = report.outcome  # a report outcome is journaled as is
                held = p.attempts.held.get(report.attempt_id)
                why = report_admissible(
                    rec.outcome if rec is not None else None,
                    rec.mode if rec is not None else None,
                    held,
                    reported,
                    mono,
                )
                if why is not None or rec is None or held is None:
                    p.counters.bump("orphan_reports")
                    done.append((inadmissible / name, fid))
                    continue
                items.append((rec, held.phase, Event.REPORT, reported))
                files[rec.attempt_id] = (durable / name, fid)
            for i in range(0, len(items), REPORT_GROUP_MAX):
                group = items[i : i + REPORT_GROUP_MAX]
                for rec in j.append_terminals(group, p.clock()):
                    assert rec.outcome is not None
                    finalized(p, rec.attempt_id, rec.outcome)
                    p.counters.bump("reports")
                    done.append(files[rec.attempt_id])
    except JOURNAL_ERRORS as e:
        p.quarantine.failed(e)
    for path, fid in done:
        p.outbox.remove_read(path, fid)

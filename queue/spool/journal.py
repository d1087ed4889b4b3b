"""The outcome journal (design §5).

Rules (the attempt's lifecycle itself is `kexpr.spool.lifecycle`'s table; the rows and
their format table are `kexpr.spool._journal_rows`, their verification
`kexpr.spool._journal_verify`, the files on disk (listing, reading, sealing)
`kexpr.spool._journal_files`, the start-up snapshot `kexpr.spool._journal_snapshot`,
the whole-root audit and the operator's torn-tail command `kexpr.spool._journal_audit`):

1. Rows are canonical JSON: sorted keys, ``ensure_ascii=False``, separators
   ``(",", ":")``, NFC, one LF. Exactly the 13 fields of `ROW_FIELDS`.
2. Daily UTC segments ``outcomes/YYYY-MM-DD.jsonl``; ``sequence`` is contiguous
   from 1 within a segment; the first ``previous_row_digest`` is 64 zeroes, every
   later one is the previous row's ``row_digest``; ``row_digest`` is SHA-256 of the
   canonical row without ``row_digest``.
2a. ``artifact_key`` is 32 hex (this release) or 64 hex (a row an earlier
   release wrote: the whole HMAC). Both verify; an artifact's identity is its
   key's first 32 hex (`dedupe_key`), so one artifact is one artifact whatever
   length its rows carry (rule 3), across restarts, sealing and retention.
3. A terminal row goes into the segment of its start row (even across midnight),
   copies ``started_at_utc`` and ``deadline_at_utc`` verbatim, and there is at most
   one per attempt, with its start row's ``artifact_key`` as written. One artifact
   has at most one attempt, ever.
4. Every append happens under the ``journal.lock`` flock (`kexpr.spool.fsio`, never
   unlinked) and is fsynced before the lock is released; ``attempt_started`` is on
   disk before the one wire request is made. An append first checks that the
   segment is still the inode, and the size, this process last wrote.
4a. An append that fails part-way (ENOSPC, EDQUOT, EIO, a short write, a failed
   fsync) is undone *under the same lock, before anything else happens*: the
   segment is truncated back to the size before the append (known: rule 4's
   tail) and fsynced. Those bytes were never acknowledged (no call, no
   response, no row followed them), so this is not a rewrite of the journal:
   it is the filelock rule "partial state is undone, then re-raised"
   (`AppendRefused`, ``append_undone``). Only if the undo itself fails does the
   torn tail stay, and the worker quarantines as before (module docstring,
   "Torn tail"), so a full disk mid-row does not leave a torn tail that needs
   an operator.
5. Nothing here is ever rewritten or truncated (but rule 4a's undo of our
   own unacknowledged bytes). A row that fails any rule makes
   the journal *unverified*: the worker then makes zero new calls (fail closed).
6. No text, prompt, response, value or raw identifier is ever a field.
7. Retention: a segment is kept for exactly `RETENTION_DAYS` (35) completed UTC
   days plus today and then removed *whole* (unlink + directory fsync), only
   once every attempt in it is terminal; the worker terminalizes an open attempt
   ``claim_expired_canonical`` before its segment can age out. Dedupe is across
   the retention window (design §4). The segment holding the newest row is never
   removed, and a worker that observed a wall-clock step runs no retention
   (`kexpr.spool.lifecycle` rule 7).
7a. A segment is never removed on the word of one process's clock alone: the
   clock, the journal's newest row and the data root's retention record must
   agree, and after a step nobody can explain nothing is removed for
   `RETENTION_DAYS` + 1 days (`kexpr.spool.retention`).

8. Segment size: the writer never makes a segment the
   reader refuses (`MAX_SEGMENT_BYTES`). Every open attempt of a segment holds
   a reservation of `MAX_ROW_BYTES` for its one terminal row: a start row is
   appended only if, after it, ``size + open attempts × MAX_ROW_BYTES`` is
   still within the cap; otherwise `AppendRefused` (``segment_full``): the new
   attempt is refused (canonical, no call) and the worker's status says
   ``refusing: segment_full`` until the next UTC day's segment. A terminal row
   closes a reservation, so terminal rows of open attempts always fit; no row
   ever crosses the cap. Capacity: a start row and a terminal row take about
   1,200 bytes, so one UTC day holds about 220,000 attempts
   (docs/faults.md).

Torn tail: what the worker does, and the operator's command
(``kexpr journal quarantine``), are in docs/journal.md. Quarantined segments
still count for dedupe: their artifact keys are *sealed*
(`kexpr.spool._journal_files.seal`).
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from kexpr.spool._journal_audit import JournalAudit, JournalFinding, audit, quarantine_torn
from kexpr.spool._journal_files import (
    QuarantinedFile,
    quarantined_files,
    read_journal_file,
    seal,
    segment_names,
)
from kexpr.spool._journal_prior import append_link, prior_days, prior_path, read_links
from kexpr.spool._journal_rows import (
    ARTIFACT_KEY_LENGTHS,
    DEDUPE_KEY_HEX,
    JOURNAL_SCHEMA,
    MAX_ROW_BYTES,
    MAX_SEGMENT_BYTES,
    RETENTION_DAYS,
    ROW_FIELDS,
    ZERO_DIGEST,
    AppendRefused,
    AttemptRecord,
    Finding,
    Index,
    JournalUnverified,
    State,
    _count_open,
    _finalized,
    _Tail,
    dedupe_key,
    retention_cutoff,
    row_digest,
    segment_date,
)
from kexpr.spool._journal_snapshot import Print, adopt, export_verified, file_print
from kexpr.spool._journal_verify import verify_segment_bytes
from kexpr.spool.canonical import canonical_json, format_ts, parse_ts
from kexpr.spool.fsio import (
    HeldFlock,
    ProductLock,
    UnsafePath,
    UnsafeReason,
    fsync_dir,
    make_flock,
    open_append,
    remove_file,
)
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import (
    EVENT_OUTCOMES,
    TERMINAL_OUTCOMES,
    TRANSITIONS,
    Event,
    IllegalTransition,
    Outcome,
    Phase,
    SpoolMode,
    transition,
)

# ---------------------------------------------------------------------- journal


class Journal:
    """Single-writer, hash-chained, daily-segmented outcome journal.

    Thread-safe within the worker (a `threading.Lock` orders threads; the
    ``journal.lock`` flock orders processes). Appends verify that the segment on
    disk is still the one this process last wrote (size and inode); anything else
    is `Finding.APPEND_CONFLICT` and nothing is written.
    """

    def __init__(self, root: DataRoot, *, create_lock: bool = True) -> None:
        """``create_lock=False`` for the ops tools (`kexpr.spool.fsio.ProductLock`)."""
        self._root = root
        self._mutex = threading.RLock()
        # The writer keeps one checked descriptor (`HeldFlock`: one flock and
        # one lstat per critical section); ops tools re-check everything on
        # every acquire and never create the file (`ProductLock`).
        self._flock: HeldFlock | ProductLock = (
            HeldFlock(root.journal_lock)
            if create_lock
            else make_flock(root.journal_lock, create=False)
        )
        self._tails: dict[str, _Tail] = {}
        self.index = Index()
        # `newest_start`'s answer for one index: computed once per load.
        self._newest: tuple[Index, str | None] | None = None

    # -- reading ---------------------------------------------------------------

    def segments(self) -> list[str]:
        return segment_names(self._root)

    def quarantined(self) -> list[QuarantinedFile]:
        return quarantined_files(self._root)

    _read_file = staticmethod(read_journal_file)

    def _segment_path(self, segment: str) -> Path:
        return self._root.outcomes / f"{segment}.jsonl"

    def _read_segment(self, segment: str) -> tuple[bytes, os.stat_result]:
        return self._read_file(self._segment_path(segment), segment)

    def _load_unlocked(
        self, *, skip: str | None = None, prints: list[Print] | None = None
    ) -> tuple[Index, dict[str, _Tail]]:
        """``prints``: filled with what was read (`Print`), for `export_verified`."""
        index = Index()
        tails: dict[str, _Tail] = {}
        for q in self.quarantined():
            data, st = self._read_file(self._root.quarantine / q.name, q.segment)
            seal(data, q, index)
            if prints is not None:
                prints.append(file_print("q", q.name, st))
        for segment in self.segments():
            if segment == skip:
                continue
            data, st = self._read_segment(segment)
            seq, digest = verify_segment_bytes(data, segment, index)
            tails[segment] = _Tail(seq, digest, st.st_size, st.st_ino)
            if prints is not None:
                prints.append(file_print("s", segment, st))
        # A rotation's links (`kexpr.spool._journal_prior`), after every row:
        # a link names where an attempt the rows hold is also found.
        for day in prior_days(self._root):
            for aid, prior in read_links(self._root, day):
                index.link(aid, prior)
        _count_open(index, tails)
        return index, tails

    # -- verification in another process (worker start-up; spool._journal_snapshot)

    def export_verified(self) -> bytes:
        """`kexpr.spool._journal_snapshot.export_verified`."""
        return export_verified(self)

    def adopt(self, blob: bytes) -> bool:
        """`kexpr.spool._journal_snapshot.adopt`."""
        return adopt(self, blob)

    def load(self) -> Index:
        """Verify every segment (and quarantined file) and rebuild the dedupe
        index. Fail closed: `JournalUnverified` on the first finding."""
        with self.locked():
            self.index, self._tails = self._load_unlocked()
            return self.index

    # -- writing ---------------------------------------------------------------

    def _append(self, row: dict[str, Any]) -> None:
        """Append one row to its segment. Caller holds both locks."""
        self._append_rows(row["started_at_utc"][:10], [row])

    def _append_rows(self, segment: str, rows: Sequence[dict[str, Any]]) -> None:
        """Append rows to one segment: one write, one fsync (group commit).
        Caller holds both locks. The tail moves only after the fsync."""
        path = self._segment_path(segment)
        tail = self._tails.get(segment)
        created = tail is None
        if tail is None:
            tail = _Tail(0, ZERO_DIGEST, 0, 0)
        try:
            fd, st = open_append(path, create=created)
        except UnsafePath as e:
            raise JournalUnverified(Finding.APPEND_CONFLICT, segment) from e
        except OSError as e:
            if e.errno in _NOTHING_WRITTEN:
                # Out of descriptors, memory, space or quota before a byte was
                # written: the segment is as it was (rule 4a).
                raise AppendRefused(Finding.APPEND_UNDONE, segment) from e
            raise JournalUnverified(Finding.APPEND_CONFLICT, segment) from e
        try:
            if st.st_size != tail.size or (not created and st.st_ino != tail.ino):
                raise JournalUnverified(Finding.APPEND_CONFLICT, segment)
            sequence, digest = tail.sequence, tail.digest
            lines = []
            opened = 0
            for row in rows:
                if row["started_at_utc"][:10] != segment:
                    raise ValueError("a row goes in the segment of its start row")
                sequence += 1
                row["sequence"] = sequence
                row["previous_row_digest"] = digest
                row.pop("row_digest", None)
                row["row_digest"] = digest = row_digest(row)
                lines.append(canonical_json(row) + "\n")
                opened += 1 if row["state"] == State.ATTEMPT_STARTED.value else -1
            data = "".join(lines).encode("utf-8")
            if any(len(line.encode("utf-8")) > MAX_ROW_BYTES for line in lines):
                raise ValueError("a row longer than MAX_ROW_BYTES")
            # Rule 8: never past the cap; a start row only with room left for
            # the terminal row of every attempt it leaves open.
            size_after, open_after = tail.size + len(data), max(tail.open + opened, 0)
            if size_after > MAX_SEGMENT_BYTES or (
                opened > 0 and size_after + open_after * MAX_ROW_BYTES > MAX_SEGMENT_BYTES
            ):
                if created:
                    self._tails[segment] = _Tail(0, ZERO_DIGEST, 0, st.st_ino)
                raise AppendRefused(Finding.SEGMENT_FULL, segment)
            try:
                written = os.write(fd, data)
                if written != len(data):
                    raise OSError(errno.ENOSPC, "short write")
                os.fsync(fd)
            except BaseException as e:
                # Rule 4a: undo our own unacknowledged bytes, then re-raise.
                if not _undo(fd, st.st_ino, tail.size):
                    raise JournalUnverified(Finding.TORN_TAIL, segment) from e
                if created:
                    # The new segment stays, empty (an empty segment verifies);
                    # the next append continues it instead of creating it.
                    self._tails[segment] = _Tail(0, ZERO_DIGEST, 0, st.st_ino)
                    _quiet_fsync_dir(self._root.outcomes)
                if isinstance(e, (OSError, ValueError)):
                    raise AppendRefused(Finding.APPEND_UNDONE, segment) from e
                raise
            self._tails[segment] = _Tail(
                sequence, digest, tail.size + len(data), st.st_ino, open_after
            )
        finally:
            os.close(fd)
        if created:
            fsync_dir(self._root.outcomes)

    def locked(self) -> _Locked:
        """``with journal.locked():`` — decisions and appends that must be atomic.

        Raises `JournalUnverified` (``lock_unsafe``) when the lock file is not
        what it must be (`kexpr.spool.fsio.ProductLock`)."""
        return _Locked(self)

    def append_start(
        self,
        *,
        artifact_key: str,
        surface: str,
        mode: SpoolMode,
        attempt_id: str,
        started_at: dt.datetime,
        deadline_at_utc: str,
        prior: Sequence[str] = (),
    ) -> AttemptRecord:
        """Append + fsync ``attempt_started``. Caller holds `locked()`.
        ``prior``: the artifact's keys under sealed identity keys; the attempt
        is findable under each of them too, durably before the start row
        (`kexpr.spool._journal_prior`)."""
        if self.index.knows(artifact_key):
            raise IllegalTransition(Phase.FINALIZED, Event.START, None)
        transition(None, Event.START, None, mode)
        started = format_ts(started_at)
        rec = AttemptRecord(
            attempt_id=attempt_id,
            artifact_key=artifact_key,
            surface=surface,
            mode=mode,
            started_at_utc=started,
            deadline_at_utc=deadline_at_utc,
            segment=started[:10],
            outcome=None,
        )
        unknown = [k for k in prior if self.index.get(k) is None]
        if unknown:
            try:
                append_link(self._root, rec.segment, attempt_id, unknown)
            except OSError as e:
                # Nothing acknowledged: no row, no call (`_journal_prior` rule 3).
                raise AppendRefused(Finding.APPEND_UNDONE, rec.segment) from e
        self._append(self._row(rec, State.ATTEMPT_STARTED, Outcome.ATTEMPT_STARTED, None))
        self.index.put(rec)
        self.index.link(attempt_id, unknown)
        if self._newest is not None and self._newest[0] is self.index:
            self._newest = (self.index, max(started, self._newest[1] or started))
        return rec

    def append_terminal(
        self, rec: AttemptRecord, phase: Phase, event: Event, outcome: Outcome, now: dt.datetime
    ) -> AttemptRecord:
        """Append + fsync the one terminal row. Caller holds `locked()`."""
        current = self.index.by_attempt.get(rec.attempt_id)
        if current is None or current.outcome is not None:
            raise IllegalTransition(Phase.FINALIZED, event, outcome)
        transition(phase, event, outcome, rec.mode)
        done = _finalized(rec, outcome)
        self._append(self._row(done, State.FINALIZED, outcome, format_ts(now)))
        self.index.put(done)
        return done

    def append_terminals(
        self, items: Sequence[tuple[AttemptRecord, Phase, Event, Outcome]], now: dt.datetime
    ) -> list[AttemptRecord]:
        """Append the terminal rows of several attempts as one group: per segment
        one write and one fsync (group commit), instead of one fsync per row.

        All or nothing before any I/O: every item is judged first (known, not yet
        terminal, not twice in the group, a legal transition), and one illegal
        item raises `IllegalTransition` with nothing written. An I/O failure
        raises `JournalUnverified`; segments already synced stay in the index.
        Caller holds `locked()`."""
        finalized = format_ts(now)
        seen: set[str] = set()
        done: list[tuple[AttemptRecord, Outcome]] = []
        for rec, phase, event, outcome in items:
            current = self.index.by_attempt.get(rec.attempt_id)
            if current is None or current.outcome is not None or rec.attempt_id in seen:
                raise IllegalTransition(Phase.FINALIZED, event, outcome)
            transition(phase, event, outcome, rec.mode)
            seen.add(rec.attempt_id)
            done.append((_finalized(current, outcome), outcome))
        by_segment: dict[str, list[tuple[AttemptRecord, Outcome]]] = {}
        for d, outcome in done:
            by_segment.setdefault(d.segment, []).append((d, outcome))
        for segment in sorted(by_segment):
            group = by_segment[segment]
            self._append_rows(
                segment, [self._row(d, State.FINALIZED, o, finalized) for d, o in group]
            )
            for d, _ in group:
                self.index.put(d)
        return [d for d, _ in done]

    # -- retention (rule 7) ------------------------------------------------------

    def expired(self, today: dt.date) -> list[str]:
        """Days (live or quarantined) older than the retention window. Caller holds `locked()`."""
        cutoff = retention_cutoff(today)
        days = {s for s in self.segments()} | {q.segment for q in self.quarantined()}
        return sorted(d for d in days if segment_date(d) < cutoff)

    def has_expired(self, today: dt.date) -> bool:
        """In memory, no I/O: does a loaded segment or sealed day lie before the window?"""
        cutoff = retention_cutoff(today)
        days = set(self._tails) | set(self.index.sealed.values())
        return any(segment_date(d) < cutoff for d in days)

    def newest_start(self) -> dt.datetime | None:
        """The newest ``started_at_utc`` in the loaded journal, None if it has no
        row (rule 7a's first witness). Caller holds `locked()`."""
        if self._newest is None or self._newest[0] is not self.index:
            newest = max((r.started_at_utc for r in self.index.by_attempt.values()), default=None)
            self._newest = (self.index, newest)
        newest = self._newest[1]
        return None if newest is None else parse_ts(newest)

    def open_in(self, segment: str) -> list[AttemptRecord]:
        return [r for r in self.index.open_attempts() if r.segment == segment]

    def remove_expired(self, today: dt.date) -> tuple[list[str], list[str]]:
        """Remove whole expired segments whose attempts are all terminal.

        Returns (removed, kept): a segment with an open attempt is kept (the
        worker terminalizes that attempt first, ``claim_expired_canonical``), and
        so is the segment holding the newest row.
        Caller holds `locked()` and has loaded the journal.
        """
        removed: list[str] = []
        kept: list[str] = []
        # The segment holding the newest row is never removed (spool.lifecycle
        # rule 7): a wall clock that is wrong can never empty the journal.
        newest = max(self._tails, default=None)
        for day in self.expired(today):
            if self.open_in(day) or day == newest:
                kept.append(day)
                continue
            try:
                if day in self.segments():
                    remove_file(self._root.outcomes, f"{day}.jsonl")
                if day in prior_days(self._root):
                    remove_file(self._root.outcomes, prior_path(self._root, day).name)
                for q in self.quarantined():
                    if q.segment == day:
                        remove_file(self._root.quarantine, q.name)
            except OSError as e:  # an UnsafePath too
                raise JournalUnverified(Finding.UNSAFE_FILE, day) from e
            self._tails.pop(day, None)
            self.index.drop_segment(day)
            removed.append(day)
        # Days another process (`kexpr journal prune`) removed under the lock.
        cutoff = retention_cutoff(today)
        for day in [d for d in self._tails if segment_date(d) < cutoff and d not in kept]:
            self._tails.pop(day, None)
            self.index.drop_segment(day)
        return removed, kept

    def prune(
        self,
        today: dt.date,
        *,
        apply: bool,
        hold: Callable[[Journal], RetentionHeld | None] | None = None,
    ) -> tuple[list[str], list[str]]:
        """`kexpr journal prune`: under the lock, verify everything, then list
        (dry run) or remove the expired segments without open attempts. Never
        writes a row: open attempts are left to the worker (rule 7). ``hold``,
        asked after the load: a `RetentionHeld` it returns is raised (rule 7a)."""
        with self.locked():
            self.index, self._tails = self._load_unlocked()
            held = None if hold is None else hold(self)
            if held is not None:
                raise held
            expired = self.expired(today)
            newest = max(self._tails, default=None)
            kept = [d for d in expired if self.open_in(d) or d == newest]
            if not apply:
                return [d for d in expired if d not in kept], kept
            return self.remove_expired(today)

    # -- the operator's torn-tail command (module docstring) ------------------------

    def quarantine_torn(self, segment: str, *, apply: bool) -> str:
        """`kexpr.spool._journal_audit.quarantine_torn` (the operator's command)."""
        return quarantine_torn(self, segment, apply=apply)

    @staticmethod
    def _row(
        rec: AttemptRecord, state: State, outcome: Outcome, finalized: str | None
    ) -> dict[str, Any]:
        return {
            "schema_version": JOURNAL_SCHEMA,
            "sequence": 0,
            "artifact_key": rec.artifact_key,
            "surface": rec.surface,
            "mode": rec.mode.value,
            "attempt_id": rec.attempt_id,
            "state": state.value,
            "outcome": outcome.value,
            "started_at_utc": rec.started_at_utc,
            "deadline_at_utc": rec.deadline_at_utc,
            "finalized_at_utc": finalized,
            "previous_row_digest": ZERO_DIGEST,
        }


class RetentionHeld(Exception):
    """Rule 7a: retention removes nothing now; ``reason`` is an enum value."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Errors of ``open`` that leave every segment exactly as it was (rule 4a). Not
# ENOENT/EEXIST: a segment removed or planted behind our back is a conflict.
_NOTHING_WRITTEN: Final = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EINTR}
)


def _undo(fd: int, ino: int, size: int) -> bool:
    """Rule 4a: cut the segment behind ``fd`` back to ``size`` and sync it. True
    only if it is then provably the file it was (same inode, that size)."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
        st = os.fstat(fd)
    except OSError:
        return False
    return st.st_size == size and st.st_ino == ino


def _quiet_fsync_dir(d: Path) -> None:
    try:
        fsync_dir(d)
    except OSError:
        pass  # an empty new segment: harmless whether or not its name is durable


class _Locked:
    """The one critical section: the in-process mutex, then the ``journal.lock``
    flock. An unsafe lock file is `Finding.LOCK_UNSAFE` (fail closed)."""

    def __init__(self, journal: Journal) -> None:
        self._j = journal

    def __enter__(self) -> Journal:
        self._j._mutex.acquire()
        try:
            self._j._flock.acquire()
        except UnsafePath as e:
            self._j._mutex.release()
            raise JournalUnverified(Finding.LOCK_UNSAFE, "") from e
        except BaseException:
            self._j._mutex.release()
            raise
        return self._j

    def __exit__(self, *exc: object) -> None:
        try:
            self._j._flock.release()
        finally:
            self._j._mutex.release()


def audit_journal(root: DataRoot) -> JournalAudit:
    """Verify every segment and quarantined file, collecting *every* finding (one
    per file) instead of stopping at the first; for `kexpr journal verify`.
    Read-only, through an ops tool's `Journal` (`kexpr.spool._journal_audit.audit`)."""
    return audit(Journal(root, create_lock=False))


__all__ = [
    "ARTIFACT_KEY_LENGTHS",
    "DEDUPE_KEY_HEX",
    "EVENT_OUTCOMES",
    "JOURNAL_SCHEMA",
    "MAX_ROW_BYTES",
    "MAX_SEGMENT_BYTES",
    "RETENTION_DAYS",
    "ROW_FIELDS",
    "TERMINAL_OUTCOMES",
    "TRANSITIONS",
    "ZERO_DIGEST",
    "AppendRefused",
    "AttemptRecord",
    "Event",
    "Finding",
    "IllegalTransition",
    "Index",
    "Journal",
    "JournalAudit",
    "JournalFinding",
    "JournalUnverified",
    "SpoolMode",
    "Outcome",
    "Phase",
    "QuarantinedFile",
    "RetentionHeld",
    "State",
    "UnsafePath",
    "UnsafeReason",
    "audit_journal",
    "canonical_json",
    "dedupe_key",
    "format_ts",
    "parse_ts",
    "retention_cutoff",
    "row_digest",
    "segment_date",
    "transition",
    "verify_segment_bytes",
]

"""The outcome journal (SPEC §5; plan "Outcome journal").

Rules (h11 `_state.py` style: everything that affects an attempt's lifecycle lives
here, and the lifecycle is a table, not scattered ifs):

1. Rows are canonical JSON: sorted keys, ``ensure_ascii=False``, separators
   ``(",", ":")``, NFC, one LF. Exactly the 13 fields of `ROW_FIELDS`.
2. Daily UTC segments ``outcomes/YYYY-MM-DD.jsonl``; ``sequence`` is contiguous
   from 1 within a segment; the first ``previous_row_digest`` is 64 zeroes, every
   later one is the previous row's ``row_digest``; ``row_digest`` is SHA-256 of the
   canonical row without ``row_digest``.
3. A terminal row goes into the segment of its start row (even across midnight),
   copies ``started_at_utc`` and ``deadline_at_utc`` verbatim, and there is at most
   one per attempt. One artifact has at most one attempt, ever.
4. Every append happens under the ``journal.lock`` flock (filelock, never
   unlinked) and is fsynced before the lock is released; ``attempt_started`` is on
   disk before the one wire request is made.
5. Nothing here is ever rewritten or truncated. A row that fails any rule makes
   the journal *unverified*: the worker then makes zero new calls (fail closed).
6. No text, prompt, response, value or raw identifier is ever a field.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from spool.fsio import FILE_MODE, UnsafePath, UnsafeReason, fsync_dir, make_flock
from spool.layout import DataRoot

JOURNAL_SCHEMA: Final = "korean-expression-journal-v1"
ZERO_DIGEST: Final = "0" * 64
ROW_FIELDS: Final = frozenset(
    {
        "schema_version",
        "sequence",
        "artifact_key",
        "surface",
        "mode",
        "attempt_id",
        "state",
        "outcome",
        "started_at_utc",
        "deadline_at_utc",
        "finalized_at_utc",
        "previous_row_digest",
        "row_digest",
    }
)
MAX_SEGMENT_BYTES: Final = 256 * 1024 * 1024
_SEGMENT_NAME = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.jsonl")
_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_SURFACES: Final = frozenset(
    {"daily.v1", "weekly.v1", "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1"}
)


class State(enum.StrEnum):
    ATTEMPT_STARTED = "attempt_started"
    FINALIZED = "finalized"


class Mode(enum.StrEnum):
    SHADOW = "shadow"
    ENABLED = "enabled"


class Outcome(enum.StrEnum):
    ATTEMPT_STARTED = "attempt_started"
    SELECTED = "selected"
    SHADOW_SELECTED = "shadow_selected"
    CREDENTIAL_UNAVAILABLE = "credential_unavailable"
    PROVIDER_ERROR = "provider_error"
    TIMEOUT = "timeout"
    INVALID_RESPONSE = "invalid_response"
    VALIDATION_REJECTED = "validation_rejected"
    COMMIT_FAILED = "commit_failed"
    PUBLICATION_FAILED = "publication_failed"
    CLAIM_EXPIRED_CANONICAL = "claim_expired_canonical"


TERMINAL_OUTCOMES: Final = frozenset(o for o in Outcome if o is not Outcome.ATTEMPT_STARTED)


class Phase(enum.StrEnum):
    """Where an attempt is. Only OPEN and FINALIZED are visible in the journal;
    AWAITING_REPORT is the worker's in-memory knowledge that the one call ended
    with an accepted composition and the shim now owns the outcome."""

    OPEN = "open"
    AWAITING_REPORT = "awaiting_report"
    FINALIZED = "finalized"


class Event(enum.StrEnum):
    START = "start"
    CALL_ACCEPTED = "call_accepted"  # contract accepted the content; response written
    CALL_FAILED = "call_failed"  # credential/provider/timeout/parse/contract failure
    REPORT = "report"  # the shim's report of what the host did
    EXPIRE = "expire"  # observed past deadline (or past COMMIT_GRACE) with no owner


# The attempt lifecycle (STYLE.md: h11's transition table). A missing key is an
# illegal transition: `IllegalTransition`, never a silent no-op ("once errored,
# always errored"; a FINALIZED attempt has no outgoing edge at all).
TRANSITIONS: Final[Mapping[tuple[Phase | None, Event], Phase]] = {
    (None, Event.START): Phase.OPEN,
    (Phase.OPEN, Event.CALL_ACCEPTED): Phase.AWAITING_REPORT,
    (Phase.OPEN, Event.CALL_FAILED): Phase.FINALIZED,
    (Phase.OPEN, Event.EXPIRE): Phase.FINALIZED,
    (Phase.AWAITING_REPORT, Event.REPORT): Phase.FINALIZED,
    (Phase.AWAITING_REPORT, Event.EXPIRE): Phase.FINALIZED,
}

# Which terminal outcome each event may carry.
EVENT_OUTCOMES: Final[Mapping[Event, frozenset[Outcome]]] = {
    Event.CALL_FAILED: frozenset(
        {
            Outcome.CREDENTIAL_UNAVAILABLE,
            Outcome.PROVIDER_ERROR,
            Outcome.TIMEOUT,
            Outcome.INVALID_RESPONSE,
            Outcome.VALIDATION_REJECTED,
        }
    ),
    Event.REPORT: frozenset(
        {
            Outcome.SHADOW_SELECTED,
            Outcome.SELECTED,
            Outcome.VALIDATION_REJECTED,
            Outcome.COMMIT_FAILED,
            Outcome.PUBLICATION_FAILED,
        }
    ),
    Event.EXPIRE: frozenset({Outcome.CLAIM_EXPIRED_CANONICAL}),
}

# A shadow attempt can only end shadow_selected when selected; an enabled one only selected.
MODE_FORBIDS: Final[Mapping[Mode, frozenset[Outcome]]] = {
    Mode.SHADOW: frozenset({Outcome.SELECTED, Outcome.COMMIT_FAILED, Outcome.PUBLICATION_FAILED}),
    Mode.ENABLED: frozenset({Outcome.SHADOW_SELECTED}),
}


class IllegalTransition(Exception):
    def __init__(self, phase: Phase | None, event: Event, outcome: Outcome | None) -> None:
        super().__init__(f"{phase}:{event}:{outcome}")
        self.phase, self.event, self.outcome = phase, event, outcome


def transition(
    phase: Phase | None, event: Event, outcome: Outcome | None, mode: Mode
) -> Phase:
    """The one place a lifecycle step is judged."""
    nxt = TRANSITIONS.get((phase, event))
    if nxt is None:
        raise IllegalTransition(phase, event, outcome)
    allowed = EVENT_OUTCOMES.get(event)
    if allowed is not None and (outcome not in allowed or outcome in MODE_FORBIDS[mode]):
        raise IllegalTransition(phase, event, outcome)
    return nxt


class Finding(enum.StrEnum):
    """Why a journal cannot be vouched for. Enum only: never content."""

    UNSAFE_FILE = "unsafe_file"
    UNEXPECTED_FILE = "unexpected_file"
    TORN_TAIL = "torn_tail"
    MALFORMED_ROW = "malformed_row"
    NON_CANONICAL_ROW = "non_canonical_row"
    FIELD_SET = "field_set"
    FIELD_FORMAT = "field_format"
    SEQUENCE_GAP = "sequence_gap"
    CHAIN_BROKEN = "chain_broken"
    DIGEST_MISMATCH = "digest_mismatch"
    STATE_OUTCOME = "state_outcome"
    WRONG_SEGMENT = "wrong_segment"
    DUPLICATE_START = "duplicate_start"
    DUPLICATE_ARTIFACT = "duplicate_artifact"
    ORPHAN_TERMINAL = "orphan_terminal"
    TERMINAL_MISMATCH = "terminal_mismatch"
    DOUBLE_TERMINAL = "double_terminal"
    APPEND_CONFLICT = "append_conflict"


class JournalUnverified(Exception):
    """The journal failed verification; the worker makes zero new calls."""

    def __init__(self, finding: Finding, segment: str) -> None:
        super().__init__(f"{finding.value}:{segment}")
        self.finding, self.segment = finding, segment


# --------------------------------------------------------------------------- rows


def format_ts(t: dt.datetime) -> str:
    """Exact RFC3339 UTC with microseconds: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    if t.tzinfo is None or t.utcoffset() != dt.timedelta(0):
        raise ValueError("timestamp must be UTC")
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(s: str) -> dt.datetime:
    if not _TS.fullmatch(s):
        raise ValueError("timestamp format")
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def row_digest(row_without_digest: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(dict(row_without_digest)).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """What the index knows of one attempt (metadata only)."""

    attempt_id: str
    artifact_key: str
    surface: str
    mode: Mode
    started_at_utc: str
    deadline_at_utc: str
    segment: str  # YYYY-MM-DD of the start row
    outcome: Outcome | None  # None while open

    @property
    def deadline(self) -> dt.datetime:
        return parse_ts(self.deadline_at_utc)


@dataclass(slots=True)
class _Tail:
    sequence: int
    digest: str
    size: int
    ino: int


@dataclass(slots=True)
class Index:
    """The dedupe index: rebuilt from verified segments at start-up."""

    by_artifact: dict[str, AttemptRecord] = field(default_factory=dict)
    by_attempt: dict[str, AttemptRecord] = field(default_factory=dict)

    def put(self, rec: AttemptRecord) -> None:
        self.by_artifact[rec.artifact_key] = rec
        self.by_attempt[rec.attempt_id] = rec

    def open_attempts(self) -> Iterator[AttemptRecord]:
        return (r for r in self.by_attempt.values() if r.outcome is None)


# ----------------------------------------------------------------- verification


def _check_row_fields(row: Mapping[str, Any], segment: str) -> None:
    def bad(f: Finding) -> JournalUnverified:
        return JournalUnverified(f, segment)

    if set(row) != ROW_FIELDS:
        raise bad(Finding.FIELD_SET)
    if row["schema_version"] != JOURNAL_SCHEMA:
        raise bad(Finding.FIELD_FORMAT)
    seq = row["sequence"]
    if type(seq) is not int or seq < 1:
        raise bad(Finding.FIELD_FORMAT)
    for k, pat in (
        ("artifact_key", _HEX64),
        ("attempt_id", _HEX32),
        ("previous_row_digest", _HEX64),
        ("row_digest", _HEX64),
    ):
        if not isinstance(row[k], str) or not pat.fullmatch(row[k]):
            raise bad(Finding.FIELD_FORMAT)
    if row["surface"] not in _SURFACES or row["mode"] not in {m.value for m in Mode}:
        raise bad(Finding.FIELD_FORMAT)
    for k in ("started_at_utc", "deadline_at_utc"):
        if not isinstance(row[k], str) or not _TS.fullmatch(row[k]):
            raise bad(Finding.FIELD_FORMAT)
    state, outcome, fin = row["state"], row["outcome"], row["finalized_at_utc"]
    if state == State.ATTEMPT_STARTED:
        if outcome != Outcome.ATTEMPT_STARTED or fin is not None:
            raise bad(Finding.STATE_OUTCOME)
    elif state == State.FINALIZED:
        if outcome not in {o.value for o in TERMINAL_OUTCOMES}:
            raise bad(Finding.STATE_OUTCOME)
        if not isinstance(fin, str) or not _TS.fullmatch(fin):
            raise bad(Finding.FIELD_FORMAT)
    else:
        raise bad(Finding.STATE_OUTCOME)


def _strict_row(line: bytes, segment: str) -> dict[str, Any]:
    def no_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs):
            raise JournalUnverified(Finding.MALFORMED_ROW, segment)
        return d

    def no_constants(_: str) -> Any:
        raise JournalUnverified(Finding.MALFORMED_ROW, segment)

    try:
        text = line.decode("utf-8")
        row = json.loads(text, object_pairs_hook=no_dupes, parse_constant=no_constants)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise JournalUnverified(Finding.MALFORMED_ROW, segment) from e
    if not isinstance(row, dict):
        raise JournalUnverified(Finding.MALFORMED_ROW, segment)
    if canonical_json(row) != text:
        raise JournalUnverified(Finding.NON_CANONICAL_ROW, segment)
    return row


def verify_segment_bytes(
    data: bytes, segment: str, index: Index
) -> tuple[int, str]:
    """Verify one segment's bytes and fold its attempts into ``index``.

    Returns the (last sequence, last digest) tail. Raises `JournalUnverified`.
    """
    if data and not data.endswith(b"\n"):
        raise JournalUnverified(Finding.TORN_TAIL, segment)
    seq, prev = 0, ZERO_DIGEST
    local: dict[str, AttemptRecord] = {}
    for line in data.split(b"\n")[:-1] if data else []:
        row = _strict_row(line, segment)
        _check_row_fields(row, segment)
        if row["sequence"] != seq + 1:
            raise JournalUnverified(Finding.SEQUENCE_GAP, segment)
        if row["previous_row_digest"] != prev:
            raise JournalUnverified(Finding.CHAIN_BROKEN, segment)
        body = {k: v for k, v in row.items() if k != "row_digest"}
        if row_digest(body) != row["row_digest"]:
            raise JournalUnverified(Finding.DIGEST_MISMATCH, segment)
        seq, prev = row["sequence"], row["row_digest"]
        aid = row["attempt_id"]
        if row["state"] == State.ATTEMPT_STARTED:
            if row["started_at_utc"][:10] != segment:
                raise JournalUnverified(Finding.WRONG_SEGMENT, segment)
            if aid in local or aid in index.by_attempt:
                raise JournalUnverified(Finding.DUPLICATE_START, segment)
            if row["artifact_key"] in index.by_artifact:
                raise JournalUnverified(Finding.DUPLICATE_ARTIFACT, segment)
            rec = AttemptRecord(
                attempt_id=aid,
                artifact_key=row["artifact_key"],
                surface=row["surface"],
                mode=Mode(row["mode"]),
                started_at_utc=row["started_at_utc"],
                deadline_at_utc=row["deadline_at_utc"],
                segment=segment,
                outcome=None,
            )
            local[aid] = rec
            index.put(rec)
        else:
            start = local.get(aid)
            if start is None:
                raise JournalUnverified(Finding.ORPHAN_TERMINAL, segment)
            if start.outcome is not None:
                raise JournalUnverified(Finding.DOUBLE_TERMINAL, segment)
            if (
                row["artifact_key"] != start.artifact_key
                or row["surface"] != start.surface
                or row["mode"] != start.mode
                or row["started_at_utc"] != start.started_at_utc
                or row["deadline_at_utc"] != start.deadline_at_utc
            ):
                raise JournalUnverified(Finding.TERMINAL_MISMATCH, segment)
            try:
                _phase_for_terminal(start, Outcome(row["outcome"]))
            except IllegalTransition as e:
                raise JournalUnverified(Finding.STATE_OUTCOME, segment) from e
            done = AttemptRecord(
                attempt_id=aid,
                artifact_key=start.artifact_key,
                surface=start.surface,
                mode=start.mode,
                started_at_utc=start.started_at_utc,
                deadline_at_utc=start.deadline_at_utc,
                segment=segment,
                outcome=Outcome(row["outcome"]),
            )
            local[aid] = done
            index.put(done)
    return seq, prev


def _phase_for_terminal(start: AttemptRecord, outcome: Outcome) -> None:
    """A terminal row is legal if *some* path of the table reaches it from OPEN.

    The journal does not record AWAITING_REPORT, so a report outcome is checked
    as OPEN -> (accepted) -> AWAITING_REPORT -> REPORT.
    """
    for event in (Event.CALL_FAILED, Event.EXPIRE):
        try:
            transition(Phase.OPEN, event, outcome, start.mode)
            return
        except IllegalTransition:
            pass
    transition(Phase.AWAITING_REPORT, Event.REPORT, outcome, start.mode)


# ---------------------------------------------------------------------- journal


class Journal:
    """Single-writer, hash-chained, daily-segmented outcome journal.

    Thread-safe within the worker (a `threading.Lock` orders threads; the
    ``journal.lock`` flock orders processes). Appends verify that the segment on
    disk is still the one this process last wrote (size and inode); anything else
    is `Finding.APPEND_CONFLICT` and nothing is written.
    """

    def __init__(self, root: DataRoot) -> None:
        self._root = root
        self._mutex = threading.RLock()
        self._flock = make_flock(root.journal_lock)
        self._tails: dict[str, _Tail] = {}
        self.index = Index()

    # -- reading ---------------------------------------------------------------

    def segments(self) -> list[str]:
        with os.scandir(self._root.outcomes) as entries:
            names = [entry.name for entry in entries]
        if not all(_SEGMENT_NAME.fullmatch(n) for n in names):
            raise JournalUnverified(Finding.UNEXPECTED_FILE, "")
        return sorted(n[:10] for n in names)

    def _segment_path(self, segment: str) -> Path:
        return self._root.outcomes / f"{segment}.jsonl"

    def _read_segment(self, segment: str) -> tuple[bytes, os.stat_result]:
        path = self._segment_path(segment)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            raise JournalUnverified(Finding.UNSAFE_FILE, segment) from e
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_uid != os.geteuid()
                or st.st_mode & 0o077
                or st.st_size > MAX_SEGMENT_BYTES
            ):
                raise JournalUnverified(Finding.UNSAFE_FILE, segment)
            chunks = []
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks), st
        finally:
            os.close(fd)

    def load(self) -> Index:
        """Verify every segment and rebuild the dedupe index. Fail closed."""
        with self._mutex, self._flock:
            index = Index()
            tails: dict[str, _Tail] = {}
            for segment in self.segments():
                data, st = self._read_segment(segment)
                seq, digest = verify_segment_bytes(data, segment, index)
                tails[segment] = _Tail(seq, digest, st.st_size, st.st_ino)
            self.index, self._tails = index, tails
            return index

    # -- writing ---------------------------------------------------------------

    def _append(self, row: dict[str, Any]) -> None:
        """Append one row to its segment. Caller holds both locks."""
        segment = row["started_at_utc"][:10]
        path = self._segment_path(segment)
        tail = self._tails.get(segment)
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        created = False
        if tail is None:
            flags |= os.O_CREAT | os.O_EXCL
            tail = _Tail(0, ZERO_DIGEST, 0, 0)
            created = True
        try:
            fd = os.open(path, flags, FILE_MODE)
        except OSError as e:
            raise JournalUnverified(Finding.APPEND_CONFLICT, segment) from e
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISREG(st.st_mode)
                or st.st_uid != os.geteuid()
                or st.st_mode & 0o077
                or st.st_size != tail.size
                or (not created and st.st_ino != tail.ino)
            ):
                raise JournalUnverified(Finding.APPEND_CONFLICT, segment)
            row["sequence"] = tail.sequence + 1
            row["previous_row_digest"] = tail.digest
            row.pop("row_digest", None)
            row["row_digest"] = row_digest(row)
            line = (canonical_json(row) + "\n").encode("utf-8")
            written = os.write(fd, line)
            if written != len(line):
                raise JournalUnverified(Finding.TORN_TAIL, segment)
            os.fsync(fd)
            self._tails[segment] = _Tail(
                row["sequence"], row["row_digest"], tail.size + len(line), st.st_ino
            )
        finally:
            os.close(fd)
        if created:
            fsync_dir(self._root.outcomes)

    def locked(self) -> _Locked:
        """``with journal.locked():`` — decisions and appends that must be atomic."""
        return _Locked(self)

    def append_start(
        self,
        *,
        artifact_key: str,
        surface: str,
        mode: Mode,
        attempt_id: str,
        started_at: dt.datetime,
        deadline_at_utc: str,
    ) -> AttemptRecord:
        """Append + fsync ``attempt_started``. Caller holds `locked()`."""
        if artifact_key in self.index.by_artifact:
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
        self._append(self._row(rec, State.ATTEMPT_STARTED, Outcome.ATTEMPT_STARTED, None))
        self.index.put(rec)
        return rec

    def append_terminal(
        self, rec: AttemptRecord, phase: Phase, event: Event, outcome: Outcome, now: dt.datetime
    ) -> AttemptRecord:
        """Append + fsync the one terminal row. Caller holds `locked()`."""
        current = self.index.by_attempt.get(rec.attempt_id)
        if current is None or current.outcome is not None:
            raise IllegalTransition(Phase.FINALIZED, event, outcome)
        transition(phase, event, outcome, rec.mode)
        done = AttemptRecord(
            attempt_id=rec.attempt_id,
            artifact_key=rec.artifact_key,
            surface=rec.surface,
            mode=rec.mode,
            started_at_utc=rec.started_at_utc,
            deadline_at_utc=rec.deadline_at_utc,
            segment=rec.segment,
            outcome=outcome,
        )
        self._append(self._row(done, State.FINALIZED, outcome, format_ts(now)))
        self.index.put(done)
        return done

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


class _Locked:
    def __init__(self, journal: Journal) -> None:
        self._j = journal

    def __enter__(self) -> Journal:
        self._j._mutex.acquire()
        try:
            self._j._flock.acquire()
        except BaseException:
            self._j._mutex.release()
            raise
        return self._j

    def __exit__(self, *exc: object) -> None:
        try:
            self._j._flock.release()
        finally:
            self._j._mutex.release()


__all__ = [
    "JOURNAL_SCHEMA",
    "ZERO_DIGEST",
    "ROW_FIELDS",
    "TRANSITIONS",
    "EVENT_OUTCOMES",
    "TERMINAL_OUTCOMES",
    "AttemptRecord",
    "Event",
    "Finding",
    "IllegalTransition",
    "Index",
    "Journal",
    "JournalUnverified",
    "Mode",
    "Outcome",
    "Phase",
    "State",
    "UnsafePath",
    "UnsafeReason",
    "canonical_json",
    "format_ts",
    "parse_ts",
    "row_digest",
    "transition",
    "verify_segment_bytes",
]

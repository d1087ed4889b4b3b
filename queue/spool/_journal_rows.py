"""The journal's rows: schema, timestamps, records, the dedupe index and the
reference verification of one row (`kexpr.spool.journal` rules 1-3, 6).
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from kexpr.spool.canonical import canonical_json, parse_ts
from kexpr.spool.lifecycle import LEGAL_TERMINALS, TERMINAL_OUTCOMES, Outcome, SpoolMode

JOURNAL_SCHEMA: Final = "korean-expression-journal-v1"
ZERO_DIGEST: Final = "0" * 64
MAX_SEGMENT_BYTES: Final = 256 * 1024 * 1024
# Rule 8: no row is longer than this (LF included). Rows have fixed-format
# fields only (~570-640 bytes; the sequence grows by a digit per decade); a
# longer one is a bug and is never written (ValueError).
MAX_ROW_BYTES: Final = 1024
# Rule 7: 35 completed UTC days plus today (design §5).
RETENTION_DAYS: Final = 35
_SEGMENT_NAME = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})\.jsonl")
# A segment's prior-key links (`kexpr.spool._journal_prior`): beside its segment.
_PRIOR_NAME = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})\.prior")
_QUARANTINE_NAME = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})\.([1-9][0-9]{0,5})\.jsonl")
# The spelling of a row's field values, shared by the reference check
# (`_check_row_fields`) and the fast path's patterns (`kexpr.spool._journal_verify`).
HEX_DIGIT: Final = "[0-9a-f]"
# A torn canonical row that got past its first field (keys sort: artifact_key first),
# of either key length (`ARTIFACT_KEY_LENGTHS`).
_TORN_KEY = re.compile(rb'\{"artifact_key":"([0-9a-f]{32}(?:[0-9a-f]{32})?)"')
# An artifact key is 32 hex (128 bits of its HMAC, this release's shim) or 64 (the
# whole HMAC, a row written before it). Both lengths stay valid: a journal keeps
# 35 days of rows and is never rewritten (rule 5). The first 32 hex are the
# artifact's identity (`dedupe_key`): an old 64-hex row and a new 32-hex request of
# the same artifact are one artifact, attempted once.
DEDUPE_KEY_HEX: Final = 32
ARTIFACT_KEY_LENGTHS: Final = (32, 64)
_SURFACES: Final = frozenset(
    {"daily.v1", "weekly.v1", "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1"}
)


class State(enum.StrEnum):
    ATTEMPT_STARTED = "attempt_started"
    FINALIZED = "finalized"


class FieldKind(enum.Enum):
    CONST = "const"  # one string value
    ENUM = "enum"  # one of a set of strings
    HEX = "hex"  # lowercase hex of a fixed length
    COUNT = "count"  # a JSON integer >= 1
    TIMESTAMP = "timestamp"  # `format_ts`, a real instant


@dataclass(frozen=True, slots=True)
class FieldFormat:
    """One row field's format (rule 2). ``by_state``: judged with ``state``
    (`Finding.STATE_OUTCOME`; ``finalized_at_utc`` is null on a start row),
    not on its own (`Finding.FIELD_FORMAT`)."""

    kind: FieldKind
    values: tuple[str, ...] = ()  # CONST, ENUM: the values, sorted
    length: int = 0  # HEX: the number of digits
    longer: int = 0  # HEX: another length it may have (0: none)
    by_state: bool = False


def _one_of(values: Iterable[str], *, by_state: bool = False) -> FieldFormat:
    return FieldFormat(FieldKind.ENUM, tuple(sorted(values)), by_state=by_state)


_HEX64_FORMAT: Final = FieldFormat(FieldKind.HEX, length=64)
_TS_FORMAT: Final = FieldFormat(FieldKind.TIMESTAMP)
# The row format: the 13 fields of design §5, in canonical (sorted) order, each
# with its format. The one table both the reference check and the fast path's
# patterns are built from: a change here changes both.
ROW_FORMAT: Final[Mapping[str, FieldFormat]] = MappingProxyType(
    {
        "artifact_key": FieldFormat(
            FieldKind.HEX, length=ARTIFACT_KEY_LENGTHS[0], longer=ARTIFACT_KEY_LENGTHS[1]
        ),
        "attempt_id": FieldFormat(FieldKind.HEX, length=32),
        "deadline_at_utc": _TS_FORMAT,
        "finalized_at_utc": FieldFormat(FieldKind.TIMESTAMP, by_state=True),
        "mode": _one_of(m.value for m in SpoolMode),
        "outcome": _one_of(
            [Outcome.ATTEMPT_STARTED.value, *(o.value for o in TERMINAL_OUTCOMES)], by_state=True
        ),
        "previous_row_digest": _HEX64_FORMAT,
        "row_digest": _HEX64_FORMAT,
        "schema_version": FieldFormat(FieldKind.CONST, (JOURNAL_SCHEMA,)),
        "sequence": FieldFormat(FieldKind.COUNT),
        "started_at_utc": _TS_FORMAT,
        "state": _one_of((s.value for s in State), by_state=True),
        "surface": _one_of(_SURFACES),
    }
)
ROW_FIELDS: Final = frozenset(ROW_FORMAT)
assert list(ROW_FORMAT) == sorted(ROW_FORMAT) and len(ROW_FIELDS) == 13


def hex_pattern(fmt: FieldFormat, digit: str = HEX_DIGIT) -> str:
    """The pattern of a HEX field's value: ``length`` digits, or ``longer``."""
    one = f"{digit}{{{fmt.length}}}"
    if not fmt.longer:
        return one
    return f"{one}(?:{digit}{{{fmt.longer - fmt.length}}})?"


_HEX: Final[Mapping[FieldFormat, re.Pattern[str]]] = {
    f: re.compile(hex_pattern(f)) for f in ROW_FORMAT.values() if f.kind is FieldKind.HEX
}


def conforms(fmt: FieldFormat, value: object) -> bool:
    """Does ``value`` (decoded from JSON) have the format ``fmt``?"""
    kind = fmt.kind
    if kind is FieldKind.COUNT:
        return type(value) is int and value >= 1
    if kind is FieldKind.TIMESTAMP:
        return _is_ts(value)
    if not isinstance(value, str):
        return False
    if kind is FieldKind.HEX:
        return _HEX[fmt].fullmatch(value) is not None
    return value in fmt.values  # CONST, ENUM


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
    LOCK_UNSAFE = "lock_unsafe"  # journal.lock is not the checked inode / file
    # Not findings about what is on disk: an append that failed and left the
    # segment exactly as it was (`AppendRefused`).
    APPEND_UNDONE = "append_undone"
    SEGMENT_FULL = "segment_full"


class JournalUnverified(Exception):
    """The journal failed verification; the worker makes zero new calls."""

    def __init__(self, finding: Finding, segment: str) -> None:
        super().__init__(f"{finding.value}:{segment}")
        self.finding, self.segment = finding, segment


class AppendRefused(JournalUnverified):
    """An append did not happen and the segment is exactly as it was before it
    (same inode, same size, synced): ``append_undone`` (the write or its fsync
    failed part-way and was undone, rule 4a) or ``segment_full`` (rule 8). The
    journal still verifies; the worker answers this request canonical with no
    call and keeps serving. A subclass, so that a caller that does not know it
    still fails closed."""


# --------------------------------------------------------------------------- rows


def _is_ts(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parse_ts(value)
    except ValueError:
        return False
    return True


def segment_date(segment: str) -> dt.date:
    """``YYYY-MM-DD`` of a real day, else ValueError."""
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", segment):
        raise ValueError("segment name")
    return dt.date.fromisoformat(segment)


def retention_cutoff(today: dt.date) -> dt.date:
    """The oldest day kept: 35 completed UTC days before ``today`` (rule 7)."""
    return today - dt.timedelta(days=RETENTION_DAYS)


def row_digest(row_without_digest: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(dict(row_without_digest)).encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """What the index knows of one attempt (metadata only)."""

    attempt_id: str
    artifact_key: str
    surface: str
    mode: SpoolMode
    started_at_utc: str
    deadline_at_utc: str
    segment: str  # YYYY-MM-DD of the start row
    outcome: Outcome | None  # None while open

    @property
    def deadline(self) -> dt.datetime:
        return parse_ts(self.deadline_at_utc)


def dedupe_key(artifact_key: str) -> str:
    """The artifact's identity in the dedupe index: its key's first 32 hex, the
    same for the 64-hex key an earlier release journaled and the 32-hex key of
    this release's requests (`DEDUPE_KEY_HEX`)."""
    return artifact_key[:DEDUPE_KEY_HEX]


def _finalized(rec: AttemptRecord, outcome: Outcome) -> AttemptRecord:
    return AttemptRecord(
        attempt_id=rec.attempt_id,
        artifact_key=rec.artifact_key,
        surface=rec.surface,
        mode=rec.mode,
        started_at_utc=rec.started_at_utc,
        deadline_at_utc=rec.deadline_at_utc,
        segment=rec.segment,
        outcome=outcome,
    )


@dataclass(slots=True)
class _Tail:
    sequence: int
    digest: str
    size: int
    ino: int
    # Open attempts whose start row is in this segment (rule 8's reservations).
    open: int = 0


def _count_open(index: Index, tails: Mapping[str, _Tail]) -> None:
    """Set each tail's open-attempt count from ``index`` (after a load)."""
    counts: dict[str, int] = {}
    for rec in index.open_attempts():
        counts[rec.segment] = counts.get(rec.segment, 0) + 1
    for segment, tail in tails.items():
        tail.open = counts.get(segment, 0)


@dataclass(slots=True)
class Index:
    """The dedupe index: rebuilt from verified segments at start-up.

    ``by_artifact`` and ``sealed`` are keyed by `dedupe_key` (a record keeps its
    row's key as written). ``sealed`` maps an artifact found in a quarantined
    file to that file's day: attempted, outcome unknowable, never again callable
    (module docstring). ``linked`` maps the key of an artifact under a key a
    rotation sealed to the attempt its request under the new key started
    (`kexpr.spool._journal_prior`): rows win over links, so a link never hides
    an attempt journaled under its own key. Look keys up with `get`,
    `is_sealed` and `knows`.
    """

    by_artifact: dict[str, AttemptRecord] = field(default_factory=dict)
    by_attempt: dict[str, AttemptRecord] = field(default_factory=dict)
    sealed: dict[str, str] = field(default_factory=dict)
    sealed_open: int = 0
    linked: dict[str, str] = field(default_factory=dict)

    def put(self, rec: AttemptRecord) -> None:
        self.by_artifact[dedupe_key(rec.artifact_key)] = rec
        self.by_attempt[rec.attempt_id] = rec

    def get(self, artifact_key: str) -> AttemptRecord | None:
        """The attempt of this artifact in the window, whatever its key length:
        journaled under this key, or else started under a newer key whose
        request named this one as prior (`link`)."""
        ident = dedupe_key(artifact_key)
        rec = self.by_artifact.get(ident)
        if rec is None and (aid := self.linked.get(ident)) is not None:
            rec = self.by_attempt.get(aid)
        return rec

    def link(self, attempt_id: str, prior: Iterable[str]) -> None:
        """Make ``attempt_id`` findable under each of ``prior`` (not a key the
        index already holds an attempt or a link for: the first one stays)."""
        if attempt_id not in self.by_attempt:
            return
        for key in prior:
            ident = dedupe_key(key)
            if ident not in self.by_artifact and ident not in self.linked:
                self.linked[ident] = attempt_id

    def is_sealed(self, artifact_key: str) -> bool:
        return dedupe_key(artifact_key) in self.sealed

    def knows(self, artifact_key: str) -> bool:
        ident = dedupe_key(artifact_key)
        return ident in self.by_artifact or ident in self.sealed

    def open_attempts(self) -> Iterator[AttemptRecord]:
        return (r for r in self.by_attempt.values() if r.outcome is None)

    def drop_segment(self, segment: str) -> None:
        """Forget a removed segment's attempts (retention: dedupe is per window)."""
        for rec in [r for r in self.by_attempt.values() if r.segment == segment]:
            del self.by_attempt[rec.attempt_id]
            ident = dedupe_key(rec.artifact_key)
            if self.by_artifact.get(ident) is rec:
                del self.by_artifact[ident]
        for akey in [k for k, aid in self.linked.items() if aid not in self.by_attempt]:
            del self.linked[akey]
        for akey in [k for k, day in self.sealed.items() if day == segment]:
            del self.sealed[akey]


# ----------------------------------------------------------------- verification


def _check_row_fields(row: Mapping[str, Any], segment: str) -> None:
    def bad(f: Finding) -> JournalUnverified:
        return JournalUnverified(f, segment)

    if set(row) != ROW_FIELDS:
        raise bad(Finding.FIELD_SET)
    for name, fmt in ROW_FORMAT.items():
        if not fmt.by_state and not conforms(fmt, row[name]):
            raise bad(Finding.FIELD_FORMAT)
    state, outcome, fin = row["state"], row["outcome"], row["finalized_at_utc"]
    if state == State.ATTEMPT_STARTED:
        if outcome != Outcome.ATTEMPT_STARTED or fin is not None:
            raise bad(Finding.STATE_OUTCOME)
    elif state == State.FINALIZED:
        if outcome == Outcome.ATTEMPT_STARTED or not conforms(ROW_FORMAT["outcome"], outcome):
            raise bad(Finding.STATE_OUTCOME)
        if not conforms(ROW_FORMAT["finalized_at_utc"], fin):
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
    except (ValueError, RecursionError) as e:
        # UnicodeDecodeError and JSONDecodeError are ValueErrors; so is an
        # integer of more than 4,300 digits (CPython's int limit), and a deeply
        # nested line exhausts the stack: all malformed, never a crash.
        raise JournalUnverified(Finding.MALFORMED_ROW, segment) from e
    if not isinstance(row, dict):
        raise JournalUnverified(Finding.MALFORMED_ROW, segment)
    if canonical_json(row) != text:
        raise JournalUnverified(Finding.NON_CANONICAL_ROW, segment)
    return row


def _slow_row(
    line: bytes,
    segment: str,
    seq: int,
    prev: str,
    local: dict[str, AttemptRecord],
    index: Index,
) -> tuple[int, str]:
    """The reference: verify one row after (``seq``, ``prev``) and fold it into
    ``local`` and ``index``. Returns the new (sequence, digest) tail; raises the
    row's exact `JournalUnverified` finding (nothing is folded in then)."""
    row = _strict_row(line, segment)
    _check_row_fields(row, segment)
    if row["sequence"] != seq + 1:
        raise JournalUnverified(Finding.SEQUENCE_GAP, segment)
    if row["previous_row_digest"] != prev:
        raise JournalUnverified(Finding.CHAIN_BROKEN, segment)
    body = {k: v for k, v in row.items() if k != "row_digest"}
    if row_digest(body) != row["row_digest"]:
        raise JournalUnverified(Finding.DIGEST_MISMATCH, segment)
    aid = row["attempt_id"]
    if row["state"] == State.ATTEMPT_STARTED:
        if row["started_at_utc"][:10] != segment:
            raise JournalUnverified(Finding.WRONG_SEGMENT, segment)
        if aid in local or aid in index.by_attempt:
            raise JournalUnverified(Finding.DUPLICATE_START, segment)
        if index.knows(row["artifact_key"]):
            raise JournalUnverified(Finding.DUPLICATE_ARTIFACT, segment)
        rec = AttemptRecord(
            attempt_id=aid,
            artifact_key=row["artifact_key"],
            surface=row["surface"],
            mode=SpoolMode(row["mode"]),
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
        if (start.mode, Outcome(row["outcome"])) not in LEGAL_TERMINALS:
            raise JournalUnverified(Finding.STATE_OUTCOME, segment)
        done = _finalized(start, Outcome(row["outcome"]))  # start is in this segment
        local[aid] = done
        index.put(done)
    return row["sequence"], row["row_digest"]

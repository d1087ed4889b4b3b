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
4. Every append happens under the ``journal.lock`` flock (`spool.fsio`, never
   unlinked) and is fsynced before the lock is released; ``attempt_started`` is on
   disk before the one wire request is made. An append first checks that the
   segment is still the inode, and the size, this process last wrote.
5. Nothing here is ever rewritten or truncated. A row that fails any rule makes
   the journal *unverified*: the worker then makes zero new calls (fail closed).
6. No text, prompt, response, value or raw identifier is ever a field.
7. Retention: a segment is kept for exactly `RETENTION_DAYS` (35) completed UTC
   days plus today and then removed *whole* (unlink + directory fsync), only
   once every attempt in it is terminal; the worker terminalizes an open attempt
   ``claim_expired_canonical`` before its segment can age out. Dedupe is across
   the retention window (SPEC §4).

Torn tail — what the worker does, and what the operator does
-------------------------------------------------------------

A row is *acknowledged* only when its ``fsync`` has returned, and nothing (no
wire request, no response, no further row) ever follows an unacknowledged row. A
last line without its LF is therefore the remains of a write that was never
acknowledged — but the worker cannot tell a crash from tampering, so:

- **Start-up with a torn tail (or any other finding): quarantine.** `Journal.load`
  raises `JournalUnverified`; the worker refuses every new attempt and keeps
  answering each request canonical (``journal_unavailable``): zero rows, zero
  provider calls, and it never truncates, rewrites or "repairs" a byte. Its
  status file says ``"journal": "unverified"`` with the finding enum. This lasts
  until an operator acts and restarts it.
- **The operator's documented command**, with the worker stopped::

      kexpr journal verify --data-root D            # shows torn_tail and the segment
      kexpr journal quarantine --data-root D --segment YYYY-MM-DD          # dry run
      kexpr journal quarantine --data-root D --segment YYYY-MM-DD --apply

  It accepts only a segment whose *sole* defect is a torn last line (every
  complete line verifies, in the context of every other segment). It hard-links
  the file unchanged to ``quarantine/YYYY-MM-DD.N.jsonl`` and removes the name
  from ``outcomes/`` (both directories fsynced). No byte is rewritten; the torn
  bytes stay as evidence. Any other finding is refused: it needs investigation,
  not a command.
- **Quarantined segments still count for dedupe.** Every artifact key in a
  quarantined file (its verified lines, and the torn line when it got as far as
  its first field, ``artifact_key``) is *sealed*: a later request for it is
  answered ``already_attempted`` with no call and no row, forever (within
  retention). Attempts left open in a quarantined file can never be terminalized
  (their segment is no longer appendable); `kexpr journal verify` reports them.
  A fresh ``outcomes/YYYY-MM-DD.jsonl`` may then start again at sequence 1.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json
import marshal
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Final

from spool.fsio import (
    FileId,
    HeldFlock,
    ProductLock,
    UnsafePath,
    UnsafeReason,
    fsync_dir,
    link_into,
    list_dir,
    make_flock,
    open_append,
    open_read,
    remove_file,
    unlink_if_same,
)
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
# Rule 7: 35 completed UTC days plus today (the plan's retention).
RETENTION_DAYS: Final = 35
_SEGMENT_NAME = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})\.jsonl")
_QUARANTINE_NAME = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})\.([1-9][0-9]{0,5})\.jsonl")
_TS = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
# A torn canonical row that got past its first field (keys sort: artifact_key first).
_TORN_KEY = re.compile(rb'\{"artifact_key":"([0-9a-f]{64})"')
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
    LOCK_UNSAFE = "lock_unsafe"  # journal.lock is not the checked inode / file


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
    """The exact format *and* a real instant (``2026-02-30T…`` is refused)."""
    if not _TS.fullmatch(s):
        raise ValueError("timestamp format")
    return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


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


# A journal file as read: (kind "s"egment | "q"uarantined, name, device, inode,
# size, ctime ns). Equal prints mean the same bytes unless someone forged a ctime,
# which needs CAP_SYS_TIME or the raw device.
_Print = tuple[str, str, int, int, int, int]
_EXPORT_VERSION: Final = "kexpr-journal-export-v1"


def _print(kind: str, name: str, st: os.stat_result) -> _Print:
    return (kind, name, st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)


@dataclass(slots=True)
class _Tail:
    sequence: int
    digest: str
    size: int
    ino: int


@dataclass(slots=True)
class Index:
    """The dedupe index: rebuilt from verified segments at start-up.

    ``sealed`` maps an artifact key found in a quarantined file to that file's
    day: attempted, outcome unknowable, never again callable (module docstring).
    """

    by_artifact: dict[str, AttemptRecord] = field(default_factory=dict)
    by_attempt: dict[str, AttemptRecord] = field(default_factory=dict)
    sealed: dict[str, str] = field(default_factory=dict)
    sealed_open: int = 0

    def put(self, rec: AttemptRecord) -> None:
        self.by_artifact[rec.artifact_key] = rec
        self.by_attempt[rec.attempt_id] = rec

    def knows(self, artifact_key: str) -> bool:
        return artifact_key in self.by_artifact or artifact_key in self.sealed

    def open_attempts(self) -> Iterator[AttemptRecord]:
        return (r for r in self.by_attempt.values() if r.outcome is None)

    def drop_segment(self, segment: str) -> None:
        """Forget a removed segment's attempts (retention: dedupe is per window)."""
        for rec in [r for r in self.by_attempt.values() if r.segment == segment]:
            del self.by_attempt[rec.attempt_id]
            if self.by_artifact.get(rec.artifact_key) is rec:
                del self.by_artifact[rec.artifact_key]
        for akey in [k for k, day in self.sealed.items() if day == segment]:
            del self.sealed[akey]


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
        if not _is_ts(row[k]):
            raise bad(Finding.FIELD_FORMAT)
    state, outcome, fin = row["state"], row["outcome"], row["finalized_at_utc"]
    if state == State.ATTEMPT_STARTED:
        if outcome != Outcome.ATTEMPT_STARTED or fin is not None:
            raise bad(Finding.STATE_OUTCOME)
    elif state == State.FINALIZED:
        if outcome not in {o.value for o in TERMINAL_OUTCOMES}:
            raise bad(Finding.STATE_OUTCOME)
        if not _is_ts(fin):
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
        done = _finalized(start, Outcome(row["outcome"]))  # start is in this segment
        local[aid] = done
        index.put(done)
    return row["sequence"], row["row_digest"]


def verify_segment_bytes(
    data: bytes, segment: str, index: Index, *, fast: bool = True
) -> tuple[int, str]:
    """Verify one segment's bytes and fold its attempts into ``index``.

    Returns the (last sequence, last digest) tail. Raises `JournalUnverified`.

    Every row gets the full verification either way. ``fast`` (the default) lets
    the fast path (`_FAST_PAIR`, `_FAST_ROW`, below) accept the rows it can vouch
    for with certainty: exact canonical layout, digest, chain, sequence, formats,
    duplicates and lifecycle, all checked. Any other row goes — with the state
    exactly as the reference would have it by then — to `_slow_row` (the
    reference), which folds it in or raises its exact finding. So the fast path
    is only ever stricter than the reference, never more lenient, and the result
    (finding, tail, index contents and order) is the reference's. ``fast=False``
    runs the reference alone (the differential tests compare the two).
    """
    if data and not data.endswith(b"\n"):
        raise JournalUnverified(Finding.TORN_TAIL, segment)
    seq, prev = 0, ZERO_DIGEST
    local: dict[str, AttemptRecord] = {}
    slow_row = _slow_row  # looked up per call: the tests count fallbacks by patching it
    if not fast:
        for line in data.split(b"\n")[:-1] if data else []:
            seq, prev = slow_row(line, segment, seq, prev, local, index)
        return seq, prev
    # latin-1 never fails and keeps byte offsets; the fast patterns match only
    # ASCII, whole lines, so a match's offsets are its row's bytes in `data`.
    text = data.decode("latin-1")
    match_pair, match_row = _FAST_PAIR.match, _FAST_ROW.match
    sha256 = hashlib.sha256
    hours, hour_ok = _HOURS, _hour_ok
    by_attempt, by_artifact, sealed = index.by_attempt, index.by_artifact, index.sealed
    legal, modes, record = _LEGAL_TERMINAL, _MODE_BY_VALUE, _record
    new_record = object.__new__
    (set_aid, set_akey, set_surface, set_mode, set_started, set_deadline, set_segment,
     set_outcome) = _RECORD_SLOTS
    # Single start rows the fast path accepted but has not folded into `local` /
    # `index` yet: attempt_id -> [artifact_key, surface, mode, started, deadline,
    # outcome], and their artifact keys. `_fold` makes one record per attempt in
    # start order (the reference's insertion order) before the reference judges a
    # row, and at the end; until then these ids and keys are absent from `index`.
    pending: dict[str, list[Any]] = {}
    keys: set[str] = set()
    # Start hours judged for this segment: a real hour *of this day* (`_hour_ok`).
    day_hours: dict[str, bool] = {}

    def start_hour_ok(hour: str) -> bool:
        ok = day_hours[hour] = hour_ok(hour) and hour[:10] == segment
        return ok

    size, pos = len(data), 0  # every row before `pos` has been judged
    while pos < size:
        # A start row directly followed by its terminal row (the writer's usual
        # order); the pattern's back-references make the copied fields equal.
        m = match_pair(text, pos)
        if m is not None:
            (akey, aid, deadline, deadline_h, mode, prev_d, digest, seq_s, started, started_h,
             surface, _, fin_h, outcome, digest2, seq2_s) = m.groups()
            cut, mid = m.start(_PAIR_DIGEST) - _DIGEST_PREFIX, m.start(_PAIR_SECOND)
            cut2, end = m.start(_PAIR_DIGEST2) - _DIGEST_PREFIX, m.end()
            if (
                int(seq_s) == seq + 1
                and int(seq2_s) == seq + 2
                and prev_d == prev
                and (done := legal.get((mode, outcome))) is not None
                and (day_hours.get(started_h) or start_hour_ok(started_h))
                and (hours.get(deadline_h) or hour_ok(deadline_h))
                and (hours.get(fin_h) or hour_ok(fin_h))
                and aid not in pending
                and aid not in by_attempt
                and akey not in keys
                and akey not in by_artifact
                and akey not in sealed
                # The rows are canonical, so each digest body (the canonical row
                # without row_digest) is the line without its row_digest member.
                and sha256(data[pos:cut] + data[cut + _DIGEST_MEMBER : mid - 1]).hexdigest()
                == digest
                and sha256(data[mid:cut2] + data[cut2 + _DIGEST_MEMBER : end - 1]).hexdigest()
                == digest2
            ):
                if pending:
                    pending[aid] = [akey, surface, mode, started, deadline, done]
                    keys.add(akey)
                else:  # `_record`, inlined: the hot path
                    rec = new_record(AttemptRecord)
                    set_aid(rec, aid)
                    set_akey(rec, akey)
                    set_surface(rec, surface)
                    set_mode(rec, modes[mode])
                    set_started(rec, started)
                    set_deadline(rec, deadline)
                    set_segment(rec, segment)
                    set_outcome(rec, done)
                    local[aid] = by_attempt[aid] = by_artifact[akey] = rec
                seq, prev, pos = seq + 2, digest2, end
                continue
        m = match_row(text, pos)
        if m is not None:
            (akey, aid, deadline, deadline_h, fin_h, mode, outcome, prev_d, digest, seq_s,
             started, started_h, state, surface) = m.groups()
            cut, end = m.start(_ROW_DIGEST) - _DIGEST_PREFIX, m.end()
            if (
                int(seq_s) == seq + 1
                and prev_d == prev
                and sha256(data[pos:cut] + data[cut + _DIGEST_MEMBER : end - 1]).hexdigest()
                == digest
            ):
                if state == "attempt_started":
                    if (
                        fin_h is None
                        and outcome == "attempt_started"
                        and (day_hours.get(started_h) or start_hour_ok(started_h))
                        and (hours.get(deadline_h) or hour_ok(deadline_h))
                        and aid not in pending
                        and aid not in by_attempt
                        and akey not in keys
                        and akey not in by_artifact
                        and akey not in sealed
                    ):
                        pending[aid] = [akey, surface, mode, started, deadline, None]
                        keys.add(akey)
                        seq, prev, pos = seq + 1, digest, end
                        continue
                elif (
                    fin_h is not None
                    and (done := legal.get((mode, outcome))) is not None
                    and (hours.get(fin_h) or hour_ok(fin_h))
                ):
                    # started/deadline equal to the start row's, already judged.
                    start = pending.get(aid)
                    if start is not None:
                        if (
                            start[5] is None
                            and akey == start[0]
                            and surface == start[1]
                            and mode == start[2]
                            and started == start[3]
                            and deadline == start[4]
                        ):
                            start[5] = done
                            seq, prev, pos = seq + 1, digest, end
                            continue
                    elif (
                        (folded := local.get(aid)) is not None
                        and folded.outcome is None
                        and akey == folded.artifact_key
                        and surface == folded.surface
                        and mode == folded.mode
                        and started == folded.started_at_utc
                        and deadline == folded.deadline_at_utc
                    ):
                        # Already in `index`: replacing the value keeps its place.
                        rec = record(
                            aid, akey, folded.surface, folded.mode, folded.started_at_utc,
                            folded.deadline_at_utc, segment, done,
                        )
                        local[aid] = by_attempt[aid] = by_artifact[akey] = rec
                        seq, prev, pos = seq + 1, digest, end
                        continue
        # Not a row the fast path vouches for: the reference judges it.
        _fold(pending, keys, segment, local, index)
        nl = data.index(b"\n", pos)
        seq, prev = slow_row(data[pos:nl], segment, seq, prev, local, index)
        pos = nl + 1
    _fold(pending, keys, segment, local, index)
    return seq, prev


def _fold(
    pending: dict[str, list[Any]],
    keys: set[str],
    segment: str,
    local: dict[str, AttemptRecord],
    index: Index,
) -> None:
    """Fold the fast path's pending attempts into ``local`` and ``index`` exactly
    as the reference would have by now (the same records, in the same order)."""
    if not pending:
        return
    record, modes = _record, _MODE_BY_VALUE
    by_attempt, by_artifact = index.by_attempt, index.by_artifact
    for aid, (akey, surface, mode, started, deadline, outcome) in pending.items():
        rec = record(aid, akey, surface, modes[mode], started, deadline, segment, outcome)
        local[aid] = by_attempt[aid] = by_artifact[akey] = rec
    pending.clear()
    keys.clear()


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


# The fast path of `verify_segment_bytes`. Built from the reference's own sets and
# tables, so it cannot drift from them; whatever it does not accept with certainty
# is left to the reference (`_slow_row`).


def _alt(values: Iterable[str]) -> str:
    return "(?:" + "|".join(re.escape(v) for v in sorted(values)) + ")"


# A timestamp: its first 13 characters (``YYYY-MM-DDTHH``, a group of its own)
# are judged by `_hour_ok`, the rest must be minutes and seconds 00-59 and six
# ASCII digits. Stricter than `_TS` + strptime (which also take seconds 60 and 61
# and non-ASCII digits).
_FAST_HOUR: Final = "([-0-9T]{13})"
_FAST_REST: Final = r":[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"
_FAST_TS: Final = f"({_FAST_HOUR}{_FAST_REST})"  # two groups: the timestamp, its hour
_FAST_SEQUENCE: Final = "([1-9][0-9]{0,17})"  # longer: the reference's (never seq + 1)
# Any 64 characters but a line break: accepted only when equal to the previous
# digest / the computed digest (lowercase hex, so then the layout is exact).
_FAST_DIGEST: Final = '"(.{64})"'
_FAST_SCHEMA: Final = f'"{re.escape(JOURNAL_SCHEMA)}"'


def _row_pattern(members: Mapping[str, str]) -> str:
    """One whole line that is exactly `canonical_json` of a row with these member
    value patterns: sorted keys, no whitespace, then a line feed. No value pattern
    admits a line break, and none but `_FAST_DIGEST` (accepted only when equal to
    a lowercase hex digest) a quote, backslash or non-ASCII character."""
    assert set(members) == ROW_FIELDS
    return r"\{" + ",".join(f'"{k}":{members[k]}' for k in sorted(members)) + r"\}\n"


_FAST_ROW: Final = re.compile(
    _row_pattern(
        {
            "artifact_key": '"([0-9a-f]{64})"',
            "attempt_id": '"([0-9a-f]{32})"',
            "deadline_at_utc": f'"{_FAST_TS}"',
            "finalized_at_utc": f'(?:null|"{_FAST_HOUR}{_FAST_REST}")',  # its hour only
            "mode": f'"({_alt(m.value for m in Mode)})"',
            "outcome": f'"({_alt(o.value for o in Outcome)})"',
            "previous_row_digest": _FAST_DIGEST,
            "row_digest": _FAST_DIGEST,
            "schema_version": _FAST_SCHEMA,
            "sequence": _FAST_SEQUENCE,
            "started_at_utc": f'"{_FAST_TS}"',
            "state": f'"({_alt(s.value for s in State)})"',
            "surface": f'"({_alt(_SURFACES)})"',
        }
    ),
    re.ASCII,
)
_ROW_DIGEST: Final = 9  # group of the row_digest value
# A start row and, directly after it, its terminal row: the copied fields are
# back-references, the terminal's previous_row_digest is the start's row_digest.
_FAST_PAIR: Final = re.compile(
    _row_pattern(
        {
            "artifact_key": '"(?P<akey>[0-9a-f]{64})"',
            "attempt_id": '"(?P<aid>[0-9a-f]{32})"',
            "deadline_at_utc": f'"(?P<deadline>{_FAST_HOUR}{_FAST_REST})"',
            "finalized_at_utc": "null",
            "mode": f'"(?P<mode>{_alt(m.value for m in Mode)})"',
            "outcome": f'"{re.escape(Outcome.ATTEMPT_STARTED.value)}"',
            "previous_row_digest": _FAST_DIGEST,
            "row_digest": '"(?P<digest>.{64})"',
            "schema_version": _FAST_SCHEMA,
            "sequence": _FAST_SEQUENCE,
            "started_at_utc": f'"(?P<started>{_FAST_HOUR}{_FAST_REST})"',
            "state": f'"{re.escape(State.ATTEMPT_STARTED.value)}"',
            "surface": f'"(?P<surface>{_alt(_SURFACES)})"',
        }
    )
    + "()"  # empty: where the terminal row begins
    + _row_pattern(
        {
            "artifact_key": '"(?P=akey)"',
            "attempt_id": '"(?P=aid)"',
            "deadline_at_utc": '"(?P=deadline)"',
            "finalized_at_utc": f'"{_FAST_HOUR}{_FAST_REST}"',  # its hour only
            "mode": '"(?P=mode)"',
            "outcome": f'"({_alt(o.value for o in TERMINAL_OUTCOMES)})"',
            "previous_row_digest": '"(?P=digest)"',
            "row_digest": _FAST_DIGEST,
            "schema_version": _FAST_SCHEMA,
            "sequence": _FAST_SEQUENCE,
            "started_at_utc": '"(?P=started)"',
            "state": f'"{re.escape(State.FINALIZED.value)}"',
            "surface": '"(?P=surface)"',
        }
    ),
    re.ASCII,
)
_PAIR_DIGEST: Final = 7  # groups: the start's row_digest, the empty one, the terminal's
_PAIR_SECOND: Final = 12
_PAIR_DIGEST2: Final = 15
assert _FAST_ROW.groups == 14 and _FAST_PAIR.groups == 16
assert _FAST_PAIR.groupindex["digest"] == _PAIR_DIGEST
_DIGEST_PREFIX: Final = len('"row_digest":"')
_DIGEST_MEMBER: Final = len('"row_digest":"",') + 64  # the member and its comma
_MODE_BY_VALUE: Final[Mapping[str, Mode]] = {m.value: m for m in Mode}
_OUTCOME_OR_OPEN: Final[Mapping[str | None, Outcome | None]] = {
    None: None,
    **{o.value: o for o in Outcome},
}
_RECORD_SLOTS: Final = tuple(getattr(AttemptRecord, f).__set__ for f in AttemptRecord.__slots__)
assert AttemptRecord.__slots__ == tuple(f.name for f in fields(AttemptRecord))


def _record(
    attempt_id: str,
    artifact_key: str,
    surface: str,
    mode: Mode,
    started_at_utc: str,
    deadline_at_utc: str,
    segment: str,
    outcome: Outcome | None,
) -> AttemptRecord:
    """``AttemptRecord(...)`` without the frozen ``__init__``'s per-field
    ``object.__setattr__`` (3x the cost): the same class, the same slot values."""
    rec: AttemptRecord = object.__new__(AttemptRecord)
    s0, s1, s2, s3, s4, s5, s6, s7 = _RECORD_SLOTS
    s0(rec, attempt_id)
    s1(rec, artifact_key)
    s2(rec, surface)
    s3(rec, mode)
    s4(rec, started_at_utc)
    s5(rec, deadline_at_utc)
    s6(rec, segment)
    s7(rec, outcome)
    return rec


def _legal_terminals() -> dict[tuple[str, str], Outcome]:
    """(mode, outcome) of every terminal row `_phase_for_terminal` accepts."""
    legal: dict[tuple[str, str], Outcome] = {}
    for mode in Mode:
        probe = AttemptRecord("", "", "", mode, "", "", "", None)
        for outcome in TERMINAL_OUTCOMES:
            try:
                _phase_for_terminal(probe, outcome)
            except IllegalTransition:
                continue
            legal[(mode.value, outcome.value)] = outcome
    return legal


_LEGAL_TERMINAL: Final[Mapping[tuple[str, str], Outcome]] = _legal_terminals()
_HOURS: dict[str, bool] = {}
_HOURS_MAX: Final = 4096


def _hour_ok(hour: str) -> bool:
    """Does the reference accept a timestamp that starts with ``hour`` (the first
    13 characters of a `_FAST_TS`) when its minutes and seconds are 00-59 and its
    fraction six ASCII digits? Judged by the reference itself (`_is_ts`), which
    checks the whole ``YYYY-MM-DDTHH`` format and the real date. Memoised (bounded)."""
    ok = _HOURS.get(hour)
    if ok is None:
        ok = _is_ts(hour + ":00:00.000000Z")
        if len(_HOURS) >= _HOURS_MAX:
            _HOURS.clear()
        _HOURS[hour] = ok
    return ok


# ---------------------------------------------------------------------- journal


@dataclass(frozen=True, slots=True)
class QuarantinedFile:
    name: str  # YYYY-MM-DD.N.jsonl
    segment: str


def _seal(data: bytes, q: QuarantinedFile, index: Index) -> None:
    """Fold a quarantined file into ``index`` as sealed artifact keys (dedupe only).

    Its complete lines must verify exactly like a segment's (they did when it was
    quarantined: anything else now is tampering); the torn rest is searched for
    the one field it may have got as far as (``artifact_key`` sorts first).
    """
    cut = data.rfind(b"\n") + 1
    prefix, tail = data[:cut], data[cut:]
    scratch = Index(
        by_artifact=dict(index.by_artifact),
        by_attempt=dict(index.by_attempt),
        sealed=dict(index.sealed),
    )
    verify_segment_bytes(prefix, q.segment, scratch)
    for aid, rec in scratch.by_attempt.items():
        if aid in index.by_attempt:
            continue
        index.sealed[rec.artifact_key] = q.segment
        if rec.outcome is None:
            index.sealed_open += 1
    m = _TORN_KEY.match(tail)
    if m is not None:
        akey = m.group(1).decode("ascii")
        if akey in index.by_artifact:
            raise JournalUnverified(Finding.DUPLICATE_ARTIFACT, q.segment)
        index.sealed.setdefault(akey, q.segment)


class Journal:
    """Single-writer, hash-chained, daily-segmented outcome journal.

    Thread-safe within the worker (a `threading.Lock` orders threads; the
    ``journal.lock`` flock orders processes). Appends verify that the segment on
    disk is still the one this process last wrote (size and inode); anything else
    is `Finding.APPEND_CONFLICT` and nothing is written.
    """

    def __init__(self, root: DataRoot, *, create_lock: bool = True) -> None:
        """``create_lock=False`` for the ops tools (`spool.fsio.ProductLock`)."""
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

    # -- reading ---------------------------------------------------------------

    def _list(self, d: Path) -> list[str]:
        try:
            return list_dir(d)
        except FileNotFoundError:
            return []
        except UnsafePath as e:
            raise JournalUnverified(Finding.UNSAFE_FILE, "") from e

    def segments(self) -> list[str]:
        names = self._list(self._root.outcomes)
        out: list[str] = []
        for n in names:
            m = _SEGMENT_NAME.fullmatch(n)
            if m is None or not _real_day(m.group(1)):
                raise JournalUnverified(Finding.UNEXPECTED_FILE, "")
            out.append(m.group(1))
        return sorted(out)

    def quarantined(self) -> list[QuarantinedFile]:
        out: list[QuarantinedFile] = []
        for n in self._list(self._root.quarantine):
            m = _QUARANTINE_NAME.fullmatch(n)
            if m is None or not _real_day(m.group(1)):
                raise JournalUnverified(Finding.UNEXPECTED_FILE, "")
            out.append(QuarantinedFile(n, m.group(1)))
        return sorted(out, key=lambda q: (q.segment, int(q.name.split(".")[1])))

    def _segment_path(self, segment: str) -> Path:
        return self._root.outcomes / f"{segment}.jsonl"

    @staticmethod
    def _read_file(path: Path, segment: str) -> tuple[bytes, os.stat_result]:
        """Read a segment through `spool.fsio` (no symlink on the way, regular,
        owner/mode, bounded). Any refusal is `Finding.UNSAFE_FILE`."""
        try:
            fd, st = open_read(path)
        except (UnsafePath, OSError) as e:
            raise JournalUnverified(Finding.UNSAFE_FILE, segment) from e
        try:
            if st.st_size > MAX_SEGMENT_BYTES:
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

    def _read_segment(self, segment: str) -> tuple[bytes, os.stat_result]:
        return self._read_file(self._segment_path(segment), segment)

    def _load_unlocked(
        self, *, skip: str | None = None, prints: list[_Print] | None = None
    ) -> tuple[Index, dict[str, _Tail]]:
        """``prints``: filled with what was read (`_Print`), for `export_verified`."""
        index = Index()
        tails: dict[str, _Tail] = {}
        for q in self.quarantined():
            data, st = self._read_file(self._root.quarantine / q.name, q.segment)
            _seal(data, q, index)
            if prints is not None:
                prints.append(_print("q", q.name, st))
        for segment in self.segments():
            if segment == skip:
                continue
            data, st = self._read_segment(segment)
            seq, digest = verify_segment_bytes(data, segment, index)
            tails[segment] = _Tail(seq, digest, st.st_size, st.st_ino)
            if prints is not None:
                prints.append(_print("s", segment, st))
        return index, tails

    def _prints_now(self) -> list[_Print]:
        """`_Print` of every journal file now (opened and checked, not read)."""
        out: list[_Print] = []
        for kind, d, names in (
            ("q", self._root.quarantine, [q.name for q in self.quarantined()]),
            ("s", self._root.outcomes, [f"{s}.jsonl" for s in self.segments()]),
        ):
            for name in names:
                fd, st = open_read(d / name)
                os.close(fd)
                out.append(_print(kind, name if kind == "q" else name[: -len(".jsonl")], st))
        return out

    # -- verification in another process (worker start-up) ---------------------

    def export_verified(self) -> bytes:
        """Verify everything exactly as `load` does and return the result for
        `adopt` in another process: the index, the tails and a print of every
        file read (name, device, inode, size, ctime). Raises what `load` raises.

        The worker forks a child for this at start-up, so that the verification
        runs on the second core while the parent imports the SDK (docs/
        performance.md). The child's verdict is never trusted: a child that
        fails sends nothing, and the parent loads by itself.
        """
        prints: list[_Print] = []
        with self._mutex, self._locked_flock():
            index, tails = self._load_unlocked(prints=prints)
        records = tuple(
            (r.attempt_id, r.artifact_key, r.surface, r.mode.value, r.started_at_utc,
             r.deadline_at_utc, r.segment, None if r.outcome is None else r.outcome.value)
            for r in index.by_attempt.values()
        )
        return marshal.dumps((
            _EXPORT_VERSION,
            records,
            tuple(index.sealed.items()),
            index.sealed_open,
            tuple((seg, t.sequence, t.digest, t.size, t.ino) for seg, t in tails.items()),
            tuple(prints),
        ))

    def adopt(self, blob: bytes) -> bool:
        """Install what `export_verified` produced elsewhere, under the journal
        lock, only if every journal file is still exactly one it read (same
        names, device, inode, size and ctime: an append, a rewrite in place, a
        new, removed or swapped file all change a print). False, with nothing
        installed, on any difference or any doubt about ``blob``: the caller
        then calls `load`."""
        with self._mutex, self._locked_flock():
            try:
                version, records, sealed, sealed_open, tails, prints = marshal.loads(blob)
                if version != _EXPORT_VERSION or list(prints) != self._prints_now():
                    return False
                index = Index(sealed=dict(sealed), sealed_open=sealed_open)
                # Dict lookups, not Enum(value) calls: 36,000 records here.
                # A value no enum has is a KeyError: refused like any doubt.
                by_attempt, by_artifact, record = index.by_attempt, index.by_artifact, _record
                modes, outcomes = _MODE_BY_VALUE, _OUTCOME_OR_OPEN
                for aid, akey, surface, mode, started, deadline, segment, outcome in records:
                    rec = record(aid, akey, surface, modes[mode], started, deadline, segment,
                                 outcomes[outcome])
                    by_attempt[aid] = by_artifact[akey] = rec
                new_tails = {seg: _Tail(seq, digest, size, ino) for seg, seq, digest, size, ino in tails}
            except (ValueError, TypeError, KeyError, EOFError, UnsafePath, OSError, JournalUnverified):
                return False
            self.index, self._tails = index, new_tails
            return True

    def load(self) -> Index:
        """Verify every segment (and quarantined file) and rebuild the dedupe
        index. Fail closed: `JournalUnverified` on the first finding."""
        with self._mutex, self._locked_flock():
            self.index, self._tails = self._load_unlocked()
            return self.index

    def _locked_flock(self) -> _FlockGuard:
        return _FlockGuard(self)

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
        except (UnsafePath, OSError) as e:
            raise JournalUnverified(Finding.APPEND_CONFLICT, segment) from e
        try:
            if st.st_size != tail.size or (not created and st.st_ino != tail.ino):
                raise JournalUnverified(Finding.APPEND_CONFLICT, segment)
            sequence, digest = tail.sequence, tail.digest
            lines = []
            for row in rows:
                if row["started_at_utc"][:10] != segment:
                    raise ValueError("a row goes in the segment of its start row")
                sequence += 1
                row["sequence"] = sequence
                row["previous_row_digest"] = digest
                row.pop("row_digest", None)
                row["row_digest"] = digest = row_digest(row)
                lines.append(canonical_json(row) + "\n")
            data = "".join(lines).encode("utf-8")
            written = os.write(fd, data)
            if written != len(data):
                raise JournalUnverified(Finding.TORN_TAIL, segment)
            os.fsync(fd)
            self._tails[segment] = _Tail(sequence, digest, tail.size + len(data), st.st_ino)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self._root.outcomes)

    def locked(self) -> _Locked:
        """``with journal.locked():`` — decisions and appends that must be atomic.

        Raises `JournalUnverified` (``lock_unsafe``) when the lock file is not
        what it must be (`spool.fsio.ProductLock`)."""
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

    def open_in(self, segment: str) -> list[AttemptRecord]:
        return [r for r in self.index.open_attempts() if r.segment == segment]

    def remove_expired(self, today: dt.date) -> tuple[list[str], list[str]]:
        """Remove whole expired segments whose attempts are all terminal.

        Returns (removed, kept_open): a segment with an open attempt is kept; the
        worker terminalizes that attempt first (``claim_expired_canonical``).
        Caller holds `locked()` and has loaded the journal.
        """
        removed: list[str] = []
        kept: list[str] = []
        for day in self.expired(today):
            if self.open_in(day):
                kept.append(day)
                continue
            try:
                if day in self.segments():
                    remove_file(self._root.outcomes, f"{day}.jsonl")
                for q in self.quarantined():
                    if q.segment == day:
                        remove_file(self._root.quarantine, q.name)
            except (UnsafePath, OSError) as e:
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

    def prune(self, today: dt.date, *, apply: bool) -> tuple[list[str], list[str]]:
        """`kexpr journal prune`: under the lock, verify everything, then list
        (dry run) or remove the expired segments without open attempts. Never
        writes a row: open attempts are left to the worker (rule 7)."""
        with self._mutex, self._locked_flock():
            self.index, self._tails = self._load_unlocked()
            expired = self.expired(today)
            kept = [d for d in expired if self.open_in(d)]
            if not apply:
                return [d for d in expired if d not in kept], kept
            return self.remove_expired(today)

    # -- the operator's torn-tail command (module docstring) ------------------------

    def quarantine_torn(self, segment: str, *, apply: bool) -> str:
        """Set aside a segment whose only defect is a torn last line.

        Returns the quarantine file name it was (or would be) linked to. Raises
        `JournalUnverified` with the finding that makes it ineligible. The caller
        holds ``worker.lock`` (the worker is stopped). Never rewrites a byte.
        """
        with self._mutex, self._locked_flock():
            if segment not in self.segments():
                raise JournalUnverified(Finding.UNEXPECTED_FILE, segment)
            index, _ = self._load_unlocked(skip=segment)
            data, st = self._read_segment(segment)
            if data.endswith(b"\n") or not data:
                raise JournalUnverified(Finding.TORN_TAIL, segment)  # not torn: nothing to do
            cut = data.rfind(b"\n") + 1
            verify_segment_bytes(data[:cut], segment, index)
            taken = {q.name for q in self.quarantined()}
            n = 1
            while f"{segment}.{n}.jsonl" in taken:
                n += 1
            name = f"{segment}.{n}.jsonl"
            if not apply:
                return name
            src = self._segment_path(segment)
            try:
                link_into(src, self._root.quarantine / name)
                unlink_if_same(src, FileId.of(st))
                fsync_dir(self._root.outcomes)
            except (UnsafePath, OSError) as e:
                raise JournalUnverified(Finding.UNSAFE_FILE, segment) from e
            self.index, self._tails = self._load_unlocked()
            return name

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


def _real_day(segment: str) -> bool:
    try:
        segment_date(segment)
    except ValueError:
        return False
    return True


class _FlockGuard:
    """The flock alone; an unsafe lock file is `Finding.LOCK_UNSAFE` (fail closed)."""

    def __init__(self, journal: Journal) -> None:
        self._j = journal

    def __enter__(self) -> None:
        try:
            self._j._flock.acquire()
        except UnsafePath as e:
            raise JournalUnverified(Finding.LOCK_UNSAFE, "") from e

    def __exit__(self, *exc: object) -> None:
        self._j._flock.release()


class _Locked:
    def __init__(self, journal: Journal) -> None:
        self._j = journal
        self._guard = _FlockGuard(journal)

    def __enter__(self) -> Journal:
        self._j._mutex.acquire()
        try:
            self._guard.__enter__()
        except BaseException:
            self._j._mutex.release()
            raise
        return self._j

    def __exit__(self, *exc: object) -> None:
        try:
            self._guard.__exit__()
        finally:
            self._j._mutex.release()


# ------------------------------------------------------------- whole-root audit


@dataclass(frozen=True, slots=True)
class JournalFinding:
    """One finding of `audit_journal`: an enum and where (a relative product
    path such as ``outcomes/2026-11-30.jsonl``; never content)."""

    finding: str
    where: str


@dataclass(slots=True)
class JournalAudit:
    findings: list[JournalFinding] = field(default_factory=list)
    index: Index = field(default_factory=Index)
    segments: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


def audit_journal(root: DataRoot) -> JournalAudit:
    """Verify every segment and quarantined file, collecting *every* finding (one
    per file) instead of stopping at the first; for `kexpr journal verify`.

    Read-only: takes ``journal.lock`` (so that a row being appended is never
    mistaken for a torn tail) and never writes a row.
    """
    out = JournalAudit()
    j = Journal(root, create_lock=False)
    try:
        with j._mutex, j._locked_flock():
            try:
                quarantined = j.quarantined()
            except JournalUnverified as e:
                out.findings.append(JournalFinding(e.finding.value, "quarantine"))
                quarantined = []
            for q in quarantined:
                where = f"quarantine/{q.name}"
                out.quarantined.append(q.name)
                try:
                    data, _ = j._read_file(root.quarantine / q.name, q.segment)
                    _seal(data, q, out.index)
                except JournalUnverified as e:
                    out.findings.append(JournalFinding(e.finding.value, where))
            try:
                segments = j.segments()
            except JournalUnverified as e:
                out.findings.append(JournalFinding(e.finding.value, "outcomes"))
                segments = []
            for segment in segments:
                where = f"outcomes/{segment}.jsonl"
                out.segments.append(segment)
                scratch = Index(
                    by_artifact=dict(out.index.by_artifact),
                    by_attempt=dict(out.index.by_attempt),
                    sealed=dict(out.index.sealed),
                    sealed_open=out.index.sealed_open,
                )
                try:
                    data, _ = j._read_segment(segment)
                    verify_segment_bytes(data, segment, scratch)
                except JournalUnverified as e:
                    out.findings.append(JournalFinding(e.finding.value, where))
                    continue
                out.index = scratch
    except JournalUnverified as e:
        out.findings.append(JournalFinding(e.finding.value, "journal.lock"))
    except (UnsafePath, OSError) as e:
        reason = e.reason.value if isinstance(e, UnsafePath) else Finding.UNSAFE_FILE.value
        out.findings.append(JournalFinding(reason, "journal.lock"))
    return out


__all__ = [
    "EVENT_OUTCOMES",
    "JOURNAL_SCHEMA",
    "RETENTION_DAYS",
    "ROW_FIELDS",
    "TERMINAL_OUTCOMES",
    "TRANSITIONS",
    "ZERO_DIGEST",
    "AttemptRecord",
    "Event",
    "Finding",
    "IllegalTransition",
    "Index",
    "Journal",
    "JournalAudit",
    "JournalFinding",
    "JournalUnverified",
    "Mode",
    "Outcome",
    "Phase",
    "QuarantinedFile",
    "State",
    "UnsafePath",
    "UnsafeReason",
    "audit_journal",
    "canonical_json",
    "format_ts",
    "parse_ts",
    "retention_cutoff",
    "row_digest",
    "segment_date",
    "transition",
    "verify_segment_bytes",
]

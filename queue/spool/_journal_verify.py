"""Verification of one segment's bytes (`kexpr.spool.journal` rules 1-3).

The reference is `_journal_rows._slow_row`, one row at a time. The fast path
(`_FAST_PAIR`, `_FAST_ROW`) is built from the reference's own tables (the row
format `ROW_FORMAT`, `kexpr.spool.lifecycle.LEGAL_TERMINALS`), accepts only rows
it can vouch for with certainty and hands every other row to the reference, so
its verdict is always the reference's (tests/spool_tests/test_journal_fastpath.py
proves it differentially). docs/performance.md gives what it saves at start-up.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any, Final

from kexpr.spool._journal_rows import (
    DEDUPE_KEY_HEX,
    HEX_DIGIT,
    ROW_FORMAT,
    ZERO_DIGEST,
    AttemptRecord,
    FieldKind,
    Finding,
    Index,
    JournalUnverified,
    State,
    _is_ts,
    _slow_row,
    hex_pattern,
)
from kexpr.spool.canonical import TS_HOUR, TS_REST
from kexpr.spool.lifecycle import LEGAL_TERMINALS, TERMINAL_OUTCOMES, Outcome, SpoolMode


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
    if not fast:
        for line in data.split(b"\n")[:-1] if data else []:
            seq, prev = _slow_row(line, segment, seq, prev, local, index)
        return seq, prev
    # latin-1 never fails and keeps byte offsets; the fast patterns match only
    # ASCII, whole lines, so a match's offsets are its row's bytes in `data`.
    text = data.decode("latin-1")
    match_pair, match_row = _FAST_PAIR.match, _FAST_ROW.match
    sha256 = hashlib.sha256
    hours, hour_ok = _HOURS, _hour_ok
    by_attempt, by_artifact, sealed = index.by_attempt, index.by_artifact, index.sealed
    legal, modes = _LEGAL_TERMINAL, _MODE_BY_VALUE
    ident_hex = DEDUPE_KEY_HEX
    new_record = object.__new__
    (
        set_aid,
        set_akey,
        set_surface,
        set_mode,
        set_started,
        set_deadline,
        set_segment,
        set_outcome,
    ) = _RECORD_SLOTS
    # Single start rows the fast path accepted but has not folded into `local` /
    # `index` yet: attempt_id -> [artifact_key, surface, mode, started, deadline,
    # outcome], and their artifacts' identities (`dedupe_key`). `_fold` makes one record per attempt in
    # start order (the reference's insertion order) before the reference judges a
    # row, and at the end; until then these ids and keys are absent from `index`.
    pending: dict[str, list[Any]] = {}
    keys: set[str] = set()
    # Start hours judged for this segment: a real hour *of this day* (`_start_hour_ok`).
    day_hours: dict[str, bool] = {}

    size, pos = len(data), 0  # every row before `pos` has been judged
    while pos < size:
        # A start row directly followed by its terminal row (the writer's usual
        # order); the pattern's back-references make the copied fields equal.
        m = match_pair(text, pos)
        if m is not None:
            (
                akey,
                aid,
                deadline,
                deadline_h,
                mode,
                prev_d,
                digest,
                seq_s,
                started,
                started_h,
                surface,
                _,
                fin_h,
                outcome,
                digest2,
                seq2_s,
            ) = m.groups()
            cut, mid = m.start(_PAIR_DIGEST) - _DIGEST_PREFIX, m.start(_PAIR_SECOND)
            cut2, end = m.start(_PAIR_DIGEST2) - _DIGEST_PREFIX, m.end()
            if (
                int(seq_s) == seq + 1
                and int(seq2_s) == seq + 2
                and prev_d == prev
                and (done := legal.get((mode, outcome))) is not None
                and (day_hours.get(started_h) or _start_hour_ok(started_h, segment, day_hours))
                and (hours.get(deadline_h) or hour_ok(deadline_h))
                and (hours.get(fin_h) or hour_ok(fin_h))
                and aid not in pending
                and aid not in by_attempt
                # The artifact's identity (`dedupe_key`): its key's first 32 hex.
                and (ident := akey[:ident_hex]) not in keys
                and ident not in by_artifact
                and ident not in sealed
                # The rows are canonical, so each digest body (the canonical row
                # without row_digest) is the line without its row_digest member.
                and sha256(data[pos:cut] + data[cut + _DIGEST_MEMBER : mid - 1]).hexdigest()
                == digest
                and sha256(data[mid:cut2] + data[cut2 + _DIGEST_MEMBER : end - 1]).hexdigest()
                == digest2
            ):
                if pending:
                    pending[aid] = [akey, surface, mode, started, deadline, done]
                    keys.add(ident)
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
                    local[aid] = by_attempt[aid] = by_artifact[ident] = rec
                seq, prev, pos = seq + 2, digest2, end
                continue
        m = match_row(text, pos)
        if m is not None and _single_row(
            m, data, pos, seq, prev, segment, pending, keys, local, index, day_hours
        ):
            seq, prev, pos = seq + 1, m.group(_ROW_DIGEST), m.end()
            continue
        # Not a row the fast path vouches for: the reference judges it.
        _fold(pending, keys, segment, local, index)
        nl = data.index(b"\n", pos)
        seq, prev = _slow_row(data[pos:nl], segment, seq, prev, local, index)
        pos = nl + 1
    _fold(pending, keys, segment, local, index)
    return seq, prev


def _single_row(
    m: re.Match[str],
    data: bytes,
    pos: int,
    seq: int,
    prev: str,
    segment: str,
    pending: dict[str, list[Any]],
    keys: set[str],
    local: dict[str, AttemptRecord],
    index: Index,
    day_hours: dict[str, bool],
) -> bool:
    """Does the fast path vouch for this one row (`_FAST_ROW` matched at ``pos``)?
    If so it is folded in (a start row into ``pending``, a terminal row into its
    start's pending entry or its folded record); if not, nothing changed and the
    reference judges it."""
    (
        akey,
        aid,
        deadline,
        deadline_h,
        fin_h,
        mode,
        outcome,
        prev_d,
        digest,
        seq_s,
        started,
        started_h,
        state,
        surface,
    ) = m.groups()
    cut, end = m.start(_ROW_DIGEST) - _DIGEST_PREFIX, m.end()
    if not (
        int(seq_s) == seq + 1
        and prev_d == prev
        and hashlib.sha256(data[pos:cut] + data[cut + _DIGEST_MEMBER : end - 1]).hexdigest()
        == digest
    ):
        return False
    if state == "attempt_started":
        if not (
            fin_h is None
            and outcome == "attempt_started"
            and (day_hours.get(started_h) or _start_hour_ok(started_h, segment, day_hours))
            and (_HOURS.get(deadline_h) or _hour_ok(deadline_h))
            and aid not in pending
            and aid not in index.by_attempt
            and (ident := akey[:DEDUPE_KEY_HEX]) not in keys
            and ident not in index.by_artifact
            and ident not in index.sealed
        ):
            return False
        pending[aid] = [akey, surface, mode, started, deadline, None]
        keys.add(ident)
        return True
    if not (
        fin_h is not None
        and (done := _LEGAL_TERMINAL.get((mode, outcome))) is not None
        and (_HOURS.get(fin_h) or _hour_ok(fin_h))
    ):
        return False
    # The terminal of an open attempt whose start is pending or folded, with the
    # start row's fields (its started/deadline already judged).
    fields_ = [akey, surface, mode, started, deadline]
    start = pending.get(aid)
    if start is not None:
        if start[5] is not None or start[:5] != fields_:
            return False
        start[5] = done
        return True
    folded = local.get(aid)
    if (
        folded is None
        or folded.outcome is not None
        or fields_
        != [
            folded.artifact_key,
            folded.surface,
            folded.mode,
            folded.started_at_utc,
            folded.deadline_at_utc,
        ]
    ):
        return False
    # Already in `index`: replacing the value keeps its place.
    rec = _record(
        aid,
        akey,
        folded.surface,
        folded.mode,
        folded.started_at_utc,
        folded.deadline_at_utc,
        segment,
        done,
    )
    local[aid] = index.by_attempt[aid] = index.by_artifact[akey[:DEDUPE_KEY_HEX]] = rec
    return True


def _start_hour_ok(hour: str, segment: str, day_hours: dict[str, bool]) -> bool:
    """A start row's hour: a real hour *of this segment's day* (memoised per segment)."""
    ok = day_hours[hour] = _hour_ok(hour) and hour[:10] == segment
    return ok


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
        local[aid] = by_attempt[aid] = by_artifact[akey[:DEDUPE_KEY_HEX]] = rec
    pending.clear()
    keys.clear()


# The fast path of `verify_segment_bytes`. Its patterns are built from the row
# format table (`ROW_FORMAT`, the reference's own), so a field's format is spelled
# once; whatever the fast path does not accept with certainty is left to the
# reference (`_slow_row`).


def _alt(values: Iterable[str]) -> str:
    return "(?:" + "|".join(re.escape(v) for v in sorted(values)) + ")"


# A count in canonical form with at most 18 digits (longer: the reference's,
# never seq + 1 here).
_FAST_COUNT: Final = "[1-9][0-9]{0,17}"


def _value(
    name: str,
    capture: str | None = "",
    *,
    only: Iterable[str] | None = None,
    compared: bool = False,
) -> str:
    """The pattern of field ``name``'s canonical JSON value, from `ROW_FORMAT`.

    ``capture``: ``""`` a group around the value (inside its quotes), a name a
    named group, None none. ``only`` narrows a CONST/ENUM field to these of its
    values. ``compared``: a HEX value the fast path accepts only when it equals
    a lowercase hex digest (the previous row's, or the one it computes), so any
    characters but a line break of the table's length will do (cheaper to
    match than the digit class: ~20% of the pattern's time). A timestamp always has one
    more group, its first 13 characters (``YYYY-MM-DDTHH``), judged by
    `_hour_ok`; the rest of its pattern (minutes and seconds 00-59, six ASCII
    digits) leaves no other way for the reference to refuse it. No value pattern
    but a ``compared`` one admits a quote, backslash or non-ASCII character, and
    none a line break."""
    fmt = ROW_FORMAT[name]
    if fmt.kind is FieldKind.HEX:
        inner = hex_pattern(fmt, "." if compared else HEX_DIGIT)
    elif fmt.kind is FieldKind.TIMESTAMP:
        inner = f"({TS_HOUR}){TS_REST}"
    elif fmt.kind is FieldKind.COUNT:
        inner = _FAST_COUNT
    else:  # CONST, ENUM
        values = fmt.values if only is None else tuple(only)
        assert set(values) <= set(fmt.values)
        inner = _alt(values)
    if capture is not None:
        inner = f"(?P<{capture}>{inner})" if capture else f"({inner})"
    return inner if fmt.kind is FieldKind.COUNT else f'"{inner}"'


def _row_pattern(members: Mapping[str, str]) -> str:
    """One whole line that is exactly `canonical_json` of a row with these member
    value patterns: sorted keys, no whitespace, then a line feed."""
    assert list(members) == list(ROW_FORMAT)
    return r"\{" + ",".join(f'"{k}":{members[k]}' for k in members) + r"\}\n"


_FAST_ROW: Final = re.compile(
    _row_pattern(
        {
            "artifact_key": _value("artifact_key"),
            "attempt_id": _value("attempt_id"),
            "deadline_at_utc": _value("deadline_at_utc"),
            # null on a start row; a terminal's: its hour only
            "finalized_at_utc": f"(?:null|{_value('finalized_at_utc', None)})",
            "mode": _value("mode"),
            "outcome": _value("outcome"),
            "previous_row_digest": _value("previous_row_digest", compared=True),
            "row_digest": _value("row_digest", compared=True),
            "schema_version": _value("schema_version", None),
            "sequence": _value("sequence"),
            "started_at_utc": _value("started_at_utc"),
            "state": _value("state"),
            "surface": _value("surface"),
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
            "artifact_key": _value("artifact_key", "akey"),
            "attempt_id": _value("attempt_id", "aid"),
            "deadline_at_utc": _value("deadline_at_utc", "deadline"),
            "finalized_at_utc": "null",
            "mode": _value("mode", "mode"),
            "outcome": _value("outcome", None, only=[Outcome.ATTEMPT_STARTED.value]),
            "previous_row_digest": _value("previous_row_digest", compared=True),
            "row_digest": _value("row_digest", "digest", compared=True),
            "schema_version": _value("schema_version", None),
            "sequence": _value("sequence"),
            "started_at_utc": _value("started_at_utc", "started"),
            "state": _value("state", None, only=[State.ATTEMPT_STARTED.value]),
            "surface": _value("surface", "surface"),
        }
    )
    + "()"  # empty: where the terminal row begins
    + _row_pattern(
        {
            "artifact_key": '"(?P=akey)"',
            "attempt_id": '"(?P=aid)"',
            "deadline_at_utc": '"(?P=deadline)"',
            "finalized_at_utc": _value("finalized_at_utc", None),  # its hour only
            "mode": '"(?P=mode)"',
            "outcome": _value("outcome", only=[o.value for o in TERMINAL_OUTCOMES]),
            "previous_row_digest": '"(?P=digest)"',
            "row_digest": _value("row_digest", compared=True),
            "schema_version": _value("schema_version", None),
            "sequence": _value("sequence"),
            "started_at_utc": '"(?P=started)"',
            "state": _value("state", None, only=[State.FINALIZED.value]),
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
_MODE_BY_VALUE: Final[Mapping[str, SpoolMode]] = {m.value: m for m in SpoolMode}
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
    mode: SpoolMode,
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


# (mode value, outcome value) -> outcome for every legal terminal row (lifecycle rule 2).
_LEGAL_TERMINAL: Final[Mapping[tuple[str, str], Outcome]] = {
    (m.value, o.value): o for m, o in LEGAL_TERMINALS
}
_HOURS: dict[str, bool] = {}
_HOURS_MAX: Final = 4096


def _hour_ok(hour: str) -> bool:
    """Does the reference accept a timestamp that starts with ``hour`` (the first
    13 characters of a timestamp in the fast patterns) when its minutes and seconds are 00-59 and its
    fraction six ASCII digits? Judged by the reference itself (`_is_ts`), which
    checks the whole ``YYYY-MM-DDTHH`` format and the real date. Memoised (bounded)."""
    ok = _HOURS.get(hour)
    if ok is None:
        ok = _is_ts(hour + ":00:00.000000Z")
        if len(_HOURS) >= _HOURS_MAX:
            _HOURS.clear()
        _HOURS[hour] = ok
    return ok

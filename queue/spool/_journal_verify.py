"""Verification of one segment's bytes (`kexpr.spool.journal` rules 1-3).

The reference is `_journal_rows._slow_row`, one row at a time. The fast path
(`_FAST_PAIR`, `_FAST_ROW`) is built from the reference's own sets and tables
(field formats, surfaces, `kexpr.spool.lifecycle.LEGAL_TERMINALS`), accepts only rows
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
    _SURFACES,
    JOURNAL_SCHEMA,
    ROW_FIELDS,
    ZERO_DIGEST,
    AttemptRecord,
    Finding,
    Index,
    JournalUnverified,
    State,
    _is_ts,
    _slow_row,
)
from kexpr.spool.lifecycle import LEGAL_TERMINALS, TERMINAL_OUTCOMES, Mode, Outcome


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
    legal, modes, record = _LEGAL_TERMINAL, _MODE_BY_VALUE, _record
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
                            aid,
                            akey,
                            folded.surface,
                            folded.mode,
                            folded.started_at_utc,
                            folded.deadline_at_utc,
                            segment,
                            done,
                        )
                        local[aid] = by_attempt[aid] = by_artifact[akey] = rec
                        seq, prev, pos = seq + 1, digest, end
                        continue
        # Not a row the fast path vouches for: the reference judges it.
        _fold(pending, keys, segment, local, index)
        nl = data.index(b"\n", pos)
        seq, prev = _slow_row(data[pos:nl], segment, seq, prev, local, index)
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


# (mode value, outcome value) -> outcome for every legal terminal row (lifecycle rule 2).
_LEGAL_TERMINAL: Final[Mapping[tuple[str, str], Outcome]] = {
    (m.value, o.value): o for m, o in LEGAL_TERMINALS
}
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

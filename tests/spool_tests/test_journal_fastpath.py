"""The journal's fast verification path against the reference (`fast=False`).

`verify_segment_bytes` accepts the rows it can vouch for with a compiled pattern of
the exact canonical layout, one sha256 over the line minus its ``row_digest``
member, and table look-ups; every other row goes to the per-row reference
(`kexpr.spool._journal_rows._slow_row`, called from `kexpr.spool._journal_verify`). These tests hold the fast path to the reference's
result for *every* input: the same finding and segment (or the same foreign
exception), the same tail, and the same index — records, enum types and order —
including the partial index left behind by a finding.

Segments are built from the plan's text here (not by our writer), then mutated at
three levels: the rows' values and order before chaining (so digests still match
and the semantic checks are what must catch it), the canonical text after
chaining (non-canonical forms, escapes, NaN, leading zeros, ...), and raw bytes.
Example counts come from ``adversarial.hypothesis_profiles`` (``PROPERTY``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import pytest
from adversarial.hypothesis_profiles import PROPERTY
from hypothesis import example, given
from hypothesis import strategies as st

from kexpr.spool import _journal_verify as journal_module
from kexpr.spool.journal import (
    AttemptRecord,
    Finding,
    Index,
    JournalUnverified,
    Outcome,
    SpoolMode,
    verify_segment_bytes,
)

DAY = "2026-11-30"
OTHER_DAY = "2026-11-29"
ZERO = "0" * 64
SCHEMA = "korean-expression-journal-v1"
SURFACES = ["daily.v1", "weekly.v1", "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1"]
MODES = ["shadow", "enabled"]
KEY_HEX = [32, 64]
TERMINALS = [
    "selected",
    "shadow_selected",
    "credential_unavailable",
    "provider_error",
    "timeout",
    "invalid_response",
    "validation_rejected",
    "commit_failed",
    "publication_failed",
    "claim_expired_canonical",
]
# Legal for both modes: a segment of these verifies unless something is mutated.
SAFE_TERMINALS = [
    "credential_unavailable",
    "provider_error",
    "timeout",
    "invalid_response",
    "validation_rejected",
    "claim_expired_canonical",
]

# --------------------------------------------------------------------- building


def canonical(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def ts(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class Attempt:
    akey: str
    aid: str
    surface: str
    mode: str
    started: str
    deadline: str
    outcome: str | None  # None: stays open
    finalized: str


def attempt(
    n: int,
    *,
    day: str = DAY,
    mode: str = "shadow",
    outcome: str | None = "timeout",
    surface: str = "daily.v1",
    second: int = 0,
) -> Attempt:
    t = dt.datetime.fromisoformat(f"{day}T00:00:00+00:00") + dt.timedelta(seconds=second)
    return Attempt(
        akey=hashlib.sha256(f"artifact-{n}".encode()).hexdigest(),
        aid=hashlib.md5(f"attempt-{n}".encode()).hexdigest(),
        surface=surface,
        mode=mode,
        started=ts(t),
        deadline=ts(t + dt.timedelta(seconds=4)),
        outcome=outcome,
        finalized=ts(t + dt.timedelta(seconds=1)),
    )


def start_row(a: Attempt) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA,
        "artifact_key": a.akey,
        "surface": a.surface,
        "mode": a.mode,
        "attempt_id": a.aid,
        "state": "attempt_started",
        "outcome": "attempt_started",
        "started_at_utc": a.started,
        "deadline_at_utc": a.deadline,
        "finalized_at_utc": None,
    }


def terminal_row(a: Attempt) -> dict[str, Any]:
    assert a.outcome is not None
    return {
        **start_row(a),
        "state": "finalized",
        "outcome": a.outcome,
        "finalized_at_utc": a.finalized,
    }


def rows_of(attempts: list[Attempt], order: list[int] | None = None) -> list[dict[str, Any]]:
    """Start rows and terminal rows. ``order`` lists attempt indexes, each twice
    (start, then terminal); by default every start is directly followed by its
    terminal. An open attempt's second occurrence is skipped."""
    if order is None:
        order = [i for i in range(len(attempts)) for _ in (0, 1)]
    seen: set[int] = set()
    rows = []
    for i in order:
        a = attempts[i]
        if i not in seen:
            seen.add(i)
            rows.append(start_row(a))
        elif a.outcome is not None:
            rows.append(terminal_row(a))
    return rows


def chain(rows: list[dict[str, Any]]) -> list[str]:
    """Canonical, hash-chained lines. A row may preset ``sequence``,
    ``previous_row_digest`` or ``row_digest`` (kept as given: a mutation)."""
    prev, out = ZERO, []
    for n, given_row in enumerate(rows, start=1):
        row = dict(given_row)
        row.setdefault("sequence", n)
        row.setdefault("previous_row_digest", prev)
        digest = row.pop("row_digest", None)
        body = canonical(row)
        row["row_digest"] = prev = (
            digest if digest is not None else hashlib.sha256(body.encode("utf-8")).hexdigest()
        )
        out.append(canonical(row))
    return out


def segment(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


# ------------------------------------------------------------------- comparing


def clone(index: Index) -> Index:
    return Index(
        by_artifact=dict(index.by_artifact),
        by_attempt=dict(index.by_attempt),
        sealed=dict(index.sealed),
        sealed_open=index.sealed_open,
    )


def record_view(rec: AttemptRecord) -> tuple[object, ...]:
    """Every field with its exact type: an `Outcome` must not be a plain ``str``."""
    return (type(rec), *((type(v), v) for v in (getattr(rec, f.name) for f in fields(rec))))


def snapshot(index: Index) -> tuple[object, ...]:
    return (
        [(k, record_view(v)) for k, v in index.by_attempt.items()],
        [(k, record_view(v)) for k, v in index.by_artifact.items()],
        list(index.sealed.items()),
        index.sealed_open,
    )


def judge(
    data: bytes, seg: str, context: Index, *, fast: bool
) -> tuple[tuple[object, ...], object]:
    index = clone(context)
    result: tuple[object, ...]
    try:
        seq, digest = verify_segment_bytes(data, seg, index, fast=fast)
        result = ("verified", type(seq), seq, type(digest), digest)
    except JournalUnverified as e:
        result = ("unverified", e.finding, e.segment)
    except Exception as e:  # noqa: BLE001 - the reference's own errors must match too
        result = ("raised", type(e), str(e))
    # Even after a finding: the index the reference had built by then.
    return result, snapshot(index)


def same_as_reference(
    data: bytes, seg: str = DAY, context: Index | None = None
) -> tuple[object, ...]:
    context = context if context is not None else Index()
    fast = judge(data, seg, context, fast=True)
    slow = judge(data, seg, context, fast=False)
    assert fast == slow
    return fast[0]


class Fallbacks:
    """Counts the rows the fast path hands to the reference (`_slow_row`)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self._reference = journal_module._slow_row

    def __enter__(self) -> list[bytes]:
        def counting(line: bytes, *args: Any) -> tuple[int, str]:
            self.lines.append(line)
            return self._reference(line, *args)

        journal_module._slow_row = counting  # type: ignore[assignment]
        return self.lines

    def __exit__(self, *exc: object) -> None:
        journal_module._slow_row = self._reference


def fast_fallbacks(data: bytes, seg: str = DAY, context: Index | None = None) -> list[bytes]:
    """The rows a fast run of ``data`` gave to the reference (whatever the result)."""
    # The result itself is `same_as_reference`'s business.
    with Fallbacks() as lines, contextlib.suppress(Exception):
        verify_segment_bytes(data, seg, clone(context or Index()))
    return lines


# -------------------------------------------------------- the fast path is taken


def test_pairs_take_the_fast_path() -> None:
    attempts = [
        attempt(
            n,
            mode=MODES[n % 2],
            surface=SURFACES[n % 4],
            second=n * 7,
            outcome=SAFE_TERMINALS[n % len(SAFE_TERMINALS)],
        )
        for n in range(40)
    ]
    data = segment(chain(rows_of(attempts)))
    assert fast_fallbacks(data) == []
    index = Index()
    seq, digest = verify_segment_bytes(data, DAY, index)
    assert seq == 80 and digest == json.loads(data.split(b"\n")[-2])["row_digest"]
    assert list(index.by_attempt) == [a.aid for a in attempts]
    assert all(
        type(r.outcome) is Outcome and type(r.mode) is SpoolMode for r in index.by_attempt.values()
    )
    assert same_as_reference(data)[0] == "verified"


def test_interleaved_and_open_attempts_take_the_fast_path() -> None:
    attempts = [attempt(n, second=n, outcome=None if n % 3 == 0 else "timeout") for n in range(9)]
    # Starts and terminals interleaved, terminals out of order, some adjacent pairs.
    order = [0, 1, 2, 3, 4, 2, 1, 5, 6, 4, 0, 7, 3, 8, 8, 7, 6, 5]
    data = segment(chain(rows_of(attempts, order)))
    assert fast_fallbacks(data) == []
    assert same_as_reference(data)[0] == "verified"
    index = Index()
    verify_segment_bytes(data, DAY, index)
    assert list(index.by_attempt) == [a.aid for a in attempts]
    assert [r.outcome for r in index.by_attempt.values()].count(None) == 3


class _Refusing:
    """A fast pattern that refuses every match covering ``marker``."""

    def __init__(self, real: re.Pattern[str], marker: str) -> None:
        self.real, self.marker = real, marker

    def match(self, data: str, *args: int) -> re.Match[str] | None:
        m = self.real.match(data, *args)
        return None if m is not None and self.marker in m.group(0) else m


def test_a_row_only_the_reference_accepts_falls_back_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Valid rows the fast path does not vouch for go to the reference alone,
    and the attempts around them (some still pending in the fast path) keep
    their order. No valid row is refused by the fast patterns any more (the
    reference's non-ASCII digits were a bug, fixed), so the refusal is forced."""
    attempts = [attempt(n, second=n, outcome=None if n == 0 else "timeout") for n in range(6)]
    order = [0, 1, 2, 1, 3, 4, 3, 2, 4, 5, 5]
    data = segment(chain(rows_of(attempts, order)))
    marker = attempts[3].aid
    monkeypatch.setattr(journal_module, "_FAST_PAIR", _Refusing(journal_module._FAST_PAIR, marker))
    monkeypatch.setattr(journal_module, "_FAST_ROW", _Refusing(journal_module._FAST_ROW, marker))
    lines = fast_fallbacks(data)
    assert len(lines) == 2 and all(marker.encode() in line for line in lines)
    assert same_as_reference(data)[0] == "verified"


def test_only_the_offending_row_goes_to_the_reference() -> None:
    attempts = [attempt(n, second=n) for n in range(5)]
    rows = rows_of(attempts)
    rows[7]["surface"] = "weekly.v1"  # attempt 3's terminal: terminal_mismatch, chained right
    data = segment(chain(rows))
    # Rows 0-5 as pairs, row 6 as a single start; row 7 is the reference's.
    assert fast_fallbacks(data) == [data.split(b"\n")[7]]
    assert same_as_reference(data) == ("unverified", Finding.TERMINAL_MISMATCH, DAY)


def test_record_builder_is_the_dataclass() -> None:
    args = ("b" * 32, "a" * 64, "daily.v1", SpoolMode.SHADOW, "s", "d", DAY, Outcome.TIMEOUT)
    built, made = journal_module._record(*args), AttemptRecord(*args)
    assert built == made and hash(built) == hash(made) and type(built) is AttemptRecord
    assert repr(built) == repr(made)


def test_bench_shaped_journal_matches_the_reference() -> None:
    """Several segments sharing one index, like `Journal.load`: same tails, same index."""
    fast_index, slow_index = Index(), Index()
    for d in range(3):
        day = f"2026-11-{28 + d:02d}"
        attempts = [attempt(1000 * d + n, day=day, second=n * 61) for n in range(30)]
        attempts[5].outcome = None
        data = segment(chain(rows_of(attempts)))
        assert fast_fallbacks(data, day, fast_index) == []
        tail = verify_segment_bytes(data, day, fast_index)
        assert tail == verify_segment_bytes(data, day, slow_index, fast=False)
    assert snapshot(fast_index) == snapshot(slow_index)


# ----------------------------------------------------- explicit mutated segments


def _base_lines() -> list[str]:
    attempts = [attempt(n, second=n * 3600 + 59) for n in range(3)]
    return chain(rows_of(attempts))


def _edit(n: int, f: Callable[[str], str]) -> Callable[[list[str]], list[str]]:
    def go(lines: list[str]) -> list[str]:
        lines = list(lines)
        lines[n] = f(lines[n])
        return lines

    return go


def _flip_at(s: str, k: int) -> str:
    return s[:k] + ("0" if s[k] != "0" else "1") + s[k + 1 :]


def _rechained(n: int, **values: Any) -> Callable[[list[str]], list[str]]:
    """Set values in row ``n`` and re-chain: the digests stay right."""

    def go(lines: list[str]) -> list[str]:
        rows = [json.loads(x) for x in lines]
        for row in rows:
            for k in ("sequence", "previous_row_digest", "row_digest"):
                row.pop(k)
        rows[n].update(values)
        return chain(rows)

    return go


# name -> (mutation of `_base_lines()`, the finding; None: verifies; ValueError: the
# reference's own int-conversion limit, which escapes it)
Expected = Finding | type[Exception] | None
EXPLICIT: dict[str, tuple[Callable[[list[str]], list[str]], Expected]] = {
    "intact": (lambda lines: lines, None),
    "byte_flip_in_digest": (
        _edit(1, lambda s: _flip_at(s, s.index('"row_digest":"') + 20)),
        Finding.DIGEST_MISMATCH,
    ),
    "byte_flip_in_key": (
        _edit(2, lambda s: _flip_at(s, s.index('"deadline_at_utc"') + 3)),
        Finding.FIELD_SET,
    ),
    "duplicate_key": (_edit(0, lambda s: '{"mode":"shadow",' + s[1:]), Finding.MALFORMED_ROW),
    "reordered_keys": (
        _edit(
            0, lambda s: json.dumps(dict(reversed(json.loads(s).items())), separators=(",", ":"))
        ),
        Finding.NON_CANONICAL_ROW,
    ),
    "extra_whitespace": (_edit(2, lambda s: s.replace(":", ": ", 1)), Finding.NON_CANONICAL_ROW),
    "unicode_escape": (
        _edit(0, lambda s: s.replace('"attempt_started"', '"\\u0061ttempt_started"', 1)),
        Finding.NON_CANONICAL_ROW,
    ),
    "nan": (
        _edit(0, lambda s: s.replace('"finalized_at_utc":null', '"finalized_at_utc":NaN')),
        Finding.MALFORMED_ROW,
    ),
    "infinity": (
        _edit(0, lambda s: s.replace('"sequence":1', '"sequence":Infinity')),
        Finding.MALFORMED_ROW,
    ),
    "leading_zero_sequence": (
        _edit(0, lambda s: s.replace('"sequence":1,', '"sequence":01,')),
        Finding.MALFORMED_ROW,
    ),
    "negative_sequence": (_rechained(0, sequence=-1), Finding.FIELD_FORMAT),
    "zero_sequence": (_rechained(0, sequence=0), Finding.FIELD_FORMAT),
    "bool_sequence": (_rechained(0, sequence=True), Finding.FIELD_FORMAT),
    "float_sequence": (_rechained(0, sequence=1.0), Finding.FIELD_FORMAT),
    "huge_sequence": (_rechained(0, sequence=10**40), Finding.SEQUENCE_GAP),
    # More digits than int() converts by default: the reference raises ValueError.
    "huge_sequence_text": (
        _edit(0, lambda s: s.replace('"sequence":1,', '"sequence":' + "1" * 5000 + ",")),
        Finding.MALFORMED_ROW,  # was a bare ValueError out of load(): fixed
    ),
    "leap_second": (_rechained(0, started_at_utc=f"{DAY}T00:00:60.000000Z"), Finding.FIELD_FORMAT),
    "leap_second_in_deadline": (
        _rechained(2, deadline_at_utc=f"{DAY}T01:00:60.000000Z"),
        Finding.FIELD_FORMAT,
    ),
    "february_30": (
        _rechained(1, finalized_at_utc="2026-02-30T00:00:01.000000Z"),
        Finding.FIELD_FORMAT,
    ),
    "hour_24": (_rechained(1, finalized_at_utc=f"{DAY}T24:00:01.000000Z"), Finding.FIELD_FORMAT),
    "year_zero": (
        _rechained(0, deadline_at_utc="0000-01-01T00:00:04.000000Z"),
        Finding.FIELD_FORMAT,
    ),
    "fullwidth_year_start": (
        _rechained(0, started_at_utc="２０２６" + f"{DAY}T00:00:59.000000Z"[4:]),
        Finding.FIELD_FORMAT,  # was wrong_segment: \d took fullwidth digits
    ),
    "uppercase_hex": (_rechained(0, artifact_key="A" * 64), Finding.FIELD_FORMAT),
    "short_attempt_id": (_rechained(0, attempt_id="b" * 31), Finding.FIELD_FORMAT),
    "unknown_surface": (_rechained(0, surface="monthly.v1"), Finding.FIELD_FORMAT),
    "shadow_selected_when_enabled": (_rechained(1, mode="enabled"), Finding.TERMINAL_MISMATCH),
    "selected_in_shadow": (_rechained(1, outcome="selected"), Finding.STATE_OUTCOME),
    "terminal_without_finalized": (_rechained(1, finalized_at_utc=None), Finding.FIELD_FORMAT),
    "start_with_finalized": (
        _rechained(0, finalized_at_utc=f"{DAY}T00:00:59.000000Z"),
        Finding.STATE_OUTCOME,
    ),
    "wrong_segment": (
        _rechained(0, started_at_utc=f"{OTHER_DAY}T00:00:59.000000Z"),
        Finding.WRONG_SEGMENT,
    ),
    "extra_field": (_rechained(0, note="x"), Finding.FIELD_SET),
    "escaped_quote": (_rechained(0, attempt_id='"' + "b" * 31), Finding.FIELD_FORMAT),
    "swapped_rows": (lambda lines: [lines[1], lines[0], *lines[2:]], Finding.SEQUENCE_GAP),
    "swapped_rows_rechained": (
        lambda lines: _rechained(0)([lines[1], lines[0], *lines[2:]]),
        Finding.ORPHAN_TERMINAL,
    ),
    "duplicate_row": (lambda lines: [*lines[:2], lines[1], *lines[2:]], Finding.SEQUENCE_GAP),
    "duplicate_terminal_rechained": (
        lambda lines: _rechained(0)([*lines[:2], lines[1], *lines[2:]]),
        Finding.DOUBLE_TERMINAL,
    ),
    "duplicate_start_rechained": (
        lambda lines: _rechained(0)([*lines[:2], lines[0], *lines[2:]]),
        Finding.DUPLICATE_START,
    ),
    "orphan_terminal": (lambda lines: _rechained(0)(lines[1:]), Finding.ORPHAN_TERMINAL),
    "wrong_digest": (
        _edit(
            3,
            lambda s: (
                s[: s.index('"row_digest":"') + 14]
                + "0" * 64
                + s[s.index('"schema_version"') - 2 :]
            ),
        ),
        Finding.DIGEST_MISMATCH,
    ),
    "blank_line": (lambda lines: [*lines[:2], "", *lines[2:]], Finding.MALFORMED_ROW),
    "chain_broken": (_rechained(2, previous_row_digest="f" * 64), Finding.CHAIN_BROKEN),
    "enabled_lifecycle": (_rechained(0, mode="enabled"), Finding.TERMINAL_MISMATCH),
    "enabled_pair": (
        lambda lines: _rechained(1, mode="enabled", outcome="selected")(
            _rechained(0, mode="enabled")(lines)
        ),
        None,
    ),
    "crlf": (_edit(0, lambda s: s + "\r"), Finding.NON_CANONICAL_ROW),
}


@pytest.mark.parametrize("name", sorted(EXPLICIT))
def test_explicit_mutations_match_the_reference(name: str) -> None:
    mutate, expected = EXPLICIT[name]
    result = same_as_reference(segment(mutate(_base_lines())))
    if expected is None:
        assert result[0] == "verified"
    elif isinstance(expected, Finding):
        assert result == ("unverified", expected, DAY)
    else:
        assert result[:2] == ("raised", expected)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n",
        b"\xff\n",
        b"\xc3\x28\n",
        b"\xef\xbb\xbf" + segment(_base_lines()),  # BOM
        segment(_base_lines())[:-1],  # torn tail
        segment(_base_lines())[:-200],
        segment(_base_lines()).replace(b"shadow", b"shad\xc3\xb6w", 1),
        segment(_base_lines()).replace(b"\n", b"\n\n", 1),
        segment(_base_lines()) + b"[]\n",
        segment(_base_lines()) + b'"x"\n',
        b"{}\n" + segment(_base_lines()),
    ],
)
def test_odd_bytes_match_the_reference(data: bytes) -> None:
    same_as_reference(data)


def test_context_of_other_segments_and_sealed_keys() -> None:
    other = [attempt(n, day=OTHER_DAY, second=n) for n in range(3)]
    context = Index()
    verify_segment_bytes(segment(chain(rows_of(other))), OTHER_DAY, context)
    context.sealed["c" * 32] = OTHER_DAY  # sealed is keyed by identity (dedupe_key)
    mine = [attempt(10 + n, second=n) for n in range(3)]
    assert same_as_reference(segment(chain(rows_of(mine))), context=context)[0] == "verified"
    for clash, finding in (
        ({"aid": other[1].aid}, Finding.DUPLICATE_START),
        ({"akey": other[2].akey}, Finding.DUPLICATE_ARTIFACT),
        ({"akey": "c" * 64}, Finding.DUPLICATE_ARTIFACT),
        # One identity, either length: a 32-hex key of an artifact a
        # 64-hex row already holds (and the 32-hex key of a sealed one).
        ({"akey": other[2].akey[:32]}, Finding.DUPLICATE_ARTIFACT),
        ({"akey": "c" * 32}, Finding.DUPLICATE_ARTIFACT),
    ):
        mine = [attempt(10 + n, second=n) for n in range(3)]
        for k, v in clash.items():
            setattr(mine[1], k, v)
        data = segment(chain(rows_of(mine)))
        assert same_as_reference(data, context=context) == ("unverified", finding, DAY)


# ------------------------------------------------------------------ generative

TRICKY_TS = [
    f"{DAY}T00:00:60.000000Z",
    f"{DAY}T23:59:61.000000Z",
    f"{DAY}T24:00:00.000000Z",
    "2026-02-30T00:00:00.000000Z",
    "2026-02-29T00:00:00.000000Z",
    "2024-02-29T00:00:00.000000Z",
    "0000-01-01T00:00:00.000000Z",
    f"{DAY}T00:00:00.00000Z",
    f"{DAY}T00:00:00.000000z",
    f"{DAY} 00:00:00.000000Z",
    f"{DAY}T00:00:00Z",
    "２０２６-11-30T00:00:00.000000Z",
    "2026-11-30T０0:00:00.000000Z",
    f"{OTHER_DAY}T12:00:00.000000Z",
    "2026-12-01T00:00:03.000000Z",
    "2026-1-30T00:00:00.000000Z",
    f"{DAY}T1:00:00.000000Z",
]
TRICKY_VALUES: list[object] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    1.0,
    10**19,
    10**18 - 1,
    "",
    "x",
    [],
    {},
    [1],
    {"a": 1},
    "A" * 64,
    "a" * 63,
    "a" * 65,
    "g" * 64,
    "a" * 32,
    "é" * 32,
    "a" * 31 + '"',
    "a\\" * 16,
    "shadow",
    "enabled",
    "Shadow",
    "attempt_started",
    "finalized",
    "selected",
    "shadow_selected",
    "daily.v1",
    "monthly.v1",
    SCHEMA,
    SCHEMA + " ",
    "0" * 64,
    "0" * 32,
    *TRICKY_TS,
]
FIELDS = [
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
]


@st.composite
def timestamps(draw: st.DrawFn, day: str = DAY) -> dt.datetime:
    base = dt.datetime.fromisoformat(f"{day}T00:00:00+00:00")
    return base + dt.timedelta(microseconds=draw(st.integers(0, 86_400 * 10**6 - 1)))


@st.composite
def attempts_strategy(draw: st.DrawFn) -> list[Attempt]:
    n = draw(st.integers(0, 6))
    out = []
    for i in range(n):
        t = draw(timestamps())
        mode = draw(st.sampled_from(MODES))
        legal_only = draw(st.booleans())
        outcome = draw(st.none() | st.sampled_from(SAFE_TERMINALS if legal_only else TERMINALS))
        out.append(
            Attempt(
                # Either key length a row may carry (32 hex from this
                # release, 64 from an earlier one; one identity, the first 32).
                akey=hashlib.sha256(f"k{i}".encode()).hexdigest()[: draw(st.sampled_from(KEY_HEX))],
                aid=hashlib.md5(f"a{i}".encode()).hexdigest(),
                surface=draw(st.sampled_from(SURFACES)),
                mode=mode,
                started=ts(t),
                deadline=ts(t + dt.timedelta(seconds=draw(st.integers(0, 90_000)))),
                outcome=outcome,
                finalized=ts(t + dt.timedelta(microseconds=draw(st.integers(0, 10**9)))),
            )
        )
    return out


@st.composite
def orders(draw: st.DrawFn, n: int) -> list[int]:
    """Each index twice, the first occurrence being the start: adjacent pairs,
    interleavings, or any shuffle."""
    kind = draw(st.sampled_from(["pairs", "shuffle"]))
    if kind == "pairs":
        return [i for i in range(n) for _ in (0, 1)]
    return draw(st.permutations([i for i in range(n) for _ in (0, 1)]))


def row_mutation() -> st.SearchStrategy[Callable[[list[dict[str, Any]]], list[dict[str, Any]]]]:
    """Before chaining: the digests will match, the semantics may not."""

    def set_value(
        i: int, key: str, value: object
    ) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        def go(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if rows:
                rows[i % len(rows)][key] = value
            return rows

        return go

    def delete_key(i: int, key: str) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        def go(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if rows:
                rows[i % len(rows)].pop(key, None)
            return rows

        return go

    def copy_field(
        i: int, j: int, key: str
    ) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        def go(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if rows and key in rows[j % len(rows)]:
                rows[i % len(rows)][key] = rows[j % len(rows)][key]
            return rows

        return go

    def char_edit(
        i: int, key: str, at: int, char: str
    ) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        def go(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if rows:
                row = rows[i % len(rows)]
                v = row.get(key)
                if isinstance(v, str) and v:
                    k = at % len(v)
                    row[key] = v[:k] + char + v[k + 1 :]
            return rows

        return go

    def move(i: int, j: int, dup: bool) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        def go(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if rows:
                row = rows[i % len(rows)] if dup else rows.pop(i % len(rows))
                rows.insert(j % (len(rows) + 1), dict(row))
            return rows

        return go

    def drop(i: int) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        def go(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if rows:
                rows.pop(i % len(rows))
            return rows

        return go

    def semantic(
        i: int, kind: str, pick: int
    ) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
        """Well-formed values that break one rule: chain, digest, sequence, a
        terminal's copied field, a second terminal, a lost start."""

        def go(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if not rows:
                return rows
            k = i % len(rows)
            other_hex = hashlib.sha256(f"other{pick}".encode()).hexdigest()
            terminals = [n for n, r in enumerate(rows) if r.get("state") == "finalized"]
            starts = [n for n, r in enumerate(rows) if r.get("state") == "attempt_started"]
            if kind == "prev":
                rows[k]["previous_row_digest"] = other_hex
            elif kind == "digest":
                rows[k]["row_digest"] = other_hex
            elif kind == "sequence":
                rows[k]["sequence"] = k + 1 + (pick % 5) - 2
            elif kind == "terminal_field" and terminals:
                t = rows[terminals[pick % len(terminals)]]
                key, value = [
                    ("artifact_key", other_hex),
                    ("attempt_id", other_hex[:32]),
                    ("surface", SURFACES[pick % 4]),
                    ("mode", MODES[pick % 2]),
                    ("started_at_utc", f"{DAY}T{pick % 24:02d}:00:00.000000Z"),
                    ("deadline_at_utc", f"{DAY}T{pick % 24:02d}:00:04.000000Z"),
                    ("outcome", TERMINALS[pick % len(TERMINALS)]),
                ][i % 7]
                t[key] = value
            elif kind == "double" and terminals:
                at = terminals[pick % len(terminals)]
                rows.insert(at + 1 + (i % (len(rows) - at)), dict(rows[at]))
            elif kind == "orphan" and starts:
                rows.pop(starts[pick % len(starts)])
            return rows

        return go

    idx = st.integers(0, 20)
    chars = st.sampled_from(list('0189afgAZT:-. _"\\\n') + ["é", "٣", "\u2028", "\x00"])
    return st.one_of(
        st.builds(
            semantic,
            idx,
            st.sampled_from(["prev", "digest", "sequence", "terminal_field", "double", "orphan"]),
            st.integers(0, 100),
        ),
        st.builds(set_value, idx, st.sampled_from(FIELDS), st.sampled_from(TRICKY_VALUES)),
        st.builds(delete_key, idx, st.sampled_from(FIELDS)),
        st.builds(copy_field, idx, idx, st.sampled_from(FIELDS)),
        st.builds(char_edit, idx, st.sampled_from(FIELDS), st.integers(0, 70), chars),
        st.builds(move, idx, idx, st.booleans()),
        st.builds(drop, idx),
    )


def text_mutation() -> st.SearchStrategy[Callable[[list[str]], list[str]]]:
    """After chaining: non-canonical forms of a row, or lines moved about."""
    subs = [
        (":", ": "),
        (",", ", "),
        ("{", "{ "),
        ("}", " }"),
        ('"a', '"\\u0061'),
        ("a", "\\u0061"),
        ("null", "NaN"),
        ("null", "Infinity"),
        ("null", "-Infinity"),
        ('"sequence":', '"sequence":0'),
        ('"sequence":', '"sequence":-'),
        ('"sequence":', '"sequence":' + "9" * 4400),
        ('"sequence":1', '"sequence":1.0'),
        ('"sequence":1', '"sequence":1e0'),
        ('Z"', '+00:00"'),
        (":00.", ":60."),
        ("-11-30T", "-02-30T"),
        ("T0", "T2"),
        ('","', '",  "'),
        ("e", "\\u0065"),
        ("/", "\\/"),
        ('"mode"', '"mode":"shadow","mode"'),
        ("}", ',"mode":"shadow"}'),
        ("}", ',"zz":1}'),
        ('{"artifact_key"', '{"attempt_id":"x","artifact_key"'),
    ]

    def sub(i: int, old: str, new: str, count: int) -> Callable[[list[str]], list[str]]:
        def go(lines: list[str]) -> list[str]:
            if lines:
                k = i % len(lines)
                lines[k] = lines[k].replace(old, new, count)
            return lines

        return go

    def reorder(i: int, seed: int) -> Callable[[list[str]], list[str]]:
        def go(lines: list[str]) -> list[str]:
            if lines:
                k = i % len(lines)
                try:
                    row = json.loads(lines[k])
                except ValueError:  # an earlier text mutation broke it already
                    return lines
                if not isinstance(row, dict) or not row:
                    return lines
                items = list(row.items())
                items = items[seed % len(items) :] + items[: seed % len(items)]
                lines[k] = json.dumps(dict(items), ensure_ascii=False, separators=(",", ":"))
            return lines

        return go

    def swap(i: int, j: int) -> Callable[[list[str]], list[str]]:
        def go(lines: list[str]) -> list[str]:
            if lines:
                a, b = i % len(lines), j % len(lines)
                lines[a], lines[b] = lines[b], lines[a]
            return lines

        return go

    idx = st.integers(0, 20)
    return st.one_of(
        st.builds(
            lambda i, s, c: sub(i, s[0], s[1], c),
            idx,
            st.sampled_from(subs),
            st.sampled_from([1, -1]),
        ),
        st.builds(reorder, idx, st.integers(1, 12)),
        st.builds(swap, idx, idx),
    )


def byte_mutation() -> st.SearchStrategy[Callable[[bytes], bytes]]:
    def flip(at: int, mask: int) -> Callable[[bytes], bytes]:
        def go(data: bytes) -> bytes:
            if not data:
                return data
            k = at % len(data)
            return data[:k] + bytes([data[k] ^ mask]) + data[k + 1 :]

        return go

    def insert(at: int, blob: bytes) -> Callable[[bytes], bytes]:
        def go(data: bytes) -> bytes:
            k = at % (len(data) + 1)
            return data[:k] + blob + data[k:]

        return go

    def delete(at: int, n: int) -> Callable[[bytes], bytes]:
        def go(data: bytes) -> bytes:
            k = at % (len(data) + 1)
            return data[:k] + data[k + n :]

        return go

    def truncate(n: int) -> Callable[[bytes], bytes]:
        return lambda data: data[: max(0, len(data) - n)]

    at = st.integers(0, 10**5)
    return st.one_of(
        st.builds(flip, at, st.integers(1, 255)),
        st.builds(
            insert,
            at,
            st.sampled_from(
                [
                    b"\n",
                    b" ",
                    b"\xff",
                    b"\xc3",
                    b"\xc3\xa9",
                    b"\r",
                    b"0",
                    b"a",
                    b'"',
                    b"\\",
                    b"\x00",
                ]
            ),
        ),
        st.builds(insert, at, st.binary(min_size=1, max_size=4)),
        st.builds(delete, at, st.integers(1, 80)),
        st.builds(truncate, st.integers(1, 700)),
    )


@st.composite
def contexts(draw: st.DrawFn) -> Index:
    """The index other segments left: attempts of another day, maybe sealed keys,
    some of them sharing ids or keys with this segment's attempts."""
    index = Index()
    if draw(st.booleans()):
        return index
    n = draw(st.integers(1, 3))
    prior = []
    for i in range(n):
        clash = draw(st.sampled_from(["none", "none", "none", "aid", "akey"]))
        a = attempt(100 + i, day=OTHER_DAY, second=i)
        if clash == "aid":
            a.aid = hashlib.md5(f"a{i}".encode()).hexdigest()
        elif clash == "akey":
            a.akey = hashlib.sha256(f"k{i}".encode()).hexdigest()[: draw(st.sampled_from(KEY_HEX))]
        prior.append(a)
    verify_segment_bytes(segment(chain(rows_of(prior))), OTHER_DAY, index, fast=False)
    if draw(st.booleans()):
        sealed_key = hashlib.sha256(f"k{draw(st.integers(0, 6))}".encode()).hexdigest()
        index.sealed[sealed_key[:32]] = OTHER_DAY  # sealed is keyed by identity
        index.sealed_open = draw(st.integers(0, 2))
    return index


@st.composite
def mutated_segments(draw: st.DrawFn) -> tuple[bytes, str, Index]:
    attempts = draw(attempts_strategy())
    rows = rows_of(attempts, draw(orders(len(attempts))))
    # Mostly one level at a time, so that the later checks get their turn too.
    levels = draw(st.sampled_from(["", "r", "r", "r", "t", "t", "b", "rtb"]))
    for f in draw(st.lists(row_mutation(), min_size=1, max_size=2)) if "r" in levels else []:
        rows = f(rows)
    lines = chain(rows)
    for g in draw(st.lists(text_mutation(), min_size=1, max_size=2)) if "t" in levels else []:
        lines = g(lines)
    data = segment(lines)
    for h in draw(st.lists(byte_mutation(), min_size=1, max_size=2)) if "b" in levels else []:
        data = h(data)
    seg = draw(st.sampled_from([DAY] * 7 + [OTHER_DAY]))
    return data, seg, draw(contexts())


@PROPERTY
@given(mutated_segments())
@example((segment(_base_lines()), DAY, Index()))
def test_fast_path_matches_the_reference(case: tuple[bytes, str, Index]) -> None:
    data, seg, context = case
    same_as_reference(data, seg, context)


@PROPERTY
@given(attempts_strategy(), st.data())
def test_valid_segments_never_fall_back(attempts: list[Attempt], data: st.DataObject) -> None:
    for a in attempts:  # legal lifecycles only
        if a.outcome in ("selected", "commit_failed", "publication_failed"):
            a.mode = "enabled"
        elif a.outcome == "shadow_selected":
            a.mode = "shadow"
    body = segment(chain(rows_of(attempts, data.draw(orders(len(attempts))))))
    assert fast_fallbacks(body) == []
    assert same_as_reference(body)[0] == "verified"


# ------------------------------------------------- one grammar: the row format table

# Values to put in each field of an otherwise valid, correctly chained row: every
# JSON type and near misses of every kind of format in the table.
FIELD_MUTANTS: list[object] = [
    None,
    True,
    0,
    1,
    2,
    -1,
    1.0,
    "",
    [],
    {},
    "a" * 64,
    "A" * 64,
    "a" * 63,
    "a" * 65,
    "b" * 32,
    "b" * 31,
    "g" * 64,
    SCHEMA,
    SCHEMA + " ",
    "korean-expression-journal-v2",
    *SURFACES,
    "Daily.v1",
    *MODES,
    "Shadow",
    "attempt_started",
    "finalized",
    *TERMINALS,
    "accepted",
    "in_flight",
    "TIMEOUT",
    *TRICKY_TS,
    f"{DAY}T00:00:01.000000Z",
    f"{DAY}T00:60:00.000000Z",
    "null",
]


def _journal_row_format() -> Any:
    from kexpr.spool._journal_rows import ROW_FORMAT

    return ROW_FORMAT


@pytest.mark.parametrize("name", sorted(_journal_row_format()))
@pytest.mark.parametrize("which", [0, 1])  # the start row, its terminal row
def test_every_field_mutation_is_judged_as_the_reference_judges_it(name: str, which: int) -> None:
    """For every field of the table, a row whose value is changed (and chained
    correctly, so only the field's format and meaning can refuse it) is judged
    by the fast path exactly as by the reference: the fast path never accepts
    what the reference refuses; it refuses it or hands it to the reference."""
    verdicts: set[object] = set()
    for value in FIELD_MUTANTS:
        if name in ("sequence", "previous_row_digest", "row_digest"):
            lines = [
                json.loads(x) | ({name: value} if i == which else {})
                for i, x in enumerate(_plain_lines())
            ]
            data = segment(chain(lines))
        else:
            rows = rows_of([attempt(n, second=n) for n in range(3)])
            rows[which] = dict(rows[which], **{name: value})
            data = segment(chain(rows))
        verdict = same_as_reference(data)
        verdicts.add(verdict[0] if verdict[0] == "verified" else verdict[1])
        if verdict[0] != "verified":
            assert fast_fallbacks(data), "the fast path refused a row by itself"
    assert verdicts - {"verified"}  # each field has mutants the reference refuses


def _plain_lines() -> list[str]:
    """The chained lines of three attempts, with sequence and digests stripped
    (a mutant of one of those is chained around, not recomputed)."""
    rows = rows_of([attempt(n, second=n) for n in range(3)])
    return [json.dumps(r) for r in rows]


def test_fast_patterns_are_built_from_the_row_format_table() -> None:
    """No field's format is spelled a second time in the fast path: its source
    has no value pattern or value of its own, and every value the table allows
    for an enum field takes the fast path."""
    import inspect

    from kexpr.spool._journal_rows import ROW_FORMAT, FieldKind

    source = inspect.getsource(journal_module)
    for literal in ("[0-9a-f]", "{64}", "{32}", "T[0-9]", "[0-5][0-9]", SCHEMA, *SURFACES, *MODES):
        assert literal not in source
    for name, fmt in ROW_FORMAT.items():
        if fmt.kind is not FieldKind.ENUM or name in ("state", "outcome"):
            continue
        for value in fmt.values:
            assert name in ("surface", "mode"), name  # a new enum field needs a case here
            one = attempt(0, surface=value) if name == "surface" else attempt(0, mode=value)
            data = segment(chain(rows_of([one])))
            assert fast_fallbacks(data) == [] and same_as_reference(data)[0] == "verified"

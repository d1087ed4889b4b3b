"""The token tables of the docs, generated from the budget module and the real encoding
(one source for every figure).

Each table sits in its document between two marker lines::

    <!-- BEGIN GENERATED tokens:NAME (python tests/contract/budget_docs.py --write) -->
    ...
    <!-- END GENERATED tokens:NAME -->

and is exactly what `render` prints for NAME. tests/contract/test_budget_docs.py checks
that every block is current (and that the budget's constants the prose quotes are the
module's). After a change to the budget, the IDs, the key or the manifest:

    .venv/bin/python tests/contract/budget_docs.py --write

Everything here is deterministic: the artifact keys are fixed (SHA-256 of a counter,
cut to the key's 32 hex), so a figure changes only when what it measures does. The
bound and the verdict are `kexpr.spool.contract.budget`'s; the counts are o200k_base's
(`quicktok`, a test dependency); the call times are the budget's arithmetic (first token
+ tokens / rate, the minimal compact answer), not a measurement (the bench measures:
docs/performance.md).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "contract"))

from budget_support import body_shapes, capsule, count  # noqa: E402

from kexpr.spool.contract import ARTIFACT_KEY_HEX, SlotPolicy  # noqa: E402
from kexpr.spool.contract.budget import (  # noqa: E402
    ANSWER_BUDGET_TOKENS,
    minimal_answer,
    slots_token_bound,
)

DUAL = "adaptive.dualcoachtest.card.v1"
KEYS = tuple(
    hashlib.sha256(f"budget-docs-{i}".encode()).hexdigest()[:ARTIFACT_KEY_HEX] for i in range(40)
)
FIRST_TOKEN_RANGE = (0.3, 0.9)  # the published first-token times (docs/budget.md §1)
RATES = (110, 77, 55)  # the fastest published, OpenAI's median, a community run
GUIDE_FIRST_TOKEN = 0.6  # the operator guide's one first-token time (the range's middle)
SAFE_MARGIN_S = 0.5  # the guide's "여유 있음": at least this much of the 3 s left
SDK_TIMEOUT = 3.0

Shape = tuple[str, tuple[SlotPolicy, ...]]


def _pretty(text: str) -> str:
    return json.dumps(json.loads(text), ensure_ascii=False, indent=2)


class Row:
    """One group of bodies: its capsules' counts over `KEYS`, or none when the fit table
    leaves every body of the group nothing to style (design §6.1: no capsule, no call)."""

    def __init__(self, label: str, shapes: Sequence[Shape]) -> None:
        self.label = label
        compact: list[int] = []
        pretty: list[int] = []
        bounds: list[int] = []
        for surface, slots in shapes:
            bound = slots_token_bound(surface, slots)
            assert bound is not None
            bounds.append(bound)
            for key in KEYS:
                text = minimal_answer(capsule(surface, slots, key))
                compact.append(count(text))
                pretty.append(count(_pretty(text)))
        self.compact, self.pretty, self.bounds = compact, pretty, bounds
        self.fits = {b <= ANSWER_BUDGET_TOKENS for b in bounds}

    @property
    def styled(self) -> bool:
        return bool(self.bounds)

    @property
    def median(self) -> int:
        return round(statistics.median(self.compact))

    def eligible(self) -> str:
        return "yes" if self.fits == {True} else "no" if self.fits == {False} else "some"


def _span(values: Iterable[int]) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}–{hi}"


# design §6.1, §6.2: a body whose slots all lack a choice has no capsule and is never
# asked (`nothing_to_style`).
NOTHING_TO_STYLE = "nothing_to_style"
MAX_REASONS = 9
# The groups of bodies, in the table's order, and their labels.
GROUPS: tuple[tuple[str, str], ...] = (
    ("daily", "daily"),
    ("weekly I2", "weekly, goal range missing (I2)"),
    ("weekly", "weekly, every other branch"),
    ("physique card", "physique card"),
    *(
        (f"dual card {n}", f"dual card, {n} reason{'s' if n > 1 else ''}")
        for n in range(1, MAX_REASONS + 1)
    ),
)


def _shipped_rows() -> list[Row]:
    """One row a group of bodies; consecutive dual card rows with nothing to style
    are one row (`_collapsed`)."""
    shapes: dict[str, list[Shape]] = {group: [] for group, _ in GROUPS}
    for group, surface, slots in body_shapes(MAX_REASONS):
        if slots and (surface, slots) not in shapes[group]:
            shapes[group].append((surface, slots))
    return _collapsed([Row(label, shapes[group]) for group, label in GROUPS])


def _collapsed(rows: list[Row]) -> list[Row]:
    out: list[Row] = []
    run: list[Row] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            first, last = run[0].label.split(", ")[1], run[-1].label.split(", ")[1]
            out.append(Row(f"dual card, {first.split()[0]} to {last}", []))
        run.clear()

    for row in rows:
        if row.label.startswith("dual card") and not row.styled:
            run.append(row)
            continue
        flush()
        out.append(row)
    flush()
    return out


def budget_table() -> str:
    """docs/budget.md §2: the shipped IDs' shapes, the bound and the modelled call times."""
    lines = [
        "| capsule | compact | pretty | bound (any key) | eligible | at 110 t/s | at 77 t/s"
        " | at 55 t/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in _shipped_rows():
        if not row.styled:
            lines.append(f"| {row.label} | — | — | — | {NOTHING_TO_STYLE} (no call) | — | — | — |")
            continue
        times = [
            f"{FIRST_TOKEN_RANGE[0] + row.median / r:.1f}–{FIRST_TOKEN_RANGE[1] + row.median / r:.1f} s"
            for r in RATES
        ]
        lines.append(
            f"| {row.label} | {row.median} | {round(statistics.median(row.pretty))} |"
            f" {_span(row.bounds)} | {row.eligible()} | {' | '.join(times)} |"
        )
    return "\n".join(lines)


def _guide_cell(row: Row, rate: int) -> str:
    if row.fits == {False}:
        return "도착 불가"
    t = GUIDE_FIRST_TOKEN + row.median / rate
    if t > SDK_TIMEOUT:
        return f"{t:.1f}초, **시간 초과**"
    if SDK_TIMEOUT - t < SAFE_MARGIN_S:
        return f"{t:.1f}초, 위험"
    return f"{t:.1f}초, 여유 있음"


_GUIDE_LABELS = {
    "daily": "`daily.v1`",
    "weekly, goal range missing (I2)": "`weekly.v1`, 목표 범위 없음(I2)",
    "weekly, every other branch": "`weekly.v1`, 그 밖의 분기",
    "physique card": "`adaptive.physique.card.v1`",
}


def _guide_label(label: str) -> str:
    if label in _GUIDE_LABELS:
        return _GUIDE_LABELS[label]
    reasons = label.removeprefix("dual card, ").removesuffix(" reasons").removesuffix(" reason")
    return f"듀얼 카드, 근거 {reasons.replace(' to ', '–')}개"


def guide_table() -> str:
    """docs/operator-guide.ko.md: first token 0.6 s, the minimal compact answer."""
    lines = [
        "| 메시지 유형(최소 압축 답) | 초당 55토큰 | 초당 77토큰(OpenAI 중앙값) | 초당 110토큰(가장 빠른 공개 수치) |",
        "|---|---|---|---|",
    ]
    nothing = f"호출 없음(`{NOTHING_TO_STYLE}`)"
    for row in _shipped_rows():
        label = _guide_label(row.label)
        if not row.styled:
            lines.append(f"| {label}(꾸밀 문장 없음) | {nothing} | {nothing} | {nothing} |")
            continue
        cells = " | ".join(_guide_cell(row, r) for r in (55, 77, 110))
        lines.append(f"| {label}(~{row.median}토큰) | {cells} |")
    return "\n".join(lines)


def _bench_rows() -> list[tuple[str, Row | None, str]]:
    """The bench's own cases (bench/time_budget.py: real host bodies, the operator IDs).
    A case whose every slot is locked (design §6.1) has no capsule: no row figures."""
    sys.path.insert(0, str(REPO / "bench"))
    import time_budget

    out: list[tuple[str, Row | None, str]] = []
    for case in time_budget.cases():
        surface = case.parse()
        slots = tuple(s.policy() for s in surface.slots)
        if not slots:
            out.append((case.label, None, NOTHING_TO_STYLE))
            continue
        out.append(
            (case.label, Row(case.label, [(case.surface, slots)]), time_budget.eligibility(case))
        )
    return out


def performance_table() -> str:
    """docs/performance.md: the bench's capsules' minimal answers."""
    lines = [
        "| capsule | minimal compact answer | same answer pretty-printed | shim's bound | at the shim |",
        "|---|---|---|---|---|",
    ]
    for label, row, verdict in _bench_rows():
        if row is None:
            lines.append(f"| {label} | — | — | — | {verdict} |")
            continue
        lines.append(
            f"| {label} | {_span(row.compact)} | {_span(row.pretty)} | {_span(row.bounds)}"
            f" | {verdict} |"
        )
    return "\n".join(lines)


def keys_line() -> str:
    """docs/budget.md §3a: what a key costs, 64 hex against 32 (the first 32 of each)."""
    keys = [hashlib.sha256(f"budget-docs-{i}".encode()).hexdigest() for i in range(2000)]
    long = [count(k) for k in keys]
    short = [count(k[:ARTIFACT_KEY_HEX]) for k in keys]
    return (
        f"  64 hex cost {round(statistics.median(long))} tokens (median; at most {max(long)}),"
        f" 32 hex cost {round(statistics.median(short))} (at most {max(short)})."
    )


def guide_pretty_line() -> str:
    """docs/operator-guide.ko.md: the pretty-printed answers' times (first token 0.6 s),
    for every message that is asked at all."""
    parts = []
    for row in _shipped_rows():
        if not row.styled:
            continue
        pretty = round(statistics.median(row.pretty))
        fast, slow = (
            GUIDE_FIRST_TOKEN + pretty / max(RATES),
            GUIDE_FIRST_TOKEN + pretty / min(RATES),
        )
        parts.append(f"{_guide_label(row.label)} {fast:.1f}–{slow:.1f}초")
    return ", ".join(parts) + "가"


TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "guide-pretty": ("docs/operator-guide.ko.md", guide_pretty_line),
    "keys": ("docs/budget.md", keys_line),
    "budget": ("docs/budget.md", budget_table),
    "guide": ("docs/operator-guide.ko.md", guide_table),
    "performance": ("docs/performance.md", performance_table),
}


def begin(name: str) -> str:
    return f"<!-- BEGIN GENERATED tokens:{name} (python tests/contract/budget_docs.py --write) -->"


def end(name: str) -> str:
    return f"<!-- END GENERATED tokens:{name} -->"


def block(text: str, name: str) -> str:
    """The current content of the block ``name`` in ``text``."""
    a, b = text.index(begin(name)) + len(begin(name)) + 1, text.index(end(name))
    return text[a:b].removesuffix("\n") if b > a else ""


def replaced(text: str, name: str, table: str) -> str:
    a, b = text.index(begin(name)) + len(begin(name)) + 1, text.index(end(name))
    return text[:a] + table + "\n" + text[max(a, b) :]


def main(argv: list[str]) -> int:
    write = argv == ["--write"]
    stale = []
    for name, (doc, render) in TABLES.items():
        path = REPO / doc
        text = path.read_text(encoding="utf-8")
        table = render()
        if block(text, name) != table:
            stale.append(doc)
            if write:
                path.write_text(replaced(text, name, table), encoding="utf-8")
    for doc in stale:
        print(f"{'rewrote' if write else 'stale'}: {doc}")
    return 0 if write or not stale else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

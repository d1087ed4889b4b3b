"""One source for every figure, token part: every token
figure of README.md, docs/budget.md, docs/design.md §9, docs/performance.md's token
table and docs/operator-guide.ko.md is generated from the budget module
(tests/contract/budget_docs.py's marked blocks) or checked against it here."""

from __future__ import annotations

import re
from pathlib import Path

import budget_docs
import pytest
from budget_support import count

from gateway_shim.glossary import RETIRED_SHIPPED_IDS
from kexpr.spool.contract.budget import (
    ANSWER_BUDGET_TOKENS,
    FASTEST_TOKENS_PER_S,
    FIRST_TOKEN_S,
    KEY_TOKENS_MAX,
    LEGACY_KEY_TOKENS_MAX,
    MAX_COMPLETION_TOKENS,
    SDK_TIMEOUT_S,
    TIME_BUDGET_TOKENS,
)
from kexpr.worker.histograms import COMPLETION_TOKENS_EDGES

REPO = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/budget.md", "docs/design.md", "docs/performance.md")
GUIDE = "docs/operator-guide.ko.md"
_GENERATED = re.compile(r"<!-- BEGIN GENERATED.*?<!-- END GENERATED[^\n]*", re.S)
# A token count in prose: a number, or a range, before "token(s)" / "토큰", not a rate.
_COUNT = re.compile(r"(?<![\w.])~?(\d[\d,]*)(?:\s*[–-]\s*(\d[\d,]*))?\s+tokens?\b(?!/s)")
_COUNT_KO = re.compile(r"(?<!초당 )(?<![\w.])~?(\d[\d,]*)토큰")  # "초당 N토큰": a rate
# The published speeds and prompt size the budget's constants come from (docs/budget.md
# §1): quoted figures, not computed ones.
PUBLISHED = {850}


def _text(doc: str) -> str:
    return (REPO / doc).read_text(encoding="utf-8")


def _allowed() -> set[int]:
    ids = {count(i) for pair in RETIRED_SHIPPED_IDS.items() for i in pair}
    steps = {COMPLETION_TOKENS_EDGES[1] - COMPLETION_TOKENS_EDGES[0]}  # the histogram step

    # The one styled shape's bound (docs/budget.md §6): the goal-missing weekly.
    from kexpr.spool.contract import slot_policy
    from kexpr.spool.contract.budget import slots_token_bound

    styled = slot_policy(
        "weekly.interpretation", ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"]
    )
    return {
        slots_token_bound("weekly.v1", (styled,)) or 0,
        ANSWER_BUDGET_TOKENS,
        MAX_COMPLETION_TOKENS,
        KEY_TOKENS_MAX,
        LEGACY_KEY_TOKENS_MAX,
        *ids,
        *steps,
        *PUBLISHED,
    }


@pytest.mark.parametrize("name", sorted(budget_docs.TABLES))
def test_every_generated_block_is_current(name: str) -> None:
    # Regenerate with: .venv/bin/python tests/contract/budget_docs.py --write
    doc, render = budget_docs.TABLES[name]
    assert budget_docs.block(_text(doc), name) == render(), f"{doc}: tokens:{name} is stale"


@pytest.mark.parametrize("doc", [*DOCS, GUIDE])
def test_every_token_count_in_prose_is_a_budget_figure(doc: str) -> None:
    """Outside the generated blocks a count of tokens is one of the module's constants
    (the budget, max_tokens, the key's worst cases), a shipped ID's cost, the
    histogram's step, or a quoted published figure. Timing commentary on the bench's
    measured run (docs/performance.md after "One full run") is the bench's figures."""
    text = _GENERATED.sub("", _text(doc))
    if doc == "docs/performance.md":
        text = text[: text.index("**One full run**")]
    found = [int(n.replace(",", "")) for m in _COUNT.finditer(text) for n in m.groups() if n]
    found += [int(m.group(1).replace(",", "")) for m in _COUNT_KO.finditer(text)]
    assert set(found) <= _allowed(), sorted(set(found) - _allowed())


def test_the_quoted_constants_are_the_modules() -> None:
    budget = _text("docs/budget.md")
    assert f"| `MAX_COMPLETION_TOKENS` | {MAX_COMPLETION_TOKENS} |" in budget
    assert f"| `SDK_TIMEOUT_S` | {SDK_TIMEOUT_S} s |" in budget
    assert f"| `FIRST_TOKEN_S` | {FIRST_TOKEN_S} s |" in budget
    assert f"| `FASTEST_TOKENS_PER_S` | {FASTEST_TOKENS_PER_S} |" in budget
    assert (
        f"({SDK_TIMEOUT_S} s − {FIRST_TOKEN_S} s) × {FASTEST_TOKENS_PER_S} = **{TIME_BUDGET_TOKENS}**"
        in budget
    )
    assert (
        f"min({MAX_COMPLETION_TOKENS}, {TIME_BUDGET_TOKENS}) = **{ANSWER_BUDGET_TOKENS}**" in budget
    )
    assert f"counted as {KEY_TOKENS_MAX} tokens (`KEY_TOKENS_MAX`)" in budget
    assert f"counts its key as {LEGACY_KEY_TOKENS_MAX} (`LEGACY_KEY_TOKENS_MAX`)" in budget
    design = _text("docs/design.md")
    section9 = design[design.index("## 9. ") : design.index("## 10. ")]
    assert (
        f"({SDK_TIMEOUT_S} s − {FIRST_TOKEN_S} s first token) × {FASTEST_TOKENS_PER_S} tokens/s"
        in section9
    )
    assert f"is {ANSWER_BUDGET_TOKENS} tokens, under `max_tokens={MAX_COMPLETION_TOKENS}`" in (
        section9.replace("\n  ", " ")
    )
    guide = _text(GUIDE)
    assert (
        f"`({SDK_TIMEOUT_S}초 − {FIRST_TOKEN_S}초) × 초당 {FASTEST_TOKENS_PER_S}토큰"
        f" = {ANSWER_BUDGET_TOKENS}토큰`" in guide
    )
    assert f"`max_tokens={MAX_COMPLETION_TOKENS}`" in guide
    assert f"the plan's 3 s and {MAX_COMPLETION_TOKENS} tokens" in _text("README.md")


def test_the_shipped_and_retired_id_costs_quoted_are_measured() -> None:
    budget = _text("docs/budget.md")
    for old, new in RETIRED_SHIPPED_IDS.items():
        assert f"`{new}` ({count(new)}" in budget
        assert f"`{old}` ({count(old)})" in budget


def test_the_bench_token_table_has_a_row_for_every_case_its_verdict_the_docs() -> None:
    """`make bench`'s time budget starts with this table: a card the fit table
    leaves nothing to style has a row with no answer (there is no capsule to
    count), and every row's verdict is the one docs/performance.md shows."""
    # bench/ is put on the path by `_bench_rows`: called first, whatever ran before.
    verdicts = {label: verdict for label, _row, verdict in budget_docs._bench_rows()}
    import time_budget

    for case in time_budget.cases():
        row = time_budget.token_row(case, 1)
        assert row["eligible"] == verdicts[case.label]
        assert (row["bound"] is None) == (verdicts[case.label] == "nothing_to_style")

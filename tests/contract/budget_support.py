"""The real o200k_base encoding, every shipped capsule shape, and the pinned table of
`kexpr.spool.contract.budget`.

Run as a script to print `queue/spool/contract/_budget_table.py` anew (through a
temporary file: the script imports the table it replaces):

    .venv/bin/python tests/contract/budget_support.py > /tmp/t.py \
      && mv /tmp/t.py queue/spool/contract/_budget_table.py

tests/contract/test_budget.py checks that the pinned file is exactly what this prints.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from functools import cache

import quicktok

from kexpr.spool.contract import MANIFEST, SAFE_STYLE_LEXEMES, Capsule, SlotPolicy, slot_policy
from kexpr.spool.contract.answers import answer_json
from kexpr.spool.contract.budget import _KEY_STAND_IN, _answer, _split, minimal_generated
from kexpr.spool.contract.fit import compositions, slot_styleable

ENCODING = "o200k_base"  # gpt-4.1-mini's
SURFACE_OF = {row.pattern: row.surface for row in MANIFEST.values()}


@cache
def _encoder() -> quicktok.Encoding:
    return quicktok.get_encoding(ENCODING)


def count(text: str) -> int:
    """The exact o200k_base token count of ``text``."""
    return len(_encoder().encode(text))


def _branches(pattern: str) -> tuple[tuple[str, ...], ...]:
    return MANIFEST[pattern].branches


def _styled(*policies: SlotPolicy) -> tuple[SlotPolicy, ...]:
    """The slots of a body's capsule: those the fit table leaves a choice (design §6.1)."""
    return tuple(p for p in policies if slot_styleable(p.slot_id, p.semantic_ids))


def body_policies(max_reasons: int = 9) -> Iterator[tuple[str, str, tuple[SlotPolicy, ...]]]:
    """Every body the shipped manifest allows, as (group, surface, the policies of all
    its slots, locked or not).
    Groups: daily, weekly I2 (goal range missing), weekly (every other branch),
    physique card, dual card n (n reasons: the decision and lines 1..n; all
    combinations up to three lines, beyond that each reason repeated and the two
    alternating)."""
    for b in _branches("daily.status"):
        yield "daily", "daily.v1", (slot_policy("daily.status", b),)
    interpretation = _branches("weekly.interpretation")
    for bi, br in itertools.product(interpretation, _branches("weekly.rationale")):
        group = "weekly I2" if bi == interpretation[1] else "weekly"
        slots: tuple[SlotPolicy, ...] = (
            slot_policy("weekly.interpretation", bi),
            slot_policy("weekly.rationale", br),
        )
        yield group, "weekly.v1", slots
    for b in _branches("adaptive.physique.review_instruction"):
        policy = slot_policy("adaptive.physique.review_instruction", b)
        yield "physique card", "adaptive.physique.card.v1", (policy,)
    reasons = list(_branches("adaptive.dual.review.N"))
    decisions = list(_branches("adaptive.dual.judgment"))
    for n in range(1, max_reasons + 1):
        if n <= 3:
            combos = list(itertools.product(reasons, repeat=n))
        else:
            combos = [tuple([r] * n) for r in reasons]
            combos.append(tuple(reasons[i % len(reasons)] for i in range(n)))
        for decision, combo in itertools.product(decisions, combos):
            slots = (
                slot_policy("adaptive.dual.judgment", decision),
                *(slot_policy(f"adaptive.dual.review.{i + 1}", r) for i, r in enumerate(combo)),
            )
            yield f"dual card {n}", "adaptive.dualcoachtest.card.v1", slots


def body_shapes(max_reasons: int = 9) -> Iterator[tuple[str, str, tuple[SlotPolicy, ...]]]:
    """Every body the shipped manifest allows, as (group, surface, its capsule's slots):
    the slots the fit table leaves a choice, none for a body with nothing to style."""
    for group, surface, policies in body_policies(max_reasons):
        yield group, surface, _styled(*policies)


def shipped_shapes(max_reasons: int = 9) -> Iterator[tuple[str, tuple[SlotPolicy, ...]]]:
    """Every capsule shape the shipped manifest allows: (surface, slots), once each. A
    body with nothing to style (design §6.1: no slot with a choice) has no capsule."""
    seen: set[tuple[str, tuple[SlotPolicy, ...]]] = set()
    for _group, surface, slots in body_shapes(max_reasons):
        if slots and (surface, slots) not in seen:
            seen.add((surface, slots))
            yield surface, slots


def capsule(surface: str, slots: tuple[SlotPolicy, ...], key: str) -> Capsule:
    return Capsule(
        schema_version="korean-expression-v4", surface=surface, artifact_key=key, slots=slots
    )


def composed_answers(
    surface: str, slots: tuple[SlotPolicy, ...], key: str
) -> Iterator[tuple[SlotPolicy, str, str]]:
    """For each slot and each composition the fit table accepts there (design §6.1),
    the compact answer with that composition in that slot and the minimal one in
    the others: (slot, composition, answer)."""
    cap = capsule(surface, slots, key)
    minimal = {s.slot_id: minimal_generated(s) for s in slots}
    for slot in slots:
        for text in compositions(slot.slot_id, slot.semantic_ids):
            chosen = {**minimal, slot.slot_id: text}
            yield slot, text, answer_json(cap, chosen)


def computed_table() -> dict[str, int]:
    """Every pre-token of every shipped shape's answers, with every composition the fit
    table accepts in each slot (so that the budget's choice of the cheapest one,
    `minimal_generated`, ranks them by their exact counts), whose exact count is below
    its UTF-8 length: the others cost their length in the bound anyway (budget Rule 3)."""
    pieces: set[str] = set()
    for surface, slots in shipped_shapes(max_reasons=3):
        pieces.update(_split(_answer(surface, _KEY_STAND_IN, slots)))
    # Every body's slots, locked ones included (their generated_ko empty): an ID or a
    # slot the table locks today still costs its exact count wherever it is bounded.
    for _group, surface, policies in body_policies(max_reasons=3):
        pieces.update(_split(_answer(surface, _KEY_STAND_IN, policies)))
    for surface, slots in shipped_shapes(max_reasons=3):
        for _, _, answer in composed_answers(surface, slots, _KEY_STAND_IN):
            pieces.update(_split(answer))
    pieces.update(SAFE_STYLE_LEXEMES)
    # The dual IDs earlier releases shipped: an old shim's capsules and a glossary
    # whose file took a new shipped ID still carry them.
    from gateway_shim.glossary import RETIRED_SHIPPED_IDS

    for retired in RETIRED_SHIPPED_IDS:
        pieces.update(_split(retired))
    pieces.discard(_KEY_STAND_IN)
    return {p: n for p in sorted(pieces) if (n := count(p)) < len(p.encode("utf-8"))}


def render_table() -> str:
    lines = [
        '"""Exact o200k_base token counts of the pre-tokens of minimal answers',
        "(`kexpr.spool.contract.budget` Rule 3). GENERATED by tests/contract/budget_support.py",
        "from the real encoding; tests/contract/test_budget.py checks it is current. Do not",
        'edit by hand: a pre-token not listed costs its UTF-8 length, which is never less."""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping",
        "from types import MappingProxyType",
        "from typing import Final",
        "",
        "PRETOKEN_TOKENS: Final[Mapping[str, int]] = MappingProxyType(",
        "    {",
    ]
    for piece, n in computed_table().items():
        # As ruff format writes it: double quotes unless the piece holds one.
        quoted = repr(piece) if '"' in piece or "\\" in piece else f'"{piece}"'
        lines.append(f"        {quoted}: {n},")
    lines += ["    }", ")", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render_table())

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
from kexpr.spool.contract.fit import compositions

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


def shipped_shapes(max_reasons: int = 9) -> Iterator[tuple[str, tuple[SlotPolicy, ...]]]:
    """Every capsule shape the shipped manifest allows: (surface, slots). Dual cards with
    2..max_reasons review lines: the decision and the first line are locked (design
    §6.1), so a card's slots are its lines 2..n, each any shipped reason (all
    combinations up to three slots; beyond that each reason repeated and the two
    alternating). A card with fewer than two lines has no slot, so no capsule."""
    for (b,) in zip(_branches("daily.status"), strict=False):
        yield "daily.v1", (slot_policy("daily.status", b),)
    for bi, br in itertools.product(
        _branches("weekly.interpretation"), _branches("weekly.rationale")
    ):
        yield (
            "weekly.v1",
            (
                slot_policy("weekly.interpretation", bi),
                slot_policy("weekly.rationale", br),
            ),
        )
    for b in _branches("adaptive.physique.review_instruction"):
        yield "adaptive.physique.card.v1", (slot_policy("adaptive.physique.review_instruction", b),)
    reasons = [b for b in _branches("adaptive.dual.review.N")]
    for n in range(2, max_reasons + 1):
        styled = n - 1  # lines 2..n
        if styled <= 3:
            combos = list(itertools.product(reasons, repeat=styled))
        else:
            combos = [tuple([r] * styled) for r in reasons]
            combos.append(tuple(reasons[i % len(reasons)] for i in range(styled)))
        for combo in combos:
            yield (
                "adaptive.dualcoachtest.card.v1",
                tuple(slot_policy(f"adaptive.dual.review.{i + 2}", r) for i, r in enumerate(combo)),
            )


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

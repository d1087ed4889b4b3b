"""The per-slot semantic manifest (design §7).

Rules for this module:

Rule 1: the manifest is data. A slot's legal ID sets are its `branches`; each branch is
        an *ordered* tuple of IDs, and that order is the canonical branch order: token i
        of a slot stands for the i-th ID of its branch, and tokens are numbered per
        family (`P_…` → `[[P:01]]`, `[[P:02]]`…; `A_…` → `[[A:01]]`…) in that order.
Rule 2: a slot's limits (max generated characters / style lexemes) are the manifest's,
        not the caller's. A capsule carrying any other limit cannot exist.
Rule 3: semantic IDs are public enum names (never customer data). An ID's family is its
        prefix: `P_` a predicate (a proposition the host rendered), `A_` an action.
Rule 4: `adaptive.dual.review.N` is one manifest entry that covers N = 1..9 (one slot per
        mapped reason line of the card's optional `검토 필요` block).
Rule 5: the two dual slots are *open families*. The host's decision and review-reason
        texts are private to its deployed profile (docs/host-formats-adaptive.md); kexpr
        ships the public ones as `branches` and the operator adds the rest in the shim's
        operator glossary (`gateway_shim.operator_glossary`). So a dual row also accepts
        any single-ID branch whose ID is of its open family (Rule 6). Which IDs exist on
        a host is the shim's glossary's business; the IDs travel to the worker inside the
        capsule (each slot's allowed IDs) and on to the model, and the Korean texts never
        leave the shim.
Rule 6: an open family's ID is a generic type, never a field: its family's prefix, then
        upper-case words joined by single ``_`` (`DUAL_DECISION_ID_PATTERN` /
        `DUAL_REASON_ID_PATTERN`): no digit (a phone number, a date, a count), no
        lower case, no word longer than the longest word of a shipped ID
        (`OPEN_ID_MAX_WORD`, ``INSUFFICIENT``; checked at import), and at most
        `OPEN_ID_MAX_CHARS` characters in all: what the answer budget can carry
        (`kexpr.spool.contract.budget`, docs/budget.md: a card with its decision and two
        review reasons fits whatever IDs of this length it carries, each of their
        characters counted as a token; tests/contract/test_budget.py proves it). The
        capsule refuses any other ID, so the worker never sends one to the model; the
        operator glossary refuses it first, with the rule's own reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

SURFACES: Final[tuple[str, ...]] = (
    "daily.v1",
    "weekly.v1",
    "adaptive.dualcoachtest.card.v1",
    "adaptive.physique.card.v1",
)

PREDICATE_PREFIX: Final = "P_"
ACTION_PREFIX: Final = "A_"

# Well-formed placeholder token: family P or A, two digits 01..99. `fullmatch` only.
TOKEN_PATTERN: Final = r"\[\[[PA]:(?:0[1-9]|[1-9][0-9])\]\]"
TOKEN_RE: Final = re.compile(TOKEN_PATTERN)

_MAX_TOKENS_PER_FAMILY: Final = 99
_REVIEW_SLOT_COUNT: Final = 9


@dataclass(frozen=True, slots=True)
class SlotManifest:
    """One manifest row: which slot ids it covers, their surface, branches and limits."""

    pattern: str
    slot_ids: tuple[str, ...]
    surface: str
    branches: tuple[tuple[str, ...], ...]
    max_generated_chars: int
    max_style_lexemes: int
    # Rule 5: a single-ID branch whose ID fully matches this is a branch too.
    open_id_pattern: str | None = None

    def open_branch(self, ids: Sequence[str]) -> tuple[str, ...] | None:
        """``ids`` as a one-ID branch of this row's open family, else None."""
        if (
            self.open_id_pattern is not None
            and len(ids) == 1
            and isinstance(ids[0], str)
            and len(ids[0]) <= OPEN_ID_MAX_CHARS
            and re.fullmatch(self.open_id_pattern, ids[0]) is not None
        ):
            return (ids[0],)
        return None


def _row(
    pattern: str,
    surface: str,
    branches: tuple[tuple[str, ...], ...],
    max_generated_chars: int,
    max_style_lexemes: int,
    slot_ids: tuple[str, ...] | None = None,
    open_id_pattern: str | None = None,
) -> SlotManifest:
    return SlotManifest(
        pattern=pattern,
        slot_ids=(pattern,) if slot_ids is None else slot_ids,
        surface=surface,
        branches=branches,
        max_generated_chars=max_generated_chars,
        max_style_lexemes=max_style_lexemes,
        open_id_pattern=open_id_pattern,
    )


# The public texts of the host (HOST-FORMATS §6.3, TH `ADAPTIVE`); the rest are the
# operator's (Rule 5).
# Their IDs are ours (the design fixes the prefixes only), so they are short: the model
# echoes every ID in its answer, and each token of it is time the host waits
# (docs/budget.md). Chosen by their o200k_base cost: 7, 5 and 6 tokens (the names
# of earlier releases cost 12, 9 and 11; `gateway_shim.glossary.RETIRED_SHIPPED_IDS`).
_DUAL_DECISIONS: Final = ("P_DUAL_DECISION_HOLD",)
_DUAL_REASONS: Final = (
    "P_DUAL_REASON_EDIT",
    "P_DUAL_REASON_LATEST",
)
# Rule 6: the open families' grammar.
OPEN_ID_MAX_CHARS: Final = 48
OPEN_ID_MAX_WORD: Final = 12
_WORDS: Final = rf"[A-Z]{{1,{OPEN_ID_MAX_WORD}}}(?:_[A-Z]{{1,{OPEN_ID_MAX_WORD}}})*"
DUAL_DECISION_PREFIX: Final = "P_DUAL_DECISION_"
DUAL_REASON_PREFIX: Final = "P_DUAL_REASON_"
DUAL_DECISION_ID_PATTERN: Final = DUAL_DECISION_PREFIX + _WORDS
DUAL_REASON_ID_PATTERN: Final = DUAL_REASON_PREFIX + _WORDS

MANIFEST: Final[Mapping[str, SlotManifest]] = MappingProxyType(
    {
        row.pattern: row
        for row in (
            _row(
                "daily.status",
                "daily.v1",
                (("P_DAILY_COMPLETE",), ("P_DAILY_PARTIAL",)),
                96,
                8,
            ),
            _row(
                "weekly.interpretation",
                "weekly.v1",
                (
                    ("P_WEEKLY_TREND_UNAVAILABLE", "A_WEEKLY_RECHECK_AFTER_RECORD"),
                    ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"),
                    ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"),
                    ("P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT"),
                ),
                220,
                16,
            ),
            _row(
                "weekly.rationale",
                "weekly.v1",
                (
                    ("A_WEEKLY_KEEP_BASELINE",),
                    ("A_WEEKLY_REVIEW_ADJUSTMENT",),
                    ("P_WEEKLY_RECORDS_INSUFFICIENT",),
                ),
                144,
                10,
            ),
            _row(
                "adaptive.dual.judgment",
                "adaptive.dualcoachtest.card.v1",
                tuple((i,) for i in _DUAL_DECISIONS),
                128,
                10,
                open_id_pattern=DUAL_DECISION_ID_PATTERN,
            ),
            _row(
                "adaptive.dual.review.N",
                "adaptive.dualcoachtest.card.v1",
                tuple((i,) for i in _DUAL_REASONS),
                128,
                10,
                slot_ids=tuple(
                    f"adaptive.dual.review.{n}" for n in range(1, _REVIEW_SLOT_COUNT + 1)
                ),
                open_id_pattern=DUAL_REASON_ID_PATTERN,
            ),
            _row(
                "adaptive.physique.review_instruction",
                "adaptive.physique.card.v1",
                (("A_OPERATOR_REVIEW_DECISION",),),
                128,
                10,
            ),
        )
    }
)

_BY_SLOT_ID: Final[Mapping[str, SlotManifest]] = MappingProxyType(
    {slot_id: row for row in MANIFEST.values() for slot_id in row.slot_ids}
)

# The shipped IDs (Rule 5: an open family's operator IDs are not listed here).
ALL_SEMANTIC_IDS: Final[frozenset[str]] = frozenset(
    i for row in MANIFEST.values() for branch in row.branches for i in branch
)


def manifest_for(slot_id: str) -> SlotManifest | None:
    """The manifest row covering `slot_id`, or None for a slot id the manifest lacks."""
    return _BY_SLOT_ID.get(slot_id)


def slot_ids_for_surface(surface: str) -> tuple[str, ...]:
    """Every slot id the manifest allows on `surface`, in manifest order."""
    return tuple(s for s, row in _BY_SLOT_ID.items() if row.surface == surface)


def tokens_for(ids: Sequence[str]) -> tuple[str, ...]:
    """Placeholder tokens for `ids`, numbered per family in the given order.

    >>> tokens_for(["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"])
    ('[[P:01]]', '[[A:01]]')

    Raises ValueError for an ID of neither family or more than 99 of one family.
    """
    if isinstance(ids, str):
        # A str is a Sequence[str]; iterating it would number its characters.
        raise TypeError("ids must be a sequence of semantic IDs, not a str")
    counts = {"P": 0, "A": 0}
    out: list[str] = []
    for semantic_id in ids:
        if semantic_id.startswith(PREDICATE_PREFIX):
            family = "P"
        elif semantic_id.startswith(ACTION_PREFIX):
            family = "A"
        else:
            raise ValueError("semantic ID is neither a predicate (P_) nor an action (A_)")
        counts[family] += 1
        if counts[family] > _MAX_TOKENS_PER_FAMILY:
            raise ValueError("more than 99 placeholders of one family")
        out.append(f"[[{family}:{counts[family]:02d}]]")
    return tuple(out)


def _check_manifest() -> None:
    # Rule 1 and 3 hold for the data itself, checked at import so that an edit that
    # breaks them fails loudly instead of producing unconstructible capsules.
    for row in MANIFEST.values():
        if row.surface not in SURFACES:
            raise AssertionError("manifest row on an unknown surface")
        for branch in row.branches:
            if not 1 <= len(branch) <= 3 or len(set(branch)) != len(branch):
                raise AssertionError("a branch has 1-3 distinct IDs")
            tokens_for(branch)  # every ID has a family
        if len({frozenset(b) for b in row.branches}) != len(row.branches):
            raise AssertionError("branches of one slot are distinct sets")
        if row.open_id_pattern is not None and not all(
            len(b) == 1 and row.open_branch(b) == b for b in row.branches
        ):
            raise AssertionError("an open family's shipped branches are its own IDs")
    # Rule 6: no open ID's word is longer than the longest word of a shipped ID.
    longest = max(len(w) for i in ALL_SEMANTIC_IDS for w in i.split("_"))
    if longest != OPEN_ID_MAX_WORD:
        raise AssertionError("OPEN_ID_MAX_WORD is the longest word of a shipped ID")


_check_manifest()

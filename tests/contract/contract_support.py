"""Builders shared by the contract tests: capsules, policies and response documents."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from kexpr.spool.contract import (
    CONTRACT_VERSION,
    MANIFEST,
    Capsule,
    Reason,
    SlotPolicy,
    slot_policy,
)
from kexpr.spool.contract.answers import answer_document

KEY = "0123456789abcdef" * 4
OTHER_KEY = "f" * 64

# One policy per shape the grammar cares about.
DAILY_SLOT = slot_policy("daily.status", ["P_DAILY_COMPLETE"])  # [[P:01]]
PHYSIQUE_SLOT = slot_policy("adaptive.physique.review_instruction", ["A_OPERATOR_REVIEW_DECISION"])
WEEKLY_PP = slot_policy("weekly.interpretation", ["P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"])
WEEKLY_PA = slot_policy(
    "weekly.interpretation", ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"]
)
WEEKLY_RATIONALE_A = slot_policy("weekly.rationale", ["A_WEEKLY_KEEP_BASELINE"])


def capsule(surface: str, *slots: SlotPolicy, key: str = KEY) -> Capsule:
    return Capsule(schema_version=CONTRACT_VERSION, surface=surface, artifact_key=key, slots=slots)


# The one slot the fit table leaves a choice (design §6.1, §6.2): the weekly
# interpretation whose goal range is missing (branch I2), tokens [[P:01]] [[A:01]].
# Its two compositions are `[[P:01]]. 다만 [[A:01]].` and `[[P:01]]. 다만, [[A:01]].`;
# every other slot is locked, so the capsule below is the only one that can exist.
STYLED_SLOT = WEEKLY_PA
STYLED = capsule("weekly.v1", STYLED_SLOT)
STYLED_TEXTS = ("[[P:01]]. 다만 [[A:01]].", "[[P:01]]. 다만, [[A:01]].")

# Policies of slots the fit table locks: a capsule carrying one is refused
# (`slot_unstyleable`), so they are policies only, never slots of a capsule.
LOCKED_POLICIES: dict[str, tuple[str, SlotPolicy]] = {
    "daily": ("daily.v1", DAILY_SLOT),
    "physique": ("adaptive.physique.card.v1", PHYSIQUE_SLOT),
    "weekly I3": ("weekly.v1", WEEKLY_PP),
    "weekly rationale": ("weekly.v1", WEEKLY_RATIONALE_A),
    "dual review line": (
        "adaptive.dualcoachtest.card.v1",
        slot_policy("adaptive.dual.review.2", ["P_DUAL_REASON_LATEST"]),
    ),
}

# A valid generated_ko per slot of the capsule above: the fit table's first
# composition (`kexpr.spool.contract.fit`).
GOOD: dict[str, tuple[str, ...]] = {"weekly.v1": (STYLED_TEXTS[0],)}


# The echo rules' reasons (the validation_rejected reasons that are not style).
ECHO_REASONS: frozenset[Reason] = frozenset(
    {
        Reason.SCHEMA_VERSION_MISMATCH,
        Reason.SURFACE_MISMATCH,
        Reason.ARTIFACT_KEY_MISMATCH,
        Reason.SLOT_MISMATCH,
        Reason.PREDICATE_IDS_MISMATCH,
        Reason.ACTION_IDS_MISMATCH,
        Reason.PLACEHOLDER_TOKENS_MISMATCH,
    }
)


def all_policies() -> list[SlotPolicy]:
    """Every (slot id, branch) the manifest allows, as a policy."""
    return [
        slot_policy(slot_id, branch)
        for row in MANIFEST.values()
        for slot_id in row.slot_ids
        for branch in row.branches
    ]


def response(cap: Capsule, *generated: str) -> dict[str, Any]:
    """The response document that echoes `cap` exactly, with `generated` per slot."""
    texts = generated or GOOD[cap.surface]
    return answer_document(cap, dict(zip((p.slot_id for p in cap.slots), texts, strict=True)))


def dumps(doc: object, **kwargs: Any) -> str:
    return json.dumps(doc, ensure_ascii=False, **kwargs)


def doc(cap: Capsule, *generated: str) -> str:
    return dumps(response(cap, *generated))


def mutated(cap: Capsule, change: Callable[[dict[str, Any]], object]) -> str:
    """The echoing document of `cap` after `change` edited it in place."""
    d = copy.deepcopy(response(cap))
    change(d)
    return dumps(d)

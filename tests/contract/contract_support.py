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


DAILY = capsule("daily.v1", DAILY_SLOT)
PHYSIQUE = capsule("adaptive.physique.card.v1", PHYSIQUE_SLOT)
WEEKLY = capsule("weekly.v1", WEEKLY_PP, WEEKLY_RATIONALE_A)
# A dual card with four review lines: the decision and the first line are locked
# (design §6.1: no style word fits them), so its capsule has three slots, lines 2-4.
# The contract does not ask for distinct reasons (the shim's parser does).
DUAL = capsule(
    "adaptive.dualcoachtest.card.v1",
    slot_policy("adaptive.dual.review.2", ["P_DUAL_REASON_LATEST"]),
    slot_policy("adaptive.dual.review.3", ["P_DUAL_REASON_EDIT"]),
    slot_policy("adaptive.dual.review.4", ["P_DUAL_REASON_LATEST"]),
)

# A valid generated_ko per capsule above, slot by slot: compositions the fit table
# accepts (`kexpr.spool.contract.fit`).
GOOD: dict[str, tuple[str, ...]] = {
    "daily.v1": ("그리고 [[P:01]].",),
    "adaptive.physique.card.v1": ("먼저 [[A:01]].",),
    "weekly.v1": ("먼저, [[P:01]]. 이어서, [[P:02]].", "그리고 [[A:01]]."),
    "adaptive.dualcoachtest.card.v1": ("그리고 [[P:01]].", "그리고 [[P:01]].", "그리고 [[P:01]]."),
}


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

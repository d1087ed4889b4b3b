"""Capsules and response documents for the adversarial suite.

Written against the public contract API only (``kexpr.spool.contract``), independently of
``tests/contract/contract_support.py``: the adversarial suite should not share a
helper bug with the suite it double-checks.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from kexpr.spool.contract import CONTRACT_VERSION, MANIFEST, Capsule, SlotPolicy, slot_policy
from kexpr.spool.contract.answers import answer_document

KEY: Final = "5a17c0de" * 8
OTHER_KEY: Final = "c0ffee00" * 8


def capsule(surface: str, *slots: SlotPolicy, key: str = KEY) -> Capsule:
    return Capsule(schema_version=CONTRACT_VERSION, surface=surface, artifact_key=key, slots=slots)


# The one slot the fit table leaves a choice (design §6.2): the weekly interpretation
# whose goal range is missing (branch I2), tokens [[P:01]] [[A:01]].
WEEKLY_PA: Final = slot_policy(
    "weekly.interpretation", ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"]
)
STYLED: Final = capsule("weekly.v1", WEEKLY_PA)
# The same slot under another key: the echo of the key is checked per capsule.
STYLED_OTHER_KEY: Final = capsule("weekly.v1", WEEKLY_PA, key=OTHER_KEY)

# Every other slot is locked (design §6.2: no word, or one composition only): its
# policy exists, a capsule carrying it is refused (`slot_unstyleable`).
DAILY_SLOT: Final = slot_policy("daily.status", ["P_DAILY_COMPLETE"])
PHYSIQUE_SLOT: Final = slot_policy(
    "adaptive.physique.review_instruction", ["A_OPERATOR_REVIEW_DECISION"]
)
WEEKLY_PP: Final = slot_policy("weekly.interpretation", ["P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"])
WEEKLY_RA: Final = slot_policy("weekly.rationale", ["A_WEEKLY_KEEP_BASELINE"])
WEEKLY_RP: Final = slot_policy("weekly.rationale", ["P_WEEKLY_RECORDS_INSUFFICIENT"])
WEEKLY_PT: Final = slot_policy(
    "weekly.interpretation", ["P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT"]
)
DUAL_J: Final = slot_policy("adaptive.dual.judgment", ["P_DUAL_DECISION_HOLD_FOR_REVIEW"])
DUAL_R1: Final = slot_policy("adaptive.dual.review.1", ["P_DUAL_REASON_RECORDS_INSUFFICIENT"])
DUAL_R2: Final = slot_policy("adaptive.dual.review.2", ["P_DUAL_REASON_GOAL_CONFLICT"])
DUAL_R3: Final = slot_policy("adaptive.dual.review.3", ["P_DUAL_REASON_EDIT"])
DUAL_R4: Final = slot_policy("adaptive.dual.review.4", ["P_DUAL_REASON_LATEST"])
LOCKED: Final[tuple[tuple[str, SlotPolicy], ...]] = (
    ("daily.v1", DAILY_SLOT),
    ("adaptive.physique.card.v1", PHYSIQUE_SLOT),
    ("weekly.v1", WEEKLY_PP),
    ("weekly.v1", WEEKLY_PT),
    ("weekly.v1", WEEKLY_RA),
    ("weekly.v1", WEEKLY_RP),
    ("adaptive.dualcoachtest.card.v1", DUAL_J),
    ("adaptive.dualcoachtest.card.v1", DUAL_R1),
    ("adaptive.dualcoachtest.card.v1", DUAL_R2),
    ("adaptive.dualcoachtest.card.v1", DUAL_R3),
    ("adaptive.dualcoachtest.card.v1", DUAL_R4),
)

# One valid generated_ko per slot of each capsule above (the fit table's words).
GOOD: Final[dict[Capsule, tuple[str, ...]]] = {
    STYLED: ("[[P:01]]. 다만 [[A:01]].",),
    STYLED_OTHER_KEY: ("[[P:01]]. 다만, [[A:01]].",),
}


def all_policies() -> list[SlotPolicy]:
    """Every (slot id, branch) the manifest allows."""
    return [
        slot_policy(slot_id, branch)
        for row in MANIFEST.values()
        for slot_id in row.slot_ids
        for branch in row.branches
    ]


def response(cap: Capsule, *generated: str) -> dict[str, Any]:
    """The response that echoes ``cap`` exactly, with ``generated`` per slot (default
    GOOD; fewer texts than slots are completed from GOOD)."""
    texts = list(generated) + list(GOOD[cap][len(generated) :]) if cap in GOOD else list(generated)
    return answer_document(cap, dict(zip((p.slot_id for p in cap.slots), texts, strict=True)))


def dumps(value: object, **kwargs: Any) -> str:
    kwargs.setdefault("ensure_ascii", False)
    kwargs.setdefault("separators", (",", ":"))
    return json.dumps(value, **kwargs)


def doc(cap: Capsule, *generated: str) -> str:
    return dumps(response(cap, *generated))


def at(cap: Capsule, slot: int, text: str) -> str:
    """The document of ``cap`` with only slot ``slot``'s generated_ko replaced."""
    texts = list(GOOD[cap])
    texts[slot] = text
    return doc(cap, *texts)


def edited(cap: Capsule, change: Callable[[dict[str, Any]], object]) -> str:
    d = copy.deepcopy(response(cap))
    change(d)
    return dumps(d)


def put(path: Sequence[Any], value: object) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        target: Any = d
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def drop(path: Sequence[Any]) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        target: Any = d
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return change


def capsule_dict(cap: Capsule) -> dict[str, Any]:
    """The capsule as the JSON object the worker receives."""
    value = json.loads(cap.to_json())
    assert isinstance(value, dict)
    return value

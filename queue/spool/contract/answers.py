"""The echo answer: the one builder of a model answer's document for a capsule.

An answer echoes the capsule's IDs and tokens, slot by slot in capsule order, in
the instruction's key order, and adds only ``generated_ko`` per slot (design §6).
Every place that must write such an answer — the budget's bound, the rehearsal
model, the example replayer, the fake API and the tests — builds it here, so the
shape an answer has is written once.

A capsule is either the validated `Capsule` or a mapping of its fields (the one
a request carried, whose slots are mappings, or one whose slots are `SlotPolicy`);
a test may hand a malformed one: missing fields echo as ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._models import Capsule, SlotPolicy

Generated = Mapping[str, str] | Callable[[str], str]


def _slot_fields(slot: SlotPolicy | Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
    if isinstance(slot, SlotPolicy):
        return (
            slot.slot_id,
            list(slot.allowed_predicate_ids),
            list(slot.allowed_action_ids),
            list(slot.required_placeholder_tokens),
        )
    return (
        slot.get("slot_id"),
        slot.get("allowed_predicate_ids"),
        slot.get("allowed_action_ids"),
        slot.get("required_placeholder_tokens"),
    )


def _slots(capsule: Capsule | Mapping[str, Any]) -> Sequence[SlotPolicy | Mapping[str, Any]]:
    if isinstance(capsule, Capsule):
        return capsule.slots
    slots = capsule.get("slots")
    if not isinstance(slots, list | tuple):
        return []
    return [s for s in slots if isinstance(s, Mapping | SlotPolicy)]


def answer_document(capsule: Capsule | Mapping[str, Any], generated: Generated) -> dict[str, Any]:
    """The answer to ``capsule`` with ``generated`` as each slot's ``generated_ko``:
    a mapping ``slot_id -> text`` (a slot it lacks raises ``KeyError``) or a
    function of the slot ID."""
    if isinstance(capsule, Capsule):
        head: tuple[Any, Any, Any] = (capsule.schema_version, capsule.surface, capsule.artifact_key)
    else:
        head = (capsule.get("schema_version"), capsule.get("surface"), capsule.get("artifact_key"))
    text = generated if callable(generated) else (lambda sid: generated[sid])
    return {
        "schema_version": head[0],
        "surface": head[1],
        "artifact_key": head[2],
        "slots": [
            {
                "slot_id": sid,
                "predicate_ids": predicates,
                "action_ids": actions,
                "placeholder_tokens": tokens,
                "generated_ko": text(str(sid)),
            }
            for sid, predicates, actions, tokens in map(_slot_fields, _slots(capsule))
        ],
    }


def answer_json(
    capsule: Capsule | Mapping[str, Any], generated: Generated, *, compact: bool = True
) -> str:
    """`answer_document` as the model writes it: JSON, Korean unescaped; compact
    (no spaces) unless ``compact=False`` (json's default separators)."""
    separators = (",", ":") if compact else None
    return json.dumps(
        answer_document(capsule, generated), ensure_ascii=False, separators=separators
    )


__all__ = ["Generated", "answer_document", "answer_json"]

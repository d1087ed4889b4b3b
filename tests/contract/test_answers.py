"""The one echo-answer builder (`kexpr.spool.contract.answers`)."""

from __future__ import annotations

import json

import pytest
from contract_support import GOOD, KEY, LOCKED_POLICIES, STYLED, STYLED_TEXTS

from kexpr.spool.contract import CONTRACT_VERSION, Verdict, judge
from kexpr.spool.contract.answers import answer_document, answer_json


@pytest.mark.parametrize("text", STYLED_TEXTS)
def test_an_echo_answer_with_good_style_is_accepted(text):
    texts = dict(zip((s.slot_id for s in STYLED.slots), [text], strict=True))
    assert judge(STYLED, answer_json(STYLED, texts)).verdict is Verdict.ACCEPTED


def test_the_model_and_its_wire_mapping_give_the_same_answer():
    wire = json.loads(STYLED.model_dump_json())
    assert answer_json(wire, lambda sid: sid) == answer_json(STYLED, lambda sid: sid)


# A capsule can carry only the styled slot (every other one is locked and refused),
# but the builder echoes any mapping: the locked policies, alone and together, as
# the wire mapping of their fields and as a mapping of `SlotPolicy`s.
_LOCKED_SHAPES = {
    **{name: [policy] for name, (_, policy) in LOCKED_POLICIES.items()},
    "every locked slot": [policy for _, policy in LOCKED_POLICIES.values()],
}


@pytest.mark.parametrize("slots", list(_LOCKED_SHAPES.values()), ids=list(_LOCKED_SHAPES))
def test_wire_and_policy_mappings_give_the_same_answer_for_any_shape(slots):
    head = {"schema_version": CONTRACT_VERSION, "surface": "s", "artifact_key": KEY}
    wire = {**head, "slots": [json.loads(p.model_dump_json()) for p in slots]}
    doc = json.loads(answer_json(wire, lambda sid: sid))
    assert doc == json.loads(answer_json({**head, "slots": slots}, lambda sid: sid))
    assert [s["slot_id"] for s in doc["slots"]] == [p.slot_id for p in slots]
    assert [s["generated_ko"] for s in doc["slots"]] == [p.slot_id for p in slots]


def test_keys_are_in_the_instructions_order_and_compact_by_default():
    sid = STYLED.slots[0].slot_id
    doc = json.loads(answer_json(STYLED, {sid: GOOD["weekly.v1"][0]}))
    assert list(doc) == ["schema_version", "surface", "artifact_key", "slots"]
    assert list(doc["slots"][0]) == [
        "slot_id",
        "predicate_ids",
        "action_ids",
        "placeholder_tokens",
        "generated_ko",
    ]
    assert " " not in answer_json(STYLED, {sid: ""})
    assert '", "' in answer_json(STYLED, {sid: ""}, compact=False)
    assert "다만" in answer_json(STYLED, {sid: "다만"})  # never \\u-escaped


def test_a_slot_the_mapping_lacks_raises():
    with pytest.raises(KeyError):
        answer_document(STYLED, {})


def test_a_malformed_mapping_echoes_what_is_there():
    doc = answer_document({"slots": [{"slot_id": "x"}, "not a slot"]}, {"x": ""})
    assert doc["surface"] is None
    assert doc["slots"] == [
        {
            "slot_id": "x",
            "predicate_ids": None,
            "action_ids": None,
            "placeholder_tokens": None,
            "generated_ko": "",
        }
    ]
    assert answer_document({"slots": "no"}, {})["slots"] == []

"""The one echo-answer builder (`kexpr.spool.contract.answers`)."""

from __future__ import annotations

import json

import pytest
from contract_support import DAILY, DUAL, GOOD, PHYSIQUE, WEEKLY

from kexpr.spool.contract import Verdict, judge
from kexpr.spool.contract.answers import answer_document, answer_json


@pytest.mark.parametrize("cap", [DAILY, PHYSIQUE, WEEKLY, DUAL], ids=lambda c: c.surface)
def test_an_echo_answer_with_good_style_is_accepted(cap):
    texts = dict(zip((s.slot_id for s in cap.slots), GOOD[cap.surface], strict=True))
    assert judge(cap, answer_json(cap, texts)).verdict is Verdict.ACCEPTED


@pytest.mark.parametrize("cap", [DAILY, WEEKLY, DUAL], ids=lambda c: c.surface)
def test_the_model_and_its_wire_mapping_give_the_same_answer(cap):
    wire = json.loads(cap.model_dump_json())
    assert answer_json(wire, lambda sid: sid) == answer_json(cap, lambda sid: sid)


def test_keys_are_in_the_instructions_order_and_compact_by_default():
    doc = json.loads(answer_json(DAILY, {"daily.status": "차분히, [[P:01]]."}))
    assert list(doc) == ["schema_version", "surface", "artifact_key", "slots"]
    assert list(doc["slots"][0]) == [
        "slot_id",
        "predicate_ids",
        "action_ids",
        "placeholder_tokens",
        "generated_ko",
    ]
    assert " " not in answer_json(DAILY, {"daily.status": ""})
    assert '", "' in answer_json(DAILY, {"daily.status": ""}, compact=False)
    assert "차분히" in answer_json(DAILY, {"daily.status": "차분히"})  # never \\u-escaped


def test_a_slot_the_mapping_lacks_raises():
    with pytest.raises(KeyError):
        answer_document(DAILY, {})


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

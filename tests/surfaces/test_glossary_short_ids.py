"""The shipped dual IDs are short, and every operator glossary that was
valid before keeps working unchanged.

Before the rename an operator file could use any ``P_DUAL_DECISION_*``/``P_DUAL_REASON_*``
name but the three shipped ones, and no shipped text. So:

- a file of the docs' shape is valid and maps each of its texts to the same ID;
- a file that used one of the NEW short names for a text of its own (it was free) is
  still valid, its text keeps that ID, and the shipped text takes its retired (long)
  ID in that glossary, so the card's texts still map one to one;
- the retired long names stay reserved (no file could define them before);
- a shipped text under another ID is still a duplicate."""

from __future__ import annotations

import json

import pytest

from gateway_shim.glossary import GLOSSARY, RETIRED_SHIPPED_IDS
from gateway_shim.operator_glossary import (
    SHIPPED_DUAL_GLOSSARY,
    GlossaryError,
    GlossaryProblem,
    parse_operator_glossary,
)

EDIT_TEXT = GLOSSARY["P_DUAL_REASON_EDIT"]
HOLD_TEXT = GLOSSARY["P_DUAL_DECISION_HOLD"]
# The Korean operator guide's example file, as it shows it.
GUIDE_FILE = (
    '{"version": "kexpr-dual-glossary-v1",\n'
    ' "decisions": {"P_DUAL_DECISION_KEEP_TARGET": "현재 목표 섭취량 유지"},\n'
    ' "reasons":   {"P_DUAL_REASON_TREND_SHORT": "체중 추세를 판단할 기간이 짧습니다."}}\n'
)


def _file(decisions: dict[str, str], reasons: dict[str, str]) -> bytes:
    document = {"version": "kexpr-dual-glossary-v1", "decisions": decisions, "reasons": reasons}
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def test_the_shipped_ids_are_the_short_ones() -> None:
    assert set(SHIPPED_DUAL_GLOSSARY.entries) == {
        "P_DUAL_DECISION_HOLD",
        "P_DUAL_REASON_EDIT",
        "P_DUAL_REASON_LATEST",
    }
    assert set(RETIRED_SHIPPED_IDS.values()) == set(SHIPPED_DUAL_GLOSSARY.entries)
    for old, new in RETIRED_SHIPPED_IDS.items():
        assert len(old) > len(new) and old not in GLOSSARY


def test_the_guides_file_works_unchanged() -> None:
    g = parse_operator_glossary(GUIDE_FILE.encode("utf-8"))
    assert g.decision_id("현재 목표 섭취량 유지") == "P_DUAL_DECISION_KEEP_TARGET"
    assert g.reason_id("체중 추세를 판단할 기간이 짧습니다.") == "P_DUAL_REASON_TREND_SHORT"
    assert g.decision_id(HOLD_TEXT) == "P_DUAL_DECISION_HOLD"
    assert g.reason_id(EDIT_TEXT + ".") == "P_DUAL_REASON_EDIT"


def test_a_file_that_took_a_new_short_name_keeps_it_and_the_shipped_text_its_old_id() -> None:
    data = _file(
        {"P_DUAL_DECISION_HOLD": "체중 변화 관찰 보류"},
        {"P_DUAL_REASON_EDIT": "식단 기록이 나중에 수정되었습니다."},
    )
    g = parse_operator_glossary(data)
    assert g.decision_id("체중 변화 관찰 보류") == "P_DUAL_DECISION_HOLD"
    assert g.reason_id("식단 기록이 나중에 수정되었습니다.") == "P_DUAL_REASON_EDIT"
    # The shipped texts are still there, each under the ID it had then.
    assert g.decision_id(HOLD_TEXT) == "P_DUAL_DECISION_ADHERENCE_CONFLICT_HOLD"
    assert g.reason_id(EDIT_TEXT + ".") == "P_DUAL_REASON_SAME_DAY_REVISION"
    assert g.reason_id(GLOSSARY["P_DUAL_REASON_LATEST"] + ".") == "P_DUAL_REASON_LATEST"
    assert len(g.entries) == 5 and len(set(g.entries.values())) == 5


@pytest.mark.parametrize("retired", sorted(RETIRED_SHIPPED_IDS))
def test_a_retired_shipped_name_stays_reserved(retired: str) -> None:
    family = "decisions" if retired.startswith("P_DUAL_DECISION_") else "reasons"
    text = "가나다" if family == "decisions" else "가나다."
    data = _file(
        **{
            family: {retired: text},
            **({"reasons": {}} if family == "decisions" else {"decisions": {}}),
        }
    )
    with pytest.raises(GlossaryError) as e:
        parse_operator_glossary(data)
    assert e.value.problem is GlossaryProblem.ID_DUPLICATE


def test_a_shipped_text_under_another_id_is_still_a_duplicate() -> None:
    with pytest.raises(GlossaryError) as e:
        parse_operator_glossary(_file({}, {"P_DUAL_REASON_MINE": EDIT_TEXT + "."}))
    assert e.value.problem is GlossaryProblem.TEXT_DUPLICATE
    # Also when the file took the shipped text's new name for it.
    with pytest.raises(GlossaryError) as e:
        parse_operator_glossary(_file({"P_DUAL_DECISION_HOLD": HOLD_TEXT}, {}))
    assert e.value.problem is GlossaryProblem.TEXT_DUPLICATE

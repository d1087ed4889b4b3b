"""``adaptive.dualcoachtest.card.v1``: one golden table drives format, parse,
render and fallback of the card text; the payload envelope's eligibility rules
are in ``test_surface_card.py``.

Bodies are literals, not computed: a change to the format must show up as a
diff here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from surface_support import (
    LINES,
    assert_grammar_accepts,
    assert_layout_identical,
    assert_locked_identical,
    binding,
    composition_for_every_slot,
    payload,
)

from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces import (
    TELEGRAM_MAX_UTF16,
    Ineligible,
    IneligibleReason,
    Locked,
    RenderError,
    RenderReason,
    SlotRef,
    utf16_len,
)
from gateway_shim.surfaces.card import ENVELOPE_SEPARATOR_LINE
from gateway_shim.surfaces.dual import (
    DELIVERY_LINE,
    DETAILS_HEADING,
    JUDGMENT_LABEL,
    JUDGMENT_SLOT,
    MAX_REVIEW_REASONS,
    RECOMMENDATIONS_HEADING,
    REVIEW_HEADING,
    SURFACE,
    TITLE_PREFIX,
    DualDecision,
    DualFacts,
    DualReason,
    format_dual_card,
    parse_dual_card,
    review_slot_id,
)

# name, format_dual_card inputs, composition, canonical text, selected, fallback
GOLDEN: list[dict[str, Any]] = [
    {
        "name": "two_reasons_details_note",
        "title": "김민지 님",
        "customer": "김민지",
        "date": "11월 30일",
        "facts": ("최근 7일 평균 체중 72.4kg", "평균 섭취 2,150kcal"),
        "goal": "린매스업 (주당 +0.25kg)",
        "decision": DualDecision.ADJUST_PLAN,
        "recommendations": ("하루 탄수화물 20g 줄이기", "단백질 150g 유지"),
        "note": "주말 외식 전 알림",
        "reasons": (DualReason.RECORDS_INSUFFICIENT, DualReason.INTAKE_BELOW_PLAN),
        "details": ("체중 변화 주당 +0.1kg", "계획 섭취 2,300kcal"),
        "generated": {
            "adaptive.dual.judgment": "우선, [[P:01]].",
            "adaptive.dual.review.1": "먼저 [[P:01]].",
            "adaptive.dual.review.2": "그리고 [[P:01]].",
        },
        "canonical": (
            "[듀얼코치] 적응형 영양 제안 · 김민지 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 김민지\n"
            "기준일: 11월 30일\n"
            "- 최근 7일 평균 체중 72.4kg\n"
            "- 평균 섭취 2,150kcal\n"
            "목표: 린매스업 (주당 +0.25kg)\n"
            "현재 판단: 현재 계획을 조정하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 하루 탄수화물 20g 줄이기\n"
            "- 단백질 150g 유지\n"
            "메모: 주말 외식 전 알림\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 판단에 필요한 기간의 기록이 부족합니다.\n"
            "- 섭취량이 계획보다 적습니다.\n"
            "\n"
            "상세 근거\n"
            "\n"
            "- 체중 변화 주당 +0.1kg\n"
            "- 계획 섭취 2,300kcal\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "selected": (
            "[듀얼코치] 적응형 영양 제안 · 김민지 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 김민지\n"
            "기준일: 11월 30일\n"
            "- 최근 7일 평균 체중 72.4kg\n"
            "- 평균 섭취 2,150kcal\n"
            "목표: 린매스업 (주당 +0.25kg)\n"
            "현재 판단: 우선, 현재 계획을 조정하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 하루 탄수화물 20g 줄이기\n"
            "- 단백질 150g 유지\n"
            "메모: 주말 외식 전 알림\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 먼저 판단에 필요한 기간의 기록이 부족합니다.\n"
            "- 그리고 섭취량이 계획보다 적습니다.\n"
            "\n"
            "상세 근거\n"
            "\n"
            "- 체중 변화 주당 +0.1kg\n"
            "- 계획 섭취 2,300kcal\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "fallback": (
            "[듀얼코치] 적응형 영양 제안 · 김민지 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 김민지\n"
            "기준일: 11월 30일\n"
            "- 최근 7일 평균 체중 72.4kg\n"
            "- 평균 섭취 2,150kcal\n"
            "목표: 린매스업 (주당 +0.25kg)\n"
            "현재 판단: 현재 계획을 조정하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 하루 탄수화물 20g 줄이기\n"
            "- 단백질 150g 유지\n"
            "메모: 주말 외식 전 알림\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 판단에 필요한 기간의 기록이 부족합니다.\n"
            "- 섭취량이 계획보다 적습니다.\n"
            "\n"
            "상세 근거\n"
            "\n"
            "- 체중 변화 주당 +0.1kg\n"
            "- 계획 섭취 2,300kcal\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
    },
    {
        "name": "bare_title_no_optional_blocks",
        "title": "",
        "customer": "박지훈",
        "date": "3월 7일",
        "facts": (),
        "goal": "체지방 감량",
        "decision": DualDecision.KEEP_PLAN,
        "recommendations": ("현재 식단 유지",),
        "note": None,
        "reasons": (),
        "details": (),
        "generated": {
            "adaptive.dual.judgment": "지금 그대로, [[P:01]].",
        },
        "canonical": (
            "[듀얼코치] 적응형 영양 제안\n"
            "━━━━━━━━━━━━\n"
            "고객: 박지훈\n"
            "기준일: 3월 7일\n"
            "목표: 체지방 감량\n"
            "현재 판단: 현재 계획을 그대로 유지하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 현재 식단 유지\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "selected": (
            "[듀얼코치] 적응형 영양 제안\n"
            "━━━━━━━━━━━━\n"
            "고객: 박지훈\n"
            "기준일: 3월 7일\n"
            "목표: 체지방 감량\n"
            "현재 판단: 지금 그대로, 현재 계획을 그대로 유지하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 현재 식단 유지\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "fallback": (
            "[듀얼코치] 적응형 영양 제안\n"
            "━━━━━━━━━━━━\n"
            "고객: 박지훈\n"
            "기준일: 3월 7일\n"
            "목표: 체지방 감량\n"
            "현재 판단: 현재 계획을 그대로 유지하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 현재 식단 유지\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
    },
    {
        "name": "one_reason_emoji_latin",
        "title": "Jisoo 🏃 (D+12)",
        "customer": "Jisoo Lee",
        "date": "2025-11-30 🗓️",
        "facts": ("Weight 58.2 kg (−0.4)", "Protein 95 g 🥚"),
        "goal": "Cut 💪 −0.5 kg/wk",
        "decision": DualDecision.HOLD_FOR_REVIEW,
        "recommendations": ("Log dinner 🍽️", "- 10,000 steps 🚶"),
        "note": None,
        "reasons": (DualReason.WEIGHT_TREND_UNCLEAR,),
        "details": (),
        "generated": {
            "adaptive.dual.judgment": "잠시 [[P:01]].",
            "adaptive.dual.review.1": "특히, [[P:01]].",
        },
        "canonical": (
            "[듀얼코치] 적응형 영양 제안 · Jisoo 🏃 (D+12)\n"
            "━━━━━━━━━━━━\n"
            "고객: Jisoo Lee\n"
            "기준일: 2025-11-30 🗓️\n"
            "- Weight 58.2 kg (−0.4)\n"
            "- Protein 95 g 🥚\n"
            "목표: Cut 💪 −0.5 kg/wk\n"
            "현재 판단: 운영자 검토가 끝날 때까지 계획 판단을 보류합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- Log dinner 🍽️\n"
            "- - 10,000 steps 🚶\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 체중 변화 추세가 뚜렷하지 않습니다.\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "selected": (
            "[듀얼코치] 적응형 영양 제안 · Jisoo 🏃 (D+12)\n"
            "━━━━━━━━━━━━\n"
            "고객: Jisoo Lee\n"
            "기준일: 2025-11-30 🗓️\n"
            "- Weight 58.2 kg (−0.4)\n"
            "- Protein 95 g 🥚\n"
            "목표: Cut 💪 −0.5 kg/wk\n"
            "현재 판단: 잠시 운영자 검토가 끝날 때까지 계획 판단을 보류합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- Log dinner 🍽️\n"
            "- - 10,000 steps 🚶\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 특히, 체중 변화 추세가 뚜렷하지 않습니다.\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "fallback": (
            "[듀얼코치] 적응형 영양 제안 · Jisoo 🏃 (D+12)\n"
            "━━━━━━━━━━━━\n"
            "고객: Jisoo Lee\n"
            "기준일: 2025-11-30 🗓️\n"
            "- Weight 58.2 kg (−0.4)\n"
            "- Protein 95 g 🥚\n"
            "목표: Cut 💪 −0.5 kg/wk\n"
            "현재 판단: 운영자 검토가 끝날 때까지 계획 판단을 보류합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- Log dinner 🍽️\n"
            "- - 10,000 steps 🚶\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 체중 변화 추세가 뚜렷하지 않습니다.\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
    },
    {
        "name": "details_without_review",
        "title": "최유나 님",
        "customer": "최유나",
        "date": "5월 12일",
        "facts": ("평균 체중 64.0kg",),
        "goal": "유지",
        "decision": DualDecision.KEEP_PLAN,
        "recommendations": ("주 3회 근력 운동",),
        "note": "수면 기록 확인",
        "reasons": (),
        "details": ("체중 변화 주당 0.0kg",),
        "generated": {
            "adaptive.dual.judgment": "차분히, [[P:01]].",
        },
        "canonical": (
            "[듀얼코치] 적응형 영양 제안 · 최유나 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 최유나\n"
            "기준일: 5월 12일\n"
            "- 평균 체중 64.0kg\n"
            "목표: 유지\n"
            "현재 판단: 현재 계획을 그대로 유지하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 주 3회 근력 운동\n"
            "메모: 수면 기록 확인\n"
            "\n"
            "상세 근거\n"
            "\n"
            "- 체중 변화 주당 0.0kg\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "selected": (
            "[듀얼코치] 적응형 영양 제안 · 최유나 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 최유나\n"
            "기준일: 5월 12일\n"
            "- 평균 체중 64.0kg\n"
            "목표: 유지\n"
            "현재 판단: 차분히, 현재 계획을 그대로 유지하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 주 3회 근력 운동\n"
            "메모: 수면 기록 확인\n"
            "\n"
            "상세 근거\n"
            "\n"
            "- 체중 변화 주당 0.0kg\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "fallback": (
            "[듀얼코치] 적응형 영양 제안 · 최유나 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 최유나\n"
            "기준일: 5월 12일\n"
            "- 평균 체중 64.0kg\n"
            "목표: 유지\n"
            "현재 판단: 현재 계획을 그대로 유지하는 안을 제안합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 주 3회 근력 운동\n"
            "메모: 수면 기록 확인\n"
            "\n"
            "상세 근거\n"
            "\n"
            "- 체중 변화 주당 0.0kg\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
    },
    {
        "name": "five_reasons",
        "title": "오민수 님",
        "customer": "오민수",
        "date": "6월 1일",
        "facts": ("평균 섭취 3,100kcal",),
        "goal": "린매스업",
        "decision": DualDecision.HOLD_FOR_REVIEW,
        "recommendations": ("운영자 검토 후 안내",),
        "note": None,
        "reasons": (
            DualReason.GOAL_CONFLICT,
            DualReason.INTAKE_ABOVE_PLAN,
            DualReason.WEIGHT_TREND_UNCLEAR,
            DualReason.RECORDS_INSUFFICIENT,
            DualReason.INTAKE_BELOW_PLAN,
        ),
        "details": (),
        "generated": {
            "adaptive.dual.judgment": "우선 [[P:01]].",
            "adaptive.dual.review.1": "먼저, [[P:01]].",
            "adaptive.dual.review.2": "또 [[P:01]].",
            "adaptive.dual.review.3": "그리고 [[P:01]].",
            "adaptive.dual.review.4": "다시 [[P:01]].",
            "adaptive.dual.review.5": "이제 [[P:01]].",
        },
        "canonical": (
            "[듀얼코치] 적응형 영양 제안 · 오민수 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 오민수\n"
            "기준일: 6월 1일\n"
            "- 평균 섭취 3,100kcal\n"
            "목표: 린매스업\n"
            "현재 판단: 운영자 검토가 끝날 때까지 계획 판단을 보류합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 운영자 검토 후 안내\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 설정된 목표와 현재 계획이 서로 맞지 않습니다.\n"
            "- 섭취량이 계획보다 많습니다.\n"
            "- 체중 변화 추세가 뚜렷하지 않습니다.\n"
            "- 판단에 필요한 기간의 기록이 부족합니다.\n"
            "- 섭취량이 계획보다 적습니다.\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "selected": (
            "[듀얼코치] 적응형 영양 제안 · 오민수 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 오민수\n"
            "기준일: 6월 1일\n"
            "- 평균 섭취 3,100kcal\n"
            "목표: 린매스업\n"
            "현재 판단: 우선 운영자 검토가 끝날 때까지 계획 판단을 보류합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 운영자 검토 후 안내\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 먼저, 설정된 목표와 현재 계획이 서로 맞지 않습니다.\n"
            "- 또 섭취량이 계획보다 많습니다.\n"
            "- 그리고 체중 변화 추세가 뚜렷하지 않습니다.\n"
            "- 다시 판단에 필요한 기간의 기록이 부족합니다.\n"
            "- 이제 섭취량이 계획보다 적습니다.\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
        "fallback": (
            "[듀얼코치] 적응형 영양 제안 · 오민수 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 오민수\n"
            "기준일: 6월 1일\n"
            "- 평균 섭취 3,100kcal\n"
            "목표: 린매스업\n"
            "현재 판단: 운영자 검토가 끝날 때까지 계획 판단을 보류합니다.\n"
            "\n"
            "권장안\n"
            "\n"
            "- 운영자 검토 후 안내\n"
            "\n"
            "검토 필요\n"
            "\n"
            "- 설정된 목표와 현재 계획이 서로 맞지 않습니다.\n"
            "- 섭취량이 계획보다 많습니다.\n"
            "- 체중 변화 추세가 뚜렷하지 않습니다.\n"
            "- 판단에 필요한 기간의 기록이 부족합니다.\n"
            "- 섭취량이 계획보다 적습니다.\n"
            "\n"
            "고객에게는 아직 전달되지 않았습니다."
        ),
    },
]

GOLDEN_IDS = [row["name"] for row in GOLDEN]
_FORMAT_KEYS = (
    "title",
    "customer",
    "date",
    "facts",
    "goal",
    "decision",
    "recommendations",
    "note",
    "reasons",
    "details",
)


def _facts(row: Mapping[str, Any]) -> DualFacts:
    return DualFacts(decision=row["decision"], reasons=row["reasons"])


def _format(row: Mapping[str, Any]) -> str:
    return format_dual_card(**{k: row[k] for k in _FORMAT_KEYS})


def _parse(text: str, facts: DualFacts) -> Any:
    return parse_dual_card(payload(SURFACE, text), binding(), facts)


def test_golden_rows_cover_every_enum_member() -> None:
    assert {row["decision"] for row in GOLDEN} == set(DualDecision)
    assert {r for row in GOLDEN for r in row["reasons"]} == set(DualReason)


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_format(row: dict[str, Any]) -> None:
    assert _format(row) == row["canonical"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_parse_round_trip(row: dict[str, Any]) -> None:
    surface = _parse(_format(row), _facts(row))
    assert surface.surface == SURFACE == "adaptive.dualcoachtest.card.v1"
    assert surface.body == row["canonical"]
    assert surface.canonical().body == row["canonical"] == row["fallback"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_slots_are_the_judgment_and_each_review_line(row: dict[str, Any]) -> None:
    surface = _parse(row["canonical"], _facts(row))
    n = len(row["reasons"])
    assert [s.slot_id for s in surface.slots] == [JUDGMENT_SLOT] + [
        review_slot_id(i) for i in range(1, n + 1)
    ]
    assert [s.slot_id for s in surface.slots] == list(row["generated"])
    # Locked, slot, then for each review line: locked bullet, slot; then locked.
    expected = [Locked, SlotRef] + [Locked, SlotRef] * n + [Locked]
    assert [type(seg) for seg in surface.segments] == expected
    ids = [row["decision"].value] + [r.value for r in row["reasons"]]
    for slot, semantic_id in zip(surface.slots, ids, strict=True):
        assert [(p.token, p.semantic_id) for p in slot.placeholders] == [("[[P:01]]", semantic_id)]
        assert slot.canonical_text == GLOSSARY[semantic_id] + "."
        policy = slot.policy()
        assert policy.allowed_predicate_ids == (semantic_id,) and policy.allowed_action_ids == ()
        assert (policy.max_generated_chars, policy.max_style_lexemes) == (128, 10)
    # The judgment slot is the text after the locked label; each review slot
    # is the text after its locked bullet.
    assert (
        f"\n{JUDGMENT_LABEL}{surface.slots[0].canonical_text}\n\n{RECOMMENDATIONS_HEADING}\n\n"
        in row["canonical"]
    )
    for slot in surface.slots[1:]:
        assert f"\n- {slot.canonical_text}" in row["canonical"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_render_selected(row: dict[str, Any]) -> None:
    surface = _parse(row["canonical"], _facts(row))
    selected = surface.render(row["generated"])
    assert selected.body == row["selected"]
    assert selected.body != row["canonical"]
    assert_layout_identical(surface, selected.body)
    assert selected.body.count(JUDGMENT_LABEL) == 1
    assert selected.body.endswith("\n\n" + DELIVERY_LINE)


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_fallback_is_canonical(row: dict[str, Any]) -> None:
    surface = _parse(row["canonical"], _facts(row))
    # One bad slot (the last one) rejects the whole card.
    last = surface.slots[-1].slot_id
    with pytest.raises(RenderError) as info:
        surface.render({**row["generated"], last: "확인 결과, [[P:01]]."})
    assert info.value.reason is RenderReason.COMPOSITION_REJECTED
    with pytest.raises(RenderError) as info:
        surface.render(
            {**row["generated"], review_slot_id(len(row["reasons"]) + 1): "우선 [[P:01]]."}
        )
    assert info.value.reason is RenderReason.UNKNOWN_SLOT
    assert surface.canonical().body == row["fallback"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_locked_spans_identical(row: dict[str, Any]) -> None:
    surface = _parse(row["canonical"], _facts(row))
    canonical = surface.canonical()
    selected = surface.render(row["generated"])
    assert_locked_identical(canonical, selected)
    head, *middle, tail = canonical.locked_texts()
    assert head.startswith(TITLE_PREFIX) and head.endswith("\n" + JUDGMENT_LABEL)
    assert f"\n{ENVELOPE_SEPARATOR_LINE}\n" in head
    assert tail.endswith("\n\n" + DELIVERY_LINE)
    if row["reasons"]:
        assert middle[0].startswith(f"\n\n{RECOMMENDATIONS_HEADING}\n\n")
        assert middle[0].endswith(f"\n\n{REVIEW_HEADING}\n\n- ")
        assert middle[1:] == ["\n- "] * (len(row["reasons"]) - 1)
    assert (f"\n\n{DETAILS_HEADING}\n\n" in tail) == bool(row["details"])


def test_utf16_offsets_are_code_units_not_code_points() -> None:
    row = GOLDEN[2]  # emoji in the title, date, facts, goal and recommendations
    surface = _parse(row["canonical"], _facts(row))
    canonical = surface.canonical()
    head, middle, tail = canonical.locked_texts()
    assert [c for c in head if ord(c) > 0xFFFF] == ["🏃", "🗓", "🥚", "💪"]
    assert canonical.locked_spans_utf16[0] == (0, len(head) + 4)
    judgment = len(surface.slots[0].canonical_text)
    assert canonical.locked_spans_utf16[1] == (
        len(head) + 4 + judgment,
        len(head) + 4 + judgment + utf16_len(middle),
    )
    selected = surface.render(row["generated"])
    # "잠시 " (3 units) before the judgment, "특히, " (4) before the reason.
    assert selected.locked_spans_utf16[0] == canonical.locked_spans_utf16[0]
    assert selected.locked_spans_utf16[1][0] - canonical.locked_spans_utf16[1][0] == 3
    assert selected.locked_spans_utf16[2][0] - canonical.locked_spans_utf16[2][0] == 7
    assert (
        utf16_len(selected.body)
        == utf16_len(canonical.body) + 7
        == selected.locked_spans_utf16[2][1]
    )
    assert [c for c in tail if ord(c) > 0xFFFF] == []


def test_telegram_limit_boundary_counts_utf16_units() -> None:
    row = GOLDEN[0]
    base = _format({**row, "title": ""})
    room = TELEGRAM_MAX_UTF16 - utf16_len(base) - len(" · ")
    title = "🏋" * (room // 2) + "가" * (room % 2)
    exact = _format({**row, "title": title})
    assert utf16_len(exact) == TELEGRAM_MAX_UTF16
    surface = _parse(exact, _facts(row))
    assert surface.canonical().body == exact
    with pytest.raises(Ineligible) as info:
        _parse(_format({**row, "title": title + "가"}), _facts(row))
    assert info.value.reason is IneligibleReason.TOO_LONG_UTF16
    with pytest.raises(RenderError) as render_info:
        surface.render(row["generated"])
    assert render_info.value.reason is RenderReason.TOO_LONG_UTF16


# --- ineligible card text -------------------------------------------------------------

BASE: str = GOLDEN[0]["canonical"]
FACTS = DualFacts(
    decision=DualDecision.ADJUST_PLAN,
    reasons=(DualReason.RECORDS_INSUFFICIENT, DualReason.INTAKE_BELOW_PLAN),
)
ADJUST = "현재 계획을 조정하는 안을 제안합니다."
REASON_1 = "판단에 필요한 기간의 기록이 부족합니다."
REASON_2 = "섭취량이 계획보다 적습니다."
REVIEW_BLOCK = f"\n\n{REVIEW_HEADING}\n\n- {REASON_1}\n- {REASON_2}"
DETAILS_BLOCK = f"\n\n{DETAILS_HEADING}\n\n- 체중 변화 주당 +0.1kg\n- 계획 섭취 2,300kcal"


def _with(base: str, old: str, new: str) -> str:
    assert base.count(old) == 1, old
    return base.replace(old, new)


def _reasons(*reasons: DualReason, decision: DualDecision = DualDecision.ADJUST_PLAN) -> DualFacts:
    return DualFacts(decision=decision, reasons=reasons)


R = DualReason
# fmt: off
INELIGIBLE: list[tuple[str, str, DualFacts, IneligibleReason]] = [
    ("crlf", BASE.replace("\n", "\r\n"), FACTS, IneligibleReason.CARRIAGE_RETURN),
    ("trailing_newline", BASE + "\n", FACTS, IneligibleReason.TRAILING_NEWLINE),
    ("lone_surrogate", _with(BASE, "김민지 님", "김민지 \udc00님"), FACTS, IneligibleReason.INVALID_UNICODE),
    ("nel_in_fact", _with(BASE, "72.4kg", "72.4\x85kg"), FACTS, IneligibleReason.CONTROL_CHARACTER),
    ("empty_text", "", FACTS, IneligibleReason.BLANK_LINE_MISMATCH),
    ("extra_blank_line", _with(BASE, "\n\n권장안", "\n\n\n권장안"), FACTS, IneligibleReason.BLANK_LINE_MISMATCH),
    # Envelope: title prefix and separator.
    ("title_prefix_altered", _with(BASE, TITLE_PREFIX, "[듀얼 코치] 적응형 영양 제안"), FACTS, IneligibleReason.TITLE_INVALID),
    ("title_prefix_missing", _with(BASE, TITLE_PREFIX + " · ", ""), FACTS, IneligibleReason.TITLE_INVALID),
    ("separator_altered", _with(BASE, ENVELOPE_SEPARATOR_LINE, "━━━━━━━━━━━"), FACTS, IneligibleReason.ENVELOPE_SEPARATOR_MISSING),
    ("separator_missing", _with(BASE, ENVELOPE_SEPARATOR_LINE + "\n", ""), FACTS, IneligibleReason.ENVELOPE_SEPARATOR_MISSING),
    # Head: customer, date, facts, goal; the one judgment line.
    ("judgment_label_altered", _with(BASE, JUDGMENT_LABEL, "현재 판단 : "), FACTS, IneligibleReason.JUDGMENT_LINE_MISSING),
    ("judgment_not_last_head_line", _with(BASE, "목표: 린매스업 (주당 +0.25kg)\n현재 판단: " + ADJUST, "현재 판단: " + ADJUST + "\n목표: 린매스업 (주당 +0.25kg)"), FACTS, IneligibleReason.JUDGMENT_LINE_MISSING),
    ("second_judgment_line", _with(BASE, "목표: 린매스업", "현재 판단: " + ADJUST + "\n목표: 린매스업"), FACTS, IneligibleReason.FACT_LABEL_UNKNOWN),
    ("head_line_without_label", _with(BASE, "고객: 김민지", "김민지"), FACTS, IneligibleReason.FACT_LINE_MALFORMED),
    ("head_label_unknown", _with(BASE, "기준일:", "날짜:"), FACTS, IneligibleReason.FACT_LABEL_UNKNOWN),
    ("head_label_duplicate", _with(BASE, "기준일: 11월 30일", "고객: 11월 30일"), FACTS, IneligibleReason.FACT_LABEL_DUPLICATE),
    ("head_goal_missing", _with(BASE, "목표: 린매스업 (주당 +0.25kg)\n", ""), FACTS, IneligibleReason.FACT_LABEL_MISSING),
    ("head_labels_reordered", _with(BASE, "고객: 김민지\n기준일: 11월 30일", "기준일: 11월 30일\n고객: 김민지"), FACTS, IneligibleReason.FACT_LABEL_ORDER),
    ("fact_after_goal", _with(BASE, "목표: 린매스업 (주당 +0.25kg)", "- 평균 체중 72.4kg\n목표: 린매스업 (주당 +0.25kg)").replace("- 평균 섭취 2,150kcal\n- 평균 체중 72.4kg\n목표: 린매스업 (주당 +0.25kg)", "- 평균 섭취 2,150kcal\n목표: 린매스업 (주당 +0.25kg)\n- 평균 체중 72.4kg"), FACTS, IneligibleReason.FACT_LABEL_ORDER),
    ("head_value_empty", _with(BASE, "고객: 김민지", "고객: "), FACTS, IneligibleReason.FACT_VALUE_EMPTY),
    ("judgment_unknown", _with(BASE, ADJUST, "식단을 바꾸세요."), FACTS, IneligibleReason.JUDGMENT_UNKNOWN),
    ("judgment_one_char", _with(BASE, ADJUST, ADJUST.replace("조정", "조절")), FACTS, IneligibleReason.JUDGMENT_UNKNOWN),
    ("judgment_without_period", _with(BASE, ADJUST, ADJUST[:-1]), FACTS, IneligibleReason.JUDGMENT_UNKNOWN),
    ("host_decision_differs", BASE, _reasons(R.RECORDS_INSUFFICIENT, R.INTAKE_BELOW_PLAN, decision=DualDecision.KEEP_PLAN), IneligibleReason.HOST_FACTS_MISMATCH),
    # Sections.
    ("recommendations_heading_altered", _with(BASE, "\n\n권장안\n\n", "\n\n권장 사항\n\n"), FACTS, IneligibleReason.SECTION_HEADING_MISMATCH),
    ("recommendations_heading_inline", _with(BASE, "\n\n권장안\n\n", "\n\n권장안\n"), FACTS, IneligibleReason.SECTION_HEADING_MISMATCH),
    ("delivery_line_altered", _with(BASE, DELIVERY_LINE, "고객에게 전달되었습니다."), FACTS, IneligibleReason.FINAL_LINE_MISSING),
    ("delivery_line_missing", _with(BASE, "\n\n" + DELIVERY_LINE, ""), FACTS, IneligibleReason.FINAL_LINE_MISSING),
    ("no_recommendations", _with(BASE, "- 하루 탄수화물 20g 줄이기\n- 단백질 150g 유지\n", ""), FACTS, IneligibleReason.NO_ACTIONS),
    ("recommendation_malformed", _with(BASE, "- 단백질 150g 유지", "* 단백질 150g 유지"), FACTS, IneligibleReason.ACTION_LINE_MALFORMED),
    ("note_before_recommendation", _with(BASE, "- 단백질 150g 유지\n메모: 주말 외식 전 알림", "메모: 주말 외식 전 알림\n- 단백질 150g 유지"), FACTS, IneligibleReason.ACTION_LINE_MALFORMED),
    ("note_empty", _with(BASE, "메모: 주말 외식 전 알림", "메모: "), FACTS, IneligibleReason.FACT_VALUE_EMPTY),
    ("review_heading_altered", _with(BASE, f"\n\n{REVIEW_HEADING}\n\n", "\n\n검토 사항\n\n"), FACTS, IneligibleReason.SECTION_HEADING_MISMATCH),
    ("details_before_review", _with(BASE, REVIEW_BLOCK + DETAILS_BLOCK, DETAILS_BLOCK + REVIEW_BLOCK), FACTS, IneligibleReason.SECTION_HEADING_MISMATCH),
    ("review_heading_without_block", _with(BASE, REVIEW_BLOCK, f"\n\n{REVIEW_HEADING}"), FACTS, IneligibleReason.SECTION_HEADING_MISMATCH),
    ("detail_malformed", _with(BASE, "- 계획 섭취 2,300kcal", "계획 섭취 2,300kcal"), FACTS, IneligibleReason.DETAIL_LINE_MALFORMED),
    # The review block: every line a known reason, equal to the host's, in order.
    ("review_line_not_bullet", _with(BASE, f"- {REASON_2}", REASON_2), FACTS, IneligibleReason.REVIEW_BLOCK_MISMATCH),
    ("review_reason_unknown", _with(BASE, f"- {REASON_2}", "- 물을 더 드세요."), FACTS, IneligibleReason.REVIEW_REASON_UNKNOWN),
    ("review_reason_one_char", _with(BASE, f"- {REASON_2}", "- " + REASON_2.replace("적습니다", "작습니다")), FACTS, IneligibleReason.REVIEW_REASON_UNKNOWN),
    ("review_reason_with_style", _with(BASE, f"- {REASON_2}", f"- 그리고 {REASON_2}"), FACTS, IneligibleReason.REVIEW_REASON_UNKNOWN),
    ("review_reason_duplicate", _with(BASE, f"- {REASON_2}", f"- {REASON_1}"), FACTS, IneligibleReason.REVIEW_REASON_DUPLICATE),
    ("review_too_many", _with(BASE, f"- {REASON_2}", "\n".join([f"- {REASON_2}"] * MAX_REVIEW_REASONS)), FACTS, IneligibleReason.REVIEW_TOO_MANY),
    ("review_reason_missing_in_body", _with(BASE, f"\n- {REASON_2}", ""), FACTS, IneligibleReason.REVIEW_REASON_MISSING),
    ("review_reason_missing_in_host", BASE, _reasons(R.RECORDS_INSUFFICIENT), IneligibleReason.REVIEW_REASON_MISSING),
    ("review_block_missing", _with(BASE, REVIEW_BLOCK, ""), FACTS, IneligibleReason.REVIEW_REASON_MISSING),
    ("review_block_unexpected", BASE, _reasons(), IneligibleReason.REVIEW_REASON_MISSING),
    ("review_reason_other", BASE, _reasons(R.RECORDS_INSUFFICIENT, R.GOAL_CONFLICT), IneligibleReason.REVIEW_REASON_MISSING),
    ("review_reasons_reordered", _with(BASE, f"- {REASON_1}\n- {REASON_2}", f"- {REASON_2}\n- {REASON_1}"), FACTS, IneligibleReason.REVIEW_REASON_ORDER),
    ("host_reasons_reordered", BASE, _reasons(R.INTAKE_BELOW_PLAN, R.RECORDS_INSUFFICIENT), IneligibleReason.REVIEW_REASON_ORDER),
    # A selected card is never canonical: a persisted card is not presented again.
    ("selected_text_fed_back", GOLDEN[0]["selected"], FACTS, IneligibleReason.JUDGMENT_UNKNOWN),
]
# fmt: on

COVERED_REASONS = {case[3] for case in INELIGIBLE} | {
    IneligibleReason.FACTS_INVALID,
    IneligibleReason.TOO_LONG_UTF16,
}


@pytest.mark.parametrize(
    ("name", "text", "facts", "reason"), INELIGIBLE, ids=[c[0] for c in INELIGIBLE]
)
def test_ineligible(name: str, text: str, facts: DualFacts, reason: IneligibleReason) -> None:
    with pytest.raises(Ineligible) as info:
        _parse(text, facts)
    assert info.value.reason is reason
    assert info.value.args == (reason.value,)  # the enum value only, never content


def test_missing_facts_are_ineligible_only_after_the_payload_is_eligible() -> None:
    with pytest.raises(Ineligible) as info:
        parse_dual_card(payload(SURFACE, BASE), binding(), None)
    assert info.value.reason is IneligibleReason.FACTS_INVALID
    # A menu payload says so, whatever facts came with it.
    with pytest.raises(Ineligible) as info:
        parse_dual_card(payload(SURFACE, BASE, status="menu"), binding(), None)
    assert info.value.reason is IneligibleReason.STATUS_NOT_CARD


def test_dual_facts_is_frozen_and_typed() -> None:
    with pytest.raises(FrozenInstanceError):
        FACTS.decision = DualDecision.KEEP_PLAN  # type: ignore[misc]
    with pytest.raises(TypeError):
        DualFacts(decision="P_DUAL_DECISION_KEEP_PLAN")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        DualFacts(decision=DualDecision.KEEP_PLAN, reasons=[R.GOAL_CONFLICT])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        DualFacts(decision=DualDecision.KEEP_PLAN, reasons=("P_DUAL_REASON_GOAL_CONFLICT",))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        DualFacts(decision=DualDecision.KEEP_PLAN, reasons=(R.GOAL_CONFLICT, R.GOAL_CONFLICT))
    assert MAX_REVIEW_REASONS == 9


BAD_FORMAT_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("newline_title", {"title": "가\n나"}),
    ("empty_customer", {"customer": ""}),
    ("tab_goal", {"goal": "가\t나"}),
    ("facts_as_str", {"facts": "가"}),
    ("no_recommendations", {"recommendations": ()}),
    ("empty_note", {"note": ""}),
    ("duplicate_reasons", {"reasons": (R.GOAL_CONFLICT, R.GOAL_CONFLICT)}),
    ("untyped_decision", {"decision": "P_DUAL_DECISION_KEEP_PLAN"}),
    ("cr_detail", {"details": ("가\r",)}),
]


@pytest.mark.parametrize(
    ("name", "changes"), BAD_FORMAT_INPUTS, ids=[c[0] for c in BAD_FORMAT_INPUTS]
)
def test_format_dual_card_rejects_what_the_grammar_cannot_carry(
    name: str, changes: dict[str, Any]
) -> None:
    with pytest.raises((ValueError, TypeError)):
        format_dual_card(**{**{k: GOLDEN[0][k] for k in _FORMAT_KEYS}, **changes})


# --- properties ----------------------------------------------------------------------

_head_lines = st.lists(LINES, max_size=3)
_reasons_strategy = st.lists(st.sampled_from(DualReason), unique=True, max_size=len(DualReason))
_optional_line = st.one_of(st.none(), LINES)


@st.composite
def _cards(draw: st.DrawFn) -> tuple[str, DualFacts]:
    decision = draw(st.sampled_from(DualDecision))
    reasons = tuple(draw(_reasons_strategy))
    text = format_dual_card(
        title=draw(st.one_of(st.just(""), LINES)),
        customer=draw(LINES),
        date=draw(LINES),
        facts=draw(_head_lines),
        goal=draw(LINES),
        decision=decision,
        recommendations=draw(st.lists(LINES, min_size=1, max_size=3)),
        note=draw(_optional_line),
        reasons=reasons,
        details=draw(st.lists(LINES, max_size=3)),
    )
    return text, DualFacts(decision=decision, reasons=reasons)


@settings(max_examples=150, deadline=None)
@given(card=_cards())
def test_property_parse_canonical_round_trip(card: tuple[str, DualFacts]) -> None:
    text, facts = card
    surface = _parse(text, facts)
    canonical = surface.canonical()
    assert canonical.body == text
    assert len(surface.slots) == 1 + len(facts.reasons)
    # Locked segments interleaved with the slots' canonical text are the text.
    pieces = iter(canonical.locked_texts())
    rebuilt = "".join(
        next(pieces) if isinstance(seg, Locked) else surface.slots[seg.index].canonical_text
        for seg in surface.segments
    )
    assert rebuilt == text


@settings(max_examples=150, deadline=None)
@given(card=_cards(), data=st.data())
def test_property_grammar_compositions_keep_every_locked_byte(
    card: tuple[str, DualFacts], data: st.DataObject
) -> None:
    text, facts = card
    surface = _parse(text, facts)
    generated = data.draw(composition_for_every_slot(surface))
    assert_grammar_accepts(surface, generated)
    selected = surface.render(generated)
    assert_locked_identical(surface.canonical(), selected)
    assert_layout_identical(surface, selected.body)

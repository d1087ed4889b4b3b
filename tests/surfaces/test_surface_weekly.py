"""``weekly.v1``: one golden table drives format, parse, render and fallback.

STYLE (h11 ``SIMPLE_CASES``): the same rows check the reference renderer, the
adapter, the selected body and the canonical fallback. Bodies are literals, not
computed: a change to the format must show up as a diff here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    composition_for_every_slot,
)

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
from gateway_shim.surfaces.weekly import (
    ACTIONS_HEADING,
    EXPLICIT_PROSE_FIELDS,
    FACT_LABELS,
    INTERPRETATION_HEADING,
    INTERPRETATION_SLOT,
    RATIONALE_HEADING,
    RATIONALE_SLOT,
    SURFACE,
    WeeklyFacts,
    WeeklyInterpretation,
    WeeklyRationale,
    format_weekly,
    parse_weekly,
)

# name, format_weekly inputs, composition, canonical, selected, fallback
GOLDEN: list[dict[str, Any]] = [
    {
        "name": "in_goal_keep_baseline",
        "title": "주간 리포트 · 11월 24일 ~ 11월 30일",
        "facts": (
            ("기간", "11월 24일 ~ 11월 30일"),
            ("평균 체중", "72.4kg"),
            ("체중 변화", "+0.3kg"),
            ("목표 범위", "주당 +0.2~0.4kg"),
            ("주간 변화율", "+0.4%"),
            ("기록률", "6/7일"),
            ("판단", "현재 계획 유지"),
        ),
        "interpretation": WeeklyInterpretation.IN_GOAL,
        "rationale": WeeklyRationale.KEEP_BASELINE,
        "actions": ("매일 아침 공복 체중 기록하기", "주 3회 하체 운동"),
        "generated": {
            "weekly.interpretation": "차분히, [[P:01]]. 이어서 [[P:02]].",
            "weekly.rationale": "우선 [[A:01]].",
        },
        "canonical": (
            "주간 리포트 · 11월 24일 ~ 11월 30일\n"
            "\n"
            "- 기간: 11월 24일 ~ 11월 30일\n"
            "- 평균 체중: 72.4kg\n"
            "- 체중 변화: +0.3kg\n"
            "- 목표 범위: 주당 +0.2~0.4kg\n"
            "- 주간 변화율: +0.4%\n"
            "- 기록률: 6/7일\n"
            "- 판단: 현재 계획 유지\n"
            "\n"
            "주간 해석\n"
            "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다. 이 흐름을 근거로 현재 계획을 그대로 이어갑니다.\n"
            "\n"
            "판단 근거\n"
            "현재 기준 섭취 계획을 그대로 유지하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- 매일 아침 공복 체중 기록하기\n"
            "- 주 3회 하체 운동"
        ),
        "selected": (
            "주간 리포트 · 11월 24일 ~ 11월 30일\n"
            "\n"
            "- 기간: 11월 24일 ~ 11월 30일\n"
            "- 평균 체중: 72.4kg\n"
            "- 체중 변화: +0.3kg\n"
            "- 목표 범위: 주당 +0.2~0.4kg\n"
            "- 주간 변화율: +0.4%\n"
            "- 기록률: 6/7일\n"
            "- 판단: 현재 계획 유지\n"
            "\n"
            "주간 해석\n"
            "차분히, 체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다. 이어서 이 흐름을 근거로 현재 계획을 그대로 이어갑니다.\n"
            "\n"
            "판단 근거\n"
            "우선 현재 기준 섭취 계획을 그대로 유지하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- 매일 아침 공복 체중 기록하기\n"
            "- 주 3회 하체 운동"
        ),
        "fallback": (
            "주간 리포트 · 11월 24일 ~ 11월 30일\n"
            "\n"
            "- 기간: 11월 24일 ~ 11월 30일\n"
            "- 평균 체중: 72.4kg\n"
            "- 체중 변화: +0.3kg\n"
            "- 목표 범위: 주당 +0.2~0.4kg\n"
            "- 주간 변화율: +0.4%\n"
            "- 기록률: 6/7일\n"
            "- 판단: 현재 계획 유지\n"
            "\n"
            "주간 해석\n"
            "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다. 이 흐름을 근거로 현재 계획을 그대로 이어갑니다.\n"
            "\n"
            "판단 근거\n"
            "현재 기준 섭취 계획을 그대로 유지하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- 매일 아침 공복 체중 기록하기\n"
            "- 주 3회 하체 운동"
        ),
    },
    {
        "name": "trend_unavailable_records_insufficient",
        "title": "주간 리포트",
        "facts": (
            ("기간", "3월 1일 ~ 3월 7일"),
            ("평균 체중", "미기록"),
            ("체중 변화", "미기록"),
            ("목표 범위", "주당 -0.5~-0.25kg"),
            ("주간 변화율", "계산 불가"),
            ("기록률", "2/7일"),
            ("판단", "판단 보류"),
        ),
        "interpretation": WeeklyInterpretation.TREND_UNAVAILABLE,
        "rationale": WeeklyRationale.RECORDS_INSUFFICIENT,
        "actions": ("매일 체중 기록하기",),
        "generated": {
            "weekly.interpretation": "[[P:01]]. 하나씩 순서대로, [[A:01]].",
            "weekly.rationale": "지금 [[P:01]].",
        },
        "canonical": (
            "주간 리포트\n"
            "\n"
            "- 기간: 3월 1일 ~ 3월 7일\n"
            "- 평균 체중: 미기록\n"
            "- 체중 변화: 미기록\n"
            "- 목표 범위: 주당 -0.5~-0.25kg\n"
            "- 주간 변화율: 계산 불가\n"
            "- 기록률: 2/7일\n"
            "- 판단: 판단 보류\n"
            "\n"
            "주간 해석\n"
            "이번 주 기록만으로는 체중 변화 추세를 판단하기 어렵습니다. 기록이 더 쌓인 뒤 체중 변화 추세를 다시 확인하세요.\n"
            "\n"
            "판단 근거\n"
            "판단에 필요한 기록이 아직 부족합니다.\n"
            "\n"
            "다음 주 할 일\n"
            "- 매일 체중 기록하기"
        ),
        "selected": (
            "주간 리포트\n"
            "\n"
            "- 기간: 3월 1일 ~ 3월 7일\n"
            "- 평균 체중: 미기록\n"
            "- 체중 변화: 미기록\n"
            "- 목표 범위: 주당 -0.5~-0.25kg\n"
            "- 주간 변화율: 계산 불가\n"
            "- 기록률: 2/7일\n"
            "- 판단: 판단 보류\n"
            "\n"
            "주간 해석\n"
            "이번 주 기록만으로는 체중 변화 추세를 판단하기 어렵습니다. 하나씩 순서대로, 기록이 더 쌓인 뒤 체중 변화 추세를 다시 확인하세요.\n"
            "\n"
            "판단 근거\n"
            "지금 판단에 필요한 기록이 아직 부족합니다.\n"
            "\n"
            "다음 주 할 일\n"
            "- 매일 체중 기록하기"
        ),
        "fallback": (
            "주간 리포트\n"
            "\n"
            "- 기간: 3월 1일 ~ 3월 7일\n"
            "- 평균 체중: 미기록\n"
            "- 체중 변화: 미기록\n"
            "- 목표 범위: 주당 -0.5~-0.25kg\n"
            "- 주간 변화율: 계산 불가\n"
            "- 기록률: 2/7일\n"
            "- 판단: 판단 보류\n"
            "\n"
            "주간 해석\n"
            "이번 주 기록만으로는 체중 변화 추세를 판단하기 어렵습니다. 기록이 더 쌓인 뒤 체중 변화 추세를 다시 확인하세요.\n"
            "\n"
            "판단 근거\n"
            "판단에 필요한 기록이 아직 부족합니다.\n"
            "\n"
            "다음 주 할 일\n"
            "- 매일 체중 기록하기"
        ),
    },
    {
        "name": "goal_missing_keep_baseline",
        "title": "이번 주 요약",
        "facts": (
            ("기간", "5월 6일 ~ 5월 12일"),
            ("평균 체중", "64.0kg"),
            ("체중 변화", "-0.1kg"),
            ("목표 범위", "미설정"),
            ("주간 변화율", "-0.2%"),
            ("기록률", "7/7일"),
            ("판단", "목표 설정 필요"),
        ),
        "interpretation": WeeklyInterpretation.GOAL_MISSING,
        "rationale": WeeklyRationale.KEEP_BASELINE,
        "actions": ("목표 체중 입력하기", "식단 사진 올리기"),
        "generated": {
            "weekly.interpretation": "먼저 [[P:01]]. 그리고 [[A:01]].",
            "weekly.rationale": "그대로, [[A:01]].",
        },
        "canonical": (
            "이번 주 요약\n"
            "\n"
            "- 기간: 5월 6일 ~ 5월 12일\n"
            "- 평균 체중: 64.0kg\n"
            "- 체중 변화: -0.1kg\n"
            "- 목표 범위: 미설정\n"
            "- 주간 변화율: -0.2%\n"
            "- 기록률: 7/7일\n"
            "- 판단: 목표 설정 필요\n"
            "\n"
            "주간 해석\n"
            "이번 주 체중 변화 추세를 확인했습니다. 목표가 정해질 때까지 계획 판단을 보류하세요.\n"
            "\n"
            "판단 근거\n"
            "현재 기준 섭취 계획을 그대로 유지하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- 목표 체중 입력하기\n"
            "- 식단 사진 올리기"
        ),
        "selected": (
            "이번 주 요약\n"
            "\n"
            "- 기간: 5월 6일 ~ 5월 12일\n"
            "- 평균 체중: 64.0kg\n"
            "- 체중 변화: -0.1kg\n"
            "- 목표 범위: 미설정\n"
            "- 주간 변화율: -0.2%\n"
            "- 기록률: 7/7일\n"
            "- 판단: 목표 설정 필요\n"
            "\n"
            "주간 해석\n"
            "먼저 이번 주 체중 변화 추세를 확인했습니다. 그리고 목표가 정해질 때까지 계획 판단을 보류하세요.\n"
            "\n"
            "판단 근거\n"
            "그대로, 현재 기준 섭취 계획을 그대로 유지하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- 목표 체중 입력하기\n"
            "- 식단 사진 올리기"
        ),
        "fallback": (
            "이번 주 요약\n"
            "\n"
            "- 기간: 5월 6일 ~ 5월 12일\n"
            "- 평균 체중: 64.0kg\n"
            "- 체중 변화: -0.1kg\n"
            "- 목표 범위: 미설정\n"
            "- 주간 변화율: -0.2%\n"
            "- 기록률: 7/7일\n"
            "- 판단: 목표 설정 필요\n"
            "\n"
            "주간 해석\n"
            "이번 주 체중 변화 추세를 확인했습니다. 목표가 정해질 때까지 계획 판단을 보류하세요.\n"
            "\n"
            "판단 근거\n"
            "현재 기준 섭취 계획을 그대로 유지하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- 목표 체중 입력하기\n"
            "- 식단 사진 올리기"
        ),
    },
    {
        "name": "out_of_goal_emoji_latin",
        "title": "📊 Week 12 report (Lean-bulk) 💪",
        "facts": (
            ("기간", "Nov 24 – Nov 30 🗓️"),
            ("평균 체중", "72.4 kg (+1.2)"),
            ("체중 변화", "+1.2kg ⚠️"),
            ("목표 범위", "+0.2~0.4 kg/wk"),
            ("주간 변화율", "+1.7% 📈"),
            ("기록률", "7/7 ✅"),
            ("판단", "Review 🔍"),
        ),
        "interpretation": WeeklyInterpretation.OUT_OF_GOAL,
        "rationale": WeeklyRationale.REVIEW_ADJUSTMENT,
        "actions": ("Log meals 🍽️ daily", "- 10,000 steps 🚶"),
        "generated": {
            "weekly.interpretation": "우선, [[P:01]]. 특히 [[A:01]].",
            "weekly.rationale": "차분히 [[A:01]].",
        },
        "canonical": (
            "📊 Week 12 report (Lean-bulk) 💪\n"
            "\n"
            "- 기간: Nov 24 – Nov 30 🗓️\n"
            "- 평균 체중: 72.4 kg (+1.2)\n"
            "- 체중 변화: +1.2kg ⚠️\n"
            "- 목표 범위: +0.2~0.4 kg/wk\n"
            "- 주간 변화율: +1.7% 📈\n"
            "- 기록률: 7/7 ✅\n"
            "- 판단: Review 🔍\n"
            "\n"
            "주간 해석\n"
            "체중 변화가 목표 범위를 벗어났습니다. 입력된 기록이 정확한지 다시 확인하세요.\n"
            "\n"
            "판단 근거\n"
            "섭취 계획을 조정할 필요가 있는지 검토하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- Log meals 🍽️ daily\n"
            "- - 10,000 steps 🚶"
        ),
        "selected": (
            "📊 Week 12 report (Lean-bulk) 💪\n"
            "\n"
            "- 기간: Nov 24 – Nov 30 🗓️\n"
            "- 평균 체중: 72.4 kg (+1.2)\n"
            "- 체중 변화: +1.2kg ⚠️\n"
            "- 목표 범위: +0.2~0.4 kg/wk\n"
            "- 주간 변화율: +1.7% 📈\n"
            "- 기록률: 7/7 ✅\n"
            "- 판단: Review 🔍\n"
            "\n"
            "주간 해석\n"
            "우선, 체중 변화가 목표 범위를 벗어났습니다. 특히 입력된 기록이 정확한지 다시 확인하세요.\n"
            "\n"
            "판단 근거\n"
            "차분히 섭취 계획을 조정할 필요가 있는지 검토하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- Log meals 🍽️ daily\n"
            "- - 10,000 steps 🚶"
        ),
        "fallback": (
            "📊 Week 12 report (Lean-bulk) 💪\n"
            "\n"
            "- 기간: Nov 24 – Nov 30 🗓️\n"
            "- 평균 체중: 72.4 kg (+1.2)\n"
            "- 체중 변화: +1.2kg ⚠️\n"
            "- 목표 범위: +0.2~0.4 kg/wk\n"
            "- 주간 변화율: +1.7% 📈\n"
            "- 기록률: 7/7 ✅\n"
            "- 판단: Review 🔍\n"
            "\n"
            "주간 해석\n"
            "체중 변화가 목표 범위를 벗어났습니다. 입력된 기록이 정확한지 다시 확인하세요.\n"
            "\n"
            "판단 근거\n"
            "섭취 계획을 조정할 필요가 있는지 검토하세요.\n"
            "\n"
            "다음 주 할 일\n"
            "- Log meals 🍽️ daily\n"
            "- - 10,000 steps 🚶"
        ),
    },
]

GOLDEN_IDS = [row["name"] for row in GOLDEN]


def _facts(row: Mapping[str, Any]) -> WeeklyFacts:
    return WeeklyFacts(interpretation=row["interpretation"], rationale=row["rationale"])


def _format(row: Mapping[str, Any]) -> str:
    return format_weekly(
        title=row["title"],
        facts=row["facts"],
        interpretation=row["interpretation"],
        rationale=row["rationale"],
        actions=row["actions"],
    )


def test_golden_rows_cover_every_branch() -> None:
    assert {row["interpretation"] for row in GOLDEN} == set(WeeklyInterpretation)
    assert {row["rationale"] for row in GOLDEN} == set(WeeklyRationale)


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_format(row: dict[str, Any]) -> None:
    assert _format(row) == row["canonical"]
    as_mapping = dict(reversed(row["facts"]))
    assert (
        format_weekly(
            title=row["title"],
            facts=as_mapping,
            interpretation=row["interpretation"],
            rationale=row["rationale"],
            actions=row["actions"],
        )
        == row["canonical"]
    )


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_parse_round_trip(row: dict[str, Any]) -> None:
    surface = parse_weekly(_format(row), _facts(row))
    assert surface.surface == SURFACE == "weekly.v1"
    assert surface.body == row["canonical"]
    assert surface.canonical().body == row["canonical"] == row["fallback"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_slots_are_the_two_typed_paragraphs(row: dict[str, Any]) -> None:
    surface = parse_weekly(row["canonical"], _facts(row))
    interpretation, rationale = surface.slots
    assert [type(seg) for seg in surface.segments] == [Locked, SlotRef, Locked, SlotRef, Locked]
    assert interpretation.slot_id == INTERPRETATION_SLOT == "weekly.interpretation"
    assert rationale.slot_id == RATIONALE_SLOT == "weekly.rationale"
    ids = row["interpretation"].value
    assert tuple(p.semantic_id for p in interpretation.placeholders) == ids
    assert tuple(p.token for p in interpretation.placeholders) == (
        ("[[P:01]]", "[[P:02]]") if ids[1].startswith("P_") else ("[[P:01]]", "[[A:01]]")
    )
    (rationale_id,) = row["rationale"].value
    assert [(p.token, p.semantic_id) for p in rationale.placeholders] == [
        ("[[" + rationale_id[0] + ":01]]", rationale_id)
    ]
    for slot, limits in ((interpretation, (220, 16)), (rationale, (144, 10))):
        policy = slot.policy()
        assert (policy.max_generated_chars, policy.max_style_lexemes) == limits
        # The slot's canonical text is the whole line under its heading.
        assert f"\n{slot.canonical_text}\n" in row["canonical"]
    assert f"{INTERPRETATION_HEADING}\n{interpretation.canonical_text}\n\n" in row["canonical"]
    assert (
        f"{RATIONALE_HEADING}\n{rationale.canonical_text}\n\n{ACTIONS_HEADING}\n"
        in row["canonical"]
    )


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_render_selected(row: dict[str, Any]) -> None:
    surface = parse_weekly(row["canonical"], _facts(row))
    selected = surface.render(row["generated"])
    assert selected.body == row["selected"]
    assert selected.body != row["canonical"]
    assert_layout_identical(surface, selected.body)


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_fallback_is_canonical(row: dict[str, Any]) -> None:
    surface = parse_weekly(row["canonical"], _facts(row))
    # One bad slot rejects the whole body (no partial selection): the rationale
    # is fine, the interpretation adds a word outside the lexicon.
    bad = dict(
        row["generated"],
        **{
            INTERPRETATION_SLOT: "오늘은 [[P:01]]. "
            + row["generated"][INTERPRETATION_SLOT].split(". ", 1)[1]
        },
    )
    with pytest.raises(RenderError) as info:
        surface.render(bad)
    assert info.value.reason is RenderReason.COMPOSITION_REJECTED
    with pytest.raises(RenderError) as info:
        surface.render({INTERPRETATION_SLOT: row["generated"][INTERPRETATION_SLOT]})
    assert info.value.reason is RenderReason.MISSING_SLOT
    assert surface.canonical().body == row["fallback"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_locked_spans_identical(row: dict[str, Any]) -> None:
    surface = parse_weekly(row["canonical"], _facts(row))
    canonical = surface.canonical()
    selected = surface.render(row["generated"])
    assert len(canonical.locked_spans_utf16) == 3
    assert_locked_identical(canonical, selected)
    head, middle, tail = canonical.locked_texts()
    assert head.startswith(row["title"] + "\n\n- 기간: ")
    assert head.endswith("\n\n" + INTERPRETATION_HEADING + "\n")
    assert middle == "\n\n" + RATIONALE_HEADING + "\n"
    assert tail.startswith("\n\n" + ACTIONS_HEADING + "\n- ")


def test_utf16_offsets_are_code_units_not_code_points() -> None:
    row = GOLDEN[3]  # emoji in the title, values and actions
    surface = parse_weekly(row["canonical"], _facts(row))
    canonical = surface.canonical()
    head, _, tail = canonical.locked_texts()
    # Five astral characters (two UTF-16 units each); ⚠ ✅ and U+FE0F are BMP.
    astral = [c for c in head if ord(c) > 0xFFFF]
    assert astral == ["📊", "💪", "🗓", "📈", "🔍"]
    assert canonical.locked_spans_utf16[0] == (0, len(head) + len(astral))
    selected = surface.render(row["generated"])
    # "우선, " (4 units) before the interpretation, "특히 " (3) inside it,
    # "차분히 " (4) before the rationale: the tail moves by 11 units.
    assert selected.locked_spans_utf16[0] == canonical.locked_spans_utf16[0]
    assert selected.locked_spans_utf16[1][0] - canonical.locked_spans_utf16[1][0] == 7
    assert selected.locked_spans_utf16[2][0] - canonical.locked_spans_utf16[2][0] == 11
    assert utf16_len(selected.body) == utf16_len(canonical.body) + 11
    assert selected.locked_spans_utf16[2][1] - selected.locked_spans_utf16[2][0] == utf16_len(tail)


def test_telegram_limit_boundary_counts_utf16_units() -> None:
    base_row = GOLDEN[0]
    base = base_row["canonical"].replace(base_row["title"], "", 1)
    room = TELEGRAM_MAX_UTF16 - utf16_len(base)
    title = "🏋" * (room // 2) + "가" * (room % 2)
    exact = title + base
    assert utf16_len(exact) == TELEGRAM_MAX_UTF16
    surface = parse_weekly(exact, _facts(base_row))
    assert surface.canonical().body == exact
    with pytest.raises(Ineligible) as info:
        parse_weekly("🏋" + exact, _facts(base_row))
    assert info.value.reason is IneligibleReason.TOO_LONG_UTF16
    with pytest.raises(RenderError) as render_info:
        surface.render(base_row["generated"])
    assert render_info.value.reason is RenderReason.TOO_LONG_UTF16


# --- ineligible ---------------------------------------------------------------------

BASE: str = GOLDEN[0]["canonical"]
TYPED = WeeklyFacts(
    interpretation=WeeklyInterpretation.IN_GOAL, rationale=WeeklyRationale.KEEP_BASELINE
)
IN_GOAL_TEXT = (
    "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다. "
    "이 흐름을 근거로 현재 계획을 그대로 이어갑니다."
)
KEEP_TEXT = "현재 기준 섭취 계획을 그대로 유지하세요."


def _with(base: str, old: str, new: str) -> str:
    assert base.count(old) == 1, old
    return base.replace(old, new)


def _typed(**changes: Any) -> WeeklyFacts:
    fields = {"interpretation": TYPED.interpretation, "rationale": TYPED.rationale, **changes}
    return WeeklyFacts(**fields)


# name, body, host facts, reason
# fmt: off
INELIGIBLE: list[tuple[str, str, WeeklyFacts, IneligibleReason]] = [
    # Source provenance: the typed facts alone decide, before any grammar.
    *[(f"explicit_{field}", BASE, _typed(prose_fields=frozenset({field})), IneligibleReason.EXPLICIT_SOURCE_FIELD) for field in sorted(EXPLICIT_PROSE_FIELDS)],
    ("explicit_and_untyped", BASE, _typed(prose_fields=frozenset({"coach_note", "summary_text"})), IneligibleReason.EXPLICIT_SOURCE_FIELD),
    ("untyped_field", BASE, _typed(prose_fields=frozenset({"coach_note"})), IneligibleReason.UNTYPED_SOURCE_FIELD),
    ("unsupported_interpretation_branch", BASE, _typed(interpretation=None), IneligibleReason.UNSUPPORTED_BRANCH),
    ("unsupported_rationale_branch", BASE, _typed(rationale=None), IneligibleReason.UNSUPPORTED_BRANCH),
    # Whole-body limits.
    ("lone_surrogate", _with(BASE, "주간 리포트", "주간 \ud83d 리포트"), TYPED, IneligibleReason.INVALID_UNICODE),
    ("crlf", BASE.replace("\n", "\r\n"), TYPED, IneligibleReason.CARRIAGE_RETURN),
    ("trailing_newline", BASE + "\n", TYPED, IneligibleReason.TRAILING_NEWLINE),
    ("tab_in_value", _with(BASE, "72.4kg", "72.4\tkg"), TYPED, IneligibleReason.CONTROL_CHARACTER),
    ("line_separator_in_action", _with(BASE, "주 3회", "주\u20283회"), TYPED, IneligibleReason.CONTROL_CHARACTER),
    # Layout.
    ("leading_blank_line", "\n" + BASE, TYPED, IneligibleReason.BLANK_LINE_MISMATCH),
    ("extra_blank_line", _with(BASE, "\n\n판단 근거", "\n\n\n판단 근거"), TYPED, IneligibleReason.BLANK_LINE_MISMATCH),
    ("missing_blank_line", _with(BASE, "\n\n판단 근거", "\n판단 근거"), TYPED, IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("extra_paragraph", BASE + "\n\n추가 안내", TYPED, IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("title_is_bullet", _with(BASE, "주간 리포트", "- 주간 리포트"), TYPED, IneligibleReason.TITLE_INVALID),
    ("two_line_title", _with(BASE, "주간 리포트 · ", "주간 리포트\n"), TYPED, IneligibleReason.TITLE_INVALID),
    # Fact bullets (facts, ranges, rates, judgment).
    ("fact_without_separator", _with(BASE, "- 기록률: 6/7일", "- 기록률 6/7일"), TYPED, IneligibleReason.FACT_LINE_MALFORMED),
    ("fact_label_unknown", _with(BASE, "- 판단:", "- 결론:"), TYPED, IneligibleReason.FACT_LABEL_UNKNOWN),
    ("fact_label_duplicate", _with(BASE, "- 기록률:", "- 기간:"), TYPED, IneligibleReason.FACT_LABEL_DUPLICATE),
    ("fact_label_missing", _with(BASE, "- 주간 변화율: +0.4%\n", ""), TYPED, IneligibleReason.FACT_LABEL_MISSING),
    ("fact_labels_reordered", _with(BASE, "- 기록률: 6/7일\n- 판단: 현재 계획 유지", "- 판단: 현재 계획 유지\n- 기록률: 6/7일"), TYPED, IneligibleReason.FACT_LABEL_ORDER),
    ("fact_value_empty", _with(BASE, "- 판단: 현재 계획 유지", "- 판단: "), TYPED, IneligibleReason.FACT_VALUE_EMPTY),
    # Headings.
    ("interpretation_heading_altered", _with(BASE, "주간 해석\n", "해석\n"), TYPED, IneligibleReason.SECTION_HEADING_MISMATCH),
    ("rationale_heading_altered", _with(BASE, "판단 근거\n", "근거\n"), TYPED, IneligibleReason.SECTION_HEADING_MISMATCH),
    ("interpretation_without_text", _with(BASE, "주간 해석\n" + IN_GOAL_TEXT, "주간 해석"), TYPED, IneligibleReason.SECTION_HEADING_MISMATCH),
    ("actions_heading_altered", _with(BASE, "다음 주 할 일", "이번 주 할 일"), TYPED, IneligibleReason.ACTIONS_HEADING_MISSING),
    ("no_actions", _with(BASE, "\n- 매일 아침 공복 체중 기록하기\n- 주 3회 하체 운동", ""), TYPED, IneligibleReason.NO_ACTIONS),
    ("action_malformed", _with(BASE, "- 주 3회 하체 운동", "· 주 3회 하체 운동"), TYPED, IneligibleReason.ACTION_LINE_MALFORMED),
    # Paragraph text against the host's typed branches.
    ("interpretation_free_text", _with(BASE, IN_GOAL_TEXT, "이번 주는 아주 잘 하셨습니다."), TYPED, IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("interpretation_one_char", _with(BASE, IN_GOAL_TEXT, IN_GOAL_TEXT.replace("안정적으로", "안정적으루")), TYPED, IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("interpretation_sentences_swapped", _with(BASE, IN_GOAL_TEXT, "이 흐름을 근거로 현재 계획을 그대로 이어갑니다. 체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다."), TYPED, IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("interpretation_two_lines", _with(BASE, IN_GOAL_TEXT, IN_GOAL_TEXT.replace(". ", ".\n")), TYPED, IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("host_branch_differs", BASE, _typed(interpretation=WeeklyInterpretation.OUT_OF_GOAL), IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("rationale_free_text", _with(BASE, KEEP_TEXT, "지난주와 같은 이유입니다."), TYPED, IneligibleReason.RATIONALE_TEXT_MISMATCH),
    ("host_rationale_differs", BASE, _typed(rationale=WeeklyRationale.REVIEW_ADJUSTMENT), IneligibleReason.RATIONALE_TEXT_MISMATCH),
    # A selected body is never canonical: a pinned body is not presented again.
    ("selected_body_fed_back", GOLDEN[0]["selected"], TYPED, IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
]
# fmt: on

COVERED_REASONS = {case[3] for case in INELIGIBLE} | {
    IneligibleReason.NOT_TEXT,
    IneligibleReason.FACTS_INVALID,
    IneligibleReason.TOO_LONG_UTF16,
}


@pytest.mark.parametrize(
    ("name", "body", "facts", "reason"), INELIGIBLE, ids=[c[0] for c in INELIGIBLE]
)
def test_ineligible(name: str, body: str, facts: WeeklyFacts, reason: IneligibleReason) -> None:
    with pytest.raises(Ineligible) as info:
        parse_weekly(body, facts)
    assert info.value.reason is reason
    assert info.value.args == (reason.value,)  # the enum value only, never content


def test_ineligible_input_types() -> None:
    with pytest.raises(Ineligible) as info:
        parse_weekly(BASE.encode(), TYPED)  # type: ignore[arg-type]
    assert info.value.reason is IneligibleReason.NOT_TEXT
    with pytest.raises(Ineligible) as info:
        parse_weekly(BASE, None)  # type: ignore[arg-type]
    assert info.value.reason is IneligibleReason.FACTS_INVALID


def test_explicit_field_is_ineligible_even_when_its_text_equals_the_typed_expansion() -> None:
    # The body is byte-identical to a typed one: provenance, not text, decides.
    parse_weekly(BASE, TYPED)
    for field in EXPLICIT_PROSE_FIELDS:
        with pytest.raises(Ineligible):
            parse_weekly(BASE, _typed(prose_fields=frozenset({field})))


def test_weekly_facts_is_frozen_and_typed() -> None:
    with pytest.raises(FrozenInstanceError):
        TYPED.rationale = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        WeeklyFacts(interpretation="IN_GOAL", rationale=WeeklyRationale.KEEP_BASELINE)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        WeeklyFacts(interpretation=None, rationale=("A_WEEKLY_KEEP_BASELINE",))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        WeeklyFacts(interpretation=None, rationale=None, prose_fields={"reason"})  # type: ignore[arg-type]
    assert FACT_LABELS == (
        "기간",
        "평균 체중",
        "체중 변화",
        "목표 범위",
        "주간 변화율",
        "기록률",
        "판단",
    )
    assert EXPLICIT_PROSE_FIELDS == {
        "interpretation",
        "trend_interpretation",
        "summary_text",
        "rationale",
        "judgment_rationale",
        "reason",
    }


ALL_FACTS = tuple((label, "값") for label in FACT_LABELS)
IN_GOAL, KEEP = WeeklyInterpretation.IN_GOAL, WeeklyRationale.KEEP_BASELINE

BAD_FORMAT_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("empty_title", {"title": "", "facts": ALL_FACTS, "actions": ("가",)}),
    ("bullet_title", {"title": "- 제목", "facts": ALL_FACTS, "actions": ("가",)}),
    ("six_facts", {"title": "제목", "facts": ALL_FACTS[:6], "actions": ("가",)}),
    ("reordered_facts", {"title": "제목", "facts": ALL_FACTS[::-1], "actions": ("가",)}),
    ("empty_value", {"title": "제목", "facts": (("기간", ""), *ALL_FACTS[1:]), "actions": ("가",)}),
    ("no_actions", {"title": "제목", "facts": ALL_FACTS, "actions": ()}),
    ("actions_as_str", {"title": "제목", "facts": ALL_FACTS, "actions": "가"}),
    ("newline_action", {"title": "제목", "facts": ALL_FACTS, "actions": ("가\n나",)}),
    (
        "untyped_branch",
        {"title": "제목", "facts": ALL_FACTS, "actions": ("가",), "interpretation": "IN_GOAL"},
    ),
]


@pytest.mark.parametrize(
    ("name", "kwargs"), BAD_FORMAT_INPUTS, ids=[c[0] for c in BAD_FORMAT_INPUTS]
)
def test_format_weekly_rejects_what_the_grammar_cannot_carry(
    name: str, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        format_weekly(**{"interpretation": IN_GOAL, "rationale": KEEP, **kwargs})


# --- properties ----------------------------------------------------------------------

_titles = LINES.filter(lambda t: not t.startswith("- "))
_facts_strategy = st.tuples(*(st.tuples(st.just(label), LINES) for label in FACT_LABELS))
_actions = st.lists(LINES, min_size=1, max_size=4)
_branches = st.tuples(st.sampled_from(WeeklyInterpretation), st.sampled_from(WeeklyRationale))


@settings(max_examples=150, deadline=None)
@given(title=_titles, facts=_facts_strategy, actions=_actions, branches=_branches)
def test_property_parse_canonical_round_trip(
    title: str,
    facts: Sequence[tuple[str, str]],
    actions: list[str],
    branches: tuple[WeeklyInterpretation, WeeklyRationale],
) -> None:
    interpretation, rationale = branches
    body = format_weekly(
        title=title,
        facts=facts,
        interpretation=interpretation,
        rationale=rationale,
        actions=actions,
    )
    surface = parse_weekly(body, WeeklyFacts(interpretation=interpretation, rationale=rationale))
    assert surface.canonical().body == body
    head, middle, tail = surface.canonical().locked_texts()
    interp, rat = surface.slots
    assert head + interp.canonical_text + middle + rat.canonical_text + tail == body


@settings(max_examples=150, deadline=None)
@given(title=_titles, facts=_facts_strategy, actions=_actions, branches=_branches, data=st.data())
def test_property_grammar_compositions_keep_every_locked_byte(
    title: str,
    facts: Sequence[tuple[str, str]],
    actions: list[str],
    branches: tuple[WeeklyInterpretation, WeeklyRationale],
    data: st.DataObject,
) -> None:
    interpretation, rationale = branches
    body = format_weekly(
        title=title,
        facts=facts,
        interpretation=interpretation,
        rationale=rationale,
        actions=actions,
    )
    surface = parse_weekly(body, WeeklyFacts(interpretation=interpretation, rationale=rationale))
    generated = data.draw(composition_for_every_slot(surface))
    assert_grammar_accepts(surface, generated)
    selected = surface.render(generated)
    assert_locked_identical(surface.canonical(), selected)
    assert_layout_identical(surface, selected.body)

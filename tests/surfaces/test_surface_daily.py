"""``daily.v1``: one golden table drives format, parse, render and fallback.

STYLE (h11 ``SIMPLE_CASES``): the same rows check the reference renderer, the
adapter, the selected body and the canonical fallback. Bodies are literals, not
computed: a change to the format must show up as a diff here.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spool.contract import SAFE_STYLE_LEXEMES

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
from gateway_shim.surfaces.daily import (
    FACT_LABELS,
    MISSING_VALUE,
    SLOT_ID,
    SURFACE,
    DailyFacts,
    format_daily,
    parse_daily,
)

COMPLETE = "저장된 오늘 기록을 확인했습니다."
PARTIAL = "일부 항목이 기록되지 않아 저장된 내용만 안내합니다."

# name, format_daily inputs, host facts, canonical, generated_ko, selected, fallback
GOLDEN: list[dict[str, Any]] = [
    {
        "name": "complete",
        "title": "오늘의 기록",
        "facts": (
            ("체중", "72.4kg"),
            ("식단", "아침 귀리죽, 점심 닭가슴살 샐러드"),
            ("단백질", "132g"),
            ("수분", "2.1L"),
            ("운동", "하체 근력 운동 50분"),
            ("수면", "7시간"),
            ("컨디션", "양호"),
        ),
        "actions": ("저녁 식단 사진 올리기", "취침 전 스트레칭"),
        "complete": True,
        "canonical": (
            "오늘의 기록\n"
            "\n"
            "- 체중: 72.4kg\n"
            "- 식단: 아침 귀리죽, 점심 닭가슴살 샐러드\n"
            "- 단백질: 132g\n"
            "- 수분: 2.1L\n"
            "- 운동: 하체 근력 운동 50분\n"
            "- 수면: 7시간\n"
            "- 컨디션: 양호\n"
            "\n"
            "저장된 오늘 기록을 확인했습니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 저녁 식단 사진 올리기\n"
            "- 취침 전 스트레칭"
        ),
        "generated": "차분히, [[P:01]].",
        "selected": (
            "오늘의 기록\n"
            "\n"
            "- 체중: 72.4kg\n"
            "- 식단: 아침 귀리죽, 점심 닭가슴살 샐러드\n"
            "- 단백질: 132g\n"
            "- 수분: 2.1L\n"
            "- 운동: 하체 근력 운동 50분\n"
            "- 수면: 7시간\n"
            "- 컨디션: 양호\n"
            "\n"
            "차분히, 저장된 오늘 기록을 확인했습니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 저녁 식단 사진 올리기\n"
            "- 취침 전 스트레칭"
        ),
        "fallback": (
            "오늘의 기록\n"
            "\n"
            "- 체중: 72.4kg\n"
            "- 식단: 아침 귀리죽, 점심 닭가슴살 샐러드\n"
            "- 단백질: 132g\n"
            "- 수분: 2.1L\n"
            "- 운동: 하체 근력 운동 50분\n"
            "- 수면: 7시간\n"
            "- 컨디션: 양호\n"
            "\n"
            "저장된 오늘 기록을 확인했습니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 저녁 식단 사진 올리기\n"
            "- 취침 전 스트레칭"
        ),
    },
    {
        "name": "partial",
        "title": "3월 5일 기록",
        "facts": (
            ("체중", "71.9kg"),
            ("식단", "점심 비빔밥"),
            ("단백질", "98g"),
            ("수분", "미기록"),
            ("운동", "휴식"),
            ("수면", "미기록"),
            ("컨디션", "조금 피곤함"),
        ),
        "actions": ("수분 섭취량 입력하기",),
        "complete": False,
        "canonical": (
            "3월 5일 기록\n"
            "\n"
            "- 체중: 71.9kg\n"
            "- 식단: 점심 비빔밥\n"
            "- 단백질: 98g\n"
            "- 수분: 미기록\n"
            "- 운동: 휴식\n"
            "- 수면: 미기록\n"
            "- 컨디션: 조금 피곤함\n"
            "\n"
            "일부 항목이 기록되지 않아 저장된 내용만 안내합니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 수분 섭취량 입력하기"
        ),
        "generated": "이제 하나씩, [[P:01]].",
        "selected": (
            "3월 5일 기록\n"
            "\n"
            "- 체중: 71.9kg\n"
            "- 식단: 점심 비빔밥\n"
            "- 단백질: 98g\n"
            "- 수분: 미기록\n"
            "- 운동: 휴식\n"
            "- 수면: 미기록\n"
            "- 컨디션: 조금 피곤함\n"
            "\n"
            "이제 하나씩, 일부 항목이 기록되지 않아 저장된 내용만 안내합니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 수분 섭취량 입력하기"
        ),
        "fallback": (
            "3월 5일 기록\n"
            "\n"
            "- 체중: 71.9kg\n"
            "- 식단: 점심 비빔밥\n"
            "- 단백질: 98g\n"
            "- 수분: 미기록\n"
            "- 운동: 휴식\n"
            "- 수면: 미기록\n"
            "- 컨디션: 조금 피곤함\n"
            "\n"
            "일부 항목이 기록되지 않아 저장된 내용만 안내합니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 수분 섭취량 입력하기"
        ),
    },
    {
        "name": "all_missing",
        "title": "기록 요약",
        "facts": tuple((label, "미기록") for label in FACT_LABELS),
        "actions": ("오늘 기록 입력하기",),
        "complete": False,
        "canonical": (
            "기록 요약\n"
            "\n"
            "- 체중: 미기록\n"
            "- 식단: 미기록\n"
            "- 단백질: 미기록\n"
            "- 수분: 미기록\n"
            "- 운동: 미기록\n"
            "- 수면: 미기록\n"
            "- 컨디션: 미기록\n"
            "\n"
            "일부 항목이 기록되지 않아 저장된 내용만 안내합니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 오늘 기록 입력하기"
        ),
        "generated": "우선 [[P:01]].",
        "selected": (
            "기록 요약\n"
            "\n"
            "- 체중: 미기록\n"
            "- 식단: 미기록\n"
            "- 단백질: 미기록\n"
            "- 수분: 미기록\n"
            "- 운동: 미기록\n"
            "- 수면: 미기록\n"
            "- 컨디션: 미기록\n"
            "\n"
            "우선 일부 항목이 기록되지 않아 저장된 내용만 안내합니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 오늘 기록 입력하기"
        ),
        "fallback": (
            "기록 요약\n"
            "\n"
            "- 체중: 미기록\n"
            "- 식단: 미기록\n"
            "- 단백질: 미기록\n"
            "- 수분: 미기록\n"
            "- 운동: 미기록\n"
            "- 수면: 미기록\n"
            "- 컨디션: 미기록\n"
            "\n"
            "일부 항목이 기록되지 않아 저장된 내용만 안내합니다.\n"
            "\n"
            "오늘 할 일\n"
            "- 오늘 기록 입력하기"
        ),
    },
    {
        # Emoji, Latin letters, digits, signs and a nested bullet in the title,
        # values and actions: all locked, never part of a slot.
        "name": "emoji_latin_digits",
        "title": "💪 Day 12 · Lean-bulk check-in (D+3) 🔥",
        "facts": (
            ("체중", "72.4 kg (+0.3)"),
            ("식단", "Oatmeal 80g / 🍗 chicken 200g"),
            ("단백질", "140 g"),
            ("수분", "2.5L 💧"),
            ("운동", "Squat 5x5 @100kg"),
            ("수면", "6h 45m 😴"),
            ("컨디션", "8/10 👍"),
        ),
        "actions": ("Log dinner 🍽️ by 21:00", "- 10,000 steps 🚶"),
        "complete": True,
        "canonical": (
            "💪 Day 12 · Lean-bulk check-in (D+3) 🔥\n"
            "\n"
            "- 체중: 72.4 kg (+0.3)\n"
            "- 식단: Oatmeal 80g / 🍗 chicken 200g\n"
            "- 단백질: 140 g\n"
            "- 수분: 2.5L 💧\n"
            "- 운동: Squat 5x5 @100kg\n"
            "- 수면: 6h 45m 😴\n"
            "- 컨디션: 8/10 👍\n"
            "\n"
            "저장된 오늘 기록을 확인했습니다.\n"
            "\n"
            "오늘 할 일\n"
            "- Log dinner 🍽️ by 21:00\n"
            "- - 10,000 steps 🚶"
        ),
        "generated": "지금 바로 [[P:01]].",
        "selected": (
            "💪 Day 12 · Lean-bulk check-in (D+3) 🔥\n"
            "\n"
            "- 체중: 72.4 kg (+0.3)\n"
            "- 식단: Oatmeal 80g / 🍗 chicken 200g\n"
            "- 단백질: 140 g\n"
            "- 수분: 2.5L 💧\n"
            "- 운동: Squat 5x5 @100kg\n"
            "- 수면: 6h 45m 😴\n"
            "- 컨디션: 8/10 👍\n"
            "\n"
            "지금 바로 저장된 오늘 기록을 확인했습니다.\n"
            "\n"
            "오늘 할 일\n"
            "- Log dinner 🍽️ by 21:00\n"
            "- - 10,000 steps 🚶"
        ),
        "fallback": (
            "💪 Day 12 · Lean-bulk check-in (D+3) 🔥\n"
            "\n"
            "- 체중: 72.4 kg (+0.3)\n"
            "- 식단: Oatmeal 80g / 🍗 chicken 200g\n"
            "- 단백질: 140 g\n"
            "- 수분: 2.5L 💧\n"
            "- 운동: Squat 5x5 @100kg\n"
            "- 수면: 6h 45m 😴\n"
            "- 컨디션: 8/10 👍\n"
            "\n"
            "저장된 오늘 기록을 확인했습니다.\n"
            "\n"
            "오늘 할 일\n"
            "- Log dinner 🍽️ by 21:00\n"
            "- - 10,000 steps 🚶"
        ),
    },
]

GOLDEN_IDS = [row["name"] for row in GOLDEN]


def _facts(row: Mapping[str, Any]) -> DailyFacts:
    return DailyFacts(complete=row["complete"])


def _format(row: Mapping[str, Any]) -> str:
    return format_daily(title=row["title"], facts=row["facts"], actions=row["actions"])


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_format(row: dict[str, Any]) -> None:
    assert _format(row) == row["canonical"]
    # The same facts as a mapping render the same body (labels ordered by FACT_LABELS).
    as_mapping = dict(reversed(row["facts"]))
    assert (
        format_daily(title=row["title"], facts=as_mapping, actions=row["actions"])
        == row["canonical"]
    )


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_parse_round_trip(row: dict[str, Any]) -> None:
    surface = parse_daily(_format(row), _facts(row))
    assert surface.surface == SURFACE == "daily.v1"
    assert surface.body == row["canonical"]
    assert surface.canonical().body == row["canonical"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_slot_is_only_the_status_sentence(row: dict[str, Any]) -> None:
    surface = parse_daily(row["canonical"], _facts(row))
    (slot,) = surface.slots
    semantic_id = "P_DAILY_COMPLETE" if row["complete"] else "P_DAILY_PARTIAL"
    assert slot.slot_id == SLOT_ID == "daily.status"
    assert [(p.token, p.semantic_id) for p in slot.placeholders] == [("[[P:01]]", semantic_id)]
    assert slot.canonical_text == (COMPLETE if row["complete"] else PARTIAL)
    assert [type(seg) for seg in surface.segments] == [Locked, SlotRef, Locked]
    policy = slot.policy()
    assert policy.slot_id == "daily.status"
    assert tuple(policy.allowed_predicate_ids) == (semantic_id,)
    assert tuple(policy.allowed_action_ids) == ()
    assert tuple(policy.required_placeholder_tokens) == ("[[P:01]]",)
    assert (policy.max_generated_chars, policy.max_style_lexemes) == (96, 8)


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_render_selected(row: dict[str, Any]) -> None:
    surface = parse_daily(row["canonical"], _facts(row))
    selected = surface.render({SLOT_ID: row["generated"]})
    assert selected.body == row["selected"]
    assert selected.body != row["canonical"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_fallback_is_canonical(row: dict[str, Any]) -> None:
    surface = parse_daily(row["canonical"], _facts(row))
    # The plan's own daily example is outside the lexicon: rejected, so the host
    # publishes the canonical body.
    with pytest.raises(RenderError) as info:
        surface.render({SLOT_ID: "오늘은 차분히, [[P:01]]."})
    assert info.value.reason is RenderReason.COMPOSITION_REJECTED
    assert surface.canonical().body == row["fallback"] == row["canonical"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_locked_spans_identical(row: dict[str, Any]) -> None:
    surface = parse_daily(row["canonical"], _facts(row))
    canonical = surface.canonical()
    selected = surface.render({SLOT_ID: row["generated"]})
    assert len(canonical.locked_spans_utf16) == len(selected.locked_spans_utf16) == 2
    assert canonical.locked_texts() == selected.locked_texts()
    # Everything outside the status line is locked, in both bodies.
    status = COMPLETE if row["complete"] else PARTIAL
    prefix, suffix = row["canonical"].split(status)
    assert canonical.locked_texts() == (prefix, suffix)
    assert prefix.endswith("- 컨디션: " + row["facts"][-1][1] + "\n\n")
    assert suffix.startswith("\n\n오늘 할 일\n- ")
    # The first span starts the body; the last ends it.
    for rendered in (canonical, selected):
        assert rendered.locked_spans_utf16[0][0] == 0
        assert rendered.locked_spans_utf16[-1][1] == utf16_len(rendered.body)


def test_utf16_offsets_are_code_units_not_code_points() -> None:
    body = (
        "💪 기록\n"
        "\n"
        "- 체중: 70kg\n"
        "- 식단: 밥\n"
        "- 단백질: 🥚🥚\n"
        "- 수분: 1L\n"
        "- 운동: 걷기\n"
        "- 수면: 8시간\n"
        "- 컨디션: 좋음\n"
        "\n"
        "저장된 오늘 기록을 확인했습니다.\n"
        "\n"
        "오늘 할 일\n"
        "- 🚶 산책"
    )
    surface = parse_daily(body, DailyFacts(complete=True))
    canonical = surface.canonical()
    # Prefix: 74 code points, three of them astral (💪 🥚 🥚) → 77 UTF-16 units.
    # Status: 18 units. Suffix: 15 code points, one astral (🚶) → 16 units.
    assert len(body) == 74 + 18 + 15
    assert canonical.locked_spans_utf16 == ((0, 77), (95, 111))
    assert utf16_len(canonical.body) == 111
    selected = surface.render({SLOT_ID: "차분히, [[P:01]]."})
    # "차분히, " adds five units before the status sentence.
    assert selected.locked_spans_utf16 == ((0, 77), (100, 116))
    assert utf16_len(selected.body) == 116


# --- ineligible bodies ------------------------------------------------------------

BASE_COMPLETE: str = GOLDEN[0]["canonical"]
BASE_PARTIAL: str = GOLDEN[1]["canonical"]
YES = DailyFacts(complete=True)
NO = DailyFacts(complete=False)


def _with(base: str, old: str, new: str) -> str:
    assert base.count(old) == 1, old
    return base.replace(old, new)


def _astral_title_over_limit() -> str:
    """A body over 4096 UTF-16 units that is under 4096 code points."""
    body = _with(BASE_COMPLETE, "오늘의 기록", "🏋" * 2100)
    assert len(body) <= TELEGRAM_MAX_UTF16 < utf16_len(body)
    return body


# name, body, host facts, reason
# fmt: off
INELIGIBLE: list[tuple[str, str, DailyFacts, IneligibleReason]] = [
    ("lone_surrogate", _with(BASE_COMPLETE, "오늘의 기록", "오늘의 \ud83d 기록"), YES, IneligibleReason.INVALID_UNICODE),
    ("over_4096_utf16_units", _astral_title_over_limit(), YES, IneligibleReason.TOO_LONG_UTF16),
    ("crlf", BASE_COMPLETE.replace("\n", "\r\n"), YES, IneligibleReason.CARRIAGE_RETURN),
    ("cr_in_value", _with(BASE_COMPLETE, "양호", "양\r호"), YES, IneligibleReason.CARRIAGE_RETURN),
    ("trailing_newline", BASE_COMPLETE + "\n", YES, IneligibleReason.TRAILING_NEWLINE),
    ("tab_in_value", _with(BASE_COMPLETE, "132g", "132\tg"), YES, IneligibleReason.CONTROL_CHARACTER),
    ("nel_in_title", _with(BASE_COMPLETE, "오늘의 기록", "오늘의\x85기록"), YES, IneligibleReason.CONTROL_CHARACTER),
    ("line_separator_in_action", _with(BASE_COMPLETE, "취침 전", "취침\u2028전"), YES, IneligibleReason.CONTROL_CHARACTER),
    ("empty_body", "", YES, IneligibleReason.BLANK_LINE_MISMATCH),
    ("leading_blank_line", "\n" + BASE_COMPLETE, YES, IneligibleReason.BLANK_LINE_MISMATCH),
    ("extra_blank_line_after_title", _with(BASE_COMPLETE, "기록\n\n", "기록\n\n\n"), YES, IneligibleReason.BLANK_LINE_MISMATCH),
    ("extra_blank_line_before_heading", _with(BASE_COMPLETE, ".\n\n", ".\n\n\n"), YES, IneligibleReason.BLANK_LINE_MISMATCH),
    ("blank_line_between_actions", _with(BASE_COMPLETE, "\n- 취침", "\n\n- 취침"), YES, IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("missing_blank_line_after_title", _with(BASE_COMPLETE, "기록\n\n", "기록\n"), YES, IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("missing_blank_line_before_heading", _with(BASE_COMPLETE, ".\n\n", ".\n"), YES, IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("extra_paragraph", BASE_COMPLETE + "\n\n추가 안내", YES, IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("title_is_bullet", _with(BASE_COMPLETE, "오늘의 기록", "- 오늘의 기록"), YES, IneligibleReason.TITLE_INVALID),
    ("two_line_title", _with(BASE_COMPLETE, "오늘의 기록", "오늘의\n기록"), YES, IneligibleReason.TITLE_INVALID),
    ("fact_without_separator", _with(BASE_COMPLETE, "- 수분: 2.1L", "- 수분 2.1L"), YES, IneligibleReason.FACT_LINE_MALFORMED),
    ("fact_other_bullet", _with(BASE_COMPLETE, "- 수분: 2.1L", "* 수분: 2.1L"), YES, IneligibleReason.FACT_LINE_MALFORMED),
    ("fact_label_unknown", _with(BASE_COMPLETE, "- 체중:", "- 몸무게:"), YES, IneligibleReason.FACT_LABEL_UNKNOWN),
    ("fact_label_with_space", _with(BASE_COMPLETE, "- 체중:", "- 체중 :"), YES, IneligibleReason.FACT_LABEL_UNKNOWN),
    ("fact_label_duplicate", _with(BASE_COMPLETE, "- 식단:", "- 체중:"), YES, IneligibleReason.FACT_LABEL_DUPLICATE),
    ("fact_label_missing", _with(BASE_COMPLETE, "- 수분: 2.1L\n", ""), YES, IneligibleReason.FACT_LABEL_MISSING),
    ("fact_labels_reordered", _with(BASE_COMPLETE, "- 운동: 하체 근력 운동 50분\n- 수면: 7시간", "- 수면: 7시간\n- 운동: 하체 근력 운동 50분"), YES, IneligibleReason.FACT_LABEL_ORDER),
    ("fact_value_empty", _with(BASE_COMPLETE, "- 수면: 7시간", "- 수면: "), YES, IneligibleReason.FACT_VALUE_EMPTY),
    ("status_one_char_altered", _with(BASE_COMPLETE, COMPLETE, "저장된 오늘 기록을 확인했습니다!"), YES, IneligibleReason.STATUS_TEXT_MISMATCH),
    ("status_one_syllable_altered", _with(BASE_COMPLETE, COMPLETE, "저장된 오늘 기록을 확인합습니다."), YES, IneligibleReason.STATUS_TEXT_MISMATCH),
    ("status_without_period", _with(BASE_COMPLETE, COMPLETE, COMPLETE[:-1]), YES, IneligibleReason.STATUS_TEXT_MISMATCH),
    ("status_nfd", _with(BASE_COMPLETE, COMPLETE, unicodedata.normalize("NFD", COMPLETE)), YES, IneligibleReason.STATUS_TEXT_MISMATCH),
    ("status_two_lines", _with(BASE_COMPLETE, COMPLETE, COMPLETE + "\n" + COMPLETE), YES, IneligibleReason.STATUS_TEXT_MISMATCH),
    # A selected body is not canonical: daily replay is canonical-only.
    ("selected_body_fed_back", GOLDEN[0]["selected"], YES, IneligibleReason.STATUS_TEXT_MISMATCH),
    ("status_partial_but_all_recorded", _with(BASE_COMPLETE, COMPLETE, PARTIAL), NO, IneligibleReason.STATUS_COMPLETENESS_MISMATCH),
    ("status_complete_but_missing", _with(BASE_PARTIAL, PARTIAL, COMPLETE), YES, IneligibleReason.STATUS_COMPLETENESS_MISMATCH),
    ("host_says_partial_body_complete", BASE_COMPLETE, NO, IneligibleReason.HOST_FACTS_MISMATCH),
    ("host_says_complete_body_partial", BASE_PARTIAL, YES, IneligibleReason.HOST_FACTS_MISMATCH),
    ("heading_altered", _with(BASE_COMPLETE, "오늘 할 일", "오늘의 할 일"), YES, IneligibleReason.ACTIONS_HEADING_MISSING),
    ("no_actions", _with(BASE_COMPLETE, "\n- 저녁 식단 사진 올리기\n- 취침 전 스트레칭", ""), YES, IneligibleReason.NO_ACTIONS),
    ("action_empty", _with(BASE_COMPLETE, "- 취침 전 스트레칭", "- "), YES, IneligibleReason.ACTION_LINE_MALFORMED),
    ("action_other_bullet", _with(BASE_COMPLETE, "- 취침 전 스트레칭", "· 취침 전 스트레칭"), YES, IneligibleReason.ACTION_LINE_MALFORMED),
]
# fmt: on


@pytest.mark.parametrize(
    ("name", "body", "facts", "reason"), INELIGIBLE, ids=[c[0] for c in INELIGIBLE]
)
def test_ineligible(name: str, body: str, facts: DailyFacts, reason: IneligibleReason) -> None:
    with pytest.raises(Ineligible) as info:
        parse_daily(body, facts)
    assert info.value.reason is reason
    # The message is the enum value only, never content.
    assert str(info.value) == reason.value
    assert info.value.args == (reason.value,)


def test_ineligible_input_types() -> None:
    with pytest.raises(Ineligible) as info:
        parse_daily(BASE_COMPLETE.encode(), YES)  # type: ignore[arg-type]
    assert info.value.reason is IneligibleReason.NOT_TEXT
    with pytest.raises(Ineligible) as info:
        parse_daily(BASE_COMPLETE, True)  # type: ignore[arg-type]
    assert info.value.reason is IneligibleReason.FACTS_INVALID


# The reasons this file exercises; test_surface_reasons.py checks that the
# surfaces together exercise every member of the shared enum.
COVERED_REASONS = {case[3] for case in INELIGIBLE} | {
    IneligibleReason.NOT_TEXT,
    IneligibleReason.FACTS_INVALID,
}


def test_every_daily_ineligible_reason_is_exercised() -> None:
    # Every reason parse_daily can raise (the enum's members up to the action
    # block; the later members belong to the weekly and adaptive adapters).
    members = list(IneligibleReason)
    daily = set(members[: members.index(IneligibleReason.ACTION_LINE_MALFORMED) + 1])
    assert COVERED_REASONS == daily


def test_telegram_limit_boundary_counts_utf16_units() -> None:
    base = utf16_len(_with(BASE_COMPLETE, "오늘의 기록", ""))
    room = TELEGRAM_MAX_UTF16 - base
    # An odd room: emoji (2 units each) plus one BMP character fills it exactly.
    assert room % 2 == 1
    exact = _with(BASE_COMPLETE, "오늘의 기록", "🏋" * (room // 2) + "가")
    assert utf16_len(exact) == TELEGRAM_MAX_UTF16
    surface = parse_daily(exact, YES)
    assert surface.canonical().body == exact
    over = _with(BASE_COMPLETE, "오늘의 기록", "🏋" * (room // 2 + 1))
    assert utf16_len(over) == TELEGRAM_MAX_UTF16 + 1
    with pytest.raises(Ineligible) as info:
        parse_daily(over, YES)
    assert info.value.reason is IneligibleReason.TOO_LONG_UTF16
    # At the limit, any composition longer than the canonical status overflows.
    with pytest.raises(RenderError) as render_info:
        surface.render({SLOT_ID: "차분히, [[P:01]]."})
    assert render_info.value.reason is RenderReason.TOO_LONG_UTF16


# --- reference renderer input validation -------------------------------------------

ALL_RECORDED = tuple((label, "있음") for label in FACT_LABELS)

BAD_FORMAT_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("empty_title", {"title": "", "facts": ALL_RECORDED, "actions": ("가",)}),
    ("bullet_title", {"title": "- 제목", "facts": ALL_RECORDED, "actions": ("가",)}),
    ("newline_title", {"title": "제\n목", "facts": ALL_RECORDED, "actions": ("가",)}),
    ("six_facts", {"title": "제목", "facts": ALL_RECORDED[:6], "actions": ("가",)}),
    ("reordered_facts", {"title": "제목", "facts": ALL_RECORDED[::-1], "actions": ("가",)}),
    (
        "mapping_extra_key",
        {"title": "제목", "facts": {**dict(ALL_RECORDED), "메모": "x"}, "actions": ("가",)},
    ),
    (
        "empty_value",
        {"title": "제목", "facts": (("체중", ""), *ALL_RECORDED[1:]), "actions": ("가",)},
    ),
    (
        "tab_value",
        {"title": "제목", "facts": (("체중", "a\tb"), *ALL_RECORDED[1:]), "actions": ("가",)},
    ),
    ("no_actions", {"title": "제목", "facts": ALL_RECORDED, "actions": ()}),
    ("actions_as_str", {"title": "제목", "facts": ALL_RECORDED, "actions": "가"}),
    ("empty_action", {"title": "제목", "facts": ALL_RECORDED, "actions": ("",)}),
    ("cr_action", {"title": "제목", "facts": ALL_RECORDED, "actions": ("가\r",)}),
]


@pytest.mark.parametrize(
    ("name", "kwargs"), BAD_FORMAT_INPUTS, ids=[c[0] for c in BAD_FORMAT_INPUTS]
)
def test_format_daily_rejects_what_the_grammar_cannot_carry(
    name: str, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        format_daily(**kwargs)


def test_daily_facts_is_frozen_and_typed() -> None:
    facts = DailyFacts(complete=True)
    with pytest.raises(FrozenInstanceError):
        facts.complete = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        DailyFacts(complete=1)  # type: ignore[arg-type]
    assert FACT_LABELS == ("체중", "식단", "단백질", "수분", "운동", "수면", "컨디션")
    assert MISSING_VALUE == "미기록"


# --- properties ----------------------------------------------------------------------

# Any single line the grammar can carry: no control, surrogate or line-break
# characters. Astral characters included, so UTF-16 offsets are exercised.
_line_chars = st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp"))
_lines = st.text(_line_chars, min_size=1, max_size=40)
_titles = _lines.filter(lambda t: not t.startswith("- "))
_values = st.one_of(st.just(MISSING_VALUE), _lines)
_facts_strategy = st.tuples(*(st.tuples(st.just(label), _values) for label in FACT_LABELS))
_actions = st.lists(_lines, min_size=1, max_size=5)

_style = st.tuples(
    st.lists(st.sampled_from(tuple(SAFE_STYLE_LEXEMES)), min_size=1, max_size=8),
    st.sampled_from((", ", " ")),
)


def _composition(style: tuple[list[str], str]) -> str:
    lexemes, separator = style
    return " ".join(lexemes) + separator + "[[P:01]]."


@settings(max_examples=200, deadline=None)
@given(title=_titles, facts=_facts_strategy, actions=_actions)
def test_property_parse_canonical_round_trip(
    title: str, facts: Sequence[tuple[str, str]], actions: list[str]
) -> None:
    body = format_daily(title=title, facts=facts, actions=actions)
    complete = all(value != MISSING_VALUE for _, value in facts)
    surface = parse_daily(body, DailyFacts(complete=complete))
    canonical = surface.canonical()
    assert canonical.body == body
    # Locked segments plus the status line are the whole body.
    prefix, suffix = canonical.locked_texts()
    assert prefix + surface.slots[0].canonical_text + suffix == body


@settings(max_examples=200, deadline=None)
@given(title=_titles, facts=_facts_strategy, actions=_actions, style=_style)
def test_property_grammar_compositions_keep_every_locked_byte(
    title: str, facts: Sequence[tuple[str, str]], actions: list[str], style: tuple[list[str], str]
) -> None:
    body = format_daily(title=title, facts=facts, actions=actions)
    complete = all(value != MISSING_VALUE for _, value in facts)
    surface = parse_daily(body, DailyFacts(complete=complete))
    generated = _composition(style)
    selected = surface.render({SLOT_ID: generated})
    canonical = surface.canonical()
    assert "".join(selected.locked_texts()) == "".join(canonical.locked_texts())
    assert selected.locked_texts() == canonical.locked_texts()
    prefix, suffix = canonical.locked_texts()
    status = COMPLETE if complete else PARTIAL
    assert selected.body == prefix + generated.replace("[[P:01]].", status) + suffix
    assert selected.body.count("\n") == body.count("\n")


@settings(max_examples=200, deadline=None)
@given(
    row=st.sampled_from(GOLDEN),
    data=st.data(),
)
def test_property_any_status_mutation_is_ineligible(
    row: dict[str, Any], data: st.DataObject
) -> None:
    status = COMPLETE if row["complete"] else PARTIAL
    index = data.draw(st.integers(min_value=0, max_value=len(status) - 1))
    replacement = data.draw(
        st.characters(exclude_categories=["Cs"]).filter(lambda c: c != status[index])
    )
    mutated = status[:index] + replacement + status[index + 1 :]
    with pytest.raises(Ineligible):
        parse_daily(row["canonical"].replace(status, mutated), _facts(row))

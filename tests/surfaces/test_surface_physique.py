"""``adaptive.physique.card.v1``: one golden table drives format, parse (into the
canonical presentation projection), render and fallback; the payload envelope's
eligibility rules are in ``test_surface_card.py``.

Bodies are literals, not computed: a change to the format must show up as a
diff here.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from gateway_shim.surfaces.physique import (
    LINE_LABELS,
    REQUIRED_LABELS,
    REVIEW_HEADING,
    REVIEW_INSTRUCTION_ID,
    REVIEW_SLOT,
    STATUS_LINE,
    SURFACE,
    TITLE_PREFIX,
    format_physique_card,
    parse_physique_card,
)

SENTENCE = "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요."
# The code-owned block the projection adds immediately before the status line.
PROJECTION = f"{REVIEW_HEADING}\n{SENTENCE}\n\n"

# name, format_physique_card inputs, composition, canonical (source) text,
# selected (projection with the composition), fallback (canonical projection)
GOLDEN: list[dict[str, Any]] = [
    {
        "name": "every_optional_line",
        "title": "김민지 님",
        "customer": "김민지",
        "day": "11월 30일",
        "day_count": 12,
        "decision": "탄수화물 20g 감량",
        "basis": "최근 7일 평균 체중 증가가 목표보다 빠름",
        "target": "하루 2,300kcal · 단백질 150g",
        "cycle": "고탄수 3일 / 저탄수 4일",
        "meal": "아침 귀리 80g, 점심 현미밥 200g",
        "note": "운동 후 탄수화물 우선",
        "generated": "차분히, [[A:01]].",
        "canonical": (
            "[피지크 코치] 적응형 영양 제안 · 김민지 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 김민지\n"
            "기준일: 11월 30일 (D+12)\n"
            "결정: 탄수화물 20g 감량\n"
            "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n"
            "목표: 하루 2,300kcal · 단백질 150g\n"
            "주기: 고탄수 3일 / 저탄수 4일\n"
            "식단: 아침 귀리 80g, 점심 현미밥 200g\n"
            "메모: 운동 후 탄수화물 우선\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
        "selected": (
            "[피지크 코치] 적응형 영양 제안 · 김민지 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 김민지\n"
            "기준일: 11월 30일 (D+12)\n"
            "결정: 탄수화물 20g 감량\n"
            "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n"
            "목표: 하루 2,300kcal · 단백질 150g\n"
            "주기: 고탄수 3일 / 저탄수 4일\n"
            "식단: 아침 귀리 80g, 점심 현미밥 200g\n"
            "메모: 운동 후 탄수화물 우선\n"
            "\n"
            "검토 안내\n"
            "차분히, 제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
        "fallback": (
            "[피지크 코치] 적응형 영양 제안 · 김민지 님\n"
            "━━━━━━━━━━━━\n"
            "고객: 김민지\n"
            "기준일: 11월 30일 (D+12)\n"
            "결정: 탄수화물 20g 감량\n"
            "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n"
            "목표: 하루 2,300kcal · 단백질 150g\n"
            "주기: 고탄수 3일 / 저탄수 4일\n"
            "식단: 아침 귀리 80g, 점심 현미밥 200g\n"
            "메모: 운동 후 탄수화물 우선\n"
            "\n"
            "검토 안내\n"
            "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
    },
    {
        "name": "required_lines_only",
        "title": "",
        "customer": "박지훈",
        "day": "3월 1일",
        "day_count": 0,
        "decision": "현재 계획 유지",
        "basis": "기록 부족",
        "target": None,
        "cycle": None,
        "meal": None,
        "note": None,
        "generated": "하나씩 순서대로, [[A:01]].",
        "canonical": (
            "[피지크 코치] 적응형 영양 제안\n"
            "━━━━━━━━━━━━\n"
            "고객: 박지훈\n"
            "기준일: 3월 1일 (D+0)\n"
            "결정: 현재 계획 유지\n"
            "근거: 기록 부족\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
        "selected": (
            "[피지크 코치] 적응형 영양 제안\n"
            "━━━━━━━━━━━━\n"
            "고객: 박지훈\n"
            "기준일: 3월 1일 (D+0)\n"
            "결정: 현재 계획 유지\n"
            "근거: 기록 부족\n"
            "\n"
            "검토 안내\n"
            "하나씩 순서대로, 제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
        "fallback": (
            "[피지크 코치] 적응형 영양 제안\n"
            "━━━━━━━━━━━━\n"
            "고객: 박지훈\n"
            "기준일: 3월 1일 (D+0)\n"
            "결정: 현재 계획 유지\n"
            "근거: 기록 부족\n"
            "\n"
            "검토 안내\n"
            "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
    },
    {
        "name": "emoji_latin_some_optional",
        "title": "Jisoo 🏃",
        "customer": "Jisoo Lee 🙂",
        "day": "2025-11-30",
        "day_count": 104,
        "decision": "Carbs −20 g 🍚",
        "basis": "Weight +0.6 kg/wk 📈 (target +0.25)",
        "target": None,
        "cycle": "High 3d / Low 4d",
        "meal": "Oats 80 g 🥣",
        "note": None,
        "generated": "우선 [[A:01]].",
        "canonical": (
            "[피지크 코치] 적응형 영양 제안 · Jisoo 🏃\n"
            "━━━━━━━━━━━━\n"
            "고객: Jisoo Lee 🙂\n"
            "기준일: 2025-11-30 (D+104)\n"
            "결정: Carbs −20 g 🍚\n"
            "근거: Weight +0.6 kg/wk 📈 (target +0.25)\n"
            "주기: High 3d / Low 4d\n"
            "식단: Oats 80 g 🥣\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
        "selected": (
            "[피지크 코치] 적응형 영양 제안 · Jisoo 🏃\n"
            "━━━━━━━━━━━━\n"
            "고객: Jisoo Lee 🙂\n"
            "기준일: 2025-11-30 (D+104)\n"
            "결정: Carbs −20 g 🍚\n"
            "근거: Weight +0.6 kg/wk 📈 (target +0.25)\n"
            "주기: High 3d / Low 4d\n"
            "식단: Oats 80 g 🥣\n"
            "\n"
            "검토 안내\n"
            "우선 제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
        "fallback": (
            "[피지크 코치] 적응형 영양 제안 · Jisoo 🏃\n"
            "━━━━━━━━━━━━\n"
            "고객: Jisoo Lee 🙂\n"
            "기준일: 2025-11-30 (D+104)\n"
            "결정: Carbs −20 g 🍚\n"
            "근거: Weight +0.6 kg/wk 📈 (target +0.25)\n"
            "주기: High 3d / Low 4d\n"
            "식단: Oats 80 g 🥣\n"
            "\n"
            "검토 안내\n"
            "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
            "\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
        ),
    },
]

GOLDEN_IDS = [row["name"] for row in GOLDEN]
_FORMAT_KEYS = (
    "title",
    "customer",
    "day",
    "day_count",
    "decision",
    "basis",
    "target",
    "cycle",
    "meal",
    "note",
)


def _format(row: Mapping[str, Any]) -> str:
    return format_physique_card(**{k: row[k] for k in _FORMAT_KEYS})


def _parse(text: str) -> Any:
    return parse_physique_card(payload(SURFACE, text), binding())


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_format(row: dict[str, Any]) -> None:
    assert _format(row) == row["canonical"]
    assert row["canonical"].endswith("\n\n" + STATUS_LINE)


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_parse_projects_the_review_block_before_the_status(row: dict[str, Any]) -> None:
    surface = _parse(_format(row))
    assert surface.surface == SURFACE == "adaptive.physique.card.v1"
    assert surface.body == surface.canonical().body == row["fallback"]
    # The projection is the source with the block inserted right before the
    # final status line: every source byte kept, in order.
    source = row["canonical"]
    head = source[: -len(STATUS_LINE)]
    assert row["fallback"] == head + PROJECTION + STATUS_LINE
    assert row["fallback"].replace(PROJECTION, "", 1) == source


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_only_the_sentence_is_a_slot(row: dict[str, Any]) -> None:
    surface = _parse(row["canonical"])
    (slot,) = surface.slots
    assert [type(seg) for seg in surface.segments] == [Locked, SlotRef, Locked]
    assert slot.slot_id == REVIEW_SLOT == "adaptive.physique.review_instruction"
    assert [(p.token, p.semantic_id) for p in slot.placeholders] == [
        ("[[A:01]]", REVIEW_INSTRUCTION_ID)
    ]
    assert slot.canonical_text == SENTENCE == GLOSSARY["A_OPERATOR_REVIEW_DECISION"] + "."
    policy = slot.policy()
    assert policy.allowed_predicate_ids == () and policy.allowed_action_ids == (
        REVIEW_INSTRUCTION_ID,
    )
    assert (policy.max_generated_chars, policy.max_style_lexemes) == (128, 10)
    head, tail = surface.canonical().locked_texts()
    assert head == row["canonical"][: -len(STATUS_LINE)] + REVIEW_HEADING + "\n"
    assert tail == "\n\n" + STATUS_LINE


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_render_selected(row: dict[str, Any]) -> None:
    surface = _parse(row["canonical"])
    selected = surface.render({REVIEW_SLOT: row["generated"]})
    assert selected.body == row["selected"]
    assert selected.body != row["fallback"]
    assert_layout_identical(surface, selected.body)
    assert selected.body.endswith(
        f"\n\n{REVIEW_HEADING}\n"
        + row["generated"].replace("[[A:01]].", SENTENCE)
        + "\n\n"
        + STATUS_LINE
    )


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_fallback_is_the_canonical_projection(row: dict[str, Any]) -> None:
    surface = _parse(row["canonical"])
    # The plan's own rejected example smuggles a completed-verification claim.
    for bad in ("확인 결과, [[A:01]].", "이미 승인했습니다. [[A:01]].", "[[A:01]]."):
        with pytest.raises(RenderError) as info:
            surface.render({REVIEW_SLOT: bad})
        assert info.value.reason is RenderReason.COMPOSITION_REJECTED
    assert surface.canonical().body == row["fallback"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_locked_spans_identical(row: dict[str, Any]) -> None:
    surface = _parse(row["canonical"])
    canonical = surface.canonical()
    selected = surface.render({REVIEW_SLOT: row["generated"]})
    assert_locked_identical(canonical, selected)
    head, _ = canonical.locked_texts()
    assert head.startswith(TITLE_PREFIX) and f"\n{ENVELOPE_SEPARATOR_LINE}\n" in head


def test_utf16_offsets_are_code_units_not_code_points() -> None:
    row = GOLDEN[2]  # emoji in the title, customer, decision, basis and meal
    surface = _parse(row["canonical"])
    canonical = surface.canonical()
    head, tail = canonical.locked_texts()
    astral = [c for c in head if ord(c) > 0xFFFF]
    assert astral == ["🏃", "🙂", "🍚", "📈", "🥣"]
    assert canonical.locked_spans_utf16 == (
        (0, len(head) + 5),
        (len(head) + 5 + len(SENTENCE), len(head) + 5 + len(SENTENCE) + len(tail)),
    )
    selected = surface.render({REVIEW_SLOT: "우선 [[A:01]]."})
    assert selected.locked_spans_utf16[1][0] - canonical.locked_spans_utf16[1][0] == len("우선 ")


def test_telegram_limit_counts_the_projection() -> None:
    # The PRESENTED body must fit: a source that fits but whose projection
    # does not is ineligible.
    row = GOLDEN[1]
    base = _format({**row, "title": ""})
    projected_extra = utf16_len(PROJECTION)
    room = TELEGRAM_MAX_UTF16 - projected_extra - utf16_len(base) - len(" · ")
    title = "🏋" * (room // 2) + "가" * (room % 2)
    exact = _format({**row, "title": title})
    surface = _parse(exact)
    assert utf16_len(surface.canonical().body) == TELEGRAM_MAX_UTF16
    over = _format({**row, "title": title + "가"})
    assert utf16_len(over) < TELEGRAM_MAX_UTF16
    with pytest.raises(Ineligible) as info:
        _parse(over)
    assert info.value.reason is IneligibleReason.TOO_LONG_UTF16
    with pytest.raises(RenderError) as render_info:
        surface.render({REVIEW_SLOT: row["generated"]})
    assert render_info.value.reason is RenderReason.TOO_LONG_UTF16


# --- ineligible card text -------------------------------------------------------------

BASE: str = GOLDEN[0]["canonical"]


def _with(base: str, old: str, new: str) -> str:
    assert base.count(old) == 1, old
    return base.replace(old, new)


# fmt: off
INELIGIBLE: list[tuple[str, str, IneligibleReason]] = [
    ("crlf", BASE.replace("\n", "\r\n"), IneligibleReason.CARRIAGE_RETURN),
    ("trailing_newline", BASE + "\n", IneligibleReason.TRAILING_NEWLINE),
    ("tab_in_title", _with(BASE, "김민지 님", "김민지\t님"), IneligibleReason.CONTROL_CHARACTER),
    ("extra_blank_line", _with(BASE, "\n\n상태", "\n\n\n상태"), IneligibleReason.BLANK_LINE_MISMATCH),
    ("no_blank_line_before_status", _with(BASE, "\n\n상태", "\n상태"), IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("blank_line_inside_lines", _with(BASE, "\n결정:", "\n\n결정:"), IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    # A projected text fed back (a persisted card) is never projected twice.
    ("projection_fed_back", GOLDEN[0]["fallback"], IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("selected_fed_back", GOLDEN[0]["selected"], IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("review_heading_in_lines", _with(BASE, "\n메모:", "\n검토 안내\n메모:"), IneligibleReason.FACT_LINE_MALFORMED),
    ("title_prefix_altered", _with(BASE, TITLE_PREFIX, "[피지크코치] 적응형 영양 제안"), IneligibleReason.TITLE_INVALID),
    ("separator_altered", _with(BASE, ENVELOPE_SEPARATOR_LINE, "-" * 12), IneligibleReason.ENVELOPE_SEPARATOR_MISSING),
    ("line_without_label", _with(BASE, "결정: 탄수화물 20g 감량", "탄수화물 20g 감량"), IneligibleReason.FACT_LINE_MALFORMED),
    ("label_unknown", _with(BASE, "주기:", "사이클:"), IneligibleReason.FACT_LABEL_UNKNOWN),
    ("label_duplicate", _with(BASE, "식단:", "목표:"), IneligibleReason.FACT_LABEL_DUPLICATE),
    ("decision_missing", _with(BASE, "결정: 탄수화물 20g 감량\n", ""), IneligibleReason.FACT_LABEL_MISSING),
    ("basis_missing", _with(BASE, "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n", ""), IneligibleReason.FACT_LABEL_MISSING),
    ("decision_after_basis", _with(BASE, "결정: 탄수화물 20g 감량\n근거: 최근 7일 평균 체중 증가가 목표보다 빠름", "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n결정: 탄수화물 20g 감량"), IneligibleReason.FACT_LABEL_ORDER),
    ("optional_lines_reordered", _with(BASE, "목표: 하루 2,300kcal · 단백질 150g\n주기: 고탄수 3일 / 저탄수 4일", "주기: 고탄수 3일 / 저탄수 4일\n목표: 하루 2,300kcal · 단백질 150g"), IneligibleReason.FACT_LABEL_ORDER),
    ("value_empty", _with(BASE, "메모: 운동 후 탄수화물 우선", "메모: "), IneligibleReason.FACT_VALUE_EMPTY),
    ("day_count_missing", _with(BASE, " (D+12)", ""), IneligibleReason.DAY_COUNT_MALFORMED),
    ("day_count_leading_zero", _with(BASE, "(D+12)", "(D+012)"), IneligibleReason.DAY_COUNT_MALFORMED),
    ("day_count_negative", _with(BASE, "(D+12)", "(D-12)"), IneligibleReason.DAY_COUNT_MALFORMED),
    ("day_count_fullwidth", _with(BASE, "(D+12)", "(D+１２)"), IneligibleReason.DAY_COUNT_MALFORMED),
    ("status_altered", _with(BASE, STATUS_LINE, "상태: 운영자 승인 완료 · 고객에게 전달됨"), IneligibleReason.FINAL_LINE_MISSING),
    ("status_one_char", _with(BASE, STATUS_LINE, STATUS_LINE.replace("·", "-")), IneligibleReason.FINAL_LINE_MISSING),
]
# fmt: on

COVERED_REASONS = {case[2] for case in INELIGIBLE} | {IneligibleReason.TOO_LONG_UTF16}


@pytest.mark.parametrize(("name", "text", "reason"), INELIGIBLE, ids=[c[0] for c in INELIGIBLE])
def test_ineligible(name: str, text: str, reason: IneligibleReason) -> None:
    with pytest.raises(Ineligible) as info:
        _parse(text)
    assert info.value.reason is reason
    assert info.value.args == (reason.value,)


def test_labels() -> None:
    assert LINE_LABELS == ("고객", "기준일", "결정", "근거", "목표", "주기", "식단", "메모")
    assert REQUIRED_LABELS == ("고객", "기준일", "결정", "근거")
    assert STATUS_LINE == "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"


BAD_FORMAT_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("newline_title", {"title": "가\n나"}),
    ("empty_customer", {"customer": ""}),
    ("empty_day", {"day": ""}),
    ("negative_day_count", {"day_count": -1}),
    ("bool_day_count", {"day_count": True}),
    ("missing_decision", {"decision": None}),
    ("empty_note", {"note": ""}),
    ("cr_meal", {"meal": "가\r"}),
]


@pytest.mark.parametrize(
    ("name", "changes"), BAD_FORMAT_INPUTS, ids=[c[0] for c in BAD_FORMAT_INPUTS]
)
def test_format_physique_card_rejects_what_the_grammar_cannot_carry(
    name: str, changes: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        format_physique_card(**{**{k: GOLDEN[0][k] for k in _FORMAT_KEYS}, **changes})


# --- properties ----------------------------------------------------------------------

_optional = st.one_of(st.none(), LINES)


@st.composite
def _cards(draw: st.DrawFn) -> str:
    return format_physique_card(
        title=draw(st.one_of(st.just(""), LINES)),
        customer=draw(LINES),
        day=draw(LINES),
        day_count=draw(st.integers(min_value=0, max_value=10_000)),
        decision=draw(LINES),
        basis=draw(LINES),
        target=draw(_optional),
        cycle=draw(_optional),
        meal=draw(_optional),
        note=draw(_optional),
    )


@settings(max_examples=150, deadline=None)
@given(text=_cards())
def test_property_parse_canonical_round_trip(text: str) -> None:
    surface = _parse(text)
    head, tail = surface.canonical().locked_texts()
    assert head + SENTENCE + tail == surface.canonical().body
    # Removing the projection gives back the source text, byte for byte.
    assert surface.canonical().body.replace(PROJECTION, "", 1) == text
    assert surface.canonical().body.endswith(PROJECTION + STATUS_LINE)


@settings(max_examples=150, deadline=None)
@given(text=_cards(), data=st.data())
def test_property_grammar_compositions_keep_every_locked_byte(
    text: str, data: st.DataObject
) -> None:
    surface = _parse(text)
    generated = data.draw(composition_for_every_slot(surface))
    assert_grammar_accepts(surface, generated)
    selected = surface.render(generated)
    assert_locked_identical(surface.canonical(), selected)
    assert_layout_identical(surface, selected.body)

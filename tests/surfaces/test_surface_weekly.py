"""``weekly.v1``: the real host's reports, byte for byte (docs/host-formats.md).

STYLE (h11 ``SIMPLE_CASES``): one golden table drives the layout renderer, the
adapter, the selected body and the canonical fallback. Bodies are literals, not
computed. The host's own test goldens are recorded verbatim; the properties
build host-shaped reports from random summaries with a test-only model of the
host's renderer (``reference_host.host_render``).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_host.host_render import (
    BRANCH_TEXT,
    CHANGE_FIELDS,
    GOAL_FIELDS,
    INTERPRETATION_FIELDS,
    PRIOR_FIELDS,
    RATE_FIELDS,
    RATIONALE_FIELDS,
    RECENT_FIELDS,
    render_weekly,
)
from surface_support import (
    assert_grammar_accepts,
    assert_layout_identical,
    assert_locked_identical,
    composition_for_every_slot,
    render_if_it_fits,
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
    EXPLICIT_PROSE_FIELDS,
    FACT_LABELS,
    INTERPRETATION_SLOT,
    JUDGMENT_LABEL,
    RATIONALE_SLOT,
    SURFACE,
    TITLE,
    WeeklyInterpretation,
    WeeklyJudgment,
    WeeklyRationale,
    format_weekly,
    parse_weekly,
)
from kexpr.spool.contract import (
    Reason,
    SlotPolicy,
    check_generated,
    check_grammar,
    fit,
    slot_policy,
)

# --- the host's own test goldens ---------------------------------------------------
# Recorded verbatim from Carrie111998/Hermes
# tests/gateway/test_telegram_physique_checkin.py@4305027f67e404cddc634cbd7da5c1825ac7920d.

# test_weekly_copy_renders_averages_rate_judgment_and_actions: the summary carries
# explicit interpretation, rationale, actions and judgment: ineligible.
HOST_W1 = (
    "이번 주 린매스업 리포트\n\n- 최근 7일 평균 체중: 78.47kg\n- 이전 7일 평균 체중: 78.34kg\n"
    "- 주간 변화: +0.16%\n- 체크인율: 100%\n- 목표 범위: +0.10~+0.25%\n\n"
    "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다.\n"
    "현재 속도라면 불필요한 체지방 증가 위험은 높지 않습니다.\n\n이번 주 판단: 유지\n\n"
    "- 기준 섭취량: 2,600kcal 유지\n- 단백질: 하루 160g 유지\n"
    "- 운동일에는 탄수화물을 운동 전후에 우선 배치\n- 다음 주에도 같은 조건으로 체중 추세 확인\n\n"
    "급격한 증량이나 정체가 없어 이번 주에는 칼로리를 변경하지 않습니다."
)
HOST_W1_FIELDS = ("interpretation", "rationale", "actions", "judgment")
# test_weekly_copy_fails_closed_when_no_report_data_exists: I1 + P_WEEKLY_RECORDS_INSUFFICIENT.
HOST_W2 = (
    "이번 주 린매스업 리포트\n\n- 최근 7일 평균 체중: 기록 없음\n- 이전 7일 평균 체중: 기록 없음\n"
    "- 주간 변화: 기록 없음\n- 목표 범위: 기록 없음\n\n"
    "최근 7일 평균과 이전 7일 평균을 확인할 수 없어 추세를 판단하지 않습니다.\n"
    "기록이 보완된 뒤 유지·조정 여부를 다시 확인합니다.\n\n이번 주 판단: 기록 보완\n\n"
    "- 다음 체크인에서 체중과 섭취 기록을 보완합니다.\n\n"
    "기록이 충분하지 않아 이번 주 판단을 확정하지 않습니다."
)


def test_host_golden_w1_explicit_fields_is_ineligible() -> None:
    with pytest.raises(Ineligible) as info:
        parse_weekly(HOST_W1, explicit_fields=HOST_W1_FIELDS)
    assert info.value.reason is IneligibleReason.EXPLICIT_SOURCE_FIELD
    # Even a caller that forgot the fields cannot get it accepted: its text is not
    # a typed branch.
    with pytest.raises(Ineligible) as info:
        parse_weekly(HOST_W1)
    assert info.value.reason is IneligibleReason.INTERPRETATION_TEXT_MISMATCH


def test_host_golden_w2_is_eligible_and_round_trips() -> None:
    surface = parse_weekly(HOST_W2, explicit_fields=())
    assert surface.canonical().body == HOST_W2
    # I1 and the records rationale: the fit table leaves them no word (design §6.1),
    # so the report is one locked text with nothing to style.
    assert surface.slots == ()
    for slot_id, ids in (
        (INTERPRETATION_SLOT, ("P_WEEKLY_TREND_UNAVAILABLE", "A_WEEKLY_RECHECK_AFTER_RECORD")),
        (RATIONALE_SLOT, ("P_WEEKLY_RECORDS_INSUFFICIENT",)),
    ):
        assert not fit.slot_styleable(slot_id, ids)


_EXAMPLES = Path(__file__).parent / "goldens" / "host-examples.jsonl"


def _host_examples() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in _EXAMPLES.read_text("utf-8").splitlines() if line]
    return [row for row in rows if row["request"]["surface"] == SURFACE]


@pytest.mark.parametrize("example", _host_examples(), ids=lambda row: str(row["example"]))
def test_produced_host_examples_give_the_expected_verdict(example: dict[str, Any]) -> None:
    request = example["request"]
    fields = request.get("explicit_fields", [])
    if example["expected"] == "eligible":
        surface = parse_weekly(request["body"], explicit_fields=fields)
        assert surface.canonical().body == request["body"]
    else:
        with pytest.raises(Ineligible):
            parse_weekly(request["body"], explicit_fields=fields)


def test_host_examples_cover_both_verdicts() -> None:
    assert {row["expected"] for row in _host_examples()} == {"eligible", "ineligible"}


# --- golden table -------------------------------------------------------------------

W3_FACTS = (
    "- 최근 7일 평균 체중: 78.47kg\n- 이전 7일 평균 체중: 78.34kg\n- 주간 변화: +0.17%\n"
    "- 체크인율: 100%\n- 목표 범위: +0.10~+0.25%"
)
W4_FACTS = (
    "- 최근 7일 평균 체중: 79.00kg\n- 이전 7일 평균 체중: 78.34kg\n- 주간 변화: +0.84%\n"
    "- 체크인율: 92.86%\n- 목표 범위: +0.10%~+0.25%"
)
W5_FACTS = (
    "- 최근 7일 평균 체중: 78.00kg\n- 이전 7일 평균 체중: 78.00kg\n- 주간 변화: 0.00%\n"
    "- 목표 범위: 기록 없음"
)
W2_FACTS = (
    "- 최근 7일 평균 체중: 기록 없음\n- 이전 7일 평균 체중: 기록 없음\n- 주간 변화: 기록 없음\n"
    "- 목표 범위: 기록 없음"
)
I1, I2, I3, I4 = (BRANCH_TEXT[k] for k in ("I1", "I2", "I3", "I4"))
KEEP_R = "급격한 증량이나 정체가 없어 이번 주에는 기준을 유지합니다."
REVIEW_R = "목표 범위를 벗어난 변화가 확인되어 다음 기록에서 조정을 검토합니다."
RECORDS_R = "기록이 충분하지 않아 이번 주 판단을 확정하지 않습니다."
KEEP_A = "다음 주에도 같은 조건으로 체중 추세를 확인합니다."
REVIEW_A = "다음 기록에서 섭취량과 체중 변화를 함께 확인합니다."
RECORDS_A = "다음 체크인에서 체중과 섭취 기록을 보완합니다."


def _body(facts: str, interpretation: str, judgment: str, actions: str, rationale: str) -> str:
    return (
        f"{TITLE}\n\n{facts}\n\n{interpretation}\n\n{JUDGMENT_LABEL}{judgment}\n\n"
        f"{actions}\n\n{rationale}"
    )


# Hermes@4305027f gateway/platforms/telegram.py, TelegramAdapter._nutrition_weekly_actions
# and _nutrition_copy_lines (behaviour, not code): with no `actions` field the host
# reads keep_behaviors with limit 6, then change_behaviors with limit 6 - len(actions).
# When keep_behaviors fills all six the second limit is 0, which copy_lines never
# reaches once it has kept a line: every usable change line is added. So the host
# renders MORE than six action bullets, all locked material (not a prose field).
SEVEN_PLUS_SUMMARY: dict[str, Any] = {
    "average_weight_kg": 78.47,
    "prior_average_weight_kg": 78.34,
    "checkin_rate_percent": 100,
    "goal_range": "+0.10~+0.25%",
    "keep_behaviors": [f"유지 행동 {n}" for n in range(1, 7)],
    "change_behaviors": ["바꿀 행동 1", "바꿀 행동 2", "바꿀 행동 3"],
}
SEVEN_PLUS_BODY = _body(
    W3_FACTS,
    I3,
    "유지",
    "\n".join([f"- 유지 행동 {n}" for n in range(1, 7)] + [f"- 바꿀 행동 {n}" for n in (1, 2, 3)]),
    KEEP_R,
)


def test_more_than_six_actions_from_keep_and_change_behaviors_are_eligible() -> None:
    assert render_weekly(SEVEN_PLUS_SUMMARY) == (SEVEN_PLUS_BODY, frozenset())
    surface = parse_weekly(SEVEN_PLUS_BODY, explicit_fields=sorted(SEVEN_PLUS_SUMMARY))
    assert surface.canonical().body == SEVEN_PLUS_BODY
    assert surface.slots == ()  # I3: nothing to style
    # The layout renderer carries any number of actions too.
    nine = tuple(line[2:] for line in SEVEN_PLUS_BODY.split("\n\n")[4].split("\n"))
    laid_out = format_weekly(**dict(GOLDEN[0]["format"], actions=nine))
    assert laid_out.split("\n\n")[4].split("\n") == ["- " + a for a in nine]
    assert parse_weekly(laid_out).canonical().body == laid_out


# name, format_weekly inputs, composition, canonical, and a composition the grammar
# accepts but the fit table does not (design §6.1), with the reason of its first
# rejected slot. Only the goal-missing report (I2) has a slot, its interpretation
# (design §6.2): its row's composition is one of its two and it has a selected body.
# Every other row's composition is what the table accepted before the readers'
# verdicts, now refused: those reports are locked text with nothing to style.
GOLDEN: list[dict[str, Any]] = [
    {
        "name": "w3_in_goal_keep",  # HOST-FORMATS W3
        "format": {
            "recent": "78.47kg",
            "prior": "78.34kg",
            "change": "+0.17%",
            "rate": "100%",
            "goal_range": "+0.10~+0.25%",
            "interpretation": WeeklyInterpretation.IN_GOAL,
            "judgment": WeeklyJudgment.KEEP,
        },
        "generated": {
            INTERPRETATION_SLOT: "먼저, [[P:01]]. 그리고 [[P:02]].",
            RATIONALE_SLOT: "그리고 [[A:01]].",
        },
        "misfit": (
            {
                INTERPRETATION_SLOT: "차분히, [[P:01]]. 이어서 [[P:02]].",
                RATIONALE_SLOT: "우선 [[A:01]].",
            },
            Reason.STYLE_MISFIT,
        ),
        "canonical": _body(W3_FACTS, I3, "유지", "- " + KEEP_A, KEEP_R),
    },
    {
        "name": "w4_out_of_goal_review",  # HOST-FORMATS W4
        "format": {
            "recent": "79.00kg",
            "prior": "78.34kg",
            "change": "+0.84%",
            "rate": "92.86%",
            "goal_range": "+0.10%~+0.25%",
            "interpretation": WeeklyInterpretation.OUT_OF_GOAL,
            "judgment": WeeklyJudgment.REVIEW,
        },
        "generated": {
            INTERPRETATION_SLOT: "[[P:01]]. 그리고 [[A:01]].",
            RATIONALE_SLOT: "그리고 [[A:01]].",
        },
        "misfit": (
            {
                INTERPRETATION_SLOT: "우선 [[P:01]]. 이제 [[A:01]].",
                RATIONALE_SLOT: "하나씩 [[A:01]].",
            },
            Reason.STYLE_MISFIT,
        ),
        "canonical": _body(W4_FACTS, I4, "조정 검토", "- " + REVIEW_A, REVIEW_R),
    },
    {
        "name": "w5_goal_missing_records",  # HOST-FORMATS W5
        "format": {
            "recent": "78.00kg",
            "prior": "78.00kg",
            "change": "0.00%",
            "goal_range": "기록 없음",
            "interpretation": WeeklyInterpretation.GOAL_MISSING,
            "judgment": WeeklyJudgment.RECORDS,
        },
        "generated": {INTERPRETATION_SLOT: "[[P:01]]. 다만 [[A:01]]."},
        "misfit": ({INTERPRETATION_SLOT: "[[P:01]]. 차분히 [[A:01]]."}, Reason.STYLE_MISFIT),
        "canonical": _body(W5_FACTS, I2, "기록 보완", "- " + RECORDS_A, RECORDS_R),
        "selected": _body(
            W5_FACTS,
            "최근 7일 평균과 이전 7일 평균의 차이를 확인했습니다.\n"
            "다만 목표 범위가 없어 이번 주 조정 판단은 보류합니다.",
            "기록 보완",
            "- " + RECORDS_A,
            RECORDS_R,
        ),
    },
    {
        "name": "w2_trend_unavailable_records",  # the host's golden W2
        "format": {
            "recent": "기록 없음",
            "prior": "기록 없음",
            "change": "기록 없음",
            "goal_range": "기록 없음",
            "interpretation": WeeklyInterpretation.TREND_UNAVAILABLE,
            "judgment": WeeklyJudgment.RECORDS,
        },
        "generated": {
            INTERPRETATION_SLOT: "먼저, [[P:01]]. 그리고 [[A:01]].",
            RATIONALE_SLOT: "그리고 [[P:01]].",
        },
        # The interpretation fits; the rationale's manner word does not.
        "misfit": (
            {
                INTERPRETATION_SLOT: "먼저, [[P:01]]. 그리고 [[A:01]].",
                RATIONALE_SLOT: "차분히, [[P:01]].",
            },
            Reason.STYLE_MISFIT,
        ),
        "canonical": HOST_W2,
    },
    {
        # An explicit judgment and six explicit actions (locked lines) after I3;
        # free customer text in the values.
        "name": "in_goal_explicit_review_six_actions",
        "format": {
            "recent": "1,078.90kg",
            "prior": "🏋 약 80kg",
            "change": "체중: 변화 없음 / 확인",
            "rate": "6/7 · 좋음",
            "goal_range": "+0.10%~+0.25%",
            "interpretation": WeeklyInterpretation.IN_GOAL,
            "judgment": WeeklyJudgment.REVIEW,
            "actions": ("a", "- b", "기준 섭취량: 2,600kcal 유지", "🍚 줄이기", "e", "f"),
        },
        "generated": {
            INTERPRETATION_SLOT: "먼저, [[P:01]]. 이어서, [[P:02]].",
            RATIONALE_SLOT: "그리고 [[A:01]].",
        },
        "misfit": (
            {
                INTERPRETATION_SLOT: "여기서 [[P:01]]. 이어서, [[P:02]].",
                RATIONALE_SLOT: "차분히 [[A:01]].",
            },
            Reason.STYLE_MISFIT,
        ),
        "canonical": _body(
            "- 최근 7일 평균 체중: 1,078.90kg\n- 이전 7일 평균 체중: 🏋 약 80kg\n"
            "- 주간 변화: 체중: 변화 없음 / 확인\n- 체크인율: 6/7 · 좋음\n- 목표 범위: +0.10%~+0.25%",
            I3,
            "조정 검토",
            "- a\n- - b\n- 기준 섭취량: 2,600kcal 유지\n- 🍚 줄이기\n- e\n- f",
            REVIEW_R,
        ),
    },
]

GOLDEN_IDS = [row["name"] for row in GOLDEN]


def test_golden_rows_cover_every_branch_and_judgment() -> None:
    assert {row["format"]["interpretation"] for row in GOLDEN} == set(WeeklyInterpretation)
    assert {row["format"]["judgment"] for row in GOLDEN} == set(WeeklyJudgment)


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_format(row: dict[str, Any]) -> None:
    assert format_weekly(**row["format"]) == row["canonical"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_parse_round_trip(row: dict[str, Any]) -> None:
    for fields in ((), ["actions", "judgment", "keep_behaviors", "unknown_field"]):
        surface = parse_weekly(row["canonical"], explicit_fields=fields)
        assert surface.surface == SURFACE == "weekly.v1"
        assert surface.canonical().body == row["canonical"]


def _styled(row: dict[str, Any]) -> bool:
    return bool(row["format"]["interpretation"] is WeeklyInterpretation.GOAL_MISSING)


def _policies(row: dict[str, Any]) -> dict[str, SlotPolicy]:
    """The two paragraphs' policies, whether or not the surface offers them."""
    return {
        INTERPRETATION_SLOT: slot_policy(INTERPRETATION_SLOT, row["format"]["interpretation"].ids),
        RATIONALE_SLOT: slot_policy(RATIONALE_SLOT, row["format"]["judgment"].rationale.ids),
    }


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_slots_are_the_styleable_typed_paragraphs(row: dict[str, Any]) -> None:
    surface = parse_weekly(row["canonical"])
    policies = _policies(row)
    for slot_id, limits in ((INTERPRETATION_SLOT, (220, 16)), (RATIONALE_SLOT, (144, 10))):
        policy = policies[slot_id]
        assert (policy.max_generated_chars, policy.max_style_lexemes) == limits
    # The rationale is never a slot (design §6.1): the host's last line, locked.
    assert not fit.slot_styleable(RATIONALE_SLOT, policies[RATIONALE_SLOT].semantic_ids)
    assert row["canonical"].endswith("\n\n" + row["format"]["judgment"].rationale.text)
    assert surface.canonical().locked_texts()[-1].endswith(row["format"]["judgment"].rationale.text)
    if not _styled(row):
        assert surface.slots == ()
        assert [type(seg) for seg in surface.segments] == [Locked]
        interpretation_ids = policies[INTERPRETATION_SLOT].semantic_ids
        assert not fit.slot_styleable(INTERPRETATION_SLOT, interpretation_ids)
        return
    (interpretation,) = surface.slots
    assert [type(seg) for seg in surface.segments] == [Locked, SlotRef, Locked]
    assert interpretation.slot_id == INTERPRETATION_SLOT == "weekly.interpretation"
    assert RATIONALE_SLOT == "weekly.rationale"
    ids = row["format"]["interpretation"].ids
    assert tuple(p.semantic_id for p in interpretation.placeholders) == ids
    assert tuple(p.token for p in interpretation.placeholders) == ("[[P:01]]", "[[A:01]]")
    # The interpretation slot is the host's two lines.
    assert interpretation.canonical_text.count("\n") == 1
    assert interpretation.sentence_separator == "\n"
    assert interpretation.policy() == policies[INTERPRETATION_SLOT]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_render_selected(row: dict[str, Any]) -> None:
    surface = parse_weekly(row["canonical"])
    if not _styled(row):
        # Nothing to style: the only rendering is the host's body, and the
        # composition the table used to accept is refused and has no slot.
        assert surface.render({}).body == row["canonical"]
        for slot_id, text in row["generated"].items():
            assert check_grammar(_policies(row)[slot_id], text) is None
        assert any(
            check_generated(_policies(row)[slot_id], text) is not None
            for slot_id, text in row["generated"].items()
        )
        with pytest.raises(RenderError) as info:
            surface.render(row["generated"])
        assert info.value.reason is RenderReason.UNKNOWN_SLOT
        return
    selected = surface.render(row["generated"])
    assert selected.body == row["selected"]
    assert selected.body.count("\n") == row["canonical"].count("\n")
    assert_layout_identical(surface, selected.body)
    assert_locked_identical(surface.canonical(), selected)


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_misfit_is_rejected(row: dict[str, Any]) -> None:
    # Words the grammar admits but that change a sentence's claim: the fit table
    # rejects them (design §6.1); the body stays canonical.
    surface = parse_weekly(row["canonical"])
    generated, reason = row["misfit"]
    policies = _policies(row)
    for slot_id, text in generated.items():
        assert check_grammar(policies[slot_id], text) is None
    first = next(
        r for r in (check_generated(policies[k], t) for k, t in generated.items()) if r is not None
    )
    assert first is reason
    with pytest.raises(RenderError) as info:
        surface.render(generated)
    if _styled(row):
        assert_grammar_accepts(surface, generated)
        assert info.value.reason is RenderReason.COMPOSITION_REJECTED
        assert info.value.contract_reason is reason
    else:
        assert info.value.reason is RenderReason.UNKNOWN_SLOT
    assert surface.canonical().body == row["canonical"]


@pytest.mark.parametrize("row", GOLDEN, ids=GOLDEN_IDS)
def test_golden_fallback_is_canonical(row: dict[str, Any]) -> None:
    surface = parse_weekly(row["canonical"])
    bad = {INTERPRETATION_SLOT: "오늘은 [[P:01]]. [[A:01]]."}
    with pytest.raises(RenderError) as info:
        surface.render(bad)
    if _styled(row):
        assert info.value.reason is RenderReason.COMPOSITION_REJECTED
        with pytest.raises(RenderError) as info:
            surface.render({})
        assert info.value.reason is RenderReason.MISSING_SLOT
        # An answer for the locked rationale is one for a slot the body lacks.
        with pytest.raises(RenderError) as info:
            surface.render({**row["generated"], RATIONALE_SLOT: "다만 [[P:01]]."})
        assert info.value.reason is RenderReason.UNKNOWN_SLOT
    else:
        assert info.value.reason is RenderReason.UNKNOWN_SLOT
        assert surface.render({}).body == row["canonical"]
    assert surface.canonical().body == row["canonical"]


_STYLED_ROW = next(row for row in GOLDEN if _styled(row))


def test_utf16_offsets_are_code_units_not_code_points() -> None:
    row = GOLDEN[4]  # emoji in the values and actions
    canonical = parse_weekly(row["canonical"]).canonical()
    assert canonical.locked_texts() == (row["canonical"],)  # I3: nothing to style
    assert canonical.locked_spans_utf16 == ((0, len(row["canonical"]) + 2),)  # 🏋 🍚
    # The same report on the goal-missing branch: the one slot between them.
    body = format_weekly(**dict(row["format"], interpretation=WeeklyInterpretation.GOAL_MISSING))
    surface = parse_weekly(body)
    canonical = surface.canonical()
    head, tail = canonical.locked_texts()
    assert utf16_len(head) == len(head) + 1  # 🏋
    assert utf16_len(tail) == len(tail) + 1  # 🍚
    selected = surface.render(_STYLED_ROW["generated"])
    # "다만 " (3 units) before the hold.
    assert selected.locked_spans_utf16[0] == canonical.locked_spans_utf16[0]
    assert selected.locked_spans_utf16[1][0] - canonical.locked_spans_utf16[1][0] == 3
    assert utf16_len(selected.body) == utf16_len(canonical.body) + 3


def test_telegram_limit_boundary_counts_utf16_units() -> None:
    row = _STYLED_ROW

    def body(prior: str) -> str:
        return format_weekly(**dict(row["format"], prior=prior))

    room = TELEGRAM_MAX_UTF16 - (utf16_len(body("a")) - 1)
    value = "🏋" * (room // 2) + "가" * (room % 2)
    exact = body(value)
    assert utf16_len(exact) == TELEGRAM_MAX_UTF16
    surface = parse_weekly(exact)
    assert surface.canonical().body == exact
    with pytest.raises(Ineligible) as info:
        parse_weekly(body(value + "가"))
    assert info.value.reason is IneligibleReason.TOO_LONG_UTF16
    with pytest.raises(RenderError) as render_info:
        surface.render(row["generated"])
    assert render_info.value.reason is RenderReason.TOO_LONG_UTF16


# --- explicit fields (Rule 1) -----------------------------------------------------


@pytest.mark.parametrize("field", sorted(EXPLICIT_PROSE_FIELDS))
def test_each_explicit_prose_field_is_ineligible_by_presence(field: str) -> None:
    # Even though the body is exactly a typed branch (the host fell back to it).
    for fields in ([field], (field, "actions"), {field}, frozenset({"judgment", field})):
        with pytest.raises(Ineligible) as info:
            parse_weekly(HOST_W2, explicit_fields=fields)
        assert info.value.reason is IneligibleReason.EXPLICIT_SOURCE_FIELD


def test_explicit_prose_fields_are_the_plans_six() -> None:
    assert EXPLICIT_PROSE_FIELDS == {
        "interpretation",
        "trend_interpretation",
        "summary_text",
        "rationale",
        "judgment_rationale",
        "reason",
    }


@pytest.mark.parametrize(
    "fields",
    ["interpretation", b"reason", 3, None, ["actions", 1], [None], (b"rationale",)],
    ids=["bare_str", "bytes", "int", "none", "int_entry", "none_entry", "bytes_entry"],
)
def test_explicit_fields_of_the_wrong_type_are_facts_invalid(fields: object) -> None:
    with pytest.raises(Ineligible) as info:
        parse_weekly(HOST_W2, explicit_fields=fields)  # type: ignore[arg-type]
    assert info.value.reason is IneligibleReason.FACTS_INVALID


# --- ineligible bodies ------------------------------------------------------------

BASE: str = GOLDEN[0]["canonical"]

# The format kexpr invented before it knew the host: free title, 7 labels,
# headings 주간 해석 / 판단 근거 / 다음 주 할 일, sentences on one line.
OLD_INVENTED = (
    "주간 리포트\n\n- 기간: 11월 24일 ~ 11월 30일\n- 평균 체중: 72.4kg\n- 체중 변화: +0.3kg\n"
    "- 목표 범위: 주당 +0.2~0.4kg\n- 주간 변화율: +0.4%\n- 기록률: 6/7일\n- 판단: 현재 계획 유지\n\n"
    "주간 해석\n체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다. "
    "현재 속도라면 이번 주에는 기준을 유지합니다.\n\n판단 근거\n"
    + KEEP_R
    + "\n\n다음 주 할 일\n- 매일 아침 공복 체중 기록하기"
)
# The old layout with the host's title and facts: still five paragraphs.
OLD_HEADINGS = BASE.replace(I3, "주간 해석\n" + I3.replace("\n", " ")).replace(
    "\n\n이번 주 판단: 유지", ""
)


def _with(base: str, old: str, new: str) -> str:
    assert base.count(old) == 1, old
    return base.replace(old, new)


# name, body, reason
# fmt: off
INELIGIBLE: list[tuple[str, str, IneligibleReason]] = [
    ("lone_surrogate", _with(BASE, "78.47kg", "78.\ud83d47kg"), IneligibleReason.INVALID_UNICODE),
    ("crlf", BASE.replace("\n", "\r\n"), IneligibleReason.CARRIAGE_RETURN),
    ("trailing_newline", BASE + "\n", IneligibleReason.TRAILING_NEWLINE),
    ("nel_in_value", _with(BASE, "78.47kg", "78.47\x85kg"), IneligibleReason.CONTROL_CHARACTER),
    ("double_blank", _with(BASE, "리포트\n\n", "리포트\n\n\n"), IneligibleReason.BLANK_LINE_MISMATCH),
    ("old_invented_format", OLD_INVENTED, IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("old_headings_five_paragraphs", OLD_HEADINGS, IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("rationale_missing", BASE.rsplit("\n\n", 1)[0], IneligibleReason.PARAGRAPH_COUNT_MISMATCH),
    ("title_free", _with(BASE, TITLE, "주간 리포트"), IneligibleReason.TITLE_INVALID),
    ("title_one_char", _with(BASE, TITLE, "이번 주 린매스업 리포트."), IneligibleReason.TITLE_INVALID),
    ("fact_not_bullet", _with(BASE, "- 주간 변화:", "주간 변화:"), IneligibleReason.FACT_LINE_MALFORMED),
    ("fact_without_separator", _with(BASE, "- 주간 변화: ", "- 주간 변화 "), IneligibleReason.FACT_LINE_MALFORMED),
    ("fact_label_old", _with(BASE, "- 체크인율:", "- 기록률:"), IneligibleReason.FACT_LABEL_UNKNOWN),
    ("fact_label_duplicate", _with(BASE, "- 이전 7일 평균 체중:", "- 최근 7일 평균 체중:"), IneligibleReason.FACT_LABEL_DUPLICATE),
    ("goal_range_missing", _with(BASE, "\n- 목표 범위: +0.10~+0.25%", ""), IneligibleReason.FACT_LABEL_MISSING),
    ("facts_reordered", _with(BASE, "- 체크인율: 100%\n- 목표 범위: +0.10~+0.25%", "- 목표 범위: +0.10~+0.25%\n- 체크인율: 100%"), IneligibleReason.FACT_LABEL_ORDER),
    ("fact_value_empty", _with(BASE, "- 체크인율: 100%", "- 체크인율: "), IneligibleReason.FACT_VALUE_EMPTY),
    ("interpretation_w1_explicit_line", HOST_W1, IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("interpretation_one_line", _with(BASE, I3, I3.replace("\n", " ")), IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("interpretation_lines_swapped", _with(BASE, I3, "\n".join(reversed(I3.split("\n")))), IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("interpretation_mixed_branches", _with(BASE, I3, I3.split("\n")[0] + "\n" + I4.split("\n")[1]), IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("interpretation_host_humanizer", _with(BASE, I3, "최근 기록을 이전 기간과 함께 보며 흐름을 확인했어요."), IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("judgment_label_missing", _with(BASE, "이번 주 판단: 유지", "판단: 유지"), IneligibleReason.JUDGMENT_LINE_MISSING),
    ("judgment_unknown", _with(BASE, "이번 주 판단: 유지", "이번 주 판단: 현재 계획 유지"), IneligibleReason.JUDGMENT_UNKNOWN),
    ("action_not_bullet", _with(BASE, "- " + KEEP_A, KEEP_A), IneligibleReason.ACTION_LINE_MALFORMED),
    ("action_empty", _with(BASE, "- " + KEEP_A, "- "), IneligibleReason.ACTION_LINE_MALFORMED),
    ("rationale_explicit", _with(BASE, KEEP_R, "급격한 증량이나 정체가 없어 이번 주에는 칼로리를 변경하지 않습니다."), IneligibleReason.RATIONALE_TEXT_MISMATCH),
    ("rationale_two_lines", _with(BASE, KEEP_R, KEEP_R + "\n" + KEEP_R), IneligibleReason.RATIONALE_TEXT_MISMATCH),
    ("rationale_of_another_judgment", _with(BASE, KEEP_R, REVIEW_R), IneligibleReason.RATIONALE_JUDGMENT_MISMATCH),
    ("selected_body_fed_back", GOLDEN[2]["selected"], IneligibleReason.INTERPRETATION_TEXT_MISMATCH),
    ("over_4096_utf16_units", _with(BASE, "78.47kg", "🏋" * 2100), IneligibleReason.TOO_LONG_UTF16),
]
# fmt: on


@pytest.mark.parametrize(("name", "body", "reason"), INELIGIBLE, ids=[c[0] for c in INELIGIBLE])
def test_ineligible(name: str, body: str, reason: IneligibleReason) -> None:
    with pytest.raises(Ineligible) as info:
        parse_weekly(body)
    assert info.value.reason is reason
    assert str(info.value) == reason.value
    assert info.value.args == (reason.value,)


def test_ineligible_input_types() -> None:
    with pytest.raises(Ineligible) as info:
        parse_weekly(BASE.encode())  # type: ignore[arg-type]
    assert info.value.reason is IneligibleReason.NOT_TEXT


COVERED_REASONS = {case[2] for case in INELIGIBLE} | {
    IneligibleReason.NOT_TEXT,
    IneligibleReason.FACTS_INVALID,
    IneligibleReason.EXPLICIT_SOURCE_FIELD,
}


# --- layout renderer and typed enums ------------------------------------------------

BAD_FORMAT_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("empty_value", dict(GOLDEN[0]["format"], recent="")),
    ("newline_value", dict(GOLDEN[0]["format"], goal_range="a\nb")),
    ("empty_rate", dict(GOLDEN[0]["format"], rate="")),
    ("untyped_interpretation", dict(GOLDEN[0]["format"], interpretation="I3")),
    ("untyped_judgment", dict(GOLDEN[0]["format"], judgment="유지")),
    ("no_actions", dict(GOLDEN[0]["format"], actions=())),
    ("actions_as_str", dict(GOLDEN[0]["format"], actions="a")),
    ("empty_action", dict(GOLDEN[0]["format"], actions=("",))),
]


@pytest.mark.parametrize(
    ("name", "kwargs"), BAD_FORMAT_INPUTS, ids=[c[0] for c in BAD_FORMAT_INPUTS]
)
def test_format_weekly_rejects_what_the_grammar_cannot_carry(
    name: str, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ValueError):
        format_weekly(**kwargs)


def test_typed_texts_are_the_hosts() -> None:
    assert [b.text for b in WeeklyInterpretation] == [I1, I2, I3, I4]
    assert [j.rationale.text for j in WeeklyJudgment] == [KEEP_R, REVIEW_R, RECORDS_R]
    assert [j.default_action for j in WeeklyJudgment] == [KEEP_A, REVIEW_A, RECORDS_A]
    assert [r.text for r in WeeklyRationale] == [KEEP_R, REVIEW_R, RECORDS_R]
    assert FACT_LABELS == (
        "최근 7일 평균 체중",
        "이전 7일 평균 체중",
        "주간 변화",
        "체크인율",
        "목표 범위",
    )


@pytest.mark.parametrize(
    ("branch", "judgment"), list(itertools.product(WeeklyInterpretation, WeeklyJudgment))
)
def test_every_branch_goes_with_every_judgment(
    branch: WeeklyInterpretation, judgment: WeeklyJudgment
) -> None:
    body = format_weekly(
        recent="기록 없음",
        prior="78.00kg",
        change="+0.10%",
        goal_range="(0.1, 0.2)",
        interpretation=branch,
        judgment=judgment,
    )
    surface = parse_weekly(body)
    assert surface.canonical().body == body
    # Only the goal-missing interpretation is a slot; the rationale never is.
    if branch is WeeklyInterpretation.GOAL_MISSING:
        (slot,) = surface.slots
        assert tuple(p.semantic_id for p in slot.placeholders) == branch.ids
    else:
        assert surface.slots == ()
    assert not fit.slot_styleable(RATIONALE_SLOT, judgment.rationale.ids)


# --- properties: host-shaped reports from random summaries -------------------------

_free = st.text(
    st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp", "Zs")), min_size=1, max_size=10
)
_words = st.lists(_free, min_size=1, max_size=3).map(" ".join)
_numbers = st.one_of(
    st.integers(min_value=-3, max_value=2_000),
    st.floats(min_value=-3, max_value=2_000, allow_nan=False, allow_infinity=False),
)
_weights = st.one_of(st.none(), st.just(""), _numbers, _numbers.map(str), _words)
_percents = st.one_of(
    st.none(),
    _numbers,
    st.floats(min_value=-1, max_value=1, allow_nan=False),
    _words,
    st.just(0),
)
_goal = st.one_of(
    st.none(),
    st.tuples(_percents, _percents).map(lambda t: f"{t[0]}~{t[1]}%"),
    st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    st.tuples(st.floats(-1, 1), st.floats(-1, 1)).map(lambda t: {"min": t[0], "max": t[1]}),
    st.tuples(st.floats(-1, 1), st.floats(-1, 1)).map(lambda t: {"low": t[0], "high": t[1]}),
    _words,
)
_lines = st.lists(_words, min_size=0, max_size=8)


def _one_of_fields(
    names: tuple[str, ...], values: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.just({}), st.tuples(st.sampled_from(names), values).map(lambda t: {t[0]: t[1]})
    )


_summaries = st.tuples(
    _one_of_fields(RECENT_FIELDS, _weights),
    _one_of_fields(PRIOR_FIELDS, _weights),
    _one_of_fields(CHANGE_FIELDS, _percents),
    _one_of_fields(RATE_FIELDS, st.one_of(st.floats(0, 100), st.integers(0, 100), _words)),
    _one_of_fields(GOAL_FIELDS, _goal),
    _one_of_fields(
        ("judgment", "decision", "weekly_judgment"),
        st.sampled_from(["유지", "조정 검토", "기록 보완", "조정 검토 필요", "모름"]),
    ),
    _one_of_fields(("actions", "keep_behaviors", "change_behaviors", "next_action"), _lines),
    # Both behaviour lists: keep filling six makes the host add every change line.
    st.one_of(
        st.just({}),
        st.tuples(st.lists(_words, min_size=5, max_size=8), _lines).map(
            lambda t: {"keep_behaviors": t[0], "change_behaviors": t[1]}
        ),
    ),
    _one_of_fields(
        (*INTERPRETATION_FIELDS, *RATIONALE_FIELDS), st.one_of(_lines, _words, st.just(""))
    ),
).map(lambda parts: {k: v for part in parts for k, v in part.items()})


@settings(max_examples=300, deadline=None)
@given(summary=_summaries)
def test_property_host_reports_eligible_exactly_as_the_plan_says(summary: dict[str, Any]) -> None:
    body, explicit = render_weekly(summary)
    if explicit:
        with pytest.raises(Ineligible) as info:
            parse_weekly(body, explicit_fields=sorted(summary))
        assert info.value.reason is IneligibleReason.EXPLICIT_SOURCE_FIELD
        return
    surface = parse_weekly(body, explicit_fields=sorted(summary))
    assert surface.canonical().body == body
    # The goal-missing interpretation is the one slot; every other report has none.
    interpretation = body.split("\n\n")[2]
    assert interpretation in BRANCH_TEXT.values()
    assert [s.canonical_text for s in surface.slots] == ([I2] if interpretation == I2 else [])
    assert body.rsplit("\n\n", 1)[1] in {r.text for r in WeeklyRationale}


@settings(max_examples=150, deadline=None)
@given(summary=_summaries, data=st.data())
def test_property_compositions_keep_every_locked_byte(
    summary: dict[str, Any], data: st.DataObject
) -> None:
    body, explicit = render_weekly(summary)
    if explicit:
        return
    surface = parse_weekly(body)
    generated = data.draw(composition_for_every_slot(surface))
    selected = render_if_it_fits(surface, generated)
    if selected is None:
        return  # the fit table's verdict, checked by render_if_it_fits
    assert_locked_identical(surface.canonical(), selected)
    assert_layout_identical(surface, selected.body)
    if not surface.slots:
        assert selected.body == body  # nothing to style
        return
    # Sentence i of the interpretation is on line i, as in the canonical text.
    interpretation = surface.slots[0]
    lines = selected.body.split("\n\n")[2].split("\n")
    assert len(lines) == 2
    for line, placeholder in zip(lines, interpretation.placeholders, strict=True):
        assert line.endswith(placeholder.expansion + ".")


def _fixed_spans(body: str) -> list[tuple[int, int]]:
    """[start, end) of the bytes the host never takes from the summary: the title,
    each fact line's "- " and label, the interpretation, the judgment line and
    the rationale (a typed report: its slots' canonical text is fixed too)."""
    paragraphs = body.split("\n\n")
    spans: list[tuple[int, int]] = []
    position = 0
    for index, paragraph in enumerate(paragraphs):
        if index == 1:
            line_start = position
            for line in paragraph.split("\n"):
                spans.append((line_start, line_start + line.index(": ") + 2))
                line_start += len(line) + 1
        elif index != 4:
            spans.append((position, position + len(paragraph)))
        position += len(paragraph) + 2
    return spans


@settings(max_examples=300, deadline=None)
@given(summary=_summaries, data=st.data())
def test_property_one_char_change_in_fixed_text_is_ineligible(
    summary: dict[str, Any], data: st.DataObject
) -> None:
    body, explicit = render_weekly(summary)
    if explicit:
        return
    start, end = data.draw(st.sampled_from(_fixed_spans(body)))
    index = data.draw(st.integers(min_value=start, max_value=end - 1))
    replacement = data.draw(
        st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(" \n-:.")).filter(
            lambda c: c != body[index]
        )
    )
    mutated = body[:index] + replacement + body[index + 1 :]
    with pytest.raises(Ineligible):
        parse_weekly(mutated)


# -- the one styled message (design §6.2): the goal-missing report's interpretation ----
# Its two compositions, through the shim's re-validation and render: exactly the host's
# body with 다만 (with or without its comma) before the hold sentence, every other byte
# the host's; 다만 anywhere else is refused with the contract's precise reason.

GOAL_MISSING_CANONICAL = _body(W5_FACTS, I2, "기록 보완", "- " + RECORDS_A, RECORDS_R)
HOLD = "목표 범위가 없어 이번 주 조정 판단은 보류합니다."


@pytest.mark.parametrize(
    ("generated", "word"),
    [("[[P:01]]. 다만 [[A:01]].", "다만 "), ("[[P:01]]. 다만, [[A:01]].", "다만, ")],
    ids=["no-comma", "comma"],
)
def test_goal_missing_golden_renders_the_word_before_the_hold(generated: str, word: str) -> None:
    assert I2.endswith("\n" + HOLD)
    surface = parse_weekly(GOAL_MISSING_CANONICAL)
    # The one slot with a choice; the rationale is locked host text.
    assert [s.slot_id for s in surface.slots] == [INTERPRETATION_SLOT]
    selected = surface.render({INTERPRETATION_SLOT: generated})
    assert selected.body == _body(
        W5_FACTS,
        "최근 7일 평균과 이전 7일 평균의 차이를 확인했습니다.\n" + word + HOLD,
        "기록 보완",
        "- " + RECORDS_A,
        RECORDS_R,
    )
    assert selected.body == GOAL_MISSING_CANONICAL.replace("\n" + HOLD, "\n" + word + HOLD, 1)
    assert_layout_identical(surface, selected.body)
    assert_locked_identical(surface.canonical(), selected)


@pytest.mark.parametrize(
    ("generated", "reason"),
    [
        ("다만 [[P:01]]. [[A:01]].", Reason.STYLE_MISFIT),  # before the first token
        ("다만, [[P:01]]. [[A:01]].", Reason.STYLE_MISFIT),
        ("다만 [[P:01]]. 다만 [[A:01]].", Reason.STYLE_MISFIT),
        ("[[P:01]]. 다만 다만 [[A:01]].", Reason.STACKED_STYLE),
        ("[[P:01]]. 다만 다만, [[A:01]].", Reason.STACKED_STYLE),
        ("[[P:01]]. 그리고 다만 [[A:01]].", Reason.STACKED_STYLE),
        ("[[P:01]]. 그리고 [[A:01]].", Reason.STYLE_MISFIT),  # a former cell's word
        ("[[P:01]]. 이어서, [[A:01]].", Reason.STYLE_MISFIT),
        ("[[P:01]], 다만 [[A:01]].", Reason.GRAMMAR),  # the comma elsewhere
        ("[[P:01]]. 다만 ,[[A:01]].", Reason.GRAMMAR),
        ("[[P:01]]. 다만,[[A:01]].", Reason.GRAMMAR),
        ("[[P:01]]. 다만,, [[A:01]].", Reason.GRAMMAR),
    ],
)
def test_goal_missing_golden_refuses_the_word_elsewhere(generated: str, reason: Reason) -> None:
    surface = parse_weekly(GOAL_MISSING_CANONICAL)
    with pytest.raises(RenderError) as info:
        surface.render({INTERPRETATION_SLOT: generated})
    assert info.value.reason is RenderReason.COMPOSITION_REJECTED
    assert info.value.contract_reason is reason
    assert surface.canonical().body == GOAL_MISSING_CANONICAL


def test_goal_missing_rationale_is_locked_so_다만_cannot_reach_it() -> None:
    surface = parse_weekly(GOAL_MISSING_CANONICAL)
    with pytest.raises(RenderError) as info:
        surface.render(
            {INTERPRETATION_SLOT: "[[P:01]]. 다만 [[A:01]].", RATIONALE_SLOT: "다만 [[P:01]]."}
        )
    assert info.value.reason is RenderReason.UNKNOWN_SLOT


@pytest.mark.parametrize("judgment", list(WeeklyJudgment))
@pytest.mark.parametrize("interpretation", list(WeeklyInterpretation))
def test_every_other_branch_has_no_slot_for_다만(
    interpretation: WeeklyInterpretation, judgment: WeeklyJudgment
) -> None:
    # Before any other ID (every other interpretation line, every rationale) the word
    # has no slot to stand in: the surface asks the model for the I2 interpretation only.
    body = format_weekly(
        recent="78.00kg",
        prior="78.00kg",
        change="0.00%",
        goal_range="기록 없음",
        interpretation=interpretation,
        judgment=judgment,
    )
    slots = [s.slot_id for s in parse_weekly(body).slots]
    goal_missing = interpretation is WeeklyInterpretation.GOAL_MISSING
    assert slots == ([INTERPRETATION_SLOT] if goal_missing else [])

"""``adaptive.dualcoachtest.card.v1``: the host's dual card body (HOST-FORMATS §6).

Goldens: the TH ``ADAPTIVE`` sample (canonical), selected and fallback; the
grammar's known parts checked, private lines locked and never required;
decision/reason texts from the glossary in force (shipped or operator);
properties over host-shaped payloads. Under the contract's fit table (design
§6.1, §6.2) no line of the card takes a style word: the decision and every review
line are locked, the card has no slot and nothing to style.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from adaptive_support import (
    CALLBACK,
    OPERATOR_GLOSSARY,
    PUBLIC_DECISION,
    PUBLIC_REASONS,
    TH_ADAPTIVE_BODY,
    dual_bodies,
    host_payloads,
    payload,
)
from hypothesis import given
from surface_support import (
    assert_layout_identical,
    assert_locked_identical,
    composition_for_every_slot,
    render_if_it_fits,
)

from gateway_shim.operator_glossary import SHIPPED_DUAL_GLOSSARY, DualGlossary
from gateway_shim.surfaces import (
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    Placeholder,
    ProseSlot,
    RenderError,
    RenderReason,
)
from gateway_shim.surfaces.adaptive import parse_adaptive, presented_host_text
from gateway_shim.surfaces.card import DUAL_SURFACE, CardOrigin
from gateway_shim.surfaces.dual import JUDGMENT_SLOT, format_dual_body, review_slot_id
from kexpr.spool.contract import Reason, check_generated, check_grammar, fit, slot_policy

R = IneligibleReason
FRESH = CardOrigin.FRESH


def parse(p: dict[str, Any], glossary: DualGlossary | None = None) -> CanonicalSurface:
    return parse_adaptive(
        p, callback_data=CALLBACK, origin=FRESH, surface=DUAL_SURFACE, glossary=glossary
    )


def reason_of(body: str, glossary: DualGlossary | None = None) -> R:
    with pytest.raises(Ineligible) as e:
        parse(payload(body), glossary)
    return e.value.reason


# --- goldens -------------------------------------------------------------------------------

A1 = payload(TH_ADAPTIVE_BODY)
ENVELOPE = "테스트 전용 · 고객: 가상 테스트 고객 · KST day: 2026-07-28 · revision: 1 · state: proposed\n진행 1/4 · 제안 검토 중 · 다음: 승인하기\n\n"


def test_canonical_golden_is_the_host_text() -> None:
    surface = parse(A1)
    assert A1["text"] == ENVELOPE + TH_ADAPTIVE_BODY
    assert surface.canonical().body == A1["text"]
    assert presented_host_text(surface) == A1["text"]
    # The fit table gives no line a word: the decision line (label and text) and
    # every review line are locked, the whole card is one locked text.
    assert surface.slots == ()
    (locked,) = surface.canonical().locked_texts()
    assert locked == A1["text"]
    assert "\n현재 판단: " + PUBLIC_DECISION + "\n\n권장안\n" in locked
    assert "\n\n검토 필요\n\n" + "\n".join(PUBLIC_REASONS) + "\n\n" in locked


def judgment_slot() -> ProseSlot:
    """The decision as the dual adapter builds it before the fit table locks it."""
    placeholder = Placeholder(
        token="[[P:01]]",
        semantic_id="P_DUAL_DECISION_HOLD",
        expansion=PUBLIC_DECISION,
        glossary=SHIPPED_DUAL_GLOSSARY.entries,
    )
    return ProseSlot(
        slot_id=JUDGMENT_SLOT,
        placeholders=(placeholder,),
        canonical_text=PUBLIC_DECISION,
        final_period=False,
    )


def review_slot(n: int = 2) -> ProseSlot:
    """A review line as the dual adapter builds it before the fit table locks it."""
    text = PUBLIC_REASONS[n - 1]
    (semantic_id,) = [k for k, v in SHIPPED_DUAL_GLOSSARY.reasons.items() if v == text[:-1]]
    placeholder = Placeholder(
        token="[[P:01]]",
        semantic_id=semantic_id,
        expansion=text[:-1],
        glossary=SHIPPED_DUAL_GLOSSARY.entries,
    )
    return ProseSlot(slot_id=review_slot_id(n), placeholders=(placeholder,), canonical_text=text)


def test_no_line_of_the_card_can_be_styled() -> None:
    assert judgment_slot().styleable is False
    assert review_slot(1).styleable is False and review_slot(2).styleable is False
    # Whatever its review lines, the card has no slot.
    for reasons in ((), PUBLIC_REASONS[:1], PUBLIC_REASONS, PUBLIC_REASONS[::-1]):
        assert parse(payload(body(reasons=reasons))).slots == ()


# What the fit table accepted on the second review line before the readers' verdicts.
FORMER_SELECTED = {review_slot_id(2): "그리고 [[P:01]]."}
REVIEW_2 = slot_policy(review_slot_id(2), ["P_DUAL_REASON_LATEST"])


def test_nothing_to_style_golden() -> None:
    surface = parse(A1)
    rendered = surface.render({})
    assert rendered.body == A1["text"]
    assert_locked_identical(surface.canonical(), rendered)
    assert_layout_identical(surface, rendered.body)
    assert fit.compositions(REVIEW_2.slot_id, REVIEW_2.semantic_ids) == ()
    assert check_generated(REVIEW_2, FORMER_SELECTED[REVIEW_2.slot_id]) is Reason.STYLE_MISFIT
    with pytest.raises(RenderError) as e:
        surface.render(FORMER_SELECTED)
    assert e.value.reason is RenderReason.UNKNOWN_SLOT


def test_decision_slot_has_no_final_period_and_reasons_keep_theirs() -> None:
    judgment = judgment_slot()
    second = review_slot(2)
    assert judgment.final_period is False and second.final_period is True
    # The canonical composition renders the host's bytes exactly.
    assert judgment.expand("[[P:01]].") == PUBLIC_DECISION
    assert second.expand("[[P:01]].") == PUBLIC_REASONS[1]
    # Locked, the decision keeps its period-less form and the first line its period.
    locked = "".join(parse(A1).canonical().locked_texts())
    assert "\n현재 판단: " + PUBLIC_DECISION + "\n" in locked
    assert "\n" + PUBLIC_REASONS[0] + "\n" in locked


@pytest.mark.parametrize(
    ("generated", "reason"),
    [
        # An answer for a locked line is an answer for a slot the card does not have.
        ({review_slot_id(2): "확인 결과, [[P:01]]."}, RenderReason.UNKNOWN_SLOT),
        (
            {review_slot_id(2): "그리고 최신 확정 기록을 기준으로 다시 계산해야 합니다."},
            RenderReason.UNKNOWN_SLOT,
        ),
        ({**FORMER_SELECTED, JUDGMENT_SLOT: "그리고 [[P:01]]."}, RenderReason.UNKNOWN_SLOT),
        ({JUDGMENT_SLOT: "그리고 [[P:01]]."}, RenderReason.UNKNOWN_SLOT),
        ({review_slot_id(1): "그리고 [[P:01]]."}, RenderReason.UNKNOWN_SLOT),
    ],
)
def test_fallback_goldens(generated: dict[str, str], reason: RenderReason) -> None:
    surface = parse(A1)
    with pytest.raises(RenderError) as e:
        surface.render(generated)
    assert e.value.reason is reason
    assert surface.canonical().body == A1["text"]  # the fallback is the host text


@pytest.mark.parametrize(
    ("generated", "reason"),
    [
        # The texts the grammar accepted before the fit table.
        ("이어서 [[P:01]].", Reason.STYLE_MISFIT),
        ("차분히, [[P:01]].", Reason.STYLE_MISFIT),
        ("그리고, [[P:01]].", Reason.STYLE_MISFIT),  # a conjunction takes no comma
        ("그리고 또 [[P:01]].", Reason.STACKED_STYLE),
    ],
)
def test_a_misfit_review_line_is_rejected(generated: str, reason: Reason) -> None:
    surface = parse(A1)
    assert check_grammar(REVIEW_2, generated) is None
    assert check_generated(REVIEW_2, generated) is reason
    with pytest.raises(RenderError) as e:
        surface.render({review_slot_id(2): generated})
    assert e.value.reason is RenderReason.UNKNOWN_SLOT


# --- known parts checked, private parts locked and free ------------------------------------


def body(**changes: Any) -> str:
    fields: dict[str, Any] = {
        "goal": "린매스업",
        "head": ("가상 테스트 고객 · 2026-07-28",),
        "decision": PUBLIC_DECISION,
        "recommendations": ("칼로리와 매크로를 변경하지 않음",),
        "reasons": PUBLIC_REASONS,
        "details": None,
        **changes,
    }
    return format_dual_body(**fields)


@pytest.mark.parametrize(
    "text",
    [
        body(reasons=()),
        body(reasons=PUBLIC_REASONS[:1]),
        body(reasons=PUBLIC_REASONS[::-1]),
        body(details="- 최근 7일 평균: 78.4kg\n임의 형식의 근거 줄"),
        body(reasons=(), details="근거 줄"),
        body(head=("고객: 김민지", "기준일: 2026-07-28", "- 평균 체중 72.4kg", "목표: 린매스업")),
        body(recommendations=("칼로리 유지", "단백질 160g")),
        body(goal="fat_loss 목표 (임시)"),
        body(head=("메모가 있는 줄 · 2026-07-28",), recommendations=("유지",)).replace(
            "- 유지", "- 유지\n메모: 운영자 메모"
        ),
    ],
    ids=[
        "no-review",
        "one-reason",
        "reordered",
        "details",
        "details-only",
        "labelled-head",
        "two-recs",
        "latin-goal",
        "note-line",
    ],
)
def test_private_lines_are_locked_without_a_required_format(text: str) -> None:
    surface = parse(payload(text))
    assert presented_host_text(surface) == payload(text)["text"]
    locked = "".join(surface.canonical().locked_texts())
    for line in text.split("\n"):
        if line not in (PUBLIC_DECISION, *PUBLIC_REASONS) and not line.startswith("현재 판단: "):
            assert line in locked


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            TH_ADAPTIVE_BODY.replace("적응형 영양 검토 · ", "[듀얼코치] 적응형 영양 제안 · "),
            R.CARD_TITLE_INVALID,
        ),
        (
            TH_ADAPTIVE_BODY.replace("적응형 영양 검토 · 린매스업", "적응형 영양 검토 · "),
            R.CARD_TITLE_INVALID,
        ),
        (TH_ADAPTIVE_BODY.replace("린매스업\n\n", "린매스업\n", 1), R.CARD_TITLE_INVALID),
        (
            TH_ADAPTIVE_BODY.replace("\n\n고객에게는 아직 전달되지 않았습니다.", ""),
            R.DELIVERY_LINE_MISSING,
        ),
        (TH_ADAPTIVE_BODY + "\n", R.TRAILING_NEWLINE),
        (TH_ADAPTIVE_BODY.replace("현재 판단: ", "판단: "), R.JUDGMENT_LINE_MISSING),
        (
            TH_ADAPTIVE_BODY.replace("- 칼로리와", "현재 판단: 다른 것\n- 칼로리와"),
            R.JUDGMENT_LINE_DUPLICATE,
        ),
        (
            TH_ADAPTIVE_BODY.replace("\n\n권장안\n\n", "\n\n권장 사항\n\n"),
            R.RECOMMENDATIONS_MISSING,
        ),
        (
            TH_ADAPTIVE_BODY.replace("보류\n\n권장안", "보류\n추가 줄\n\n권장안"),
            R.JUDGMENT_LINE_MISSING,
        ),
        (
            TH_ADAPTIVE_BODY.replace("2026-07-28\n현재 판단", "2026-07-28\n\n현재 판단"),
            R.HEAD_MISSING,
        ),
        (TH_ADAPTIVE_BODY.replace("가상 테스트 고객 · 2026-07-28\n", ""), R.HEAD_MISSING),
        (
            TH_ADAPTIVE_BODY.replace(
                "- 칼로리와 매크로를 변경하지 않음", "칼로리와 매크로를 변경하지 않음"
            ),
            R.RECOMMENDATIONS_MISSING,
        ),
        (TH_ADAPTIVE_BODY.replace("조정 보류\n", "조정 보류.\n"), R.DECISION_UNMAPPED),
        (TH_ADAPTIVE_BODY.replace("조정 보류\n", "조정 유지\n"), R.DECISION_UNMAPPED),
        (TH_ADAPTIVE_BODY.replace("합니다.\n최신", "합니다.\n\n최신"), R.REVIEW_BLOCK_MISMATCH),
        (
            body(reasons=()).replace("\n\n고객에게는", "\n\n검토 필요\n\n\n\n고객에게는"),
            R.REVIEW_BLOCK_MISMATCH,
        ),
        # Review lines only inside the one "검토 필요" block, with at
        # least one reason, ending at "상세 근거" or the final line.
        (
            body(reasons=()).replace("\n\n고객에게는", "\n\n검토 필요\n\n고객에게는"),
            R.REVIEW_BLOCK_MISMATCH,
        ),
        (
            body(reasons=(), details="체중 변화 주당 +0.1kg").replace(
                "\n\n고객에게는", "\n\n검토 필요\n\n" + PUBLIC_REASONS[0] + "\n\n고객에게는"
            ),
            R.REVIEW_BLOCK_MISMATCH,
        ),
        (body(details="근거\n\n검토 필요\n\n" + PUBLIC_REASONS[0]), R.REVIEW_BLOCK_MISMATCH),
        (
            body(reasons=(), recommendations=("칼로리 유지", "검토 필요")).replace(
                "- 검토 필요", "검토 필요"
            ),
            R.REVIEW_BLOCK_MISMATCH,
        ),
        (TH_ADAPTIVE_BODY.replace("같은 날짜의", "- 같은 날짜의"), R.REVIEW_REASON_UNMAPPED),
        (TH_ADAPTIVE_BODY.replace("계산해야 합니다.", "계산해야 합니다"), R.REVIEW_REASON_UNMAPPED),
        (TH_ADAPTIVE_BODY.replace("계산해야 합니다.", "계산합니다."), R.REVIEW_REASON_UNMAPPED),
        (body(reasons=(PUBLIC_REASONS[0], PUBLIC_REASONS[0])), R.REVIEW_REASON_DUPLICATE),
    ],
    ids=lambda v: v.value if isinstance(v, R) else "",
)
def test_grammar_mismatches_are_ineligible(text: str, reason: R) -> None:
    assert reason_of(text) is reason


def test_too_many_reasons() -> None:
    g = OPERATOR_GLOSSARY
    ten = [f"{t}." for t in g.reasons.values()]
    assert len(ten) == 5
    text = body(reasons=tuple(ten * 2))
    assert reason_of(text, g) is R.REVIEW_TOO_MANY


def test_old_invented_format_is_not_accepted() -> None:
    old = (
        "[듀얼코치] 적응형 영양 제안 · 김민지 님\n━━━━━━━━━━━━\n고객: 김민지\n기준일: 11월 30일\n목표: 린매스업\n"
        "현재 판단: 운영자 검토가 끝날 때까지 계획 판단을 보류합니다.\n\n권장안\n\n- 유지\n\n검토 필요\n\n"
        "- 판단에 필요한 기간의 기록이 부족합니다.\n\n고객에게는 아직 전달되지 않았습니다."
    )
    assert reason_of(old) is R.CARD_TITLE_INVALID


def test_whole_text_limits_apply() -> None:
    assert reason_of(body(head=("가" * 4100,))) is R.TOO_LONG_UTF16
    assert reason_of(body(head=("a\rb",))) is R.CARRIAGE_RETURN


# --- the glossary in force --------------------------------------------------------------------


def test_operator_entries_map_and_shipped_ones_still_do() -> None:
    text = body(
        decision="탄수화물 배분 조정 후보",
        reasons=(PUBLIC_REASONS[1], "섭취 기록과 계획의 차이가 큽니다."),
    )
    assert reason_of(text) is R.DECISION_UNMAPPED  # the shipped glossary lacks it
    # The operator's decision and reasons map (the card is eligible) and are locked:
    # the operator's reason has a policy, but no word fits it (design §6.1).
    surface = parse(payload(text), OPERATOR_GLOSSARY)
    assert surface.slots == ()
    assert surface.canonical().body == payload(text)["text"]
    gap = slot_policy(review_slot_id(2), ["P_DUAL_REASON_INTAKE_GAP"])
    assert not fit.slot_styleable(gap.slot_id, gap.semantic_ids)
    assert presented_host_text(surface) == payload(text)["text"]
    shipped = parse(A1, OPERATOR_GLOSSARY)
    assert shipped.canonical().body == A1["text"]
    assert shipped.slots == ()


def test_unmapped_reason_with_operator_glossary() -> None:
    text = body(reasons=("운영자 사전에 없는 사유입니다.",))
    assert reason_of(text, OPERATOR_GLOSSARY) is R.REVIEW_REASON_UNMAPPED


def test_glossary_of_the_wrong_type_is_invalid() -> None:
    with pytest.raises(Ineligible) as e:
        parse(A1, {"P_DUAL_DECISION_X": "가"})  # type: ignore[arg-type]
    assert e.value.reason is R.GLOSSARY_INVALID


def test_shipped_glossary_is_the_public_texts() -> None:
    assert dict(SHIPPED_DUAL_GLOSSARY.decisions) == {"P_DUAL_DECISION_HOLD": PUBLIC_DECISION}
    assert sorted(SHIPPED_DUAL_GLOSSARY.reasons.values()) == sorted(r[:-1] for r in PUBLIC_REASONS)


# --- properties over host-shaped payloads -------------------------------------------------------


@given(host_payloads(dual_bodies()))
def test_host_shaped_payloads_are_eligible_and_roundtrip(p: dict[str, Any]) -> None:
    surface = parse(p, OPERATOR_GLOSSARY)
    assert presented_host_text(surface) == p["text"]
    # No slot, however many review lines: the decision and every line are locked.
    assert surface.slots == ()
    assert surface.canonical().locked_texts() == (p["text"],)
    assert (
        parse_adaptive(p, callback_data=CALLBACK, origin=FRESH, glossary=OPERATOR_GLOSSARY).surface
        == DUAL_SURFACE
    )
    before = copy.deepcopy(p)
    parse(p, OPERATOR_GLOSSARY)
    assert p == before  # the adapter never mutates the payload


@given(
    host_payloads(dual_bodies()).flatmap(
        lambda p: composition_for_every_slot(parse(p, OPERATOR_GLOSSARY)).map(lambda g: (p, g))
    )
)
def test_any_accepted_composition_keeps_every_locked_byte(
    case: tuple[dict[str, Any], dict[str, str]],
) -> None:
    p, generated = case
    surface = parse(p, OPERATOR_GLOSSARY)
    assert generated == {}  # no slot: nothing to style
    rendered = render_if_it_fits(surface, generated)
    assert rendered is not None and rendered.body == p["text"]
    assert_locked_identical(surface.canonical(), rendered)
    assert_layout_identical(surface, rendered.body)
    # The decision line is locked: byte-identical in every rendering.
    (judgment,) = [line for line in p["text"].split("\n") if line.startswith("현재 판단: ")]
    assert judgment in rendered.body.split("\n")


COVERED_REASONS = {
    R.CARD_TITLE_INVALID,
    R.DELIVERY_LINE_MISSING,
    R.JUDGMENT_LINE_MISSING,
    R.JUDGMENT_LINE_DUPLICATE,
    R.RECOMMENDATIONS_MISSING,
    R.HEAD_MISSING,
    R.DECISION_UNMAPPED,
    R.REVIEW_BLOCK_MISMATCH,
    R.REVIEW_REASON_UNMAPPED,
    R.REVIEW_REASON_DUPLICATE,
    R.REVIEW_TOO_MANY,
    R.GLOSSARY_INVALID,
    R.TOO_LONG_UTF16,
    R.CARRIAGE_RETURN,
    R.TRAILING_NEWLINE,
}


def test_final_period_rule_is_checked() -> None:
    import dataclasses

    judgment = judgment_slot()
    with pytest.raises(RenderError) as e:
        judgment.expand("[[P:01]]")  # no final period: never drop a real byte
    assert e.value.reason is RenderReason.TOKEN_MISMATCH
    with pytest.raises(ValueError):
        dataclasses.replace(judgment, canonical_text=PUBLIC_DECISION + ".")
    with pytest.raises(ValueError):
        dataclasses.replace(judgment, final_period=True)
    with pytest.raises(TypeError):
        dataclasses.replace(judgment, final_period=0)  # type: ignore[arg-type]

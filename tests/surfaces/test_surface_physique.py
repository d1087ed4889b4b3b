"""``adaptive.physique.card.v1``: the physique-coach card (HOST-FORMATS §7).

Nothing of the body is public: only ``결정: ``, ``근거: `` and the exact final
status line are checked; every other line is locked and free. The canonical
presentation inserts the plan's two ``검토 안내`` lines right before the status
line, keeping the host's layout (no blank line added or removed).
"""

from __future__ import annotations

from typing import Any

import pytest
from adaptive_support import CALLBACK, PHYSIQUE_BODY, host_payloads, payload, physique_bodies
from hypothesis import given
from surface_support import (
    assert_locked_identical,
    composition_for_every_slot,
    render_if_it_fits,
)

from gateway_shim.surfaces import (
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    RenderError,
    RenderReason,
)
from gateway_shim.surfaces.adaptive import parse_adaptive, presented_host_text
from gateway_shim.surfaces.card import PHYSIQUE_SURFACE, CardOrigin
from gateway_shim.surfaces.physique import REVIEW_NOTICE, REVIEW_SLOT, STATUS_LINE
from kexpr.spool.contract import Reason, check_generated, check_grammar, fit, slot_policy

R = IneligibleReason
NOTICE = "검토 안내\n제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"


def parse(p: dict[str, Any]) -> CanonicalSurface:
    return parse_adaptive(
        p, callback_data=CALLBACK, origin=CardOrigin.FRESH, surface=PHYSIQUE_SURFACE
    )


def reason_of(body: str) -> R:
    with pytest.raises(Ineligible) as e:
        parse(payload(body))
    return e.value.reason


ENVELOPE = "테스트 전용 · 고객: 가상 테스트 고객 · KST day: 2026-07-28 · revision: 1 · state: proposed\n진행 1/4 · 제안 검토 중 · 다음: 승인하기\n\n"
CANONICAL_GOLDEN = ENVELOPE + (
    "가상 피지크 고객 · 2026-07-28 · D+12\n결정: 칼로리 유지\n근거: 주간 변화가 목표 범위 안\n"
    "목표 체중 범위 유지\n\n검토 안내\n제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
    "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
)
# The instruction's policy: the fit table leaves its sentence no word (design §6.1,
# §6.2), so the notice is locked text and the card has nothing to style.
REVIEW_POLICY = slot_policy(REVIEW_SLOT, ["A_OPERATOR_REVIEW_DECISION"])
# What the table accepted before the readers' verdicts ("먼저" restating the order).
FORMER_COMPOSITION = "먼저 [[A:01]]."


def test_notice_is_the_plans() -> None:
    assert REVIEW_NOTICE == NOTICE


def test_canonical_golden_inserts_the_notice_before_the_status_line() -> None:
    p = payload(PHYSIQUE_BODY)
    surface = parse(p)
    assert surface.canonical().body == CANONICAL_GOLDEN
    # The host text plus the block, and nothing else.
    host = p["text"]
    at = host.rindex(STATUS_LINE)
    assert surface.canonical().body == host[:at] + NOTICE + host[at:]
    assert presented_host_text(surface) == host
    # Nothing to style: the notice is locked text like the host's lines.
    assert surface.slots == ()
    assert surface.canonical().locked_texts() == (CANONICAL_GOLDEN,)
    assert REVIEW_POLICY.allowed_action_ids == ("A_OPERATOR_REVIEW_DECISION",)
    assert fit.compositions(REVIEW_SLOT, REVIEW_POLICY.semantic_ids) == ()
    assert not fit.slot_styleable(REVIEW_SLOT, REVIEW_POLICY.semantic_ids)


def test_layout_without_a_blank_line_before_the_status_is_kept() -> None:
    body = PHYSIQUE_BODY.replace("\n\n" + STATUS_LINE, "\n" + STATUS_LINE)
    surface = parse(payload(body))
    assert surface.canonical().body.endswith("목표 체중 범위 유지\n" + NOTICE + STATUS_LINE)


def test_nothing_to_style_golden() -> None:
    # The only rendering is the canonical presentation; the composition the table
    # used to accept is now a misfit, and the card has no slot for it.
    surface = parse(payload(PHYSIQUE_BODY))
    rendered = surface.render({})
    assert rendered.body == CANONICAL_GOLDEN
    assert_locked_identical(surface.canonical(), rendered)
    assert check_grammar(REVIEW_POLICY, FORMER_COMPOSITION) is None
    assert check_generated(REVIEW_POLICY, FORMER_COMPOSITION) is Reason.STYLE_MISFIT
    with pytest.raises(RenderError) as e:
        surface.render({REVIEW_SLOT: FORMER_COMPOSITION})
    assert e.value.reason is RenderReason.UNKNOWN_SLOT


@pytest.mark.parametrize(
    "generated",
    [
        "차분히, [[A:01]].",  # the text the grammar accepted before the fit table
        "먼저, [[A:01]].",  # the order word with a comma announces a list
        "바로 [[A:01]].",  # an urgency the action does not have
        "그리고 [[A:01]].",  # nothing to join to under a heading
        "우선 [[A:01]].",  # "for the time being"
    ],
)
def test_a_misfit_instruction_is_rejected(generated: str) -> None:
    surface = parse(payload(PHYSIQUE_BODY))
    assert check_grammar(REVIEW_POLICY, generated) is None
    assert check_generated(REVIEW_POLICY, generated) is Reason.STYLE_MISFIT
    with pytest.raises(RenderError) as e:
        surface.render({REVIEW_SLOT: generated})
    assert e.value.reason is RenderReason.UNKNOWN_SLOT
    assert surface.canonical().body == CANONICAL_GOLDEN


def test_fallback_golden() -> None:
    surface = parse(payload(PHYSIQUE_BODY))
    assert check_generated(REVIEW_POLICY, "승인 완료, [[A:01]].") is not None
    with pytest.raises(RenderError):
        surface.render({REVIEW_SLOT: "승인 완료, [[A:01]]."})
    assert surface.canonical().body == CANONICAL_GOLDEN


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (PHYSIQUE_BODY.replace(STATUS_LINE, "상태: 운영자 승인 전"), R.STATUS_LINE_MISSING),
        (PHYSIQUE_BODY + "\n추가 줄", R.STATUS_LINE_MISSING),
        (PHYSIQUE_BODY.replace("근거: 주간", STATUS_LINE + "\n근거: 주간"), R.STATUS_LINE_MISSING),
        (PHYSIQUE_BODY.replace("결정: ", "판단: "), R.DECISION_LINE_MISSING),
        (PHYSIQUE_BODY.replace("결정: 칼로리 유지", "결정: "), R.DECISION_LINE_MISSING),
        (PHYSIQUE_BODY.replace("근거: 주간", "결정: 또\n근거: 주간"), R.DECISION_LINE_MISSING),
        (PHYSIQUE_BODY.replace("근거: ", "이유: "), R.BASIS_LINE_MISSING),
        ("근거: 먼저\n결정: 나중\n" + STATUS_LINE, R.BASIS_LINE_MISSING),
        (
            PHYSIQUE_BODY.replace("\n\n" + STATUS_LINE, "\n\n" + NOTICE + STATUS_LINE),
            R.REVIEW_NOTICE_PRESENT,
        ),
        (PHYSIQUE_BODY.replace("목표 체중", "검토 안내\n목표 체중"), R.REVIEW_NOTICE_PRESENT),
        (PHYSIQUE_BODY.replace("목표 체중", "목표\t체중"), R.CONTROL_CHARACTER),
        ("가" * 4000 + "\n결정: 유지\n근거: 범위\n" + STATUS_LINE, R.TOO_LONG_UTF16),
    ],
    ids=lambda v: v.value if isinstance(v, R) else "",
)
def test_mismatches_are_ineligible(body: str, reason: R) -> None:
    assert reason_of(body) is reason


def test_old_invented_format_is_not_accepted() -> None:
    old = (
        "[피지크 코치] 적응형 영양 제안 · 김민지 님\n━━━━━━━━━━━━\n고객: 김민지\n기준일: 11월 30일 (D+12)\n"
        "결정: 탄수화물 20g 감량\n근거: 체중 증가가 목표보다 빠름\n\n" + STATUS_LINE
    )
    # Its labels happen to include the two the plan gives; what keeps it out is the
    # real envelope: as a bare text (its old shape) it has none.
    bare = {**payload(old), "text": old}
    with pytest.raises(Ineligible) as e:
        parse(bare)
    assert e.value.reason is R.HEADER_MISMATCH


@given(host_payloads(physique_bodies()))
def test_host_shaped_payloads_are_eligible_and_roundtrip(p: dict[str, Any]) -> None:
    surface = parse(p)
    assert presented_host_text(surface) == p["text"]
    host = p["text"]
    at = host.rindex(STATUS_LINE)
    assert surface.canonical().body == host[:at] + NOTICE + host[at:]
    assert (
        parse_adaptive(p, callback_data=CALLBACK, origin=CardOrigin.FRESH).surface
        == PHYSIQUE_SURFACE
    )


@given(
    host_payloads(physique_bodies()).flatmap(
        lambda p: composition_for_every_slot(parse(p)).map(lambda g: (p, g))
    )
)
def test_any_accepted_composition_keeps_every_locked_byte(
    case: tuple[dict[str, Any], dict[str, str]],
) -> None:
    p, generated = case
    surface = parse(p)
    assert generated == {}  # no slot: nothing to style
    rendered = render_if_it_fits(surface, generated)
    assert rendered is not None and rendered.body == surface.canonical().body
    assert_locked_identical(surface.canonical(), rendered)
    assert rendered.body.count("\n") == surface.canonical().body.count("\n")


COVERED_REASONS = {
    R.STATUS_LINE_MISSING,
    R.DECISION_LINE_MISSING,
    R.BASIS_LINE_MISSING,
    R.REVIEW_NOTICE_PRESENT,
    R.CONTROL_CHARACTER,
    R.TOO_LONG_UTF16,
    R.HEADER_MISMATCH,
}


def test_strip_review_notice_refuses_a_text_that_is_not_a_presentation() -> None:
    from gateway_shim.surfaces.physique import strip_review_notice

    host_text = payload(PHYSIQUE_BODY)["text"]
    presented = parse(payload(PHYSIQUE_BODY)).canonical().body
    assert strip_review_notice(presented) == host_text
    for text in (host_text, presented + "\n", presented.replace(REVIEW_NOTICE, "검토 안내\n")):
        with pytest.raises(ValueError, match="^not a physique presentation$"):
            strip_review_notice(text)

"""Synthetic host material for the reference host and end-to-end tests.

Every customer-looking value here is listed in ``CUSTOMER_VALUES`` so tests can
prove none of it reaches the spool, the journal or the wire.
"""

from __future__ import annotations

from gateway_shim import (
    DualDecision,
    DualFacts,
    DualReason,
    card_payload,
    format_dual_card,
    format_physique_card,
)
from reference_host.adaptive import Session
from reference_host.host_render import render_weekly

CUSTOMER_VALUES = (
    "김민지",
    "72.4kg",
    "2,150kcal",
    "11월 30일",
    "sess-7f3a9c",
    "prop-3b1e9d",
    "sched-weekly-0042",
    "탄수화물 20g",
)

# A typed weekly summary (HOST-FORMATS §4: no explicit prose field) and the body
# the host renders from it: I3 + 유지, the rate line present, two explicit actions.
WEEKLY_SUMMARY: dict[str, object] = {
    "average_weight_kg": 72.4,
    "prior_average_weight_kg": 72.1,
    "checkin_rate_percent": 85.7,
    "goal_range": "+0.10~+0.50%",
    "actions": ["평균 섭취 2,150kcal 유지", "김민지 님 매일 아침 체중 기록하기"],
}
WEEKLY_BODY, _explicit = render_weekly(WEEKLY_SUMMARY)
assert not _explicit
# The names of the summary's fields: what the host passes as explicit_fields.
WEEKLY_FIELDS: tuple[str, ...] = tuple(WEEKLY_SUMMARY)
# What the scripted worker's default style ("차분히, T1. 이어서 T2.") renders to:
# one sentence per line in the interpretation, as the host renders it.
WEEKLY_SELECTED = (
    WEEKLY_BODY.replace("\n체중은 린매스업", "\n차분히, 체중은 린매스업", 1)
    .replace("\n현재 속도라면", "\n이어서 현재 속도라면", 1)
    .replace("\n급격한 증량이나", "\n차분히, 급격한 증량이나", 1)
)
SCHEDULE = {"schedule_key": "sched-weekly-0042", "kind": "weekly_report", "kst_day": "2025-11-30"}

DUAL_FACTS = DualFacts(
    decision=DualDecision.ADJUST_PLAN,
    reasons=(DualReason.RECORDS_INSUFFICIENT, DualReason.INTAKE_BELOW_PLAN),
)
BUTTONS = (
    (("✅ 승인", "adaptive:approve"), ("✏️ 수정 요청", "adaptive:revise")),
    (("⏸ 보류", "adaptive:hold"),),
)


def session(**changes: object) -> Session:
    fields: dict[str, object] = {
        "session_id": "sess-7f3a9c",
        "owner": "coach-1",
        "config_version": "cfg-12",
        "epoch": 7,
        "proposal_digest": "prop-3b1e9d",
        "revision": 3,
        "card_kind": "proposal_review",
        **changes,
    }
    return Session(**fields)  # type: ignore[arg-type]


def dual_card(s: Session) -> tuple[dict[str, object], DualFacts | None]:
    text = format_dual_card(
        title="김민지 님",
        customer="김민지",
        date="11월 30일",
        facts=("최근 7일 평균 체중 72.4kg", "평균 섭취 2,150kcal"),
        goal="린매스업",
        decision=DUAL_FACTS.decision,
        recommendations=("하루 탄수화물 20g 줄이기",),
        note="주말 외식 전 알림",
        reasons=DUAL_FACTS.reasons,
        details=("체중 변화 주당 +0.1kg",),
    )
    return _payload("adaptive.dualcoachtest.card.v1", text, s), DUAL_FACTS


def physique_card(s: Session) -> tuple[dict[str, object], DualFacts | None]:
    text = format_physique_card(
        title="김민지 님",
        customer="김민지",
        day="11월 30일",
        day_count=12,
        decision="탄수화물 20g 감량",
        basis="최근 7일 평균 체중 증가가 목표보다 빠름",
        target="하루 2,300kcal",
        note="운동 후 탄수화물 우선",
    )
    return _payload("adaptive.physique.card.v1", text, s), None


def _payload(surface: str, text: str, s: Session) -> dict[str, object]:
    return card_payload(
        surface=surface,
        text=text,
        buttons=BUTTONS,
        session_id=s.session_id,
        proposal_digest=s.proposal_digest,
        revision=s.revision,
        card_kind=s.card_kind,
    )

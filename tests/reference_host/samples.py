"""Synthetic host material for the reference host and end-to-end tests.

Every customer-looking value here is listed in ``CUSTOMER_VALUES`` so tests can
prove none of it reaches the spool, the journal or the wire.
"""

from __future__ import annotations

from gateway_shim import (
    card_payload,
    format_dual_body,
)
from gateway_shim.surfaces.card import expected_buttons
from reference_host.adaptive import Session
from reference_host.host_render import render_weekly

CUSTOMER_VALUES = (
    "김민지",
    "72.4kg",
    "2,150kcal",
    "11월 30일",
    "7f3a9c0b1d2e3f4a5b6c7d8e",
    "3b1e9d" + "0" * 58,
    "client_042",
    "2025-11-30",
    "sched-weekly-0042",
    "탄수화물 20g",
)

# A typed weekly summary (HOST-FORMATS §4: no explicit prose field) and the body
# the host renders from it: no goal range, so I2 (the trend observed, the hold for
# the missing goal) + 기록 보완, the rate line present, two explicit actions. The
# goal-missing interpretation is the one slot the fit table styles (design §6.2):
# this is the host's one styled message.
WEEKLY_SUMMARY: dict[str, object] = {
    "average_weight_kg": 72.4,
    "prior_average_weight_kg": 72.1,
    "checkin_rate_percent": 85.7,
    "actions": ["평균 섭취 2,150kcal 유지", "김민지 님 매일 아침 체중 기록하기"],
}
WEEKLY_BODY, _explicit = render_weekly(WEEKLY_SUMMARY)
assert not _explicit
# The names of the summary's fields: what the host passes as explicit_fields.
WEEKLY_FIELDS: tuple[str, ...] = tuple(WEEKLY_SUMMARY)
WEEKLY_HOLD = "목표 범위가 없어 이번 주 조정 판단은 보류합니다."
assert "\n" + WEEKLY_HOLD + "\n" in WEEKLY_BODY
# What the scripted worker's (and the fake API's) default style renders to: the fit
# table's first composition, sorted (`[[P:01]]. 다만 [[A:01]].`), one sentence per
# line in the interpretation, as the host renders it. Every other line is the host's.
WEEKLY_SELECTED = WEEKLY_BODY.replace("\n" + WEEKLY_HOLD, "\n다만 " + WEEKLY_HOLD, 1)
SCHEDULE = {"schedule_key": "sched-weekly-0042", "kind": "weekly_report", "kst_day": "2025-11-30"}

# --- adaptive cards: the host's real payload shape (gateway_shim.surfaces.card) ---------

SESSION_ID = "7f3a9c0b1d2e3f4a5b6c7d8e"
PROPOSAL_DIGEST = "3b1e9d" + "0" * 58
DUAL_SURFACE = "adaptive.dualcoachtest.card.v1"
PHYSIQUE_SURFACE = "adaptive.physique.card.v1"

# The dual body in the host's grammar; the decision and the two reasons are the
# host's public texts (TH ADAPTIVE @4305027f), the other lines are synthetic
# stand-ins for the profile's private lines.
DUAL_REASONS = (
    "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다.",
    "최신 확정 기록을 기준으로 다시 계산해야 합니다.",
)


def dual_body(reasons: tuple[str, ...] = DUAL_REASONS) -> str:
    """The sample dual body with ``reasons`` as its review block."""
    return format_dual_body(
        goal="린매스업",
        head=("김민지 · 2025-11-30", "최근 7일 평균 체중 72.4kg · 평균 섭취 2,150kcal"),
        decision="순응도 근거 충돌로 조정 보류",
        recommendations=("하루 탄수화물 20g 줄이기",),
        reasons=reasons,
        details="체중 변화 주당 +0.1kg",
    )


DUAL_BODY = dual_body()
# Nothing of the physique body is public: "결정: ", "근거: " and the status line
# are the plan's; the other lines are synthetic.
PHYSIQUE_BODY = (
    "김민지 · 2025-11-30 · D+12\n결정: 탄수화물 20g 감량\n"
    "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n목표: 하루 2,300kcal\n\n"
    "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
)


def session(**changes: object) -> Session:
    fields: dict[str, object] = {
        "session_id": SESSION_ID,
        "owner": "coach-1",
        "config_version": "cfg-12",
        "epoch": 7,
        "customer_key": "client_042",
        "customer_label": "김민지",
        "kst_day": "2025-11-30",
        "proposal_digest": PROPOSAL_DIGEST,
        "revision": 3,
        "state": "proposed",
        **changes,
    }
    return Session(**fields)  # type: ignore[arg-type]


def callback_data(s: Session, action: str = "create") -> str:
    """The pressed button's callback data (the host's ``an1:`` format)."""
    return f"an1:{s.session_id}:{action}"


def _payload(body: str, s: Session) -> dict[str, object]:
    n = len(expected_buttons(s.state))
    return card_payload(
        body=body,
        customer_key=s.customer_key,
        customer_label=s.customer_label,
        kst_day=s.kst_day,
        revision=s.revision,
        state=s.state,
        proposal_digest=s.proposal_digest,
        # A fresh session per button, derived so the samples are deterministic.
        sessions=[f"{int(s.session_id, 16) + i + 1:024x}"[-24:] for i in range(n)],
    )


def dual_card(s: Session, body: str = DUAL_BODY) -> dict[str, object]:
    return _payload(body, s)


def physique_card(s: Session) -> dict[str, object]:
    return _payload(PHYSIQUE_BODY, s)

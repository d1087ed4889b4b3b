"""Whole host messages for the reading review (design §6.2), in the host's layout.

Each body is what the host really renders: the host's own examples (docs/host-formats.md
D2/D4/D5, W2-W6, A1/A2; docs/host-formats-adaptive.md) and further bodies laid out by the
product's own formatters with other values (`format_daily`, `format_weekly`,
`format_dual_body`: the host's layout, the reference host's values). The physique card is
the canonical presentation: the host's card with the code-owned `검토 안내` block before its
status line. Every body here is checked by the surface adapters (`check_bodies`).

A body is named; a reader's sheet shows only its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from gateway_shim import (
    WeeklyInterpretation,
    WeeklyJudgment,
    format_daily,
    format_dual_body,
    format_weekly,
)
from gateway_shim.glossary import GLOSSARY

__all__ = ["BODIES", "sentence"]


def sentence(semantic_id: str) -> str:
    """The host's sentence for ``semantic_id`` as it stands in a body (with its period)."""
    return GLOSSARY[semantic_id] + "."


_MISSING: Final = "기록 없음"

_DAILY: Final = {
    # HOST-FORMATS D4 (complete, with water).
    "daily-d4": format_daily(
        weight="78.6kg",
        intake="2,675kcal",
        macros="탄수화물 335g · 단백질 160g · 지방 75g",
        training="웨이트 70분 · RPE 7",
        sleep="7.3시간 · 수면 질 4/5",
        condition="4/5",
        digestion="정상",
        water="2.8L",
    ),
    "daily-complete-b": format_daily(
        weight="64.1kg",
        intake="1,980kcal",
        macros="탄수화물 210g · 단백질 120g · 지방 60g",
        training="유산소 40분 · RPE 5",
        sleep="6.5시간 · 수면 질 3/5",
        condition="3/5",
        digestion="정상",
    ),
    "daily-complete-c": format_daily(
        weight="71.0kg",
        intake="2,300kcal",
        macros="탄수화물 260g · 단백질 150g · 지방 70g",
        training="휴식",
        sleep="8시간 · 수면 질 5/5",
        condition="5/5",
        digestion="더부룩함",
        water="2.0L",
    ),
    # HOST-FORMATS D5 and D2 (partial).
    "daily-d5": format_daily(
        weight="미측정kg",
        intake="2500kcal",
        macros="잘 모르겠음",
        training="높음",
        sleep="7시간",
        condition="4/5",
        digestion=_MISSING,
    ),
    "daily-d2": format_daily(
        weight="70.2kg",
        intake="2,400kcal",
        macros="탄수화물·단백질·지방: " + _MISSING,
        training="휴식",
        sleep="7시간 · 수면 질 5/5",
        condition="5/5",
        digestion=_MISSING,
    ),
    "daily-partial-c": format_daily(
        weight="66.3kg",
        intake=_MISSING,
        macros="탄수화물·단백질·지방: " + _MISSING,
        training="웨이트 50분 · RPE 8",
        sleep="6시간 · 수면 질 3/5",
        condition="3/5",
        digestion="정상",
    ),
}

_I = WeeklyInterpretation
_J = WeeklyJudgment
_WEEKLY: Final = {
    # HOST-FORMATS W2-W6, then the same branches with other values.
    "weekly-w2": format_weekly(
        recent=_MISSING,
        prior=_MISSING,
        change=_MISSING,
        goal_range=_MISSING,
        interpretation=_I.TREND_UNAVAILABLE,
        judgment=_J.RECORDS,
    ),
    "weekly-unavailable-b": format_weekly(
        recent="71.20kg",
        prior=_MISSING,
        change=_MISSING,
        goal_range="+0.10%~+0.25%",
        rate="42.86%",
        interpretation=_I.TREND_UNAVAILABLE,
        judgment=_J.RECORDS,
    ),
    "weekly-w3": format_weekly(
        recent="78.47kg",
        prior="78.34kg",
        change="+0.17%",
        rate="100%",
        goal_range="+0.10~+0.25%",
        interpretation=_I.IN_GOAL,
        judgment=_J.KEEP,
        actions=["다음 주에도 같은 조건으로 체중 추세를 확인합니다."],
    ),
    "weekly-w6": format_weekly(
        recent="78.47kg",
        prior="78.34kg",
        change="+0.16%",
        rate="71.4%",
        goal_range="+0.10%~+0.25%",
        interpretation=_I.IN_GOAL,
        judgment=_J.RECORDS,
    ),
    "weekly-in-goal-c": format_weekly(
        recent="65.30kg",
        prior="65.18kg",
        change="+0.18%",
        rate="85.71%",
        goal_range="+0.10%~+0.25%",
        interpretation=_I.IN_GOAL,
        judgment=_J.KEEP,
    ),
    "weekly-w4": format_weekly(
        recent="79.00kg",
        prior="78.34kg",
        change="+0.84%",
        rate="92.86%",
        goal_range="+0.10%~+0.25%",
        interpretation=_I.OUT_OF_GOAL,
        judgment=_J.REVIEW,
    ),
    "weekly-out-of-goal-b": format_weekly(
        recent="70.05kg",
        prior="70.20kg",
        change="-0.21%",
        rate="100%",
        goal_range="+0.10%~+0.25%",
        interpretation=_I.OUT_OF_GOAL,
        judgment=_J.REVIEW,
    ),
    "weekly-w5": format_weekly(
        recent="78.00kg",
        prior="78.00kg",
        change="0.00%",
        goal_range=_MISSING,
        interpretation=_I.GOAL_MISSING,
        judgment=_J.RECORDS,
    ),
    "weekly-goal-missing-b": format_weekly(
        recent="66.40kg",
        prior="66.10kg",
        change="+0.45%",
        rate="85.71%",
        goal_range=_MISSING,
        interpretation=_I.GOAL_MISSING,
        judgment=_J.RECORDS,
    ),
}

_ENVELOPE: Final = (
    "테스트 전용 · 고객: 가상 테스트 고객 · KST day: 2026-07-28 · revision: 1 · state: proposed\n"
    "진행 1/4 · 제안 검토 중 · 다음: 승인하기\n\n"
)
_EDIT: Final = sentence("P_DUAL_REASON_EDIT")
_LATEST: Final = sentence("P_DUAL_REASON_LATEST")
_HOLD: Final = GLOSSARY["P_DUAL_DECISION_HOLD"]

_DUAL: Final = {
    # HOST-FORMATS A1 (envelope and body).
    "dual-a1": _ENVELOPE
    + format_dual_body(
        goal="린매스업",
        head=("가상 테스트 고객 · 2026-07-28",),
        decision=_HOLD,
        recommendations=("칼로리와 매크로를 변경하지 않음",),
        reasons=(_EDIT, _LATEST),
    ),
    "dual-reversed": _ENVELOPE
    + format_dual_body(
        goal="린매스업",
        head=("가상 테스트 고객 · 2026-07-28",),
        decision=_HOLD,
        recommendations=("칼로리와 매크로를 변경하지 않음",),
        reasons=(_LATEST, _EDIT),
    ),
    "dual-details": _ENVELOPE.replace("2026-07-28", "2026-08-04")
    + format_dual_body(
        goal="감량",
        head=("가상 테스트 고객 · 2026-08-04", "최근 7일 평균 체중 72.4kg · 평균 섭취 2,150kcal"),
        decision=_HOLD,
        recommendations=("칼로리와 매크로를 변경하지 않음", "다음 확정 기록 후 다시 검토"),
        reasons=(_EDIT, _LATEST),
        details="체중 변화 주당 +0.1kg",
    ),
    "dual-details-reversed": _ENVELOPE.replace("2026-07-28", "2026-08-04")
    + format_dual_body(
        goal="감량",
        head=("가상 테스트 고객 · 2026-08-04", "최근 7일 평균 체중 72.4kg · 평균 섭취 2,150kcal"),
        decision=_HOLD,
        recommendations=("칼로리와 매크로를 변경하지 않음", "다음 확정 기록 후 다시 검토"),
        reasons=(_LATEST, _EDIT),
        details="체중 변화 주당 +0.1kg",
    ),
}

_REVIEW_BLOCK: Final = "검토 안내\n" + sentence("A_OPERATOR_REVIEW_DECISION") + "\n"
_STATUS: Final = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
_PHYSIQUE: Final = {
    # The reference host's card (docs/host-formats-adaptive.md: the plan's labels and
    # status line; the other lines are synthetic), presented with the review block.
    "physique-a": (
        "김민지 · 2025-11-30 · D+12\n결정: 탄수화물 20g 감량\n"
        "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n목표: 하루 2,300kcal\n\n"
        + _REVIEW_BLOCK
        + _STATUS
    ),
    "physique-b": (
        "이서준 · 2026-03-02 · D+40\n결정: 현재 섭취 유지\n"
        "근거: 최근 14일 체중 변화가 목표 범위 안\n주기: 2주\n식사: 하루 4끼\n\n"
        + _REVIEW_BLOCK
        + _STATUS
    ),
}

BODIES: Final[Mapping[str, str]] = MappingProxyType({**_DAILY, **_WEEKLY, **_DUAL, **_PHYSIQUE})

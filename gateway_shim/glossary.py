"""The reviewed enum glossary: semantic ID → its one local Korean expansion.

Invariants (SPEC §6, §7; plan "Per-slot semantic manifest"):

- Each value is exactly one NFC Korean sentence WITHOUT its final period. The
  surface adapters add the period: a slot's canonical text is each expansion
  followed by ``"."``, joined by ``" "`` — except the dual decision slot, which
  the host renders without a period (``ProseSlot.final_period``).
- No digits, no Latin letters, no newline and no ``[[``: an expansion replaces an
  issued token only after the composition was accepted, so it must never look
  like a token, a value or a unit. Hangul words and single spaces only, except
  that a dual text may join two words with ``·`` (U+00B7), as the host's public
  reason ``수정 전·후`` does (`gateway_shim.operator_glossary.audit_text`).
- Only the shim holds these sentences. The worker and the provider see the IDs
  alone (SPEC §1, §9): nothing in ``spool`` or ``worker`` may import this module.
- This is a reviewed code constant. A change here changes canonical bodies the
  host renders, so it needs review and golden updates.

The dual decision/reason entries are the host's public texts, verbatim. Four
entries are the plan's own words (``P_DAILY_COMPLETE``, ``P_DAILY_PARTIAL``,
``P_WEEKLY_IN_GOAL``, ``A_OPERATOR_REVIEW_DECISION``); the rest are written in the
same calm, declarative 합니다 register.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["GLOSSARY"]

GLOSSARY: Final[Mapping[str, str]] = MappingProxyType(
    {
        # daily.status (plan "Daily cutover", verbatim).
        "P_DAILY_COMPLETE": "저장된 오늘 기록을 확인했습니다",
        "P_DAILY_PARTIAL": "일부 항목이 기록되지 않아 저장된 내용만 안내합니다",
        # weekly.interpretation branches (plan manifest order).
        "P_WEEKLY_TREND_UNAVAILABLE": "이번 주 기록만으로는 체중 변화 추세를 판단하기 어렵습니다",
        "A_WEEKLY_RECHECK_AFTER_RECORD": "기록이 더 쌓인 뒤 체중 변화 추세를 다시 확인하세요",
        "P_WEEKLY_TREND_OBSERVED": "이번 주 체중 변화 추세를 확인했습니다",
        "A_WEEKLY_HOLD_FOR_MISSING_GOAL": "목표가 정해질 때까지 계획 판단을 보류하세요",
        "P_WEEKLY_IN_GOAL": "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다",
        "P_WEEKLY_KEEP_BASIS": "이 흐름을 근거로 현재 계획을 그대로 이어갑니다",
        "P_WEEKLY_OUT_OF_GOAL": "체중 변화가 목표 범위를 벗어났습니다",
        "A_WEEKLY_RECHECK_INPUT": "입력된 기록이 정확한지 다시 확인하세요",
        # weekly.rationale.
        "A_WEEKLY_KEEP_BASELINE": "현재 기준 섭취 계획을 그대로 유지하세요",
        "A_WEEKLY_REVIEW_ADJUSTMENT": "섭취 계획을 조정할 필요가 있는지 검토하세요",
        "P_WEEKLY_RECORDS_INSUFFICIENT": "판단에 필요한 기록이 아직 부족합니다",
        # adaptive.dual.judgment / adaptive.dual.review.N: the host's only PUBLIC
        # decision and reason texts (Carrie111998/Hermes@4305027f,
        # tests/gateway/test_korean_humanizer.py: ADAPTIVE). The profile's other
        # texts are private: the operator adds them in the operator glossary
        # (gateway_shim.operator_glossary), never here. The decision is rendered
        # without a final period, each reason with one (the slot's rendering rule).
        "P_DUAL_DECISION_ADHERENCE_CONFLICT_HOLD": "순응도 근거 충돌로 조정 보류",
        "P_DUAL_REASON_SAME_DAY_REVISION": "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다",
        "P_DUAL_REASON_RECALCULATE_FROM_LATEST": "최신 확정 기록을 기준으로 다시 계산해야 합니다",
        # adaptive.physique.review_instruction (plan, verbatim).
        "A_OPERATOR_REVIEW_DECISION": "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요",
    }
)

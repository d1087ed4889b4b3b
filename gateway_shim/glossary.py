"""The reviewed enum glossary: semantic ID → its one local Korean expansion.

Invariants (design §6, §7: the per-slot semantic manifest):

- Each value is exactly one NFC Korean sentence WITHOUT its final period. The
  surface adapters add the period: a slot's canonical text is each expansion
  followed by ``"."``, joined by ``" "`` (the weekly interpretation slot joins
  its two sentences with ``"\n"``, one per line, as the host does) — except the dual
  decision slot, which the host renders without a period (``ProseSlot.final_period``).
- No Latin letters, no newline, no period or comma and no ``[[``: an expansion
  replaces an issued token only after the composition was accepted, so it must
  never look like a token or a layout line. Digits and ``·`` (U+00B7) appear only
  where the host's own fixed sentence has them (weekly: ``최근 7일 평균``,
  ``유지·조정``; dual: ``수정 전·후``); a model can never write them (the contract
  rejects both; `gateway_shim.operator_glossary.audit_text` for operator texts).
- Only the shim holds these sentences. The worker and the provider see the IDs
  alone (design §1, §9): nothing in ``spool`` or ``worker`` may import this module.
- This is a reviewed code constant. A change here changes canonical bodies the
  host renders, so it needs review and golden updates.

The daily entries, ``P_WEEKLY_IN_GOAL`` and ``A_OPERATOR_REVIEW_DECISION`` are the
plan's own words; every weekly entry is the real host's typed-branch sentence
(docs/host-formats.md), and the dual decision/reason entries are the host's public
texts, verbatim (docs/host-formats-adaptive.md), because the canonical body IS the
host's text.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["GLOSSARY", "RETIRED_SHIPPED_IDS"]

GLOSSARY: Final[Mapping[str, str]] = MappingProxyType(
    {
        # daily.status (docs/host-formats.md, the cutover texts, verbatim).
        "P_DAILY_COMPLETE": "저장된 오늘 기록을 확인했습니다",
        "P_DAILY_PARTIAL": "일부 항목이 기록되지 않아 저장된 내용만 안내합니다",
        # weekly.interpretation branches (plan manifest order): the host's typed-branch
        # lines, verbatim without the final period (HOST-FORMATS §4.4; Hermes@4305027f
        # gateway/platforms/telegram.py:TelegramAdapter._nutrition_weekly_interpretation).
        "P_WEEKLY_TREND_UNAVAILABLE": (
            "최근 7일 평균과 이전 7일 평균을 확인할 수 없어 추세를 판단하지 않습니다"
        ),
        "A_WEEKLY_RECHECK_AFTER_RECORD": "기록이 보완된 뒤 유지·조정 여부를 다시 확인합니다",
        "P_WEEKLY_TREND_OBSERVED": "최근 7일 평균과 이전 7일 평균의 차이를 확인했습니다",
        "A_WEEKLY_HOLD_FOR_MISSING_GOAL": "목표 범위가 없어 이번 주 조정 판단은 보류합니다",
        "P_WEEKLY_IN_GOAL": "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다",
        "P_WEEKLY_KEEP_BASIS": "현재 속도라면 이번 주에는 기준을 유지합니다",
        "P_WEEKLY_OUT_OF_GOAL": "주간 체중 변화가 린매스업 목표 범위를 벗어났습니다",
        "A_WEEKLY_RECHECK_INPUT": "다음 기록에서 섭취와 체중 추세를 함께 확인합니다",
        # weekly.rationale: the host's typed rationale per judgment, verbatim without the
        # final period (HOST-FORMATS §4.7; ...:TelegramAdapter._nutrition_weekly_rationale).
        "A_WEEKLY_KEEP_BASELINE": "급격한 증량이나 정체가 없어 이번 주에는 기준을 유지합니다",
        "A_WEEKLY_REVIEW_ADJUSTMENT": (
            "목표 범위를 벗어난 변화가 확인되어 다음 기록에서 조정을 검토합니다"
        ),
        "P_WEEKLY_RECORDS_INSUFFICIENT": "기록이 충분하지 않아 이번 주 판단을 확정하지 않습니다",
        # adaptive.dual.judgment / adaptive.dual.review.N: the host's only PUBLIC
        # decision and reason texts (Carrie111998/Hermes@4305027f,
        # tests/gateway/test_korean_humanizer.py: ADAPTIVE). The profile's other
        # texts are private: the operator adds them in the operator glossary
        # (gateway_shim.operator_glossary), never here. The decision is rendered
        # without a final period, each reason with one (the slot's rendering rule).
        # Their IDs are short (they are ours; the model echoes each one):
        # `RETIRED_SHIPPED_IDS` below has the names earlier releases shipped.
        "P_DUAL_DECISION_HOLD": "순응도 근거 충돌로 조정 보류",
        "P_DUAL_REASON_EDIT": "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다",
        "P_DUAL_REASON_LATEST": "최신 확정 기록을 기준으로 다시 계산해야 합니다",
        # adaptive.physique.review_instruction (plan, verbatim).
        "A_OPERATOR_REVIEW_DECISION": "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요",
    }
)

# The dual IDs earlier releases shipped for the same public texts, each with the ID
# that replaced it. They stay reserved: an operator glossary may never define one
# (as before), and a shipped text takes its retired ID again in a glossary whose
# operator file already uses the new one for a text of its own (a file written
# before the rename, when that name was free): `gateway_shim.operator_glossary`.
RETIRED_SHIPPED_IDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "P_DUAL_DECISION_ADHERENCE_CONFLICT_HOLD": "P_DUAL_DECISION_HOLD",
        "P_DUAL_REASON_SAME_DAY_REVISION": "P_DUAL_REASON_EDIT",
        "P_DUAL_REASON_RECALCULATE_FROM_LATEST": "P_DUAL_REASON_LATEST",
    }
)
assert set(RETIRED_SHIPPED_IDS.values()) <= set(GLOSSARY)

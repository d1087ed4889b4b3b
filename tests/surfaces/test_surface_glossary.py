"""The reviewed enum glossary (design §7): one NFC Korean sentence per ID."""

from __future__ import annotations

import re
import unicodedata
from types import MappingProxyType

import pytest

from gateway_shim.glossary import GLOSSARY

# The plan's own four entries, verbatim ("Daily cutover", "Per-slot semantic manifest").
PLAN_ENTRIES = {
    "P_DAILY_COMPLETE": "저장된 오늘 기록을 확인했습니다",
    "P_DAILY_PARTIAL": "일부 항목이 기록되지 않아 저장된 내용만 안내합니다",
    "P_WEEKLY_IN_GOAL": "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다",
    "A_OPERATOR_REVIEW_DECISION": "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요",
}

# The real host's typed weekly sentences, verbatim without the final period
# (HOST-FORMATS §4.4, §4.7; Hermes@4305027f gateway/platforms/telegram.py:
# TelegramAdapter._nutrition_weekly_interpretation / _nutrition_weekly_rationale).
HOST_ENTRIES = {
    "P_WEEKLY_TREND_UNAVAILABLE": "최근 7일 평균과 이전 7일 평균을 확인할 수 없어 추세를 판단하지 않습니다",
    "A_WEEKLY_RECHECK_AFTER_RECORD": "기록이 보완된 뒤 유지·조정 여부를 다시 확인합니다",
    "P_WEEKLY_TREND_OBSERVED": "최근 7일 평균과 이전 7일 평균의 차이를 확인했습니다",
    "A_WEEKLY_HOLD_FOR_MISSING_GOAL": "목표 범위가 없어 이번 주 조정 판단은 보류합니다",
    "P_WEEKLY_IN_GOAL": "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다",
    "P_WEEKLY_KEEP_BASIS": "현재 속도라면 이번 주에는 기준을 유지합니다",
    "P_WEEKLY_OUT_OF_GOAL": "주간 체중 변화가 린매스업 목표 범위를 벗어났습니다",
    "A_WEEKLY_RECHECK_INPUT": "다음 기록에서 섭취와 체중 추세를 함께 확인합니다",
    "A_WEEKLY_KEEP_BASELINE": "급격한 증량이나 정체가 없어 이번 주에는 기준을 유지합니다",
    "A_WEEKLY_REVIEW_ADJUSTMENT": "목표 범위를 벗어난 변화가 확인되어 다음 기록에서 조정을 검토합니다",
    "P_WEEKLY_RECORDS_INSUFFICIENT": "기록이 충분하지 않아 이번 주 판단을 확정하지 않습니다",
    # The host's public dual texts (tests/gateway/test_korean_humanizer.py@4305027f ADAPTIVE).
    "P_DUAL_DECISION_HOLD": "순응도 근거 충돌로 조정 보류",
    "P_DUAL_REASON_EDIT": "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다",
    "P_DUAL_REASON_LATEST": "최신 확정 기록을 기준으로 다시 계산해야 합니다",
}
# Characters only the host's own fixed sentences carry (7일, 유지·조정, 전·후).
HOST_ONLY_CHARS = set("0123456789\u00b7")

EXPECTED_IDS = {
    "P_DAILY_COMPLETE",
    "P_DAILY_PARTIAL",
    "P_WEEKLY_TREND_UNAVAILABLE",
    "A_WEEKLY_RECHECK_AFTER_RECORD",
    "P_WEEKLY_TREND_OBSERVED",
    "A_WEEKLY_HOLD_FOR_MISSING_GOAL",
    "P_WEEKLY_IN_GOAL",
    "P_WEEKLY_KEEP_BASIS",
    "P_WEEKLY_OUT_OF_GOAL",
    "A_WEEKLY_RECHECK_INPUT",
    "A_WEEKLY_KEEP_BASELINE",
    "A_WEEKLY_REVIEW_ADJUSTMENT",
    "P_WEEKLY_RECORDS_INSUFFICIENT",
    "P_DUAL_DECISION_HOLD",
    "P_DUAL_REASON_EDIT",
    "P_DUAL_REASON_LATEST",
    "A_OPERATOR_REVIEW_DECISION",
}


def test_glossary_ids_are_exactly_the_manifest_ids() -> None:
    assert set(GLOSSARY) == EXPECTED_IDS


def test_plan_entries_are_verbatim() -> None:
    for semantic_id, sentence in PLAN_ENTRIES.items():
        assert GLOSSARY[semantic_id] == sentence


def test_weekly_entries_are_the_hosts_sentences_verbatim() -> None:
    for semantic_id, sentence in HOST_ENTRIES.items():
        assert GLOSSARY[semantic_id] == sentence, semantic_id


def test_glossary_is_read_only() -> None:
    assert isinstance(GLOSSARY, MappingProxyType)
    with pytest.raises(TypeError):
        GLOSSARY["P_DAILY_COMPLETE"] = "x"  # type: ignore[index]


def test_id_prefix_names_its_token_family() -> None:
    for semantic_id in GLOSSARY:
        assert re.fullmatch(r"[PA]_[A-Z]+(_[A-Z]+)+", semantic_id), semantic_id


# The host's public dual texts (Carrie111998/Hermes@4305027f,
# tests/gateway/test_korean_humanizer.py: ADAPTIVE), verbatim without the final period.
HOST_DUAL_TEXTS = {
    "P_DUAL_DECISION_HOLD": "순응도 근거 충돌로 조정 보류",
    "P_DUAL_REASON_EDIT": "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다",
    "P_DUAL_REASON_LATEST": "최신 확정 기록을 기준으로 다시 계산해야 합니다",
}


def test_dual_entries_are_the_hosts_public_texts_only() -> None:
    assert {i: t for i, t in GLOSSARY.items() if i.startswith("P_DUAL_")} == HOST_DUAL_TEXTS


@pytest.mark.parametrize("semantic_id", sorted(EXPECTED_IDS))
def test_entry_is_one_clean_sentence(semantic_id: str) -> None:
    sentence = GLOSSARY[semantic_id]
    assert sentence
    assert unicodedata.normalize("NFC", sentence) == sentence
    assert sentence == sentence.strip()
    assert not sentence.endswith(".")
    assert "." not in sentence
    assert "[[" not in sentence and "]]" not in sentence
    for char in sentence:
        category = unicodedata.category(char)
        if char in HOST_ONLY_CHARS:
            assert semantic_id in HOST_ENTRIES, "digits and · only in the host's sentences"
            continue
        assert category != "Nd", "no digits"
        assert category[0] != "C", "no control, format or surrogate characters"
        assert category not in ("Zl", "Zp"), "no line breaks"
        assert not ("A" <= char.upper() <= "Z"), "no ASCII Latin"
        assert "LATIN" not in unicodedata.name(char, ""), "no Latin letters"
        # Hangul syllables and the plain ASCII space only; a dual text may join two
        # words with U+00B7 as the host's public reason does ("수정 전·후").
        dual = semantic_id.startswith("P_DUAL_")
        assert char == " " or "\uac00" <= char <= "\ud7a3" or (dual and char == "\u00b7"), char
    assert "\n" not in sentence
    assert "  " not in sentence

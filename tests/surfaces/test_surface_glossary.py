"""The reviewed enum glossary (SPEC §7): one NFC Korean sentence per ID."""

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
    "P_DUAL_DECISION_ADHERENCE_CONFLICT_HOLD",
    "P_DUAL_REASON_SAME_DAY_REVISION",
    "P_DUAL_REASON_RECALCULATE_FROM_LATEST",
    "A_OPERATOR_REVIEW_DECISION",
}


def test_glossary_ids_are_exactly_the_manifest_ids() -> None:
    assert set(GLOSSARY) == EXPECTED_IDS


def test_plan_entries_are_verbatim() -> None:
    for semantic_id, sentence in PLAN_ENTRIES.items():
        assert GLOSSARY[semantic_id] == sentence


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
    "P_DUAL_DECISION_ADHERENCE_CONFLICT_HOLD": "순응도 근거 충돌로 조정 보류",
    "P_DUAL_REASON_SAME_DAY_REVISION": "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다",
    "P_DUAL_REASON_RECALCULATE_FROM_LATEST": "최신 확정 기록을 기준으로 다시 계산해야 합니다",
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

"""Lexicon and glossary audit.

The lexicon is the only Korean a model may write; the glossary is the only Korean a
token expands to. This audit checks both against the *plan's own lists*, written out
here from the seed plan (not imported from ``kexpr.spool.contract.lexicon``), and against
the code's extended lists too, so neither a lexicon edit nor a list edit can slip a
forbidden word into an accepted composition.
"""

from __future__ import annotations

import itertools
import re
import unicodedata

import pytest

from adversarial.oracle import PLAN_VOCABULARY, SPEC_LEXICON
from gateway_shim.glossary import GLOSSARY
from kexpr.spool.contract import (
    ALL_SEMANTIC_IDS,
    MANIFEST,
    SAFE_STYLE_LEXEMES,
    check_generated,
    slot_policy,
)
from kexpr.spool.contract import lexicon as code_lists

PLAN_EVIDENTIAL = ("확인 결과", "확인결과", "기록상", "분석")
PLAN_UNITS_DATES = ("kg", "kcal", "g", "L", "일", "주", "월", "년", "시간")
# design §6: "Hangul number words as whole words (하나 둘 셋 … 일 이 삼 … 십 백 천 만)",
# written out: native, Sino-Korean, determiner forms.
SPEC_NUMBER_WORDS = (  # noqa: SIM905
    "하나 둘 셋 넷 다섯 여섯 일곱 여덟 아홉 열 스물 서른 마흔 쉰 예순 일흔 여든 아흔 백 "
    "일 이 삼 사 오 육 칠 팔 구 십 천 만 억 조 영 공 한 두 세 네 스무"
).split()

HANGUL_SYLLABLE = re.compile("[\uac00-\ud7a3]+")


def test_lexicon_is_the_spec_list() -> None:
    assert SAFE_STYLE_LEXEMES == SPEC_LEXICON
    # design §6's twenty, then the one reviewed word (design §6.2).
    assert len(SPEC_LEXICON) == 21 == len(set(SPEC_LEXICON))
    assert SPEC_LEXICON[20:] == ("다만",)


@pytest.mark.parametrize("lexeme", SAFE_STYLE_LEXEMES)
def test_lexeme_is_clean(lexeme: str) -> None:
    assert unicodedata.is_normalized("NFC", lexeme)
    assert HANGUL_SYLLABLE.fullmatch(lexeme), "Hangul syllables only: no separator, digit, Latin"
    # No forbidden substring: the plan's lists and the code's extended ones.
    for word in (
        *PLAN_VOCABULARY,
        *(e.replace(" ", "") for e in PLAN_EVIDENTIAL),
        *code_lists.FORBIDDEN_VOCABULARY,
        *code_lists.EVIDENTIAL_CLAIMS,
        *code_lists.NEGATION_MODALITY_SUBSTRINGS,
        *(u for u in PLAN_UNITS_DATES if len(u) > 1),
        *code_lists.UNIT_DATE_SUFFIXES,
    ):
        assert word not in lexeme, word
    # Not a number, unit or date word *as a word* (하나씩 contains 하나 and is fine).
    assert lexeme not in SPEC_NUMBER_WORDS
    assert lexeme not in code_lists.NUMBER_WORDS
    assert lexeme not in PLAN_UNITS_DATES
    assert lexeme not in code_lists.UNIT_DATE_WORDS
    assert lexeme not in code_lists.NEGATION_MODALITY_WORDS
    assert not set(lexeme) & code_lists.HANJA_NUMERALS


def test_single_syllable_units_are_not_in_any_lexeme() -> None:
    # 일 주 월 년 are whole words in the grammar's checks, but no lexeme even contains
    # them, so a substring check would be as safe (no lexeme would be lost).
    for unit in ("일", "주", "월", "년"):
        assert not any(unit in lexeme for lexeme in SAFE_STYLE_LEXEMES), unit


def test_no_lexeme_run_spells_a_forbidden_claim() -> None:
    # The evidential check joins a segment's words without separators; no run of up
    # to three lexemes may spell a claim or a forbidden word across word boundaries.
    forbidden = (
        *code_lists.EVIDENTIAL_CLAIMS,
        *(e.replace(" ", "") for e in PLAN_EVIDENTIAL),
        *PLAN_VOCABULARY,
    )
    for n in (2, 3):
        for run in itertools.product(SAFE_STYLE_LEXEMES, repeat=n):
            joined = "".join(run)
            assert not any(word in joined for word in forbidden), run


def test_spec_number_words_are_covered_by_the_code() -> None:
    assert set(SPEC_NUMBER_WORDS) <= code_lists.NUMBER_WORDS
    assert PLAN_VOCABULARY == code_lists.FORBIDDEN_VOCABULARY[: len(PLAN_VOCABULARY)]


@pytest.mark.parametrize("word", SPEC_NUMBER_WORDS)
def test_every_number_word_is_rejected_as_a_word(word: str) -> None:
    policy = slot_policy("daily.status", ["P_DAILY_COMPLETE"])
    assert check_generated(policy, f"차분히 {word} [[P:01]].") is not None
    assert check_generated(policy, f"{word}, [[P:01]].") is not None


# -- glossary --------------------------------------------------------------------------


def test_glossary_covers_exactly_the_manifest_ids() -> None:
    assert set(GLOSSARY) == set(ALL_SEMANTIC_IDS)


@pytest.mark.parametrize("semantic_id", sorted(GLOSSARY))
def test_glossary_expansion_is_one_clean_sentence(semantic_id: str) -> None:
    expansion = GLOSSARY[semantic_id]
    assert unicodedata.is_normalized("NFC", expansion)
    # One sentence without its final period (the adapters add it): Hangul words
    # separated by single ASCII spaces. So no grammar separator but the space — no
    # period, no comma — no token brackets, Latin letter or line break: an
    # expansion can never be mistaken for a token or a layout line. The weekly
    # entries are the real host's fixed sentences (docs/host-formats.md) and keep
    # its "7일" and "유지·조정": ASCII digits and U+00B7 only there. A dual text
    # (the host's, shipped or operator) may also join two words with U+00B7, as
    # the host's public reason "수정 전·후" does; no digit there.
    if semantic_id.startswith(("P_WEEKLY_", "A_WEEKLY_")):
        word = "[\uac00-\ud7a30-9\u00b7]+"
        assert re.fullmatch(f"{word}(?: {word})*", expansion), expansion
    else:
        joiner = "[ \u00b7]" if semantic_id.startswith("P_DUAL_") else " "
        assert re.fullmatch(f"[\uac00-\ud7a3]+(?:{joiner}[\uac00-\ud7a3]+)*", expansion), expansion
    assert not any(sep in expansion for sep in (".", ",", "[[", "]]", "\n"))


@pytest.mark.parametrize("semantic_id", sorted(GLOSSARY))
def test_literal_expansion_is_rejected_in_every_slot_issuing_it(semantic_id: str) -> None:
    # A model that writes the expansion (it never sees it, but might guess it) instead
    # of the token, or beside it, is rejected wherever the ID is issued.
    expansion = GLOSSARY[semantic_id]
    checked = 0
    for row in MANIFEST.values():
        for branch in row.branches:
            if semantic_id not in branch:
                continue
            policy = slot_policy(row.slot_ids[0], branch)
            tokens = policy.required_placeholder_tokens
            token = tokens[list(policy.semantic_ids).index(semantic_id)]
            canonical = " ".join(f"{t}." for t in tokens)
            assert (
                check_generated(policy, "차분히, " + canonical.replace(token, expansion))
                is not None
            )
            assert (
                check_generated(policy, "차분히, " + canonical + " " + expansion + ".") is not None
            )
            checked += 1
    assert checked >= 1

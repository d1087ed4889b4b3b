"""The lexicon cannot smuggle a forbidden class (lexicon.py Rule 2)."""

from __future__ import annotations

import itertools
import unicodedata

import pytest
from adversarial.oracle import PLAN_VOCABULARY
from contract_support import DAILY_SLOT, STYLED_SLOT

from kexpr.spool.contract import SAFE_STYLE_LEXEMES, Reason, check_generated, check_grammar
from kexpr.spool.contract._grammar import char_class
from kexpr.spool.contract.lexicon import (
    EVIDENTIAL_CLAIMS,
    FORBIDDEN_VOCABULARY,
    NEGATION_MODALITY_SUBSTRINGS,
    NEGATION_MODALITY_WORDS,
    NUMBER_WORDS,
    UNIT_DATE_SUFFIXES,
    UNIT_DATE_WORDS,
)


def test_lexicon_is_the_spec_constant() -> None:
    spec = "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 순서대로 함께 지금 이제 여기서 아래 바로 그대로 특히 잠시 다시"  # design §6, verbatim
    # ... and the one reviewed word beyond the plan's twenty (design §6.2).
    assert SAFE_STYLE_LEXEMES == (*spec.split(" "), "다만")
    assert len(set(SAFE_STYLE_LEXEMES)) == len(SAFE_STYLE_LEXEMES)


@pytest.mark.parametrize("lexeme", SAFE_STYLE_LEXEMES)
def test_lexeme_is_clean(lexeme: str) -> None:
    assert unicodedata.is_normalized("NFC", lexeme)
    assert all(char_class(ch) is None and ch not in " ,." for ch in lexeme)
    assert lexeme not in NUMBER_WORDS
    assert lexeme not in UNIT_DATE_WORDS
    assert not lexeme.endswith(UNIT_DATE_SUFFIXES)
    assert lexeme not in NEGATION_MODALITY_WORDS
    for substring in (*FORBIDDEN_VOCABULARY, *NEGATION_MODALITY_SUBSTRINGS, *EVIDENTIAL_CLAIMS):
        assert substring not in lexeme


def test_no_lexeme_sequence_forms_an_evidential_claim() -> None:
    # The evidential check joins a segment's words; no 1-3 lexeme run may match.
    for n in (2, 3):
        for run in itertools.product(SAFE_STYLE_LEXEMES, repeat=n):
            joined = "".join(run)
            assert not any(claim in joined for claim in EVIDENTIAL_CLAIMS), run


def test_plan_vocabulary_is_present() -> None:
    assert FORBIDDEN_VOCABULARY[: len(PLAN_VOCABULARY)] == PLAN_VOCABULARY
    assert {"확인결과", "기록상", "분석"} <= set(EVIDENTIAL_CLAIMS)
    assert {"하나", "둘", "셋", "일", "이", "삼", "십", "백", "천", "만"} <= NUMBER_WORDS
    assert {"주", "월", "년", "시간"} <= UNIT_DATE_WORDS


@pytest.mark.parametrize("lexeme", SAFE_STYLE_LEXEMES)
def test_every_lexeme_composes(lexeme: str) -> None:
    # Every lexeme is grammatical with either join; the fit table (design §6.1, §6.2)
    # then keeps none before the daily status, and only 다만, with either join,
    # before the goal-missing hold.
    for slot, text, fits in (
        (DAILY_SLOT, f"{lexeme}, [[P:01]].", False),
        (DAILY_SLOT, f"{lexeme} [[P:01]].", False),
        (STYLED_SLOT, f"[[P:01]]. {lexeme}, [[A:01]].", lexeme == "다만"),
        (STYLED_SLOT, f"[[P:01]]. {lexeme} [[A:01]].", lexeme == "다만"),
        (STYLED_SLOT, f"{lexeme} [[P:01]]. [[A:01]].", False),
    ):
        assert check_grammar(slot, text) is None
        assert check_generated(slot, text) is (None if fits else Reason.STYLE_MISFIT)


def test_words_containing_number_syllables_are_lexemes_not_numbers() -> None:
    # 하나씩 ⊃ 하나, 이제/이어서 ⊃ 이: whole-word matching keeps them legal in the
    # grammar. Three words before one sentence are then stacked (design §6.1).
    assert check_grammar(DAILY_SLOT, "하나씩 이제 이어서, [[P:01]].") is None
    assert check_generated(DAILY_SLOT, "하나씩 이제 이어서, [[P:01]].") is Reason.STACKED_STYLE

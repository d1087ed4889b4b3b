"""The style grammar of `generated_ko` (SPEC §6; resolves the seed plan's BNF).

    generated_ko ::= sentence (" " sentence)*        ; one sentence per issued token
    sentence     ::= style? TOKEN "."
    style        ::= LEXEME (" " LEXEME)* (", " | " ")
    LEXEME       ::= one exact item of SAFE_STYLE_LEXEMES
    TOKEN        ::= the next issued token, in issued order

Rules for this module:

Rule 1: the model writes *style*, never a proposition. Outside the issued tokens only
        lexicon words, ASCII space, comma and period may appear; every issued token
        appears exactly once and in issued order; at least one lexeme appears (a
        canonical-only `[[P:01]].` is a selector, not a composition); lexemes ≤ the
        slot's max; code points ≤ the slot's max.
Rule 2: a rejection names the *most specific* problem, so the checks run in a fixed
        precedence and the first class that occurs anywhere in the string wins (not the
        first occurrence by position). The precedence, highest first:

          too_long               hard limit, checked before anything is scanned
          -- characters outside well-formed tokens, and whole words --
          disallowed_whitespace  any whitespace but ASCII space (tab, LF, CR, NBSP,
                                 U+3000 …), zero-width characters (ZWSP, ZWJ, ZWNJ,
                                 word joiner, BOM, CGJ), Hangul fillers, braille blank
          control_character      other Cc / Cf / Cs (bidi controls, soft hyphen …)
          malformed_token        `[` or `]` outside a well-formed token: `[[P:1]]`,
                                 `[[p:01]]`, `[[[P:01]]]`, `[[X:01]]` (before digit and
                                 latin, so a broken token is reported as one)
          bracket                ( ) { } < > and every other open/close punctuation
          quote                  ASCII and typographic quotes, 「 」 『 』 (before bracket,
                                 although corner brackets are open/close punctuation)
          url                    `://`, `www.`, `http:`, `t.me/`, `.com` … (before
                                 latin: a URL is more specific than its letters)
          latin                  Latin letters, fullwidth too; covers semantic IDs in
                                 prose (P_DAILY_COMPLETE) and units kg / kcal / g / L
          digit                  any Unicode number: Nd (fullwidth too), Nl, No (①, ½)
          number_word            Hangul number words as whole words (하나 둘 … 일 이 삼
                                 … 십 백 천 만), Hanja numerals (一 十 百 …)
          layout_syntax          `#` `*` `|` `` ` `` `_` and bullets (• · ‣ ∙ ※) anywhere;
                                 `-` `>` `+` `=` and any bullet as the first non-space
                                 character (a Markdown list, quote or heading)
          arithmetic_symbol      + - % ~ and their fullwidth / typographic forms
                                 (－ ％ ～ 〜 − – — × ÷ ± ‰)
          unit_or_date           unit symbols (㎏ ㎉ ℃ ℓ …), currency signs, and unit or
                                 date words (주 월 년 시간 오늘 매일 …; endings 시간
                                 주일 개월 요일 …). Whole word 일 is a number word first.
          emoji                  any other non-ASCII symbol (So Sk Sm Me) and variation
                                 selectors
          evidential_claim       확인 결과 · 기록상 · 분석 … in the words of one
                                 between-token segment joined without separators
          forbidden_vocabulary   잘 충분 성공 좋 안전 위험 진단 치료 약 유지 조정 측정
                                 기록 승인 전달 전송 보내 … inside a word
          negation_or_modality   않 없 아니 해야 반드시 … inside a word; 안 못 말 as words
          disallowed_character   anything else that is not a Hangul syllable or
                                 ASCII space, comma, period (! ? : / Hangul jamo, Hanja …)
          unknown_word           a word that is not exactly a lexicon item (오늘은)
          -- tokens --
          token_unissued         a well-formed token not issued to this slot
          token_duplicate        an issued token twice
          token_order            issued tokens out of issued order
          token_missing          an issued token absent
          -- structure (the recursive descent parser) --
          grammar                punctuation structure: missing final period, double
                                 space, leading/trailing space, comma not followed by a
                                 space, comma or space right before a token's period,
                                 comma inside a style run
          -- counts --
          no_style_lexeme        no lexeme at all
          too_many_lexemes       more lexemes than the slot allows

Rule 3: the tokenizer splits the text into pieces (a well-formed token, one of ` ` `,`
        `.`, or a maximal run of anything else = a *word*) and classifies a piece only
        with `fullmatch` against `DEFAULT_RULES` — never a prefix `match`, which is how
        partial acceptance bugs happen. Forbidden classes are *searched for* (a hit
        rejects), which is the opposite polarity and the right operation there.
Rule 4: `_StyleError` carries a reason, a message and a span for debugging and tests; it
        never leaves `check_generated`, which returns only the reason (SPEC §6: never
        content).
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, NoReturn

from ._strictjson import HANGUL_FILLERS
from .lexicon import (
    EVIDENTIAL_CLAIMS,
    FORBIDDEN_VOCABULARY,
    HANJA_NUMERALS,
    NEGATION_MODALITY_SUBSTRINGS,
    NEGATION_MODALITY_WORDS,
    NUMBER_WORDS,
    SAFE_STYLE_LEXEMES,
    UNIT_DATE_SUFFIXES,
    UNIT_DATE_WORDS,
    UNIT_SYMBOLS,
)
from .manifest import TOKEN_PATTERN, TOKEN_RE
from .reasons import Reason

if TYPE_CHECKING:
    from ._models import SlotPolicy

# --------------------------------------------------------------------------------------
# Precedence (Rule 2)
# --------------------------------------------------------------------------------------

PRECEDENCE: Final[tuple[Reason, ...]] = (
    Reason.TOO_LONG,
    Reason.DISALLOWED_WHITESPACE,
    Reason.CONTROL_CHARACTER,
    Reason.MALFORMED_TOKEN,
    Reason.BRACKET,
    Reason.QUOTE,
    Reason.URL,
    Reason.LATIN,
    Reason.DIGIT,
    Reason.NUMBER_WORD,
    Reason.LAYOUT_SYNTAX,
    Reason.ARITHMETIC_SYMBOL,
    Reason.UNIT_OR_DATE,
    Reason.EMOJI,
    Reason.EVIDENTIAL_CLAIM,
    Reason.FORBIDDEN_VOCABULARY,
    Reason.NEGATION_OR_MODALITY,
    Reason.DISALLOWED_CHARACTER,
    Reason.UNKNOWN_WORD,
    Reason.TOKEN_UNISSUED,
    Reason.TOKEN_DUPLICATE,
    Reason.TOKEN_ORDER,
    Reason.TOKEN_MISSING,
    Reason.GRAMMAR,
    Reason.NO_STYLE_LEXEME,
    Reason.TOO_MANY_LEXEMES,
)
_RANK: Final[Mapping[Reason, int]] = MappingProxyType({r: i for i, r in enumerate(PRECEDENCE)})

# --------------------------------------------------------------------------------------
# Character classes (Rule 2)
# --------------------------------------------------------------------------------------

_SEPARATORS: Final = frozenset(" ,.")
_INVISIBLE: Final[frozenset[str]] = HANGUL_FILLERS | frozenset(
    "\u034f\u180e\u200b\u200c\u200d\u2060\ufeff\u2800"
)
_SQUARE_BRACKETS: Final = frozenset("[]［］")
_QUOTES: Final = frozenset("\"'＂＇′″‵‶〝〞〟„‚「」『』﹁﹂﹃﹄｢｣")
_ANGLE_BRACKETS: Final = frozenset("<>＜＞﹤﹥")
_LAYOUT_ANYWHERE: Final = frozenset("#*|`_•·‣⁃∙※＃＊｜＿◦▪")
_LAYOUT_LEAD: Final = _LAYOUT_ANYWHERE | frozenset("->+=●■□◆◇○▶▷►→")
_ARITHMETIC: Final = frozenset("+-%~＋－％～〜−‐‑‒–—―×÷±‰∼")
_URL_RE: Final = re.compile(
    r"://|www\.|(?:https?|ftp|mailto|tg|file):|t\.me/|\.(?:com|net|org|kr|io|me|ly)(?![a-z])",
    re.IGNORECASE,
)
_HANGUL_SYLLABLES: Final = ("\uac00", "\ud7a3")


def _is_latin(ch: str) -> bool:
    return unicodedata.name(ch, "").startswith(("LATIN ", "FULLWIDTH LATIN "))


def _is_variation_selector(ch: str) -> bool:
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def char_class(ch: str) -> Reason | None:
    """The forbidden class of one character outside a token, or None if it may appear.

    Each character gets exactly one class; where classes overlap (〇 is a digit and a
    Hanja numeral, ℃ a unit and a symbol) the order of the tests below decides.
    """
    if ch in _SEPARATORS or _HANGUL_SYLLABLES[0] <= ch <= _HANGUL_SYLLABLES[1]:
        return None
    if ch.isspace() or ch in _INVISIBLE:
        return Reason.DISALLOWED_WHITESPACE
    category = unicodedata.category(ch)
    if category in ("Cc", "Cf", "Cs"):
        return Reason.CONTROL_CHARACTER
    if ch in _SQUARE_BRACKETS:
        return Reason.MALFORMED_TOKEN
    if ch in _QUOTES or category in ("Pi", "Pf"):
        return Reason.QUOTE
    if ch in _ANGLE_BRACKETS or category in ("Ps", "Pe"):
        return Reason.BRACKET
    if _is_latin(ch):
        return Reason.LATIN
    if category[0] == "N":
        return Reason.DIGIT
    if ch in HANJA_NUMERALS:
        return Reason.NUMBER_WORD
    if ch in _LAYOUT_ANYWHERE:
        return Reason.LAYOUT_SYNTAX
    if ch in _ARITHMETIC:
        return Reason.ARITHMETIC_SYMBOL
    if ch in UNIT_SYMBOLS or category == "Sc":
        return Reason.UNIT_OR_DATE
    if not ch.isascii() and (category[0] == "S" or category == "Me" or _is_variation_selector(ch)):
        return Reason.EMOJI
    return Reason.DISALLOWED_CHARACTER


# --------------------------------------------------------------------------------------
# Tokenizer (Rule 3)
# --------------------------------------------------------------------------------------

DEFAULT_RULES: Final[Mapping[str, re.Pattern[str]]] = MappingProxyType(
    {
        "TOKEN": TOKEN_RE,
        "LEXEME": re.compile("|".join(re.escape(lexeme) for lexeme in SAFE_STYLE_LEXEMES)),
        "SPACE": re.compile(" "),
        "COMMA": re.compile(","),
        "PERIOD": re.compile(r"\."),
    }
)

# Splits text into pieces; every character lands in exactly one piece.
_PIECES: Final = re.compile(rf"{TOKEN_PATTERN}|[ ,.]|(?:(?!{TOKEN_PATTERN})[^ ,.])+", re.DOTALL)


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


class _StyleError(Exception):
    """Internal: why a `generated_ko` is rejected, with the span that shows it (Rule 4)."""

    def __init__(self, reason: Reason, message: str, span: tuple[int, int]) -> None:
        super().__init__(f"{reason.value}: {message} at {span[0]}:{span[1]}")
        self.reason = reason
        self.message = message
        self.span = span

    def explain(self, source: str) -> str:
        """packaging-style message with a caret under the span (for tests / debugging)."""
        start, end = self.span
        marker = " " * start + "~" * max(end - start - 1, 0) + "^"
        return f"{self.reason.value}: {self.message}\n    {source}\n    {marker}"


class _Tokenizer:
    """The pieces of one `generated_ko`, consumed left to right by the parser."""

    def __init__(self, source: str, *, rules: Mapping[str, re.Pattern[str]]) -> None:
        self.source = source
        self.rules = rules
        self.pieces = tuple(_Piece(m.group(), m.start()) for m in _PIECES.finditer(source))
        self.position = 0

    def is_(self, piece: _Piece, name: str) -> bool:
        return self.rules[name].fullmatch(piece.text) is not None

    def check(self, name: str) -> bool:
        """Whether the next piece is a `name` ("END": there is no next piece)."""
        if name == "END":
            return self.position == len(self.pieces)
        if self.position == len(self.pieces):
            return False
        return self.is_(self.pieces[self.position], name)

    def read(self) -> _Piece:
        piece = self.pieces[self.position]
        self.position += 1
        return piece

    def expect(self, name: str, *, expected: str) -> _Piece | None:
        """Consume a `name` piece (None for "END") or raise a grammar error."""
        if not self.check(name):
            self.raise_syntax_error(f"Expected {expected}")
        return None if name == "END" else self.read()

    def raise_syntax_error(
        self, message: str, *, reason: Reason = Reason.GRAMMAR, piece: _Piece | None = None
    ) -> NoReturn:
        if piece is None:
            if self.position < len(self.pieces):
                piece = self.pieces[self.position]
            else:
                piece = _Piece("", len(self.source))
        raise _StyleError(reason, message, (piece.start, max(piece.end, piece.start + 1)))


# --------------------------------------------------------------------------------------
# Forbidden classes, words and tokens (Rule 2)
# --------------------------------------------------------------------------------------


def _segments(tokenizer: _Tokenizer) -> Iterator[list[_Piece]]:
    """Runs of non-token pieces between tokens (and at either end)."""
    run: list[_Piece] = []
    for piece in tokenizer.pieces:
        if tokenizer.is_(piece, "TOKEN"):
            yield run
            run = []
        else:
            run.append(piece)
    yield run


def _words(tokenizer: _Tokenizer) -> Iterator[_Piece]:
    for piece in tokenizer.pieces:
        if piece.text not in _SEPARATORS and not tokenizer.is_(piece, "TOKEN"):
            yield piece


def _findings(tokenizer: _Tokenizer) -> Iterator[tuple[Reason, tuple[int, int]]]:
    source = tokenizer.source
    lead = len(source) - len(source.lstrip(" "))

    for word in _words(tokenizer):
        for offset, ch in enumerate(word.text):
            index = word.start + offset
            reason = char_class(ch)
            if index == lead and ch in _LAYOUT_LEAD:
                reason = Reason.LAYOUT_SYNTAX
            if reason is not None:
                yield reason, (index, index + 1)

        text = word.text
        if text in NUMBER_WORDS:
            yield Reason.NUMBER_WORD, (word.start, word.end)
        if text in UNIT_DATE_WORDS or text.endswith(UNIT_DATE_SUFFIXES):
            yield Reason.UNIT_OR_DATE, (word.start, word.end)
        if any(v in text for v in FORBIDDEN_VOCABULARY):
            yield Reason.FORBIDDEN_VOCABULARY, (word.start, word.end)
        if text in NEGATION_MODALITY_WORDS or any(n in text for n in NEGATION_MODALITY_SUBSTRINGS):
            yield Reason.NEGATION_OR_MODALITY, (word.start, word.end)
        if tokenizer.rules["LEXEME"].fullmatch(text) is None:
            yield Reason.UNKNOWN_WORD, (word.start, word.end)

    for segment in _segments(tokenizer):
        if not segment:
            continue
        start = segment[0].start
        text = "".join(p.text for p in segment)  # contiguous in the source
        for m in _URL_RE.finditer(text):
            yield Reason.URL, (start + m.start(), start + m.end())
        # Evidential phrases span words ("확인 결과"): join the segment's words.
        positions = [
            p.start + i for p in segment if p.text not in _SEPARATORS for i in range(len(p.text))
        ]
        joined = "".join(p.text for p in segment if p.text not in _SEPARATORS)
        for claim in EVIDENTIAL_CLAIMS:
            at = joined.find(claim)
            if at >= 0:
                yield Reason.EVIDENTIAL_CLAIM, (positions[at], positions[at + len(claim) - 1] + 1)


def _check_tokens(tokenizer: _Tokenizer, issued: tuple[str, ...]) -> None:
    seen = [p for p in tokenizer.pieces if tokenizer.is_(p, "TOKEN")]
    for piece in seen:
        if piece.text not in issued:
            tokenizer.raise_syntax_error(
                "token not issued to this slot", reason=Reason.TOKEN_UNISSUED, piece=piece
            )
    texts = [p.text for p in seen]
    for index, piece in enumerate(seen):
        if piece.text in texts[:index]:
            tokenizer.raise_syntax_error(
                "token repeated", reason=Reason.TOKEN_DUPLICATE, piece=piece
            )
    for before, piece in itertools.pairwise(seen):
        if issued.index(before.text) > issued.index(piece.text):
            tokenizer.raise_syntax_error(
                "token out of issued order", reason=Reason.TOKEN_ORDER, piece=piece
            )
    for token in issued:
        if token not in texts:
            tokenizer.raise_syntax_error(
                f"missing token {token}",
                reason=Reason.TOKEN_MISSING,
                piece=_Piece("", len(tokenizer.source)),
            )


# --------------------------------------------------------------------------------------
# Recursive descent parser (packaging/_parser.py style)
# --------------------------------------------------------------------------------------


def _parse_generated_ko(tokenizer: _Tokenizer, issued: tuple[str, ...]) -> int:
    """
    generated_ko ::= sentence (" " sentence)*        ; one sentence per issued token

    Returns the number of lexemes.
    """
    lexemes = _parse_sentence(tokenizer, issued[0])
    for token in issued[1:]:
        tokenizer.expect("SPACE", expected="a space between sentences")
        lexemes += _parse_sentence(tokenizer, token)
    tokenizer.expect("END", expected="end of text after the last sentence")
    return lexemes


def _parse_sentence(tokenizer: _Tokenizer, token: str) -> int:
    """
    sentence ::= style? TOKEN "."
    """
    lexemes = _parse_style(tokenizer) if tokenizer.check("LEXEME") else 0
    piece = tokenizer.expect("TOKEN", expected="a style lexeme or the next token")
    if piece is None or piece.text != token:  # unreachable after _check_tokens
        tokenizer.raise_syntax_error(
            "token out of issued order", reason=Reason.TOKEN_ORDER, piece=piece
        )
    tokenizer.expect("PERIOD", expected="'.' right after the token")
    return lexemes


def _parse_style(tokenizer: _Tokenizer) -> int:
    """
    style ::= LEXEME (" " LEXEME)* (", " | " ")
    """
    tokenizer.expect("LEXEME", expected="a style lexeme")
    lexemes = 1
    while True:
        if tokenizer.check("COMMA"):
            tokenizer.read()
            tokenizer.expect("SPACE", expected="a space after ','")
            return lexemes
        tokenizer.expect("SPACE", expected="',' or a space after a lexeme")
        if not tokenizer.check("LEXEME"):
            return lexemes
        tokenizer.read()
        lexemes += 1


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------


def validate_generated(slot: SlotPolicy, generated_ko: str) -> int:
    """Raise `_StyleError` for the highest-precedence problem; return the lexeme count."""
    if len(generated_ko) > slot.max_generated_chars:
        raise _StyleError(
            Reason.TOO_LONG,
            "longer than the slot allows",
            (slot.max_generated_chars, len(generated_ko)),
        )
    tokenizer = _Tokenizer(generated_ko, rules=DEFAULT_RULES)

    worst: tuple[int, int, Reason, tuple[int, int]] | None = None
    for reason, span in _findings(tokenizer):
        key = (_RANK[reason], span[0], reason, span)
        if worst is None or key[:2] < worst[:2]:
            worst = key
    if worst is not None:
        raise _StyleError(worst[2], "not allowed outside a token", worst[3])

    issued = slot.required_placeholder_tokens
    _check_tokens(tokenizer, issued)
    lexemes = _parse_generated_ko(tokenizer, issued)
    if lexemes == 0:
        raise _StyleError(Reason.NO_STYLE_LEXEME, "no style lexeme", (0, len(generated_ko)))
    if lexemes > slot.max_style_lexemes:
        raise _StyleError(
            Reason.TOO_MANY_LEXEMES, "more lexemes than the slot allows", (0, len(generated_ko))
        )
    return lexemes


def check_generated(slot: SlotPolicy, generated_ko: str) -> Reason | None:
    """Grammar, forbidden classes and limits for one slot's `generated_ko`; None = ok."""
    try:
        validate_generated(slot, generated_ko)
    except _StyleError as e:
        return e.reason
    return None

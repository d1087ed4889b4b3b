"""The style grammar of `generated_ko` (design §6).

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
          -- meaning (the fit table, `kexpr.spool.contract.fit`) --
          stacked_style          more than one word before one token
          style_misfit           a word, or its comma, outside its sentence's cell

Rule 3: the tokenizer splits the text into pieces (a well-formed token, one of ` ` `,`
        `.`, or a maximal run of anything else = a *word*) and classifies a piece only
        with `fullmatch` against `DEFAULT_RULES` — never a prefix `match`, which is how
        partial acceptance bugs happen. Forbidden classes are *searched for* (a hit
        rejects), which is the opposite polarity and the right operation there.
Rule 4: `_StyleError` carries a reason, a message and a span for debugging and tests; it
        never leaves `check_generated`, which returns only the reason (design §6: never
        content).
Rule 5: a fast path may only *accept*, never reject or choose a reason. After the
        too_long limit, `_accepted_lexemes` matches the whole text against the grammar
        above written as one regular expression — over `_CLEAN_LEXEMES` only (the
        lexemes computed at import to have no finding of their own) and well-formed
        tokens — then requires the tokens found to be exactly the issued ones in
        issued order, no url and no evidential claim in any between-token segment,
        and 1..max lexemes. Such a text has no finding, passes the token checks and
        parses with the same lexeme count, so the full check would accept it too.
        Whenever any of that fails, the full tokenizer, findings and parser above run
        unchanged and decide. `tests/contract/test_contract_equivalence.py` checks
        the fast path against the full check.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, NamedTuple, NoReturn

from ._strictjson import HANGUL_FILLERS
from .fit import style_reason
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
_HANGUL_RUN: Final = re.compile(f"[{_HANGUL_SYLLABLES[0]}-{_HANGUL_SYLLABLES[1]}]+")
if any(_HANGUL_SYLLABLES[0] <= ch <= _HANGUL_SYLLABLES[1] for ch in _LAYOUT_LEAD):
    raise AssertionError("a Hangul syllable must not be a layout lead")  # _word_findings

# "Any of these substrings occurs in the text", as one search each.
_FORBIDDEN_VOCABULARY_RE: Final = re.compile("|".join(map(re.escape, FORBIDDEN_VOCABULARY)))
_NEGATION_MODALITY_RE: Final = re.compile("|".join(map(re.escape, NEGATION_MODALITY_SUBSTRINGS)))
_EVIDENTIAL_CLAIM_RE: Final = re.compile("|".join(map(re.escape, EVIDENTIAL_CLAIMS)))


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

# Splits text into pieces; every character lands in exactly one piece and the pieces are
# contiguous: at any position a token, a separator or a word (>= 1 character) matches.
_PIECES: Final = re.compile(rf"{TOKEN_PATTERN}|[ ,.]|(?:(?!{TOKEN_PATTERN})[^ ,.])+", re.DOTALL)


class _Piece(NamedTuple):
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
        # The pieces tile the source (see _PIECES), so each starts where the last ended.
        texts = _PIECES.findall(source)
        self.pieces = tuple(map(_Piece, texts, itertools.accumulate(map(len, texts), initial=0)))
        # `is_(piece, "TOKEN")` of each piece, computed once (the checks ask it often).
        token = rules["TOKEN"]
        self.is_token = tuple(token.fullmatch(text) is not None for text in texts)
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
    for piece, is_token in zip(tokenizer.pieces, tokenizer.is_token, strict=True):
        if is_token:
            yield run
            run = []
        else:
            run.append(piece)
    yield run


def _words(tokenizer: _Tokenizer) -> Iterator[_Piece]:
    for piece, is_token in zip(tokenizer.pieces, tokenizer.is_token, strict=True):
        if piece.text not in _SEPARATORS and not is_token:
            yield piece


def _word_findings(
    word: _Piece, lead: int, lexeme: re.Pattern[str]
) -> Iterator[tuple[Reason, tuple[int, int]]]:
    """The findings of one word (`lead`: index of the source's first non-space)."""
    text = word.text
    # A run of Hangul syllables has no character finding: char_class is None for each
    # and none is in _LAYOUT_LEAD (checked at import). Anything else is classified.
    if _HANGUL_RUN.fullmatch(text) is None:
        for offset, ch in enumerate(text):
            index = word.start + offset
            reason = char_class(ch)
            if index == lead and ch in _LAYOUT_LEAD:
                reason = Reason.LAYOUT_SYNTAX
            if reason is not None:
                yield reason, (index, index + 1)

    if text in NUMBER_WORDS:
        yield Reason.NUMBER_WORD, (word.start, word.end)
    if text in UNIT_DATE_WORDS or text.endswith(UNIT_DATE_SUFFIXES):
        yield Reason.UNIT_OR_DATE, (word.start, word.end)
    if _FORBIDDEN_VOCABULARY_RE.search(text) is not None:  # any listed substring
        yield Reason.FORBIDDEN_VOCABULARY, (word.start, word.end)
    if text in NEGATION_MODALITY_WORDS or _NEGATION_MODALITY_RE.search(text) is not None:
        yield Reason.NEGATION_OR_MODALITY, (word.start, word.end)
    if lexeme.fullmatch(text) is None:
        yield Reason.UNKNOWN_WORD, (word.start, word.end)


def _findings(tokenizer: _Tokenizer) -> Iterator[tuple[Reason, tuple[int, int]]]:
    source = tokenizer.source
    lead = len(source) - len(source.lstrip(" "))
    lexeme = tokenizer.rules["LEXEME"]
    # With the default rules a lexeme has no finding wherever it stands (checked at
    # import: `_CLEAN_LEXEMES`), so the accepted words skip the per-word checks.
    clean = _CLEAN_LEXEMES if tokenizer.rules is DEFAULT_RULES else frozenset()

    for word in _words(tokenizer):
        if word.text not in clean:
            yield from _word_findings(word, lead, lexeme)

    for segment in _segments(tokenizer):
        if not segment:
            continue
        start = segment[0].start
        text = "".join(p.text for p in segment)  # contiguous in the source
        for m in _URL_RE.finditer(text):
            yield Reason.URL, (start + m.start(), start + m.end())
        # Evidential phrases span words ("확인 결과"): join the segment's words.
        joined = "".join(p.text for p in segment if p.text not in _SEPARATORS)
        if _EVIDENTIAL_CLAIM_RE.search(joined) is None:  # no claim at all: nothing to find
            continue
        positions = [
            p.start + i for p in segment if p.text not in _SEPARATORS for i in range(len(p.text))
        ]
        for claim in EVIDENTIAL_CLAIMS:
            at = joined.find(claim)
            if at >= 0:
                yield Reason.EVIDENTIAL_CLAIM, (positions[at], positions[at + len(claim) - 1] + 1)


# The lexemes that have no finding under the default rules, at the start of the text or
# anywhere else (the only position-dependent finding is a layout lead at the first
# non-space character, which begins a word). Lexicon Rule 2 says that is every lexeme;
# computed, not assumed, so a lexeme that had a finding would still be checked.
_CLEAN_LEXEMES: Final[frozenset[str]] = frozenset(
    lexeme
    for lexeme in SAFE_STYLE_LEXEMES
    if not any(
        any(_word_findings(_Piece(lexeme, 0), lead, DEFAULT_RULES["LEXEME"])) for lead in (0, -1)
    )
)


def _check_tokens(tokenizer: _Tokenizer, issued: tuple[str, ...]) -> None:
    seen = [p for p, is_token in zip(tokenizer.pieces, tokenizer.is_token, strict=True) if is_token]
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
# Recursive descent parser: one function per rule, over `_Tokenizer`
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
# The accepted shape (Rule 5)
# --------------------------------------------------------------------------------------

# The grammar of the module docstring as one pattern, over the clean lexemes only and
# any well-formed token (the issued sequence is compared separately).
_CLEAN_LEXEME: Final = "(?:" + "|".join(re.escape(w) for w in sorted(_CLEAN_LEXEMES)) + ")"
_CLEAN_STYLE: Final = f"{_CLEAN_LEXEME}(?: {_CLEAN_LEXEME})*(?:, | )"
_CLEAN_SENTENCE: Final = f"(?:{_CLEAN_STYLE})?{TOKEN_PATTERN}\\."
_ACCEPTED_SHAPE: Final = re.compile(f"{_CLEAN_SENTENCE}(?: {_CLEAN_SENTENCE})*")
_WORD_RUN: Final = re.compile(r"[^ ,.]+")


def _accepted_lexemes(slot: SlotPolicy, generated_ko: str) -> int | None:
    """The lexeme count if `generated_ko` is certainly accepted, else None (Rule 5).

    None decides nothing: the full check then runs.
    """
    if _ACCEPTED_SHAPE.fullmatch(generated_ko) is None:
        return None
    if tuple(TOKEN_RE.findall(generated_ko)) != slot.required_placeholder_tokens:
        return None
    lexemes = 0
    for segment in TOKEN_RE.split(generated_ko):  # the text between tokens, as _segments
        if _URL_RE.search(segment) is not None:
            return None
        words = _WORD_RUN.findall(segment)
        if _EVIDENTIAL_CLAIM_RE.search("".join(words)) is not None:
            return None
        lexemes += len(words)
    if not 1 <= lexemes <= slot.max_style_lexemes:
        return None
    return lexemes


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
    lexemes = _accepted_lexemes(slot, generated_ko)
    if lexemes is not None:
        return lexemes
    return _validate_in_full(slot, generated_ko)


def _validate_in_full(slot: SlotPolicy, generated_ko: str) -> int:
    """`validate_generated` after the length limit, without the fast path (Rule 5)."""
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


def check_grammar(slot: SlotPolicy, generated_ko: str) -> Reason | None:
    """The grammar, forbidden classes and limits alone, without the fit table: the
    form of a composition. `check_generated` is the contract's verdict; this is its
    first half, for what studies the grammar on its own (tests, fuzzing)."""
    try:
        validate_generated(slot, generated_ko)
    except _StyleError as e:
        return e.reason
    return None


def check_generated(slot: SlotPolicy, generated_ko: str) -> Reason | None:
    """Grammar, forbidden classes, limits, then the fit table for one slot's
    `generated_ko`; None = ok. The fit table runs only on a grammatical text, so a
    composition that is wrong in form is reported as such (design §6.1)."""
    reason = check_grammar(slot, generated_ko)
    if reason is not None:
        return reason
    return style_reason(slot.slot_id, slot.semantic_ids, generated_ko)

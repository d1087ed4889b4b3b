"""check_grammar(): the style grammar, every forbidden class, precedence and limits; and
check_generated(), which is the grammar first, then the fit table (design §6.1) on
what the grammar accepts."""

from __future__ import annotations

import pytest
from contract_support import (
    DAILY_SLOT,
    ECHO_REASONS,
    PHYSIQUE_SLOT,
    WEEKLY_PA,
    WEEKLY_PP,
    WEEKLY_RATIONALE_A,
)

from kexpr.spool.contract import (
    REASON_VERDICT,
    Reason,
    SlotPolicy,
    Verdict,
    check_generated,
    check_grammar,
)
from kexpr.spool.contract._grammar import (
    DEFAULT_RULES,
    PRECEDENCE,
    _StyleError,
    char_class,
    validate_generated,
)
from kexpr.spool.contract.lexicon import FORBIDDEN_VOCABULARY

D, PH, PP, PA, RA = DAILY_SLOT, PHYSIQUE_SLOT, WEEKLY_PP, WEEKLY_PA, WEEKLY_RATIONALE_A

Case = tuple[str, SlotPolicy, str, Reason | None]

# Accepted by the grammar. Their verdict under the fit table is `TABLE_VERDICT`.
ACCEPTED: list[Case] = [
    ("comma after style", D, "차분히, [[P:01]].", None),
    ("plain space after style", D, "차분히 [[P:01]].", None),
    ("lexeme run with comma", PH, "하나씩 순서대로, [[A:01]].", None),
    ("two sentences", PP, "차분히, [[P:01]]. 이어서 [[P:02]].", None),
    ("style only on the second sentence", PA, "[[P:01]]. 이어서 [[A:01]].", None),
    ("style only on the first sentence", PA, "우선 [[P:01]]. [[A:01]].", None),
    ("plan's dual example", D, "우선, [[P:01]].", None),
    ("plan's physique example", PH, "차분히, [[A:01]].", None),
    ("single-syllable lexeme", RA, "또 [[A:01]].", None),
    ("exactly max lexemes", D, "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고, [[P:01]].", None),
    ("every lexeme", PP, "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 순서대로, [[P:01]]. 함께 지금 이제 여기서 아래 바로 [[P:02]].", None),
    # ... the two compositions the fit table accepts (design §6.2) ...
    ("I2: 다만 before the hold", PA, "[[P:01]]. 다만 [[A:01]].", None),
    ("I2: 다만, before the hold", PA, "[[P:01]]. 다만, [[A:01]].", None),
    # ... and those it accepted before the readers' verdicts (design §6.2): still
    # grammatical, now misfits
    ("daily: 그리고", D, "그리고 [[P:01]].", None),
    ("physique: 먼저 without a comma", PH, "먼저 [[A:01]].", None),
    ("two sentences, each its word", PP, "먼저, [[P:01]]. 이어서, [[P:02]].", None),
    ("a word on the second sentence only", PA, "[[P:01]]. 그리고 [[A:01]].", None),
    ("a word on the first sentence only", PA, "먼저, [[P:01]]. [[A:01]].", None),
    ("rationale: 그리고", RA, "그리고 [[A:01]].", None),
]  # fmt: skip

# The contract's verdict on each text the grammar accepts: the fit table's (design
# §6.1). At most one word before a sentence (stacked_style); a word, or its comma,
# outside its sentence's cell (style_misfit).
TABLE_VERDICT: dict[str, Reason | None] = {
    "comma after style": Reason.STYLE_MISFIT,  # manner: never
    "plain space after style": Reason.STYLE_MISFIT,
    "lexeme run with comma": Reason.STACKED_STYLE,
    "two sentences": Reason.STYLE_MISFIT,  # 차분히 first; 이어서 needs its comma
    "style only on the second sentence": Reason.STYLE_MISFIT,  # 이어서 without its comma
    "style only on the first sentence": Reason.STYLE_MISFIT,  # 우선: never
    "plan's dual example": Reason.STYLE_MISFIT,
    "plan's physique example": Reason.STYLE_MISFIT,
    "single-syllable lexeme": Reason.STYLE_MISFIT,  # 또: never
    "exactly max lexemes": Reason.STACKED_STYLE,
    "every lexeme": Reason.STACKED_STYLE,
    "I2: 다만 before the hold": None,
    "I2: 다만, before the hold": None,
    "daily: 그리고": Reason.STYLE_MISFIT,  # every cell but the I2 hold's is empty
    "physique: 먼저 without a comma": Reason.STYLE_MISFIT,
    "two sentences, each its word": Reason.STYLE_MISFIT,
    "a word on the second sentence only": Reason.STYLE_MISFIT,  # 그리고: only 다만 there
    "a word on the first sentence only": Reason.STYLE_MISFIT,  # no word before the finding
    "rationale: 그리고": Reason.STYLE_MISFIT,
}

# (name, slot, generated_ko, reason) — at least one row per style reason.
REJECTED: list[Case] = [
    # too_long: checked first, so it wins over everything else in the string
    ("too long", D, "가" * 87 + " [[P:01]].", Reason.TOO_LONG),
    ("too long beats digits", D, "3" * 97, Reason.TOO_LONG),
    ("at the limit is not too long", D, "가" * 86 + " [[P:01]].", Reason.UNKNOWN_WORD),
    # disallowed_whitespace
    ("tab", D, "차분히\t[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("newline", D, "차분히\n[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("CRLF", D, "차분히,\r\n[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("NBSP", D, "차분히\u00a0[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("narrow NBSP", D, "차분히\u202f[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("ideographic space", D, "차분히\u3000[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("em space", D, "차분히\u2003[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("zero-width space", D, "차분히\u200b [[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("zero-width joiner", D, "차분\u200d히 [[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("Hangul filler", D, "차분히 \u3164[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("line separator", D, "차분히\u2028[[P:01]].", Reason.DISALLOWED_WHITESPACE),
    ("BOM", D, "\ufeff차분히 [[P:01]].", Reason.DISALLOWED_WHITESPACE),
    # control_character (the reader stops these before judge; check_generated is public)
    ("BEL", D, "차분히\u0007 [[P:01]].", Reason.CONTROL_CHARACTER),
    ("NUL", D, "차분히\u0000 [[P:01]].", Reason.CONTROL_CHARACTER),
    ("bidi override", D, "\u202e차분히 [[P:01]].", Reason.CONTROL_CHARACTER),
    ("soft hyphen", D, "차분\u00ad히 [[P:01]].", Reason.CONTROL_CHARACTER),
    ("lone surrogate", D, "차분히 [[P:01]].\ud800", Reason.CONTROL_CHARACTER),
    # malformed_token: before digit and latin
    ("one-digit token", D, "차분히 [[P:1]].", Reason.MALFORMED_TOKEN),
    ("lower-case family", D, "차분히 [[p:01]].", Reason.MALFORMED_TOKEN),
    ("triple brackets", D, "차분히 [[[P:01]]].", Reason.MALFORMED_TOKEN),
    ("unknown family", D, "차분히 [[X:01]]. [[P:01]].", Reason.MALFORMED_TOKEN),
    ("token zero", D, "차분히 [[P:00]].", Reason.MALFORMED_TOKEN),
    ("three digits", D, "차분히 [[P:001]].", Reason.MALFORMED_TOKEN),
    ("single brackets", D, "차분히 [P:01].", Reason.MALFORMED_TOKEN),
    ("unclosed token", D, "차분히 [[P:01].", Reason.MALFORMED_TOKEN),
    ("space inside token", D, "차분히 [[P: 01]].", Reason.MALFORMED_TOKEN),
    ("fullwidth bracket", D, "차분히 ［[P:01]].", Reason.MALFORMED_TOKEN),
    ("bare brackets", D, "차분히 [] [[P:01]].", Reason.MALFORMED_TOKEN),
    # bracket
    ("parentheses", D, "차분히 ([[P:01]]).", Reason.BRACKET),
    ("braces", D, "차분히 {[[P:01]]}.", Reason.BRACKET),
    ("angle brackets", D, "차분히 <[[P:01]]>.", Reason.BRACKET),
    ("lenticular brackets", D, "【차분히】 [[P:01]].", Reason.BRACKET),
    ("CJK angle brackets", D, "〈차분히〉 [[P:01]].", Reason.BRACKET),
    # quote
    ("double quotes", D, '"차분히" [[P:01]].', Reason.QUOTE),
    ("single quotes", D, "'차분히' [[P:01]].", Reason.QUOTE),
    ("typographic quotes", D, "“차분히” [[P:01]].", Reason.QUOTE),
    ("typographic apostrophe", D, "차분히’ [[P:01]].", Reason.QUOTE),
    ("corner brackets", D, "「차분히」 [[P:01]].", Reason.QUOTE),
    ("white corner brackets", D, "『차분히』 [[P:01]].", Reason.QUOTE),
    ("guillemets", D, "«차분히» [[P:01]].", Reason.QUOTE),
    ("fullwidth quote", D, "＂차분히 [[P:01]].", Reason.QUOTE),
    # url: before latin
    ("https", D, "https://example.com 차분히 [[P:01]].", Reason.URL),
    ("www", D, "www.example 차분히 [[P:01]].", Reason.URL),
    ("scheme only", D, "차분히 http: [[P:01]].", Reason.URL),
    ("telegram link", D, "차분히 t.me/x [[P:01]].", Reason.URL),
    ("domain", D, "차분히 example.com [[P:01]].", Reason.URL),
    # latin
    ("semantic ID", D, "P_DAILY_COMPLETE [[P:01]].", Reason.LATIN),
    ("action ID", PH, "A_OPERATOR_REVIEW_DECISION [[A:01]].", Reason.LATIN),
    ("kg", D, "차분히 kg [[P:01]].", Reason.LATIN),
    ("kcal", D, "차분히 kcal [[P:01]].", Reason.LATIN),
    ("g", D, "차분히 g [[P:01]].", Reason.LATIN),
    ("L", D, "차분히 L [[P:01]].", Reason.LATIN),
    ("English", D, "OK 차분히 [[P:01]].", Reason.LATIN),
    ("fullwidth Latin", D, "ＯＫ 차분히 [[P:01]].", Reason.LATIN),
    ("accented Latin", D, "café 차분히 [[P:01]].", Reason.LATIN),
    ("latin beats digit inside a word", D, "차분히 3kg [[P:01]].", Reason.LATIN),
    # digit
    ("ASCII digit", D, "차분히 3 [[P:01]].", Reason.DIGIT),
    ("fullwidth digit", D, "차분히 ３ [[P:01]].", Reason.DIGIT),
    ("Arabic-Indic digit", D, "차분히 ٣ [[P:01]].", Reason.DIGIT),
    ("circled digit", D, "차분히 ① [[P:01]].", Reason.DIGIT),
    ("superscript", D, "차분히 ² [[P:01]].", Reason.DIGIT),
    ("fraction", D, "차분히 ½ [[P:01]].", Reason.DIGIT),
    ("roman numeral", D, "차분히 Ⅻ [[P:01]].", Reason.DIGIT),
    ("digit beats unit", D, "차분히 3일 [[P:01]].", Reason.DIGIT),
    ("numbered list", D, "1. 차분히 [[P:01]].", Reason.DIGIT),
    # number_word: whole words only
    ("하나", PH, "하나, [[A:01]].", Reason.NUMBER_WORD),
    ("둘", D, "둘 [[P:01]].", Reason.NUMBER_WORD),
    ("일", D, "차분히 일 [[P:01]].", Reason.NUMBER_WORD),
    ("이", D, "이 [[P:01]].", Reason.NUMBER_WORD),
    ("십", D, "차분히 십 [[P:01]].", Reason.NUMBER_WORD),
    ("백", D, "차분히 백 [[P:01]].", Reason.NUMBER_WORD),
    ("천", D, "천 [[P:01]].", Reason.NUMBER_WORD),
    ("만", D, "차분히 만 [[P:01]].", Reason.NUMBER_WORD),
    ("첫째", D, "첫째, [[P:01]].", Reason.NUMBER_WORD),
    ("한", D, "한 [[P:01]].", Reason.NUMBER_WORD),
    ("하루", D, "하루 [[P:01]].", Reason.NUMBER_WORD),
    ("Hanja numeral", D, "차분히 一 [[P:01]].", Reason.NUMBER_WORD),
    ("number word beats vocabulary", D, "하나 잘 [[P:01]].", Reason.NUMBER_WORD),
    # layout_syntax
    ("heading", D, "# 차분히 [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("hash anywhere", D, "차분히 # [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("dash bullet", D, "- 차분히 [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("dash bullet after spaces", D, "  - 차분히 [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("star bullet", D, "* 차분히 [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("bold", D, "**차분히** [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("bullet", D, "• 차분히 [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("middle dot", D, "차분히 · [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("blockquote", D, "> 차분히 [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("table pipe", D, "차분히 | [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("backtick", D, "차분히 `[[P:01]]`.", Reason.LAYOUT_SYNTAX),
    ("underscore", D, "차분히 _ [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("plus bullet", D, "+ 차분히 [[P:01]].", Reason.LAYOUT_SYNTAX),
    # arithmetic_symbol
    ("plus", D, "차분히 + [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("minus", D, "차분히 - [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("percent", D, "차분히 % [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("tilde", D, "차분히 ~ [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("fullwidth plus", D, "차분히 ＋ [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("fullwidth minus", D, "차분히 － [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("fullwidth percent", D, "차분히 ％ [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("fullwidth tilde", D, "차분히 ～ [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("wave dash", D, "차분히 〜 [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("minus sign", D, "차분히 − [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("em dash", D, "차분히 — [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    # unit_or_date
    ("주", D, "차분히 주 [[P:01]].", Reason.UNIT_OR_DATE),
    ("월", D, "월 [[P:01]].", Reason.UNIT_OR_DATE),
    ("년", D, "차분히 년 [[P:01]].", Reason.UNIT_OR_DATE),
    ("시간", D, "차분히 시간 [[P:01]].", Reason.UNIT_OR_DATE),
    ("ending 시간", D, "두시간 [[P:01]].", Reason.UNIT_OR_DATE),
    ("ending 주일", D, "일주일 [[P:01]].", Reason.UNIT_OR_DATE),
    ("weekday", D, "월요일 [[P:01]].", Reason.UNIT_OR_DATE),
    ("today", D, "오늘 차분히 [[P:01]].", Reason.UNIT_OR_DATE),
    ("squared kg", D, "차분히 ㎏ [[P:01]].", Reason.UNIT_OR_DATE),
    ("squared kcal", D, "차분히 ㎉ [[P:01]].", Reason.UNIT_OR_DATE),
    ("degree Celsius", D, "차분히 ℃ [[P:01]].", Reason.UNIT_OR_DATE),
    ("won sign", D, "차분히 ₩ [[P:01]].", Reason.UNIT_OR_DATE),
    ("dollar", D, "차분히 $ [[P:01]].", Reason.UNIT_OR_DATE),
    ("Hangul kilo", D, "킬로그램 [[P:01]].", Reason.UNIT_OR_DATE),
    # emoji
    ("face", D, "차분히 😀 [[P:01]].", Reason.EMOJI),
    ("heart with variation selector", D, "차분히 ❤️ [[P:01]].", Reason.EMOJI),
    ("check mark", D, "차분히 ✅ [[P:01]].", Reason.EMOJI),
    ("star", D, "★ 차분히 [[P:01]].", Reason.EMOJI),
    ("arrow", D, "차분히 → [[P:01]].", Reason.EMOJI),
    ("skin tone modifier", D, "차분히 👍🏻 [[P:01]].", Reason.EMOJI),
    # evidential_claim: across words, before vocabulary
    ("확인 결과", PH, "확인 결과, [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    ("확인결과", PH, "확인결과 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    ("확인, 결과", PH, "확인, 결과 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    ("기록상", D, "기록상 [[P:01]].", Reason.EVIDENTIAL_CLAIM),
    ("분석", D, "분석하면 [[P:01]].", Reason.EVIDENTIAL_CLAIM),
    ("in a later segment", PP, "차분히 [[P:01]]. 확인 결과 [[P:02]].", Reason.EVIDENTIAL_CLAIM),
    # forbidden_vocabulary: substrings inside a word
    *[(f"vocabulary {v}", D, f"차분히 {v}게 [[P:01]].", Reason.FORBIDDEN_VOCABULARY) for v in FORBIDDEN_VOCABULARY],
    ("충분히", D, "충분히 [[P:01]].", Reason.FORBIDDEN_VOCABULARY),
    ("약간", D, "약간 [[P:01]].", Reason.FORBIDDEN_VOCABULARY),
    ("vocabulary beats unknown word", D, "오늘은 안전하게 [[P:01]].", Reason.FORBIDDEN_VOCABULARY),
    # negation_or_modality
    ("안", D, "안 [[P:01]].", Reason.NEGATION_OR_MODALITY),
    ("못", D, "못 [[P:01]].", Reason.NEGATION_OR_MODALITY),
    ("반드시", D, "반드시 [[P:01]].", Reason.NEGATION_OR_MODALITY),
    ("절대", D, "절대 [[P:01]].", Reason.NEGATION_OR_MODALITY),
    ("않고", D, "그렇지 않고 [[P:01]].", Reason.NEGATION_OR_MODALITY),
    ("아니라", D, "아니라 [[P:01]].", Reason.NEGATION_OR_MODALITY),
    ("해야", D, "해야 [[P:01]].", Reason.NEGATION_OR_MODALITY),
    # disallowed_character
    ("exclamation", D, "차분히! [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("question", D, "차분히? [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("colon", D, "차분히: [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("semicolon", D, "차분히; [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("slash", D, "차분히 / [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("ellipsis", D, "차분히… [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("ideographic full stop", D, "차분히。 [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("ideographic comma", D, "차분히、 [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("compatibility jamo", D, "차분히 ㅋㅋ [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("conjoining jamo", D, "차분히 \u1100\u1161 [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("Hanja", D, "차분히 漢 [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("Greek", D, "차분히 α [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("at sign", D, "차분히 @ [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("equals", D, "차분히 = [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("caret", D, "차분히 ^ [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("combining mark", D, "차분히\u0301 [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("private use", D, "차분히\ue000 [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("character beats unknown word", D, "오늘은! [[P:01]].", Reason.DISALLOWED_CHARACTER),
    # unknown_word
    ("plan's daily example", D, "오늘은 차분히, [[P:01]].", Reason.UNKNOWN_WORD),
    ("conjugated lexeme", D, "차분하게 [[P:01]].", Reason.UNKNOWN_WORD),
    ("lexeme with a particle", D, "하나씩요 [[P:01]].", Reason.UNKNOWN_WORD),
    ("two lexemes without a space", D, "차분히천천히 [[P:01]].", Reason.UNKNOWN_WORD),
    ("raw expansion", D, "저장된 오늘 기록을 확인했습니다 [[P:01]].", Reason.UNIT_OR_DATE),
    ("unknown word after the token", D, "차분히 [[P:01]]. 끝.", Reason.UNKNOWN_WORD),
    ("unknown word glued to a token", D, "차분히 [[P:01]]요.", Reason.UNKNOWN_WORD),
    # token_unissued
    ("predicate 02 in a 1-token slot", D, "차분히 [[P:02]].", Reason.TOKEN_UNISSUED),
    ("action in a predicate slot", D, "차분히 [[A:01]].", Reason.TOKEN_UNISSUED),
    ("new token after the issued ones", PP, "차분히 [[P:01]]. 또 [[P:02]]. 또 [[P:03]].", Reason.TOKEN_UNISSUED),
    ("another slot's token", PA, "차분히 [[P:01]]. 또 [[P:02]].", Reason.TOKEN_UNISSUED),
    ("unissued beats duplicate", D, "차분히 [[P:01]]. 또 [[P:01]]. [[P:09]].", Reason.TOKEN_UNISSUED),
    # token_duplicate
    ("token twice", D, "차분히 [[P:01]]. 또 [[P:01]].", Reason.TOKEN_DUPLICATE),
    ("first token twice", PP, "차분히 [[P:01]]. [[P:01]]. [[P:02]].", Reason.TOKEN_DUPLICATE),
    ("duplicate beats missing", PP, "차분히 [[P:01]]. 또 [[P:01]].", Reason.TOKEN_DUPLICATE),
    # token_order
    ("reordered predicates", PP, "차분히 [[P:02]]. 또 [[P:01]].", Reason.TOKEN_ORDER),
    ("action before predicate", PA, "차분히 [[A:01]]. 또 [[P:01]].", Reason.TOKEN_ORDER),
    # token_missing
    ("second token missing", PP, "차분히 [[P:01]].", Reason.TOKEN_MISSING),
    ("first token missing", PP, "차분히 [[P:02]].", Reason.TOKEN_MISSING),
    ("lexeme only", D, "차분히.", Reason.TOKEN_MISSING),
    ("empty", D, "", Reason.TOKEN_MISSING),
    # grammar
    ("missing final period", D, "차분히, [[P:01]]", Reason.GRAMMAR),
    ("double period", D, "차분히 [[P:01]]..", Reason.GRAMMAR),
    ("double space", D, "차분히  [[P:01]].", Reason.GRAMMAR),
    ("comma without space", D, "차분히,[[P:01]].", Reason.GRAMMAR),
    ("comma before the period", D, "차분히 [[P:01]],.", Reason.GRAMMAR),
    ("comma instead of the period", D, "차분히 [[P:01]],", Reason.GRAMMAR),
    ("space before the period", D, "차분히 [[P:01]] .", Reason.GRAMMAR),
    ("leading space", D, " 차분히 [[P:01]].", Reason.GRAMMAR),
    ("trailing space", D, "차분히 [[P:01]]. ", Reason.GRAMMAR),
    ("leading comma", D, ", 차분히 [[P:01]].", Reason.GRAMMAR),
    ("comma inside a style run", D, "차분히, 이어서 [[P:01]].", Reason.GRAMMAR),
    ("double comma", D, "차분히,, [[P:01]].", Reason.GRAMMAR),
    ("lexeme glued to the token", D, "차분히[[P:01]].", Reason.GRAMMAR),
    ("lexeme after the token", D, "[[P:01]] 차분히.", Reason.GRAMMAR),
    ("lexeme then period", D, "차분히. [[P:01]].", Reason.GRAMMAR),
    ("style after the last sentence", D, "[[P:01]]. 차분히.", Reason.GRAMMAR),
    ("sentences without a space", PP, "차분히 [[P:01]].[[P:02]].", Reason.GRAMMAR),
    ("sentences joined by a comma", PP, "차분히 [[P:01]], [[P:02]].", Reason.GRAMMAR),
    ("tokens glued together", PP, "차분히 [[P:01]][[P:02]].", Reason.GRAMMAR),
    ("only punctuation around a token", D, ". [[P:01]].", Reason.GRAMMAR),
    # no_style_lexeme / too_many_lexemes
    ("canonical only", D, "[[P:01]].", Reason.NO_STYLE_LEXEME),
    ("canonical only, two tokens", PP, "[[P:01]]. [[P:02]].", Reason.NO_STYLE_LEXEME),
    ("one over max lexemes", D, "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩, [[P:01]].", Reason.TOO_MANY_LEXEMES),
    ("max lexemes counted over the whole slot", RA, "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 순서대로 함께 [[A:01]].", Reason.TOO_MANY_LEXEMES),
]  # fmt: skip

PRECEDENCE_CASES: list[Case] = [
    ("whitespace beats everything", D, "\t[[P:1]] 3 kg 😀", Reason.DISALLOWED_WHITESPACE),
    ("control beats malformed token", D, "\u0007[[P:1]]", Reason.CONTROL_CHARACTER),
    ("malformed token beats digit and latin", D, "[[P:1]] 3 kg", Reason.MALFORMED_TOKEN),
    ("bracket beats quote", D, '("차분히") [[P:01]].', Reason.BRACKET),
    ("quote beats url", D, '"https://x" [[P:01]].', Reason.QUOTE),
    ("url beats latin", D, "www.kg.com [[P:01]].", Reason.URL),
    ("latin beats digit", D, "P_DAILY_COMPLETE 3 [[P:01]].", Reason.LATIN),
    ("digit beats number word", D, "하나 3 [[P:01]].", Reason.DIGIT),
    ("number word beats layout", D, "# 하나 [[P:01]].", Reason.NUMBER_WORD),
    ("layout beats arithmetic", D, "- 차분히 + [[P:01]].", Reason.LAYOUT_SYNTAX),
    ("arithmetic beats unit", D, "주 + [[P:01]].", Reason.ARITHMETIC_SYMBOL),
    ("unit beats emoji", D, "주 😀 [[P:01]].", Reason.UNIT_OR_DATE),
    ("emoji beats evidential", D, "😀 확인 결과 [[P:01]].", Reason.EMOJI),
    ("evidential beats vocabulary", D, "기록상 잘 [[P:01]].", Reason.EVIDENTIAL_CLAIM),
    ("vocabulary beats negation", D, "안 잘 [[P:01]].", Reason.FORBIDDEN_VOCABULARY),
    ("negation beats disallowed", D, "않고! [[P:01]].", Reason.NEGATION_OR_MODALITY),
    ("disallowed beats unknown", D, "오늘은 ! [[P:01]].", Reason.DISALLOWED_CHARACTER),
    ("unknown beats token problems", D, "오늘은 [[P:02]].", Reason.UNKNOWN_WORD),
    ("token problems beat grammar", PP, "차분히,[[P:02]]. [[P:01]]", Reason.TOKEN_ORDER),
    ("grammar beats lexeme counts", D, "[[P:01]]", Reason.GRAMMAR),
    ("class precedence, not position", D, "오늘은 [[P:01]]. 3", Reason.DIGIT),
]  # fmt: skip

TABLE = ACCEPTED + REJECTED + PRECEDENCE_CASES


@pytest.mark.parametrize(("name", "slot", "text", "reason"), TABLE, ids=[c[0] for c in TABLE])
def test_check_generated(name: str, slot: SlotPolicy, text: str, reason: Reason | None) -> None:
    # The grammar's verdict; the contract's is the grammar's, and on what the grammar
    # accepts the fit table's.
    assert check_grammar(slot, text) is reason
    expected = reason if reason is not None else TABLE_VERDICT[name]
    assert check_generated(slot, text) is expected


def test_the_table_verdicts_are_of_grammatical_texts() -> None:
    assert set(TABLE_VERDICT) == {c[0] for c in TABLE if c[3] is None}


def test_table_names_are_unique() -> None:
    names = [c[0] for c in TABLE]
    assert len(names) == len(set(names))


TABLE_REASONS = {Reason.STACKED_STYLE, Reason.STYLE_MISFIT}


def test_every_style_reason_has_a_case() -> None:
    style = {r for r, v in REASON_VERDICT.items() if v is Verdict.VALIDATION_REJECTED}
    assert set(PRECEDENCE) == style - ECHO_REASONS - TABLE_REASONS
    assert set(PRECEDENCE) <= {c[3] for c in REJECTED}
    assert TABLE_REASONS <= set(TABLE_VERDICT.values())


def test_precedence_is_the_documented_order() -> None:
    # The enum lists the style reasons in precedence order too (reasons.py).
    members = list(Reason)
    grammar = members[members.index(Reason.TOO_LONG) : members.index(Reason.TOO_MANY_LEXEMES) + 1]
    assert PRECEDENCE == tuple(grammar)
    # The fit table's reasons come after the grammar's: it judges only grammatical texts.
    assert members[members.index(Reason.TOO_MANY_LEXEMES) + 1 :] == [
        Reason.STACKED_STYLE,
        Reason.STYLE_MISFIT,
    ]
    assert PRECEDENCE[0] is Reason.TOO_LONG
    assert PRECEDENCE.index(Reason.MALFORMED_TOKEN) < PRECEDENCE.index(Reason.DIGIT)
    assert PRECEDENCE.index(Reason.URL) < PRECEDENCE.index(Reason.LATIN)
    assert PRECEDENCE.index(Reason.EVIDENTIAL_CLAIM) < PRECEDENCE.index(Reason.FORBIDDEN_VOCABULARY)
    assert PRECEDENCE.index(Reason.DISALLOWED_CHARACTER) < PRECEDENCE.index(Reason.UNKNOWN_WORD)
    assert PRECEDENCE[-3:] == (Reason.GRAMMAR, Reason.NO_STYLE_LEXEME, Reason.TOO_MANY_LEXEMES)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "차분히  [[P:01]].",
            "grammar: Expected a style lexeme or the next token\n    차분히  [[P:01]].\n        ^",
        ),
        (
            "차분히, [[P:01]]",
            "grammar: Expected '.' right after the token\n    차분히, [[P:01]]\n                 ^",
        ),
        (
            "차분히,[[P:01]].",
            "grammar: Expected a space after ','\n    차분히,[[P:01]].\n        ~~~~~~~^",
        ),
        (
            "오늘은 차분히, [[P:01]].",
            "unknown_word: not allowed outside a token\n    오늘은 차분히, [[P:01]].\n    ~~^",
        ),
        (
            "차분히 [[P:1]].",
            "malformed_token: not allowed outside a token\n    차분히 [[P:1]].\n        ^",
        ),
    ],
)
def test_internal_error_points_at_the_problem(text: str, message: str) -> None:
    with pytest.raises(_StyleError) as info:
        validate_generated(DAILY_SLOT, text)
    assert info.value.explain(text) == message


def test_validate_generated_counts_lexemes() -> None:
    assert validate_generated(WEEKLY_PP, "차분히 천천히, [[P:01]]. 이어서 [[P:02]].") == 3


def test_tokenizer_rules_fullmatch_only() -> None:
    lexeme = DEFAULT_RULES["LEXEME"]
    assert lexeme.fullmatch("하나씩") is not None
    assert lexeme.fullmatch("하나씩요") is None  # a prefix match would accept this
    assert DEFAULT_RULES["TOKEN"].fullmatch("[[P:01]]]") is None


@pytest.mark.parametrize(
    ("ch", "reason"),
    [
        (" ", None),
        (",", None),
        (".", None),
        ("가", None),
        ("힣", None),
        ("〇", Reason.DIGIT),  # a digit (Nl) and a Hanja numeral: the digit test is first
        ("ℓ", Reason.UNIT_OR_DATE),
        ("∙", Reason.LAYOUT_SYNTAX),
        ("ㄱ", Reason.DISALLOWED_CHARACTER),
    ],
)
def test_char_class(ch: str, reason: Reason | None) -> None:
    assert char_class(ch) is reason

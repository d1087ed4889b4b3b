"""The plan's attack list, one named case each (seed plan: "Korean style grammar,
prohibited claims, and deterministic rejection" and "Verification"; design §6).

Every case is ``(category, name, capsule, raw content, verdict, reason)`` and asserts
both the verdict and the enum reason of ``kexpr.spool.contract.judge`` — the raw-content
entry point the worker and the shim both use. Categories name the plan's attack
classes; ``test_every_plan_attack_class_has_cases`` keeps the list complete.

Expected reasons follow the documented precedence (``kexpr.spool.contract._grammar``
header, ``_strictjson`` Rule 2): the reader's steps first (invalid_response), then the
echo rules, then the style grammar's classes in rank order, then the fit table
(design §6.1: category ``fit_table``, the words that change a sentence's meaning
where they stand). A handful of controls (category ``control``) must stay
*accepted*: the attacks are only meaningful if the same document without the attack
passes.

Every case is on the one capsule that can exist (design §6.1, §6.2): the weekly
goal-missing interpretation, ``[[P:01]]. 다만 [[A:01]].``. A style-grammar attack puts
its words where a style word may stand, before the hold (``[[P:01]]. <attack>
[[A:01]].``), unless it is about the first sentence. What needed another slot (a
second or third slot of a document) is now a document answering a slot that was
never asked; the locked slots themselves cannot be asked
(``test_the_locked_slots_cannot_be_asked``).
"""

from __future__ import annotations

import json
import unicodedata
from typing import NamedTuple

import pytest

from adversarial.builders import (
    KEY,
    LOCKED,
    OTHER_KEY,
    STYLED,
    STYLED_OTHER_KEY,
    WEEKLY_RA,
    at,
    capsule,
    doc,
    drop,
    dumps,
    edited,
    put,
    response,
)
from adversarial.oracle import PLAN_VOCABULARY
from kexpr.spool.contract import (
    MAX_NESTING,
    MAX_RESPONSE_BYTES,
    REASON_VERDICT,
    Capsule,
    CapsuleError,
    CapsuleReason,
    Reason,
    SlotPolicy,
    Verdict,
    check_generated,
    check_grammar,
    judge,
)

OK = Verdict.ACCEPTED
INV = Verdict.INVALID_RESPONSE
REJ = Verdict.VALIDATION_REJECTED


class Attack(NamedTuple):
    category: str
    name: str
    capsule: Capsule
    content: str | bytes
    verdict: Verdict
    reason: Reason | None


def _g(category: str, name: str, text: str, reason: Reason, cap: Capsule = STYLED) -> Attack:
    """An attack on the first slot's generated_ko, rejected by the style grammar."""
    return Attack(category, name, cap, at(cap, 0, text), REJ, reason)


def _r(
    category: str, name: str, content: str | bytes, reason: Reason, cap: Capsule = STYLED
) -> Attack:
    """An attack the strict reader refuses (invalid_response)."""
    return Attack(category, name, cap, content, INV, reason)


def _e(
    category: str, name: str, content: str | bytes, reason: Reason, cap: Capsule = STYLED
) -> Attack:
    """An attack the echo rules or the grammar reject (validation_rejected)."""
    return Attack(category, name, cap, content, REJ, reason)


D = doc(STYLED)  # compact valid document of the styled capsule
WORD = "다만"  # its one style word (the fit table's only word, before the hold)
GOOD_TEXT = "[[P:01]]. " + WORD + " [[A:01]]."
NFD = unicodedata.normalize("NFD", WORD)
# The locked rationale's answer, as a model might add it: a slot never asked.
_RATIONALE_SLOT: dict[str, object] = {
    "slot_id": WEEKLY_RA.slot_id,
    "predicate_ids": [],
    "action_ids": list(WEEKLY_RA.allowed_action_ids),
    "placeholder_tokens": list(WEEKLY_RA.required_placeholder_tokens),
    "generated_ko": "다만 [[A:01]].",
}


def _with_slots(*extra: dict[str, object]) -> str:
    """The valid document with ``extra`` slots after its one slot."""
    d = response(STYLED)
    return dumps({**d, "slots": [*d["slots"], *extra]})


def _in_text(fragment: str) -> str:
    """The styled document with ``fragment`` spliced raw (already JSON) into generated_ko."""
    return D.replace(WORD + " ", WORD + fragment + " ")


def _escaped_generated(escape: str) -> str:
    """generated_ko with a JSON escape sequence (``\\uXXXX``) spliced in."""
    return D.replace(WORD + " ", WORD + escape + " ")


def _pad(text: str, size: int) -> str:
    return text + " " * (size - len(text.encode("utf-8")))


# -- controls ------------------------------------------------------------------------
CONTROLS = [
    Attack("control", "compact document", STYLED, D, OK, None),
    Attack("control", "bytes content", STYLED, D.encode(), OK, None),
    Attack("control", "pretty printed with indent", STYLED, dumps(response(STYLED), indent=2), OK, None),
    Attack("control", "CRLF and tabs between tokens", STYLED, dumps(response(STYLED), indent="\t").replace("\n", "\r\n"), OK, None),
    Attack("control", "all text escaped as ASCII", STYLED, json.dumps(response(STYLED)), OK, None),
    Attack("control", "escaped key without a duplicate", STYLED, D.replace('"surface"', '"\\u0073urface"'), OK, None),
    Attack("control", "escaped solidus-free token escapes", STYLED, D.replace("[[P:01]]", "\\u005b\\u005bP:01]]"), OK, None),
    Attack("control", "key order reversed", STYLED, dumps(dict(reversed(list(response(STYLED).items())))), OK, None),
    Attack("control", "exactly the size limit", STYLED, _pad(D, MAX_RESPONSE_BYTES), OK, None),
    Attack("control", "lexeme containing a number syllable, with its comma", STYLED, at(STYLED, 0, "[[P:01]]. 다만, [[A:01]]."), OK, None),
    Attack("control", "the capsule under another key", STYLED_OTHER_KEY, doc(STYLED_OTHER_KEY), OK, None),
]  # fmt: skip

# -- the fit table: words that change or add meaning where they stand (design §6.1) ---
# The grammar accepts every one of these texts (`test_the_fit_table_attacks_are_grammatical`).
# The table keeps one word, 다만 (with or without its comma), before the hold.
_LIMIT_RUN = "[[P:01]]. 다만 차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 순서대로 함께 지금 이제 여기서 아래, [[A:01]]."
_LIMIT_RUN_SPLIT = "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고, [[P:01]]. 다만 하나씩 순서대로 함께 지금 이제 여기서 아래 [[A:01]]."
FIT_TABLE = [
    *[_g("fit_table", f"{w} before the finding", f"{w}, [[P:01]]. [[A:01]].", Reason.STYLE_MISFIT) for w in ("차분히", "가볍게", "하나씩", "함께", "그대로")],
    *[_g("fit_table", f"{w} dates or hurries the hold", f"[[P:01]]. {w} [[A:01]].", Reason.STYLE_MISFIT) for w in ("지금", "이제", "바로", "잠시")],
    _g("fit_table", "again: a repetition that did not happen", "[[P:01]]. 다시 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "또: again or also", "[[P:01]]. 또 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "the records below", "[[P:01]]. 아래 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "here", "[[P:01]]. 여기서 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "in particular", "[[P:01]]. 특히 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "plan's dual example: 우선 makes it provisional", "[[P:01]]. 우선, [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "an order word before the hold", "[[P:01]]. 먼저, [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "and before the hold", "[[P:01]]. 그리고 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "and with a comma", "[[P:01]]. 그리고, [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "continuing before the hold", "[[P:01]]. 이어서, [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "다만 before the finding", "다만 [[P:01]]. [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "다만, before the finding", "다만, [[P:01]]. [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "다만 in both sentences", "다만 [[P:01]]. 다만 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "style on the first sentence beside 다만", "먼저, [[P:01]]. 다만 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "first without its comma: done first", "먼저 [[P:01]]. [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "and on the interpretation's first line", "그리고 [[P:01]]. 다만 [[A:01]].", Reason.STYLE_MISFIT),
    _g("fit_table", "two connectives before one sentence", "[[P:01]]. 그리고 다만 [[A:01]].", Reason.STACKED_STYLE),
    _g("fit_table", "다만 twice", "[[P:01]]. 다만 다만 [[A:01]].", Reason.STACKED_STYLE),
    _g("fit_table", "다만 stacked, with a comma", "[[P:01]]. 다만 그리고, [[A:01]].", Reason.STACKED_STYLE),
    _g("fit_table", "two allowed-elsewhere words stacked on the first line", "먼저 이어서, [[P:01]]. 다만 [[A:01]].", Reason.STACKED_STYLE),
    _g("fit_table", "at max lexemes before the hold", _LIMIT_RUN, Reason.STACKED_STYLE),
    _g("fit_table", "at max lexemes over both sentences", _LIMIT_RUN_SPLIT, Reason.STACKED_STYLE),
    _g("fit_table", "the grammar is judged first", "[[P:01]]. 다만 3 [[A:01]].", Reason.DIGIT),
]  # fmt: skip

# -- duplicate keys at every depth, also spelled with escapes ------------------------
DUPLICATE_KEYS = [
    _r("duplicate_keys", "top-level schema_version twice", D[:-1] + ',"schema_version":"korean-expression-v4"}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "top-level surface twice", D[:-1] + ',"surface":"daily.v1"}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "top-level artifact_key twice", D[:-1] + f',"artifact_key":"{KEY}"}}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "top-level slots twice", D[:-1] + ',"slots":[]}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "surface spelled with an escape", D[:-1] + ',"\\u0073urface":"daily.v1"}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "both spellings escaped differently", D.replace('"surface"', '"s\\u0075rface"')[:-1] + ',"\\u0073urface":"daily.v1"}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "upper-case escape digits", D[:-1] + ',"\\u0053\\u0055RFACE":1,"\\u0073\\u0075rface":"daily.v1"}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "slot_id twice in a slot", D.replace('"slot_id":', '"slot_id":"weekly.rationale","slot_id":'), Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "generated_ko twice, valid one last", D.replace('"generated_ko":', '"generated_ko":"오늘은 좋은 날입니다.","generated_ko":'), Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "generated_ko twice, valid one first", D.replace('"}]}', '","generated_ko":"오늘은 좋은 날입니다."}]}'), Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "predicate_ids twice", D.replace('"predicate_ids":', '"predicate_ids":[],"predicate_ids":'), Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "placeholder_tokens twice escaped", D.replace('"placeholder_tokens":', '"placeholder_tokens":[],"placeholder\\u005ftokens":'), Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "in a second slot", _with_slots(_RATIONALE_SLOT).replace('"slot_id":"weekly.rationale"', '"slot_id":"weekly.rationale","slot_id":"weekly.rationale"'), Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "in a third slot", _with_slots({**_RATIONALE_SLOT, "slot_id": "x"}, _RATIONALE_SLOT).replace('"slot_id":"weekly.rationale"', '"action_ids":[],"slot_id":"weekly.rationale"'), Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "depth three inside an extra key", D[:-1] + ',"x":{"y":{"k":1,"k":1}}}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "depth five inside lists", '{"a":[[{"b":[{"c":1,"\\u0063":2}]}]]}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "Hangul key twice, one escaped", '{"차분히":1,"\\ucc28분히":2}', Reason.DUPLICATE_KEY),
    _r("duplicate_keys", "empty key twice", '{"":1,"":2}', Reason.DUPLICATE_KEY),
    # The duplicate is seen when its object closes; a NaN inside it was parsed before.
    _r("duplicate_keys", "NaN value of the duplicate is seen first", '{"a":1,"a":NaN}', Reason.NON_FINITE_NUMBER),
    _r("duplicate_keys", "duplicate object closes before a later NaN", '{"o":{"a":1,"a":2},"n":NaN}', Reason.DUPLICATE_KEY),
]  # fmt: skip

# -- invalid UTF-8 and lone surrogates (raw bytes, raw str, escaped) ------------------
INVALID_UTF8 = [
    _r("invalid_utf8", "0xFF byte", b"\xff" + D.encode(), Reason.NOT_UTF8),
    _r("invalid_utf8", "lone continuation byte in a string", D.encode().replace(WORD.encode(), b"\x80"), Reason.NOT_UTF8),
    _r("invalid_utf8", "overlong slash", D.encode().replace(b"[[P", b"\xc0\xaf[[P"), Reason.NOT_UTF8),
    _r("invalid_utf8", "overlong NUL (modified UTF-8)", D.encode().replace(b"[[P", b"\xc0\x80[[P"), Reason.NOT_UTF8),
    _r("invalid_utf8", "overlong three-byte form", D.encode().replace(b"[[P", b"\xe0\x80\xaf[[P"), Reason.NOT_UTF8),
    _r("invalid_utf8", "CESU-8 surrogate", D.encode().replace(b"[[P", b"\xed\xa0\x80[[P"), Reason.NOT_UTF8),
    _r("invalid_utf8", "beyond U+10FFFF", D.encode().replace(b"[[P", b"\xf4\x90\x80\x80[[P"), Reason.NOT_UTF8),
    _r("invalid_utf8", "five-byte sequence", D.encode().replace(b"[[P", b"\xf8\x88\x80\x80\x80[[P"), Reason.NOT_UTF8),
    _r("invalid_utf8", "truncated Hangul at the end", D.encode()[:-2] + "차".encode()[:2], Reason.NOT_UTF8),
    _r("invalid_utf8", "Latin-1 encoded text", '{"a":"café"}'.encode("latin-1"), Reason.NOT_UTF8),
    _r("invalid_utf8", "UTF-16 with its BOM", D.encode("utf-16"), Reason.NOT_UTF8),
    _r("invalid_utf8", "raw lone high surrogate in str content", doc(STYLED, GOOD_TEXT + "\ud800"), Reason.NOT_UTF8),
    _r("invalid_utf8", "raw lone low surrogate in a key", dumps({"\udfff": 1}), Reason.NOT_UTF8),
    _r("invalid_utf8", "raw surrogate pair halves in str content", doc(STYLED, "\ud83d\ude00" + GOOD_TEXT), Reason.NOT_UTF8),
    _r("invalid_utf8", "escaped lone high surrogate", _escaped_generated("\\ud800"), Reason.FORBIDDEN_CHARACTER),
    _r("invalid_utf8", "escaped lone low surrogate", _escaped_generated("\\udc00"), Reason.FORBIDDEN_CHARACTER),
    _r("invalid_utf8", "escaped reversed surrogate pair", _escaped_generated("\\ude00\\ud83d"), Reason.FORBIDDEN_CHARACTER),
    _r("invalid_utf8", "escaped lone surrogate in a key", '{"\\ud800":1}', Reason.FORBIDDEN_CHARACTER),
    _e("invalid_utf8", "escaped valid pair is an emoji, not a surrogate", D.replace(WORD + " ", "\\ud83d\\ude00 " + WORD + " "), Reason.EMOJI),
]  # fmt: skip

# -- BOM ------------------------------------------------------------------------------
BOM = [
    _r("bom", "UTF-8 BOM bytes", b"\xef\xbb\xbf" + D.encode(), Reason.BOM),
    _r("bom", "BOM character in str content", "\ufeff" + D, Reason.BOM),
    _r("bom", "two BOMs", "\ufeff\ufeff" + D, Reason.BOM),
    _r("bom", "BOM after whitespace", " \ufeff" + D, Reason.MALFORMED_JSON),
    _r("bom", "BOM at the end", D + "\ufeff", Reason.MALFORMED_JSON),
    _r("bom", "BOM between tokens", D.replace(',"surface"', ',\ufeff"surface"'), Reason.MALFORMED_JSON),
    _r("bom", "raw BOM inside generated_ko", doc(STYLED, "[[P:01]]. 다만,\ufeff [[A:01]]."), Reason.FORBIDDEN_CHARACTER),
    _r("bom", "escaped BOM inside generated_ko", _escaped_generated("\\ufeff"), Reason.FORBIDDEN_CHARACTER),
    _r("bom", "UTF-16 big-endian BOM bytes", b"\xfe\xff" + D.encode(), Reason.NOT_UTF8),
    _r("bom", "size is checked before the BOM", "\ufeff" + _pad(D, MAX_RESPONSE_BYTES), Reason.TOO_LARGE),
]  # fmt: skip

# -- NFC failures ---------------------------------------------------------------------
NFC = [
    _r("nfc", "decomposed Hangul raw", doc(STYLED, "[[P:01]]. " + NFD + ", [[A:01]]."), Reason.NOT_NFC),
    _r("nfc", "decomposed Hangul escaped", D.replace(WORD, "\\u1103\\u1161\\u1106\\u1161\\u11ab"), Reason.NOT_NFC),
    _r("nfc", "syllable plus trailing jamo composes", doc(STYLED, "[[P:01]]. 다\u11ab만, [[A:01]]."), Reason.NOT_NFC),
    _r("nfc", "decomposed Hangul in an extra key", dumps({**response(STYLED), NFD: 1}), Reason.NOT_NFC),
    _r("nfc", "Latin plus combining acute", dumps({**response(STYLED), "x": "e\u0301"}), Reason.NOT_NFC),
    _r("nfc", "Angstrom sign", dumps({"x": "\u212b"}), Reason.NOT_NFC),
    _r("nfc", "Kelvin sign", doc(STYLED, "\u212a " + GOOD_TEXT), Reason.NOT_NFC),
    _r("nfc", "CJK compatibility ideograph", doc(STYLED, "\uf900 " + GOOD_TEXT), Reason.NOT_NFC),
    _r("nfc", "NFC checked before forbidden characters", doc(STYLED, "[[P:01]]. " + NFD + "\u200b, [[A:01]]."), Reason.NOT_NFC),
    _g("nfc", "compatibility jamo are NFC but not words", "[[P:01]]. ㅊㅏ분히, [[A:01]].", Reason.DISALLOWED_CHARACTER),
    _g("nfc", "halfwidth Hangul letter", "[[P:01]]. \uffa1차분히, [[A:01]].", Reason.DISALLOWED_CHARACTER),
    _g("nfc", "combining mark on a Hangul syllable", "[[P:01]]. 차분히\u0301, [[A:01]].", Reason.DISALLOWED_CHARACTER),
    _g("nfc", "fullwidth Latin letters", "[[P:01]]. ＯＫ 차분히, [[A:01]].", Reason.LATIN),
    _g("nfc", "Latin ligature", "[[P:01]]. \ufb01 차분히, [[A:01]].", Reason.LATIN),
]  # fmt: skip

# -- control / format / zero-width / bidi / Hangul filler, raw and escaped -------------
_READER_INVISIBLE = [
    ("NUL", "\\u0000"), ("BEL", "\\u0007"), ("ESC", "\\u001b"), ("backspace", "\\b"),
    ("form feed", "\\f"), ("LF", "\\n"), ("CR", "\\r"), ("tab", "\\t"), ("DEL", "\\u007f"),
    ("NEL", "\\u0085"), ("soft hyphen", "\\u00ad"), ("ALM", "\\u061c"),
    ("Mongolian vowel separator", "\\u180e"), ("ZWSP", "\\u200b"), ("ZWNJ", "\\u200c"),
    ("ZWJ", "\\u200d"), ("LRM", "\\u200e"), ("RLM", "\\u200f"), ("line separator", "\\u2028"),
    ("paragraph separator", "\\u2029"), ("LRE", "\\u202a"), ("RLE", "\\u202b"), ("PDF", "\\u202c"),
    ("LRO", "\\u202d"), ("RLO", "\\u202e"), ("word joiner", "\\u2060"),
    ("function application", "\\u2061"), ("invisible times", "\\u2062"), ("LRI", "\\u2066"),
    ("RLI", "\\u2067"), ("FSI", "\\u2068"), ("PDI", "\\u2069"), ("inner BOM", "\\ufeff"),
    ("interlinear annotation", "\\ufff9"), ("Hangul choseong filler", "\\u115f"),
    ("Hangul jungseong filler", "\\u1160"), ("Hangul filler", "\\u3164"),
    ("halfwidth Hangul filler", "\\uffa0"), ("private use", "\\ue000"), ("noncharacter", "\\uffff"),
    ("unassigned", "\\u0378"),
]  # fmt: skip
_RAW_ALLOWED_BY_JSON = [
    ("DEL", "\x7f"), ("NEL", "\x85"), ("soft hyphen", "\u00ad"), ("ZWSP", "\u200b"),
    ("ZWNJ", "\u200c"), ("ZWJ", "\u200d"), ("RLO", "\u202e"), ("LRI", "\u2066"),
    ("word joiner", "\u2060"), ("line separator", "\u2028"), ("Hangul filler", "\u3164"),
    ("Hangul choseong filler", "\u115f"), ("halfwidth Hangul filler", "\uffa0"),
    ("tag character", "\U000e0041"), ("private use", "\ue000"),
]  # fmt: skip
INVISIBLE = [
    *[_r("invisible", f"escaped {name}", _escaped_generated(esc), Reason.FORBIDDEN_CHARACTER) for name, esc in _READER_INVISIBLE],
    *[_r("invisible", f"raw {name}", doc(STYLED, "[[P:01]]. 다만" + ch + ", [[A:01]]."), Reason.FORBIDDEN_CHARACTER) for name, ch in _RAW_ALLOWED_BY_JSON],
    _r("invisible", "raw tab inside a string", D.replace(WORD + " ", WORD + "\t"), Reason.MALFORMED_JSON),
    _r("invisible", "raw LF inside a string", D.replace(WORD + " ", WORD + "\n"), Reason.MALFORMED_JSON),
    _r("invisible", "raw NUL inside a string", D.replace(WORD + " ", WORD + "\x00"), Reason.MALFORMED_JSON),
    _r("invisible", "escaped control in a key", '{"slot\\u0000id":1}', Reason.FORBIDDEN_CHARACTER),
    _r("invisible", "zero-width in an echoed ID", edited(STYLED, put(("slots", 0, "predicate_ids"), ["P_WEEKLY_TREND_OBSERVED\u200b"])), Reason.FORBIDDEN_CHARACTER),
    _r("invisible", "bidi override in the artifact key", edited(STYLED, put(("artifact_key",), "\u202e" + KEY)), Reason.FORBIDDEN_CHARACTER),
    _g("invisible", "NBSP", "[[P:01]]. 차분히,\u00a0[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "narrow NBSP", "[[P:01]]. 차분히,\u202f[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "ideographic space", "[[P:01]]. 차분히,\u3000[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _r("invisible", "en quad is not NFC (it decomposes to en space)", doc(STYLED, "[[P:01]]. 다만,\u2000[[A:01]]."), Reason.NOT_NFC),
    _g("invisible", "en space", "[[P:01]]. 차분히,\u2002[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "figure space", "[[P:01]]. 차분히,\u2007[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "hair space", "[[P:01]]. 차분히,\u200a[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "medium mathematical space", "[[P:01]]. 차분히,\u205f[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "ogham space mark", "[[P:01]]. 차분히,\u1680[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "combining grapheme joiner", "[[P:01]]. 차분\u034f히, [[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "braille blank", "[[P:01]]. 차분히,\u2800[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    _g("invisible", "variation selector alone", "[[P:01]]. 차분히\ufe0f, [[A:01]].", Reason.EMOJI),
    _g("invisible", "object replacement character", "[[P:01]]. 차분히\ufffc, [[A:01]].", Reason.EMOJI),
]  # fmt: skip

# -- type confusion -------------------------------------------------------------------
_S = ("slots", 0)
TYPES = [
    _r("type_confusion", "bool for predicate_ids", edited(STYLED, put((*_S, "predicate_ids"), True)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "bool for action_ids", edited(STYLED, put((*_S, "action_ids"), False)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "bool for placeholder_tokens", edited(STYLED, put((*_S, "placeholder_tokens"), True)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "number for generated_ko", edited(STYLED, put((*_S, "generated_ko"), 1)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "float for generated_ko", edited(STYLED, put((*_S, "generated_ko"), 1.5)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "number for slot_id", edited(STYLED, put((*_S, "slot_id"), 0)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "number for surface", edited(STYLED, put(("surface",), 1)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "bool for schema_version", edited(STYLED, put(("schema_version",), True)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "number for artifact_key", edited(STYLED, put(("artifact_key",), 5)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null schema_version", edited(STYLED, put(("schema_version",), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null surface", edited(STYLED, put(("surface",), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null artifact_key", edited(STYLED, put(("artifact_key",), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null slots", edited(STYLED, put(("slots",), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null slot", edited(STYLED, put(_S, None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null slot_id", edited(STYLED, put((*_S, "slot_id"), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null predicate_ids", edited(STYLED, put((*_S, "predicate_ids"), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null action_ids", edited(STYLED, put((*_S, "action_ids"), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null placeholder_tokens", edited(STYLED, put((*_S, "placeholder_tokens"), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null generated_ko", edited(STYLED, put((*_S, "generated_ko"), None)), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "null inside an ID list", edited(STYLED, put((*_S, "predicate_ids"), [None])), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "string for a list", edited(STYLED, put((*_S, "placeholder_tokens"), "[[P:01]]")), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "list for a string", edited(STYLED, put((*_S, "generated_ko"), [GOOD_TEXT])), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "object for a string", edited(STYLED, put((*_S, "generated_ko"), {"ko": GOOD_TEXT})), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "object for slots", edited(STYLED, put(("slots",), {"0": response(STYLED)["slots"][0]})), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "list for a slot", edited(STYLED, put(_S, ["weekly.interpretation"])), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "number inside an ID list", edited(STYLED, put((*_S, "predicate_ids"), [1])), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "nested list inside an ID list", edited(STYLED, put((*_S, "predicate_ids"), [["P_WEEKLY_TREND_OBSERVED"]])), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "string 'true' for a list", edited(STYLED, put((*_S, "action_ids"), "true")), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "huge integer literal", edited(STYLED, put((*_S, "generated_ko"), 0)).replace('"generated_ko":0', '"generated_ko":' + "7" * 5000), Reason.SCHEMA_MISMATCH),
    _r("type_confusion", "top-level array", "[" + D + "]", Reason.NOT_OBJECT),
    _r("type_confusion", "top-level string", json.dumps(GOOD_TEXT, ensure_ascii=False), Reason.NOT_OBJECT),
    _r("type_confusion", "top-level number", "1", Reason.NOT_OBJECT),
    _r("type_confusion", "top-level true", "true", Reason.NOT_OBJECT),
    _r("type_confusion", "top-level null", "null", Reason.NOT_OBJECT),
    _r("type_confusion", "NaN value", D[:-1] + ',"x":NaN}', Reason.NON_FINITE_NUMBER),
    _r("type_confusion", "Infinity value", D[:-1] + ',"x":-Infinity}', Reason.NON_FINITE_NUMBER),
    _r("type_confusion", "overflowing float", D[:-1] + ',"x":1e400}', Reason.NON_FINITE_NUMBER),
]  # fmt: skip

# -- exact key sets -------------------------------------------------------------------
KEYS = [
    *[_r("key_sets", f"missing top-level {k}", edited(STYLED, drop((k,))), Reason.SCHEMA_MISMATCH) for k in ("schema_version", "surface", "artifact_key", "slots")],
    *[_r("key_sets", f"missing slot {k}", edited(STYLED, drop((*_S, k))), Reason.SCHEMA_MISMATCH) for k in ("slot_id", "predicate_ids", "action_ids", "placeholder_tokens", "generated_ko")],
    *[_r("key_sets", f"extra top-level {k}", edited(STYLED, put((k,), "x")), Reason.SCHEMA_MISMATCH) for k in ("variant_id", "body", "composition", "offsets", "tool_calls", "prompt")],
    *[_r("key_sets", f"extra slot {k}", edited(STYLED, put((*_S, k), "x")), Reason.SCHEMA_MISMATCH) for k in ("text", "canonical_text", "expansion", "variant_id", "semantic_text")],
    _r("key_sets", "key with different case", D.replace('"surface"', '"Surface"'), Reason.SCHEMA_MISMATCH),
    _r("key_sets", "key with a trailing space", D.replace('"surface"', '"surface "'), Reason.SCHEMA_MISMATCH),
    _r("key_sets", "fullwidth key", D.replace('"surface"', '"ｓｕｒｆａｃｅ"'), Reason.SCHEMA_MISMATCH),
    _r("key_sets", "empty object", "{}", Reason.SCHEMA_MISMATCH),
    _r("key_sets", "slot as an empty object", edited(STYLED, put(_S, {})), Reason.SCHEMA_MISMATCH),
    _r("key_sets", "request echo instead of response keys", STYLED.to_json(), Reason.SCHEMA_MISMATCH),
]  # fmt: skip

# -- echo: schema version, surface, slots ----------------------------------------------
ECHO = [
    _e("echo", "previous schema version", edited(STYLED, put(("schema_version",), "korean-expression-v3")), Reason.SCHEMA_VERSION_MISMATCH),
    _e("echo", "schema version with a trailing space", edited(STYLED, put(("schema_version",), "korean-expression-v4 ")), Reason.SCHEMA_VERSION_MISMATCH),
    _e("echo", "surface of another capsule", edited(STYLED, put(("surface",), "daily.v1")), Reason.SURFACE_MISMATCH),
    _e("echo", "unknown surface version", edited(STYLED, put(("surface",), "weekly.v2")), Reason.SURFACE_MISMATCH),
    _e("echo", "wrong slot id", edited(STYLED, put((*_S, "slot_id"), "weekly.rationale")), Reason.SLOT_MISMATCH),
    _e("echo", "extra slot", edited(STYLED, lambda d: d["slots"].append(d["slots"][0])), Reason.SLOT_MISMATCH),
    _e("echo", "no slots", edited(STYLED, put(("slots",), [])), Reason.SLOT_MISMATCH),
    _e("echo", "the locked rationale answered beside it", _with_slots(_RATIONALE_SLOT), Reason.SLOT_MISMATCH),
    _e("echo", "the locked rationale answered first", edited(STYLED, lambda d: d["slots"].insert(0, _RATIONALE_SLOT)), Reason.SLOT_MISMATCH),
    _e("echo", "a review slot of another surface answered", edited(STYLED, put((*_S, "slot_id"), "adaptive.dual.review.1")), Reason.SLOT_MISMATCH),
    _e("echo", "predicate of another branch", edited(STYLED, put((*_S, "predicate_ids"), ["P_WEEKLY_IN_GOAL"])), Reason.PREDICATE_IDS_MISMATCH),
    _e("echo", "extra predicate", edited(STYLED, put((*_S, "predicate_ids"), ["P_WEEKLY_TREND_OBSERVED", "P_WEEKLY_IN_GOAL"])), Reason.PREDICATE_IDS_MISMATCH),
    _e("echo", "missing predicate", edited(STYLED, put((*_S, "predicate_ids"), [])), Reason.PREDICATE_IDS_MISMATCH),
    _e("echo", "added action", edited(STYLED, put((*_S, "action_ids"), ["A_WEEKLY_HOLD_FOR_MISSING_GOAL", "A_OPERATOR_REVIEW_DECISION"])), Reason.ACTION_IDS_MISMATCH),
    _e("echo", "action of another branch", edited(STYLED, put((*_S, "action_ids"), ["A_WEEKLY_RECHECK_INPUT"])), Reason.ACTION_IDS_MISMATCH),
    _e("echo", "missing action", edited(STYLED, put((*_S, "action_ids"), [])), Reason.ACTION_IDS_MISMATCH),
    _e("echo", "lower-case ID", edited(STYLED, put((*_S, "predicate_ids"), ["p_weekly_trend_observed"])), Reason.PREDICATE_IDS_MISMATCH),
]  # fmt: skip

# -- order of slots, IDs and tokens ------------------------------------------------------
ORDER = [
    _e("order", "the styled slot after a slot never asked", edited(STYLED, lambda d: d["slots"].insert(0, {**d["slots"][0], "slot_id": "weekly.rationale"})), Reason.SLOT_MISMATCH),
    _e("order", "action ID moved into predicates", edited(STYLED, put((*_S, "predicate_ids"), ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"])), Reason.PREDICATE_IDS_MISMATCH),
    _e("order", "predicate ID moved into actions", edited(STYLED, put((*_S, "action_ids"), ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"])), Reason.ACTION_IDS_MISMATCH),
    _e("order", "echoed mixed tokens reordered", edited(STYLED, put((*_S, "placeholder_tokens"), ["[[A:01]]", "[[P:01]]"])), Reason.PLACEHOLDER_TOKENS_MISMATCH),
    _g("order", "action before predicate in prose", "다만 [[A:01]]. [[P:01]].", Reason.TOKEN_ORDER),
    _g("order", "action before predicate, styled as asked", "[[A:01]]. 다만 [[P:01]].", Reason.TOKEN_ORDER),
]  # fmt: skip

# -- artifact key -----------------------------------------------------------------------
ARTIFACT_KEY = [
    _e("artifact_key", "key of another artifact", edited(STYLED, put(("artifact_key",), OTHER_KEY)), Reason.ARTIFACT_KEY_MISMATCH),
    _e("artifact_key", "one hex digit changed", edited(STYLED, put(("artifact_key",), KEY[:-1] + "b")), Reason.ARTIFACT_KEY_MISMATCH),
    _e("artifact_key", "upper-case hex", edited(STYLED, put(("artifact_key",), KEY.upper())), Reason.ARTIFACT_KEY_MISMATCH),
    _e("artifact_key", "truncated", edited(STYLED, put(("artifact_key",), KEY[:63])), Reason.ARTIFACT_KEY_MISMATCH),
    _e("artifact_key", "one character longer", edited(STYLED, put(("artifact_key",), KEY + "0")), Reason.ARTIFACT_KEY_MISMATCH),
    _e("artifact_key", "empty", edited(STYLED, put(("artifact_key",), "")), Reason.ARTIFACT_KEY_MISMATCH),
    _e("artifact_key", "padded with spaces", edited(STYLED, put(("artifact_key",), f" {KEY} ")), Reason.ARTIFACT_KEY_MISMATCH),
    _e("artifact_key", "fullwidth digits", edited(STYLED, put(("artifact_key",), KEY.replace("5", "５"))), Reason.ARTIFACT_KEY_MISMATCH),
    _e("artifact_key", "placeholder text", edited(STYLED, put(("artifact_key",), "opaque-hmac-hex")), Reason.ARTIFACT_KEY_MISMATCH),
]  # fmt: skip

# -- tokens: missing, duplicate, cross-slot, reordered, new, malformed --------------------
TOKENS = [
    _g("tokens", "token missing", "[[P:01]]. 다만.", Reason.TOKEN_MISSING),
    _g("tokens", "first token missing", "다만 [[A:01]].", Reason.TOKEN_MISSING),
    _g("tokens", "second token missing", "다만 [[P:01]].", Reason.TOKEN_MISSING),
    _g("tokens", "empty generated_ko", "", Reason.TOKEN_MISSING),
    _g("tokens", "token twice", "[[P:01]]. 다만 [[A:01]]. 다만 [[A:01]].", Reason.TOKEN_DUPLICATE),
    _g("tokens", "first of two tokens twice", "[[P:01]]. [[P:01]]. 다만 [[A:01]].", Reason.TOKEN_DUPLICATE),
    _g("tokens", "a token numbered as another slot's", "[[P:01]]. 다만 [[A:02]].", Reason.TOKEN_UNISSUED),
    _g("tokens", "rationale token in the interpretation", "[[P:01]]. 다만 [[A:01]]. 다만 [[P:02]].", Reason.TOKEN_UNISSUED),
    _g("tokens", "new predicate token", "[[P:01]]. 다만 [[A:01]]. [[P:02]].", Reason.TOKEN_UNISSUED),
    _g("tokens", "predicate token in the action's place", "[[P:01]]. 다만 [[P:02]].", Reason.TOKEN_UNISSUED),
    _g("tokens", "token 99", "[[P:01]]. 다만 [[A:01]]. [[P:99]].", Reason.TOKEN_UNISSUED),
    _g("tokens", "one-digit token", "[[P:01]]. 다만, [[A:1]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "lower-case family", "[[P:01]]. 다만, [[a:01]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "token zero", "[[P:01]]. 다만, [[A:00]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "three-digit token", "[[P:01]]. 다만, [[A:001]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "unclosed token", "[[P:01]]. 다만, [[A:01].", Reason.MALFORMED_TOKEN),
    _g("tokens", "triple brackets", "[[P:01]]. 다만, [[[A:01]]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "spaces inside the token", "[[P:01]]. 다만, [[ A:01 ]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "fullwidth colon inside the token", "[[P:01]]. 다만, [[A：01]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "fullwidth digits inside the token", "[[P:01]]. 다만, [[A:０１]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "fullwidth brackets", "[[P:01]]. 다만, ［［A:01］］.", Reason.MALFORMED_TOKEN),
    _g("tokens", "Cyrillic Er instead of P", "[[Р:01]]. 다만, [[A:01]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "Greek Alpha instead of A", "[[P:01]]. 다만, [[Α:01]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "mathematical brackets", "[[P:01]]. 다만, ⟦A:01⟧.", Reason.BRACKET),
    _g("tokens", "semantic ID as a token", "[[P:01]]. 다만, [[A_WEEKLY_HOLD_FOR_MISSING_GOAL]].", Reason.MALFORMED_TOKEN),
    _g("tokens", "token glued to a particle", "[[P:01]]. 다만, [[A:01]]요.", Reason.UNKNOWN_WORD),
    _g("tokens", "tokens glued together", "다만 [[P:01]][[A:01]].", Reason.GRAMMAR),
]  # fmt: skip

# -- literal token expansion --------------------------------------------------------------
EXPANSION = [
    _g("literal_expansion", "daily complete expansion instead of the token", "[[P:01]]. 차분히, 저장된 오늘 기록을 확인했습니다.", Reason.UNIT_OR_DATE),
    _g("literal_expansion", "daily partial expansion instead of the token", "[[P:01]]. 차분히, 일부 항목이 기록되지 않아 저장된 내용만 안내합니다.", Reason.FORBIDDEN_VOCABULARY),
    _g("literal_expansion", "expansion beside the token", "[[P:01]]. [[A:01]]. 저장된 오늘 기록을 확인했습니다.", Reason.UNIT_OR_DATE),
    _g("literal_expansion", "half the expansion before the token", "[[P:01]]. 차분히, 저장된 [[A:01]].", Reason.UNKNOWN_WORD),
    _g("literal_expansion", "physique expansion", "[[P:01]]. 차분히, 제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.", Reason.FORBIDDEN_VOCABULARY),
    _g("literal_expansion", "weekly expansion", "차분히, 체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다. 이어서 [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
    _g("literal_expansion", "dual decision expansion before the hold", "[[P:01]]. 다만, 운영자 검토가 끝날 때까지 계획 판단을 보류합니다.", Reason.FORBIDDEN_VOCABULARY),
    _g("literal_expansion", "dual reason expansion instead of the hold", "[[P:01]]. 다만 판단에 필요한 기간의 기록이 부족합니다.", Reason.FORBIDDEN_VOCABULARY),
]  # fmt: skip

# -- numbers ------------------------------------------------------------------------------
_DIGITS = [
    ("ASCII", "3"), ("fullwidth", "３"), ("Arabic-Indic", "٣"), ("Devanagari", "३"),
    ("Thai", "๓"), ("Bengali", "৩"), ("mathematical bold", "𝟑"), ("circled", "①"),
    ("parenthesized", "⑴"), ("digit full stop", "⒈"), ("superscript", "²"), ("subscript", "₂"),
    ("fraction", "½"), ("Roman numeral", "Ⅻ"), ("small Roman numeral", "ⅻ"),
    ("circled ideograph one", "㊀"), ("ideographic zero", "〇"), ("keycap", "1\ufe0f\u20e3"),
    ("decimal", "72.4"), ("thousands", "2,150"),
]  # fmt: skip
_NUMBER_WORDS = [
    "하나", "둘", "셋", "넷", "다섯", "여섯", "일곱", "여덟", "아홉", "열", "스물", "한", "두",
    "세", "네", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구", "십", "백", "천", "만",
    "억", "첫째", "하루", "이틀", "반",
]  # fmt: skip
NUMBERS = [
    *[_g("numbers", f"{name} digit", f"[[P:01]]. 차분히 {d} [[A:01]].", Reason.DIGIT) for name, d in _DIGITS],
    *[_g("numbers", f"number word {w}", f"[[P:01]]. {w} [[A:01]].", Reason.NUMBER_WORD) for w in _NUMBER_WORDS],
    _g("numbers", "plan's 하나 example", "[[P:01]]. 하나, [[A:01]].", Reason.NUMBER_WORD),
    _g("numbers", "number word after a lexeme", "[[P:01]]. 차분히 둘, [[A:01]].", Reason.NUMBER_WORD),
    _g("numbers", "number word in the second sentence", "차분히 [[P:01]]. 셋 [[A:01]].", Reason.NUMBER_WORD),
    _g("numbers", "Hanja one", "[[P:01]]. 차분히 一 [[A:01]].", Reason.NUMBER_WORD),
    _g("numbers", "Hanja ten thousand", "[[P:01]]. 차분히 万 [[A:01]].", Reason.NUMBER_WORD),
    _g("numbers", "number word with a counter is still rejected", "[[P:01]]. 다섯번 [[A:01]].", Reason.UNKNOWN_WORD),
    _g("numbers", "numbered list", "[[P:01]]. 1. 차분히 [[A:01]].", Reason.DIGIT),
    _g("numbers", "digit beats a unit", "[[P:01]]. 차분히 3일 [[A:01]].", Reason.DIGIT),
]  # fmt: skip

# -- dates and units ------------------------------------------------------------------------
_UNIT_WORDS = [
    "주",
    "월",
    "년",
    "시간",
    "분",
    "초",
    "오늘",
    "어제",
    "내일",
    "매일",
    "매주",
    "월요일",
    "일주일",
    "두시간",
    "삼개월",
    "킬로그램",
    "칼로리",
    "리터",
    "퍼센트",
    "그램",
]
_UNIT_SYMBOLS = [
    ("squared kg", "㎏"),
    ("squared kcal", "㎉"),
    ("Celsius", "℃"),
    ("script l", "ℓ"),
    ("squared dB", "㏈"),
    ("telegraph month", "㋀"),
    ("won sign", "₩"),
    ("fullwidth won", "￦"),
    ("dollar", "$"),
    ("euro", "€"),
]
DATES_UNITS = [
    *[_g("dates_units", f"unit or date word {w}", f"[[P:01]]. 차분히 {w} [[A:01]].", Reason.UNIT_OR_DATE) for w in _UNIT_WORDS],
    *[_g("dates_units", f"unit symbol {name}", f"[[P:01]]. 차분히 {s} [[A:01]].", Reason.UNIT_OR_DATE) for name, s in _UNIT_SYMBOLS],
    *[_g("dates_units", f"Latin unit {u}", f"[[P:01]]. 차분히 {u} [[A:01]].", Reason.LATIN) for u in ("kg", "kcal", "g", "L", "ml", "km")],
    _g("dates_units", "일 is a number word first", "[[P:01]]. 차분히 일 [[A:01]].", Reason.NUMBER_WORD),
    _g("dates_units", "ISO date", "[[P:01]]. 차분히 2026 [[A:01]].", Reason.DIGIT),
    _g("dates_units", "Korean date", "[[P:01]]. 차분히 3월 [[A:01]].", Reason.DIGIT),
    _g("dates_units", "time of day", "[[P:01]]. 차분히 14:05 [[A:01]].", Reason.DIGIT),
    _g("dates_units", "month written in Hangul", "[[P:01]]. 삼월 [[A:01]].", Reason.UNKNOWN_WORD),
]  # fmt: skip

# -- semantic or action IDs written in prose ------------------------------------------------
IDS_IN_PROSE = [
    _g("ids_in_prose", "predicate ID", "[[P:01]]. P_DAILY_COMPLETE, [[A:01]].", Reason.LATIN),
    _g("ids_in_prose", "action ID", "[[P:01]]. A_OPERATOR_REVIEW_DECISION, [[A:01]].", Reason.LATIN),
    _g("ids_in_prose", "ID of another slot", "[[P:01]]. P_WEEKLY_IN_GOAL 차분히, [[A:01]].", Reason.LATIN),
    _g("ids_in_prose", "lower-case ID", "[[P:01]]. p_daily_complete [[A:01]].", Reason.LATIN),
    _g("ids_in_prose", "fullwidth ID", "[[P:01]]. Ｐ＿ＤＡＩＬＹ [[A:01]].", Reason.LATIN),
    _g("ids_in_prose", "ID without prefix", "[[P:01]]. DAILY_COMPLETE [[A:01]].", Reason.LATIN),
    _g("ids_in_prose", "artifact key in prose", f"[[P:01]]. {KEY} [[A:01]].", Reason.LATIN),
    _g("ids_in_prose", "slot id in prose", "[[P:01]]. daily.status [[A:01]].", Reason.LATIN),
    _g("ids_in_prose", "ID in the second sentence", "차분히 [[P:01]]. A_WEEKLY_RECHECK_INPUT [[A:01]].", Reason.LATIN),
]  # fmt: skip

VOCABULARY = [
    *[_g("forbidden_vocabulary", f"plan word {v} alone", f"[[P:01]]. 차분히 {v} [[A:01]].", Reason.FORBIDDEN_VOCABULARY) for v in PLAN_VOCABULARY],
    *[_g("forbidden_vocabulary", f"plan word {v} inside a word", f"[[P:01]]. {v}하게, [[A:01]].", Reason.FORBIDDEN_VOCABULARY) for v in PLAN_VOCABULARY],
    _g("forbidden_vocabulary", "충분히", "[[P:01]]. 충분히 [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
    _g("forbidden_vocabulary", "좋아요", "[[P:01]]. 좋아요, [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
    _g("forbidden_vocabulary", "완벽하게", "[[P:01]]. 완벽하게 [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
    _g("forbidden_vocabulary", "목표", "[[P:01]]. 목표대로 [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
    _g("forbidden_vocabulary", "vocabulary beats an unknown word", "[[P:01]]. 오늘은 안전하게 [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
]  # fmt: skip
EVIDENTIAL = [
    _g("evidential", "plan's 확인 결과 example", "[[P:01]]. 확인 결과, [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "확인결과 as one word", "[[P:01]]. 확인결과 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "확인, 결과 split by a comma", "[[P:01]]. 확인, 결과 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "확인한 결과", "[[P:01]]. 확인한 결과 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "기록상", "[[P:01]]. 기록상 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "분석", "[[P:01]]. 분석 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "분석하면", "[[P:01]]. 차분히 분석하면 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "데이터상", "[[P:01]]. 데이터상 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "수치상", "[[P:01]]. 수치상 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "살펴보니", "[[P:01]]. 살펴보니 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "claim in the second sentence", "차분히 [[P:01]]. 확인 결과 [[A:01]].", Reason.EVIDENTIAL_CLAIM),
    _g("evidential", "claim split by a lexeme is still vocabulary", "[[P:01]]. 확인 차분히 결과 [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
]  # fmt: skip

# -- negation and modality --------------------------------------------------------------------
NEGATION = [
    *[_g("negation_modality", f"{w}", f"[[P:01]]. 차분히 {w} [[A:01]].", Reason.NEGATION_OR_MODALITY) for w in ("안", "못", "않게", "없이", "아니라", "말고", "마세요", "해야", "하세요", "반드시", "꼭", "절대", "금지", "필수", "무조건", "불가")],
    _g("negation_modality", "negation after a lexeme run", "[[P:01]]. 다시 또 안 [[A:01]].", Reason.NEGATION_OR_MODALITY),
    _g("negation_modality", "modality in the physique slot", "[[P:01]]. 반드시, [[A:01]].", Reason.NEGATION_OR_MODALITY),
]  # fmt: skip

# -- medical / approval / delivery claims ---------------------------------------------------------
CLAIMS = [
    *[_g("medical_approval_delivery", f"{w}", f"[[P:01]]. {w} [[A:01]].", Reason.FORBIDDEN_VOCABULARY) for w in ("진단상", "치료가", "약을", "처방대로", "의료적으로", "건강하게", "부상", "통증", "병원")],
    *[_g("medical_approval_delivery", f"{w}", f"[[P:01]]. {w}, [[A:01]].", Reason.FORBIDDEN_VOCABULARY) for w in ("승인됨", "승인된", "허가된", "확정", "결정됨", "검토완료", "발송됨", "전송됨", "보내드렸습니다")],
    _g("medical_approval_delivery", "delivered to the customer", "[[P:01]]. 고객에게 전달되었습니다, [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
    _g("medical_approval_delivery", "already reviewed", "[[P:01]]. 운영자 검토를 마쳤고, [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
    _g("medical_approval_delivery", "doctor is merely an unknown word", "[[P:01]]. 의사와 [[A:01]].", Reason.UNKNOWN_WORD),
    _g("medical_approval_delivery", "approval written on the finding", "승인, [[P:01]]. 다만 [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
]  # fmt: skip

# -- layout: headers, bullets, newlines, quotes, brackets, URLs, emoji, Latin ------------------------
LAYOUT = [
    *[_g("layout", f"heading {h!r}", f"{h} 다만 [[P:01]]. [[A:01]].", Reason.LAYOUT_SYNTAX) for h in ("#", "##", "###")],
    *[_g("layout", f"bullet {b!r}", f"{b} 다만 [[P:01]]. [[A:01]].", Reason.LAYOUT_SYNTAX) for b in ("-", "*", "+", "•", "·", "‣", "∙", "※", "◦", "▪", "●", "■", "▶", ">", "=")],
    _g("layout", "bullet after spaces", "  - 다만 [[P:01]]. [[A:01]].", Reason.LAYOUT_SYNTAX),
    _g("layout", "horizontal rule", "--- 다만 [[P:01]]. [[A:01]].", Reason.LAYOUT_SYNTAX),
    _g("layout", "bold", "[[P:01]]. **차분히** [[A:01]].", Reason.LAYOUT_SYNTAX),
    _g("layout", "italic underscores", "[[P:01]]. _차분히_ [[A:01]].", Reason.LAYOUT_SYNTAX),
    _g("layout", "inline code", "[[P:01]]. 차분히 `[[A:01]]`.", Reason.LAYOUT_SYNTAX),
    _g("layout", "spoiler bars", "[[P:01]]. ||차분히|| [[A:01]].", Reason.LAYOUT_SYNTAX),
    _g("layout", "strike-through tildes", "[[P:01]]. ~~차분히~~ [[A:01]].", Reason.ARITHMETIC_SYMBOL),
    _g("layout", "dash inside the text", "[[P:01]]. 차분히 -- [[A:01]].", Reason.ARITHMETIC_SYMBOL),
    _g("layout", "filled circle inside the text", "[[P:01]]. 차분히 ● [[A:01]].", Reason.EMOJI),
    _g("layout", "Hangul circled letter as a marker", "[[P:01]]. ㉠ 차분히 [[A:01]].", Reason.EMOJI),
    _r("layout", "raw newline", D.replace(WORD + " ", WORD + "\n"), Reason.MALFORMED_JSON),
    _r("layout", "escaped newline", _escaped_generated("\\n"), Reason.FORBIDDEN_CHARACTER),
    _r("layout", "escaped blank line", _escaped_generated("\\n\\n"), Reason.FORBIDDEN_CHARACTER),
    *[_g("layout", f"quote {q!r}", f"[[P:01]]. {q}차분히{q2} [[A:01]].", Reason.QUOTE) for q, q2 in (('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("「", "」"), ("『", "』"), ("«", "»"), ("‹", "›"), ("＂", "＂"), ("〝", "〞"))],
    *[_g("layout", f"bracket {b!r}", f"[[P:01]]. {b}차분히{b2} [[A:01]].", Reason.BRACKET) for b, b2 in (("(", ")"), ("{", "}"), ("<", ">"), ("【", "】"), ("〈", "〉"), ("《", "》"), ("〔", "〕"), ("（", "）"))],
    _g("layout", "square brackets", "[[P:01]]. [차분히] [[A:01]].", Reason.MALFORMED_TOKEN),
    _g("layout", "HTML tag", "[[P:01]]. <b>차분히</b> [[A:01]].", Reason.BRACKET),
    *[_g("layout", f"URL {u}", f"[[P:01]]. 차분히 {u} [[A:01]].", Reason.URL) for u in ("https://t.me/kexpr", "http://example.com", "www.example.kr", "t.me/kexpr", "example.com", "mailto:a", "tg://resolve", "ｈｔｔｐｓ://x")],
    _g("layout", "URL glued to a lexeme", "[[P:01]]. 차분히.com [[A:01]].", Reason.URL),
    *[_g("layout", f"emoji {e}", f"[[P:01]]. 차분히 {e} [[A:01]].", Reason.EMOJI) for e in ("😀", "❤️", "👍🏻", "✅", "★", "🇰🇷", "🙏", "♥", "→", "∞")],
    *[_g("layout", f"Latin {w}", f"[[P:01]]. {w} 차분히 [[A:01]].", Reason.LATIN) for w in ("OK", "Good job", "café", "naïve", "ﬁne")],
    _g("layout", "HTML entity", "[[P:01]]. &nbsp; 차분히 [[A:01]].", Reason.LATIN),
    _g("layout", "Cyrillic look-alike", "[[P:01]]. Привет [[A:01]].", Reason.DISALLOWED_CHARACTER),
    _g("layout", "Greek look-alike", "[[P:01]]. Οκ [[A:01]].", Reason.DISALLOWED_CHARACTER),
    *[_g("layout", f"punctuation {p!r}", f"[[P:01]]. 차분히{p} [[A:01]].", Reason.DISALLOWED_CHARACTER) for p in ("!", "?", ":", ";", "/", "…", "。", "、", "，", "．", "﹐", "‥", "@", "^", "&", "\\")],
    _g("layout", "newline written as a word", "[[P:01]]. 차분히 n [[A:01]].", Reason.LATIN),
]  # fmt: skip

# -- length and lexeme limits, document size ------------------------------------------------------
_RUN = "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 순서대로 함께 지금 이제 여기서 아래 바로 그대로"  # 17 lexemes
LIMITS = [
    _g("limits", "seventeen lexemes before the hold", f"[[P:01]]. {_RUN}, [[A:01]].", Reason.TOO_MANY_LEXEMES),
    _g("limits", "lexemes counted across sentences", "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩, [[P:01]]. 순서대로 함께 지금 이제 여기서 아래 바로 그대로 [[A:01]].", Reason.TOO_MANY_LEXEMES),
    _g("limits", "weekly interpretation seventeen lexemes", f"{_RUN}, [[P:01]]. [[A:01]].", Reason.TOO_MANY_LEXEMES),
    # The slot's limit is its row's (16), not another row's (10): eleven are only stacked.
    _g("limits", "eleven lexemes are within the slot's limit", "[[P:01]]. " + " ".join(_RUN.split()[:11]) + " [[A:01]].", Reason.STACKED_STYLE),
    _g("limits", "over 220 characters before the hold", "[[P:01]]. " + "다만 " * 70 + "[[A:01]].", Reason.TOO_LONG),
    _g("limits", "length checked before everything", "3" * 221, Reason.TOO_LONG),
    _g("limits", "over 220 characters on the first sentence", "차분히 " * 55 + "[[P:01]]. [[A:01]].", Reason.TOO_LONG),
    _r("limits", "document one byte over 16 KiB", _pad(D, MAX_RESPONSE_BYTES + 1), Reason.TOO_LARGE),
    _r("limits", "document of one MiB", D + " " * (1 << 20), Reason.TOO_LARGE),
    _r("limits", "multibyte padding counted in bytes", D[:-1] + ',"x":"' + "가" * 5500 + '"}', Reason.TOO_LARGE),
    _r("limits", "nesting beyond the recursion limit", "[" * 16_000, Reason.MALFORMED_JSON),
    _r("limits", "nesting one past MAX_NESTING", D[:-1] + ',"x":' + "[" * MAX_NESTING + "]" * MAX_NESTING + "}", Reason.MALFORMED_JSON),
    _r("limits", "nesting at MAX_NESTING is only an extra key", D[:-1] + ',"x":' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}", Reason.SCHEMA_MISMATCH),
    _r("limits", "brackets inside strings are not nesting", D[:-1] + ',"x":"' + "[" * 500 + '"}', Reason.SCHEMA_MISMATCH),
]  # fmt: skip

# -- canonical-only composition -----------------------------------------------------------------
CANONICAL_ONLY = [
    _g("canonical_only", "tokens alone", "[[P:01]]. [[A:01]].", Reason.NO_STYLE_LEXEME),
    _g("canonical_only", "canonical sentence copied", "[[P:01]]. 저장된 오늘 기록을 확인했습니다.", Reason.UNIT_OR_DATE),
    _g("canonical_only", "token without its period", "[[P:01]]. 다만 [[A:01]]", Reason.GRAMMAR),
]  # fmt: skip

# -- one bad slot rejects the whole document -------------------------------------------------------
# The capsule has one slot (design §6.1): what stands for a second slot is a slot the
# model answered though it was never asked, and the bad sentence of the one slot.
ONE_BAD_SLOT = [
    _e("one_bad_slot", "good slot and an unasked slot", _with_slots(_RATIONALE_SLOT), Reason.SLOT_MISMATCH),
    _e("one_bad_slot", "good slot and an unasked slot styled badly", _with_slots({**_RATIONALE_SLOT, "generated_ko": "오늘은 [[A:01]]"}), Reason.SLOT_MISMATCH),
    _e("one_bad_slot", "good slot answered twice", edited(STYLED, lambda d: d["slots"].append(d["slots"][0])), Reason.SLOT_MISMATCH),
    _g("one_bad_slot", "first sentence bad", "오늘은 [[P:01]]. 다만 [[A:01]].", Reason.UNKNOWN_WORD),
    _g("one_bad_slot", "second sentence bad", "[[P:01]]. 다만 잘 [[A:01]].", Reason.FORBIDDEN_VOCABULARY),
    _g("one_bad_slot", "second sentence a digit", "[[P:01]]. 다만 3 [[A:01]].", Reason.DIGIT),
    _g("one_bad_slot", "last sentence without its period", "[[P:01]]. 다만, [[A:01]]", Reason.GRAMMAR),
    _g("one_bad_slot", "good style, second sentence a misfit", "[[P:01]]. 지금 [[A:01]].", Reason.STYLE_MISFIT),
]  # fmt: skip

ATTACKS: list[Attack] = [
    *CONTROLS, *DUPLICATE_KEYS, *INVALID_UTF8, *BOM, *NFC, *INVISIBLE, *TYPES, *KEYS, *ECHO,
    *ORDER, *ARTIFACT_KEY, *TOKENS, *EXPANSION, *NUMBERS, *DATES_UNITS, *IDS_IN_PROSE,
    *VOCABULARY, *EVIDENTIAL, *NEGATION, *CLAIMS, *LAYOUT, *LIMITS, *CANONICAL_ONLY, *ONE_BAD_SLOT,
    *FIT_TABLE,
]  # fmt: skip

PLAN_ATTACK_CLASSES = frozenset(
    {
        "duplicate_keys", "invalid_utf8", "bom", "nfc", "invisible", "type_confusion",
        "key_sets", "order", "artifact_key", "tokens", "literal_expansion", "numbers",
        "dates_units", "ids_in_prose", "forbidden_vocabulary", "evidential",
        "negation_modality", "medical_approval_delivery", "layout", "limits",
        "canonical_only", "one_bad_slot",
    }
)  # fmt: skip


@pytest.mark.parametrize("attack", ATTACKS, ids=[f"{a.category}: {a.name}" for a in ATTACKS])
def test_attack(attack: Attack) -> None:
    judgement = judge(attack.capsule, attack.content)
    assert (judgement.verdict, judgement.reason) == (attack.verdict, attack.reason)
    assert (judgement.composition is None) is (attack.verdict is not Verdict.ACCEPTED)


def test_attack_names_are_unique() -> None:
    names = [(a.category, a.name) for a in ATTACKS]
    assert len(names) == len(set(names))


def test_every_plan_attack_class_has_cases() -> None:
    categories = {a.category for a in ATTACKS}
    assert PLAN_ATTACK_CLASSES <= categories
    assert categories <= PLAN_ATTACK_CLASSES | {"control", "echo", "fit_table"}


def test_every_reason_is_reached_by_an_attack() -> None:
    reached = {a.reason for a in ATTACKS if a.reason is not None}
    # The reader refuses every Cc/Cf/Cs character (forbidden_character) before the
    # grammar runs, so control_character is reachable only through check_generated,
    # which the shim's render calls on its own (DIRECT below).
    assert reached == set(Reason) - {Reason.CONTROL_CHARACTER}
    assert {reason for _, _, reason in DIRECT} >= {Reason.CONTROL_CHARACTER}


# check_generated on its own: the shim's render re-checks each slot with it directly
# (gateway_shim.surfaces._model Rule 3), so its answer matters without the reader.
DIRECT: list[tuple[str, str, Reason]] = [
    ("raw BEL", "[[P:01]]. 다만\u0007, [[A:01]].", Reason.CONTROL_CHARACTER),
    ("raw NUL", "[[P:01]]. \u0000다만, [[A:01]].", Reason.CONTROL_CHARACTER),
    ("bidi override", "[[P:01]]. \u202e다만, [[A:01]].", Reason.CONTROL_CHARACTER),
    ("bidi isolate", "[[P:01]]. 다만\u2066, [[A:01]].", Reason.CONTROL_CHARACTER),
    ("soft hyphen", "[[P:01]]. 다\u00ad만, [[A:01]].", Reason.CONTROL_CHARACTER),
    ("lone surrogate", "[[P:01]]. 다만, [[A:01]].\ud800", Reason.CONTROL_CHARACTER),
    ("tag character", "[[P:01]]. 다만\U000e0041, [[A:01]].", Reason.CONTROL_CHARACTER),
    ("raw LF", "[[P:01]]. 다만,\n[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    ("raw tab", "[[P:01]]. 다만,\t[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    ("ZWSP", "[[P:01]]. 다만,\u200b [[A:01]].", Reason.DISALLOWED_WHITESPACE),
    ("word joiner", "[[P:01]]. 다만\u2060, [[A:01]].", Reason.DISALLOWED_WHITESPACE),
    ("inner BOM", "[[P:01]]. 다만\ufeff, [[A:01]].", Reason.DISALLOWED_WHITESPACE),
    ("Hangul filler", "[[P:01]]. 다만,\u3164[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    ("line separator", "[[P:01]]. 다만,\u2028[[A:01]].", Reason.DISALLOWED_WHITESPACE),
    ("private use", "[[P:01]]. 다만\ue000, [[A:01]].", Reason.DISALLOWED_CHARACTER),
    (
        "decomposed Hangul",
        unicodedata.normalize("NFD", "[[P:01]]. 다만") + ", [[A:01]].",
        Reason.DISALLOWED_CHARACTER,
    ),
]


@pytest.mark.parametrize(("name", "text", "reason"), DIRECT, ids=[c[0] for c in DIRECT])
def test_check_generated_without_the_reader(name: str, text: str, reason: Reason) -> None:
    assert check_generated(STYLED.slots[0], text) is reason


def test_the_fit_table_attacks_are_grammatical() -> None:
    # Each would pass the grammar alone (the two lexeme runs at the slot's limit
    # included): only the fit table rejects it. Except the last, which shows the
    # grammar still decides first.
    for a in FIT_TABLE:
        if a.reason not in (Reason.STYLE_MISFIT, Reason.STACKED_STYLE):
            continue
        document = json.loads(a.content)
        for slot, text in zip(a.capsule.slots, document["slots"], strict=True):
            assert check_grammar(slot, text["generated_ko"]) is None, a.name


@pytest.mark.parametrize(
    ("surface", "policy"), LOCKED, ids=[p.slot_id + "/" + p.semantic_ids[0] for _, p in LOCKED]
)
def test_the_locked_slots_cannot_be_asked(surface: str, policy: SlotPolicy) -> None:
    # design §6.1: every slot but the goal-missing interpretation takes no word (or
    # one composition only), so no capsule carries it, alone or beside the styled
    # slot, and no answer to it can exist: the attacks above that used such a slot
    # (physique, daily, the rationale, dual review lines) have nothing to attack.
    with pytest.raises(CapsuleError) as info:
        capsule(surface, policy)
    assert info.value.reason is CapsuleReason.SLOT_UNSTYLEABLE
    if surface == STYLED.surface:
        with pytest.raises(CapsuleError) as info:
            capsule(surface, *STYLED.slots, policy)
        assert info.value.reason in (
            CapsuleReason.SLOT_UNSTYLEABLE,
            CapsuleReason.DUPLICATE_SLOT_ID,
        )


def test_expected_reasons_belong_to_their_verdicts() -> None:
    # A typo in the table (a reader reason under validation_rejected) fails here, not
    # as a confusing mismatch in test_attack.
    for a in ATTACKS:
        assert (a.reason is None) is (a.verdict is Verdict.ACCEPTED)
        if a.reason is not None:
            assert REASON_VERDICT[a.reason] is a.verdict, a.name

"""judge(): one table of (name, capsule, content, verdict, reason), design §6 parse order."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from contract_support import (
    ECHO_REASONS,
    KEY,
    OTHER_KEY,
    STYLED,
    doc,
    dumps,
    mutated,
    response,
)

from kexpr.spool.contract import (
    MAX_NESTING,
    MAX_RESPONSE_BYTES,
    REASON_VERDICT,
    Capsule,
    Composition,
    Judgement,
    Reason,
    Verdict,
    judge,
)

A = Verdict.ACCEPTED
INV = Verdict.INVALID_RESPONSE
REJ = Verdict.VALIDATION_REJECTED

Case = tuple[str, Capsule, str | bytes, Verdict, Reason | None]


def _set(path: tuple[Any, ...], value: object) -> Any:
    def change(d: dict[str, Any]) -> None:
        target: Any = d
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _delete(path: tuple[Any, ...]) -> Any:
    def change(d: dict[str, Any]) -> None:
        target: Any = d
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return change


def _padded_to(text: str, size: int) -> str:
    return text + " " * (size - len(text.encode()))


_STYLED_DOC = doc(STYLED)
_NFD = unicodedata.normalize("NFD", "차분히")
_WORD = "다만"  # the word of the styled answer (`contract_support.GOOD`)

ACCEPTED: list[Case] = [
    ("compact", STYLED, _STYLED_DOC, A, None),
    ("as bytes", STYLED, _STYLED_DOC.encode(), A, None),
    # The goldens of the one styled slot (design §6.2): 다만 before the hold, with or
    # without its comma, and nothing before the finding.
    ("plain space after style", STYLED, doc(STYLED, "[[P:01]]. 다만 [[A:01]]."), A, None),
    ("comma after style", STYLED, doc(STYLED, "[[P:01]]. 다만, [[A:01]]."), A, None),
    ("pretty indent=2", STYLED, dumps(response(STYLED), indent=2), A, None),
    (
        "CRLF and tab whitespace",
        STYLED,
        dumps(response(STYLED), indent="\t").replace("\n", "\r\n") + "\r\n",
        A,
        None,
    ),
    ("leading and trailing whitespace", STYLED, " \n\t" + _STYLED_DOC + "\n", A, None),
    (
        "key order irrelevant",
        STYLED,
        json.dumps(
            {
                k: ([dict(reversed(list(s.items()))) for s in v] if k == "slots" else v)
                for k, v in reversed(list(response(STYLED).items()))
            },
            ensure_ascii=False,
        ),
        A,
        None,
    ),
    ("ASCII escapes for Hangul", STYLED, json.dumps(response(STYLED), ensure_ascii=True), A, None),
    ("exactly MAX_RESPONSE_BYTES", STYLED, _padded_to(_STYLED_DOC, MAX_RESPONSE_BYTES), A, None),
]

READER: list[Case] = [
    # 1. encoding
    ("invalid UTF-8 byte", STYLED, b"\xff" + _STYLED_DOC.encode(), INV, Reason.NOT_UTF8),
    ("overlong UTF-8", STYLED, b'{"a":"\xc0\xaf"}', INV, Reason.NOT_UTF8),
    ("CESU surrogate bytes", STYLED, b'{"a":"\xed\xa0\x80"}', INV, Reason.NOT_UTF8),
    ("truncated UTF-8", STYLED, _STYLED_DOC.encode()[:-3] + "차".encode()[:2], INV, Reason.NOT_UTF8),
    (
        "lone surrogate in str content",
        STYLED,
        doc(STYLED, "[[P:01]]. 차분히, [[A:01]].\ud800"),
        INV,
        Reason.NOT_UTF8,
    ),
    # 2. size (before BOM, before JSON)
    ("one byte too large", STYLED, _padded_to(_STYLED_DOC, MAX_RESPONSE_BYTES + 1), INV, Reason.TOO_LARGE),
    ("too large beats BOM", STYLED, "\ufeff" + "x" * MAX_RESPONSE_BYTES, INV, Reason.TOO_LARGE),
    # 3. BOM
    ("BOM bytes", STYLED, b"\xef\xbb\xbf" + _STYLED_DOC.encode(), INV, Reason.BOM),
    ("BOM in str", STYLED, "\ufeff" + _STYLED_DOC, INV, Reason.BOM),
    # 4. json.loads with hooks
    (
        "duplicate top-level key",
        STYLED,
        _STYLED_DOC[:-1] + ',"surface":"daily.v1"}',
        INV,
        Reason.DUPLICATE_KEY,
    ),
    (
        "duplicate key spelled with an escape",
        STYLED,
        _STYLED_DOC[:-1] + ',"\\u0073urface":"daily.v1"}',
        INV,
        Reason.DUPLICATE_KEY,
    ),
    (
        "duplicate key inside a slot",
        STYLED,
        _STYLED_DOC.replace('"slot_id":', '"generated_ko":"x","slot_id":'),
        INV,
        Reason.DUPLICATE_KEY,
    ),
    ("duplicate key in a nested extra", STYLED, '{"x":{"y":{"k":1,"k":2}}}', INV, Reason.DUPLICATE_KEY),
    ("NaN", STYLED, '{"x": NaN}', INV, Reason.NON_FINITE_NUMBER),
    ("Infinity", STYLED, '{"x": Infinity}', INV, Reason.NON_FINITE_NUMBER),
    ("-Infinity", STYLED, '{"x": [-Infinity]}', INV, Reason.NON_FINITE_NUMBER),
    ("float overflow", STYLED, '{"x": 1e999}', INV, Reason.NON_FINITE_NUMBER),
    ("empty", STYLED, "", INV, Reason.MALFORMED_JSON),
    ("whitespace only", STYLED, " \n", INV, Reason.MALFORMED_JSON),
    ("trailing comma", STYLED, _STYLED_DOC[:-1] + ",}", INV, Reason.MALFORMED_JSON),
    ("two objects", STYLED, _STYLED_DOC + _STYLED_DOC, INV, Reason.MALFORMED_JSON),
    ("single quotes", STYLED, "{'surface': 'daily.v1'}", INV, Reason.MALFORMED_JSON),
    ("raw tab inside a string", STYLED, _STYLED_DOC.replace(_WORD + " ", _WORD + "\t"), INV, Reason.MALFORMED_JSON),
    ("raw LF inside a string", STYLED, _STYLED_DOC.replace(_WORD + " ", _WORD + "\n"), INV, Reason.MALFORMED_JSON),
    ("markdown fence", STYLED, "```json\n" + _STYLED_DOC + "\n```", INV, Reason.MALFORMED_JSON),
    ("form feed is not JSON whitespace", STYLED, "\f" + _STYLED_DOC, INV, Reason.MALFORMED_JSON),
    ("NBSP is not JSON whitespace", STYLED, "\u00a0" + _STYLED_DOC, INV, Reason.MALFORMED_JSON),
    ("nesting beyond the recursion limit", STYLED, "[" * 16000, INV, Reason.MALFORMED_JSON),
    # 5. top level
    ("array", STYLED, "[" + _STYLED_DOC + "]", INV, Reason.NOT_OBJECT),
    ("string", STYLED, '"차분히, [[P:01]]."', INV, Reason.NOT_OBJECT),
    ("number", STYLED, "1", INV, Reason.NOT_OBJECT),
    ("null", STYLED, "null", INV, Reason.NOT_OBJECT),
    # 6. NFC, on decoded strings, keys included
    ("NFD generated_ko", STYLED, doc(STYLED, "[[P:01]]. " + _NFD + ", [[A:01]]."), INV, Reason.NOT_NFC),
    (
        "NFD spelled with escapes",
        STYLED,
        _STYLED_DOC.replace(_WORD, "\\u1103\\u1161\\u1106\\u1161\\u11ab"),
        INV,
        Reason.NOT_NFC,
    ),
    ("NFD in a key", STYLED, dumps({_NFD: 1}), INV, Reason.NOT_NFC),
    ("Angstrom sign is not NFC", STYLED, dumps({"x": "\u212b"}), INV, Reason.NOT_NFC),
    # 7. forbidden characters, on decoded strings, keys included
    ("escaped BEL", STYLED, _STYLED_DOC.replace(_WORD + " ", _WORD + "\\u0007 "), INV, Reason.FORBIDDEN_CHARACTER),
    ("escaped LF", STYLED, _STYLED_DOC.replace(_WORD + " ", _WORD + "\\n"), INV, Reason.FORBIDDEN_CHARACTER),
    ("escaped tab", STYLED, _STYLED_DOC.replace(_WORD + " ", _WORD + "\\t"), INV, Reason.FORBIDDEN_CHARACTER),
    ("raw DEL", STYLED, doc(STYLED, "[[P:01]]. 차분히,\x7f [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("ZWJ", STYLED, doc(STYLED, "[[P:01]]. 차분\u200d히, [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("ZWNJ", STYLED, doc(STYLED, "[[P:01]]. 차분\u200c히, [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("ZWSP", STYLED, doc(STYLED, "[[P:01]]. 차분히,\u200b [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("word joiner", STYLED, doc(STYLED, "[[P:01]]. 차분히,\u2060 [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("inner BOM", STYLED, doc(STYLED, "[[P:01]]. 차분히,\ufeff [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("bidi override", STYLED, doc(STYLED, "[[P:01]]. \u202e차분히, [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("soft hyphen", STYLED, doc(STYLED, "[[P:01]]. 차분\u00ad히, [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("line separator", STYLED, doc(STYLED, "[[P:01]]. 차분히,\u2028[[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("paragraph separator", STYLED, doc(STYLED, "[[P:01]]. 차분히,\u2029[[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("Hangul filler U+3164", STYLED, doc(STYLED, "[[P:01]]. 차분히,\u3164[[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("Hangul filler U+115F", STYLED, doc(STYLED, "[[P:01]]. \u115f차분히, [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("Hangul filler U+1160", STYLED, doc(STYLED, "[[P:01]]. \u1160차분히, [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("halfwidth filler U+FFA0", STYLED, doc(STYLED, "[[P:01]]. 차분히,\uffa0[[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("escaped lone surrogate", STYLED, _STYLED_DOC.replace(_WORD, "\\ud800"), INV, Reason.FORBIDDEN_CHARACTER),
    ("private use", STYLED, doc(STYLED, "[[P:01]]. 차분히,\ue000 [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("noncharacter", STYLED, doc(STYLED, "[[P:01]]. 차분히,\ufdd0 [[A:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("control in a key", STYLED, dumps({"a\u0000": 1}), INV, Reason.FORBIDDEN_CHARACTER),
    ("control in slot_id", STYLED, mutated(STYLED, _set(("slots", 0, "slot_id"), "daily.status\u0000")), INV, Reason.FORBIDDEN_CHARACTER),
    # 8. strict typing: exact key sets, no coercion
    ("empty object", STYLED, "{}", INV, Reason.SCHEMA_MISMATCH),
    ("missing top-level key", STYLED, mutated(STYLED, _delete(("artifact_key",))), INV, Reason.SCHEMA_MISMATCH),
    ("extra top-level key", STYLED, mutated(STYLED, _set(("variant_id",), "a")), INV, Reason.SCHEMA_MISMATCH),
    ("missing slot key", STYLED, mutated(STYLED, _delete(("slots", 0, "action_ids"))), INV, Reason.SCHEMA_MISMATCH),
    ("extra slot key", STYLED, mutated(STYLED, _set(("slots", 0, "body"), "x")), INV, Reason.SCHEMA_MISMATCH),
    ("bool for a list", STYLED, mutated(STYLED, _set(("slots", 0, "action_ids"), False)), INV, Reason.SCHEMA_MISMATCH),
    ("null for a list", STYLED, mutated(STYLED, _set(("slots", 0, "action_ids"), None)), INV, Reason.SCHEMA_MISMATCH),
    ("string for a list", STYLED, mutated(STYLED, _set(("slots", 0, "placeholder_tokens"), "[[P:01]]")), INV, Reason.SCHEMA_MISMATCH),
    ("number for a string", STYLED, mutated(STYLED, _set(("slots", 0, "generated_ko"), 1)), INV, Reason.SCHEMA_MISMATCH),
    ("null for a string", STYLED, mutated(STYLED, _set(("slots", 0, "generated_ko"), None)), INV, Reason.SCHEMA_MISMATCH),
    ("list for a string", STYLED, mutated(STYLED, _set(("slots", 0, "generated_ko"), ["차분히, [[P:01]]."])), INV, Reason.SCHEMA_MISMATCH),
    ("bool for a string", STYLED, mutated(STYLED, _set(("schema_version",), True)), INV, Reason.SCHEMA_MISMATCH),
    ("number inside an ID list", STYLED, mutated(STYLED, _set(("slots", 0, "predicate_ids"), [1])), INV, Reason.SCHEMA_MISMATCH),
    ("nested list inside an ID list", STYLED, mutated(STYLED, _set(("slots", 0, "predicate_ids"), [["P_WEEKLY_TREND_OBSERVED"]])), INV, Reason.SCHEMA_MISMATCH),
    ("object for slots", STYLED, mutated(STYLED, _set(("slots",), {})), INV, Reason.SCHEMA_MISMATCH),
    ("slot as a list", STYLED, mutated(STYLED, _set(("slots", 0), ["weekly.interpretation"])), INV, Reason.SCHEMA_MISMATCH),
    ("huge integer literal", STYLED, mutated(STYLED, _set(("slots", 0, "generated_ko"), 0)).replace('"generated_ko": 0', '"generated_ko": ' + "9" * 5000), INV, Reason.SCHEMA_MISMATCH),
]  # fmt: skip


def _reorder_slots(d: dict[str, Any]) -> None:
    d["slots"].reverse()


ECHO: list[Case] = [
    ("old schema version", STYLED, mutated(STYLED, _set(("schema_version",), "korean-expression-v3")), REJ, Reason.SCHEMA_VERSION_MISMATCH),
    ("surface of another capsule", STYLED, mutated(STYLED, _set(("surface",), "daily.v1")), REJ, Reason.SURFACE_MISMATCH),
    ("wrong artifact key", STYLED, mutated(STYLED, _set(("artifact_key",), OTHER_KEY)), REJ, Reason.ARTIFACT_KEY_MISMATCH),
    ("upper-case artifact key", STYLED, mutated(STYLED, _set(("artifact_key",), KEY.upper())), REJ, Reason.ARTIFACT_KEY_MISMATCH),
    # One slot is the only capsule there is (design §6.2): a response's slot list is
    # checked against it as a whole, in place, count and every echoed field.
    ("a locked slot in its place", STYLED, mutated(STYLED, _set(("slots", 0, "slot_id"), "weekly.rationale")), REJ, Reason.SLOT_MISMATCH),
    ("no slots", STYLED, mutated(STYLED, _set(("slots",), [])), REJ, Reason.SLOT_MISMATCH),
    ("extra slot", STYLED, mutated(STYLED, lambda d: d["slots"].append(d["slots"][0])), REJ, Reason.SLOT_MISMATCH),
    ("a locked slot before it", STYLED, mutated(STYLED, lambda d: d["slots"].insert(0, d["slots"][0] | {"slot_id": "weekly.rationale"})), REJ, Reason.SLOT_MISMATCH),
    ("wrong slot id", STYLED, mutated(STYLED, _set(("slots", 0, "slot_id"), "adaptive.dual.review.2")), REJ, Reason.SLOT_MISMATCH),
    ("predicate of another branch", STYLED, mutated(STYLED, _set(("slots", 0, "predicate_ids"), ["P_WEEKLY_IN_GOAL"])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("the action echoed as a predicate", STYLED, mutated(STYLED, _set(("slots", 0, "predicate_ids"), ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("missing predicate", STYLED, mutated(STYLED, _set(("slots", 0, "predicate_ids"), [])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("extra predicate", STYLED, mutated(STYLED, _set(("slots", 0, "predicate_ids"), ["P_WEEKLY_TREND_OBSERVED", "P_WEEKLY_TREND_OBSERVED"])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("missing action", STYLED, mutated(STYLED, _set(("slots", 0, "action_ids"), [])), REJ, Reason.ACTION_IDS_MISMATCH),
    ("action of another branch", STYLED, mutated(STYLED, _set(("slots", 0, "action_ids"), ["A_WEEKLY_RECHECK_INPUT"])), REJ, Reason.ACTION_IDS_MISMATCH),
    ("added action", STYLED, mutated(STYLED, _set(("slots", 0, "action_ids"), ["A_WEEKLY_HOLD_FOR_MISSING_GOAL", "A_OPERATOR_REVIEW_DECISION"])), REJ, Reason.ACTION_IDS_MISMATCH),
    ("reordered tokens", STYLED, mutated(STYLED, _set(("slots", 0, "placeholder_tokens"), ["[[A:01]]", "[[P:01]]"])), REJ, Reason.PLACEHOLDER_TOKENS_MISMATCH),
    ("malformed echoed token", STYLED, mutated(STYLED, _set(("slots", 0, "placeholder_tokens"), ["[[P:1]]", "[[A:01]]"])), REJ, Reason.PLACEHOLDER_TOKENS_MISMATCH),
    ("missing echoed token", STYLED, mutated(STYLED, _set(("slots", 0, "placeholder_tokens"), ["[[P:01]]"])), REJ, Reason.PLACEHOLDER_TOKENS_MISMATCH),
    (
        "echo checked before any prose",
        STYLED,
        dumps(response(STYLED, "오늘은 [[P:01]]. 우선 [[A:01]].") | {"artifact_key": OTHER_KEY}),
        REJ,
        Reason.ARTIFACT_KEY_MISMATCH,
    ),
]  # fmt: skip

# generated_ko rules through judge (the full table is test_contract_grammar.py).
STYLE: list[Case] = [
    ("plan's daily example", STYLED, doc(STYLED, "[[P:01]]. 오늘은 차분히, [[A:01]]."), REJ, Reason.UNKNOWN_WORD),
    ("number word", STYLED, doc(STYLED, "[[P:01]]. 하나, [[A:01]]."), REJ, Reason.NUMBER_WORD),
    ("evidential claim", STYLED, doc(STYLED, "[[P:01]]. 확인 결과, [[A:01]]."), REJ, Reason.EVIDENTIAL_CLAIM),
    ("canonical-only selector", STYLED, doc(STYLED, "[[P:01]]. [[A:01]]."), REJ, Reason.NO_STYLE_LEXEME),
    ("too long", STYLED, doc(STYLED, "[[P:01]]. " + "차분히 " * 60 + "[[A:01]]."), REJ, Reason.TOO_LONG),
    ("NBSP", STYLED, doc(STYLED, "[[P:01]]. 차분히\u00a0[[A:01]]."), REJ, Reason.DISALLOWED_WHITESPACE),
    ("ideographic space", STYLED, doc(STYLED, "[[P:01]]. 차분히\u3000[[A:01]]."), REJ, Reason.DISALLOWED_WHITESPACE),
    ("malformed token", STYLED, doc(STYLED, "[[P:01]]. 차분히, [[A:1]]."), REJ, Reason.MALFORMED_TOKEN),
    ("bracket", STYLED, doc(STYLED, "[[P:01]]. 차분히 ([[A:01]])."), REJ, Reason.BRACKET),
    ("quote", STYLED, doc(STYLED, '[[P:01]]. "차분히" [[A:01]].'), REJ, Reason.QUOTE),
    ("url", STYLED, doc(STYLED, "[[P:01]]. https://t.me 차분히 [[A:01]]."), REJ, Reason.URL),
    ("semantic ID in prose", STYLED, doc(STYLED, "[[P:01]]. P_DAILY_COMPLETE 차분히 [[A:01]]."), REJ, Reason.LATIN),
    ("digit", STYLED, doc(STYLED, "[[P:01]]. 차분히 3 [[A:01]]."), REJ, Reason.DIGIT),
    ("heading", STYLED, doc(STYLED, "[[P:01]]. # 차분히 [[A:01]]."), REJ, Reason.LAYOUT_SYNTAX),
    ("percent", STYLED, doc(STYLED, "[[P:01]]. 차분히 % [[A:01]]."), REJ, Reason.ARITHMETIC_SYMBOL),
    ("unit word", STYLED, doc(STYLED, "[[P:01]]. 차분히 주 [[A:01]]."), REJ, Reason.UNIT_OR_DATE),
    ("emoji", STYLED, doc(STYLED, "[[P:01]]. 차분히 😀 [[A:01]]."), REJ, Reason.EMOJI),
    ("vocabulary", STYLED, doc(STYLED, "[[P:01]]. 잘 [[A:01]]."), REJ, Reason.FORBIDDEN_VOCABULARY),
    ("negation", STYLED, doc(STYLED, "[[P:01]]. 반드시 [[A:01]]."), REJ, Reason.NEGATION_OR_MODALITY),
    ("exclamation", STYLED, doc(STYLED, "[[P:01]]. 차분히! [[A:01]]."), REJ, Reason.DISALLOWED_CHARACTER),
    ("token not issued", STYLED, doc(STYLED, "[[P:01]]. 다만 [[P:02]]."), REJ, Reason.TOKEN_UNISSUED),
    ("token twice", STYLED, doc(STYLED, "[[P:01]]. 다만 [[P:01]]."), REJ, Reason.TOKEN_DUPLICATE),
    ("tokens reordered", STYLED, doc(STYLED, "다만 [[A:01]]. [[P:01]]."), REJ, Reason.TOKEN_ORDER),
    ("token missing", STYLED, doc(STYLED, "[[P:01]]. 다만."), REJ, Reason.TOKEN_MISSING),
    ("missing final period", STYLED, doc(STYLED, "[[P:01]]. 다만, [[A:01]]"), REJ, Reason.GRAMMAR),
    ("too many lexemes", STYLED, doc(STYLED, "[[P:01]]. 차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 순서대로 함께 지금 이제 여기서 아래 바로 다만, [[A:01]]."), REJ, Reason.TOO_MANY_LEXEMES),
    # the fit table (design §6.1, §6.2), after the grammar, sentence by sentence
    ("a word outside its cell", STYLED, doc(STYLED, "[[P:01]]. 차분히, [[A:01]]."), REJ, Reason.STYLE_MISFIT),
    ("a word of a former cell", STYLED, doc(STYLED, "[[P:01]]. 그리고 [[A:01]]."), REJ, Reason.STYLE_MISFIT),
    ("다만 before the finding", STYLED, doc(STYLED, "다만 [[P:01]]. [[A:01]]."), REJ, Reason.STYLE_MISFIT),
    ("다만, before the finding", STYLED, doc(STYLED, "다만, [[P:01]]. [[A:01]]."), REJ, Reason.STYLE_MISFIT),
    ("다만 before both sentences", STYLED, doc(STYLED, "다만 [[P:01]]. 다만 [[A:01]]."), REJ, Reason.STYLE_MISFIT),
    ("다만 stacked before the hold", STYLED, doc(STYLED, "[[P:01]]. 다만 다만 [[A:01]]."), REJ, Reason.STACKED_STYLE),
    ("다만 stacked with its comma", STYLED, doc(STYLED, "[[P:01]]. 다만 다만, [[A:01]]."), REJ, Reason.STACKED_STYLE),
    ("다만 stacked with another word", STYLED, doc(STYLED, "[[P:01]]. 그리고 다만 [[A:01]]."), REJ, Reason.STACKED_STYLE),
    ("two words before one sentence", STYLED, doc(STYLED, "[[P:01]]. 그리고 먼저 [[A:01]]."), REJ, Reason.STACKED_STYLE),
    # 다만's comma only as its join: anywhere else the composition is not one of the grammar.
    ("a comma after the finding", STYLED, doc(STYLED, "[[P:01]], 다만 [[A:01]]."), REJ, Reason.GRAMMAR),
    ("a comma before 다만", STYLED, doc(STYLED, "[[P:01]]. ,다만 [[A:01]]."), REJ, Reason.GRAMMAR),
    ("a comma on the token", STYLED, doc(STYLED, "[[P:01]]. 다만 ,[[A:01]]."), REJ, Reason.GRAMMAR),
    ("a comma with no space", STYLED, doc(STYLED, "[[P:01]]. 다만,[[A:01]]."), REJ, Reason.GRAMMAR),
    ("two commas", STYLED, doc(STYLED, "[[P:01]]. 다만,, [[A:01]]."), REJ, Reason.GRAMMAR),
    ("다만 after the hold", STYLED, doc(STYLED, "[[P:01]]. [[A:01]]. 다만"), REJ, Reason.GRAMMAR),
    ("the first bad sentence decides", STYLED, doc(STYLED, "차분히, [[P:01]]. 다만 다만 [[A:01]]."), REJ, Reason.STYLE_MISFIT),
]  # fmt: skip

TABLE: list[Case] = ACCEPTED + READER + ECHO + STYLE


@pytest.mark.parametrize(
    ("name", "cap", "content", "verdict", "reason"), TABLE, ids=[c[0] for c in TABLE]
)
def test_judge(
    name: str, cap: Capsule, content: str | bytes, verdict: Verdict, reason: Reason | None
) -> None:
    judgement = judge(cap, content)
    assert (judgement.verdict, judgement.reason) == (verdict, reason)
    assert (judgement.composition is not None) == (verdict is Verdict.ACCEPTED)


def test_table_names_are_unique() -> None:
    names = [c[0] for c in TABLE]
    assert len(names) == len(set(names))


def test_every_reader_and_echo_reason_has_a_case() -> None:
    covered = {c[4] for c in TABLE}
    wanted = {r for r, v in REASON_VERDICT.items() if v is Verdict.INVALID_RESPONSE}
    wanted |= ECHO_REASONS
    assert wanted <= covered


def test_accepted_composition_is_the_document_and_round_trips() -> None:
    judgement = judge(STYLED, dumps(response(STYLED), indent=2))
    assert judgement.composition is not None
    assert json.loads(judgement.composition.to_json()) == response(STYLED)
    # Canonical JSON: sorted keys, no spaces, UTF-8 — and it is itself accepted
    # (this is how the shim re-validates a composition it receives).
    text = judgement.composition.to_json()
    assert text == json.dumps(
        response(STYLED), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    again = judge(STYLED, text)
    assert again.verdict is Verdict.ACCEPTED and again.composition == judgement.composition


def test_composition_is_frozen_with_tuples() -> None:
    composition = judge(STYLED, _STYLED_DOC).composition
    assert isinstance(composition, Composition)
    assert composition.slots[0].placeholder_tokens == ("[[P:01]]", "[[A:01]]")
    with pytest.raises(ValueError):
        composition.surface = "weekly.v1"


def test_judgement_to_dict() -> None:
    assert judge(STYLED, _STYLED_DOC).to_dict() == {"verdict": "accepted", "reason": None}
    assert judge(STYLED, b"\xff").to_dict() == {"verdict": "invalid_response", "reason": "not_utf8"}
    assert judge(STYLED, doc(STYLED, "[[P:01]]. [[A:01]].")).to_dict() == {
        "verdict": "validation_rejected",
        "reason": "no_style_lexeme",
    }


@pytest.mark.parametrize(
    ("verdict", "reason", "with_composition"),
    [
        (Verdict.ACCEPTED, Reason.GRAMMAR, True),
        (Verdict.ACCEPTED, None, False),
        (Verdict.VALIDATION_REJECTED, None, False),
        (Verdict.VALIDATION_REJECTED, Reason.GRAMMAR, True),
        (Verdict.VALIDATION_REJECTED, Reason.NOT_UTF8, False),
        (Verdict.INVALID_RESPONSE, Reason.GRAMMAR, False),
    ],
)
def test_judgement_invariants(
    verdict: Verdict, reason: Reason | None, with_composition: bool
) -> None:
    composition = judge(STYLED, _STYLED_DOC).composition if with_composition else None
    with pytest.raises(ValueError):
        Judgement(verdict=verdict, reason=reason, composition=composition)


def test_judge_rejects_non_text_content_as_a_caller_bug() -> None:
    with pytest.raises(TypeError):
        judge(STYLED, None)  # type: ignore[arg-type]


# -- the reason for deep nesting must not depend on the caller's stack --


def _nested(depth: int) -> str:
    return _STYLED_DOC[:-1] + ',"x":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def _from_deep_stack(frames: int, content: str) -> Judgement:
    return judge(STYLED, content) if frames == 0 else _from_deep_stack(frames - 1, content)


@pytest.mark.parametrize("frames", [0, 300, 600])
def test_nesting_limit_is_fixed_not_the_callers_recursion_budget(frames: int) -> None:
    # Was: a document nested ~700 deep judged schema_mismatch from a shallow stack and
    # malformed_json from a deep one (RecursionError). Now a fixed limit decides.
    assert _from_deep_stack(frames, _nested(700)).reason is Reason.MALFORMED_JSON
    assert _from_deep_stack(frames, _nested(MAX_NESTING)).reason is Reason.SCHEMA_MISMATCH
    assert _from_deep_stack(frames, _nested(MAX_NESTING + 1)).reason is Reason.MALFORMED_JSON


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    deep_text = "[" * 70 + '\\"{' * 5  # 85 characters, 75 "nested" in the text
    assert judge(STYLED, doc(STYLED, deep_text)).reason is Reason.MALFORMED_TOKEN
    assert (
        judge(STYLED, _STYLED_DOC[:-1] + ',"x":"' + "{" * 200 + '"}').reason
        is Reason.SCHEMA_MISMATCH
    )
    # An unterminated string hides what follows it; the document is malformed anyway.
    assert judge(STYLED, '{"x":"' + "[" * 200).reason is Reason.MALFORMED_JSON


def test_nesting_limit_leaves_room_for_every_contract_document() -> None:
    from kexpr.spool.contract._strictjson import _nesting_exceeds

    assert MAX_NESTING >= 16
    assert not _nesting_exceeds(dumps(response(STYLED), indent=2), 5)
    assert _nesting_exceeds("[" * 6, 5) and not _nesting_exceeds("[[[]]]" * 50, 3)

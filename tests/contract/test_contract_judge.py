"""judge(): one table of (name, capsule, content, verdict, reason), design §6 parse order."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from contract_support import (
    DAILY,
    DUAL,
    ECHO_REASONS,
    KEY,
    OTHER_KEY,
    PHYSIQUE,
    WEEKLY,
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


_DAILY_DOC = doc(DAILY)
_NFD = unicodedata.normalize("NFD", "차분히")
_WORD = "그리고"  # the word of the daily answer (`contract_support.GOOD`)

ACCEPTED: list[Case] = [
    ("daily compact", DAILY, _DAILY_DOC, A, None),
    ("daily as bytes", DAILY, _DAILY_DOC.encode(), A, None),
    ("physique lexeme run", PHYSIQUE, doc(PHYSIQUE), A, None),
    ("weekly two slots", WEEKLY, doc(WEEKLY), A, None),
    ("dual three slots", DUAL, doc(DUAL), A, None),
    ("plain space after style", DAILY, doc(DAILY, "그리고 [[P:01]]."), A, None),
    (
        "comma after style",
        WEEKLY,
        doc(WEEKLY, "먼저, [[P:01]]. 그리고 [[P:02]].", "그리고 [[A:01]]."),
        A,
        None,
    ),
    ("pretty indent=2", WEEKLY, dumps(response(WEEKLY), indent=2), A, None),
    (
        "CRLF and tab whitespace",
        DAILY,
        dumps(response(DAILY), indent="\t").replace("\n", "\r\n") + "\r\n",
        A,
        None,
    ),
    ("leading and trailing whitespace", DAILY, " \n\t" + _DAILY_DOC + "\n", A, None),
    (
        "key order irrelevant",
        WEEKLY,
        json.dumps(
            {
                k: ([dict(reversed(list(s.items()))) for s in v] if k == "slots" else v)
                for k, v in reversed(list(response(WEEKLY).items()))
            },
            ensure_ascii=False,
        ),
        A,
        None,
    ),
    ("ASCII escapes for Hangul", DAILY, json.dumps(response(DAILY), ensure_ascii=True), A, None),
    ("exactly MAX_RESPONSE_BYTES", DAILY, _padded_to(_DAILY_DOC, MAX_RESPONSE_BYTES), A, None),
]

READER: list[Case] = [
    # 1. encoding
    ("invalid UTF-8 byte", DAILY, b"\xff" + _DAILY_DOC.encode(), INV, Reason.NOT_UTF8),
    ("overlong UTF-8", DAILY, b'{"a":"\xc0\xaf"}', INV, Reason.NOT_UTF8),
    ("CESU surrogate bytes", DAILY, b'{"a":"\xed\xa0\x80"}', INV, Reason.NOT_UTF8),
    ("truncated UTF-8", DAILY, _DAILY_DOC.encode()[:-3] + "차".encode()[:2], INV, Reason.NOT_UTF8),
    (
        "lone surrogate in str content",
        DAILY,
        doc(DAILY, "차분히, [[P:01]].\ud800"),
        INV,
        Reason.NOT_UTF8,
    ),
    # 2. size (before BOM, before JSON)
    ("one byte too large", DAILY, _padded_to(_DAILY_DOC, MAX_RESPONSE_BYTES + 1), INV, Reason.TOO_LARGE),
    ("too large beats BOM", DAILY, "\ufeff" + "x" * MAX_RESPONSE_BYTES, INV, Reason.TOO_LARGE),
    # 3. BOM
    ("BOM bytes", DAILY, b"\xef\xbb\xbf" + _DAILY_DOC.encode(), INV, Reason.BOM),
    ("BOM in str", DAILY, "\ufeff" + _DAILY_DOC, INV, Reason.BOM),
    # 4. json.loads with hooks
    (
        "duplicate top-level key",
        DAILY,
        _DAILY_DOC[:-1] + ',"surface":"daily.v1"}',
        INV,
        Reason.DUPLICATE_KEY,
    ),
    (
        "duplicate key spelled with an escape",
        DAILY,
        _DAILY_DOC[:-1] + ',"\\u0073urface":"daily.v1"}',
        INV,
        Reason.DUPLICATE_KEY,
    ),
    (
        "duplicate key inside a slot",
        DAILY,
        _DAILY_DOC.replace('"slot_id":', '"generated_ko":"x","slot_id":'),
        INV,
        Reason.DUPLICATE_KEY,
    ),
    ("duplicate key in a nested extra", DAILY, '{"x":{"y":{"k":1,"k":2}}}', INV, Reason.DUPLICATE_KEY),
    ("NaN", DAILY, '{"x": NaN}', INV, Reason.NON_FINITE_NUMBER),
    ("Infinity", DAILY, '{"x": Infinity}', INV, Reason.NON_FINITE_NUMBER),
    ("-Infinity", DAILY, '{"x": [-Infinity]}', INV, Reason.NON_FINITE_NUMBER),
    ("float overflow", DAILY, '{"x": 1e999}', INV, Reason.NON_FINITE_NUMBER),
    ("empty", DAILY, "", INV, Reason.MALFORMED_JSON),
    ("whitespace only", DAILY, " \n", INV, Reason.MALFORMED_JSON),
    ("trailing comma", DAILY, _DAILY_DOC[:-1] + ",}", INV, Reason.MALFORMED_JSON),
    ("two objects", DAILY, _DAILY_DOC + _DAILY_DOC, INV, Reason.MALFORMED_JSON),
    ("single quotes", DAILY, "{'surface': 'daily.v1'}", INV, Reason.MALFORMED_JSON),
    ("raw tab inside a string", DAILY, _DAILY_DOC.replace(_WORD + " ", _WORD + "\t"), INV, Reason.MALFORMED_JSON),
    ("raw LF inside a string", DAILY, _DAILY_DOC.replace(_WORD + " ", _WORD + "\n"), INV, Reason.MALFORMED_JSON),
    ("markdown fence", DAILY, "```json\n" + _DAILY_DOC + "\n```", INV, Reason.MALFORMED_JSON),
    ("form feed is not JSON whitespace", DAILY, "\f" + _DAILY_DOC, INV, Reason.MALFORMED_JSON),
    ("NBSP is not JSON whitespace", DAILY, "\u00a0" + _DAILY_DOC, INV, Reason.MALFORMED_JSON),
    ("nesting beyond the recursion limit", DAILY, "[" * 16000, INV, Reason.MALFORMED_JSON),
    # 5. top level
    ("array", DAILY, "[" + _DAILY_DOC + "]", INV, Reason.NOT_OBJECT),
    ("string", DAILY, '"차분히, [[P:01]]."', INV, Reason.NOT_OBJECT),
    ("number", DAILY, "1", INV, Reason.NOT_OBJECT),
    ("null", DAILY, "null", INV, Reason.NOT_OBJECT),
    # 6. NFC, on decoded strings, keys included
    ("NFD generated_ko", DAILY, doc(DAILY, _NFD + ", [[P:01]]."), INV, Reason.NOT_NFC),
    (
        "NFD spelled with escapes",
        DAILY,
        _DAILY_DOC.replace(_WORD, "\\u1100\\u1173\\u1105\\u1175\\u1100\\u1169"),
        INV,
        Reason.NOT_NFC,
    ),
    ("NFD in a key", DAILY, dumps({_NFD: 1}), INV, Reason.NOT_NFC),
    ("Angstrom sign is not NFC", DAILY, dumps({"x": "\u212b"}), INV, Reason.NOT_NFC),
    # 7. forbidden characters, on decoded strings, keys included
    ("escaped BEL", DAILY, _DAILY_DOC.replace(_WORD + " ", _WORD + "\\u0007 "), INV, Reason.FORBIDDEN_CHARACTER),
    ("escaped LF", DAILY, _DAILY_DOC.replace(_WORD + " ", _WORD + "\\n"), INV, Reason.FORBIDDEN_CHARACTER),
    ("escaped tab", DAILY, _DAILY_DOC.replace(_WORD + " ", _WORD + "\\t"), INV, Reason.FORBIDDEN_CHARACTER),
    ("raw DEL", DAILY, doc(DAILY, "차분히,\x7f [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("ZWJ", DAILY, doc(DAILY, "차분\u200d히, [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("ZWNJ", DAILY, doc(DAILY, "차분\u200c히, [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("ZWSP", DAILY, doc(DAILY, "차분히,\u200b [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("word joiner", DAILY, doc(DAILY, "차분히,\u2060 [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("inner BOM", DAILY, doc(DAILY, "차분히,\ufeff [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("bidi override", DAILY, doc(DAILY, "\u202e차분히, [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("soft hyphen", DAILY, doc(DAILY, "차분\u00ad히, [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("line separator", DAILY, doc(DAILY, "차분히,\u2028[[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("paragraph separator", DAILY, doc(DAILY, "차분히,\u2029[[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("Hangul filler U+3164", DAILY, doc(DAILY, "차분히,\u3164[[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("Hangul filler U+115F", DAILY, doc(DAILY, "\u115f차분히, [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("Hangul filler U+1160", DAILY, doc(DAILY, "\u1160차분히, [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("halfwidth filler U+FFA0", DAILY, doc(DAILY, "차분히,\uffa0[[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("escaped lone surrogate", DAILY, _DAILY_DOC.replace(_WORD, "\\ud800"), INV, Reason.FORBIDDEN_CHARACTER),
    ("private use", DAILY, doc(DAILY, "차분히,\ue000 [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("noncharacter", DAILY, doc(DAILY, "차분히,\ufdd0 [[P:01]]."), INV, Reason.FORBIDDEN_CHARACTER),
    ("control in a key", DAILY, dumps({"a\u0000": 1}), INV, Reason.FORBIDDEN_CHARACTER),
    ("control in slot_id", DAILY, mutated(DAILY, _set(("slots", 0, "slot_id"), "daily.status\u0000")), INV, Reason.FORBIDDEN_CHARACTER),
    # 8. strict typing: exact key sets, no coercion
    ("empty object", DAILY, "{}", INV, Reason.SCHEMA_MISMATCH),
    ("missing top-level key", DAILY, mutated(DAILY, _delete(("artifact_key",))), INV, Reason.SCHEMA_MISMATCH),
    ("extra top-level key", DAILY, mutated(DAILY, _set(("variant_id",), "a")), INV, Reason.SCHEMA_MISMATCH),
    ("missing slot key", DAILY, mutated(DAILY, _delete(("slots", 0, "action_ids"))), INV, Reason.SCHEMA_MISMATCH),
    ("extra slot key", DAILY, mutated(DAILY, _set(("slots", 0, "body"), "x")), INV, Reason.SCHEMA_MISMATCH),
    ("bool for a list", DAILY, mutated(DAILY, _set(("slots", 0, "action_ids"), False)), INV, Reason.SCHEMA_MISMATCH),
    ("null for a list", DAILY, mutated(DAILY, _set(("slots", 0, "action_ids"), None)), INV, Reason.SCHEMA_MISMATCH),
    ("string for a list", DAILY, mutated(DAILY, _set(("slots", 0, "placeholder_tokens"), "[[P:01]]")), INV, Reason.SCHEMA_MISMATCH),
    ("number for a string", DAILY, mutated(DAILY, _set(("slots", 0, "generated_ko"), 1)), INV, Reason.SCHEMA_MISMATCH),
    ("null for a string", DAILY, mutated(DAILY, _set(("slots", 0, "generated_ko"), None)), INV, Reason.SCHEMA_MISMATCH),
    ("list for a string", DAILY, mutated(DAILY, _set(("slots", 0, "generated_ko"), ["차분히, [[P:01]]."])), INV, Reason.SCHEMA_MISMATCH),
    ("bool for a string", DAILY, mutated(DAILY, _set(("schema_version",), True)), INV, Reason.SCHEMA_MISMATCH),
    ("number inside an ID list", DAILY, mutated(DAILY, _set(("slots", 0, "predicate_ids"), [1])), INV, Reason.SCHEMA_MISMATCH),
    ("nested list inside an ID list", DAILY, mutated(DAILY, _set(("slots", 0, "predicate_ids"), [["P_DAILY_COMPLETE"]])), INV, Reason.SCHEMA_MISMATCH),
    ("object for slots", DAILY, mutated(DAILY, _set(("slots",), {})), INV, Reason.SCHEMA_MISMATCH),
    ("slot as a list", DAILY, mutated(DAILY, _set(("slots", 0), ["daily.status"])), INV, Reason.SCHEMA_MISMATCH),
    ("huge integer literal", DAILY, mutated(DAILY, _set(("slots", 0, "generated_ko"), 0)).replace('"generated_ko": 0', '"generated_ko": ' + "9" * 5000), INV, Reason.SCHEMA_MISMATCH),
]  # fmt: skip


def _reorder_slots(d: dict[str, Any]) -> None:
    d["slots"].reverse()


ECHO: list[Case] = [
    ("old schema version", DAILY, mutated(DAILY, _set(("schema_version",), "korean-expression-v3")), REJ, Reason.SCHEMA_VERSION_MISMATCH),
    ("surface of another capsule", DAILY, mutated(DAILY, _set(("surface",), "weekly.v1")), REJ, Reason.SURFACE_MISMATCH),
    ("wrong artifact key", DAILY, mutated(DAILY, _set(("artifact_key",), OTHER_KEY)), REJ, Reason.ARTIFACT_KEY_MISMATCH),
    ("upper-case artifact key", DAILY, mutated(DAILY, _set(("artifact_key",), KEY.upper())), REJ, Reason.ARTIFACT_KEY_MISMATCH),
    ("reordered slots", WEEKLY, mutated(WEEKLY, _reorder_slots), REJ, Reason.SLOT_MISMATCH),
    ("missing slot", WEEKLY, mutated(WEEKLY, _delete(("slots", 1))), REJ, Reason.SLOT_MISMATCH),
    ("no slots", DAILY, mutated(DAILY, _set(("slots",), [])), REJ, Reason.SLOT_MISMATCH),
    ("extra slot", DAILY, mutated(DAILY, lambda d: d["slots"].append(d["slots"][0])), REJ, Reason.SLOT_MISMATCH),
    ("wrong slot id", DUAL, mutated(DUAL, _set(("slots", 2, "slot_id"), "adaptive.dual.review.5")), REJ, Reason.SLOT_MISMATCH),
    ("predicate of another branch", DAILY, mutated(DAILY, _set(("slots", 0, "predicate_ids"), ["P_DAILY_PARTIAL"])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("reordered predicates", WEEKLY, mutated(WEEKLY, _set(("slots", 0, "predicate_ids"), ["P_WEEKLY_KEEP_BASIS", "P_WEEKLY_IN_GOAL"])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("missing predicate", WEEKLY, mutated(WEEKLY, _set(("slots", 0, "predicate_ids"), ["P_WEEKLY_IN_GOAL"])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("extra predicate", DAILY, mutated(DAILY, _set(("slots", 0, "predicate_ids"), ["P_DAILY_COMPLETE", "P_DAILY_COMPLETE"])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("predicate in a later slot", WEEKLY, mutated(WEEKLY, _set(("slots", 1, "predicate_ids"), ["P_WEEKLY_RECORDS_INSUFFICIENT"])), REJ, Reason.PREDICATE_IDS_MISMATCH),
    ("missing action", WEEKLY, mutated(WEEKLY, _set(("slots", 1, "action_ids"), [])), REJ, Reason.ACTION_IDS_MISMATCH),
    ("added action", DAILY, mutated(DAILY, _set(("slots", 0, "action_ids"), ["A_OPERATOR_REVIEW_DECISION"])), REJ, Reason.ACTION_IDS_MISMATCH),
    ("reordered tokens", WEEKLY, mutated(WEEKLY, _set(("slots", 0, "placeholder_tokens"), ["[[P:02]]", "[[P:01]]"])), REJ, Reason.PLACEHOLDER_TOKENS_MISMATCH),
    ("malformed echoed token", DAILY, mutated(DAILY, _set(("slots", 0, "placeholder_tokens"), ["[[P:1]]"])), REJ, Reason.PLACEHOLDER_TOKENS_MISMATCH),
    ("missing echoed token", DAILY, mutated(DAILY, _set(("slots", 0, "placeholder_tokens"), [])), REJ, Reason.PLACEHOLDER_TOKENS_MISMATCH),
    (
        "echo checked for all slots before any prose",
        WEEKLY,
        dumps(
            response(WEEKLY, "오늘은 [[P:01]]. [[P:02]].", "우선 [[A:01]].")
            | {"artifact_key": OTHER_KEY}
        ),
        REJ,
        Reason.ARTIFACT_KEY_MISMATCH,
    ),
]  # fmt: skip

# generated_ko rules through judge (the full table is test_contract_grammar.py).
STYLE: list[Case] = [
    ("plan's daily example", DAILY, doc(DAILY, "오늘은 차분히, [[P:01]]."), REJ, Reason.UNKNOWN_WORD),
    ("number word", PHYSIQUE, doc(PHYSIQUE, "하나, [[A:01]]."), REJ, Reason.NUMBER_WORD),
    ("evidential claim", PHYSIQUE, doc(PHYSIQUE, "확인 결과, [[A:01]]."), REJ, Reason.EVIDENTIAL_CLAIM),
    ("canonical-only selector", DAILY, doc(DAILY, "[[P:01]]."), REJ, Reason.NO_STYLE_LEXEME),
    ("too long", DAILY, doc(DAILY, "차분히 " * 30 + "[[P:01]]."), REJ, Reason.TOO_LONG),
    ("NBSP", DAILY, doc(DAILY, "차분히\u00a0[[P:01]]."), REJ, Reason.DISALLOWED_WHITESPACE),
    ("ideographic space", DAILY, doc(DAILY, "차분히\u3000[[P:01]]."), REJ, Reason.DISALLOWED_WHITESPACE),
    ("malformed token", DAILY, doc(DAILY, "차분히, [[P:1]]."), REJ, Reason.MALFORMED_TOKEN),
    ("bracket", DAILY, doc(DAILY, "차분히 ([[P:01]])."), REJ, Reason.BRACKET),
    ("quote", DAILY, doc(DAILY, '"차분히" [[P:01]].'), REJ, Reason.QUOTE),
    ("url", DAILY, doc(DAILY, "https://t.me 차분히 [[P:01]]."), REJ, Reason.URL),
    ("semantic ID in prose", DAILY, doc(DAILY, "P_DAILY_COMPLETE 차분히 [[P:01]]."), REJ, Reason.LATIN),
    ("digit", DAILY, doc(DAILY, "차분히 3 [[P:01]]."), REJ, Reason.DIGIT),
    ("heading", DAILY, doc(DAILY, "# 차분히 [[P:01]]."), REJ, Reason.LAYOUT_SYNTAX),
    ("percent", DAILY, doc(DAILY, "차분히 % [[P:01]]."), REJ, Reason.ARITHMETIC_SYMBOL),
    ("unit word", DAILY, doc(DAILY, "차분히 주 [[P:01]]."), REJ, Reason.UNIT_OR_DATE),
    ("emoji", DAILY, doc(DAILY, "차분히 😀 [[P:01]]."), REJ, Reason.EMOJI),
    ("vocabulary", DAILY, doc(DAILY, "잘 [[P:01]]."), REJ, Reason.FORBIDDEN_VOCABULARY),
    ("negation", DAILY, doc(DAILY, "반드시 [[P:01]]."), REJ, Reason.NEGATION_OR_MODALITY),
    ("exclamation", DAILY, doc(DAILY, "차분히! [[P:01]]."), REJ, Reason.DISALLOWED_CHARACTER),
    ("token of another slot", WEEKLY, doc(WEEKLY, "먼저, [[P:01]]. 이어서, [[P:02]].", "그리고 [[P:01]]."), REJ, Reason.TOKEN_UNISSUED),
    ("token twice", DAILY, doc(DAILY, "차분히 [[P:01]]. 또 [[P:01]]."), REJ, Reason.TOKEN_DUPLICATE),
    ("tokens reordered", WEEKLY, doc(WEEKLY, "차분히 [[P:02]]. 또 [[P:01]].", "우선 [[A:01]]."), REJ, Reason.TOKEN_ORDER),
    ("token missing", WEEKLY, doc(WEEKLY, "차분히 [[P:01]].", "우선 [[A:01]]."), REJ, Reason.TOKEN_MISSING),
    ("missing final period", DAILY, doc(DAILY, "차분히, [[P:01]]"), REJ, Reason.GRAMMAR),
    ("too many lexemes", DAILY, doc(DAILY, "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩, [[P:01]]."), REJ, Reason.TOO_MANY_LEXEMES),
    ("one bad slot rejects the document", WEEKLY, doc(WEEKLY, "먼저, [[P:01]]. 이어서, [[P:02]].", "[[A:01]]."), REJ, Reason.NO_STYLE_LEXEME),
    ("later slot's prose", DUAL, doc(DUAL, "그리고 [[P:01]].", "그리고 [[P:01]].", "오늘 [[P:01]]."), REJ, Reason.UNIT_OR_DATE),
    # the fit table (design §6.1), after the grammar, slot by slot
    ("a word outside its cell", DAILY, doc(DAILY, "차분히, [[P:01]]."), REJ, Reason.STYLE_MISFIT),
    ("a word of the cell with the wrong join", DAILY, doc(DAILY, "그리고, [[P:01]]."), REJ, Reason.STYLE_MISFIT),
    ("two words before one sentence", DAILY, doc(DAILY, "그리고 먼저 [[P:01]]."), REJ, Reason.STACKED_STYLE),
    ("a misfit in a later slot", DUAL, doc(DUAL, "그리고 [[P:01]].", "그리고 [[P:01]].", "먼저, [[P:01]]."), REJ, Reason.STYLE_MISFIT),
    ("the first bad slot decides", WEEKLY, doc(WEEKLY, "차분히, [[P:01]]. 이어서, [[P:02]].", "[[A:01]]."), REJ, Reason.STYLE_MISFIT),
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
    judgement = judge(WEEKLY, dumps(response(WEEKLY), indent=2))
    assert judgement.composition is not None
    assert json.loads(judgement.composition.to_json()) == response(WEEKLY)
    # Canonical JSON: sorted keys, no spaces, UTF-8 — and it is itself accepted
    # (this is how the shim re-validates a composition it receives).
    text = judgement.composition.to_json()
    assert text == json.dumps(
        response(WEEKLY), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    again = judge(WEEKLY, text)
    assert again.verdict is Verdict.ACCEPTED and again.composition == judgement.composition


def test_composition_is_frozen_with_tuples() -> None:
    composition = judge(DAILY, _DAILY_DOC).composition
    assert isinstance(composition, Composition)
    assert composition.slots[0].placeholder_tokens == ("[[P:01]]",)
    with pytest.raises(ValueError):
        composition.surface = "weekly.v1"


def test_judgement_to_dict() -> None:
    assert judge(DAILY, _DAILY_DOC).to_dict() == {"verdict": "accepted", "reason": None}
    assert judge(DAILY, b"\xff").to_dict() == {"verdict": "invalid_response", "reason": "not_utf8"}
    assert judge(DAILY, doc(DAILY, "[[P:01]].")).to_dict() == {
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
    composition = judge(DAILY, _DAILY_DOC).composition if with_composition else None
    with pytest.raises(ValueError):
        Judgement(verdict=verdict, reason=reason, composition=composition)


def test_judge_rejects_non_text_content_as_a_caller_bug() -> None:
    with pytest.raises(TypeError):
        judge(DAILY, None)  # type: ignore[arg-type]


# -- the reason for deep nesting must not depend on the caller's stack --


def _nested(depth: int) -> str:
    return _DAILY_DOC[:-1] + ',"x":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def _from_deep_stack(frames: int, content: str) -> Judgement:
    return judge(DAILY, content) if frames == 0 else _from_deep_stack(frames - 1, content)


@pytest.mark.parametrize("frames", [0, 300, 600])
def test_nesting_limit_is_fixed_not_the_callers_recursion_budget(frames: int) -> None:
    # Was: a document nested ~700 deep judged schema_mismatch from a shallow stack and
    # malformed_json from a deep one (RecursionError). Now a fixed limit decides.
    assert _from_deep_stack(frames, _nested(700)).reason is Reason.MALFORMED_JSON
    assert _from_deep_stack(frames, _nested(MAX_NESTING)).reason is Reason.SCHEMA_MISMATCH
    assert _from_deep_stack(frames, _nested(MAX_NESTING + 1)).reason is Reason.MALFORMED_JSON


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    deep_text = "[" * 70 + '\\"{' * 5  # 85 characters, 75 "nested" in the text
    assert judge(DAILY, doc(DAILY, deep_text)).reason is Reason.MALFORMED_TOKEN
    assert (
        judge(DAILY, _DAILY_DOC[:-1] + ',"x":"' + "{" * 200 + '"}').reason is Reason.SCHEMA_MISMATCH
    )
    # An unterminated string hides what follows it; the document is malformed anyway.
    assert judge(DAILY, '{"x":"' + "[" * 200).reason is Reason.MALFORMED_JSON


def test_nesting_limit_leaves_room_for_every_contract_document() -> None:
    from kexpr.spool.contract._strictjson import _nesting_exceeds

    assert MAX_NESTING >= 16
    assert not _nesting_exceeds(dumps(response(DUAL), indent=2), 5)
    assert _nesting_exceeds("[" * 6, 5) and not _nesting_exceeds("[[[]]]" * 50, 3)

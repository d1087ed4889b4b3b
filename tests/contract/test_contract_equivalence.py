"""The contract's fast paths decide exactly what the mechanism they skip decides.

`judge` must stay within its time budget without changing a verdict or a reason, so
each shortcut is held here against the slower mechanism it stands in for:

- `_grammar` Rule 5: `_accepted_lexemes` (one pattern) accepts exactly the texts the
  full tokenizer, findings and parser accept, with the same lexeme count, and
  `check_grammar` returns the full check's reason for every text (`check_generated`
  the same, then the fit table's verdict on what the grammar accepts).
- `_grammar._findings` yields what the code before the fast paths yielded (the
  reference below is that code): the same reasons and spans, in the same order.
- `_strictjson.read_object` returns the same document, or raises the same reason, as
  the reference reader below (the code before the fast paths: a fresh `json.loads`, a
  key-by-key duplicate test, per-string checks).
- the `str.isprintable()` shortcuts (`_strictjson` step 8 and the surfaces' line and
  control checks) rest on one property of the Unicode database, checked for every
  code point.
- `_strictjson._nesting_exceeds`: its bracket-count shortcut against the full count.
- `slot_policy` (`_models` Rule 6): the shared policy equals a freshly validated one,
  and the cache never holds more than the manifest's (slot id, branch) pairs.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import unicodedata
from typing import Any

import pytest
from adversarial.hypothesis_profiles import PROPERTY
from adversarial.strategies import composition_of, json_document, mutation, mutation_of, random_char
from contract_support import KEY, STYLED, all_policies
from hypothesis import given
from hypothesis import strategies as st

from kexpr.spool.contract import (
    MANIFEST,
    SAFE_STYLE_LEXEMES,
    Capsule,
    CapsuleError,
    Reason,
    SlotPolicy,
    check_generated,
    check_grammar,
    slot_policy,
)
from kexpr.spool.contract._grammar import (
    _CLEAN_LEXEMES,
    _LAYOUT_LEAD,
    _PIECES,
    _SEPARATORS,
    _URL_RE,
    DEFAULT_RULES,
    _accepted_lexemes,
    _findings,
    _StyleError,
    _Tokenizer,
    _validate_in_full,
    char_class,
)
from kexpr.spool.contract._models import _SLOT_POLICIES
from kexpr.spool.contract._strictjson import (
    HANGUL_FILLERS,
    MAX_NESTING,
    MAX_RESPONSE_BYTES,
    StrictJsonError,
    _nesting_exceeds,
    _parse_float,
    _parse_int,
    _reject_constant,
    read_object,
)
from kexpr.spool.contract.answers import answer_document
from kexpr.spool.contract.fit import style_reason
from kexpr.spool.contract.lexicon import (
    EVIDENTIAL_CLAIMS,
    FORBIDDEN_VOCABULARY,
    NEGATION_MODALITY_SUBSTRINGS,
    NEGATION_MODALITY_WORDS,
    NUMBER_WORDS,
    UNIT_DATE_SUFFIXES,
    UNIT_DATE_WORDS,
)

POLICIES = all_policies()

# -- generated_ko: the fast path against the full check ----------------------------------

_TOKENS = ("[[P:01]]", "[[P:02]]", "[[A:01]]", "[[A:02]]", "[[P:1]]", "[[p:01]]")
_SEPARATOR_RUNS = (" ", ",", ".", ", ", ". ", "  ")
# Words near the grammar that the fast path must leave to the full check.
_HARD_WORDS = (
    "오늘은", "확인", "결과", "확인결과", "기록상", "분석", "잘", "않", "안", "일", "하나",
    "주일", "www", "com", "kg", "http:", "://", "1", "#", "-", "*", "x", "ㄱ", "\u3164",
    "\t", "\u200b", "[[", "]]", "「", "🙂", "또또", "차분히요",
)  # fmt: skip


def _near_grammar(rng: random.Random, policy: SlotPolicy) -> str:
    """A text of the grammar (perhaps mutated), or a random run of grammar-like pieces."""
    if rng.random() < 0.45:
        text = composition_of(rng, policy, over_limit=rng.random() < 0.15)
        for _ in range(rng.choice((0, 0, 1, 2))):
            text = mutation_of(rng, text, (), anywhere=True).apply(text)
        return text
    tokens = (*_TOKENS, *policy.required_placeholder_tokens * 3)
    pieces: list[str] = []
    for _ in range(rng.randint(0, 16)):
        roll = rng.random()
        if roll < 0.45:
            pieces.append(rng.choice(SAFE_STYLE_LEXEMES))
        elif roll < 0.62:
            pieces.append(rng.choice(tokens))
        elif roll < 0.87:
            pieces.append(rng.choice(_SEPARATOR_RUNS))
        elif roll < 0.96:
            pieces.append(rng.choice(_HARD_WORDS))
        else:
            pieces.append(random_char(rng))
    return "".join(pieces)


def _full_check(policy: SlotPolicy, text: str) -> tuple[Reason | None, int | None]:
    """(reason, lexeme count) from the full check alone, never the fast path."""
    if len(text) > policy.max_generated_chars:
        return Reason.TOO_LONG, None
    try:
        return None, _validate_in_full(policy, text)
    except _StyleError as e:
        return e.reason, None


def _reference_findings(source: str) -> list[tuple[Reason, tuple[int, int]]]:
    """`_grammar._findings` as it was before its fast paths (a per-word loop over every
    word, `any(v in text ...)` substring tests, the evidential loop for every segment)."""
    pieces = [(m.group(), m.start()) for m in _PIECES.finditer(source)]
    token = DEFAULT_RULES["TOKEN"]
    lexeme = DEFAULT_RULES["LEXEME"]
    out: list[tuple[Reason, tuple[int, int]]] = []
    lead = len(source) - len(source.lstrip(" "))
    for text, start in pieces:
        if text in _SEPARATORS or token.fullmatch(text) is not None:
            continue
        end = start + len(text)
        for offset, ch in enumerate(text):
            index = start + offset
            reason = char_class(ch)
            if index == lead and ch in _LAYOUT_LEAD:
                reason = Reason.LAYOUT_SYNTAX
            if reason is not None:
                out.append((reason, (index, index + 1)))
        if text in NUMBER_WORDS:
            out.append((Reason.NUMBER_WORD, (start, end)))
        if text in UNIT_DATE_WORDS or text.endswith(UNIT_DATE_SUFFIXES):
            out.append((Reason.UNIT_OR_DATE, (start, end)))
        if any(v in text for v in FORBIDDEN_VOCABULARY):
            out.append((Reason.FORBIDDEN_VOCABULARY, (start, end)))
        if text in NEGATION_MODALITY_WORDS or any(n in text for n in NEGATION_MODALITY_SUBSTRINGS):
            out.append((Reason.NEGATION_OR_MODALITY, (start, end)))
        if lexeme.fullmatch(text) is None:
            out.append((Reason.UNKNOWN_WORD, (start, end)))
    segments: list[list[tuple[str, int]]] = [[]]
    for text, start in pieces:
        if token.fullmatch(text) is not None:
            segments.append([])
        else:
            segments[-1].append((text, start))
    for segment in segments:
        if not segment:
            continue
        start = segment[0][1]
        text = "".join(t for t, _ in segment)
        for m in _URL_RE.finditer(text):
            out.append((Reason.URL, (start + m.start(), start + m.end())))
        positions = [s + i for t, s in segment if t not in _SEPARATORS for i in range(len(t))]
        joined = "".join(t for t, _ in segment if t not in _SEPARATORS)
        for claim in EVIDENTIAL_CLAIMS:
            at = joined.find(claim)
            if at >= 0:
                span = (positions[at], positions[at + len(claim) - 1] + 1)
                out.append((Reason.EVIDENTIAL_CLAIM, span))
    return out


def _assert_equivalent(policy: SlotPolicy, text: str) -> bool:
    """Every claim for one text; returns whether the full check accepts it."""
    reason, lexemes = _full_check(policy, text)
    assert check_grammar(policy, text) is reason
    # The contract's verdict: the grammar's, then the fit table's on what it accepts.
    table = style_reason(policy.slot_id, policy.semantic_ids, text) if reason is None else None
    assert check_generated(policy, text) is (reason if reason is not None else table)
    if reason is not Reason.TOO_LONG:
        assert _accepted_lexemes(policy, text) == lexemes
    tokenizer = _Tokenizer(text, rules=DEFAULT_RULES)
    assert tokenizer.pieces == tuple((m.group(), m.start()) for m in _PIECES.finditer(text))
    assert list(_findings(tokenizer)) == _reference_findings(text)
    return reason is None


@PROPERTY
@given(st.sampled_from(POLICIES), st.integers(0, 2**64 - 1))
def test_fast_acceptance_is_the_full_check(policy: SlotPolicy, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(10):
        _assert_equivalent(policy, _near_grammar(rng, policy))


def test_the_comparison_sees_both_outcomes() -> None:
    # Not vacuous: the generator yields accepted texts and rejected ones of every
    # class the fast path must decline, for every policy.
    rng = random.Random(20240607)
    accepted = rejected = 0
    reasons: set[Reason] = set()
    for policy in POLICIES:
        for _ in range(60):
            text = _near_grammar(rng, policy)
            if _assert_equivalent(policy, text):
                accepted += 1
            else:
                rejected += 1
                reasons.add(_full_check(policy, text)[0])  # type: ignore[arg-type]
    assert accepted > 300 and rejected > 300
    assert {
        Reason.UNKNOWN_WORD,
        Reason.GRAMMAR,
        Reason.TOKEN_MISSING,
        Reason.EVIDENTIAL_CLAIM,
        Reason.URL,
        Reason.TOO_MANY_LEXEMES,
    } <= reasons


def test_every_lexeme_takes_the_fast_path() -> None:
    # Lexicon Rule 2 makes every lexeme clean, so every grammar text is a fast accept.
    assert frozenset(SAFE_STYLE_LEXEMES) == _CLEAN_LEXEMES
    for lexeme in SAFE_STYLE_LEXEMES:
        assert _accepted_lexemes(POLICIES[0], f"{lexeme} {lexeme}, [[P:01]].") == 2


# -- the strict reader against the reader before its fast paths -------------------------


def _reference_nesting(text: str, limit: int) -> bool:
    depth = 0
    strings = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)', re.DOTALL)
    for bracket in re.findall(r"[\[\]{}]", strings.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _reference_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj: dict[str, object] = {}
    for key, value in pairs:
        if key in obj:
            raise StrictJsonError(Reason.DUPLICATE_KEY)
        obj[key] = value
    return obj


def _reference_strings(root: object) -> list[str]:
    out: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                out.append(key)
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _reference_forbidden(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] == "C" or category in ("Zl", "Zp") or ch in HANGUL_FILLERS


def _reference_read(content: str | bytes) -> dict[str, object]:
    if isinstance(content, str):
        try:
            raw = content.encode("utf-8", "strict")
        except UnicodeEncodeError:
            raise StrictJsonError(Reason.NOT_UTF8) from None
        text = content
    else:
        raw = bytes(content)
        try:
            text = raw.decode("utf-8", "strict")
        except UnicodeDecodeError:
            raise StrictJsonError(Reason.NOT_UTF8) from None
    if len(raw) > MAX_RESPONSE_BYTES:
        raise StrictJsonError(Reason.TOO_LARGE)
    if raw.startswith(b"\xef\xbb\xbf"):
        raise StrictJsonError(Reason.BOM)
    if _reference_nesting(text, MAX_NESTING):
        raise StrictJsonError(Reason.MALFORMED_JSON)
    try:
        document = json.loads(
            text,
            object_pairs_hook=_reference_pairs,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except StrictJsonError:
        raise
    except (ValueError, RecursionError):
        raise StrictJsonError(Reason.MALFORMED_JSON) from None
    if not isinstance(document, dict):
        raise StrictJsonError(Reason.NOT_OBJECT)
    strings = _reference_strings(document)
    if not all(unicodedata.is_normalized("NFC", s) for s in strings):
        raise StrictJsonError(Reason.NOT_NFC)
    for s in strings:
        if any(_reference_forbidden(ch) for ch in s):
            raise StrictJsonError(Reason.FORBIDDEN_CHARACTER)
    return document


def _outcome(read: Any, content: str | bytes) -> object:
    try:
        return read(content)
    except StrictJsonError as e:
        return e.reason


# The reader reads documents of any shape: the styled capsule's (one slot), and, as
# mappings the answer builder echoes, shapes with more slots that a capsule can no
# longer carry (their slots are locked, design §6.1) but a model may still write.
_SHAPES: tuple[Capsule | dict[str, Any], ...] = (
    STYLED,
    {
        "schema_version": STYLED.schema_version,
        "surface": "weekly.v1",
        "artifact_key": KEY,
        "slots": (
            slot_policy("weekly.interpretation", ["P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"]),
            slot_policy("weekly.rationale", ["A_WEEKLY_KEEP_BASELINE"]),
        ),
    },
    {
        "schema_version": STYLED.schema_version,
        "surface": "adaptive.dualcoachtest.card.v1",
        "artifact_key": KEY,
        "slots": tuple(
            slot_policy(f"adaptive.dual.review.{n}", [reason])
            for n, reason in (
                (2, "P_DUAL_REASON_EDIT"),
                (3, "P_DUAL_REASON_LATEST"),
                (4, "P_DUAL_REASON_EDIT"),
            )
        ),
    },
)


def _slots_of(shape: Capsule | dict[str, Any]) -> tuple[SlotPolicy, ...]:
    return shape.slots if isinstance(shape, Capsule) else shape["slots"]


def _response(shape: Capsule | dict[str, Any], texts: list[str]) -> dict[str, Any]:
    ids = [p.slot_id for p in _slots_of(shape)]
    return answer_document(shape, dict(zip(ids, texts, strict=True)))


@st.composite
def _documents(draw: st.DrawFn) -> str | bytes:
    shape = draw(st.sampled_from(_SHAPES))
    rng = random.Random(draw(st.integers(0, 2**64 - 1)))
    texts = [composition_of(rng, p) for p in _slots_of(shape)]
    generated = [
        st.builds(lambda m, t=t: m.apply(t), mutation(t, (), anywhere=True)) for t in texts
    ]
    return draw(json_document(_response(shape, texts), generated))


# Characters at the edges of steps 7 and 8: Hangul fillers, not-NFC sequences and
# singletons, C* (Cc Cf Cs Co Cn), Zs / Zl / Zp, and harmless neighbours.
_EDGE_CHARS = (
    "\u115f", "\u1160", "\u3164", "\uffa0", "\u1100\u1161", "e\u0301", "\u0301", "\u212b",
    "\uf900", "\uac00\u11a8", "\u00a0", "\u3000", "\u2028", "\u2029", "\u200b", "\u200d",
    "\u00ad", "\ue000", "\U000e0001", "\u0378", "\ufdd0", "\x7f", "\x85", "\x1f", "\ud800",
    "\u3131", "\u1100", "가", "é", " ", "~",
)  # fmt: skip


def _with_edges(rng: random.Random, value: Any, rate: float) -> Any:
    """`value` with edge characters spliced into some of its strings, keys included."""
    if isinstance(value, str):
        if rng.random() < rate:
            at = rng.randint(0, len(value))
            return value[:at] + rng.choice(_EDGE_CHARS) + value[at:]
        return value
    if isinstance(value, dict):
        return {_with_edges(rng, k, rate): _with_edges(rng, v, rate) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_edges(rng, v, rate) for v in value]
    return value


@st.composite
def _edged_documents(draw: st.DrawFn) -> str | bytes:
    shape = draw(st.sampled_from(_SHAPES))
    rng = random.Random(draw(st.integers(0, 2**64 - 1)))
    valid = _response(shape, [composition_of(rng, p) for p in _slots_of(shape)])
    # Mostly one edge character in the whole document, so that each one decides.
    document = _with_edges(rng, valid, rng.choice((0.04, 0.04, 0.1, 0.3)))
    text = json.dumps(document, ensure_ascii=rng.random() < 0.3)
    return text.encode("utf-8", "surrogatepass") if rng.random() < 0.3 else text


@PROPERTY
@given(st.one_of(_documents(), _edged_documents()))
def test_read_object_is_the_reference_reader(content: str | bytes) -> None:
    assert _outcome(read_object, content) == _outcome(_reference_read, content)


@PROPERTY
@given(
    st.lists(
        st.one_of(
            st.sampled_from(('"x"', '"\\\\"', '"\\"', "[", "]", "{", "}", ",", ":", "1", " ")),
            st.text(max_size=3),
        ),
        max_size=40,
    ).map("".join)
)
def test_read_object_agrees_on_arbitrary_text(text: str) -> None:
    assert _outcome(read_object, text) == _outcome(_reference_read, text)
    encoded = text.encode("utf-8", "surrogatepass")
    assert _outcome(read_object, encoded) == _outcome(_reference_read, encoded)


@PROPERTY
@given(st.text(alphabet='[]{}"\\ax', max_size=120), st.integers(0, 12))
def test_nesting_shortcut_is_the_full_count(text: str, limit: int) -> None:
    assert _nesting_exceeds(text, limit) is _reference_nesting(text, limit)


def test_printable_text_has_no_character_of_a_forbidden_category() -> None:
    # The str.isprintable() shortcuts need: a printable character is never of category
    # C* (Cc Cf Cs Co Cn) nor Z* (Zs Zl Zp) other than the ASCII space. Python documents
    # it; this checks it for every code point against the unicodedata the slow paths use.
    wrong = [
        code
        for code in range(0x110000)
        if chr(code).isprintable() and unicodedata.category(chr(code))[0] in "CZ" and code != 0x20
    ]
    assert wrong == []


# -- slot policies are shared, never unbounded ---------------------------------------------


def test_shared_policies_equal_fresh_ones_and_stay_within_the_manifest() -> None:
    pairs = 0
    for row in MANIFEST.values():
        for slot_id in row.slot_ids:
            for branch in row.branches:
                pairs += 1
                for order in itertools.permutations(branch):
                    policy = slot_policy(slot_id, order)
                    assert policy is slot_policy(slot_id, list(branch))
                    fresh = SlotPolicy(**policy.model_dump())  # validated from scratch
                    assert fresh == policy
    assert len(_SLOT_POLICIES) <= pairs
    before = dict(_SLOT_POLICIES)
    for slot_id, ids in (
        ("daily.status", ["P_WEEKLY_IN_GOAL"]),
        ("daily.status", ["P_DAILY_COMPLETE", "P_DAILY_COMPLETE"]),
        ("no.such.slot", ["P_DAILY_COMPLETE"]),
    ):
        with pytest.raises(CapsuleError):
            slot_policy(slot_id, ids)
    assert _SLOT_POLICIES == before

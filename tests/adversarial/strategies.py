"""Hypothesis strategies for the generative contract tests.

- ``compositions(policy)``: every composition the design §6 grammar allows for a slot
  (lexeme runs of any length, either separator, any split of the lexemes over the
  sentences, tokens in issued order), within the slot's limits — or, with
  ``over_limit=True``, the same shapes with more lexemes than the slot allows. The
  grammar's, not the contract's: the fit table (design §6.1) rejects nearly all of
  them.
- ``fitted_compositions(policy)``: one of the compositions the contract accepts for a
  slot (`kexpr.spool.contract.fit.compositions`: the grammar and the fit table), for
  a slot some word may style.
- ``mutation(text, tokens)``: one single-character insertion, deletion or
  substitution at a position outside every issued token, from ``POOL`` (Hangul,
  digits, punctuation, whitespace and look-alikes).
- ``json_document(capsule)``: a random JSON document *around* valid slots: the valid
  response, structurally edited (values replaced, keys dropped or added, duplicates,
  reordering), then written with random whitespace and random string escapes, as
  str or bytes. Objects are kept as lists of pairs so that duplicates and key order
  survive to the text.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from hypothesis import strategies as st

from adversarial.oracle import SPEC_LEXICON
from kexpr.spool.contract import SlotPolicy, fit

# ---------------------------------------------------------------------------------------
# Grammar compositions
# ---------------------------------------------------------------------------------------


def _rng(draw: st.DrawFn) -> random.Random:
    """One seeded ``Random`` per example: far fewer Hypothesis draws (the fuzz profile
    runs 10**5 examples per property), at the cost of coarser shrinking."""
    return random.Random(draw(st.integers(0, 2**64 - 1)))


def composition_of(rng: random.Random, policy: SlotPolicy, *, over_limit: bool = False) -> str:
    tokens = policy.required_placeholder_tokens
    cap = policy.max_style_lexemes
    total = rng.randint(cap + 1, cap + 6) if over_limit else rng.randint(1, cap)
    # Assign each lexeme to a sentence: any split of the run over the tokens.
    counts = [0] * len(tokens)
    for _ in range(total):
        counts[rng.randrange(len(tokens))] += 1
    sentences: list[str] = []
    for count, token in zip(counts, tokens, strict=True):
        words = [rng.choice(SPEC_LEXICON) for _ in range(count)]
        style = " ".join(words) + rng.choice((", ", " ")) if words else ""
        sentences.append(f"{style}{token}.")
    return " ".join(sentences)


@st.composite
def compositions(draw: st.DrawFn, policy: SlotPolicy, *, over_limit: bool = False) -> str:
    return composition_of(_rng(draw), policy, over_limit=over_limit)


def fitted_composition_of(rng: random.Random, policy: SlotPolicy) -> str:
    """A composition the contract accepts for ``policy`` (ValueError: none exists, the
    slot is never asked: design §6.1)."""
    listed = fit.compositions(policy.slot_id, policy.semantic_ids)
    if not listed:
        raise ValueError("no word fits this slot")
    return rng.choice(listed)


@st.composite
def fitted_compositions(draw: st.DrawFn, policy: SlotPolicy) -> str:
    return fitted_composition_of(_rng(draw), policy)


def canonical_only(policy: SlotPolicy) -> str:
    return " ".join(f"{t}." for t in policy.required_placeholder_tokens)


# ---------------------------------------------------------------------------------------
# Single-character mutations
# ---------------------------------------------------------------------------------------

_LEXEME_SYLLABLES: Final = sorted(set("".join(SPEC_LEXICON)))
POOL: Final[tuple[str, ...]] = (
    # Hangul: lexeme syllables (a mutation may form another lexeme), number-word and
    # forbidden-vocabulary syllables, arbitrary syllables, jamo of both kinds
    *_LEXEME_SYLLABLES,
    "하", "나", "일", "이", "삼", "십", "만", "천", "둘", "셋", "잘", "좋", "약", "안", "못",
    "주", "월", "년", "가", "힣", "요", "은", "는", "ㅊ", "ㅏ", "ㄱ", "\u1100", "\u1161", "\u11a8",
    # digits
    "0", "1", "9", "３", "٣", "१", "①", "²", "½", "Ⅻ", "〇", "一", "𝟎",
    # punctuation, ASCII and CJK
    ",", ".", "!", "?", ":", ";", "-", "~", "%", "+", "#", "*", "_", "|", "`", "/", "\\", "@",
    "&", "=", "^", "(", ")", "[", "]", "{", "}", "<", ">", '"', "'", "…", "。", "、", "·", "•",
    "※", "「", "」", "“", "”",
    # whitespace and invisibles
    " ", "\t", "\n", "\r", "\u00a0", "\u2002", "\u3000", "\u200b", "\u200c", "\u200d", "\u2060",
    "\ufeff", "\u3164", "\u115f", "\u2028", "\u034f", "\u2800", "\u00ad", "\u202e", "\x00", "\x7f",
    # look-alikes of the separators, the brackets and the token letters
    "，", "．", "﹐", "﹒", "‚", "․", "ˌ", "ㆍ", "［", "］", "⟦", "〔", "Ｐ", "Р", "Α", "ｐ",
    "P", "A", "a", "ℓ", "\u0301", "\ufe0f", "😀", "㎏",
)  # fmt: skip


def token_spans(text: str, tokens: Sequence[str]) -> list[tuple[int, int]]:
    """[start, end) of every occurrence of an issued token in ``text``."""
    spans: list[tuple[int, int]] = []
    for token in set(tokens):
        start = text.find(token)
        while start >= 0:
            spans.append((start, start + len(token)))
            start = text.find(token, start + 1)
    return spans


def outside(spans: Sequence[tuple[int, int]], index: int, *, gap: bool) -> bool:
    """Whether character ``index`` (or, with ``gap``, the gap before it) is outside
    every token span."""
    if gap:
        return all(not (s < index < e) for s, e in spans)
    return all(not (s <= index < e) for s, e in spans)


@dataclass(frozen=True)
class Mutation:
    kind: str  # insert | delete | substitute
    index: int
    char: str

    def apply(self, text: str) -> str:
        if self.kind == "insert":
            return text[: self.index] + self.char + text[self.index :]
        if self.kind == "delete":
            return text[: self.index] + text[self.index + 1 :]
        return text[: self.index] + self.char + text[self.index + 1 :]


def random_char(rng: random.Random) -> str:
    """Mostly ``POOL``; otherwise any code point (surrogates included), BMP-weighted."""
    roll = rng.random()
    if roll < 0.8:
        return rng.choice(POOL)
    if roll < 0.95:
        return chr(rng.randrange(0x10000))
    return chr(rng.randrange(0x110000))


def mutation_of(
    rng: random.Random, text: str, tokens: Sequence[str], *, anywhere: bool = False
) -> Mutation:
    spans = [] if anywhere else token_spans(text, tokens)
    kind = rng.choice(("insert", "delete", "substitute"))
    if kind == "insert":
        gaps = [i for i in range(len(text) + 1) if outside(spans, i, gap=True)]
        return Mutation(kind, rng.choice(gaps), random_char(rng))
    positions = [i for i in range(len(text)) if outside(spans, i, gap=False)]
    index = rng.choice(positions)
    return Mutation(kind, index, "" if kind == "delete" else random_char(rng))


@st.composite
def mutation(
    draw: st.DrawFn, text: str, tokens: Sequence[str], *, anywhere: bool = False
) -> Mutation:
    return mutation_of(_rng(draw), text, tokens, anywhere=anywhere)


# ---------------------------------------------------------------------------------------
# Random JSON documents around valid slots
# ---------------------------------------------------------------------------------------


@dataclass
class Obj:
    """A JSON object as ordered pairs (duplicates allowed)."""

    pairs: list[tuple[str, Any]]


def to_tree(value: Any) -> Any:
    if isinstance(value, dict):
        return Obj([(k, to_tree(v)) for k, v in value.items()])
    if isinstance(value, list):
        return [to_tree(v) for v in value]
    return value


KEY_POOL: Final = (
    "schema_version", "surface", "artifact_key", "slots", "slot_id", "predicate_ids",
    "action_ids", "placeholder_tokens", "generated_ko", "Surface", "surface ", "variant_id",
    "body", "allowed_predicate_ids", "required_placeholder_tokens", "max_style_lexemes",
    "", "\u0000", "차분히", "generated_ko\u200b", "ｓｕｒｆａｃｅ",
)  # fmt: skip
STRING_POOL: Final = (
    "korean-expression-v4", "korean-expression-v3", "daily.v1", "weekly.v1",
    "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1", "daily.status",
    "weekly.interpretation", "weekly.rationale", "adaptive.dual.judgment",
    "adaptive.dual.review.1", "P_DAILY_COMPLETE", "P_DAILY_PARTIAL", "A_OPERATOR_REVIEW_DECISION",
    "[[P:01]]", "[[P:02]]", "[[A:01]]", "[[P:1]]", "차분히, [[P:01]].", "[[P:01]].",
    "오늘은 차분히, [[P:01]].", "하나, [[A:01]].", "확인 결과, [[A:01]].", "차분히\u200b, [[P:01]].",
    "0" * 64, "f" * 64, "", " ", "NaN", "true",
)  # fmt: skip

json_leaf: Final = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(STRING_POOL),
    st.text(max_size=12),
)
json_value: Final = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(
            st.tuples(st.sampled_from(KEY_POOL) | st.text(max_size=6), children), max_size=3
        ).map(Obj),
    ),
    max_leaves=8,
)


def _containers(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, Obj):
        out.append(node)
        for _, v in node.pairs:
            _containers(v, out)
    elif isinstance(node, list):
        out.append(node)
        for v in node:
            _containers(v, out)
    return out


@st.composite
def edited_tree(
    draw: st.DrawFn, valid: dict[str, Any], generated: Sequence[st.SearchStrategy[str]]
) -> Any:
    """``valid`` as a tree with 0-3 random structural edits."""
    root: Any = to_tree(valid)
    for _ in range(draw(st.integers(0, 3))):
        op = draw(
            st.sampled_from(
                (
                    "replace",
                    "drop",
                    "add",
                    "duplicate",
                    "shuffle",
                    "generated",
                    "wrap",
                    "swap_slots",
                )
            )
        )
        containers = _containers(root, [])
        target = draw(st.sampled_from(containers))
        if op == "generated":
            slots = dict(root.pairs).get("slots") if isinstance(root, Obj) else None
            if isinstance(slots, list) and slots and len(slots) == len(generated):
                index = draw(st.integers(0, len(slots) - 1))
                slot = slots[index]
                if isinstance(slot, Obj):
                    text = draw(generated[index])
                    slot.pairs = [(k, text if k == "generated_ko" else v) for k, v in slot.pairs]
        elif op == "wrap":
            root = [root] if draw(st.booleans()) else Obj([("response", root)])
        elif op == "swap_slots":
            slots = dict(root.pairs).get("slots") if isinstance(root, Obj) else None
            if isinstance(slots, list) and len(slots) > 1:
                slots.reverse()
        elif isinstance(target, Obj):
            if op == "replace" and target.pairs:
                i = draw(st.integers(0, len(target.pairs) - 1))
                target.pairs[i] = (target.pairs[i][0], draw(json_value))
            elif op == "drop" and target.pairs:
                del target.pairs[draw(st.integers(0, len(target.pairs) - 1))]
            elif op == "add":
                key = draw(st.sampled_from(KEY_POOL) | st.text(max_size=6))
                target.pairs.insert(
                    draw(st.integers(0, len(target.pairs))), (key, draw(json_value))
                )
            elif op == "duplicate" and target.pairs:
                pair = target.pairs[draw(st.integers(0, len(target.pairs) - 1))]
                same = draw(st.booleans())
                target.pairs.append(pair if same else (pair[0], draw(json_value)))
            elif op == "shuffle":
                target.pairs = draw(st.permutations(target.pairs))
        elif isinstance(target, list):
            if op == "replace" and target:
                target[draw(st.integers(0, len(target) - 1))] = draw(json_value)
            elif op == "drop" and target:
                del target[draw(st.integers(0, len(target) - 1))]
            elif op in ("add", "duplicate"):
                target.insert(draw(st.integers(0, len(target))), draw(json_value))
            elif op == "shuffle":
                target[:] = draw(st.permutations(target))
    return root


_WS_GOOD: Final = (" ", "\n", "\r", "\t", "\r\n", "  ")
_WS_BAD: Final = ("\f", "\v", "\u00a0", "\u3000", "\ufeff", "\u2028", "\x00")
_SHORT: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _escape_char(ch: str, style: int) -> str:
    """One character of a JSON string. style 0: raw where JSON allows; 1: \\uXXXX
    lower-case; 2: \\uXXXX upper-case; 3: short escape where one exists."""
    code = ord(ch)
    if style == 0 and ch not in '"\\' and code >= 0x20:
        return ch
    if style == 3 and ch in _SHORT:
        return _SHORT[ch]
    if code > 0xFFFF:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        text = f"\\u{high:04x}\\u{low:04x}"
    else:
        text = f"\\u{code:04x}"
    return text.upper().replace("\\U", "\\u") if style == 2 else text


def _string(rng: random.Random, value: str) -> str:
    mode = rng.choice(("raw", "raw", "ascii", "mixed"))
    if mode == "raw":
        return json.dumps(value, ensure_ascii=False)
    if mode == "ascii":
        return json.dumps(value, ensure_ascii=True)
    return '"' + "".join(_escape_char(c, rng.randrange(4)) for c in value) + '"'


def _ws(rng: random.Random) -> str:
    choice = rng.randrange(41)
    if choice < 30:
        return ""
    if choice < 40:
        return rng.choice(_WS_GOOD)
    return rng.choice(_WS_BAD)


def serialized(rng: random.Random, node: Any) -> str:
    """``node`` as JSON text with random whitespace and random string escapes."""

    def write(n: Any) -> str:
        if isinstance(n, Obj):
            items = [
                _ws(rng) + _string(rng, k) + _ws(rng) + ":" + _ws(rng) + write(v) + _ws(rng)
                for k, v in n.pairs
            ]
            return "{" + ",".join(items) + _ws(rng) + "}"
        if isinstance(n, list):
            return "[" + ",".join(_ws(rng) + write(v) + _ws(rng) for v in n) + _ws(rng) + "]"
        if isinstance(n, str):
            return _string(rng, n)
        return json.dumps(n)

    return _ws(rng) + write(node) + _ws(rng)


@st.composite
def json_document(
    draw: st.DrawFn, valid: dict[str, Any], generated: Sequence[st.SearchStrategy[str]]
) -> str | bytes:
    tree = draw(edited_tree(valid, generated))
    rng = _rng(draw)
    text = serialized(rng, tree)
    if rng.randrange(30) == 0:
        text = rng.choice(("\ufeff", "x", "[", "{}", "\ud800")) + text
    if rng.randrange(30) == 0:
        text = text + rng.choice(("x", "}", ",", "{}", " \n", "\x00"))
    if rng.random() < 0.5:
        return text.encode("utf-8", "surrogatepass")
    return text

"""An independent oracle for the contract: what design §6 and §6.1 accept, written
from the design's text without any code from ``kexpr.spool.contract``.

- ``grammar_ok(tokens, max_chars, max_lexemes, text)``: one regular expression built
  from the spec's lexicon and the issued tokens, plus the two counts. It knows
  nothing of forbidden classes, precedence or reasons: it answers only "is this a
  composition of the grammar within the slot's limits?".
- ``fits(slot_id, semantic_ids, text)``: design §6.1's review, read slot by slot (the
  product's table is keyed by ID and position; this one is written from the prose):
  at most one word before a sentence, and that word with its join one the design
  allows at that sentence. ``generated_ok`` is both.
- ``document_ok(capsule, content)``: the response rules of design §6 as a yes/no —
  UTF-8, ≤ 16 KiB, no BOM, one JSON object without duplicate keys or non-finite
  numbers, exactly the four keys, each slot exactly the five keys, every echo equal
  to the capsule (same types, same order), and every ``generated_ko`` accepted by
  ``generated_ok``. Every string the grammar accepts is NFC and free of control,
  format and zero-width characters by construction (Hangul syllables, ASCII space,
  comma, period and ASCII tokens only), and every echoed string equals the capsule's,
  so those reader steps need no separate test here.

The lexicon is copied from design §6, not imported; the lexicon audit pins it equal to
the code constant, so a change to either is caught.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

# design §6, verbatim (kept as the spec's own line, hence the split).
_SPEC_LINE: Final = "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 순서대로 함께 지금 이제 여기서 아래 바로 그대로 특히 잠시 다시"
# design §6.2: the one word beyond the plan's twenty, entered on the readers' verdict.
_REVIEWED_WORDS: Final = ("다만",)
SPEC_LEXICON: Final[tuple[str, ...]] = (*_SPEC_LINE.split(" "), *_REVIEWED_WORDS)
# The plan's forbidden vocabulary, in the plan's order (seed plan "Korean style
# grammar, prohibited claims, and deterministic rejection"); the product's list
# starts with these and may add more.
PLAN_VOCABULARY: Final[tuple[str, ...]] = tuple(
    "잘 충분 성공 좋 안전 위험 진단 치료 약 유지 조정 측정 기록 승인 전달 전송 보내".split(" ")
)
MAX_BYTES: Final = 16 * 1024

_LEXEME: Final = "(?:" + "|".join(re.escape(w) for w in SPEC_LEXICON) + ")"
# style ::= LEXEME (" " LEXEME)* (", " | " ")
_STYLE: Final = f"{_LEXEME}(?: {_LEXEME})*(?:, | )"
_WORDS: Final = re.compile(_LEXEME)

_cache: dict[tuple[str, ...], re.Pattern[str]] = {}


def grammar_regex(tokens: Sequence[str]) -> re.Pattern[str]:
    """generated_ko ::= sentence (" " sentence)*, sentence ::= style? TOKEN "." —
    one sentence per issued token, in issued order."""
    key = tuple(tokens)
    pattern = _cache.get(key)
    if pattern is None:
        pattern = re.compile(" ".join(f"(?:{_STYLE})?{re.escape(t)}\\." for t in key))
        _cache[key] = pattern
    return pattern


# design §6.1 and §6.2, as their prose says it ("word," with the comma, "word" with a
# plain space): the blind readers preferred the host's text before every sentence but
# one, the goal-missing hold on the weekly interpretation's second line, where 다만
# (with or without its comma) names the reservation after the finding. Nothing else.
_RESERVATION: Final = "A_WEEKLY_HOLD_FOR_MISSING_GOAL"


def allowed_runs(slot_id: str, index: int, semantic_id: str) -> frozenset[str]:
    """The runs design §6.1/§6.2 allow before sentence ``index`` (0-based) of a slot."""
    if slot_id == "weekly.interpretation" and index == 1 and semantic_id == _RESERVATION:
        return frozenset({"다만", "다만,"})
    return frozenset()


def _sentences(tokens: Sequence[str]) -> re.Pattern[str]:
    # One group pair per sentence: the run's words and its join.
    return re.compile(
        " ".join(
            f"(?:(?P<w{i}>{_LEXEME}(?: {_LEXEME})*)(?P<j{i}>, | ))?{re.escape(t)}\\."
            for i, t in enumerate(tokens)
        )
    )


def fits(slot_id: str, semantic_ids: Sequence[str], tokens: Sequence[str], text: str) -> bool:
    """Whether a grammatical ``text`` keeps to design §6.1 (one word at most per
    sentence, each allowed where it stands)."""
    match = _sentences(tokens).fullmatch(text)
    if match is None:
        return False
    for index, semantic_id in enumerate(semantic_ids):
        words = match.group(f"w{index}")
        if words is None:
            continue
        if " " in words:
            return False
        run = words + ("," if match.group(f"j{index}") == ", " else "")
        if run not in allowed_runs(slot_id, index, semantic_id):
            return False
    return True


def semantic_ids_of(slot: Mapping[str, Any]) -> list[str]:
    """The IDs a capsule slot's tokens stand for, in token order (P tokens take the
    predicates in order, A tokens the actions)."""
    predicates = iter(slot["allowed_predicate_ids"])
    actions = iter(slot["allowed_action_ids"])
    return [
        next(predicates) if t.startswith("[[P:") else next(actions)
        for t in slot["required_placeholder_tokens"]
    ]


def lexeme_count(tokens: Sequence[str], text: str) -> int:
    """Lexemes in a text that already matched ``grammar_regex(tokens)``."""
    for token in tokens:
        text = text.replace(token, " ")
    return len(_WORDS.findall(text))


def grammar_ok(tokens: Sequence[str], max_chars: int, max_lexemes: int, text: str) -> bool:
    if not tokens or grammar_regex(tokens).fullmatch(text) is None:
        return False
    return 1 <= lexeme_count(tokens, text) <= max_lexemes and len(text) <= max_chars


def generated_ok(
    slot_id: str,
    semantic_ids: Sequence[str],
    tokens: Sequence[str],
    max_chars: int,
    max_lexemes: int,
    text: str,
) -> bool:
    """The contract's acceptance of one slot: the grammar, then design §6.1."""
    return grammar_ok(tokens, max_chars, max_lexemes, text) and fits(
        slot_id, semantic_ids, tokens, text
    )


def slot_ok(slot: Mapping[str, Any], text: str) -> bool:
    """``generated_ok`` for a capsule slot given as its JSON dict."""
    return generated_ok(
        slot["slot_id"],
        semantic_ids_of(slot),
        slot["required_placeholder_tokens"],
        slot["max_generated_chars"],
        slot["max_style_lexemes"],
        text,
    )


class _Refused(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused
        out[key] = value
    return out


def _refuse(_: str) -> Any:
    raise _Refused


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):  # 1e999 overflows: not a finite number
        raise _Refused
    return value


def strict_load(content: str | bytes) -> Any:
    """The decoded document, or ``_Refused``: the spec's pre-model reader steps that
    the equality check below cannot see on its own (encoding, size, BOM, duplicate
    keys, non-finite numbers)."""
    if isinstance(content, str):
        try:
            raw = content.encode("utf-8")
        except UnicodeEncodeError:
            raise _Refused from None
    else:
        raw = bytes(content)
    if len(raw) > MAX_BYTES or raw.startswith(b"\xef\xbb\xbf"):
        raise _Refused
    try:
        text = raw.decode("utf-8")
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_refuse,
            parse_float=_finite_float,
        )
    except (ValueError, RecursionError):
        raise _Refused from None


def _is_str_list(value: object, expected: Sequence[str]) -> bool:
    return type(value) is list and value == list(expected) and all(type(v) is str for v in value)


def document_ok(capsule: Mapping[str, Any], content: str | bytes) -> bool:
    """Whether design §6 accepts ``content`` as the response to ``capsule`` (a dict)."""
    try:
        doc = strict_load(content)
    except _Refused:
        return False
    if type(doc) is not dict or set(doc) != {"schema_version", "surface", "artifact_key", "slots"}:
        return False
    for key in ("schema_version", "surface", "artifact_key"):
        if type(doc[key]) is not str or doc[key] != capsule[key]:
            return False
    slots, policies = doc["slots"], capsule["slots"]
    if type(slots) is not list or len(slots) != len(policies):
        return False
    for slot, policy in zip(slots, policies, strict=True):
        if type(slot) is not dict or set(slot) != {
            "slot_id",
            "predicate_ids",
            "action_ids",
            "placeholder_tokens",
            "generated_ko",
        }:
            return False
        if type(slot["slot_id"]) is not str or slot["slot_id"] != policy["slot_id"]:
            return False
        if not (
            _is_str_list(slot["predicate_ids"], policy["allowed_predicate_ids"])
            and _is_str_list(slot["action_ids"], policy["allowed_action_ids"])
            and _is_str_list(slot["placeholder_tokens"], policy["required_placeholder_tokens"])
        ):
            return False
        if type(slot["generated_ko"]) is not str or not slot_ok(policy, slot["generated_ko"]):
            return False
    return True

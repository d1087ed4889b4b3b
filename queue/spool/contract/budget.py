"""The answer budget: can the model's answer to a capsule arrive at all? (design §9)

A real model writes its answer token by token, and design §9 fixes every number of
the call: the client's ``timeout=3.0``, ``max_tokens=384``, and an answer that echoes
the 32-hex ``artifact_key``, every ID array and every placeholder token. This module
owns the arithmetic that decides whether an answer can fit, and nothing else.

Rules of this module:

Rule 1: the budget is named constants with their sources, never a number inlined at
        a call site. ``ANSWER_BUDGET_TOKENS`` = min(``MAX_COMPLETION_TOKENS``,
        ``TIME_BUDGET_TOKENS``) = min(384, (3.0 s - 0.3 s) x 110 tokens/s) = 297. The
        rate and first-token delay are the FASTEST published for gpt-4.1-mini
        (docs/budget.md): an answer that cannot arrive even then must never be sent,
        because the artifact's one call (and its cost) would be spent on a timeout.
Rule 2: the count is of the *minimal valid compact answer* (``minimal_answer``): the
        instruction's key order, no whitespace outside strings, and in each slot the
        composition of the fit table (`kexpr.spool.contract.fit`, design §6.1) with
        the fewest tokens by Rule 3's count (ties: the first in sorted order). The
        table lists every composition a slot accepts, so any valid answer is at
        least this long, and a capsule whose minimal answer does not fit has no
        answer that fits. A slot with no composition has no answer at all: no
        bound (None).
Rule 3: the bound is an UPPER bound of the o200k_base token count (gpt-4.1-mini's
        encoding) of that answer, computed without a tokenizer, because the gateway
        side must stay light (no native tokenizer, no numpy in the host's process):
        o200k_base splits text into pre-tokens with a fixed pattern and encodes each
        pre-token on its own, so the count is the sum over pre-tokens. ``_split``
        is that pattern restricted to the answer's alphabet (ASCII and Hangul
        syllables); a pre-token costs its exact count from ``_budget_table`` when
        listed there, else its UTF-8 length (byte-level BPE never yields more tokens
        than bytes). A character outside the alphabet makes the bound ``None``
        (no bound: the caller fails closed).
Rule 4: the bound is key-independent, so a message's verdict never depends on its
        artifact key: the key is counted as its worst case, 32 tokens (one per hex
        character of the 128-bit key; ``"a1" * 16`` reaches it). A capsule of an
        older shim's request carries the whole 64-hex HMAC; its key counts 64
        (`LEGACY_KEY_TOKENS_MAX`), so the worker never admits an answer to it that
        cannot arrive. The key's pre-tokens are bounded by the
        punctuation runs ``":"`` and ``","`` whatever the key is, so replacing it
        changes nothing else in the split (tests/contract/test_budget.py proves the
        split and the bound against the real encoding for every capsule shape).
Rule 5: pure: no I/O, clock or randomness (``spool.contract``'s rule).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from ._budget_table import PRETOKEN_TOKENS
from ._models import (
    ARTIFACT_KEY_HEX,
    CONTRACT_VERSION,
    LEGACY_ARTIFACT_KEY_HEX,
    Capsule,
    SlotPolicy,
)
from .answers import answer_json
from .fit import compositions

__all__ = [
    "ANSWER_BUDGET_TOKENS",
    "FASTEST_TOKENS_PER_S",
    "FIRST_TOKEN_S",
    "KEY_TOKENS_MAX",
    "LEGACY_KEY_TOKENS_MAX",
    "MAX_COMPLETION_TOKENS",
    "SDK_TIMEOUT_S",
    "TIME_BUDGET_TOKENS",
    "answer_token_bound",
    "id_token_bound",
    "min_answer_seconds",
    "minimal_answer",
    "minimal_generated",
    "slots_token_bound",
    "text_token_bound",
]

# The provider parameters of design §9 (kexpr.worker.provider sends them, and a
# test pins that the two agree).
MAX_COMPLETION_TOKENS: Final = 384
SDK_TIMEOUT_S: Final = 3.0
# The fastest published gpt-4.1-mini figures (docs/budget.md): first token after
# 0.3 s (0.3-0.9 s for an ~850-token prompt), 110 tokens/s (108 measured on Azure,
# rounded up; 77 on OpenAI's own API, 52-68 in a community run).
FIRST_TOKEN_S: Final = 0.3
FASTEST_TOKENS_PER_S: Final = 110
# (3.0 - 0.3) x 110 = 297: the most tokens that can arrive within the timeout
# (in whole milliseconds, so no float rounding can move it).
TIME_BUDGET_TOKENS: Final = (
    (round(SDK_TIMEOUT_S * 1000) - round(FIRST_TOKEN_S * 1000)) * FASTEST_TOKENS_PER_S // 1000
)
ANSWER_BUDGET_TOKENS: Final = min(MAX_COMPLETION_TOKENS, TIME_BUDGET_TOKENS)

# Rule 4: 32 hex characters, at most one token each (and 64 for an older shim's key).
KEY_TOKENS_MAX: Final = ARTIFACT_KEY_HEX
LEGACY_KEY_TOKENS_MAX: Final = LEGACY_ARTIFACT_KEY_HEX
_KEY_STAND_IN: Final = "a" * KEY_TOKENS_MAX

# Rule 3: o200k_base's pre-token pattern,
#   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
#   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
#   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
# with its classes written out for the alphabet a minimal answer can contain
# (printable ASCII and Hangul syllables, which are \p{Lo}: upper- and lower-like).
_LETTERS: Final = "A-Za-z\uac00-\ud7a3"
_UPPER_LIKE: Final = "A-Z\uac00-\ud7a3"
_LOWER_LIKE: Final = "a-z\uac00-\ud7a3"
_PREFIX: Final = rf"[^\r\n{_LETTERS}0-9]"
_CONTRACTION: Final = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_PRETOKEN_RE: Final = re.compile(
    "|".join(
        (
            rf"{_PREFIX}?[{_UPPER_LIKE}]*[{_LOWER_LIKE}]+{_CONTRACTION}?",
            rf"{_PREFIX}?[{_UPPER_LIKE}]+[{_LOWER_LIKE}]*{_CONTRACTION}?",
            r"[0-9]{1,3}",
            rf" ?[^\s{_LETTERS}0-9]+[\r\n/]*",
            r"\s*[\r\n]+",
            r"\s+(?!\S)",
            r"\s+",
        )
    )
)
_ALPHABET_RE: Final = re.compile("[\x20-\x7e\uac00-\ud7a3]*")


def min_answer_seconds(tokens: int) -> float:
    """The least time an answer of ``tokens`` tokens takes at the fastest published
    rate: first token, then the rest (Rule 1). A request with less time left than
    this for its minimal answer is never sent."""
    return FIRST_TOKEN_S + tokens / FASTEST_TOKENS_PER_S


def minimal_answer(capsule: Capsule) -> str:
    """The minimal valid compact answer to ``capsule`` (Rule 2), as the model would
    write it: the instruction's key order, compact, Hangul unescaped."""
    return _answer(capsule.surface, capsule.artifact_key, capsule.slots)


def answer_token_bound(capsule: Capsule) -> int | None:
    """An upper bound of the o200k_base tokens of ``minimal_answer(capsule)``, for
    every artifact key of its key's length (Rules 3, 4); None when no bound can be
    given."""
    return _bound(capsule.surface, len(capsule.artifact_key), capsule.slots)


def slots_token_bound(surface: str, slots: Sequence[SlotPolicy]) -> int | None:
    """`answer_token_bound` of a capsule on ``surface`` with ``slots``, before any
    key exists (the shim judges eligibility before it touches the data root)."""
    return _bound(surface, KEY_TOKENS_MAX, slots)


def _bound(surface: str, key_hex: int, slots: Sequence[SlotPolicy]) -> int | None:
    # Rule 2: a slot without a composition has no answer, so no bound.
    if not all(compositions(slot.slot_id, slot.semantic_ids) for slot in slots):
        return None
    # A key of ``key_hex`` hex digits costs at most one token per digit (Rule 4).
    stand_in = "a" * key_hex
    text = _answer(surface, stand_in, slots)
    if _ALPHABET_RE.fullmatch(text) is None:
        return None
    total = 0
    for piece in _split(text):
        if piece == stand_in:
            total += key_hex
        else:
            total += PRETOKEN_TOKENS.get(piece, len(piece.encode("utf-8")))
    return total


def text_token_bound(text: str) -> int | None:
    """An upper bound of the o200k_base tokens of any ``text`` in the answer's
    alphabet (Rule 3), or None outside it. Unlike `slots_token_bound` nothing is
    special about a key here: a 64-hex run costs what its pre-tokens cost (at most
    its length). The rehearsal model (`kexpr.worker.rehearsal`) paces its answers
    with it: no tokenizer, and never faster than the real count."""
    if _ALPHABET_RE.fullmatch(text) is None:
        return None
    return sum(PRETOKEN_TOKENS.get(piece, len(piece.encode("utf-8"))) for piece in _split(text))


def id_token_bound(semantic_id: str) -> int | None:
    """The o200k_base tokens of one semantic ID standing alone, by Rule 3's bound
    (exact for a pre-token the table lists): what an ID costs in every answer
    that echoes it (`kexpr glossary check`, `kexpr surfaces check`). The card's
    bound (`slots_token_bound`) is the figure the budget judges. None outside
    the alphabet."""
    return text_token_bound(semantic_id) if semantic_id else None


def _split(text: str) -> list[str]:
    """o200k_base's pre-tokens of ``text`` (Rule 3; the alphabet is the caller's)."""
    return _PRETOKEN_RE.findall(text)


def _answer(surface: str, key: str, slots: Sequence[SlotPolicy]) -> str:
    capsule = {
        "schema_version": CONTRACT_VERSION,
        "surface": surface,
        "artifact_key": key,
        "slots": list(slots),
    }
    by_id = {slot.slot_id: slot for slot in slots}
    return answer_json(capsule, lambda sid: minimal_generated(by_id[sid]))


def minimal_generated(slot: SlotPolicy) -> str:
    """Rule 2: the slot's cheapest composition; ``""`` (never valid) when it has none."""

    def cost(text: str) -> tuple[int, str]:
        tokens = text_token_bound(text)
        return (len(text.encode("utf-8")) if tokens is None else tokens, text)

    candidates = compositions(slot.slot_id, slot.semantic_ids)
    return min(candidates, key=cost) if candidates else ""

"""The dual card's decision/reason glossary as a value, and what its IDs and texts may be.

A `DualGlossary` is the shipped public texts (``SHIPPED_DUAL_GLOSSARY``, from
`gateway_shim.glossary`), or those plus the operator's file, which
`gateway_shim.operator_glossary` reads under the file's own rules (its Rules 1, 3a,
4, 4a, 5 and 6, and the file's part of Rule 3). The rules below hold for every
glossary value, whatever its source; each failure is a `GlossaryError` with a
`GlossaryProblem` enum, never content:

2. Every text: NFC, one line, Hangul words separated by single spaces or joined by
   ``·`` (U+00B7, as in the host's ``수정 전·후``); so no digit, Latin letter, bracket,
   ``[[``, comma, quote, control or line break (the lexicon audit of every expansion),
   at most 120 characters, and at least one word that is not a style lexeme.
3. IDs are generic types, never fields: an ID travels in the capsule to the worker and
   the model, its text never does. The grammar is the manifest's open families'
   (`kexpr.spool.contract.manifest` Rules 5, 6), each rule refused with its own
   reason (`id_problem`): the family's prefix (``P_DUAL_DECISION_`` /
   ``P_DUAL_REASON_``: ``id_malformed``), no digit (``id_digit``), upper-case words
   joined by single ``_`` (``id_not_upper_words``), no word longer than the longest
   word of a shipped ID (``id_word_too_long``), at most `OPEN_ID_MAX_CHARS`
   characters (``id_too_long``: what the answer budget can carry). A glossary holds
   at most 64 of each family on top of the shipped texts, and no text twice. (The
   file's part of this rule, what a file may define, is
   `gateway_shim.operator_glossary`'s.)
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from gateway_shim.glossary import GLOSSARY
from kexpr.spool.contract import SAFE_STYLE_LEXEMES
from kexpr.spool.contract.manifest import (
    DUAL_DECISION_ID_PATTERN,
    DUAL_DECISION_PREFIX,
    DUAL_REASON_ID_PATTERN,
    DUAL_REASON_PREFIX,
    OPEN_ID_MAX_CHARS,
    OPEN_ID_MAX_WORD,
)

__all__ = [
    "GLOSSARY_VERSION",
    "MAX_ENTRIES_PER_FAMILY",
    "SHIPPED_DUAL_GLOSSARY",
    "DualGlossary",
    "GlossaryError",
    "GlossaryProblem",
    "audit_text",
    "id_problem",
]

GLOSSARY_VERSION: Final = "kexpr-dual-glossary-v1"
MAX_ENTRIES_PER_FAMILY: Final = 64
MAX_TEXT_CHARS: Final = 120
_DECISION_RE: Final = re.compile(DUAL_DECISION_ID_PATTERN)
_REASON_RE: Final = re.compile(DUAL_REASON_ID_PATTERN)
# Rule 2: Hangul words, single spaces or a U+00B7 between two words.
_TEXT_RE: Final = re.compile("[\uac00-\ud7a3]+(?:[ \u00b7][\uac00-\ud7a3]+)*")
_WORD_SPLIT_RE: Final = re.compile("[ \u00b7]")
_STYLE_WORDS: Final = frozenset(SAFE_STYLE_LEXEMES)
_DECISION_PREFIX: Final = DUAL_DECISION_PREFIX
_REASON_PREFIX: Final = DUAL_REASON_PREFIX
# Rule 3: what an ID after its prefix may be made of, and how.
_UPPER_WORDS_RE: Final = re.compile("[A-Z]+(?:_[A-Z]+)*")


def _shipped_count(prefix: str) -> int:
    """How many shipped (public) texts the family ``prefix`` has."""
    return sum(1 for i in GLOSSARY if i.startswith(prefix))


class GlossaryProblem(enum.StrEnum):
    """Why a glossary file was refused. Enum only, never content."""

    MISSING = "missing"
    UNSAFE_FILE = "unsafe_file"
    UNREADABLE = "unreadable"
    TOO_LARGE = "too_large"
    NOT_UTF8 = "not_utf8"
    NOT_JSON = "not_json"
    DUPLICATE_KEY = "duplicate_key"
    NOT_OBJECT = "not_object"
    WRONG_KEYS = "wrong_keys"
    WRONG_VERSION = "wrong_version"
    TOO_MANY_ENTRIES = "too_many_entries"
    ID_MALFORMED = "id_malformed"
    ID_TOO_LONG = "id_too_long"
    ID_DIGIT = "id_digit"
    ID_NOT_UPPER_WORDS = "id_not_upper_words"
    ID_WORD_TOO_LONG = "id_word_too_long"
    # ``kexpr glossary check``/``install``: a card of the decision and up to two
    # reasons would not fit the answer budget (`kexpr.ops.glossary_cli`).
    ID_OVER_BUDGET = "id_over_budget"
    ID_DUPLICATE = "id_duplicate"
    TEXT_NOT_STRING = "text_not_string"
    TEXT_NOT_NFC = "text_not_nfc"
    TEXT_FORBIDDEN_CHARACTER = "text_forbidden_character"
    TEXT_TOO_LONG = "text_too_long"
    TEXT_FINAL_PERIOD = "text_final_period"
    TEXT_ONLY_STYLE_WORDS = "text_only_style_words"
    TEXT_DUPLICATE = "text_duplicate"
    UNSTYLED_UNKNOWN = "unstyled_unknown"


class GlossaryError(Exception):
    def __init__(self, problem: GlossaryProblem) -> None:
        super().__init__(problem.value)
        self.problem: Final = problem


def id_problem(semantic_id: object, prefix: str) -> GlossaryProblem | None:
    """Rule 3 on an ID of the family ``prefix``; None if it is one. The first
    rule it breaks, in this order: prefix, length, digit, words, word length."""
    if not isinstance(semantic_id, str) or not semantic_id.startswith(prefix):
        return GlossaryProblem.ID_MALFORMED
    if len(semantic_id) > OPEN_ID_MAX_CHARS:
        return GlossaryProblem.ID_TOO_LONG
    rest = semantic_id[len(prefix) :]
    if any(c in "0123456789" for c in rest):
        return GlossaryProblem.ID_DIGIT
    if _UPPER_WORDS_RE.fullmatch(rest) is None:
        return GlossaryProblem.ID_NOT_UPPER_WORDS
    if max(len(word) for word in rest.split("_")) > OPEN_ID_MAX_WORD:
        return GlossaryProblem.ID_WORD_TOO_LONG
    # The manifest's own pattern says the same (a test holds them together).
    pattern = _DECISION_RE if prefix == _DECISION_PREFIX else _REASON_RE
    if pattern.fullmatch(semantic_id) is None:
        return GlossaryProblem.ID_MALFORMED
    return None


def audit_text(expansion: str) -> GlossaryProblem | None:
    """Rule 2 on an expansion (a text without its final period); None if clean."""
    if not isinstance(expansion, str):
        return GlossaryProblem.TEXT_NOT_STRING
    if not unicodedata.is_normalized("NFC", expansion):
        return GlossaryProblem.TEXT_NOT_NFC
    if len(expansion) > MAX_TEXT_CHARS:
        return GlossaryProblem.TEXT_TOO_LONG
    if _TEXT_RE.fullmatch(expansion) is None:
        return GlossaryProblem.TEXT_FORBIDDEN_CHARACTER
    if all(word in _STYLE_WORDS for word in _WORD_SPLIT_RE.split(expansion)):
        return GlossaryProblem.TEXT_ONLY_STYLE_WORDS
    return None


@dataclass(frozen=True, slots=True)
class DualGlossary:
    """Decision and reason IDs → their expansions (texts without a final period).

    ``operator``: whether an operator file contributed entries. Build with
    `gateway_shim.operator_glossary`'s `parse_operator_glossary` /
    `load_operator_glossary`, or use ``SHIPPED_DUAL_GLOSSARY``.
    """

    decisions: Mapping[str, str]
    reasons: Mapping[str, str]
    operator: bool = False
    # The reason IDs whose cell the operator narrowed to no word
    # (`gateway_shim.operator_glossary` Rule 4a).
    unstyled: frozenset[str] = frozenset()
    _decision_by_text: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _reason_by_text: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _entries: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        decisions = dict(self.decisions)
        reasons = dict(self.reasons)
        for family, prefix in ((decisions, _DECISION_PREFIX), (reasons, _REASON_PREFIX)):
            # Rule 3: the operator's own entries are bounded; the shipped texts
            # come on top (the file's check in `gateway_shim.operator_glossary` is
            # the same boundary).
            if len(family) > MAX_ENTRIES_PER_FAMILY + _shipped_count(prefix):
                raise GlossaryError(GlossaryProblem.TOO_MANY_ENTRIES)
            for semantic_id, text in family.items():
                problem = id_problem(semantic_id, prefix)
                if problem is not None:
                    raise GlossaryError(problem)
                problem = audit_text(text)
                if problem is not None:
                    raise GlossaryError(problem)
        texts = [*decisions.values(), *reasons.values()]
        if len(set(texts)) != len(texts):
            raise GlossaryError(GlossaryProblem.TEXT_DUPLICATE)
        object.__setattr__(self, "decisions", MappingProxyType(decisions))
        object.__setattr__(self, "reasons", MappingProxyType(reasons))
        object.__setattr__(
            self, "_decision_by_text", MappingProxyType({t: i for i, t in decisions.items()})
        )
        object.__setattr__(
            self, "_reason_by_text", MappingProxyType({t: i for i, t in reasons.items()})
        )
        object.__setattr__(self, "_entries", MappingProxyType({**decisions, **reasons}))
        unstyled = self.unstyled
        if not isinstance(unstyled, frozenset) or not unstyled <= set(reasons):
            raise GlossaryError(GlossaryProblem.UNSTYLED_UNKNOWN)

    @property
    def entries(self) -> Mapping[str, str]:
        """Every ID → expansion (the ``glossary`` of the dual slots' placeholders)."""
        return self._entries

    def decision_id(self, text: str) -> str | None:
        """The decision ID whose text the host rendered after ``현재 판단: ``."""
        return self._decision_by_text.get(text)

    def reason_id(self, line: str) -> str | None:
        """The reason ID of a ``검토 필요`` line (``text + "."``)."""
        if not line.endswith(".") or line.count(".") != 1:
            return None
        return self._reason_by_text.get(line[:-1])

    def ids(self) -> tuple[str, ...]:
        """Every ID, sorted: what the shim may issue in a dual capsule."""
        return tuple(sorted(self._entries))

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the entries: what ``kexpr status`` shows."""
        document: dict[str, object] = {
            "version": GLOSSARY_VERSION,
            "decisions": dict(sorted(self.decisions.items())),
            "reasons": dict(sorted(self.reasons.items())),
        }
        # Only when used, so a file without it keeps its digest
        # (`gateway_shim.operator_glossary` Rule 4a).
        if self.unstyled:
            document["unstyled"] = sorted(self.unstyled)
        data = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode("utf-8")).hexdigest()


def _shipped(prefix: str) -> dict[str, str]:
    return {i: t for i, t in GLOSSARY.items() if i.startswith(prefix)}


SHIPPED_DUAL_GLOSSARY: Final = DualGlossary(
    decisions=_shipped(_DECISION_PREFIX), reasons=_shipped(_REASON_PREFIX)
)

"""The dual card's decision/reason glossary: shipped public texts + the operator's file.

Why (docs/host-formats-adaptive.md): the dualcoachtest card's
decision text (after ``현재 판단: ``) and its ``검토 필요`` reason lines are rendered
by the host's private profile package. Only one decision and two reasons are
public; kexpr ships those (`gateway_shim.glossary`). The operator adds the rest,
without editing installed code, in one JSON file in the data root::

    <data root>/operator-glossary.json      (0600, or 0660 in a shared-group root)
    {
      "version": "kexpr-dual-glossary-v1",
      "decisions": {"P_DUAL_DECISION_<NAME>": "<decision text as the card shows it>"},
      "reasons":   {"P_DUAL_REASON_<NAME>":   "<reason line as the card shows it>."},
      "unstyled":  ["P_DUAL_REASON_<NAME>"]          (optional)
    }

Rules (each failure is a `GlossaryError` with a `GlossaryProblem` enum, never content):

1. Texts are written exactly as the host renders them: a decision without a final
   period, a reason line with exactly one final ``.``. The stored expansion is the
   text without that period (the slot's rendering rule adds it back,
   `gateway_shim.surfaces._model.ProseSlot.final_period`).
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
   characters (``id_too_long``: what the answer budget can carry). At most 64 of
   each family in the file (the shipped texts come on top). IDs and
   texts are unique across the shipped entries and the file (a shipped ID or text
   may not be redefined); duplicate JSON keys are an error.
3a. A file valid for an earlier release stays valid, meaning the same: the shipped
   IDs are short since the model echoes each one (docs/budget.md), and the long
   names earlier releases shipped (`gateway_shim.glossary.RETIRED_SHIPPED_IDS`)
   stay reserved (no file could define them, none can). A file that uses a
   current shipped ID for a text of its own (written when that name was free)
   keeps it; that shipped text takes its retired ID in this glossary (it costs
   more tokens: ``kexpr glossary check`` shows each ID's cost).
4. The shim reads the data root's file with ``O_NOFOLLOW``, regular, owner/mode
   as the data root's other files (`kexpr.spool.fsio.read_private`), at most 64 KiB
   (`glossary_for_data_root`). A missing file means "shipped texts only"; any
   other problem makes the dual surface canonical
   (``IneligibleReason.GLOSSARY_INVALID``), with no request and zero files.
   `load_operator_glossary` reads a file anywhere (no-follow, regular, bounded;
   no owner rule): an operator's draft or a tool's argument.
4a. Style words (the contract's fit table, design §6.1): an operator ID takes its
   family's cell (a reason line after the first may take ``그리고``; a decision takes
   nothing) and may only NARROW it: ``unstyled`` lists reason IDs in force (the
   file's or the shipped ones) that take no word at all, for a text a conjunction
   would not read well before (one that opens with ``단``, say). Such a line is
   locked like the card's other bytes, never a slot. Nothing widens a cell: that is
   a code review of `kexpr.spool.contract.fit`. An ``unstyled`` entry that is not a
   reason ID in force, or appears twice, is ``unstyled_unknown``. A file without
   the key means the same as before it existed.
5. The worker never reads the texts: the IDs the shim issues travel in each
   capsule slot's allowed IDs; the worker's static instruction names the shipped
   IDs and the two open families (`kexpr.worker.instruction`).
6. ``kexpr glossary check FILE`` validates a file and prints its digest;
   ``kexpr glossary install FILE`` validates and publishes it into the data root;
   ``kexpr status`` shows the digest in force (`DualGlossary.digest`).
"""

from __future__ import annotations

import enum
import errno
import hashlib
import json
import os
import re
import stat
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

from gateway_shim.glossary import GLOSSARY, RETIRED_SHIPPED_IDS
from kexpr.spool.contract import SAFE_STYLE_LEXEMES
from kexpr.spool.contract.manifest import (
    DUAL_DECISION_ID_PATTERN,
    DUAL_DECISION_PREFIX,
    DUAL_REASON_ID_PATTERN,
    DUAL_REASON_PREFIX,
    OPEN_ID_MAX_CHARS,
    OPEN_ID_MAX_WORD,
)
from kexpr.spool.fsio import UnsafePath, read_bounded, read_private

__all__ = [
    "GLOSSARY_FILE_NAME",
    "GLOSSARY_VERSION",
    "SHIPPED_DUAL_GLOSSARY",
    "DualGlossary",
    "GlossaryError",
    "GlossaryProblem",
    "audit_text",
    "glossary_for_data_root",
    "id_problem",
    "load_operator_glossary",
    "parse_operator_glossary",
]

GLOSSARY_FILE_NAME: Final = "operator-glossary.json"
GLOSSARY_VERSION: Final = "kexpr-dual-glossary-v1"
MAX_FILE_BYTES: Final = 64 * 1024
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
    `parse_operator_glossary` / `load_operator_glossary`, or use
    ``SHIPPED_DUAL_GLOSSARY``.
    """

    decisions: Mapping[str, str]
    reasons: Mapping[str, str]
    operator: bool = False
    # Rule 4a: the reason IDs whose cell the operator narrowed to no word.
    unstyled: frozenset[str] = frozenset()
    _decision_by_text: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _reason_by_text: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _entries: Mapping[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        decisions = dict(self.decisions)
        reasons = dict(self.reasons)
        for family, prefix in ((decisions, _DECISION_PREFIX), (reasons, _REASON_PREFIX)):
            # Rule 3: the operator's own entries are bounded; the shipped texts
            # come on top (the file check in `_family` is the same boundary).
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
        # Rule 4a: only when used, so a file without it keeps its digest.
        if self.unstyled:
            document["unstyled"] = sorted(self.unstyled)
        data = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(data.encode("utf-8")).hexdigest()


def _shipped(prefix: str) -> dict[str, str]:
    return {i: t for i, t in GLOSSARY.items() if i.startswith(prefix)}


SHIPPED_DUAL_GLOSSARY: Final = DualGlossary(
    decisions=_shipped(_DECISION_PREFIX), reasons=_shipped(_REASON_PREFIX)
)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise GlossaryError(GlossaryProblem.DUPLICATE_KEY)
    return dict(pairs)


def _family(value: object, *, reasons: bool) -> dict[str, str]:
    if not isinstance(value, dict):
        raise GlossaryError(GlossaryProblem.NOT_OBJECT)
    if len(value) > MAX_ENTRIES_PER_FAMILY:
        raise GlossaryError(GlossaryProblem.TOO_MANY_ENTRIES)
    out: dict[str, str] = {}
    for semantic_id, text in value.items():
        if not isinstance(text, str):
            raise GlossaryError(GlossaryProblem.TEXT_NOT_STRING)
        if reasons:
            # Rule 1: a reason line ends in exactly one ".", a decision has none.
            if not text.endswith("."):
                raise GlossaryError(GlossaryProblem.TEXT_FINAL_PERIOD)
            text = text[:-1]
        elif text.endswith("."):
            raise GlossaryError(GlossaryProblem.TEXT_FINAL_PERIOD)
        out[semantic_id] = text
    return out


def parse_operator_glossary(data: bytes) -> DualGlossary:
    """The shipped entries plus the file's; raises `GlossaryError`."""
    if len(data) > MAX_FILE_BYTES:
        raise GlossaryError(GlossaryProblem.TOO_LARGE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GlossaryError(GlossaryProblem.NOT_UTF8) from e
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as e:
        if isinstance(e, GlossaryError):
            raise
        raise GlossaryError(GlossaryProblem.NOT_JSON) from e
    if not isinstance(document, dict):
        raise GlossaryError(GlossaryProblem.NOT_OBJECT)
    if (
        not {"version", "decisions", "reasons"}
        <= set(document)
        <= {
            "version",
            "decisions",
            "reasons",
            "unstyled",
        }
    ):
        raise GlossaryError(GlossaryProblem.WRONG_KEYS)
    if document["version"] != GLOSSARY_VERSION:
        raise GlossaryError(GlossaryProblem.WRONG_VERSION)
    decisions = _family(document["decisions"], reasons=False)
    reasons = _family(document["reasons"], reasons=True)
    shipped = SHIPPED_DUAL_GLOSSARY
    taken = {*decisions, *reasons}
    # Rule 3: a shipped ID may not be redefined, nor one an earlier release shipped.
    # Rule 3a: a current shipped ID the file already uses for its own text is the
    # file's; the shipped text takes back its retired ID.
    if any(i in RETIRED_SHIPPED_IDS for i in taken):
        raise GlossaryError(GlossaryProblem.ID_DUPLICATE)
    return DualGlossary(
        decisions={**_yield_taken(shipped.decisions, taken), **decisions},
        reasons={**_yield_taken(shipped.reasons, taken), **reasons},
        operator=True,
        unstyled=_unstyled(document.get("unstyled", [])),
    )


def _unstyled(value: object) -> frozenset[str]:
    """Rule 4a: a list of distinct strings (which must be reason IDs in force:
    `DualGlossary` checks that against the entries)."""
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise GlossaryError(GlossaryProblem.UNSTYLED_UNKNOWN)
    if len(set(value)) != len(value):
        raise GlossaryError(GlossaryProblem.UNSTYLED_UNKNOWN)
    return frozenset(value)


_RETIRED_ID_OF: Final = {new: old for old, new in RETIRED_SHIPPED_IDS.items()}


def _yield_taken(shipped: Mapping[str, str], taken: set[str]) -> dict[str, str]:
    """``shipped`` with each ID the operator's file uses renamed to its retired ID
    (Rule 3a). A shipped ID with no retired name is never yielded (it stays
    ``ID_DUPLICATE``: no earlier file could have used it)."""
    out: dict[str, str] = {}
    for semantic_id, text in shipped.items():
        if semantic_id in taken:
            retired = _RETIRED_ID_OF.get(semantic_id)
            if retired is None:
                raise GlossaryError(GlossaryProblem.ID_DUPLICATE)
            semantic_id = retired
        out[semantic_id] = text
    return out


def load_operator_glossary(path: Path | str) -> DualGlossary:
    """Read and validate a glossary file anywhere (an operator's draft, a
    ``surfaces check`` argument): ``O_NOFOLLOW``, a regular file, at most 64 KiB.
    Raises `GlossaryError` (``MISSING`` for an absent file). The shim itself reads
    the data root's file with `glossary_for_data_root`, which also checks the
    owner and mode."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError as e:
        raise GlossaryError(GlossaryProblem.MISSING) from e
    except OSError as e:
        problem = (
            GlossaryProblem.UNSAFE_FILE if e.errno == errno.ELOOP else GlossaryProblem.UNREADABLE
        )
        raise GlossaryError(problem) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GlossaryError(GlossaryProblem.UNSAFE_FILE)
        data = read_bounded(fd, st, MAX_FILE_BYTES)
    except UnsafePath as e:
        raise GlossaryError(GlossaryProblem.TOO_LARGE) from e
    except OSError as e:
        raise GlossaryError(GlossaryProblem.UNREADABLE) from e
    finally:
        os.close(fd)
    return parse_operator_glossary(data)


def glossary_for_data_root(root: Path | str) -> DualGlossary:
    """The glossary in force for a data root: ``<root>/operator-glossary.json``
    (rule 4: no-follow, owner and mode as the root's other files, bounded) plus
    the shipped texts, or the shipped texts alone when there is no file. Raises
    `GlossaryError` for a file that is there but not valid (the dual surface is
    then canonical)."""
    try:
        data = read_private(Path(root) / GLOSSARY_FILE_NAME, max_bytes=MAX_FILE_BYTES)
    except FileNotFoundError:
        return SHIPPED_DUAL_GLOSSARY
    except UnsafePath as e:
        raise GlossaryError(GlossaryProblem.UNSAFE_FILE) from e
    except OSError as e:
        raise GlossaryError(GlossaryProblem.UNREADABLE) from e
    return parse_operator_glossary(data)

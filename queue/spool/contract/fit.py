"""The fit table: which style word may stand before which sentence (design §6.1).

The grammar (`_grammar`) proves the *form* of a composition: lexicon words only,
every token once and in order. It cannot prove what the form is for — that a style
word leaves the sentence's claim as it is. Korean is verb-final: a word before a
sentence modifies its predicate or its first noun, so `가볍게 저장된 오늘 기록을
확인했습니다` says the record was glanced at, `잠시 … 보류` makes a hold temporary,
`아래 기록이 …` points at "the records below". This module holds the reviewed answer
as data, h11-style: the table is the rule, and both validators (the worker's
`judge`, the shim's re-validation in `render`) read it through `style_reason`.

Rules for this module:

Rule 1: a cell is (semantic ID, position) → the style runs that may stand directly
        before that ID's token. A position is the sentence's place in its run of
        sentences: `FIRST` (the first) or `LATER` (any other). A run is the slot,
        except for the dual card's review lines: the host writes them as one block of
        sentences, one line each, and the manifest makes each line a slot of its own
        (`adaptive.dual.review.N`), so line N > 1 is `LATER` (`position_of`). A style run is
        one lexeme and how it joins the token: with a comma (`먼저, [[P:01]]`) or with
        a plain space (`그리고 [[P:02]]`). The comma is part of the cell because it
        changes the reading: `먼저, X` orders the text, `먼저 X했습니다` says X was
        done first; `이어서, X` continues the text, `이어서 유지합니다` says "keep on
        keeping".
Rule 2: the default is NONE. A word is in a cell only if a reader of that
        sentence takes exactly the sentence's claim from it, with a different flow.
        Every entry and every exclusion has its reason in design §6.1 (one per word
        class, one per exception). A sentence with no words in any cell is never
        styled. A slot is offered to the model only if its cells leave it a
        choice, at least `MIN_CHOICES` compositions (`slot_styleable`): a slot with
        none has nothing to ask, and a slot with one would buy, with a call and a
        wait, a constant the code knows beforehand (the plan's "code-selected
        wrapper"; design §6.1). Otherwise the shim keeps the slot locked.
Rule 3: at most `MAX_LEXEMES_PER_SENTENCE` word before a sentence. Stacked
        connectives (`그리고 이어서`, `먼저 우선`) say nothing a single one does not, and
        read as filler. The plan's `max_style_lexemes` stays the slot's upper bound.
Rule 4: an open family's ID (an operator's `P_DUAL_DECISION_*` / `P_DUAL_REASON_*`,
        manifest Rule 5) takes its family's cell, `OPEN_FAMILY_FIT`. An operator can
        never widen it: nothing outside this module adds to a cell, and a wider
        cell is a code review of this table.
Rule 5: pure and total. Every function is a function of its arguments: no I/O, no
        clock; an ID the table does not know has no cell (the empty set), so an
        unknown ID can only make a composition fail, never pass.
Rule 6: a word is in a cell only with the blind readers' verdict (design §6.2):
        whole host messages with that word before that sentence read at least as
        well as the host's own text to every counted reader, and none finds a change
        of meaning (`reading/verdicts.json`; `tests/contract/test_reading_review.py`
        ties every non-empty cell to it).

Because every cell is finite and a sentence takes at most one word, the set of
compositions a slot accepts is finite: `compositions` lists them all. The rehearsal
model, the fake API, the bench and the instruction's examples draw from it, so what
an operator sees first is what a customer may see.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from .lexicon import SAFE_STYLE_LEXEMES
from .manifest import (
    ALL_SEMANTIC_IDS,
    DUAL_DECISION_ID_PATTERN,
    DUAL_REASON_ID_PATTERN,
    MANIFEST,
    tokens_for,
)
from .reasons import Reason

__all__ = [
    "FIT",
    "MAX_LEXEMES_PER_SENTENCE",
    "MIN_CHOICES",
    "OPEN_FAMILY_FIT",
    "OPEN_FAMILY_KINDS",
    "SENTENCE_KINDS",
    "Position",
    "SentenceKind",
    "Style",
    "cell",
    "composition_count",
    "compositions",
    "position_of",
    "slot_cells",
    "slot_styleable",
    "style_reason",
    "surface_styleable",
]

# Rule 3.
MAX_LEXEMES_PER_SENTENCE: Final = 1
# Rule 2: a slot is offered to the model only with a choice of compositions.
MIN_CHOICES: Final = 2


class Position(enum.StrEnum):
    """A sentence's place in its slot (Rule 1)."""

    FIRST = "first"
    LATER = "later"


# Rule 1: the slots that continue one run of sentences (each review line after the
# first follows the line before it).
_REVIEW_LINE: Final = re.compile(r"adaptive\.dual\.review\.(?P<n>[1-9])")


def position_of(slot_id: str, index: int) -> Position:
    """The position of the ``index``-th sentence (0-based) of slot ``slot_id``."""
    line = _REVIEW_LINE.fullmatch(slot_id)
    if index == 0 and (line is None or line["n"] == "1"):
        return Position.FIRST
    return Position.LATER


@dataclass(frozen=True, slots=True, order=True)
class Style:
    """One style run before a token: a lexeme, joined by ``", "`` or ``" "``."""

    lexeme: str
    comma: bool

    def __post_init__(self) -> None:
        if self.lexeme not in SAFE_STYLE_LEXEMES:
            raise ValueError("a style run is one lexicon word")

    @property
    def text(self) -> str:
        """The run as it stands before the token: ``"먼저, "`` or ``"그리고 "``."""
        return self.lexeme + (", " if self.comma else " ")


class SentenceKind(enum.StrEnum):
    """What a sentence does, as the instruction tells the model (IDs and kinds only)."""

    RECORDED = "a statement of what was recorded or observed"
    DECISION = "a decision or judgement the coach's code made"
    DECISION_LABEL = "a decision label after a fixed heading (a noun phrase, no verb)"
    REVIEW_REASON = "one line of a list of reasons an operator must review"
    PLAN = "a statement of what the coach's code will do next"
    INSTRUCTION = "an instruction to the operator"


_NONE: Final[frozenset[Style]] = frozenset()

# The words of the table (design §6.1 gives each its reason, §6.2 its readers' verdicts).
_BUT: Final = Style("다만", comma=True)  # a reservation after a finding (§6.1 a)
_BUT_NO_COMMA: Final = Style("다만", comma=False)  # the same, run on (§6.1 a)


def _cells(
    first: frozenset[Style] = _NONE, later: frozenset[Style] = _NONE
) -> Mapping[Position, frozenset[Style]]:
    return MappingProxyType({Position.FIRST: first, Position.LATER: later})


_UNSTYLED: Final = _cells()

# Rule 1/2: every shipped ID. design §6.1 gives the reason of every cell, and
# reading/verdicts.json the blind readers' verdict on it (Rule 6).
FIT: Final[Mapping[str, Mapping[Position, frozenset[Style]]]] = MappingProxyType(
    {
        # daily.status: every word read worse than the host's sentence (§6.2).
        "P_DAILY_COMPLETE": _UNSTYLED,
        "P_DAILY_PARTIAL": _UNSTYLED,
        # weekly.interpretation: the goal-missing branch's hold follows a finding it
        # qualifies ("the difference was checked; but with no target range the
        # adjustment is held"): 다만 names that relation, with or without its comma.
        # Every other line read worse with any word (§6.2).
        "P_WEEKLY_TREND_UNAVAILABLE": _UNSTYLED,
        "P_WEEKLY_TREND_OBSERVED": _UNSTYLED,
        "P_WEEKLY_IN_GOAL": _UNSTYLED,
        "P_WEEKLY_OUT_OF_GOAL": _UNSTYLED,
        "A_WEEKLY_RECHECK_AFTER_RECORD": _UNSTYLED,
        "A_WEEKLY_RECHECK_INPUT": _UNSTYLED,
        "A_WEEKLY_HOLD_FOR_MISSING_GOAL": _cells(later=frozenset({_BUT, _BUT_NO_COMMA})),
        "P_WEEKLY_KEEP_BASIS": _UNSTYLED,
        # weekly.rationale: every word read worse (§6.2).
        "A_WEEKLY_KEEP_BASELINE": _UNSTYLED,
        "A_WEEKLY_REVIEW_ADJUSTMENT": _UNSTYLED,
        "P_WEEKLY_RECORDS_INSUFFICIENT": _UNSTYLED,
        # adaptive.dual.judgment: a label's value, a noun phrase: nothing may stand
        # between a label and its value (§6.1 e). The review lines: every word read
        # worse (§6.2).
        "P_DUAL_DECISION_HOLD": _UNSTYLED,
        "P_DUAL_REASON_EDIT": _UNSTYLED,
        "P_DUAL_REASON_LATEST": _UNSTYLED,
        # adaptive.physique.review_instruction: 먼저 read worse (§6.2).
        "A_OPERATOR_REVIEW_DECISION": _UNSTYLED,
    }
)

# Rule 4: the operator's IDs take their family's cell: the same label and the same
# review block as the shipped dual texts (§6.1 e).
OPEN_FAMILY_FIT: Final[Mapping[str, Mapping[Position, frozenset[Style]]]] = MappingProxyType(
    {
        DUAL_DECISION_ID_PATTERN: _UNSTYLED,
        DUAL_REASON_ID_PATTERN: _UNSTYLED,
    }
)

# What each sentence is, for the instruction (IDs and kinds only, never a text).
SENTENCE_KINDS: Final[Mapping[str, SentenceKind]] = MappingProxyType(
    {
        "P_DAILY_COMPLETE": SentenceKind.RECORDED,
        "P_DAILY_PARTIAL": SentenceKind.RECORDED,
        "P_WEEKLY_TREND_UNAVAILABLE": SentenceKind.RECORDED,
        "P_WEEKLY_TREND_OBSERVED": SentenceKind.RECORDED,
        "P_WEEKLY_IN_GOAL": SentenceKind.RECORDED,
        "P_WEEKLY_OUT_OF_GOAL": SentenceKind.RECORDED,
        "A_WEEKLY_RECHECK_AFTER_RECORD": SentenceKind.PLAN,
        "A_WEEKLY_RECHECK_INPUT": SentenceKind.PLAN,
        "A_WEEKLY_HOLD_FOR_MISSING_GOAL": SentenceKind.DECISION,
        "P_WEEKLY_KEEP_BASIS": SentenceKind.DECISION,
        "A_WEEKLY_KEEP_BASELINE": SentenceKind.DECISION,
        "A_WEEKLY_REVIEW_ADJUSTMENT": SentenceKind.PLAN,
        "P_WEEKLY_RECORDS_INSUFFICIENT": SentenceKind.DECISION,
        "P_DUAL_DECISION_HOLD": SentenceKind.DECISION_LABEL,
        "P_DUAL_REASON_EDIT": SentenceKind.REVIEW_REASON,
        "P_DUAL_REASON_LATEST": SentenceKind.REVIEW_REASON,
        "A_OPERATOR_REVIEW_DECISION": SentenceKind.INSTRUCTION,
    }
)
OPEN_FAMILY_KINDS: Final[Mapping[str, SentenceKind]] = MappingProxyType(
    {
        DUAL_DECISION_ID_PATTERN: SentenceKind.DECISION_LABEL,
        DUAL_REASON_ID_PATTERN: SentenceKind.REVIEW_REASON,
    }
)


def _open_family(semantic_id: str) -> str | None:
    for pattern in OPEN_FAMILY_FIT:
        if re.fullmatch(pattern, semantic_id) is not None:
            return pattern
    return None


def cell(semantic_id: str, position: Position) -> frozenset[Style]:
    """The style runs that may stand before ``semantic_id``'s token at ``position``.

    A shipped ID's own cell; an open family's ID its family's (Rule 4); anything
    else none (Rule 5).
    """
    cells = FIT.get(semantic_id)
    if cells is None:
        family = _open_family(semantic_id)
        cells = _UNSTYLED if family is None else OPEN_FAMILY_FIT[family]
    return cells[position]


def slot_cells(slot_id: str, semantic_ids: Sequence[str]) -> tuple[frozenset[Style], ...]:
    """Each sentence's cell, for slot ``slot_id`` whose tokens stand for ``semantic_ids``."""
    return tuple(cell(i, position_of(slot_id, n)) for n, i in enumerate(semantic_ids))


def composition_count(cells: Sequence[frozenset[Style]]) -> int:
    """How many compositions a slot of these sentence cells accepts: each sentence
    carries no word or one of its cell's, and at least one carries a word."""
    count = 1
    for c in cells:
        count *= len(c) + 1
    return count - 1


def slot_styleable(slot_id: str, semantic_ids: Sequence[str]) -> bool:
    """True when the slot leaves the model a choice: at least `MIN_CHOICES`
    compositions (Rule 2)."""
    return composition_count(slot_cells(slot_id, semantic_ids)) >= MIN_CHOICES


def surface_styleable(surface: str) -> bool:
    """True when some message of ``surface`` has a slot the model is asked for: some
    branch of some of its slots (the manifest's; an open family's operator IDs with
    their family's cell, Rule 4) leaves a choice (`slot_styleable`). False: every
    message of the surface is presented `nothing_to_style` (design §6.2), and an
    unknown surface has no slot at all (Rule 5)."""
    for row in MANIFEST.values():
        if row.surface != surface:
            continue
        for slot_id in row.slot_ids:
            if any(slot_styleable(slot_id, branch) for branch in row.branches):
                return True
            if row.open_id_pattern is not None:
                # An open family's branch is one ID (manifest Rule 5).
                family = OPEN_FAMILY_FIT[row.open_id_pattern][position_of(slot_id, 0)]
                if composition_count((family,)) >= MIN_CHOICES:
                    return True
    return False


def compositions(slot_id: str, semantic_ids: Sequence[str]) -> tuple[str, ...]:
    """Every composition the table accepts for a slot of ``semantic_ids``, sorted.

    Each sentence carries no word or one run of its cell; at least one sentence
    carries a word (the grammar's "at least one lexeme").
    """
    tokens = tokens_for(semantic_ids)
    choices = [(None, *sorted(c)) for c in slot_cells(slot_id, semantic_ids)]
    out: list[str] = []
    for pick in itertools.product(*choices):
        if all(p is None for p in pick):
            continue
        out.append(
            " ".join(
                ("" if p is None else p.text) + t + "." for p, t in zip(pick, tokens, strict=True)
            )
        )
    return tuple(sorted(out))


# The style run before a token in a grammatical composition: words separated by one
# space, then ", " or " ". The grammar has already proven the shape (`_grammar`).
_RUN: Final = re.compile(r"(?P<words>[^ ,.\[\]]+(?: [^ ,.\[\]]+)*)(?P<join>, | )")


def style_reason(slot_id: str, semantic_ids: Sequence[str], generated_ko: str) -> Reason | None:
    """The table's verdict on a composition the grammar accepted for slot
    ``slot_id`` whose tokens stand for ``semantic_ids`` (None: every word fits).

    Precondition: ``generated_ko`` passed the grammar for these tokens; anything
    else is a caller bug and fails closed as ``style_misfit``. The reasons:
    ``stacked_style`` (more than `MAX_LEXEMES_PER_SENTENCE` words before a token,
    Rule 3), ``style_misfit`` (a word or its comma outside the cell, Rule 1).
    """
    tokens = tokens_for(semantic_ids)
    rest = generated_ko
    for n, (semantic_id, token) in enumerate(zip(semantic_ids, tokens, strict=True)):
        if n:
            if not rest.startswith(" "):
                return Reason.STYLE_MISFIT
            rest = rest[1:]
        at = rest.find(token)
        if at < 0:
            return Reason.STYLE_MISFIT
        before, rest = rest[:at], rest[at + len(token) :]
        if not rest.startswith("."):
            return Reason.STYLE_MISFIT
        rest = rest[1:]
        if not before:
            continue
        run = _RUN.fullmatch(before)
        if run is None:
            return Reason.STYLE_MISFIT
        words = run["words"].split(" ")
        if len(words) > MAX_LEXEMES_PER_SENTENCE:
            return Reason.STACKED_STYLE
        if words[0] not in SAFE_STYLE_LEXEMES:
            return Reason.STYLE_MISFIT
        style = Style(words[0], comma=run["join"] == ", ")
        if style not in cell(semantic_id, position_of(slot_id, n)):
            return Reason.STYLE_MISFIT
    if rest:
        return Reason.STYLE_MISFIT
    return None


def _check_table() -> None:
    # Rule 2, checked at import: the table covers exactly the shipped IDs and the
    # manifest's open families, and a cell is empty at every position its ID never
    # takes in any branch (no entry that a review could not have read in place).
    if set(FIT) != set(ALL_SEMANTIC_IDS) or set(SENTENCE_KINDS) != set(ALL_SEMANTIC_IDS):
        raise AssertionError("the fit table covers exactly the shipped semantic IDs")
    families = {r.open_id_pattern for r in MANIFEST.values() if r.open_id_pattern is not None}
    if set(OPEN_FAMILY_FIT) != families or set(OPEN_FAMILY_KINDS) != families:
        raise AssertionError("the fit table covers exactly the manifest's open families")
    taken: dict[str, set[Position]] = {}
    for row in MANIFEST.values():
        for slot_id in row.slot_ids:
            for branch in row.branches:
                for n, semantic_id in enumerate(branch):
                    taken.setdefault(semantic_id, set()).add(position_of(slot_id, n))
    for semantic_id, cells in FIT.items():
        if any(cells[p] for p in set(Position) - taken[semantic_id]):
            raise AssertionError("a cell at a position its ID never takes")


_check_table()

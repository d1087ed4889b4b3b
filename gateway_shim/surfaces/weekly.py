"""The ``weekly.v1`` surface: the host's weekly report (scheduled delivery).

This product's v1 canonical format (SPEC §7; plan "Canonical surfaces" and
"Per-slot semantic manifest"), LF line ends, no trailing newline::

    body           ::= title BLANK facts BLANK interpretation BLANK rationale
                       BLANK actions END
    title          ::= LINE                   ; must not start with "- "
    facts          ::= fact{7}                ; FACT_LABELS, exactly, in this order
    fact           ::= "- " LABEL ": " VALUE  ; facts, ranges, rates, judgment
    interpretation ::= "주간 해석" "\\n" TYPED(facts.interpretation)
    rationale      ::= "판단 근거" "\\n" TYPED(facts.rationale)
    actions        ::= "다음 주 할 일" ("\\n- " TEXT)+
    TYPED(branch)  ::= GLOSSARY[id] "." (" " GLOSSARY[id] ".")*  ; branch order
    BLANK          ::= "\\n\\n"
    LINE, VALUE, TEXT ::= non-empty, no control or line-break characters

Two slots, in body order: ``weekly.interpretation`` (one of the four typed
branches of the manifest, two tokens) and ``weekly.rationale`` (one of three
IDs, one token). Everything else — title, the seven fact bullets, both headings,
blank lines, the action heading and the actions in order — is locked.

Eligible ONLY when both paragraphs come from typed branches (plan manifest,
"Ineligible conditions"). The host says so in ``WeeklyFacts``; the checks run in
this order, each its own enum reason, all before any grammar (no content is
looked at to decide that the source was untyped):

1. the report source carried an explicit prose field (``interpretation``,
   ``trend_interpretation``, ``summary_text``, ``rationale``,
   ``judgment_rationale``, ``reason``)          → EXPLICIT_SOURCE_FIELD
2. it carried any other free-prose field         → UNTYPED_SOURCE_FIELD
3. the report took a branch with no typed ID     → UNSUPPORTED_BRANCH
4. then the body grammar, and each paragraph must be exactly the expansion of
   the host's branch (INTERPRETATION_/RATIONALE_TEXT_MISMATCH).

Canonical, no request, for all of them. The weekly host pins the final body in
its scheduled-delivery ledger before sending; a restart never re-presents it
(plan "Weekly pin-before-send and restart").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from spool.contract import MANIFEST

from gateway_shim.surfaces._model import (
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
)
from gateway_shim.surfaces._text import (
    BLANK,
    BULLET,
    LABEL_SEPARATOR,
    SegmentBuilder,
    bullet_value,
    check_body,
    is_line_text,
    paragraphs,
    parse_fact_bullets,
    sentences,
    typed_slot,
)

__all__ = [
    "ACTIONS_HEADING",
    "EXPLICIT_PROSE_FIELDS",
    "FACT_LABELS",
    "INTERPRETATION_HEADING",
    "INTERPRETATION_SLOT",
    "RATIONALE_HEADING",
    "RATIONALE_SLOT",
    "SURFACE",
    "WeeklyFacts",
    "WeeklyInterpretation",
    "WeeklyRationale",
    "format_weekly",
    "parse_weekly",
]

SURFACE: Final = "weekly.v1"
INTERPRETATION_SLOT: Final = "weekly.interpretation"
RATIONALE_SLOT: Final = "weekly.rationale"
# Period (range), weight facts, target range, rates, judgment.
FACT_LABELS: Final[tuple[str, ...]] = (
    "기간",
    "평균 체중",
    "체중 변화",
    "목표 범위",
    "주간 변화율",
    "기록률",
    "판단",
)
INTERPRETATION_HEADING: Final = "주간 해석"
RATIONALE_HEADING: Final = "판단 근거"
ACTIONS_HEADING: Final = "다음 주 할 일"
# The plan's explicit unstructured source fields: any of them makes the report
# ineligible even when its text happens to equal a typed expansion.
EXPLICIT_PROSE_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "interpretation",
        "trend_interpretation",
        "summary_text",
        "rationale",
        "judgment_rationale",
        "reason",
    }
)
# title, facts, interpretation, rationale, actions.
_PARAGRAPHS: Final = 5


class WeeklyInterpretation(enum.Enum):
    """The four typed interpretation branches, in the manifest's order.

    Each value is the branch's IDs in canonical branch order.
    """

    TREND_UNAVAILABLE = ("P_WEEKLY_TREND_UNAVAILABLE", "A_WEEKLY_RECHECK_AFTER_RECORD")
    GOAL_MISSING = ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL")
    IN_GOAL = ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS")
    OUT_OF_GOAL = ("P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT")

    @property
    def ids(self) -> tuple[str, ...]:
        ids: tuple[str, ...] = self.value
        return ids


class WeeklyRationale(enum.Enum):
    """The three typed rationale IDs, in the manifest's order."""

    KEEP_BASELINE = ("A_WEEKLY_KEEP_BASELINE",)
    REVIEW_ADJUSTMENT = ("A_WEEKLY_REVIEW_ADJUSTMENT",)
    RECORDS_INSUFFICIENT = ("P_WEEKLY_RECORDS_INSUFFICIENT",)

    @property
    def ids(self) -> tuple[str, ...]:
        ids: tuple[str, ...] = self.value
        return ids


def _check_branches_match_manifest() -> None:
    # The enums are the manifest's branches, same order: an edit to one without
    # the other fails at import instead of producing unconstructible slots.
    if tuple(b.ids for b in WeeklyInterpretation) != MANIFEST[INTERPRETATION_SLOT].branches:
        raise AssertionError("WeeklyInterpretation differs from the manifest")
    if tuple(b.ids for b in WeeklyRationale) != MANIFEST[RATIONALE_SLOT].branches:
        raise AssertionError("WeeklyRationale differs from the manifest")


_check_branches_match_manifest()


@dataclass(frozen=True, slots=True)
class WeeklyFacts:
    """Where the host's two weekly paragraphs came from.

    ``interpretation`` / ``rationale``: the typed branch the host's renderer took
    for each paragraph, or ``None`` when it took a branch with no typed ID.
    ``prose_fields``: the names of every free-prose field present in the report
    source the host rendered from (empty for a fully typed report).
    """

    interpretation: WeeklyInterpretation | None
    rationale: WeeklyRationale | None
    prose_fields: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.interpretation is not None and not isinstance(
            self.interpretation, WeeklyInterpretation
        ):
            raise TypeError("interpretation must be a WeeklyInterpretation or None")
        if self.rationale is not None and not isinstance(self.rationale, WeeklyRationale):
            raise TypeError("rationale must be a WeeklyRationale or None")
        if not isinstance(self.prose_fields, frozenset) or not all(
            isinstance(f, str) for f in self.prose_fields
        ):
            raise TypeError("prose_fields must be a frozenset of str")


# --- the reference renderer (the host's v1 format) --------------------------------


def format_weekly(
    *,
    title: str,
    facts: Sequence[tuple[str, str]] | Mapping[str, str],
    interpretation: WeeklyInterpretation,
    rationale: WeeklyRationale,
    actions: Sequence[str],
) -> str:
    """Render a canonical ``weekly.v1`` body from typed branches.

    ``facts`` is the seven ``(label, value)`` pairs in ``FACT_LABELS`` order or a
    mapping with exactly those keys. Raises ``ValueError`` on input the grammar
    cannot carry; the Telegram limit is an eligibility question for the parser.
    """
    if not is_line_text(title) or title.startswith(BULLET):
        raise ValueError("title must be one non-empty line not starting with a bullet")
    if isinstance(facts, Mapping):
        if set(facts) != set(FACT_LABELS):
            raise ValueError("facts must have exactly the seven weekly labels")
        pairs = [(label, facts[label]) for label in FACT_LABELS]
    else:
        pairs = list(facts)
        if [pair[0] for pair in pairs] != list(FACT_LABELS):
            raise ValueError("facts must be the seven weekly labels in order")
    if not all(is_line_text(value) for _, value in pairs):
        raise ValueError("each fact value must be one non-empty line")
    if not isinstance(interpretation, WeeklyInterpretation) or not isinstance(
        rationale, WeeklyRationale
    ):
        raise ValueError("interpretation and rationale must be typed branches")
    if isinstance(actions, str) or not actions or not all(is_line_text(a) for a in actions):
        raise ValueError("actions must be a non-empty sequence of non-empty lines")
    lines = [
        title,
        "",
        *(f"{BULLET}{label}{LABEL_SEPARATOR}{value}" for label, value in pairs),
        "",
        INTERPRETATION_HEADING,
        sentences(interpretation.ids),
        "",
        RATIONALE_HEADING,
        sentences(rationale.ids),
        "",
        ACTIONS_HEADING,
        *(f"{BULLET}{action}" for action in actions),
    ]
    return "\n".join(lines)


# --- the adapter --------------------------------------------------------------------


def parse_weekly(body: str, facts: WeeklyFacts) -> CanonicalSurface:
    """Parse a canonical ``weekly.v1`` body into locked segments and two slots.

    Raises ``Ineligible`` (the enum only, never content) unless both paragraphs
    come from typed branches and ``body`` is exactly the grammar above.
    """
    if not isinstance(facts, WeeklyFacts):
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    # Source provenance first: decided from the host's typed facts alone.
    if facts.prose_fields & EXPLICIT_PROSE_FIELDS:
        raise Ineligible(IneligibleReason.EXPLICIT_SOURCE_FIELD)
    if facts.prose_fields:
        raise Ineligible(IneligibleReason.UNTYPED_SOURCE_FIELD)
    if facts.interpretation is None or facts.rationale is None:
        raise Ineligible(IneligibleReason.UNSUPPORTED_BRANCH)

    check_body(body)
    parts = paragraphs(body)
    if len(parts) != _PARAGRAPHS:
        raise Ineligible(IneligibleReason.PARAGRAPH_COUNT_MISMATCH)
    title, fact_block, interpretation, rationale, actions = parts
    if "\n" in title or title.startswith(BULLET):
        raise Ineligible(IneligibleReason.TITLE_INVALID)
    parse_fact_bullets(fact_block, FACT_LABELS)
    interpretation_text = _section(interpretation, INTERPRETATION_HEADING)
    rationale_text = _section(rationale, RATIONALE_HEADING)
    _parse_actions(actions)
    # Grammar first, then the host's typed branches: the paragraph text must be
    # exactly their expansion (located by position, never by searching).
    if interpretation_text != sentences(facts.interpretation.ids):
        raise Ineligible(IneligibleReason.INTERPRETATION_TEXT_MISMATCH)
    if rationale_text != sentences(facts.rationale.ids):
        raise Ineligible(IneligibleReason.RATIONALE_TEXT_MISMATCH)

    built = SegmentBuilder()
    built.lock(title + BLANK + fact_block + BLANK + INTERPRETATION_HEADING + "\n")
    built.slot(typed_slot(INTERPRETATION_SLOT, facts.interpretation.ids))
    built.lock(BLANK + RATIONALE_HEADING + "\n")
    built.slot(typed_slot(RATIONALE_SLOT, facts.rationale.ids))
    built.lock(BLANK + actions)
    slots, segments = built.build()
    return CanonicalSurface(surface=SURFACE, body=body, slots=slots, segments=segments)


def _section(paragraph: str, heading: str) -> str:
    """section ::= HEADING "\\n" LINE; returns the line (the slot's text)."""
    head, sep, text = paragraph.partition("\n")
    if head != heading or not sep:
        raise Ineligible(IneligibleReason.SECTION_HEADING_MISMATCH)
    return text


def _parse_actions(paragraph: str) -> None:
    """actions ::= "다음 주 할 일" ("\\n- " TEXT)+."""
    heading, *lines = paragraph.split("\n")
    if heading != ACTIONS_HEADING:
        raise Ineligible(IneligibleReason.ACTIONS_HEADING_MISSING)
    if not lines:
        raise Ineligible(IneligibleReason.NO_ACTIONS)
    if any(bullet_value(line) is None for line in lines):
        raise Ineligible(IneligibleReason.ACTION_LINE_MALFORMED)

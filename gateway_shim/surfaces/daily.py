"""The ``daily.v1`` surface: the host's daily check-in summary.

This product's v1 canonical format (SPEC §7; plan "Daily cutover"), LF line
ends, no trailing newline::

    body     ::= title BLANK facts BLANK status BLANK actions END
    title    ::= LINE                    ; non-empty, must not start with "- "
    facts    ::= fact{7}                 ; FACT_LABELS, exactly, in this order
    fact     ::= "- " LABEL ": " VALUE   ; VALUE non-empty; "미기록" = missing
    status   ::= GLOSSARY[P_DAILY_COMPLETE] "."   ; when no VALUE is "미기록"
               | GLOSSARY[P_DAILY_PARTIAL] "."    ; otherwise
    actions  ::= "오늘 할 일" ("\\n- " TEXT)+
    BLANK    ::= "\\n\\n"
    LINE, VALUE, TEXT ::= no control or line-break characters

The status line is the only slot (``daily.status``, one placeholder ``[[P:01]]``);
every other byte — title, the seven fact lines, blank lines, heading, actions and
their order — is locked. The host passes the completeness it already computed
(``DailyFacts``); the adapter re-derives it from the seven rendered facts and
requires the host's flag, the derived value and the status text to agree. Any
mismatch, of any byte, is ``Ineligible`` with its own reason: canonical, no
request. Daily replay is canonical-only and never parsed for expression.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces._model import (
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    Locked,
    Placeholder,
    ProseSlot,
    SlotRef,
)
from gateway_shim.surfaces._text import (
    check_body,
    is_line_text,
    paragraphs,
)

__all__ = [
    "ACTIONS_HEADING",
    "FACT_LABELS",
    "MISSING_VALUE",
    "SLOT_ID",
    "SURFACE",
    "DailyFacts",
    "format_daily",
    "parse_daily",
]

SURFACE: Final = "daily.v1"
SLOT_ID: Final = "daily.status"
FACT_LABELS: Final[tuple[str, ...]] = ("체중", "식단", "단백질", "수분", "운동", "수면", "컨디션")
MISSING_VALUE: Final = "미기록"
ACTIONS_HEADING: Final = "오늘 할 일"

_COMPLETE_ID: Final = "P_DAILY_COMPLETE"
_PARTIAL_ID: Final = "P_DAILY_PARTIAL"
_TOKEN: Final = "[[P:01]]"
_BULLET: Final = "- "
_LABEL_SEPARATOR: Final = ": "
# Four paragraphs: title, facts, status, actions.
_PARAGRAPHS: Final = 4


@dataclass(frozen=True, slots=True)
class DailyFacts:
    """The typed fact the host already computed for this daily body."""

    complete: bool

    def __post_init__(self) -> None:
        if type(self.complete) is not bool:
            raise TypeError("complete must be a bool")


def _status_id(complete: bool) -> str:
    return _COMPLETE_ID if complete else _PARTIAL_ID


def _status_text(complete: bool) -> str:
    return GLOSSARY[_status_id(complete)] + "."




# --- the reference renderer (the host's v1 format) --------------------------------


def format_daily(
    *,
    title: str,
    facts: Sequence[tuple[str, str]] | Mapping[str, str],
    actions: Sequence[str],
) -> str:
    """Render a canonical ``daily.v1`` body; completeness comes from the facts.

    ``facts`` is either the seven ``(label, value)`` pairs in ``FACT_LABELS`` order
    or a mapping with exactly those keys. Raises ``ValueError`` on input the
    grammar cannot carry. Does not enforce the Telegram length limit: that is an
    eligibility question for ``parse_daily``.
    """
    if not isinstance(title, str) or not is_line_text(title) or title.startswith(_BULLET):
        raise ValueError("title must be one non-empty line not starting with a bullet")
    if isinstance(facts, Mapping):
        if set(facts) != set(FACT_LABELS):
            raise ValueError("facts must have exactly the seven daily labels")
        pairs = [(label, facts[label]) for label in FACT_LABELS]
    else:
        pairs = list(facts)
        if [pair[0] for pair in pairs] != list(FACT_LABELS):
            raise ValueError("facts must be the seven daily labels in order")
    values = [value for _, value in pairs]
    if not all(isinstance(v, str) and is_line_text(v) for v in values):
        raise ValueError("each fact value must be one non-empty line")
    if isinstance(actions, str) or not actions:
        raise ValueError("actions must be a non-empty sequence of lines")
    if not all(isinstance(a, str) and is_line_text(a) for a in actions):
        raise ValueError("each action must be one non-empty line")
    complete = MISSING_VALUE not in values
    lines = [
        title,
        "",
        *(f"{_BULLET}{label}{_LABEL_SEPARATOR}{value}" for label, value in pairs),
        "",
        _status_text(complete),
        "",
        ACTIONS_HEADING,
        *(f"{_BULLET}{action}" for action in actions),
    ]
    return "\n".join(lines)


# --- the adapter --------------------------------------------------------------------


def parse_daily(body: str, facts: DailyFacts) -> CanonicalSurface:
    """Parse a canonical ``daily.v1`` body into locked segments and its one slot.

    Raises ``Ineligible`` (the enum only, never content) unless ``body`` is exactly
    the grammar above and its status agrees with the facts and with ``facts``.
    """
    if not isinstance(facts, DailyFacts):
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    check_body(body)
    parts = _paragraphs(body)
    _parse_title(parts[0])
    derived_complete = _parse_facts(parts[1])
    status_line = _parse_status(parts[2], derived_complete)
    _parse_actions(parts[3])
    # Grammar first, then the host's typed fact: all three must agree.
    if facts.complete != derived_complete:
        raise Ineligible(IneligibleReason.HOST_FACTS_MISMATCH)

    # The status paragraph is the whole third paragraph: one line, located by
    # paragraph position, never by searching for its text.
    prefix = "\n\n".join(parts[0:2]) + "\n\n"
    suffix = "\n\n" + parts[3]
    status_id = _status_id(derived_complete)
    slot = ProseSlot(
        slot_id=SLOT_ID,
        placeholders=(
            Placeholder(token=_TOKEN, semantic_id=status_id, expansion=GLOSSARY[status_id]),
        ),
        canonical_text=status_line,
    )
    return CanonicalSurface(
        surface=SURFACE,
        body=body,
        slots=(slot,),
        segments=(Locked(prefix), SlotRef(0), Locked(suffix)),
    )


def _paragraphs(body: str) -> list[str]:
    """paragraphs ::= PARAGRAPH ("\\n\\n" PARAGRAPH){3}, no empty line elsewhere."""
    found = paragraphs(body)
    if len(found) != _PARAGRAPHS:
        raise Ineligible(IneligibleReason.PARAGRAPH_COUNT_MISMATCH)
    return found


def _parse_title(paragraph: str) -> None:
    """title ::= LINE, one line, not starting with "- "."""
    if "\n" in paragraph or paragraph.startswith(_BULLET):
        raise Ineligible(IneligibleReason.TITLE_INVALID)


def _parse_facts(paragraph: str) -> bool:
    """facts ::= ("- " LABEL ": " VALUE){7} in FACT_LABELS order; returns completeness."""
    labels: list[str] = []
    values: list[str] = []
    for line in paragraph.split("\n"):
        if not line.startswith(_BULLET) or _LABEL_SEPARATOR not in line:
            raise Ineligible(IneligibleReason.FACT_LINE_MALFORMED)
        label, value = line[len(_BULLET) :].split(_LABEL_SEPARATOR, 1)
        labels.append(label)
        values.append(value)
    if any(label not in FACT_LABELS for label in labels):
        raise Ineligible(IneligibleReason.FACT_LABEL_UNKNOWN)
    if len(set(labels)) != len(labels):
        raise Ineligible(IneligibleReason.FACT_LABEL_DUPLICATE)
    if len(labels) != len(FACT_LABELS):
        raise Ineligible(IneligibleReason.FACT_LABEL_MISSING)
    if tuple(labels) != FACT_LABELS:
        raise Ineligible(IneligibleReason.FACT_LABEL_ORDER)
    if any(value == "" for value in values):
        raise Ineligible(IneligibleReason.FACT_VALUE_EMPTY)
    return MISSING_VALUE not in values


def _parse_status(paragraph: str, derived_complete: bool) -> str:
    """status ::= the exact expansion for the derived completeness, plus "."."""
    if paragraph not in (_status_text(True), _status_text(False)):
        raise Ineligible(IneligibleReason.STATUS_TEXT_MISMATCH)
    if paragraph != _status_text(derived_complete):
        raise Ineligible(IneligibleReason.STATUS_COMPLETENESS_MISMATCH)
    return paragraph


def _parse_actions(paragraph: str) -> None:
    """actions ::= "오늘 할 일" ("\\n- " TEXT)+."""
    heading, *lines = paragraph.split("\n")
    if heading != ACTIONS_HEADING:
        raise Ineligible(IneligibleReason.ACTIONS_HEADING_MISSING)
    if not lines:
        raise Ineligible(IneligibleReason.NO_ACTIONS)
    if any(not line.startswith(_BULLET) or line == _BULLET for line in lines):
        raise Ineligible(IneligibleReason.ACTION_LINE_MALFORMED)

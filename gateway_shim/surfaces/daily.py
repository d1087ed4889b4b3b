"""The ``daily.v1`` surface: the host's daily check-in reply, byte for byte.

The host (Hermes@4305027f, ``gateway/platforms/telegram.py``:
``TelegramAdapter._nutrition_daily_text``; docs/host-formats.md §daily) renders,
LF line ends, no trailing newline::

    body     ::= TITLE BLANK facts BLANK status BLANK HEADING BLANK actions END
    TITLE    ::= "오늘 체크인 완료"
    facts    ::= "- 체중: " VALUE "\\n- 섭취: " VALUE "\\n- " TEXT
                 "\\n- 운동: " VALUE "\\n- 수면: " VALUE "\\n- 컨디션: " VALUE
                 "\\n- 소화: " VALUE          ; line 3 (macros) has no label
    status   ::= GLOSSARY[P_DAILY_COMPLETE] "."   ; no fact is missing
               | GLOSSARY[P_DAILY_PARTIAL] "."    ; some fact is missing
    HEADING  ::= "오늘 할 일"
    actions  ::= "- " MISSING_ACTION                          ; some fact missing
               | "- 현재 식사량 유지" ("\\n- 수분 " TEXT " 이상 유지")?
                 "\\n- 내일 아침 같은 조건으로 체중 측정"      ; none missing
    BLANK    ::= "\\n\\n"
    VALUE, TEXT ::= non-empty customer text: no control or line-break character
                 (``·``, ``:``, ``/`` and anything else allowed)

Rules of this module:

Rule 1 — "missing" is the host's own rule on the seven RENDERED fact strings (the
line after ``"- "``): any of them ends with ``기록 없음``. It is derived from
the text, never from a value the caller claims; a host may also pass its typed
``DailyFacts``, and a disagreement is ``HOST_FACTS_MISMATCH``.

Rule 2 — the status is the plan's cutover sentence for that completeness, one
line. Every other status is not a canonical post-cutover body and each gets its
own reason: two lines (the pinned commit's model feedback) →
``STATUS_LINE_COUNT``; any other line (model feedback, the host's own
humanizer output, a selected body fed back) → ``STATUS_TEXT_MISMATCH``; complete
facts with the partial sentence (the pinned commit's fallback) →
``STATUS_PRE_CUTOVER``; missing facts with the complete sentence →
``STATUS_COMPLETENESS_MISMATCH``.

Rule 3 — the actions are the host's fixed rule (``_nutrition_daily_actions``)
and are checked exactly: partial → the one ``MISSING_ACTION``; complete → intake,
optional water (its amount is customer text), bodyweight, in that order.

The status line is the only slot (``daily.status``, one token ``[[P:01]]``);
every other byte is locked. Any mismatch is ``Ineligible`` with its enum reason,
never content: canonical, no request. Daily replay is canonical-only and never
parsed for expression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces._model import CanonicalSurface, Ineligible, IneligibleReason
from gateway_shim.surfaces._text import (
    BLANK,
    BULLET,
    SegmentBuilder,
    check_body,
    is_line_text,
    paragraphs,
    typed_slot,
)

__all__ = [
    "ACTIONS_HEADING",
    "ACTION_BODYWEIGHT",
    "ACTION_INTAKE",
    "FACT_KEYS",
    "FACT_PREFIXES",
    "MACROS_MISSING",
    "MISSING_ACTION",
    "MISSING_MARKER",
    "SLOT_ID",
    "SURFACE",
    "TITLE",
    "DailyFacts",
    "format_daily",
    "parse_daily",
    "water_action",
]

SURFACE: Final = "daily.v1"
SLOT_ID: Final = "daily.status"
TITLE: Final = "오늘 체크인 완료"
ACTIONS_HEADING: Final = "오늘 할 일"
# The rendered fact lines in order: the text between "- " and the value. The
# third line (macros) has no label: its whole text is the value.
FACT_KEYS: Final[tuple[str, ...]] = (
    "weight",
    "intake",
    "macros",
    "training",
    "sleep",
    "condition",
    "digestion",
)
FACT_PREFIXES: Final[tuple[str, ...]] = (
    "체중: ",
    "섭취: ",
    "",
    "운동: ",
    "수면: ",
    "컨디션: ",
    "소화: ",
)
MISSING_MARKER: Final = "기록 없음"
MACROS_MISSING: Final = "탄수화물·단백질·지방: " + MISSING_MARKER
MISSING_ACTION: Final = "다음 체크인에서 빠진 항목을 함께 기록해 주세요."
ACTION_INTAKE: Final = "현재 식사량 유지"
ACTION_BODYWEIGHT: Final = "내일 아침 같은 조건으로 체중 측정"
_WATER_PREFIX: Final = "수분 "
_WATER_SUFFIX: Final = " 이상 유지"

_COMPLETE_ID: Final = "P_DAILY_COMPLETE"
_PARTIAL_ID: Final = "P_DAILY_PARTIAL"
# title, facts, status, heading, actions.
_PARAGRAPHS: Final = 5


@dataclass(frozen=True, slots=True)
class DailyFacts:
    """The completeness the host computed for this daily body (optional input)."""

    complete: bool

    def __post_init__(self) -> None:
        if type(self.complete) is not bool:
            raise TypeError("complete must be a bool")


def _status_id(complete: bool) -> str:
    return _COMPLETE_ID if complete else _PARTIAL_ID


def _status_text(complete: bool) -> str:
    return GLOSSARY[_status_id(complete)] + "."


def water_action(amount: str) -> str:
    """The host's water action for a rendered amount (``"2.8L"``)."""
    return _WATER_PREFIX + amount + _WATER_SUFFIX


def _is_missing(fact: str) -> bool:
    """Rule 1: the host's rule on one rendered fact string."""
    return fact.endswith(MISSING_MARKER)


# --- the reference renderer (layout only) ------------------------------------------


def format_daily(
    *,
    weight: str,
    intake: str,
    macros: str,
    training: str,
    sleep: str,
    condition: str,
    digestion: str,
    water: str | None = None,
) -> str:
    """Lay out a canonical ``daily.v1`` body from the seven RENDERED values.

    Each value is the text after its label (``weight="78.6kg"``; ``macros`` is
    the whole unlabelled third line, ``MACROS_MISSING`` when not recorded);
    ``MISSING_MARKER`` marks a missing fact. ``water`` is the rendered water
    amount (``"2.8L"``) or ``None``. Status and actions follow from the values by
    the host's rules. This is the layout, not the host's value formatting (see
    docs/host-formats.md). Raises ``ValueError`` on a value the grammar cannot
    carry; the Telegram limit is an eligibility question for ``parse_daily``.
    """
    values = (weight, intake, macros, training, sleep, condition, digestion)
    if not all(is_line_text(v) for v in values):
        raise ValueError("each fact value must be one non-empty line")
    if water is not None and not is_line_text(water):
        raise ValueError("water must be one non-empty line or None")
    facts = [prefix + value for prefix, value in zip(FACT_PREFIXES, values, strict=True)]
    complete = not any(_is_missing(f) for f in facts)
    lines = [
        TITLE,
        "",
        *(BULLET + f for f in facts),
        "",
        _status_text(complete),
        "",
        ACTIONS_HEADING,
        "",
        *(BULLET + a for a in _host_actions(complete, water)),
    ]
    return "\n".join(lines)


def _host_actions(complete: bool, water: str | None) -> list[str]:
    if not complete:
        return [MISSING_ACTION]
    middle = [] if water is None else [water_action(water)]
    return [ACTION_INTAKE, *middle, ACTION_BODYWEIGHT]


# --- the adapter --------------------------------------------------------------------


def parse_daily(body: str, facts: DailyFacts | None = None) -> CanonicalSurface:
    """Parse a canonical ``daily.v1`` body into locked segments and its one slot.

    ``facts``: the host's typed completeness, if it has one. Raises
    ``Ineligible`` (the enum only, never content) unless ``body`` is exactly the
    grammar above, its status is the cutover sentence for the completeness the
    seven facts give, and ``facts`` (when given) agrees.
    """
    if facts is not None and not isinstance(facts, DailyFacts):
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    check_body(body)
    parts = paragraphs(body)
    if len(parts) != _PARAGRAPHS:
        raise Ineligible(IneligibleReason.PARAGRAPH_COUNT_MISMATCH)
    title, fact_block, status, heading, actions = parts
    if title != TITLE:
        raise Ineligible(IneligibleReason.TITLE_INVALID)
    complete = _parse_facts(fact_block)
    _parse_status(status, complete)
    if heading != ACTIONS_HEADING:
        raise Ineligible(IneligibleReason.ACTIONS_HEADING_MISSING)
    _parse_actions(actions, complete)
    # Grammar first, then the host's typed fact (Rule 1).
    if facts is not None and facts.complete != complete:
        raise Ineligible(IneligibleReason.HOST_FACTS_MISMATCH)

    # The status is the whole third paragraph, located by position, never by
    # searching for its text; its typed text is the paragraph (Rule 2).
    built = SegmentBuilder()
    built.lock(title + BLANK + fact_block + BLANK)
    built.slot(typed_slot(SLOT_ID, (_status_id(complete),)))
    built.lock(BLANK + heading + BLANK + actions)
    slots, segments = built.build()
    return CanonicalSurface(surface=SURFACE, body=body, slots=slots, segments=segments)


def _parse_facts(paragraph: str) -> bool:
    """facts ::= seven "- " PREFIX_i VALUE lines; returns completeness (Rule 1)."""
    lines = paragraph.split("\n")
    if any(not line.startswith(BULLET) for line in lines):
        raise Ineligible(IneligibleReason.FACT_LINE_MALFORMED)
    if len(lines) != len(FACT_PREFIXES):
        raise Ineligible(IneligibleReason.FACT_COUNT_MISMATCH)
    facts = [line[len(BULLET) :] for line in lines]
    labelled = [p for p in FACT_PREFIXES if p]
    for fact, prefix in zip(facts, FACT_PREFIXES, strict=True):
        if not fact.startswith(prefix):
            # Another of the host's labels here is a reordering; anything else
            # (the old invented 식단/단백질/수분 lines) is an unknown label.
            if any(fact.startswith(p) for p in labelled):
                raise Ineligible(IneligibleReason.FACT_LABEL_ORDER)
            raise Ineligible(IneligibleReason.FACT_LABEL_UNKNOWN)
        if fact == prefix or fact[len(prefix) :].strip() == "":
            raise Ineligible(IneligibleReason.FACT_VALUE_EMPTY)
    return not any(_is_missing(f) for f in facts)


def _parse_status(paragraph: str, complete: bool) -> None:
    """status ::= the cutover sentence for ``complete`` (Rule 2)."""
    if "\n" in paragraph:
        raise Ineligible(IneligibleReason.STATUS_LINE_COUNT)
    if paragraph not in (_status_text(True), _status_text(False)):
        raise Ineligible(IneligibleReason.STATUS_TEXT_MISMATCH)
    if paragraph != _status_text(complete):
        raise Ineligible(
            IneligibleReason.STATUS_PRE_CUTOVER
            if complete
            else IneligibleReason.STATUS_COMPLETENESS_MISMATCH
        )


def _parse_actions(paragraph: str, complete: bool) -> None:
    """actions ::= the host's actions for ``complete`` (Rule 3)."""
    lines = paragraph.split("\n")
    if any(line[: len(BULLET)] != BULLET or line == BULLET for line in lines):
        raise Ineligible(IneligibleReason.ACTION_LINE_MALFORMED)
    actions = [line[len(BULLET) :] for line in lines]
    if not complete:
        expected_ok = actions == [MISSING_ACTION]
    elif len(actions) == 2:
        expected_ok = actions == [ACTION_INTAKE, ACTION_BODYWEIGHT]
    else:
        expected_ok = (
            len(actions) == 3
            and actions[0] == ACTION_INTAKE
            and actions[2] == ACTION_BODYWEIGHT
            and _is_water_action(actions[1])
        )
    if not expected_ok:
        raise Ineligible(IneligibleReason.ACTION_TEXT_MISMATCH)


def _is_water_action(action: str) -> bool:
    """``"수분 " AMOUNT " 이상 유지"`` with a non-blank customer AMOUNT."""
    if not (action.startswith(_WATER_PREFIX) and action.endswith(_WATER_SUFFIX)):
        return False
    amount = action[len(_WATER_PREFIX) : len(action) - len(_WATER_SUFFIX)]
    return len(action) >= len(_WATER_PREFIX) + len(_WATER_SUFFIX) and amount.strip() != ""

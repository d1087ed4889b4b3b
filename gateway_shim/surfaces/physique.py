"""The ``adaptive.physique.card.v1`` surface: the physique-coach operator card.

The payload is the enveloped card of ``gateway_shim.surfaces.card``; only a fresh
``status == "card"`` is eligible. This product's v1 grammar of the SOURCE card
``text`` (SPEC §7; plan "Adaptive schemas and publication boundary", physique
parser: "its current ordered source grammar and final exact status"), LF line
ends, no trailing newline::

    text     ::= title "\\n" SEPARATOR "\\n" lines "\\n\\n" STATUS
    title    ::= TITLE_PREFIX LINE?           ; the prefix, then locked host text
    SEPARATOR::= ENVELOPE_SEPARATOR_LINE
    lines    ::= "고객: " VALUE
                 "\\n기준일: " VALUE " (D+" COUNT ")"  ; customer / day / D+
                 "\\n결정: " VALUE
                 "\\n근거: " VALUE
                 ("\\n목표: " VALUE)? ("\\n주기: " VALUE)?   ; target, cycle,
                 ("\\n식단: " VALUE)? ("\\n메모: " VALUE)?   ; meal, note: in this order
    STATUS   ::= "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
    COUNT    ::= "0" | [1-9][0-9]*
    VALUE    ::= non-empty, no control or line-break characters

The canonical PRESENTATION is a projection of that source (plan, physique
parser): immediately before the final status line the adapter adds the
code-owned block::

    검토 안내
    제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.
    <blank line>

so the presented body is ``source_without_status + "검토 안내\\n" + SENTENCE +
"\\n\\n" + STATUS``. Every source byte is kept, in order, inside the two locked
segments; only the sentence is a slot (``adaptive.physique.review_instruction``,
``A_OPERATOR_REVIEW_DECISION``, token ``[[A:01]]``). It is a presentation
action, not a proposal field and not an approval or delivery state.

The projection exists only for an eligible fresh card presented with the
feature on: a disabled or ineligible card is published as its source text,
byte for byte. A text that already carries the block (a projected payload fed
back) does not match the source grammar: ineligible, so a persisted card is
never projected twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces._model import (
    TELEGRAM_MAX_UTF16,
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    utf16_len,
)
from gateway_shim.surfaces._text import (
    BLANK,
    LABEL_SEPARATOR,
    SegmentBuilder,
    check_body,
    check_labels,
    is_line_text,
    paragraphs,
    typed_slot,
)
from gateway_shim.surfaces.card import (
    ENVELOPE_SEPARATOR_LINE,
    PHYSIQUE_SURFACE,
    AdaptiveBinding,
    fresh_card,
)

__all__ = [
    "LINE_LABELS",
    "REQUIRED_LABELS",
    "REVIEW_HEADING",
    "REVIEW_INSTRUCTION_ID",
    "REVIEW_SLOT",
    "STATUS_LINE",
    "SURFACE",
    "TITLE_PREFIX",
    "format_physique_card",
    "parse_physique_card",
]

SURFACE: Final = PHYSIQUE_SURFACE
REVIEW_SLOT: Final = "adaptive.physique.review_instruction"
REVIEW_INSTRUCTION_ID: Final = "A_OPERATOR_REVIEW_DECISION"
TITLE_PREFIX: Final = "[피지크 코치] 적응형 영양 제안"
REVIEW_HEADING: Final = "검토 안내"
STATUS_LINE: Final = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
# Customer, day (with D+), decision, basis; then the optional target, cycle,
# meal and note lines, each at most once, in this order.
LINE_LABELS: Final[tuple[str, ...]] = (
    "고객",
    "기준일",
    "결정",
    "근거",
    "목표",
    "주기",
    "식단",
    "메모",
)
REQUIRED_LABELS: Final[tuple[str, ...]] = LINE_LABELS[:4]
_DAY_LABEL: Final = "기준일"
_DAY_RE: Final = re.compile(r"(?P<day>.+) \(D\+(?:0|[1-9][0-9]*)\)")
# title+lines, status.
_PARAGRAPHS: Final = 2
# What the projection inserts before the status line (its length is reserved
# out of Telegram's limit before parsing).
_PROJECTION: Final = REVIEW_HEADING + "\n" + GLOSSARY[REVIEW_INSTRUCTION_ID] + "." + BLANK


# --- the reference renderer (the host's v1 format) --------------------------------


def format_physique_card(
    *,
    title: str,
    customer: str,
    day: str,
    day_count: int,
    decision: str,
    basis: str,
    target: str | None = None,
    cycle: str | None = None,
    meal: str | None = None,
    note: str | None = None,
) -> str:
    """Render the SOURCE ``text`` of a v1 physique card (without the projection).

    ``title`` is the locked text after ``TITLE_PREFIX`` ("" for the bare prefix).
    Raises ``ValueError`` on input the grammar cannot carry.
    """
    if not isinstance(title, str) or (title and not is_line_text(title)):
        raise ValueError("title must be one line")
    if type(day_count) is not int or day_count < 0:
        raise ValueError("day_count must be a non-negative int")
    values = (customer, f"{day} (D+{day_count})", decision, basis, target, cycle, meal, note)
    lines = [TITLE_PREFIX + (" · " + title if title else ""), ENVELOPE_SEPARATOR_LINE]
    for label, value in zip(LINE_LABELS, values, strict=True):
        if value is None and label not in REQUIRED_LABELS:
            continue
        if not is_line_text(value) or (label == _DAY_LABEL and not is_line_text(day)):
            raise ValueError("each line value must be non-empty, without control characters")
        lines.append(label + LABEL_SEPARATOR + str(value))
    return "\n".join(lines) + BLANK + STATUS_LINE


# --- the adapter --------------------------------------------------------------------


def parse_physique_card(
    payload: Mapping[str, object], binding: AdaptiveBinding
) -> CanonicalSurface:
    """Parse a fresh physique card into its canonical presentation projection.

    The returned surface's ``body`` is the projection (source plus the review
    block); raises ``Ineligible`` (the enum only, never content) unless
    ``payload`` is a fresh card bound to ``binding`` whose text is exactly the
    source grammar above and whose projection fits Telegram's limit.
    """
    card = fresh_card(payload, binding, SURFACE)
    # The presented body must fit: reserve the projection's own length.
    text = check_body(card.text, max_utf16=TELEGRAM_MAX_UTF16 - utf16_len(_PROJECTION))
    parts = paragraphs(text)
    if len(parts) != _PARAGRAPHS:
        raise Ineligible(IneligibleReason.PARAGRAPH_COUNT_MISMATCH)
    _parse_lines(parts[0])
    if parts[1] != STATUS_LINE:
        raise Ineligible(IneligibleReason.FINAL_LINE_MISSING)

    source_head = text[: len(text) - len(STATUS_LINE)]  # ends with the blank line
    built = SegmentBuilder()
    built.lock(source_head + REVIEW_HEADING + "\n")
    built.slot(typed_slot(REVIEW_SLOT, (REVIEW_INSTRUCTION_ID,)))
    built.lock(BLANK + STATUS_LINE)
    slots, segments = built.build()
    body = source_head + _PROJECTION + STATUS_LINE
    return CanonicalSurface(surface=SURFACE, body=body, slots=slots, segments=segments)


def _parse_lines(paragraph: str) -> None:
    """title SEPARATOR lines, in LINE_LABELS order with the four required ones."""
    lines = paragraph.split("\n")
    if not lines[0].startswith(TITLE_PREFIX):
        raise Ineligible(IneligibleReason.TITLE_INVALID)
    if len(lines) < 2 or lines[1] != ENVELOPE_SEPARATOR_LINE:
        raise Ineligible(IneligibleReason.ENVELOPE_SEPARATOR_MISSING)
    labels: list[str] = []
    values: list[str] = []
    for line in lines[2:]:
        if LABEL_SEPARATOR not in line:
            raise Ineligible(IneligibleReason.FACT_LINE_MALFORMED)
        label, value = line.split(LABEL_SEPARATOR, 1)
        labels.append(label)
        values.append(value)
    check_labels(labels, LINE_LABELS, required=REQUIRED_LABELS)
    if any(value == "" for value in values):
        raise Ineligible(IneligibleReason.FACT_VALUE_EMPTY)
    if _DAY_RE.fullmatch(values[labels.index(_DAY_LABEL)]) is None:
        raise Ineligible(IneligibleReason.DAY_COUNT_MALFORMED)

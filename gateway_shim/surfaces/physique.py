"""The ``adaptive.physique.card.v1`` surface: the physique-coach operator card.

The payload and its envelope lines are ``gateway_shim.surfaces.card``'s. The
BODY is rendered by the host's private physique-coach profile; nothing of it is
public (docs/host-formats-adaptive.md). The plan gives its labels ``결정: `` and
``근거: `` and its exact final status line; everything else (title,
customer/day/D+ lines, target/cycle/meal/note lines, blank lines) is private,
locked, and not required to have any format::

    body ::= ANY "\\n" ... exactly one line "결정: " VALUE, then exactly one line
             "근거: " VALUE, ... "\\n" STATUS_LINE           (the body's last line)
    STATUS_LINE ::= "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"

The canonical PRESENTATION is a projection of that body (plan, physique
parser): the two lines ::

    검토 안내
    제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.

are inserted immediately before the final status line, each ending in "\\n".
The host's layout is kept as it is: no blank line is added or removed, so a
blank line the host put before the status line now sits before ``검토 안내``,
and the status line directly follows the sentence. Only the sentence is a slot
(``adaptive.physique.review_instruction``, ``A_OPERATOR_REVIEW_DECISION``).

A body that already carries the block (a projected text fed back) is
``REVIEW_NOTICE_PRESENT``: a persisted card is never projected twice.
"""

from __future__ import annotations

from typing import Final

from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces._model import (
    TELEGRAM_MAX_UTF16,
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    utf16_len,
)
from gateway_shim.surfaces._text import SegmentBuilder, check_body, typed_slot
from gateway_shim.surfaces.card import PHYSIQUE_SURFACE

__all__ = [
    "BASIS_LABEL",
    "DECISION_LABEL",
    "REVIEW_HEADING",
    "REVIEW_INSTRUCTION_ID",
    "REVIEW_NOTICE",
    "REVIEW_SLOT",
    "STATUS_LINE",
    "SURFACE",
    "is_physique_body",
    "parse_physique_body",
    "strip_review_notice",
]

SURFACE: Final = PHYSIQUE_SURFACE
REVIEW_SLOT: Final = "adaptive.physique.review_instruction"
REVIEW_INSTRUCTION_ID: Final = "A_OPERATOR_REVIEW_DECISION"
REVIEW_HEADING: Final = "검토 안내"
STATUS_LINE: Final = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
DECISION_LABEL: Final = "결정: "
BASIS_LABEL: Final = "근거: "
# What the projection inserts right before the status line.
REVIEW_NOTICE: Final = REVIEW_HEADING + "\n" + GLOSSARY[REVIEW_INSTRUCTION_ID] + ".\n"


def is_physique_body(body: str) -> bool:
    """The two card grammars are disjoint: a physique body ends with the status."""
    return body.endswith("\n" + STATUS_LINE)


def _one_line(lines: list[str], label: str, missing: IneligibleReason) -> int:
    found = [i for i, line in enumerate(lines) if line.startswith(label)]
    if len(found) != 1 or len(lines[found[0]]) == len(label):
        raise Ineligible(missing)
    return found[0]


def parse_physique_body(envelope_text: str, body: str) -> CanonicalSurface:
    """The canonical projection of ``envelope_text + body``; ``Ineligible`` otherwise."""
    # The presented text must fit Telegram: reserve the notice's own length.
    check_body(envelope_text + body, max_utf16=TELEGRAM_MAX_UTF16 - utf16_len(REVIEW_NOTICE))
    if not is_physique_body(body):
        raise Ineligible(IneligibleReason.STATUS_LINE_MISSING)
    lines = body.split("\n")
    if lines.count(STATUS_LINE) != 1:
        raise Ineligible(IneligibleReason.STATUS_LINE_MISSING)
    if REVIEW_NOTICE in body + "\n" or REVIEW_HEADING in lines:
        raise Ineligible(IneligibleReason.REVIEW_NOTICE_PRESENT)
    decision = _one_line(lines, DECISION_LABEL, IneligibleReason.DECISION_LINE_MISSING)
    basis = _one_line(lines, BASIS_LABEL, IneligibleReason.BASIS_LINE_MISSING)
    if basis < decision:
        raise Ineligible(IneligibleReason.BASIS_LINE_MISSING)

    head = envelope_text + body[: len(body) - len(STATUS_LINE)]  # ends with "\n"
    built = SegmentBuilder()
    built.lock(head + REVIEW_HEADING + "\n")
    built.slot(typed_slot(REVIEW_SLOT, (REVIEW_INSTRUCTION_ID,)))
    built.lock("\n" + STATUS_LINE)
    slots, segments = built.build()
    presented = head + REVIEW_NOTICE + STATUS_LINE
    return CanonicalSurface(surface=SURFACE, body=presented, slots=slots, segments=segments)


def strip_review_notice(presented: str) -> str:
    """The host's text of a presented physique body: the projection removed."""
    tail = REVIEW_NOTICE + STATUS_LINE
    if not presented.endswith(tail):
        raise ValueError("not a physique presentation")
    return presented[: len(presented) - len(tail)] + STATUS_LINE

"""The ``adaptive.dualcoachtest.card.v1`` surface: the dualcoachtest operator card.

The payload is the enveloped card of ``gateway_shim.surfaces.card``; only a fresh
``status == "card"`` is eligible. This product's v1 grammar of its ``text``
(SPEC §7; plan "Adaptive schemas and publication boundary", dualcoachtest
parser), LF line ends, no trailing newline::

    text     ::= title "\\n" SEPARATOR "\\n" head "\\n" "현재 판단: " judgment
                 "\\n\\n권장안\\n\\n" recs
                 ("\\n\\n검토 필요\\n\\n" review)?
                 ("\\n\\n상세 근거\\n\\n" details)?
                 "\\n\\n" "고객에게는 아직 전달되지 않았습니다."
    title    ::= TITLE_PREFIX LINE?          ; the prefix, then locked host text
    SEPARATOR::= ENVELOPE_SEPARATOR_LINE
    head     ::= "고객: " VALUE "\\n" "기준일: " VALUE ("\\n- " TEXT)* "\\n" "목표: " VALUE
    judgment ::= GLOSSARY[decision] "."       ; one P_DUAL_DECISION_*
    recs     ::= "- " TEXT ("\\n- " TEXT)* ("\\n메모: " VALUE)?   ; recommendations, note
    review   ::= "- " REASON "." ("\\n- " REASON "."){0,8}    ; each a P_DUAL_REASON_*
    details  ::= "- " TEXT ("\\n- " TEXT)*
    VALUE, TEXT ::= non-empty, no control or line-break characters

So there is exactly one line starting ``현재 판단: `` and it is the line right
before ``\\n\\n권장안\\n\\n``; the optional ``검토 필요`` block ends at
``\\n\\n상세 근거\\n\\n`` or at the final not-delivered line.

Slots, in body order: ``adaptive.dual.judgment`` (the judgment after the locked
label ``현재 판단: ``) and ``adaptive.dual.review.N`` for N = 1.. (each review line
after its locked bullet ``- ``). Title, envelope separator, customer, date,
facts, goal, both headings, recommendations, note, details, the delivery line,
every blank line, and the payload's status, buttons and envelope are locked.

The host passes the decision and reasons it computed (``DualFacts``). Every
review line must map to a known reason, and the block must equal the host's
reasons in order; an unknown, missing, duplicated or reordered reason, or any
grammar mismatch, makes the whole card ``Ineligible`` (plan manifest): canonical,
no request.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from spool.contract import MANIFEST

from gateway_shim.surfaces._model import CanonicalSurface, Ineligible, IneligibleReason
from gateway_shim.surfaces._text import (
    BLANK,
    BULLET,
    LABEL_SEPARATOR,
    SegmentBuilder,
    bullet_value,
    check_body,
    check_labels,
    is_line_text,
    labeled_value,
    paragraphs,
    sentences,
    typed_slot,
)
from gateway_shim.surfaces.card import (
    DUAL_SURFACE,
    ENVELOPE_SEPARATOR_LINE,
    AdaptiveBinding,
    fresh_card,
)

__all__ = [
    "DELIVERY_LINE",
    "DETAILS_HEADING",
    "JUDGMENT_LABEL",
    "JUDGMENT_SLOT",
    "MAX_REVIEW_REASONS",
    "RECOMMENDATIONS_HEADING",
    "REVIEW_HEADING",
    "SURFACE",
    "TITLE_PREFIX",
    "DualDecision",
    "DualFacts",
    "DualReason",
    "format_dual_card",
    "parse_dual_card",
    "review_slot_id",
]

SURFACE: Final = DUAL_SURFACE
JUDGMENT_SLOT: Final = "adaptive.dual.judgment"
TITLE_PREFIX: Final = "[듀얼코치] 적응형 영양 제안"
JUDGMENT_LABEL: Final = "현재 판단: "
RECOMMENDATIONS_HEADING: Final = "권장안"
REVIEW_HEADING: Final = "검토 필요"
DETAILS_HEADING: Final = "상세 근거"
DELIVERY_LINE: Final = "고객에게는 아직 전달되지 않았습니다."
CUSTOMER_LABEL: Final = "고객"
DATE_LABEL: Final = "기준일"
GOAL_LABEL: Final = "목표"
NOTE_LABEL: Final = "메모"
# adaptive.dual.review.N covers N = 1..9 (spool.contract.manifest, Rule 4).
MAX_REVIEW_REASONS: Final = len(MANIFEST["adaptive.dual.review.N"].slot_ids)
_HEAD_LABELS: Final = (CUSTOMER_LABEL, DATE_LABEL, GOAL_LABEL)


def review_slot_id(n: int) -> str:
    """The slot id of the n-th review line (1-based)."""
    return f"adaptive.dual.review.{n}"


class DualDecision(enum.Enum):
    """The fixed decision enum; each value is its semantic ID."""

    KEEP_PLAN = "P_DUAL_DECISION_KEEP_PLAN"
    ADJUST_PLAN = "P_DUAL_DECISION_ADJUST_PLAN"
    HOLD_FOR_REVIEW = "P_DUAL_DECISION_HOLD_FOR_REVIEW"


class DualReason(enum.Enum):
    """The fixed review-reason enum; each value is its semantic ID."""

    RECORDS_INSUFFICIENT = "P_DUAL_REASON_RECORDS_INSUFFICIENT"
    WEIGHT_TREND_UNCLEAR = "P_DUAL_REASON_WEIGHT_TREND_UNCLEAR"
    INTAKE_BELOW_PLAN = "P_DUAL_REASON_INTAKE_BELOW_PLAN"
    INTAKE_ABOVE_PLAN = "P_DUAL_REASON_INTAKE_ABOVE_PLAN"
    GOAL_CONFLICT = "P_DUAL_REASON_GOAL_CONFLICT"


def _check_enums_match_manifest() -> None:
    # Same rule as the weekly branches: the enums ARE the manifest's branches.
    if tuple((d.value,) for d in DualDecision) != MANIFEST[JUDGMENT_SLOT].branches:
        raise AssertionError("DualDecision differs from the manifest")
    if tuple((r.value,) for r in DualReason) != MANIFEST["adaptive.dual.review.N"].branches:
        raise AssertionError("DualReason differs from the manifest")


_check_enums_match_manifest()

# The exact canonical slot text of each enum member ("S."), for the reverse map.
_DECISION_BY_TEXT: Final[Mapping[str, DualDecision]] = MappingProxyType(
    {sentences((d.value,)): d for d in DualDecision}
)
_REASON_BY_TEXT: Final[Mapping[str, DualReason]] = MappingProxyType(
    {sentences((r.value,)): r for r in DualReason}
)


@dataclass(frozen=True, slots=True)
class DualFacts:
    """The decision and the ordered review reasons the host computed for the card."""

    decision: DualDecision
    reasons: tuple[DualReason, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.decision, DualDecision):
            raise TypeError("decision must be a DualDecision")
        if not isinstance(self.reasons, tuple) or not all(
            isinstance(r, DualReason) for r in self.reasons
        ):
            raise TypeError("reasons must be a tuple of DualReason")
        if len(set(self.reasons)) != len(self.reasons):
            raise ValueError("reasons must be distinct")
        if len(self.reasons) > MAX_REVIEW_REASONS:
            raise ValueError("at most nine review reasons")


# --- the reference renderer (the host's v1 format) --------------------------------


def format_dual_card(
    *,
    title: str,
    customer: str,
    date: str,
    facts: Sequence[str],
    goal: str,
    decision: DualDecision,
    recommendations: Sequence[str],
    note: str | None = None,
    reasons: Sequence[DualReason] = (),
    details: Sequence[str] = (),
) -> str:
    """Render the ``text`` of a canonical v1 dualcoachtest card.

    ``title`` is the locked text after ``TITLE_PREFIX`` ("" for the bare prefix).
    Raises ``ValueError`` on input the grammar cannot carry.
    """

    def lines(values: Sequence[str], *, allow_empty: bool) -> list[str]:
        if isinstance(values, str) or (not values and not allow_empty):
            raise ValueError("expected a sequence of lines")
        if not all(is_line_text(v) for v in values):
            raise ValueError("each line must be non-empty, without control characters")
        return list(values)

    if not isinstance(title, str) or (title and not is_line_text(title)):
        raise ValueError("title must be one line")
    if not all(is_line_text(v) for v in (customer, date, goal)):
        raise ValueError("customer, date and goal must be non-empty lines")
    if note is not None and not is_line_text(note):
        raise ValueError("note must be a non-empty line")
    if not isinstance(decision, DualDecision):
        raise ValueError("decision must be a DualDecision")
    reasons = tuple(reasons)
    DualFacts(decision=decision, reasons=reasons)  # the same rules as the host's facts
    out = [
        TITLE_PREFIX + (" · " + title if title else ""),
        ENVELOPE_SEPARATOR_LINE,
        CUSTOMER_LABEL + LABEL_SEPARATOR + customer,
        DATE_LABEL + LABEL_SEPARATOR + date,
        *(BULLET + fact for fact in lines(facts, allow_empty=True)),
        GOAL_LABEL + LABEL_SEPARATOR + goal,
        JUDGMENT_LABEL + sentences((decision.value,)),
        "",
        RECOMMENDATIONS_HEADING,
        "",
        *(BULLET + rec for rec in lines(recommendations, allow_empty=False)),
    ]
    if note is not None:
        out.append(NOTE_LABEL + LABEL_SEPARATOR + note)
    if reasons:
        out += ["", REVIEW_HEADING, ""]
        out += [BULLET + sentences((r.value,)) for r in reasons]
    if details:
        out += ["", DETAILS_HEADING, ""]
        out += [BULLET + d for d in lines(details, allow_empty=False)]
    out += ["", DELIVERY_LINE]
    return "\n".join(out)


# --- the adapter --------------------------------------------------------------------


def parse_dual_card(
    payload: Mapping[str, object], binding: AdaptiveBinding, facts: DualFacts | None
) -> CanonicalSurface:
    """Parse a fresh dualcoachtest card into locked segments and its slots.

    Raises ``Ineligible`` (the enum only, never content) unless ``payload`` is a
    fresh card bound to ``binding`` whose text is exactly the grammar above and
    agrees with ``facts``. The payload's eligibility is decided before the
    facts are looked at: a menu payload is ``STATUS_NOT_CARD`` even when the
    host has no ``DualFacts`` for it (``None`` is then ``FACTS_INVALID``).
    """
    card = fresh_card(payload, binding, SURFACE)
    if not isinstance(facts, DualFacts):
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    text = check_body(card.text)
    parts = paragraphs(text)
    head = parts[0]
    judgment_text = _parse_head(head)
    decision = _DECISION_BY_TEXT.get(judgment_text)
    if decision is None:
        raise Ineligible(IneligibleReason.JUDGMENT_UNKNOWN)
    if len(parts) < 4 or parts[1] != RECOMMENDATIONS_HEADING:
        raise Ineligible(IneligibleReason.SECTION_HEADING_MISMATCH)
    if parts[-1] != DELIVERY_LINE:
        raise Ineligible(IneligibleReason.FINAL_LINE_MISSING)
    recommendations = parts[2]
    _parse_recommendations(recommendations)
    review, details = _optional_blocks(parts[3:-1])
    reasons = _parse_review(review) if review is not None else ()
    if details is not None and any(bullet_value(line) is None for line in details.split("\n")):
        raise Ineligible(IneligibleReason.DETAIL_LINE_MALFORMED)

    # Grammar first (in text order), then the host's typed facts.
    if decision is not facts.decision:
        raise Ineligible(IneligibleReason.HOST_FACTS_MISMATCH)
    if reasons != facts.reasons:
        if sorted(r.value for r in reasons) == sorted(r.value for r in facts.reasons):
            raise Ineligible(IneligibleReason.REVIEW_REASON_ORDER)
        raise Ineligible(IneligibleReason.REVIEW_REASON_MISSING)

    built = SegmentBuilder()
    built.lock(head[: len(head) - len(judgment_text)])  # ends with "현재 판단: "
    built.slot(typed_slot(JUDGMENT_SLOT, (decision.value,)))
    built.lock(BLANK + RECOMMENDATIONS_HEADING + BLANK + recommendations)
    if reasons:
        built.lock(BLANK + REVIEW_HEADING + BLANK)
        for n, reason in enumerate(reasons, start=1):
            built.lock(BULLET if n == 1 else "\n" + BULLET)
            built.slot(typed_slot(review_slot_id(n), (reason.value,)))
    if details is not None:
        built.lock(BLANK + DETAILS_HEADING + BLANK + details)
    built.lock(BLANK + DELIVERY_LINE)
    slots, segments = built.build()
    return CanonicalSurface(surface=SURFACE, body=text, slots=slots, segments=segments)


def _parse_head(paragraph: str) -> str:
    """title SEPARATOR head judgment-line; returns the judgment text after the label."""
    lines = paragraph.split("\n")
    if not lines[0].startswith(TITLE_PREFIX):
        raise Ineligible(IneligibleReason.TITLE_INVALID)
    if len(lines) < 2 or lines[1] != ENVELOPE_SEPARATOR_LINE:
        raise Ineligible(IneligibleReason.ENVELOPE_SEPARATOR_MISSING)
    if len(lines) < 3 or not lines[-1].startswith(JUDGMENT_LABEL):
        raise Ineligible(IneligibleReason.JUDGMENT_LINE_MISSING)
    body = lines[2:-1]
    labels: list[str] = []
    for line in body:
        if bullet_value(line) is not None:
            continue
        if LABEL_SEPARATOR not in line:
            raise Ineligible(IneligibleReason.FACT_LINE_MALFORMED)
        label, value = line.split(LABEL_SEPARATOR, 1)
        labels.append(label)
        if value == "":
            raise Ineligible(IneligibleReason.FACT_VALUE_EMPTY)
    check_labels(labels, _HEAD_LABELS, required=_HEAD_LABELS)
    # Customer and date open the head, the goal closes it; facts sit between.
    if (
        labeled_value(body[0], CUSTOMER_LABEL) is None
        or labeled_value(body[1], DATE_LABEL) is None
        or labeled_value(body[-1], GOAL_LABEL) is None
    ):
        raise Ineligible(IneligibleReason.FACT_LABEL_ORDER)
    return lines[-1][len(JUDGMENT_LABEL) :]


def _parse_recommendations(paragraph: str) -> None:
    """recs ::= "- " TEXT ("\\n- " TEXT)* ("\\n메모: " VALUE)?."""
    lines = paragraph.split("\n")
    note = labeled_value(lines[-1], NOTE_LABEL)
    if note is not None:
        if note == "":
            raise Ineligible(IneligibleReason.FACT_VALUE_EMPTY)
        lines = lines[:-1]
    if not lines:
        raise Ineligible(IneligibleReason.NO_ACTIONS)
    if any(bullet_value(line) is None for line in lines):
        raise Ineligible(IneligibleReason.ACTION_LINE_MALFORMED)


def _optional_blocks(middle: list[str]) -> tuple[str | None, str | None]:
    """(REVIEW_HEADING review)? (DETAILS_HEADING details)? → (review, details)."""
    review: str | None = None
    details: str | None = None
    rest = list(middle)
    if rest[:1] == [REVIEW_HEADING] and len(rest) >= 2:
        review, rest = rest[1], rest[2:]
    if rest[:1] == [DETAILS_HEADING] and len(rest) >= 2:
        details, rest = rest[1], rest[2:]
    if rest:
        raise Ineligible(IneligibleReason.SECTION_HEADING_MISMATCH)
    return review, details


def _parse_review(paragraph: str) -> tuple[DualReason, ...]:
    """review ::= ("- " REASON "."){1,9}, each mapping to a known reason, once."""
    lines = paragraph.split("\n")
    if len(lines) > MAX_REVIEW_REASONS:
        raise Ineligible(IneligibleReason.REVIEW_TOO_MANY)
    reasons: list[DualReason] = []
    for line in lines:
        value = bullet_value(line)
        if value is None:
            raise Ineligible(IneligibleReason.REVIEW_BLOCK_MISMATCH)
        reason = _REASON_BY_TEXT.get(value)
        if reason is None:
            raise Ineligible(IneligibleReason.REVIEW_REASON_UNKNOWN)
        reasons.append(reason)
    if len(set(reasons)) != len(reasons):
        raise Ineligible(IneligibleReason.REVIEW_REASON_DUPLICATE)
    return tuple(reasons)

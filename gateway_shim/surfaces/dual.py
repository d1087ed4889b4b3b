"""The ``adaptive.dualcoachtest.card.v1`` surface: the dualcoachtest operator card.

The payload and its envelope lines are ``gateway_shim.surfaces.card``'s; this
module reads the BODY the host's private profile renders after them
(docs/host-formats-adaptive.md; the one public sample is TH ``ADAPTIVE`` at
``Carrie111998/Hermes@4305027f``). What is known is checked, everything else
is locked and not required to have any format. LF line ends::

    body   ::= TITLE_PREFIX GOAL "\\n\\n" HEAD "\\n" JUDGMENT_LABEL DECISION
               "\\n\\n권장안\\n\\n" RECS
               ( "\\n\\n검토 필요\\n\\n" REASON ( "\\n" REASON )* )?
               ( "\\n\\n상세 근거\\n\\n" DETAILS )?
               "\\n\\n" DELIVERY_LINE
    HEAD   ::= one or more non-empty lines          (the sample: "{label} · {day}")
    RECS   ::= "- " TEXT, then anything (note line: private format)
    DETAILS::= anything (private format)

- ``DECISION`` is a glossary text (the shipped public one or the operator's,
  `gateway_shim.operator_glossary`) with no final period; an unmapped decision
  is ``DECISION_UNMAPPED``.
- each ``REASON`` line is a glossary reason text + ``"."``, unbulleted, at most
  nine, distinct; an unmapped one is ``REVIEW_REASON_UNMAPPED``.
- a ``검토 필요`` line exists only as the heading of that one block, with at
  least one reason, before any ``상세 근거`` block; a heading with no reason,
  a second one, one inside the recommendations or the details, or the review
  block after the details is ``REVIEW_BLOCK_MISMATCH``.
- there is exactly one line starting with ``현재 판단: ``.

Slots, in body order: ``adaptive.dual.judgment`` (the decision after the locked
label; ``final_period=False``: the host writes no period, so the composition's
final ``.`` is dropped) and ``adaptive.dual.review.N`` (each reason line, its
``.`` included). Every other byte — title, goal, head lines, both labels,
headings, recommendations, note, details, the delivery line, blank lines — is
locked. Of the slots, only those the contract's fit table lets take a style word
are kept (`gateway_shim.surfaces._text.SegmentBuilder`, design §6.1): the
decision and the first review line are locked too, and a review line the
operator narrowed (the glossary's ``unstyled``) likewise.
"""

from __future__ import annotations

from typing import Final

from gateway_shim.operator_glossary import DualGlossary
from gateway_shim.surfaces._model import (
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    Placeholder,
    ProseSlot,
)
from gateway_shim.surfaces._text import SegmentBuilder
from gateway_shim.surfaces.card import DUAL_SURFACE
from kexpr.spool.contract import MANIFEST, tokens_for

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
    "format_dual_body",
    "is_dual_body",
    "parse_dual_body",
    "review_slot_id",
]

SURFACE: Final = DUAL_SURFACE
JUDGMENT_SLOT: Final = "adaptive.dual.judgment"
TITLE_PREFIX: Final = "적응형 영양 검토 · "
JUDGMENT_LABEL: Final = "현재 판단: "
RECOMMENDATIONS_HEADING: Final = "권장안"
REVIEW_HEADING: Final = "검토 필요"
DETAILS_HEADING: Final = "상세 근거"
DELIVERY_LINE: Final = "고객에게는 아직 전달되지 않았습니다."
MAX_REVIEW_REASONS: Final = len(MANIFEST["adaptive.dual.review.N"].slot_ids)
_RECS_MARK: Final = "\n\n" + RECOMMENDATIONS_HEADING + "\n\n"
_REVIEW_MARK: Final = "\n\n" + REVIEW_HEADING + "\n\n"
_DETAILS_MARK: Final = "\n\n" + DETAILS_HEADING + "\n\n"
_END_MARK: Final = "\n\n" + DELIVERY_LINE


def review_slot_id(n: int) -> str:
    """The slot id of the n-th review line (1-based)."""
    return f"adaptive.dual.review.{n}"


def is_dual_body(body: str) -> bool:
    """The two card grammars are disjoint: a dual body ends with the delivery line."""
    return body.endswith(_END_MARK) or body == DELIVERY_LINE


def _slot(
    slot_id: str, semantic_id: str, glossary: DualGlossary, *, final_period: bool
) -> ProseSlot:
    expansion = glossary.entries[semantic_id]
    (token,) = tokens_for((semantic_id,))
    placeholder = Placeholder(
        token=token, semantic_id=semantic_id, expansion=expansion, glossary=glossary.entries
    )
    return ProseSlot(
        slot_id=slot_id,
        placeholders=(placeholder,),
        canonical_text=expansion + "." if final_period else expansion,
        final_period=final_period,
    )


def format_dual_body(
    *,
    goal: str,
    head: tuple[str, ...],
    decision: str,
    recommendations: tuple[str, ...],
    reasons: tuple[str, ...] = (),
    details: str | None = None,
) -> str:
    """Render a body in the grammar above (the reference host; tests and samples).

    ``decision``/``reasons`` are the host's texts (reason lines with their ".").
    """
    out = TITLE_PREFIX + goal + "\n\n" + "\n".join(head) + "\n" + JUDGMENT_LABEL + decision
    out += _RECS_MARK + "\n".join("- " + r for r in recommendations)
    if reasons:
        out += _REVIEW_MARK + "\n".join(reasons)
    if details is not None:
        out += _DETAILS_MARK + details
    return out + _END_MARK


def parse_dual_body(envelope_text: str, body: str, glossary: DualGlossary) -> CanonicalSurface:
    """The canonical surface of ``envelope_text + body``; ``Ineligible`` otherwise."""
    if not body.startswith(TITLE_PREFIX):
        raise Ineligible(IneligibleReason.CARD_TITLE_INVALID)
    title_end = body.find("\n\n")
    if title_end < 0 or title_end == len(TITLE_PREFIX) or "\n" in body[:title_end]:
        raise Ineligible(IneligibleReason.CARD_TITLE_INVALID)
    if not body.endswith(_END_MARK):
        raise Ineligible(IneligibleReason.DELIVERY_LINE_MISSING)
    judgment_lines = [
        i for i, line in enumerate(body.split("\n")) if line.startswith(JUDGMENT_LABEL)
    ]
    if not judgment_lines:
        raise Ineligible(IneligibleReason.JUDGMENT_LINE_MISSING)
    if len(judgment_lines) > 1:
        raise Ineligible(IneligibleReason.JUDGMENT_LINE_DUPLICATE)
    recs_at = body.find(_RECS_MARK)
    if recs_at < 0:
        raise Ineligible(IneligibleReason.RECOMMENDATIONS_MISSING)
    label_at = body.rfind("\n" + JUDGMENT_LABEL, 0, recs_at)
    # The judgment line is the line right before "\n\n권장안\n\n" ...
    if label_at < 0 or "\n" in body[label_at + 1 : recs_at]:
        raise Ineligible(IneligibleReason.JUDGMENT_LINE_MISSING)
    # ... and directly follows one or more non-empty head lines after the title.
    head = body[title_end + 2 : label_at]
    if not head or "" in head.split("\n"):
        raise Ineligible(IneligibleReason.HEAD_MISSING)
    decision_at = label_at + 1 + len(JUDGMENT_LABEL)
    decision_id = glossary.decision_id(body[decision_at:recs_at])
    if decision_id is None:
        raise Ineligible(IneligibleReason.DECISION_UNMAPPED)

    recs_start = recs_at + len(_RECS_MARK)
    end_at = len(body) - len(_END_MARK)
    # The optional blocks, in this order: "검토 필요" only before "상세 근거".
    review_at = body.find(_REVIEW_MARK, recs_start, end_at)
    details_at = body.find(_DETAILS_MARK, recs_start, end_at)
    # Review lines exist only inside the one "검토 필요" block, which has at
    # least one reason and ends at "상세 근거" or the final line: a
    # heading line anywhere else (with no reason before the final line, inside
    # the recommendations or the details, a second one) or a review block after
    # the details is not the host's grammar, never locked text.
    headings = body.split("\n").count(REVIEW_HEADING)
    if headings != (1 if review_at >= 0 else 0) or 0 <= details_at < review_at:
        raise Ineligible(IneligibleReason.REVIEW_BLOCK_MISMATCH)
    recs_end = min(i for i in (review_at, details_at, end_at) if i >= 0)
    recs = body[recs_start:recs_end]
    if not recs.startswith("- ") or len(recs) == len("- "):
        raise Ineligible(IneligibleReason.RECOMMENDATIONS_MISSING)

    built = SegmentBuilder()
    built.lock(envelope_text + body[:decision_at])
    built.slot(_slot(JUDGMENT_SLOT, decision_id, glossary, final_period=False))
    built.lock(body[recs_at:recs_end])
    if review_at >= 0:
        review_start = review_at + len(_REVIEW_MARK)
        review_end = details_at if details_at >= 0 else end_at
        lines = body[review_start:review_end].split("\n")
        if lines == [""] or "" in lines:
            raise Ineligible(IneligibleReason.REVIEW_BLOCK_MISMATCH)
        if len(lines) > MAX_REVIEW_REASONS:
            raise Ineligible(IneligibleReason.REVIEW_TOO_MANY)
        reason_ids = [glossary.reason_id(line) for line in lines]
        if any(i is None for i in reason_ids):
            raise Ineligible(IneligibleReason.REVIEW_REASON_UNMAPPED)
        if len(set(reason_ids)) != len(reason_ids):
            raise Ineligible(IneligibleReason.REVIEW_REASON_DUPLICATE)
        built.lock(_REVIEW_MARK)
        for n, reason_id in enumerate(reason_ids, start=1):
            assert reason_id is not None
            if n > 1:
                built.lock("\n")
            built.slot(
                _slot(review_slot_id(n), reason_id, glossary, final_period=True),
                narrowed=reason_id in glossary.unstyled,
            )
        built.lock(body[review_end:])
    else:
        built.lock(body[recs_end:])
    slots, segments = built.build()
    return CanonicalSurface(
        surface=SURFACE, body=envelope_text + body, slots=slots, segments=segments
    )

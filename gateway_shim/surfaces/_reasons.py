"""Why a body is not expressed: the reason enums and their two exceptions.

Rule 6 of the surface model (`gateway_shim.surfaces._model`) — errors carry an enum
and nothing else. An exception message is the enum's value; it never holds customer
content, composition text or expansions. Pure (Rule 1).

- ``Ineligible(IneligibleReason)``: the canonical body is published as is and no
  request is made.
- ``RenderError(RenderReason)``: a composition could not be rendered; the canonical
  body is published.
"""

from __future__ import annotations

import enum
from typing import Final

from kexpr.spool.contract import Reason
from kexpr.spool.errors import ReasonError

__all__ = ["Ineligible", "IneligibleReason", "RenderError", "RenderReason"]


class IneligibleReason(enum.Enum):
    """Why a canonical body is not eligible for expression (canonical, no request).

    Shared by every surface adapter; a new surface adds the members it needs.
    """

    # Input types and whole-body limits, checked before any grammar.
    NOT_TEXT = "not_text"
    FACTS_INVALID = "facts_invalid"
    INVALID_UNICODE = "invalid_unicode"
    TOO_LONG_UTF16 = "too_long_utf16"
    CARRIAGE_RETURN = "carriage_return"
    TRAILING_NEWLINE = "trailing_newline"
    CONTROL_CHARACTER = "control_character"
    # Layout: paragraphs separated by exactly one blank line.
    BLANK_LINE_MISMATCH = "blank_line_mismatch"
    PARAGRAPH_COUNT_MISMATCH = "paragraph_count_mismatch"
    TITLE_INVALID = "title_invalid"
    # Fact block.
    FACT_LINE_MALFORMED = "fact_line_malformed"
    FACT_LABEL_UNKNOWN = "fact_label_unknown"
    FACT_LABEL_DUPLICATE = "fact_label_duplicate"
    FACT_LABEL_MISSING = "fact_label_missing"
    FACT_LABEL_ORDER = "fact_label_order"
    FACT_VALUE_EMPTY = "fact_value_empty"
    FACT_COUNT_MISMATCH = "fact_count_mismatch"
    # Slot text against the typed facts.
    STATUS_TEXT_MISMATCH = "status_text_mismatch"
    STATUS_COMPLETENESS_MISMATCH = "status_completeness_mismatch"
    # daily.v1: a status of more than one line (the pinned host's model feedback);
    # complete facts carrying the partial sentence (the pre-cutover fallback).
    STATUS_LINE_COUNT = "status_line_count"
    STATUS_PRE_CUTOVER = "status_pre_cutover"
    HOST_FACTS_MISMATCH = "host_facts_mismatch"
    # Action block.
    ACTIONS_HEADING_MISSING = "actions_heading_missing"
    ACTION_LINE_MALFORMED = "action_line_malformed"
    # daily.v1: the actions are not the host's fixed rule for the facts.
    ACTION_TEXT_MISMATCH = "action_text_mismatch"
    # weekly.v1: an explicit prose field in the host's summary (plan "Per-slot
    # semantic manifest", ineligible conditions), then the exact typed text.
    EXPLICIT_SOURCE_FIELD = "explicit_source_field"
    INTERPRETATION_TEXT_MISMATCH = "interpretation_text_mismatch"
    RATIONALE_TEXT_MISMATCH = "rationale_text_mismatch"
    # weekly.v1: the typed rationale is keyed by the judgment line.
    RATIONALE_JUDGMENT_MISMATCH = "rationale_judgment_mismatch"
    JUDGMENT_UNKNOWN = "judgment_unknown"
    # Adaptive cards (docs/host-formats-adaptive.md). The payload first: only a
    # fresh, well-formed ``status == "card"`` payload is eligible; every other
    # payload the host publishes has its own reason.
    RECOVERY_PAYLOAD = "recovery_payload"
    PAYLOAD_MALFORMED = "payload_malformed"
    STATUS_MENU = "status_menu"
    STATUS_VIEW = "status_view"
    STATUS_SELECTED = "status_selected"
    STATUS_OPERATOR_INPUT = "status_operator_input"
    STATUS_TERMINAL = "status_terminal"
    STATUS_DUPLICATE = "status_duplicate"
    STATUS_REJECTED = "status_rejected"
    STATUS_NOT_CARD = "status_not_card"
    ENVELOPE_MALFORMED = "envelope_malformed"
    BUTTONS_MALFORMED = "buttons_malformed"
    BUTTONS_MISMATCH = "buttons_mismatch"
    CALLBACK_MALFORMED = "callback_malformed"
    UNKNOWN_SURFACE = "unknown_surface"
    # The card text: the gateway's header and progress lines, then the body.
    HEADER_MISMATCH = "header_mismatch"
    PROGRESS_MISMATCH = "progress_mismatch"
    BODY_SEPARATOR_MISSING = "body_separator_missing"
    BODY_GRAMMAR_UNKNOWN = "body_grammar_unknown"
    GLOSSARY_INVALID = "glossary_invalid"
    # adaptive.dualcoachtest.card.v1 body.
    CARD_TITLE_INVALID = "card_title_invalid"
    HEAD_MISSING = "head_missing"
    JUDGMENT_LINE_MISSING = "judgment_line_missing"
    JUDGMENT_LINE_DUPLICATE = "judgment_line_duplicate"
    RECOMMENDATIONS_MISSING = "recommendations_missing"
    DECISION_UNMAPPED = "decision_unmapped"
    REVIEW_BLOCK_MISMATCH = "review_block_mismatch"
    REVIEW_REASON_UNMAPPED = "review_reason_unmapped"
    REVIEW_REASON_DUPLICATE = "review_reason_duplicate"
    REVIEW_TOO_MANY = "review_too_many"
    DELIVERY_LINE_MISSING = "delivery_line_missing"
    # adaptive.physique.card.v1 body.
    DECISION_LINE_MISSING = "decision_line_missing"
    BASIS_LINE_MISSING = "basis_line_missing"
    STATUS_LINE_MISSING = "status_line_missing"
    REVIEW_NOTICE_PRESENT = "review_notice_present"
    # Every surface: the model's minimal answer to the capsule cannot arrive within
    # the call's budget (kexpr.spool.contract.budget): the artifact's one
    # call is never spent on an answer that can only time out or be truncated.
    ANSWER_OVER_BUDGET = "answer_over_budget"


class RenderReason(enum.Enum):
    """Why a composition could not be rendered (the canonical body is used)."""

    MISSING_SLOT = "missing_slot"
    UNKNOWN_SLOT = "unknown_slot"
    COMPOSITION_REJECTED = "composition_rejected"
    TOKEN_MISMATCH = "token_mismatch"
    LAYOUT_CHANGED = "layout_changed"
    LOCKED_BYTES_CHANGED = "locked_bytes_changed"
    TOO_LONG_UTF16 = "too_long_utf16"


class Ineligible(ReasonError[IneligibleReason]):
    """The canonical body is not eligible: publish it as is, make no request."""


class RenderError(ReasonError[RenderReason]):
    """A composition could not be rendered: publish the canonical body.

    ``contract_reason`` is the contract's own enum when ``reason`` is
    ``COMPOSITION_REJECTED``, else ``None``.
    """

    def __init__(self, reason: RenderReason, contract_reason: Reason | None = None) -> None:
        super().__init__(reason)
        self.contract_reason: Final = contract_reason

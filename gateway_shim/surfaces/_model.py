"""Surface-independent model of a canonical body: locked bytes and prose slots.

Rules of this module (design §7; plan "Korean style grammar ... deterministic
rejection"). Every surface adapter builds on them, so they live here once:

Rule 1 — pure. Values in, values out: no I/O, no clock, no randomness, so a body
parses and renders the same everywhere, every time.

Rule 2 — a body is a sequence of segments: ``Locked`` text that the host rendered
and that must come back byte for byte, and ``SlotRef``s to ``ProseSlot``s whose
canonical text is the exact local expansion of code-issued semantic IDs. A
``CanonicalSurface`` that does not reassemble to its own body cannot be
constructed.

Rule 3 — nothing is expanded that the contract did not accept. ``render`` runs
``kexpr.spool.contract.check_generated`` on every slot itself, even though the
coordinator has already done so: the shim re-validates (design §1), and a caller of
``render`` cannot skip it. One failed slot fails the whole body: all or nothing,
no partial selection, no repair.

Rule 4 — after expansion the whole body is rebuilt and every locked byte is
PROVEN unchanged by an independent check: each locked segment is sliced out of
the new body at its computed UTF-16 offsets and compared, and the concatenation
of the locked slices of both bodies is compared. The layout (line structure) may
not move: an expanded slot has exactly the lines of its canonical text, and no
line break or control character inside a line. (The canonical body and its
offsets are a value of the immutable surface: they are assembled and checked
once, at construction, and sliced again on every render.)

Rule 4a — a slot's sentences are joined by its ``sentence_separator``: one space
(the whole slot is one line) except where the host puts each sentence on its own
line (``weekly.interpretation``, HOST-FORMATS §4.4: two lines). A composition is
always one line (``sentence (" " sentence)*``, each sentence ending in
``TOKEN "."``); rendering a multi-line slot replaces the single space after each
``TOKEN "."`` but the last by the separator, so sentence i lands on line i, as
in the canonical text. Nothing else may introduce a line break.

Rule 5 — Telegram counts UTF-16 code units, not code points: an astral character
(most emoji) is two units. Every length and offset here is in UTF-16 units, and
no body longer than ``TELEGRAM_MAX_UTF16`` is canonical or rendered.

Rule 6 — errors carry an enum and nothing else. An exception message is the
enum's value; it never holds customer content, composition text or expansions.
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from gateway_shim.glossary import GLOSSARY
from kexpr.spool.contract import Reason, SlotPolicy, check_generated, slot_policy
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS, slots_token_bound
from kexpr.spool.contract.fit import slot_styleable
from kexpr.spool.contract.manifest import ACTION_PREFIX, PREDICATE_PREFIX, TOKEN_RE
from kexpr.spool.errors import ReasonError

__all__ = [
    "SENTENCE_SEPARATORS",
    "TELEGRAM_MAX_UTF16",
    "CanonicalSurface",
    "Ineligible",
    "IneligibleReason",
    "Locked",
    "Placeholder",
    "ProseSlot",
    "RenderError",
    "RenderReason",
    "RenderedBody",
    "SlotRef",
    "sentence_separator",
    "utf16_len",
]

TELEGRAM_MAX_UTF16: Final = 4096

# Rule 4a: the slots whose sentences the host renders one per line. Every other
# slot joins its sentences with one space.
SENTENCE_SEPARATORS: Final[Mapping[str, str]] = MappingProxyType({"weekly.interpretation": "\n"})


def sentence_separator(slot_id: str) -> str:
    """How the sentences of ``slot_id``'s canonical text are joined (Rule 4a)."""
    return SENTENCE_SEPARATORS.get(slot_id, " ")


def utf16_len(s: str) -> int:
    """Length of ``s`` in UTF-16 code units, the unit Telegram counts.

    ``surrogatepass`` so that a lone surrogate counts as the one unit it is
    instead of raising; the adapters reject such text separately.
    """
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _utf16_slice(encoded: bytes, start: int, end: int) -> str:
    """Decode the code units ``[start, end)`` of a UTF-16-LE encoded body."""
    return encoded[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")


def _has_line_break_or_control(s: str) -> bool:
    # Cc covers LF, CR, tab, NEL (U+0085); Zl/Zp are U+2028/U+2029, which Telegram
    # clients and str.splitlines also treat as line breaks. Fast path, exact:
    # str.isprintable() is False for every character of category C* or Z* but the
    # ASCII space (Python documents this), so printable text has none of them.
    if s.isprintable():
        return False
    return any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in s)


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


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One issued token and the local sentence it stands for."""

    token: str
    semantic_id: str
    expansion: str
    # The glossary the ID comes from: None is the shipped ``GLOSSARY``; the dual
    # card passes its (shipped or operator) decision/reason glossary
    # (`gateway_shim.operator_glossary`). Not part of the value.
    glossary: Mapping[str, str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        glossary = GLOSSARY if self.glossary is None else self.glossary
        # A slot-local token (design §6): the contract's own regex, ``fullmatch`` only.
        if not isinstance(self.token, str) or TOKEN_RE.fullmatch(self.token) is None:
            raise ValueError("placeholder token is malformed")
        if not isinstance(self.semantic_id, str) or self.semantic_id not in glossary:
            raise ValueError("placeholder semantic_id is not in the glossary")
        # "[[P:01]]"[2] is the family letter; an ID's family is its prefix.
        if not self.semantic_id.startswith(self.token[2] + "_"):
            raise ValueError("placeholder token family does not match its semantic_id")
        if self.expansion != glossary[self.semantic_id]:
            raise ValueError("placeholder expansion is not the glossary sentence")


@dataclass(frozen=True, slots=True)
class ProseSlot:
    """A slot: the only bytes of a body a composition may replace."""

    slot_id: str
    placeholders: tuple[Placeholder, ...]
    canonical_text: str
    # The slot's rendering rule for its last sentence. True (every slot but one):
    # the slot's text is the expanded composition, ending in "." as the grammar
    # requires. False (the dual decision, which the host renders without a final
    # period): the expanded composition minus its final "." — for the canonical
    # composition that is the bare expansion, byte for byte the host's text.
    final_period: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.placeholders, tuple) or not self.placeholders:
            raise ValueError("a prose slot needs at least one placeholder")
        if not all(isinstance(p, Placeholder) for p in self.placeholders):
            raise TypeError("placeholders must be Placeholder instances")
        if not isinstance(self.final_period, bool):
            raise TypeError("final_period must be a bool")
        # The canonical composition is the bare tokens in issued order; its
        # expansion is the canonical text, sentences joined per Rule 4a; a slot
        # without a final period (the dual decision) drops the last one.
        canonical = self.sentence_separator.join(p.expansion + "." for p in self.placeholders)
        if not self.final_period:
            canonical = canonical[:-1]
        if self.canonical_text != canonical:
            raise ValueError("canonical_text is not the expansion of the placeholders")
        # Raises CapsuleError (a ValueError) unless the IDs are one manifest branch of
        # this slot. The policy lists them in canonical branch order; the
        # placeholders must be in that order with exactly the issued tokens, so
        # token i stands for the same ID here, in the capsule and in the response.
        policy = self.policy()
        ids = tuple(p.semantic_id for p in self.placeholders)
        if (
            policy.required_placeholder_tokens != tuple(p.token for p in self.placeholders)
            or policy.allowed_predicate_ids
            != tuple(i for i in ids if i.startswith(PREDICATE_PREFIX))
            or policy.allowed_action_ids != tuple(i for i in ids if i.startswith(ACTION_PREFIX))
        ):
            raise ValueError("placeholders are not the contract's issued tokens in branch order")

    @property
    def sentence_separator(self) -> str:
        """``" "`` or ``"\n"``: how this slot's sentences are joined (Rule 4a)."""
        return sentence_separator(self.slot_id)

    @property
    def line_count(self) -> int:
        """The number of lines of the canonical text; a rendering keeps it."""
        return self.canonical_text.count("\n") + 1

    @property
    def styleable(self) -> bool:
        """Whether any of this slot's sentences may take a style word (the fit
        table, `kexpr.spool.contract.fit`, design §6.1)."""
        return slot_styleable(self.slot_id, tuple(p.semantic_id for p in self.placeholders))

    def policy(self) -> SlotPolicy:
        """The capsule slot for this prose slot (manifest limits, issued tokens)."""
        return slot_policy(self.slot_id, [p.semantic_id for p in self.placeholders])

    def expand(self, generated_ko: str) -> str:
        """Replace each issued token by its expansion.

        Call only after the contract accepted ``generated_ko`` for ``policy()``.
        Each token must occur exactly once; expansions never contain ``[[``
        (glossary invariant), so one replacement cannot create another token.
        In a multi-line slot (Rule 4a) the space after each ``TOKEN "."`` but
        the last becomes the line separator first: the contract's grammar puts
        exactly one space there, anything else is a token mismatch.
        """
        text = generated_ko
        if self.sentence_separator != " ":
            for p in self.placeholders[:-1]:
                boundary = p.token + ". "
                if text.count(boundary) != 1:
                    raise RenderError(RenderReason.TOKEN_MISMATCH)
                text = text.replace(boundary, p.token + "." + self.sentence_separator, 1)
        for p in self.placeholders:
            if text.count(p.token) != 1:
                raise RenderError(RenderReason.TOKEN_MISMATCH)
            text = text.replace(p.token, p.expansion, 1)
        if "[[" in text:
            raise RenderError(RenderReason.TOKEN_MISMATCH)
        if not self.final_period:
            # The grammar ends every composition with "."; this slot's rule drops it.
            if not text.endswith("."):
                raise RenderError(RenderReason.TOKEN_MISMATCH)
            text = text[:-1]
        return text


@dataclass(frozen=True, slots=True)
class Locked:
    """Host-rendered bytes that must come back unchanged."""

    text: str

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text:
            raise ValueError("a locked segment is non-empty text")


@dataclass(frozen=True, slots=True)
class SlotRef:
    """The position of ``CanonicalSurface.slots[index]`` in the body."""

    index: int

    def __post_init__(self) -> None:
        if type(self.index) is not int or self.index < 0:
            raise ValueError("a slot reference is a non-negative int")


@dataclass(frozen=True, slots=True)
class RenderedBody:
    """A body plus the UTF-16 ``[start, end)`` span of each locked segment in it.

    A host shifts its Telegram message entities by these spans.
    """

    body: str
    locked_spans_utf16: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not isinstance(self.body, str):
            raise TypeError("body must be str")
        position = 0
        for start, end in self.locked_spans_utf16:
            if not position <= start < end:
                raise ValueError("locked spans must be non-empty, ordered and disjoint")
            position = end
        if position > utf16_len(self.body):
            raise ValueError("a locked span lies outside the body")

    def locked_texts(self) -> tuple[str, ...]:
        """The text of each locked span, sliced out of ``body`` by its offsets."""
        encoded = self.body.encode("utf-16-le", "surrogatepass")
        return tuple(_utf16_slice(encoded, start, end) for start, end in self.locked_spans_utf16)


@dataclass(frozen=True, slots=True)
class CanonicalSurface:
    """A parsed canonical body: its slots and its locked segments, in order."""

    surface: str
    body: str
    slots: tuple[ProseSlot, ...]
    segments: tuple[Locked | SlotRef, ...]
    # The canonical body with its locked offsets, built (and checked) once: a value of
    # the fields above, which are immutable.
    _canonical: RenderedBody = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.surface, str) or not self.surface:
            raise ValueError("surface must be a non-empty str")
        if not isinstance(self.slots, tuple) or not all(
            isinstance(s, ProseSlot) for s in self.slots
        ):
            raise TypeError("slots must be a tuple of ProseSlot")
        if len({s.slot_id for s in self.slots}) != len(self.slots):
            raise ValueError("slot ids must be unique")
        if not isinstance(self.segments, tuple):
            raise TypeError("segments must be a tuple")
        refs = [seg.index for seg in self.segments if isinstance(seg, SlotRef)]
        if refs != list(range(len(self.slots))):
            raise ValueError("every slot must be referenced exactly once, in order")
        if not all(isinstance(seg, (Locked, SlotRef)) for seg in self.segments):
            raise TypeError("segments must be Locked or SlotRef")
        canonical = self._assemble(tuple(s.canonical_text for s in self.slots))
        if canonical.body != self.body:
            raise ValueError("segments and slot texts do not reassemble to the body")
        if utf16_len(self.body) > TELEGRAM_MAX_UTF16:
            raise ValueError("body exceeds the Telegram UTF-16 limit")
        object.__setattr__(self, "_canonical", canonical)

    def _assemble(self, slot_texts: tuple[str, ...]) -> RenderedBody:
        """Concatenate the segments with ``slot_texts``; record locked offsets."""
        parts: list[str] = []
        spans: list[tuple[int, int]] = []
        position = 0
        for seg in self.segments:
            text = seg.text if isinstance(seg, Locked) else slot_texts[seg.index]
            end = position + utf16_len(text)
            if isinstance(seg, Locked):
                spans.append((position, end))
            parts.append(text)
            position = end
        return RenderedBody(body="".join(parts), locked_spans_utf16=tuple(spans))

    def canonical(self) -> RenderedBody:
        """The canonical body with its locked offsets (the fallback)."""
        return self._canonical

    def answer_token_bound(self) -> int | None:
        """An upper bound of the tokens of the model's minimal valid answer to this
        surface's capsule, for any artifact key (`kexpr.spool.contract.budget`)."""
        return slots_token_bound(self.surface, tuple(s.policy() for s in self.slots))

    def require_answer_budget(self) -> None:
        """Raise ``Ineligible(ANSWER_OVER_BUDGET)`` unless the minimal answer fits the
        call's budget: a capsule whose answer cannot arrive within the
        timeout, or within ``max_tokens``, is never sent (no bound: not sent either)."""
        bound = self.answer_token_bound()
        if bound is None or bound > ANSWER_BUDGET_TOKENS:
            raise Ineligible(IneligibleReason.ANSWER_OVER_BUDGET)

    def render(self, generated: Mapping[str, str]) -> RenderedBody:
        """Expand a composition for EVERY slot and rebuild the whole body.

        Raises ``RenderError``; the caller then publishes ``canonical()``.
        """
        if not isinstance(generated, Mapping):
            raise RenderError(RenderReason.MISSING_SLOT)
        slot_ids = [s.slot_id for s in self.slots]
        if any(slot_id not in generated for slot_id in slot_ids):
            raise RenderError(RenderReason.MISSING_SLOT)
        if len(generated) != len(slot_ids):
            raise RenderError(RenderReason.UNKNOWN_SLOT)
        expanded: list[str] = []
        for slot in self.slots:
            generated_ko = generated[slot.slot_id]
            if not isinstance(generated_ko, str):
                raise RenderError(RenderReason.COMPOSITION_REJECTED)
            contract_reason = check_generated(slot.policy(), generated_ko)
            if contract_reason is not None:
                raise RenderError(RenderReason.COMPOSITION_REJECTED, contract_reason)
            text = slot.expand(generated_ko)
            # Rule 4/4a: the slot's own lines, each free of any other line break.
            lines = text.split("\n")
            if len(lines) != slot.line_count or any(map(_has_line_break_or_control, lines)):
                raise RenderError(RenderReason.LAYOUT_CHANGED)
            expanded.append(text)
        rendered = self._assemble(tuple(expanded))
        self._prove_locked(rendered)
        if utf16_len(rendered.body) > TELEGRAM_MAX_UTF16:
            raise RenderError(RenderReason.TOO_LONG_UTF16)
        return rendered

    def _prove_locked(self, rendered: RenderedBody) -> None:
        """Independently prove every locked byte of ``rendered`` is unchanged.

        Does not trust how ``rendered`` was built: slices its body at its
        recorded offsets, compares each slice with the locked segment, and
        compares the concatenation of locked slices with the canonical body's.
        """
        locked = tuple(seg.text for seg in self.segments if isinstance(seg, Locked))
        try:
            new_texts = rendered.locked_texts()
            canonical_texts = self.canonical().locked_texts()
        except UnicodeDecodeError as e:  # an offset split a surrogate pair
            raise RenderError(RenderReason.LOCKED_BYTES_CHANGED) from e
        if new_texts != locked or canonical_texts != locked:
            raise RenderError(RenderReason.LOCKED_BYTES_CHANGED)
        if "".join(new_texts) != "".join(canonical_texts):
            raise RenderError(RenderReason.LOCKED_BYTES_CHANGED)
        if rendered.body.count("\n") != self.body.count("\n"):
            raise RenderError(RenderReason.LAYOUT_CHANGED)

"""Surface-independent model of a canonical body: locked bytes and prose slots.

Rules of the model (design §7; plan "Korean style grammar ... deterministic
rejection"). Every surface adapter builds on them, so they live here once, each in
the module that enforces it; this module holds the body and re-exports the rest:
Rules 1-4 here, Rule 4a (sentence separators) in `gateway_shim.surfaces._slots`,
Rule 5 (UTF-16 units) in `gateway_shim.surfaces._characters`, Rule 6 (enum-only
errors) in `gateway_shim.surfaces._reasons`.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway_shim.surfaces._characters import (
    LINE_BREAK_OR_CONTROL,
    TELEGRAM_MAX_UTF16,
    has_category,
    utf16_len,
    utf16_slice,
)
from gateway_shim.surfaces._reasons import Ineligible, IneligibleReason, RenderError, RenderReason
from gateway_shim.surfaces._slots import (
    SENTENCE_SEPARATORS,
    Placeholder,
    ProseSlot,
    sentence_separator,
)
from kexpr.spool.contract import check_generated
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS, slots_token_bound

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
        return tuple(utf16_slice(encoded, start, end) for start, end in self.locked_spans_utf16)


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
            if len(lines) != slot.line_count or any(
                has_category(line, LINE_BREAK_OR_CONTROL) for line in lines
            ):
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

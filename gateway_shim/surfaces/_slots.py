"""A prose slot: the only bytes of a body a composition may replace. Pure.

A ``ProseSlot`` holds the ``Placeholder``s a slot issues — a slot-local token and
the glossary sentence of a code-issued semantic ID — and its canonical text, which
must be the exact local expansion of those IDs (`gateway_shim.surfaces._model`
Rule 2); a slot that is not one manifest branch with exactly the issued tokens
cannot be constructed.

Rule 4a of the surface model — a slot's sentences are joined by its
``sentence_separator``: one space (the whole slot is one line) except where the
host puts each sentence on its own line (``weekly.interpretation``, HOST-FORMATS
§4.4: two lines). A composition is always one line (``sentence (" " sentence)*``,
each sentence ending in ``TOKEN "."``); rendering a multi-line slot replaces the
single space after each ``TOKEN "."`` but the last by the separator, so sentence i
lands on line i, as in the canonical text. Nothing else may introduce a line break.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces._reasons import RenderError, RenderReason
from kexpr.spool.contract import SlotPolicy, slot_policy
from kexpr.spool.contract.fit import slot_styleable
from kexpr.spool.contract.manifest import ACTION_PREFIX, PREDICATE_PREFIX, TOKEN_RE

__all__ = ["SENTENCE_SEPARATORS", "Placeholder", "ProseSlot", "sentence_separator"]

# Rule 4a: the slots whose sentences the host renders one per line. Every other
# slot joins its sentences with one space.
SENTENCE_SEPARATORS: Final[Mapping[str, str]] = MappingProxyType({"weekly.interpretation": "\n"})


def sentence_separator(slot_id: str) -> str:
    """How the sentences of ``slot_id``'s canonical text are joined (Rule 4a)."""
    return SENTENCE_SEPARATORS.get(slot_id, " ")


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

"""Text rules shared by the surface adapters (design §7). Pure.

- A body is UTF-8-encodable text, LF line ends, no trailing newline,
  no control / line-separator / lone-surrogate character except the LF itself,
  and at most ``TELEGRAM_MAX_UTF16`` UTF-16 code units (Telegram's unit).
- Paragraphs are separated by exactly one blank line: no leading blank line and
  never two blank lines in a row.
- A typed slot's canonical text is the glossary sentence of each issued ID, each
  followed by ``"."``, joined by the slot's sentence separator (one space, or a
  line break for ``weekly.interpretation``), in the manifest's branch order; its
  tokens are ``kexpr.spool.contract.tokens_for`` of that order (so token i stands for
  the same ID here, in the capsule and in the response).

Every failure is ``Ineligible`` with an enum reason, never content.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final

from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces._characters import LINE_BREAK_OR_CONTROL, has_category
from gateway_shim.surfaces._model import (
    TELEGRAM_MAX_UTF16,
    Ineligible,
    IneligibleReason,
    Locked,
    Placeholder,
    ProseSlot,
    SlotRef,
    sentence_separator,
    utf16_len,
)
from kexpr.spool.contract import tokens_for

BULLET: Final = "- "
LABEL_SEPARATOR: Final = ": "
BLANK: Final = "\n\n"

# The line breaks and controls, and Cs: lone surrogates.
_FORBIDDEN_CATEGORIES: Final = LINE_BREAK_OR_CONTROL | {"Cs"}


def has_forbidden_char(text: str) -> bool:
    return has_category(text, _FORBIDDEN_CATEGORIES)


def is_line_text(text: object) -> bool:
    """A non-empty str with no control, line-break or lone-surrogate character."""
    return isinstance(text, str) and bool(text) and not has_forbidden_char(text)


def sentences(ids: Sequence[str], separator: str = " ") -> str:
    """The canonical text of typed sentences: ``"S1. S2."`` from the glossary."""
    return separator.join(GLOSSARY[i] + "." for i in ids)


def typed_slot(slot_id: str, ids: Sequence[str]) -> ProseSlot:
    """The prose slot issuing ``ids`` (one manifest branch, in branch order)."""
    placeholders = tuple(
        Placeholder(token=token, semantic_id=i, expansion=GLOSSARY[i])
        for token, i in zip(tokens_for(ids), ids, strict=True)
    )
    text = sentences(ids, sentence_separator(slot_id))
    return ProseSlot(slot_id=slot_id, placeholders=placeholders, canonical_text=text)


def check_body(body: object, *, max_utf16: int = TELEGRAM_MAX_UTF16) -> str:
    """Whole-body limits, before any grammar (cheap checks first).

    ``max_utf16`` is lower than Telegram's limit when the adapter adds bytes of
    its own (the physique projection): the *presented* body must fit.
    """
    if not isinstance(body, str):
        raise Ineligible(IneligibleReason.NOT_TEXT)
    try:
        body.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate cannot reach Telegram
        raise Ineligible(IneligibleReason.INVALID_UNICODE) from e
    if utf16_len(body) > max_utf16:
        raise Ineligible(IneligibleReason.TOO_LONG_UTF16)
    if "\r" in body:
        raise Ineligible(IneligibleReason.CARRIAGE_RETURN)
    if body.endswith("\n"):
        raise Ineligible(IneligibleReason.TRAILING_NEWLINE)
    if has_forbidden_char(body.replace("\n", "")):
        raise Ineligible(IneligibleReason.CONTROL_CHARACTER)
    return body


def paragraphs(body: str) -> list[str]:
    """paragraphs ::= PARAGRAPH (BLANK PARAGRAPH)*, no empty line anywhere else."""
    lines = body.split("\n")
    # An empty line at the start, or two in a row: an extra blank line. (An empty
    # line at the end is a trailing newline, rejected by check_body.)
    if lines[0] == "" or any(a == "" and b == "" for a, b in itertools.pairwise(lines)):
        raise Ineligible(IneligibleReason.BLANK_LINE_MISMATCH)
    return body.split(BLANK)


def bullet_value(line: str) -> str | None:
    """``"- " TEXT`` → TEXT (non-empty), else None."""
    if line.startswith(BULLET) and len(line) > len(BULLET):
        return line[len(BULLET) :]
    return None


def check_labels(found: Sequence[str], labels: Sequence[str], *, required: Sequence[str]) -> None:
    """``found`` is a subsequence of ``labels`` holding every ``required`` label."""
    if any(label not in labels for label in found):
        raise Ineligible(IneligibleReason.FACT_LABEL_UNKNOWN)
    if len(set(found)) != len(found):
        raise Ineligible(IneligibleReason.FACT_LABEL_DUPLICATE)
    if any(label not in found for label in required):
        raise Ineligible(IneligibleReason.FACT_LABEL_MISSING)
    if list(found) != [label for label in labels if label in found]:
        raise Ineligible(IneligibleReason.FACT_LABEL_ORDER)


class SegmentBuilder:
    """Collects a body's segments, merging adjacent locked text.

    A slot that no style word may precede in any of its sentences (the contract's
    fit table, `kexpr.spool.contract.fit`; design §6.1) is locked text, never a slot:
    the model is not asked to style what cannot be styled, and the grammar's "at
    least one style word" could not be met there anyway.
    """

    def __init__(self) -> None:
        self._segments: list[Locked | SlotRef] = []
        self._pending: list[str] = []
        self._slots: list[ProseSlot] = []

    def lock(self, text: str) -> None:
        self._pending.append(text)

    def slot(self, slot: ProseSlot, *, narrowed: bool = False) -> None:
        """Add ``slot``; locked instead when the fit table leaves it no word, or
        when ``narrowed`` (the operator narrowed its cell to none: the operator
        glossary's ``unstyled``)."""
        if narrowed or not slot.styleable:
            self.lock(slot.canonical_text)
            return
        self._flush()
        self._segments.append(SlotRef(len(self._slots)))
        self._slots.append(slot)

    def build(self) -> tuple[tuple[ProseSlot, ...], tuple[Locked | SlotRef, ...]]:
        self._flush()
        return tuple(self._slots), tuple(self._segments)

    def _flush(self) -> None:
        text = "".join(self._pending)
        self._pending.clear()
        if text:
            self._segments.append(Locked(text))

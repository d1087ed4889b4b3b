"""Shared helpers of the surface tests: Hypothesis strategies for lines and for
compositions (those the style grammar generates, and those the contract accepts:
the fit table's), and the structural checks every surface's golden and property
tests make (locked bytes, layout, UTF-16 spans)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import strategies as st

from gateway_shim.surfaces import (
    CanonicalSurface,
    ProseSlot,
    RenderedBody,
    RenderError,
    RenderReason,
    utf16_len,
)
from kexpr.spool.contract import SAFE_STYLE_LEXEMES, SlotPolicy, check_generated, check_grammar, fit

# Any single line the grammars can carry: no control, surrogate or line-break
# characters. Astral characters included, so UTF-16 offsets are exercised.
LINE_CHARS = st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp"))
LINES = st.text(LINE_CHARS, min_size=1, max_size=30)

_SEPARATORS = (", ", " ")


def _compose(tokens: Sequence[str], parts: Sequence[tuple[list[str], str]]) -> str:
    """sentence ::= (LEXEME (" " LEXEME)* (", " | " "))? TOKEN "." joined by " "."""
    return " ".join(
        (" ".join(lexemes) + separator if lexemes else "") + token + "."
        for token, (lexemes, separator) in zip(tokens, parts, strict=True)
    )


def compositions(policy: SlotPolicy) -> st.SearchStrategy[str]:
    """Compositions generated from the style grammar for ``policy``: every issued
    token once, in order, at least one lexeme, within the slot's limits."""
    tokens = policy.required_placeholder_tokens
    part = st.tuples(
        st.lists(st.sampled_from(tuple(SAFE_STYLE_LEXEMES)), max_size=4),
        st.sampled_from(_SEPARATORS),
    )
    return (
        st.lists(part, min_size=len(tokens), max_size=len(tokens))
        .filter(lambda parts: any(lexemes for lexemes, _ in parts))
        .filter(lambda parts: sum(len(lexemes) for lexemes, _ in parts) <= policy.max_style_lexemes)
        .map(lambda parts: _compose(tokens, parts))
        .filter(lambda text: len(text) <= policy.max_generated_chars)
    )


def _ids(slot: ProseSlot) -> tuple[str, ...]:
    return tuple(p.semantic_id for p in slot.placeholders)


def accepted_compositions(slot: ProseSlot) -> st.SearchStrategy[str]:
    """The compositions the contract accepts for ``slot``: the fit table lists
    them all (`kexpr.spool.contract.fit.compositions`, a small finite set)."""
    found = fit.compositions(slot.slot_id, _ids(slot))
    assert found, "a slot is only a slot when some word fits it"
    return st.sampled_from(found)


def composition_for_every_slot(surface: CanonicalSurface) -> st.SearchStrategy[dict[str, str]]:
    """Per slot, a composition generated from the grammar or one the fit table
    accepts (half each, so both the table's rejections and its acceptances are
    drawn often)."""
    return st.fixed_dictionaries(
        {
            s.slot_id: st.one_of(compositions(s.policy()), accepted_compositions(s))
            for s in surface.slots
        }
    )


def accepted_composition_for_every_slot(
    surface: CanonicalSurface,
) -> st.SearchStrategy[dict[str, str]]:
    """Per slot, a composition the contract accepts."""
    return st.fixed_dictionaries({s.slot_id: accepted_compositions(s) for s in surface.slots})


def assert_grammar_accepts(surface: CanonicalSurface, generated: dict[str, str]) -> None:
    for slot in surface.slots:
        assert check_grammar(slot.policy(), generated[slot.slot_id]) is None


def render_if_it_fits(surface: CanonicalSurface, generated: dict[str, str]) -> RenderedBody | None:
    """Render a composition the grammar accepts in every slot: it renders iff every
    word fits its sentence's cell (the fit table's own verdict, `fit.style_reason`,
    as the oracle); otherwise `render` refuses it with the table's reason and
    None is returned."""
    assert_grammar_accepts(surface, generated)
    verdicts = [fit.style_reason(s.slot_id, _ids(s), generated[s.slot_id]) for s in surface.slots]
    for slot, verdict in zip(surface.slots, verdicts, strict=True):
        assert check_generated(slot.policy(), generated[slot.slot_id]) == verdict
    first = next((v for v in verdicts if v is not None), None)
    if first is None:
        return surface.render(generated)
    with pytest.raises(RenderError) as info:
        surface.render(generated)
    assert info.value.reason is RenderReason.COMPOSITION_REJECTED
    assert info.value.contract_reason is first
    return None


def assert_locked_identical(
    canonical: RenderedBody, selected: RenderedBody, *, ends_with_slot: bool = False
) -> None:
    """Every locked byte identical, sliced out of each body at its own offsets;
    the spans start the body and end it (no unlocked edge) unless the body's
    last paragraph is a slot (weekly's rationale)."""
    assert len(canonical.locked_spans_utf16) == len(selected.locked_spans_utf16)
    assert canonical.locked_texts() == selected.locked_texts()
    assert "".join(canonical.locked_texts()) == "".join(selected.locked_texts())
    for rendered in (canonical, selected):
        assert rendered.locked_spans_utf16[0][0] == 0
        ends_locked = rendered.locked_spans_utf16[-1][1] == utf16_len(rendered.body)
        assert ends_locked is not ends_with_slot
        assert utf16_len(rendered.body) <= 4096


def assert_layout_identical(surface: CanonicalSurface, selected: str) -> None:
    """Line structure identical: same line count, blank lines at the same
    places, and only lines holding a slot differ (headings, bullets, order and
    every other line byte-identical)."""
    canonical_lines = surface.canonical().body.split("\n")
    selected_lines = selected.split("\n")
    assert len(canonical_lines) == len(selected_lines)
    assert [i for i, line in enumerate(canonical_lines) if line == ""] == [
        i for i, line in enumerate(selected_lines) if line == ""
    ]
    # A slot may span lines (weekly.interpretation): compare line by line.
    slot_lines = [line for s in surface.slots for line in s.canonical_text.split("\n")]
    for before, after in zip(canonical_lines, selected_lines, strict=True):
        if before != after:
            assert any(text in before for text in slot_lines)

"""Locked-byte proof, independent of the adapters' own offsets.

For every surface: host-shaped input from random facts, a random composition the
contract accepts for every slot (one the fit table lists), the selected body. The slots are then cut
out of both the canonical and the selected body by THIS file's reading of the
host's layout (docs/host-formats.md, docs/host-formats-adaptive.md) — never by
the spans the adapter recorded — and what remains must be identical, byte for
byte. So a selected body differs from the canonical body only inside slots,
whatever the adapter believes its slots are.

The cut per surface (``SLOT`` marks a removed slot):

- daily:    the 3rd of the 5 blank-line-separated paragraphs (the status);
- weekly:   the 3rd and the 6th of 6 paragraphs (interpretation, rationale);
- dual:     each line of the ``검토 필요`` block (the heading between two blank
            lines, before any ``상세 근거``) after its first, up to the next
            blank line: the decision line and the first review line take no
            style word (design §6.1), so they must be identical too;
- physique: the line between the inserted ``검토 안내`` and the final status line.
"""

from __future__ import annotations

from typing import Any

from adaptive_support import (
    CALLBACK,
    OPERATOR_GLOSSARY,
    dual_bodies,
    host_payloads,
    physique_bodies,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_host.host_render import render_daily, render_weekly
from surface_support import accepted_composition_for_every_slot
from test_surface_daily import _answers
from test_surface_weekly import _summaries

from gateway_shim.surfaces import CanonicalSurface
from gateway_shim.surfaces.adaptive import parse_adaptive
from gateway_shim.surfaces.card import CardOrigin
from gateway_shim.surfaces.daily import parse_daily
from gateway_shim.surfaces.weekly import parse_weekly

SLOT = "\x00SLOT\x00"  # never in a body: the adapters refuse control characters
STATUS_LINE = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"


def _cut_paragraphs(text: str, count: int, slots: tuple[int, ...]) -> list[str]:
    paragraphs = text.split("\n\n")
    assert len(paragraphs) == count
    return [SLOT if i in slots else p for i, p in enumerate(paragraphs)]


def cut_daily(text: str) -> list[str]:
    return _cut_paragraphs(text, 5, (2,))


def cut_weekly(text: str) -> list[str]:
    return _cut_paragraphs(text, 6, (2, 5))


def cut_dual(text: str) -> list[str]:
    lines = text.split("\n")
    judgment = [i for i, line in enumerate(lines) if line.startswith("현재 판단: ")]
    assert len(judgment) == 1
    out = list(lines)
    for i in range(judgment[0], len(lines) - 1):
        if lines[i - 1] == "" and lines[i + 1] == "" and lines[i] == "상세 근거":
            break
        if lines[i - 1] == "" and lines[i + 1] == "" and lines[i] == "검토 필요":
            j = i + 3  # the heading, a blank line, the first review line
            while j < len(lines) and lines[j] != "":
                out[j] = SLOT
                j += 1
            break
    return out


def cut_physique(text: str) -> list[str]:
    lines = text.split("\n")
    assert lines[-1] == STATUS_LINE and lines[-3] == "검토 안내"
    return [*lines[:-2], SLOT, lines[-1]]


def _assert_only_slots_differ(
    surface: CanonicalSurface, generated: dict[str, str], cut: Any
) -> None:
    canonical = surface.canonical().body
    selected = surface.render(generated).body
    assert cut(selected) == cut(canonical)


def _compositions(surface: CanonicalSurface, data: st.DataObject) -> dict[str, str]:
    return data.draw(accepted_composition_for_every_slot(surface))


@settings(max_examples=100, deadline=None)
@given(answers=_answers, data=st.data())
def test_daily_selected_differs_from_canonical_only_in_the_status(
    answers: dict[str, Any], data: st.DataObject
) -> None:
    body = render_daily(answers)
    surface = parse_daily(body)
    assert cut_daily(surface.canonical().body) == cut_daily(body)
    _assert_only_slots_differ(surface, _compositions(surface, data), cut_daily)


@settings(max_examples=100, deadline=None)
@given(summary=_summaries, data=st.data())
def test_weekly_selected_differs_from_canonical_only_in_its_two_slots(
    summary: dict[str, Any], data: st.DataObject
) -> None:
    body, explicit = render_weekly(summary)
    if explicit:
        return
    surface = parse_weekly(body)
    assert cut_weekly(surface.canonical().body) == cut_weekly(body)
    _assert_only_slots_differ(surface, _compositions(surface, data), cut_weekly)


@settings(max_examples=100, deadline=None)
@given(p=host_payloads(dual_bodies()), data=st.data())
def test_dual_selected_differs_from_canonical_only_in_the_later_review_lines(
    p: dict[str, Any], data: st.DataObject
) -> None:
    surface = parse_adaptive(
        p, callback_data=CALLBACK, origin=CardOrigin.FRESH, glossary=OPERATOR_GLOSSARY
    )
    assert surface.canonical().body == p["text"]
    _assert_only_slots_differ(surface, _compositions(surface, data), cut_dual)


@settings(max_examples=100, deadline=None)
@given(p=host_payloads(physique_bodies()), data=st.data())
def test_physique_selected_differs_from_the_host_text_only_by_the_review_block(
    p: dict[str, Any], data: st.DataObject
) -> None:
    surface = parse_adaptive(p, callback_data=CALLBACK, origin=CardOrigin.FRESH)
    # The canonical presentation is the host's text with exactly the two lines
    # "검토 안내" + the sentence inserted before the final status line.
    host_lines = p["text"].split("\n")
    cut = cut_physique(surface.canonical().body)
    assert cut == [*host_lines[:-1], "검토 안내", SLOT, host_lines[-1]]
    _assert_only_slots_differ(surface, _compositions(surface, data), cut_physique)

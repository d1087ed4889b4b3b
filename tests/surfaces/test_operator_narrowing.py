"""An operator may narrow a reason ID's cell of the fit table to no word, never widen
it (`gateway_shim.operator_glossary` rule 4a, docs/design.md §6.1)."""

from __future__ import annotations

import json

import pytest
from adaptive_support import CALLBACK, TH_ADAPTIVE_BODY, payload

from gateway_shim.operator_glossary import (
    SHIPPED_DUAL_GLOSSARY,
    GlossaryError,
    GlossaryProblem,
    parse_operator_glossary,
)
from gateway_shim.surfaces.adaptive import parse_adaptive
from gateway_shim.surfaces.card import CardOrigin
from kexpr.ops.glossary_cli import style_words

VERSION = "kexpr-dual-glossary-v1"


def _file(**extra: object) -> bytes:
    document = {"version": VERSION, "decisions": {}, "reasons": {}, **extra}
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def _slots(glossary: object) -> tuple[str, ...]:
    surface = parse_adaptive(
        payload(TH_ADAPTIVE_BODY),
        callback_data=CALLBACK,
        origin=CardOrigin.FRESH,
        glossary=glossary,  # type: ignore[arg-type]
    )
    assert surface.canonical().body == payload(TH_ADAPTIVE_BODY)["text"]
    return tuple(s.slot_id for s in surface.slots)


def test_the_shipped_card_has_nothing_to_style() -> None:
    # design §6.1, §6.2: the decision and every review line take no word.
    assert _slots(SHIPPED_DUAL_GLOSSARY) == ()
    assert all(
        words == []
        for cell in style_words(SHIPPED_DUAL_GLOSSARY).values()
        for words in cell.values()
    )


def test_a_narrowed_reason_is_recorded_and_can_only_stay_empty() -> None:
    # Narrowing still parses and counts (its digest differs), but every cell it can
    # narrow is already empty: the card has nothing to style either way, and no
    # narrowing widens anything.
    narrowed = parse_operator_glossary(_file(unstyled=["P_DUAL_REASON_LATEST"]))
    assert narrowed.unstyled == frozenset({"P_DUAL_REASON_LATEST"})
    assert _slots(narrowed) == ()
    assert style_words(narrowed) == style_words(SHIPPED_DUAL_GLOSSARY)
    words = style_words(narrowed)["adaptive.dual.review.N (N > 1)"]
    assert words["P_DUAL_REASON_LATEST"] == [] and words["P_DUAL_REASON_EDIT"] == []


def test_a_file_without_the_key_keeps_its_digest() -> None:
    assert parse_operator_glossary(_file()).digest() == SHIPPED_DUAL_GLOSSARY.digest()
    assert parse_operator_glossary(_file(unstyled=[])).digest() == SHIPPED_DUAL_GLOSSARY.digest()
    narrowed = parse_operator_glossary(_file(unstyled=["P_DUAL_REASON_EDIT"]))
    assert narrowed.digest() != SHIPPED_DUAL_GLOSSARY.digest()


@pytest.mark.parametrize(
    "unstyled",
    [
        ["P_DUAL_REASON_UNKNOWN"],  # not a reason in force
        ["P_DUAL_DECISION_HOLD"],  # a decision: nothing to narrow, and not a reason
        ["P_DUAL_REASON_EDIT", "P_DUAL_REASON_EDIT"],
        "P_DUAL_REASON_EDIT",
        [7],
        {"P_DUAL_REASON_EDIT": True},
    ],
)
def test_what_is_not_a_narrowing_is_refused(unstyled: object) -> None:
    with pytest.raises(GlossaryError) as e:
        parse_operator_glossary(_file(unstyled=unstyled))
    assert e.value.problem is GlossaryProblem.UNSTYLED_UNKNOWN


def test_there_is_no_key_that_widens() -> None:
    # Anything but the four keys is the file's wrong_keys: no "styled", no "words".
    for key in ("styled", "words", "style_words"):
        with pytest.raises(GlossaryError) as e:
            parse_operator_glossary(_file(**{key: {"P_DUAL_DECISION_HOLD": ["그리고"]}}))
        assert e.value.problem is GlossaryProblem.WRONG_KEYS

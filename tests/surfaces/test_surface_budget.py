"""`answer_over_budget`: a surface whose minimal answer cannot arrive
within the call's budget is ineligible — for every surface, judged on the parsed
surface's slots (`CanonicalSurface.require_answer_budget`) by the shim and by
`kexpr surfaces check` alike; every real host example still fits.

Under the fit table of design §6.1/§6.2 no dual card has a slot, so every card, of
any number of reasons, has the empty answer's bound and fits; the one slot that
exists (the goal-missing weekly interpretation) fits too. The rule still refuses a
surface carrying a slot with no bound (a locked slot: no answer to it exists), which
only a synthetic surface can carry now."""

from __future__ import annotations

import json
from typing import Any

import pytest
from adaptive_support import (
    CALLBACK,
    OPERATOR_FILE,
    PUBLIC_DECISION,
    PUBLIC_REASONS,
    host_examples,
    payload,
)
from kit.bodies import STYLED_BODY

from gateway_shim.operator_glossary import parse_operator_glossary
from gateway_shim.surfaces import (
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    Locked,
    Placeholder,
    ProseSlot,
    SlotRef,
)
from gateway_shim.surfaces.adaptive import parse_adaptive
from gateway_shim.surfaces.card import DUAL_SURFACE, CardOrigin
from gateway_shim.surfaces.dual import format_dual_body, review_slot_id
from gateway_shim.surfaces.weekly import parse_weekly
from kexpr.ops.surfaces_cli import check_request
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS, slots_token_bound

R = IneligibleReason
COVERED_REASONS = {R.ANSWER_OVER_BUDGET}
# The test glossary and one reason more: six distinct review reasons with the two
# public texts. Every review line is locked (the fit table, design §6.1, §6.2).
GLOSSARY = parse_operator_glossary(
    json.dumps(
        {
            **OPERATOR_FILE,
            "reasons": {
                **OPERATOR_FILE["reasons"],
                "P_DUAL_REASON_SLEEP_GAP": "수면 기록이 일부 비어 있습니다.",
            },
        },
        ensure_ascii=False,
    ).encode()
)
REASONS = tuple(dict.fromkeys((*PUBLIC_REASONS, *(f"{t}." for t in GLOSSARY.reasons.values()))))
EMPTY_ANSWER_BOUND = slots_token_bound(DUAL_SURFACE, ())


def card(n: int) -> dict[str, Any]:
    return payload(
        format_dual_body(
            goal="린매스업",
            head=("가상 테스트 고객 · 2026-07-28",),
            decision=PUBLIC_DECISION,
            recommendations=("칼로리와 매크로를 변경하지 않음",),
            reasons=REASONS[:n],
            details=None,
        )
    )


def parse(n: int) -> CanonicalSurface:
    return parse_adaptive(
        card(n),
        callback_data=CALLBACK,
        origin=CardOrigin.FRESH,
        surface=DUAL_SURFACE,
        glossary=GLOSSARY,
    )


def test_the_reasons_are_distinct() -> None:
    assert len(REASONS) == 6


@pytest.mark.parametrize("n", range(len(REASONS) + 1))
def test_a_dual_card_of_any_length_has_nothing_to_style_and_fits(n: int) -> None:
    surface = parse(n)
    assert surface.slots == ()
    bound = surface.answer_token_bound()
    assert bound is not None and bound == EMPTY_ANSWER_BOUND
    assert bound <= ANSWER_BUDGET_TOKENS
    surface.require_answer_budget()


def _locked_review_surface(n: int) -> CanonicalSurface:
    """Review lines 2..n as slots, as the dual adapter built them before the fit
    table locked them: a synthetic surface no body parses to any more."""
    by_text = {f"{v}.": k for k, v in GLOSSARY.reasons.items()}
    slots = tuple(
        ProseSlot(
            slot_id=review_slot_id(i),
            placeholders=(
                Placeholder(
                    token="[[P:01]]",
                    semantic_id=by_text[REASONS[i - 1]],
                    expansion=REASONS[i - 1][:-1],
                    glossary=GLOSSARY.entries,
                ),
            ),
            canonical_text=REASONS[i - 1],
        )
        for i in range(2, n + 1)
    )
    segments: list[Locked | SlotRef] = []
    for index in range(len(slots)):
        if index:
            segments.append(Locked("\n"))
        segments.append(SlotRef(index))
    return CanonicalSurface(
        surface=DUAL_SURFACE,
        body="\n".join(s.canonical_text for s in slots),
        slots=slots,
        segments=tuple(segments),
    )


@pytest.mark.parametrize("n", range(2, len(REASONS) + 1))
def test_a_surface_carrying_a_locked_slot_has_no_bound_and_is_over_budget(n: int) -> None:
    # No answer to a locked slot exists, so its answer has no bound: never sent.
    surface = _locked_review_surface(n)
    assert len(surface.slots) == n - 1
    assert surface.answer_token_bound() is None
    with pytest.raises(Ineligible) as e:
        surface.require_answer_budget()
    assert e.value.reason is R.ANSWER_OVER_BUDGET
    assert e.value.reason.value == "answer_over_budget"


def test_the_styled_slot_fits_its_budget() -> None:
    surface = parse_weekly(STYLED_BODY)
    assert [s.slot_id for s in surface.slots] == ["weekly.interpretation"]
    bound = surface.answer_token_bound()
    assert bound is not None and EMPTY_ANSWER_BOUND is not None
    assert EMPTY_ANSWER_BOUND < bound <= ANSWER_BUDGET_TOKENS
    surface.require_answer_budget()


def test_surfaces_check_finds_every_card_eligible() -> None:
    request = {
        "surface": DUAL_SURFACE,
        "payload": card(len(REASONS)),
        "callback_data": CALLBACK,
        "origin": "fresh",
    }
    result = check_request(request, GLOSSARY)
    assert result.eligible and result.reason is None and result.slots == ()


def test_every_eligible_host_example_is_within_budget() -> None:
    rows = [r for r in host_examples() if r["expected"] == "eligible"]
    assert rows
    for row in rows:
        assert check_request(row["request"]).eligible, row["example"]

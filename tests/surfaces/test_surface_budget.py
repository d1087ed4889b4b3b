"""`answer_over_budget`: a surface whose minimal answer cannot arrive
within the call's budget is ineligible — for every surface, judged on the parsed
surface's slots (`CanonicalSurface.require_answer_budget`) by the shim and by
`kexpr surfaces check` alike; every real host example still fits."""

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

from gateway_shim.operator_glossary import parse_operator_glossary
from gateway_shim.surfaces import CanonicalSurface, Ineligible, IneligibleReason
from gateway_shim.surfaces.adaptive import parse_adaptive
from gateway_shim.surfaces.card import DUAL_SURFACE, CardOrigin
from gateway_shim.surfaces.dual import format_dual_body
from kexpr.ops.surfaces_cli import check_request
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS

R = IneligibleReason
COVERED_REASONS = {R.ANSWER_OVER_BUDGET}
# The test glossary and one reason more: six distinct review reasons with the two
# public texts. The first review line is locked (the fit table, design §6.1), so a
# card of n reasons has n - 1 slots; five slots are the first that cannot fit.
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
FITS_UP_TO = 5


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
def test_a_dual_card_fits_up_to_its_budget(n: int) -> None:
    surface = parse(n)  # the body itself is eligible: only the answer is too long
    assert len(surface.slots) == max(0, n - 1)
    bound = surface.answer_token_bound()
    assert bound is not None
    if n <= FITS_UP_TO:
        surface.require_answer_budget()
    else:
        with pytest.raises(Ineligible) as e:
            surface.require_answer_budget()
        assert e.value.reason is R.ANSWER_OVER_BUDGET
    # The verdict is the bound against the budget, nothing else.
    try:
        surface.require_answer_budget()
        fits = True
    except Ineligible:
        fits = False
    assert fits is (bound <= ANSWER_BUDGET_TOKENS)


def test_surfaces_check_names_the_reason() -> None:
    request = {
        "surface": DUAL_SURFACE,
        "payload": card(FITS_UP_TO + 1),
        "callback_data": CALLBACK,
        "origin": "fresh",
    }
    result = check_request(request, GLOSSARY)
    assert not result.eligible and result.reason == "answer_over_budget"
    request["payload"] = card(FITS_UP_TO)
    assert check_request(request, GLOSSARY).eligible


def test_every_eligible_host_example_is_within_budget() -> None:
    rows = [r for r in host_examples() if r["expected"] == "eligible"]
    assert rows
    for row in rows:
        assert check_request(row["request"]).eligible, row["example"]

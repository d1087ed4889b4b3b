"""`kexpr surfaces check`'s core on generated host-shaped messages: every generated eligible body is eligible with the round trip, every body
the plan makes ineligible is ineligible with an enum reason, and the answer is the
batch line's exact shape."""

from __future__ import annotations

import json
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
from reference_host.host_render import BRANCH_TEXT, render_daily, render_weekly
from test_surface_daily import _answers
from test_surface_weekly import _summaries

from gateway_shim.surfaces.adaptive import parse_adaptive
from gateway_shim.surfaces.card import CardOrigin
from kexpr.ops.surfaces_cli import CheckResult, check_request
from kexpr.spool.contract import SAFE_STYLE_LEXEMES
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS
from kexpr.spool.contract.fit import MIN_CHOICES, compositions


def _answer(result: CheckResult) -> dict[str, Any]:
    answer = json.loads(json.dumps(result.to_json_object()))
    assert set(answer) == {
        "eligible",
        "reason",
        "slots",
        "roundtrip",
        "nothing_to_style",
        "nothing_to_style_reason",
    }
    # An eligible body says whether it has anything to ask, with the one fixed reason
    # when it has not; an ineligible one says neither.
    if answer["eligible"]:
        assert answer["nothing_to_style"] is (not answer["slots"])
        assert (answer["nothing_to_style_reason"] is None) is bool(answer["slots"])
    else:
        assert (answer["nothing_to_style"], answer["nothing_to_style_reason"]) == (None, None)
    answer.pop("nothing_to_style")
    answer.pop("nothing_to_style_reason")
    return answer


def _assert_eligible(result: CheckResult, slots: int) -> None:
    """Eligible with ``slots`` slots, each with its IDs, the words the fit table
    allows before each sentence (one list per token, lexicon words only, some
    sentence with one), and its count of accepted compositions: at least the fit
    table's minimum, or the slot would be locked (design §6.1)."""
    answer = _answer(result)
    assert (answer["eligible"], answer["reason"], answer["roundtrip"]) == (True, None, True)
    assert len(answer["slots"]) == slots
    for slot in answer["slots"]:
        assert set(slot) == {"slot_id", "predicate_ids", "action_ids", "words", "compositions"}
        ids = slot["predicate_ids"] + slot["action_ids"]
        assert ids and len(slot["words"]) == len(ids)
        assert any(slot["words"])
        for words in slot["words"]:
            assert all(w.rstrip(",") in SAFE_STYLE_LEXEMES for w in words)
        assert slot["compositions"] == len(compositions(slot["slot_id"], ids)) >= MIN_CHOICES


def _assert_ineligible(result: CheckResult, reason: str) -> None:
    assert _answer(result) == {"eligible": False, "reason": reason, "slots": [], "roundtrip": None}


@settings(max_examples=100, deadline=None)
@given(answers=_answers)
def test_generated_daily_bodies(answers: dict[str, Any]) -> None:
    body = render_daily(answers)
    # Eligible with nothing to style: the status sentence is locked (design §6.2).
    _assert_eligible(check_request({"surface": "daily.v1", "body": body}), slots=0)
    # The pinned commit's save path: the partial sentence whatever the facts.
    complete = "저장된 오늘 기록을 확인했습니다."
    if complete in body:
        pre_cutover = body.replace(complete, "일부 항목이 기록되지 않아 저장된 내용만 안내합니다.")
        result = check_request({"surface": "daily.v1", "body": pre_cutover})
        _assert_ineligible(result, "status_pre_cutover")


@settings(max_examples=100, deadline=None)
@given(summary=_summaries)
def test_generated_weekly_reports(summary: dict[str, Any]) -> None:
    body, explicit = render_weekly(summary)
    request = {"surface": "weekly.v1", "body": body, "explicit_fields": sorted(summary)}
    if explicit:
        _assert_ineligible(check_request(request), "explicit_source_field")
    else:
        # Only the goal-missing report's interpretation is a slot (design §6.2).
        styled = body.split("\n\n")[2] == BRANCH_TEXT["I2"]
        _assert_eligible(check_request(request), slots=1 if styled else 0)


@settings(max_examples=60, deadline=None)
@given(
    p=st.one_of(
        host_payloads(dual_bodies()).map(lambda p: ("adaptive.dualcoachtest.card.v1", p)),
        host_payloads(physique_bodies()).map(lambda p: ("adaptive.physique.card.v1", p)),
    ),
    origin=st.sampled_from(["fresh", "recovery"]),
)
def test_generated_adaptive_cards(p: tuple[str, dict[str, Any]], origin: str) -> None:
    surface, payload = p
    request = {"surface": surface, "payload": payload, "callback_data": CALLBACK, "origin": origin}
    # Generated dual cards use the operator glossary's texts (`--glossary`).
    result = check_request(request, OPERATOR_GLOSSARY)
    if origin == "recovery":
        _assert_ineligible(result, "recovery_payload")
        return
    # A card with many long reasons may need more tokens than can arrive.
    parsed = parse_adaptive(
        payload,
        callback_data=CALLBACK,
        origin=CardOrigin.FRESH,
        surface=surface,
        glossary=OPERATOR_GLOSSARY,
    )
    bound = parsed.answer_token_bound()
    if bound is not None and bound <= ANSWER_BUDGET_TOKENS:
        # A dual card with fewer than two review lines has none: nothing to style.
        _assert_eligible(result, slots=len(parsed.slots))
    else:
        _assert_ineligible(result, "answer_over_budget")

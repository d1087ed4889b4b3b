"""The enveloped adaptive payload (both schemas): only a fresh, well-formed,
bound ``status == "card"`` payload of a known schema is eligible; everything
else is ``Ineligible`` with its own reason (plan "Adaptive schemas and
publication boundary")."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from surface_support import BUTTONS, binding, payload

from gateway_shim.surfaces import Ineligible, IneligibleReason
from gateway_shim.surfaces.adaptive import parse_adaptive
from gateway_shim.surfaces.card import (
    ADAPTIVE_SURFACES,
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    AdaptiveBinding,
    Button,
    CardOrigin,
    adaptive_surface_of,
    card_payload,
    read_card,
)
from gateway_shim.surfaces.dual import DualDecision, DualFacts, DualReason, format_dual_card
from gateway_shim.surfaces.physique import format_physique_card

DUAL_TEXT = format_dual_card(
    title="김민지 님",
    customer="김민지",
    date="11월 30일",
    facts=("평균 체중 72.4kg",),
    goal="린매스업",
    decision=DualDecision.ADJUST_PLAN,
    recommendations=("탄수화물 20g 줄이기",),
    reasons=(DualReason.RECORDS_INSUFFICIENT, DualReason.INTAKE_BELOW_PLAN),
)
DUAL_FACTS = DualFacts(
    decision=DualDecision.ADJUST_PLAN,
    reasons=(DualReason.RECORDS_INSUFFICIENT, DualReason.INTAKE_BELOW_PLAN),
)
PHYSIQUE_TEXT = format_physique_card(
    title="김민지 님",
    customer="김민지",
    day="11월 30일",
    day_count=12,
    decision="탄수화물 20g 감량",
    basis="체중 증가가 목표보다 빠름",
)
CARDS: dict[str, tuple[str, DualFacts | None]] = {
    DUAL_SURFACE: (DUAL_TEXT, DUAL_FACTS),
    PHYSIQUE_SURFACE: (PHYSIQUE_TEXT, None),
}


def fresh(surface: str) -> dict[str, Any]:
    return payload(surface, CARDS[surface][0])


def parse(p: object, surface: str, b: AdaptiveBinding | None = None) -> Any:
    return parse_adaptive(p, b or binding(), CARDS[surface][1])  # type: ignore[arg-type]


def edited(surface: str, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    p = copy.deepcopy(fresh(surface))
    edit(p)
    return p


@pytest.mark.parametrize("surface", ADAPTIVE_SURFACES)
def test_fresh_card_is_eligible(surface: str) -> None:
    parsed = parse(fresh(surface), surface)
    assert parsed.surface == surface
    assert adaptive_surface_of(fresh(surface)) == surface


# Every payload status but a fresh "card" is canonical: the plan's menu, view,
# operator input, terminal delivery and published, and anything else.
@pytest.mark.parametrize("surface", ADAPTIVE_SURFACES)
@pytest.mark.parametrize(
    "status",
    [
        "menu",
        "view",
        "operator_input",
        "publish_pending",
        "published",
        "delivered",
        "delivery_failed",
        "abandoned",
        "Card",
        "card ",
    ],
)
def test_every_status_but_card_is_ineligible(surface: str, status: str) -> None:
    with pytest.raises(Ineligible) as info:
        parse(payload(surface, CARDS[surface][0], status=status), surface)
    assert info.value.reason is IneligibleReason.STATUS_NOT_CARD


@pytest.mark.parametrize("surface", ADAPTIVE_SURFACES)
def test_recovery_is_ineligible_even_for_a_fresh_looking_card(surface: str) -> None:
    with pytest.raises(Ineligible) as info:
        parse(fresh(surface), surface, binding(origin=CardOrigin.RECOVERY))
    assert info.value.reason is IneligibleReason.RECOVERY_PAYLOAD


def _set(path: tuple[str, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def edit(p: dict[str, Any]) -> None:
        target = p
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _delete(path: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    def edit(p: dict[str, Any]) -> None:
        target = p
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


# fmt: off
MALFORMED: list[tuple[str, Callable[[dict[str, Any]], None], IneligibleReason]] = [
    ("extra_top_key", _set(("reply_markup",), {}), IneligibleReason.PAYLOAD_MALFORMED),
    ("missing_status", _delete(("status",)), IneligibleReason.PAYLOAD_MALFORMED),
    ("missing_buttons", _delete(("buttons",)), IneligibleReason.PAYLOAD_MALFORMED),
    ("empty_status", _set(("status",), ""), IneligibleReason.PAYLOAD_MALFORMED),
    ("status_not_str", _set(("status",), 1), IneligibleReason.PAYLOAD_MALFORMED),
    ("text_not_str", _set(("text",), b"text"), IneligibleReason.PAYLOAD_MALFORMED),
    ("text_none", _set(("text",), None), IneligibleReason.PAYLOAD_MALFORMED),
    ("envelope_not_mapping", _set(("envelope",), "adaptive.dualcoachtest.card.v1"), IneligibleReason.PAYLOAD_MALFORMED),
    ("envelope_without_schema", _delete(("envelope", "schema_version")), IneligibleReason.PAYLOAD_MALFORMED),
    ("schema_not_str", _set(("envelope", "schema_version"), 1), IneligibleReason.PAYLOAD_MALFORMED),
    ("envelope_extra_key", _set(("envelope", "chat_id"), "1"), IneligibleReason.PAYLOAD_MALFORMED),
    ("envelope_missing_key", _delete(("envelope", "card_kind")), IneligibleReason.PAYLOAD_MALFORMED),
    ("revision_bool", _set(("envelope", "revision"), True), IneligibleReason.PAYLOAD_MALFORMED),
    ("revision_str", _set(("envelope", "revision"), "3"), IneligibleReason.PAYLOAD_MALFORMED),
    ("revision_negative", _set(("envelope", "revision"), -1), IneligibleReason.PAYLOAD_MALFORMED),
    ("session_empty", _set(("envelope", "session_id"), ""), IneligibleReason.PAYLOAD_MALFORMED),
    ("buttons_not_list", _set(("buttons",), {"text": "승인"}), IneligibleReason.BUTTONS_MALFORMED),
    ("buttons_str", _set(("buttons",), "승인"), IneligibleReason.BUTTONS_MALFORMED),
    ("button_row_empty", _set(("buttons",), [[]]), IneligibleReason.BUTTONS_MALFORMED),
    ("button_row_not_list", _set(("buttons",), [{"text": "승인", "callback_data": "x"}]), IneligibleReason.BUTTONS_MALFORMED),
    ("button_missing_data", _set(("buttons",), [[{"text": "승인"}]]), IneligibleReason.BUTTONS_MALFORMED),
    ("button_extra_key", _set(("buttons",), [[{"text": "승인", "callback_data": "x", "url": "https://x"}]]), IneligibleReason.BUTTONS_MALFORMED),
    ("button_text_empty", _set(("buttons",), [[{"text": "", "callback_data": "x"}]]), IneligibleReason.BUTTONS_MALFORMED),
    ("button_data_not_str", _set(("buttons",), [[{"text": "승인", "callback_data": 1}]]), IneligibleReason.BUTTONS_MALFORMED),
    # An unknown (future) schema says so even when its other keys differ too.
    ("future_schema", _set(("envelope", "schema_version"), "adaptive.dualcoachtest.card.v2"), IneligibleReason.UNKNOWN_SCHEMA),
    ("future_schema_with_new_keys", lambda p: (p["envelope"].update(schema_version="adaptive.physique.card.v2", layout="compact"), p.update(sections=[])), IneligibleReason.UNKNOWN_SCHEMA),
    ("other_product_schema", _set(("envelope", "schema_version"), "daily.v1"), IneligibleReason.UNKNOWN_SCHEMA),
]
# fmt: on


@pytest.mark.parametrize("surface", ADAPTIVE_SURFACES)
@pytest.mark.parametrize(("name", "edit", "reason"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_payload_is_ineligible(
    surface: str, name: str, edit: Callable[[dict[str, Any]], None], reason: IneligibleReason
) -> None:
    with pytest.raises(Ineligible) as info:
        parse(edited(surface, edit), surface)
    assert info.value.reason is reason
    assert info.value.args == (reason.value,)


@pytest.mark.parametrize("not_a_mapping", [None, [], "card", b"{}", 3])
def test_non_mapping_payload_is_malformed(not_a_mapping: object) -> None:
    with pytest.raises(Ineligible) as info:
        read_card(not_a_mapping)
    assert info.value.reason is IneligibleReason.PAYLOAD_MALFORMED
    assert adaptive_surface_of(not_a_mapping) is None


# The envelope is bound to the host's own session state (plan manifest:
# "card grammar/envelope/session/proposal/revision mismatch").
@pytest.mark.parametrize("surface", ADAPTIVE_SURFACES)
@pytest.mark.parametrize(
    "changes",
    [
        {"session_id": "sess-other"},
        {"proposal_digest": "prop-replaced"},
        {"revision": 4},
        {"card_kind": "final_review"},
    ],
    ids=["session", "proposal", "revision", "card_kind"],
)
def test_envelope_must_match_the_binding(surface: str, changes: dict[str, Any]) -> None:
    with pytest.raises(Ineligible) as info:
        parse(fresh(surface), surface, binding(**changes))
    assert info.value.reason is IneligibleReason.BINDING_MISMATCH


def test_binding_fields_outside_the_envelope_do_not_affect_eligibility() -> None:
    # The callback action and origin message are bound by the digest, not here.
    parse(fresh(DUAL_SURFACE), DUAL_SURFACE, binding(callback_action="other", origin_message_id=""))


def test_schema_mismatch_between_the_adapters() -> None:
    from gateway_shim.surfaces.dual import parse_dual_card
    from gateway_shim.surfaces.physique import parse_physique_card

    with pytest.raises(Ineligible) as info:
        parse_dual_card(fresh(PHYSIQUE_SURFACE), binding(), DUAL_FACTS)
    assert info.value.reason is IneligibleReason.SCHEMA_MISMATCH
    with pytest.raises(Ineligible) as info:
        parse_physique_card(fresh(DUAL_SURFACE), binding())
    assert info.value.reason is IneligibleReason.SCHEMA_MISMATCH
    # A dual card's text under a physique envelope fails the physique grammar.
    with pytest.raises(Ineligible):
        parse_physique_card(payload(PHYSIQUE_SURFACE, DUAL_TEXT), binding())


def test_facts_must_fit_the_schema() -> None:
    with pytest.raises(Ineligible) as info:
        parse_adaptive(fresh(DUAL_SURFACE), binding(), None)
    assert info.value.reason is IneligibleReason.FACTS_INVALID
    with pytest.raises(Ineligible) as info:
        parse_adaptive(fresh(PHYSIQUE_SURFACE), binding(), DUAL_FACTS)
    assert info.value.reason is IneligibleReason.FACTS_INVALID
    with pytest.raises(Ineligible) as info:
        parse_adaptive(fresh(PHYSIQUE_SURFACE), "binding", None)  # type: ignore[arg-type]
    assert info.value.reason is IneligibleReason.FACTS_INVALID


@pytest.mark.parametrize("surface", ADAPTIVE_SURFACES)
def test_read_card_keeps_buttons_and_envelope(surface: str) -> None:
    p = fresh(surface)
    card = read_card(p)
    assert card.buttons == tuple(
        tuple(Button(text=t, callback_data=d) for t, d in row) for row in BUTTONS
    )
    assert card.to_json_object() == p  # lists and dicts, exactly the payload
    assert card.envelope.schema_version == surface


def test_card_payload_refuses_what_read_card_refuses() -> None:
    with pytest.raises(ValueError):
        card_payload(
            surface="adaptive.x.v1",
            text="t",
            buttons=(),
            session_id="s",
            proposal_digest="d",
            revision=1,
            card_kind="k",
        )
    with pytest.raises(ValueError):
        card_payload(
            surface=DUAL_SURFACE,
            text="t",
            buttons=((),),
            session_id="s",
            proposal_digest="d",
            revision=1,
            card_kind="k",
        )
    with pytest.raises(ValueError):
        card_payload(
            surface=DUAL_SURFACE,
            text="t",
            buttons=(),
            session_id="s",
            proposal_digest="d",
            revision=-1,
            card_kind="k",
        )


@pytest.mark.parametrize(
    "changes",
    [
        {"callback_action": ""},
        {"session_id": 1},
        {"revision": True},
        {"revision": -1},
        {"origin_message_id": None},
        {"origin": "recovery"},
    ],
)
def test_adaptive_binding_is_typed(changes: dict[str, Any]) -> None:
    with pytest.raises(TypeError):
        binding(**changes)


COVERED_REASONS = {case[2] for case in MALFORMED} | {
    IneligibleReason.STATUS_NOT_CARD,
    IneligibleReason.RECOVERY_PAYLOAD,
    IneligibleReason.BINDING_MISMATCH,
    IneligibleReason.SCHEMA_MISMATCH,
    IneligibleReason.FACTS_INVALID,
}

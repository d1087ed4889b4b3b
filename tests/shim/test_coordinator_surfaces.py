"""The coordinator's weekly and adaptive entry points and the host integration
contract (`binding_digest`, `revalidate`), against a scripted worker thread.

Rules checked: disabled and ineligible write zero files; the capsule carries
each surface's slots and nothing else; the artifact key uses the plan's inputs
per surface; a candidate re-proves itself only against the same payload and
binding it was made from."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reference_host.samples import (
    CUSTOMER_VALUES,
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    SCHEDULE,
    WEEKLY_BODY,
    WEEKLY_FIELDS,
    WEEKLY_SELECTED,
    callback_data,
    dual_card,
    physique_card,
    session,
)
from reference_host.scripted_worker import ScriptedWorker, invalid, provider_error, report_outcomes

import gateway_shim
from gateway_shim import (
    ADAPTIVE_UNKNOWN_SURFACE,
    CandidateOutcome,
    CandidateStatus,
    CardOrigin,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    RevalidationError,
    RevalidationReason,
    binding_digest,
    exact_block,
    revalidate,
)
from gateway_shim.surfaces import Ineligible, IneligibleReason
from kexpr.spool.layout import DataRoot

SESSION = session()
DUAL_PAYLOAD = dual_card(SESSION)
PHYSIQUE_PAYLOAD = physique_card(SESSION)
STATUS_LINE = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
REVIEW_BLOCK = "검토 안내\n제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
PHYSIQUE_PROJECTION = (
    str(PHYSIQUE_PAYLOAD["text"])[: -len(STATUS_LINE)] + REVIEW_BLOCK + STATUS_LINE
)
CALLBACK = callback_data(SESSION)
PINS = ("owner=coach-1", "epoch=7")


def bind(**changes: Any) -> dict[str, Any]:
    """The host's keyword arguments to present_adaptive / binding_digest / revalidate."""
    return {
        "callback_data": CALLBACK,
        "origin": CardOrigin.FRESH,
        "surface": None,
        "authority_pins": PINS,
        **changes,
    }


@pytest.fixture
def coords(root: DataRoot) -> Iterator[list[KoreanExpressionCoordinator]]:
    made: list[KoreanExpressionCoordinator] = []
    yield made
    for c in made:
        c.close()


def make(
    root: DataRoot,
    made: list[KoreanExpressionCoordinator],
    mode: Mode = Mode.ENABLED,
    **surfaces: bool,
) -> KoreanExpressionCoordinator:
    surfaces = surfaces or {"daily": True, "weekly": True, "adaptive_operator": True}
    coord = KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(mode, **surfaces)), root.root
    )
    made.append(coord)
    return coord


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


# --- weekly -----------------------------------------------------------------------------


def test_weekly_selected_with_its_two_slots(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_weekly(WEEKLY_BODY, explicit_fields=WEEKLY_FIELDS, **SCHEDULE)
    assert cand.outcome is Outcome.ACCEPTED and cand.status is CandidateStatus.SELECTED
    assert cand.surface_version == "weekly.v1"
    assert cand.body == WEEKLY_SELECTED
    assert [slot_id for slot_id, _ in cand.generated] == [
        "weekly.interpretation",
        "weekly.rationale",
    ]
    capsule = w.requests[0]["capsule"]
    assert capsule["surface"] == "weekly.v1"
    assert [
        (
            s["slot_id"],
            s["allowed_predicate_ids"],
            s["allowed_action_ids"],
            s["required_placeholder_tokens"],
        )
        for s in capsule["slots"]
    ] == [
        (
            "weekly.interpretation",
            ["P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"],
            [],
            ["[[P:01]]", "[[P:02]]"],
        ),
        ("weekly.rationale", [], ["A_WEEKLY_KEEP_BASELINE"], ["[[A:01]]"]),
    ]
    # Locked: everything before the interpretation, and between it and the
    # rationale (the report's last paragraph).
    assert len(cand.canonical_locked_spans_utf16) == len(cand.locked_spans_utf16) == 2
    wire = json.dumps(w.requests, ensure_ascii=False)
    for value in (*CUSTOMER_VALUES, *SCHEDULE.values()):
        assert value not in wire


def test_weekly_artifact_key_inputs(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords, Mode.SHADOW)
    with ScriptedWorker(root, compose=provider_error):  # canonical at once: keys only
        keys = [
            coord.present_weekly(
                WEEKLY_BODY, explicit_fields=WEEKLY_FIELDS, **{**SCHEDULE, **changes}
            ).artifact_key
            for changes in (
                {},
                {},
                {"kst_day": "2025-12-07"},
                {"kind": "weekly_retry"},
                {"schedule_key": "s2"},
            )
        ]
    assert keys[0] == keys[1]
    assert len(set(keys[1:])) == 4 and all(k is not None and len(k) == 32 for k in keys)  # 128 bits


@pytest.mark.parametrize(
    ("surfaces", "fields", "outcome"),
    [
        ({"daily": True, "adaptive_operator": True}, WEEKLY_FIELDS, Outcome.DISABLED),
        ({"weekly": True}, (*WEEKLY_FIELDS, "reason"), Outcome.INELIGIBLE),
        ({"weekly": True}, ("summary_text",), Outcome.INELIGIBLE),
        ({"weekly": True}, "interpretation", Outcome.INELIGIBLE),
    ],
    ids=["weekly_switch_off", "explicit_rationale_field", "explicit_summary_text", "bare_str"],
)
def test_weekly_disabled_or_ineligible_writes_nothing(
    root: DataRoot,
    coords: list[KoreanExpressionCoordinator],
    surfaces: dict[str, bool],
    fields: tuple[str, ...],
    outcome: CandidateOutcome,
) -> None:
    coord = make(root, coords, Mode.ENABLED, **surfaces)
    cand = coord.present_weekly(WEEKLY_BODY, explicit_fields=fields, **SCHEDULE)
    assert cand.outcome is outcome and cand.body == WEEKLY_BODY and cand.publication_permitted
    assert not root.root.exists()


# --- adaptive: presentation ----------------------------------------------------------------


def test_dual_card_selected_with_its_later_review_slot(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_adaptive(DUAL_PAYLOAD, **bind(surface=DUAL_SURFACE))
    assert cand.outcome is Outcome.ACCEPTED and cand.surface_version == DUAL_SURFACE
    capsule = w.requests[0]["capsule"]
    # The fit table gives the decision and the first review line no word: they
    # are locked, never slots; the second line is the card's one slot.
    assert [(s["slot_id"], s["allowed_predicate_ids"]) for s in capsule["slots"]] == [
        ("adaptive.dual.review.2", ["P_DUAL_REASON_LATEST"]),
    ]
    # The decision keeps the host's period-less form; reasons keep their period.
    assert "\n현재 판단: 순응도 근거 충돌로 조정 보류\n\n권장안\n" in cand.body
    assert (
        "\n\n검토 필요\n\n같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다.\n"
        "그리고 최신 확정 기록을 기준으로 다시 계산해야 합니다.\n\n상세 근거\n" in cand.body
    )
    assert cand.binding_digest == binding_digest(DUAL_PAYLOAD, **bind())
    persisted = revalidate(cand, DUAL_PAYLOAD, **bind(surface=DUAL_SURFACE))
    assert persisted == {**DUAL_PAYLOAD, "text": cand.body}
    assert (
        persisted["buttons"] == DUAL_PAYLOAD["buttons"]
        and persisted["buttons"] is not DUAL_PAYLOAD["buttons"]
    )
    wire = json.dumps(w.requests, ensure_ascii=False)
    for value in (*CUSTOMER_VALUES, CALLBACK, "coach-1", "테스트 전용", "가상"):
        assert value not in wire


@pytest.mark.parametrize(
    ("mode", "compose", "outcome", "body"),
    [
        (
            Mode.ENABLED,
            None,
            Outcome.ACCEPTED,
            PHYSIQUE_PROJECTION.replace("\n제안의", "\n먼저 제안의"),
        ),
        (Mode.SHADOW, None, Outcome.SHADOW_SELECTED, PHYSIQUE_PROJECTION),
        (Mode.ENABLED, invalid, Outcome.VALIDATION_REJECTED, PHYSIQUE_PROJECTION),
    ],
    ids=["enabled", "shadow", "rejected"],
)
def test_physique_card_presents_its_projection(
    root: DataRoot,
    coords: list[KoreanExpressionCoordinator],
    mode: Mode,
    compose: Any,
    outcome: CandidateOutcome,
    body: str,
) -> None:
    coord = make(root, coords, mode)
    with ScriptedWorker(root, **({"compose": compose} if compose else {})) as w:
        cand = coord.present_adaptive(PHYSIQUE_PAYLOAD, **bind(surface=PHYSIQUE_SURFACE))
    assert cand.outcome is outcome and cand.body == body
    assert [s["slot_id"] for s in w.requests[0]["capsule"]["slots"]] == [
        "adaptive.physique.review_instruction"
    ]
    assert revalidate(cand, PHYSIQUE_PAYLOAD, **bind())["text"] == body


def test_disabled_adaptive_publishes_the_source_text_and_writes_nothing(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords, Mode.ENABLED, daily=True, weekly=True)
    for payload in (PHYSIQUE_PAYLOAD, DUAL_PAYLOAD):
        cand = coord.present_adaptive(payload, **bind())
        assert cand.outcome is Outcome.DISABLED
        assert cand.body == payload["text"]  # no projection while disabled
        assert revalidate(cand, payload, **bind()) == payload
    assert not root.root.exists()


def _edited(payload: dict[str, object], **changes: object) -> dict[str, object]:
    out = copy.deepcopy(payload)
    out.update(changes)
    return out


MENU = {
    "status": "menu",
    "text": "적응형 영양 검토\n고객을 선택하세요.",
    "buttons": [
        {
            "customer_key": "client_042",
            "label": "김민지",
            "callback_data": "an1:" + "0" * 24 + ":select",
        }
    ],
}


@pytest.mark.parametrize(
    ("payload", "changes", "label", "body"),
    [
        (MENU, {"surface": DUAL_SURFACE}, DUAL_SURFACE, MENU["text"]),
        (MENU, {}, ADAPTIVE_UNKNOWN_SURFACE, MENU["text"]),
        (_edited(DUAL_PAYLOAD, status="view"), {}, ADAPTIVE_UNKNOWN_SURFACE, DUAL_PAYLOAD["text"]),
        (
            _edited(PHYSIQUE_PAYLOAD, status="operator_input_required"),
            {"surface": PHYSIQUE_SURFACE},
            PHYSIQUE_SURFACE,
            PHYSIQUE_PAYLOAD["text"],
        ),
        (
            _edited(PHYSIQUE_PAYLOAD, status="view", terminal_state="delivery_unknown"),
            {"surface": PHYSIQUE_SURFACE},
            PHYSIQUE_SURFACE,
            PHYSIQUE_PAYLOAD["text"],
        ),
        (
            _edited(DUAL_PAYLOAD, status="rejected"),
            {"surface": DUAL_SURFACE},
            DUAL_SURFACE,
            DUAL_PAYLOAD["text"],
        ),
        (
            PHYSIQUE_PAYLOAD,
            {"origin": CardOrigin.RECOVERY, "surface": PHYSIQUE_SURFACE},
            PHYSIQUE_SURFACE,
            PHYSIQUE_PAYLOAD["text"],
        ),
        (
            DUAL_PAYLOAD,
            {"surface": "adaptive.dualcoachtest.card.v2"},
            ADAPTIVE_UNKNOWN_SURFACE,
            DUAL_PAYLOAD["text"],
        ),
        (
            DUAL_PAYLOAD,
            {"callback_data": "adaptive:review"},
            ADAPTIVE_UNKNOWN_SURFACE,
            DUAL_PAYLOAD["text"],
        ),
        (
            _edited(DUAL_PAYLOAD, buttons="승인"),
            {"surface": DUAL_SURFACE},
            DUAL_SURFACE,
            DUAL_PAYLOAD["text"],
        ),
        (
            _edited(
                DUAL_PAYLOAD, text=str(DUAL_PAYLOAD["text"]).replace("조정 보류\n", "조정 유지\n")
            ),
            {},
            DUAL_SURFACE,
            str(DUAL_PAYLOAD["text"]).replace("조정 보류\n", "조정 유지\n"),
        ),
        (
            _edited(
                DUAL_PAYLOAD,
                text=str(DUAL_PAYLOAD["text"]).replace(
                    "합니다.\n최신", "합니다.\n가상 사유.\n최신"
                ),
            ),
            {},
            DUAL_SURFACE,
            str(DUAL_PAYLOAD["text"]).replace("합니다.\n최신", "합니다.\n가상 사유.\n최신"),
        ),
        (["not", "a", "mapping"], {}, ADAPTIVE_UNKNOWN_SURFACE, ""),
    ],
    ids=[
        "menu",
        "menu_no_surface",
        "view",
        "operator_input",
        "terminal_delivery",
        "rejected",
        "recovery",
        "unknown_surface",
        "malformed_callback",
        "malformed_buttons",
        "unmapped_decision",
        "unmapped_reason",
        "not_a_mapping",
    ],
)
def test_adaptive_ineligible_is_canonical_with_zero_files(
    root: DataRoot,
    coords: list[KoreanExpressionCoordinator],
    payload: Any,
    changes: dict[str, Any],
    label: str,
    body: object,
) -> None:
    events: list[dict[str, str]] = []
    got = threading.Event()

    def sink(event: Any) -> None:
        events.append(dict(event))
        got.set()

    coord = KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, adaptive_operator=True)),
        root.root,
        telemetry=sink,
    )
    coords.append(coord)
    cand = coord.present_adaptive(payload, **bind(**changes))
    assert cand.outcome is Outcome.INELIGIBLE and cand.status is CandidateStatus.CANONICAL
    assert cand.surface_version == label and cand.body == body and cand.publication_permitted
    assert not root.root.exists()
    assert got.wait(5) and events[0]["surface"] == label
    with pytest.raises(RevalidationError) as info:
        revalidate(cand, payload, **bind(**changes))
    assert info.value.reason is RevalidationReason.INELIGIBLE


def _install_glossary(root: DataRoot, data: bytes) -> None:
    root.root.mkdir(mode=0o700)
    path = root.root / "operator-glossary.json"
    path.write_bytes(data)
    path.chmod(0o600)


OPERATOR_FILE = {
    "version": "kexpr-dual-glossary-v1",
    "decisions": {"P_DUAL_DECISION_KEEP_TARGET": "현재 목표 섭취량 유지"},
    "reasons": {"P_DUAL_REASON_TREND_SHORT": "체중 추세를 판단할 기간이 짧습니다."},
}
OPERATOR_TEXT = (
    str(DUAL_PAYLOAD["text"])
    .replace("순응도 근거 충돌로 조정 보류", "현재 목표 섭취량 유지")
    .replace(
        "최신 확정 기록을 기준으로 다시 계산해야 합니다.", "체중 추세를 판단할 기간이 짧습니다."
    )
)


def test_operator_glossary_ids_travel_in_the_capsule_texts_never_do(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    _install_glossary(root, json.dumps(OPERATOR_FILE, ensure_ascii=False).encode())
    coord = make(root, coords)
    payload = _edited(DUAL_PAYLOAD, text=OPERATOR_TEXT)
    with ScriptedWorker(root) as w:
        cand = coord.present_adaptive(payload, **bind(surface=DUAL_SURFACE))
    assert cand.outcome is Outcome.ACCEPTED
    # The operator's decision is locked like the shipped one (its family's cell is
    # empty); the operator's reason on the second line is the one slot.
    assert "현재 판단: 현재 목표 섭취량 유지\n" in cand.body
    assert "\n그리고 체중 추세를 판단할 기간이 짧습니다.\n" in cand.body
    assert [s["allowed_predicate_ids"] for s in w.requests[0]["capsule"]["slots"]] == [
        ["P_DUAL_REASON_TREND_SHORT"],
    ]
    wire = json.dumps(w.requests, ensure_ascii=False)
    assert "현재 목표 섭취량 유지" not in wire and "기간이 짧습니다" not in wire
    assert revalidate(cand, payload, **bind(), glossary=coord.dual_glossary())["text"] == cand.body
    # Without the operator's glossary the host cannot prove the card: fail closed.
    with pytest.raises(RevalidationError) as info:
        revalidate(cand, payload, **bind())
    assert info.value.reason is RevalidationReason.INELIGIBLE


def test_invalid_operator_glossary_makes_dual_canonical_with_no_new_files(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    _install_glossary(root, b'{"version": "kexpr-dual-glossary-v1"}')
    coord = make(root, coords)
    cand = coord.present_adaptive(DUAL_PAYLOAD, **bind(surface=DUAL_SURFACE))
    assert cand.outcome is Outcome.INELIGIBLE and cand.body == DUAL_PAYLOAD["text"]
    assert [p.name for p in files_under(root.root)] == ["operator-glossary.json"]
    # A physique card does not read the dual glossary.
    with ScriptedWorker(root):
        physique = coord.present_adaptive(PHYSIQUE_PAYLOAD, **bind(surface=PHYSIQUE_SURFACE))
    assert physique.outcome is Outcome.ACCEPTED


OVER_BUDGET_FILE = {
    "version": "kexpr-dual-glossary-v1",
    "decisions": {},
    "reasons": {
        "P_DUAL_REASON_TREND_SHORT": "체중 추세를 판단할 기간이 짧습니다.",
        "P_DUAL_REASON_INTAKE_GAP": "섭취 기록과 계획의 차이가 큽니다.",
        "P_DUAL_REASON_COOLDOWN": "직전 조정 이후 대기 기간입니다.",
        "P_DUAL_REASON_SLEEP_GAP": "수면 기록이 일부 비어 있습니다.",
    },
}
SIX_REASONS_TEXT = str(DUAL_PAYLOAD["text"]).replace(
    "최신 확정 기록을 기준으로 다시 계산해야 합니다.",
    "최신 확정 기록을 기준으로 다시 계산해야 합니다.\n체중 추세를 판단할 기간이 짧습니다."
    "\n섭취 기록과 계획의 차이가 큽니다.\n직전 조정 이후 대기 기간입니다."
    "\n수면 기록이 일부 비어 있습니다.",
)


def test_a_card_whose_answer_cannot_arrive_is_ineligible_with_no_new_files(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    """Six review reasons (five styleable lines: the first is locked) make a
    minimal answer of more than the 297 tokens that can arrive in 3 s at the
    fastest published rate: no request, no key, no spool, the canonical card; the
    same card with two reasons is sent."""
    _install_glossary(root, json.dumps(OVER_BUDGET_FILE, ensure_ascii=False).encode())
    coord = make(root, coords)
    payload = _edited(DUAL_PAYLOAD, text=SIX_REASONS_TEXT)
    glossary = coord.dual_glossary()
    assert len(glossary.reasons) == 6
    cand = coord.present_adaptive(payload, **bind(surface=DUAL_SURFACE))
    assert cand.outcome is Outcome.INELIGIBLE and cand.body == SIX_REASONS_TEXT
    assert cand.publication_permitted
    assert [p.name for p in files_under(root.root)] == ["operator-glossary.json"]
    with ScriptedWorker(root) as w:
        two = coord.present_adaptive(DUAL_PAYLOAD, **bind(surface=DUAL_SURFACE))
    assert two.outcome is Outcome.ACCEPTED and len(w.requests) == 1


def test_adaptive_artifact_key_inputs(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords, Mode.SHADOW)
    other_session = callback_data(session(session_id="1" * 24))
    with ScriptedWorker(root, compose=provider_error):
        key = coord.present_adaptive(PHYSIQUE_PAYLOAD, **bind()).artifact_key
        # Not key inputs: the pressed action, authority pins, the surface argument.
        same = coord.present_adaptive(
            PHYSIQUE_PAYLOAD,
            **bind(
                callback_data=callback_data(SESSION, "hold"),
                authority_pins=(),
                surface=PHYSIQUE_SURFACE,
            ),
        ).artifact_key
        other_session_key = coord.present_adaptive(
            PHYSIQUE_PAYLOAD, **bind(callback_data=other_session)
        ).artifact_key
        other_revision = coord.present_adaptive(
            physique_card(session(revision=4)), **bind()
        ).artifact_key
        other_digest = coord.present_adaptive(
            physique_card(session(proposal_digest="d" * 64)), **bind()
        ).artifact_key
        dual = coord.present_adaptive(DUAL_PAYLOAD, **bind()).artifact_key
    assert key is not None and key == same
    # session, revision, proposal digest and the card kind (= surface) are inputs.
    assert len({key, other_session_key, other_revision, other_digest, dual}) == 5


# --- binding_digest ---------------------------------------------------------------------------


def _button_session(payload: dict[str, object], session_hex: str) -> dict[str, object]:
    out = copy.deepcopy(payload)
    buttons = out["buttons"]
    assert isinstance(buttons, list)
    action = buttons[0]["callback_data"].rsplit(":", 1)[1]
    buttons[0]["callback_data"] = f"an1:{session_hex}:{action}"
    return out


def test_binding_digest_covers_every_binding_and_payload_field() -> None:
    base = binding_digest(DUAL_PAYLOAD, **bind())
    assert base == binding_digest(copy.deepcopy(DUAL_PAYLOAD), **bind())
    assert base == binding_digest(DUAL_PAYLOAD, **bind(surface=DUAL_SURFACE))  # resolved alike
    assert len(base) == 64 and base == base.lower()
    reordered = dict(reversed(list(DUAL_PAYLOAD.items())))
    assert binding_digest(reordered, **bind()) == base  # key order carries no meaning
    variants = [
        binding_digest(DUAL_PAYLOAD, **bind(callback_data=callback_data(SESSION, "hold"))),
        binding_digest(DUAL_PAYLOAD, **bind(callback_data="an1:" + "2" * 24 + ":create")),
        binding_digest(DUAL_PAYLOAD, **bind(authority_pins=("owner=coach-2", "epoch=7"))),
        binding_digest(DUAL_PAYLOAD, **bind(authority_pins=())),
        binding_digest(
            _edited(DUAL_PAYLOAD, text=str(DUAL_PAYLOAD["text"]).replace("20g", "25g")), **bind()
        ),
        binding_digest(_edited(DUAL_PAYLOAD, customer_key="client_043"), **bind()),
        binding_digest(_edited(DUAL_PAYLOAD, proposal_digest="e" * 64), **bind()),
        binding_digest(dual_card(session(revision=4)), **bind()),
        binding_digest(dual_card(session(state="edited")), **bind()),
        binding_digest(dual_card(session(customer_label="김민준")), **bind()),
        binding_digest(dual_card(session(kst_day="2025-12-01")), **bind()),
        binding_digest(_button_session(DUAL_PAYLOAD, "3" * 24), **bind()),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_binding_digest_refuses_unreadable_input() -> None:
    with pytest.raises(Ineligible) as info:
        binding_digest(_edited(DUAL_PAYLOAD, text=None), **bind())
    assert info.value.reason is IneligibleReason.PAYLOAD_MALFORMED
    with pytest.raises(Ineligible) as info:
        binding_digest(DUAL_PAYLOAD, **bind(origin=CardOrigin.RECOVERY))
    assert info.value.reason is IneligibleReason.RECOVERY_PAYLOAD
    with pytest.raises(TypeError):
        binding_digest(DUAL_PAYLOAD, **bind(authority_pins=["owner=coach-1"]))


def test_binding_digest_is_never_written_to_the_spool(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_adaptive(DUAL_PAYLOAD, **bind())
        coord.report(cand, "selected")
    blobs = json.dumps(w.requests) + "".join(
        p.read_text("utf-8") for p in files_under(root.root) if p.suffix == ".json"
    )
    assert cand.binding_digest not in blobs


# --- revalidate ----------------------------------------------------------------------------


@pytest.fixture
def selected(root: DataRoot, coords: list[KoreanExpressionCoordinator]) -> Any:
    coord = make(root, coords)
    with ScriptedWorker(root):
        cand = coord.present_adaptive(DUAL_PAYLOAD, **bind())
    assert cand.outcome is Outcome.ACCEPTED
    return cand


def test_revalidate_refusals(selected: Any) -> None:
    def reason(cand: Any, payload: Any = DUAL_PAYLOAD, **changes: Any) -> RevalidationReason:
        with pytest.raises(RevalidationError) as info:
            revalidate(cand, payload, **bind(**changes))
        assert str(info.value) == info.value.reason.value  # enum only, never content
        return info.value.reason

    assert revalidate(selected, DUAL_PAYLOAD, **bind())["text"] == selected.body
    assert reason({"body": selected.body}) is RevalidationReason.NOT_A_CANDIDATE
    assert (
        reason(dataclasses.replace(selected, publication_permitted=False))
        is RevalidationReason.NOT_PUBLISHABLE
    )
    # The host's reloaded state moved on: a different payload, origin or surface.
    assert reason(selected, dual_card(session(revision=4))) is RevalidationReason.BINDING_MISMATCH
    assert (
        reason(selected, _edited(DUAL_PAYLOAD, status="published")) is RevalidationReason.INELIGIBLE
    )
    assert reason(selected, origin=CardOrigin.RECOVERY) is RevalidationReason.INELIGIBLE
    assert reason(selected, surface=PHYSIQUE_SURFACE) is RevalidationReason.INELIGIBLE
    assert (
        reason(selected, authority_pins=("owner=coach-2", "epoch=7"))
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(selected, callback_data=callback_data(SESSION, "hold"))
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(selected, _button_session(DUAL_PAYLOAD, "4" * 24))
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(dataclasses.replace(selected, surface_version=PHYSIQUE_SURFACE))
        is RevalidationReason.SURFACE_MISMATCH
    )
    # A tampered candidate: its body, its composition, or a selected claim.
    altered = selected.body.replace("그리고 최신", "잘 최신")
    assert altered != selected.body
    assert reason(dataclasses.replace(selected, body=altered)) is RevalidationReason.RENDER_MISMATCH
    tampered = tuple((slot_id, "오늘은 " + text) for slot_id, text in selected.generated)
    assert (
        reason(dataclasses.replace(selected, generated=tampered))
        is RevalidationReason.RENDER_MISMATCH
    )
    assert reason(dataclasses.replace(selected, generated=())) is RevalidationReason.RENDER_MISMATCH
    assert (
        reason(dataclasses.replace(selected, outcome=Outcome.SHADOW_SELECTED))
        is RevalidationReason.RENDER_MISMATCH
    )
    assert (
        reason(dataclasses.replace(selected, locked_spans_utf16=((0, 1),)))
        is RevalidationReason.RENDER_MISMATCH
    )
    canonical_claim = dataclasses.replace(
        selected, status=CandidateStatus.CANONICAL, outcome=Outcome.TIMEOUT
    )
    assert reason(canonical_claim) is RevalidationReason.RENDER_MISMATCH
    assert (
        revalidate(
            dataclasses.replace(canonical_claim, body=DUAL_PAYLOAD["text"]),
            DUAL_PAYLOAD,
            **bind(),
        )
        == DUAL_PAYLOAD
    )


def test_revalidate_does_not_mutate_the_canonical_payload(selected: Any) -> None:
    before = copy.deepcopy(DUAL_PAYLOAD)
    persisted = revalidate(selected, DUAL_PAYLOAD, **bind())
    persisted["buttons"][0]["label"] = "changed"  # type: ignore[index]
    persisted["envelope"]["state"] = "changed"  # type: ignore[index]
    assert DUAL_PAYLOAD == before


# --- async twins and the public API ---------------------------------------------------------


def test_async_twins(root: DataRoot, coords: list[KoreanExpressionCoordinator]) -> None:
    coord = make(root, coords)

    async def main() -> tuple[Any, Any]:
        return (
            await coord.apresent_weekly(WEEKLY_BODY, explicit_fields=WEEKLY_FIELDS, **SCHEDULE),
            await coord.apresent_adaptive(PHYSIQUE_PAYLOAD, **bind()),
        )

    with ScriptedWorker(root):
        weekly, physique = asyncio.run(main())
    assert weekly.outcome is Outcome.ACCEPTED and physique.outcome is Outcome.ACCEPTED
    assert report_outcomes(root) == []  # enabled: the host reports after its commit


def test_exported_members() -> None:
    """The host's API, pinned by equality: a name added to or dropped from
    ``gateway_shim.__all__`` is a change this list must make too."""
    for name in gateway_shim.__all__:
        assert hasattr(gateway_shim, name), name
    assert set(gateway_shim.__all__) == {
        "ADAPTIVE_UNKNOWN_SURFACE",
        "CandidateOutcome",
        "CandidateStatus",
        "CardOrigin",
        "ConfigDiagnostic",
        "DailyFacts",
        "HostOutcome",
        "Mode",
        "Outcome",
        "DUAL_SURFACE",
        "DualGlossary",
        "GlossaryError",
        "KoreanExpressionConfig",
        "KoreanExpressionCoordinator",
        "PHYSIQUE_SURFACE",
        "PresentationCandidate",
        "RevalidationError",
        "RevalidationReason",
        "WeeklyInterpretation",
        "WeeklyJudgment",
        "WeeklyRationale",
        "binding_digest",
        "card_payload",
        "exact_block",
        "format_daily",
        "format_dual_body",
        "format_weekly",
        "load_operator_glossary",
        "parse_adaptive",
        "presented_host_text",
        "revalidate",
    }
    assert len(gateway_shim.__all__) == len(set(gateway_shim.__all__))
    assert not {"AdaptiveBinding", "DualFacts", "DualDecision", "DualReason"} & set(
        gateway_shim.__all__
    )
    assert {r.value for r in RevalidationReason} == {
        "not_a_candidate",
        "not_publishable",
        "ineligible",
        "surface_mismatch",
        "binding_mismatch",
        "render_mismatch",
    }

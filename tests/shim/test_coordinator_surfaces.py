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
    DUAL_FACTS,
    SCHEDULE,
    WEEKLY_BODY,
    WEEKLY_FACTS,
    WEEKLY_SELECTED,
    dual_card,
    physique_card,
    session,
)
from reference_host.scripted_worker import ScriptedWorker, invalid, provider_error, report_outcomes
from spool.layout import DataRoot

import gateway_shim
from gateway_shim import (
    ADAPTIVE_UNKNOWN_SURFACE,
    AdaptiveBinding,
    CandidateOutcome,
    CandidateStatus,
    CardOrigin,
    DualDecision,
    DualFacts,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    RevalidationError,
    RevalidationReason,
    WeeklyFacts,
    binding_digest,
    exact_block,
    revalidate,
)
from gateway_shim.surfaces import Ineligible, IneligibleReason

SESSION = session()
DUAL_PAYLOAD, _ = dual_card(SESSION)
PHYSIQUE_PAYLOAD, _ = physique_card(SESSION)
STATUS_LINE = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
REVIEW_BLOCK = "검토 안내\n제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n\n"
PHYSIQUE_PROJECTION = (
    str(PHYSIQUE_PAYLOAD["text"])[: -len(STATUS_LINE)] + REVIEW_BLOCK + STATUS_LINE
)


def binding(**changes: Any) -> AdaptiveBinding:
    fields: dict[str, Any] = {
        "callback_action": "adaptive_review",
        "session_id": SESSION.session_id,
        "proposal_digest": SESSION.proposal_digest,
        "revision": SESSION.revision,
        "card_kind": SESSION.card_kind,
        "origin_message_id": "msg!4711",
        "authority_pins": ("owner=coach-1", "epoch=7"),
        **changes,
    }
    return AdaptiveBinding(**fields)


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    return DataRoot(tmp_path / "root")


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
        cand = coord.present_weekly(WEEKLY_BODY, facts=WEEKLY_FACTS, **SCHEDULE)
    assert cand.outcome is CandidateOutcome.ACCEPTED and cand.status is CandidateStatus.SELECTED
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
    assert len(cand.canonical_locked_spans_utf16) == len(cand.locked_spans_utf16) == 3
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
                WEEKLY_BODY, facts=WEEKLY_FACTS, **{**SCHEDULE, **changes}
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
    assert len(set(keys[1:])) == 4 and all(k is not None and len(k) == 64 for k in keys)


@pytest.mark.parametrize(
    ("surfaces", "facts", "outcome"),
    [
        ({"daily": True, "adaptive_operator": True}, WEEKLY_FACTS, CandidateOutcome.DISABLED),
        (
            {"weekly": True},
            WeeklyFacts(interpretation=None, rationale=WEEKLY_FACTS.rationale),
            CandidateOutcome.INELIGIBLE,
        ),
        (
            {"weekly": True},
            dataclasses.replace(WEEKLY_FACTS, prose_fields=frozenset({"reason"})),
            CandidateOutcome.INELIGIBLE,
        ),
    ],
    ids=["weekly_switch_off", "unsupported_branch", "explicit_field"],
)
def test_weekly_disabled_or_ineligible_writes_nothing(
    root: DataRoot,
    coords: list[KoreanExpressionCoordinator],
    surfaces: dict[str, bool],
    facts: WeeklyFacts,
    outcome: CandidateOutcome,
) -> None:
    coord = make(root, coords, Mode.ENABLED, **surfaces)
    cand = coord.present_weekly(WEEKLY_BODY, facts=facts, **SCHEDULE)
    assert cand.outcome is outcome and cand.body == WEEKLY_BODY and cand.publication_permitted
    assert not root.root.exists()


# --- adaptive: presentation ----------------------------------------------------------------


def test_dual_card_selected_with_judgment_and_review_slots(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_adaptive(DUAL_PAYLOAD, binding=binding(), facts=DUAL_FACTS)
    assert (
        cand.outcome is CandidateOutcome.ACCEPTED
        and cand.surface_version == "adaptive.dualcoachtest.card.v1"
    )
    capsule = w.requests[0]["capsule"]
    assert [(s["slot_id"], s["allowed_predicate_ids"]) for s in capsule["slots"]] == [
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_ADJUST_PLAN"]),
        ("adaptive.dual.review.1", ["P_DUAL_REASON_RECORDS_INSUFFICIENT"]),
        ("adaptive.dual.review.2", ["P_DUAL_REASON_INTAKE_BELOW_PLAN"]),
    ]
    assert "현재 판단: 차분히, 현재 계획을 조정하는 안을 제안합니다.\n" in cand.body
    assert (
        "\n- 차분히, 판단에 필요한 기간의 기록이 부족합니다.\n- 차분히, 섭취량이 계획보다 적습니다.\n"
        in cand.body
    )
    assert cand.binding_digest == binding_digest(DUAL_PAYLOAD, binding())
    persisted = revalidate(cand, DUAL_PAYLOAD, binding(), DUAL_FACTS)
    assert persisted == {**DUAL_PAYLOAD, "text": cand.body}
    assert (
        persisted["buttons"] == DUAL_PAYLOAD["buttons"]
        and persisted["buttons"] is not DUAL_PAYLOAD["buttons"]
    )
    wire = json.dumps(w.requests, ensure_ascii=False)
    # "!" and "-" never occur in the capsule's hex or JSON by chance (a bare "4711" could).
    for value in (*CUSTOMER_VALUES, "msg!4711", "coach-1", "adaptive_review"):
        assert value not in wire


@pytest.mark.parametrize(
    ("mode", "compose", "outcome", "body"),
    [
        (
            Mode.ENABLED,
            None,
            CandidateOutcome.ACCEPTED,
            PHYSIQUE_PROJECTION.replace("\n제안의", "\n차분히, 제안의"),
        ),
        (Mode.SHADOW, None, CandidateOutcome.SHADOW_SELECTED, PHYSIQUE_PROJECTION),
        (Mode.ENABLED, invalid, CandidateOutcome.VALIDATION_REJECTED, PHYSIQUE_PROJECTION),
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
        cand = coord.present_adaptive(PHYSIQUE_PAYLOAD, binding=binding())
    assert cand.outcome is outcome and cand.body == body
    assert [s["slot_id"] for s in w.requests[0]["capsule"]["slots"]] == [
        "adaptive.physique.review_instruction"
    ]
    assert revalidate(cand, PHYSIQUE_PAYLOAD, binding())["text"] == body


def test_disabled_adaptive_publishes_the_source_text_and_writes_nothing(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords, Mode.ENABLED, daily=True, weekly=True)
    for payload, facts in ((PHYSIQUE_PAYLOAD, None), (DUAL_PAYLOAD, DUAL_FACTS)):
        cand = coord.present_adaptive(payload, binding=binding(), facts=facts)
        assert cand.outcome is CandidateOutcome.DISABLED
        assert cand.body == payload["text"]  # no projection while disabled
        assert revalidate(cand, payload, binding(), facts) == payload
    assert not root.root.exists()


def _edited(payload: dict[str, object], **changes: object) -> dict[str, object]:
    out = copy.deepcopy(payload)
    out.update(changes)
    return out


@pytest.mark.parametrize(
    ("payload", "bind", "label", "body"),
    [
        (
            _edited(DUAL_PAYLOAD, status="menu"),
            binding(),
            "adaptive.dualcoachtest.card.v1",
            DUAL_PAYLOAD["text"],
        ),
        (
            _edited(DUAL_PAYLOAD, status="view"),
            binding(),
            "adaptive.dualcoachtest.card.v1",
            DUAL_PAYLOAD["text"],
        ),
        (
            _edited(PHYSIQUE_PAYLOAD, status="operator_input"),
            binding(),
            "adaptive.physique.card.v1",
            PHYSIQUE_PAYLOAD["text"],
        ),
        (
            _edited(PHYSIQUE_PAYLOAD, status="delivered"),
            binding(),
            "adaptive.physique.card.v1",
            PHYSIQUE_PAYLOAD["text"],
        ),
        (
            _edited(DUAL_PAYLOAD, status="published"),
            binding(),
            "adaptive.dualcoachtest.card.v1",
            DUAL_PAYLOAD["text"],
        ),
        (
            PHYSIQUE_PAYLOAD,
            binding(origin=CardOrigin.RECOVERY),
            "adaptive.physique.card.v1",
            PHYSIQUE_PAYLOAD["text"],
        ),
        (DUAL_PAYLOAD, binding(revision=4), "adaptive.dualcoachtest.card.v1", DUAL_PAYLOAD["text"]),
        (
            _edited(
                DUAL_PAYLOAD,
                envelope={
                    **DUAL_PAYLOAD["envelope"],
                    "schema_version": "adaptive.dualcoachtest.card.v2",
                },
            ),
            binding(),
            ADAPTIVE_UNKNOWN_SURFACE,
            DUAL_PAYLOAD["text"],
        ),
        (
            _edited(DUAL_PAYLOAD, buttons="승인"),
            binding(),
            "adaptive.dualcoachtest.card.v1",
            DUAL_PAYLOAD["text"],
        ),
        (["not", "a", "mapping"], binding(), ADAPTIVE_UNKNOWN_SURFACE, ""),
    ],
    ids=[
        "menu",
        "view",
        "operator_input",
        "terminal_delivery",
        "published",
        "recovery",
        "stale_revision",
        "future_schema",
        "malformed_buttons",
        "not_a_mapping",
    ],
)
def test_adaptive_ineligible_is_canonical_with_zero_files(
    root: DataRoot,
    coords: list[KoreanExpressionCoordinator],
    payload: Any,
    bind: AdaptiveBinding,
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
    cand = coord.present_adaptive(
        payload, binding=bind, facts=DUAL_FACTS if label.startswith("adaptive.dual") else None
    )
    assert cand.outcome is CandidateOutcome.INELIGIBLE and cand.status is CandidateStatus.CANONICAL
    assert cand.surface_version == label and cand.body == body and cand.publication_permitted
    assert not root.root.exists()
    assert got.wait(5) and events[0]["surface"] == label
    with pytest.raises(RevalidationError) as info:
        revalidate(cand, payload, bind, DUAL_FACTS if label.startswith("adaptive.dual") else None)
    assert info.value.reason is RevalidationReason.INELIGIBLE


def test_adaptive_artifact_key_inputs(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords, Mode.SHADOW)
    with ScriptedWorker(root, compose=provider_error):
        key = coord.present_adaptive(PHYSIQUE_PAYLOAD, binding=binding()).artifact_key
        # Not key inputs: callback action, origin provenance, authority pins.
        same = coord.present_adaptive(
            PHYSIQUE_PAYLOAD,
            binding=binding(callback_action="x", origin_message_id="", authority_pins=()),
        ).artifact_key
        other_kind = coord.present_adaptive(
            _edited(
                PHYSIQUE_PAYLOAD, envelope={**PHYSIQUE_PAYLOAD["envelope"], "card_kind": "final"}
            ),
            binding=binding(card_kind="final"),
        ).artifact_key
        dual = coord.present_adaptive(
            DUAL_PAYLOAD, binding=binding(), facts=DUAL_FACTS
        ).artifact_key
    assert key == same
    assert len({key, other_kind, dual}) == 3  # card kind and surface version are inputs


# --- binding_digest ---------------------------------------------------------------------------


def test_binding_digest_covers_every_binding_and_payload_field() -> None:
    base = binding_digest(DUAL_PAYLOAD, binding())
    assert base == binding_digest(copy.deepcopy(DUAL_PAYLOAD), binding())
    assert len(base) == 64 and base == base.lower()
    reordered = dict(reversed(list(DUAL_PAYLOAD.items())))
    assert binding_digest(reordered, binding()) == base  # key order carries no meaning
    variants = [
        binding_digest(DUAL_PAYLOAD, binding(callback_action="adaptive_review:2")),
        binding_digest(DUAL_PAYLOAD, binding(origin_message_id="msg!4712")),
        binding_digest(DUAL_PAYLOAD, binding(origin=CardOrigin.RECOVERY)),
        binding_digest(DUAL_PAYLOAD, binding(authority_pins=("owner=coach-2", "epoch=7"))),
        binding_digest(DUAL_PAYLOAD, binding(revision=4)),
        binding_digest(DUAL_PAYLOAD, binding(proposal_digest="p2")),
        binding_digest(DUAL_PAYLOAD, binding(session_id="s2")),
        binding_digest(DUAL_PAYLOAD, binding(card_kind="k2")),
        binding_digest(_edited(DUAL_PAYLOAD, text=str(DUAL_PAYLOAD["text"]) + "."), binding()),
        binding_digest(_edited(DUAL_PAYLOAD, status="menu"), binding()),
        binding_digest(
            _edited(DUAL_PAYLOAD, buttons=[[{"text": "승인", "callback_data": "x"}]]), binding()
        ),
        binding_digest(
            _edited(DUAL_PAYLOAD, envelope={**DUAL_PAYLOAD["envelope"], "revision": 4}), binding()
        ),
        binding_digest(
            _edited(
                DUAL_PAYLOAD,
                envelope={
                    **DUAL_PAYLOAD["envelope"],
                    "schema_version": "adaptive.physique.card.v1",
                },
            ),
            binding(),
        ),
    ]
    assert len({base, *variants}) == len(variants) + 1


def test_binding_digest_refuses_unreadable_input() -> None:
    with pytest.raises(Ineligible) as info:
        binding_digest(_edited(DUAL_PAYLOAD, text=None), binding())
    assert info.value.reason is IneligibleReason.PAYLOAD_MALFORMED
    with pytest.raises(TypeError):
        binding_digest(DUAL_PAYLOAD, {"session_id": "s"})  # type: ignore[arg-type]


def test_binding_digest_is_never_written_to_the_spool(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_adaptive(DUAL_PAYLOAD, binding=binding(), facts=DUAL_FACTS)
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
        cand = coord.present_adaptive(DUAL_PAYLOAD, binding=binding(), facts=DUAL_FACTS)
    assert cand.outcome is CandidateOutcome.ACCEPTED
    return cand


def test_revalidate_refusals(selected: Any) -> None:
    def reason(
        cand: Any,
        payload: Any = DUAL_PAYLOAD,
        bind: AdaptiveBinding | None = None,
        facts: Any = DUAL_FACTS,
    ) -> RevalidationReason:
        with pytest.raises(RevalidationError) as info:
            revalidate(cand, payload, bind or binding(), facts)
        assert str(info.value) == info.value.reason.value  # enum only, never content
        return info.value.reason

    assert revalidate(selected, DUAL_PAYLOAD, binding(), DUAL_FACTS)["text"] == selected.body
    assert reason({"body": selected.body}) is RevalidationReason.NOT_A_CANDIDATE
    assert (
        reason(dataclasses.replace(selected, publication_permitted=False))
        is RevalidationReason.NOT_PUBLISHABLE
    )
    # The host's reloaded state moved on: a different binding or payload.
    assert reason(selected, bind=binding(revision=4)) is RevalidationReason.INELIGIBLE
    assert (
        reason(selected, payload=_edited(DUAL_PAYLOAD, status="published"))
        is RevalidationReason.INELIGIBLE
    )
    assert (
        reason(
            selected, facts=DualFacts(decision=DualDecision.KEEP_PLAN, reasons=DUAL_FACTS.reasons)
        )
        is RevalidationReason.INELIGIBLE
    )
    assert (
        reason(selected, bind=binding(authority_pins=("owner=coach-2", "epoch=7")))
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(selected, bind=binding(callback_action="adaptive_review:2"))
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(selected, bind=binding(origin_message_id="")) is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(
            selected,
            payload=_edited(
                DUAL_PAYLOAD, buttons=[[{"text": "승인", "callback_data": "adaptive:approve"}]]
            ),
        )
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(dataclasses.replace(selected, surface_version="adaptive.physique.card.v1"))
        is RevalidationReason.SURFACE_MISMATCH
    )
    # A tampered candidate: its body, its composition, or a selected claim.
    assert (
        reason(
            dataclasses.replace(selected, body=selected.body.replace("차분히, 현재", "잘, 현재"))
        )
        is RevalidationReason.RENDER_MISMATCH
    )
    tampered = tuple((slot_id, "오늘은 " + text) for slot_id, text in selected.generated)
    assert (
        reason(dataclasses.replace(selected, generated=tampered))
        is RevalidationReason.RENDER_MISMATCH
    )
    assert reason(dataclasses.replace(selected, generated=())) is RevalidationReason.RENDER_MISMATCH
    assert (
        reason(dataclasses.replace(selected, outcome=CandidateOutcome.SHADOW_SELECTED))
        is RevalidationReason.RENDER_MISMATCH
    )
    assert (
        reason(dataclasses.replace(selected, locked_spans_utf16=((0, 1),)))
        is RevalidationReason.RENDER_MISMATCH
    )
    canonical_claim = dataclasses.replace(
        selected, status=CandidateStatus.CANONICAL, outcome=CandidateOutcome.TIMEOUT
    )
    assert reason(canonical_claim) is RevalidationReason.RENDER_MISMATCH
    assert (
        revalidate(
            dataclasses.replace(canonical_claim, body=DUAL_PAYLOAD["text"]),
            DUAL_PAYLOAD,
            binding(),
            DUAL_FACTS,
        )
        == DUAL_PAYLOAD
    )


def test_revalidate_does_not_mutate_the_canonical_payload(selected: Any) -> None:
    before = copy.deepcopy(DUAL_PAYLOAD)
    persisted = revalidate(selected, DUAL_PAYLOAD, binding(), DUAL_FACTS)
    persisted["buttons"][0][0]["text"] = "changed"  # type: ignore[index]
    assert DUAL_PAYLOAD == before


# --- async twins and the public API ---------------------------------------------------------


def test_async_twins(root: DataRoot, coords: list[KoreanExpressionCoordinator]) -> None:
    coord = make(root, coords)

    async def main() -> tuple[Any, Any]:
        return (
            await coord.apresent_weekly(WEEKLY_BODY, facts=WEEKLY_FACTS, **SCHEDULE),
            await coord.apresent_adaptive(PHYSIQUE_PAYLOAD, binding=binding()),
        )

    with ScriptedWorker(root):
        weekly, physique = asyncio.run(main())
    assert (
        weekly.outcome is CandidateOutcome.ACCEPTED
        and physique.outcome is CandidateOutcome.ACCEPTED
    )
    assert report_outcomes(root) == []  # enabled: the host reports after its commit


def test_exported_members() -> None:
    assert set(gateway_shim.__all__) == {
        "ADAPTIVE_UNKNOWN_SURFACE",
        "AdaptiveBinding",
        "CandidateOutcome",
        "CandidateStatus",
        "CardOrigin",
        "ConfigDiagnostic",
        "DailyFacts",
        "DualDecision",
        "DualFacts",
        "DualReason",
        "HostOutcome",
        "KoreanExpressionConfig",
        "KoreanExpressionCoordinator",
        "Mode",
        "PresentationCandidate",
        "RevalidationError",
        "RevalidationReason",
        "WeeklyFacts",
        "WeeklyInterpretation",
        "WeeklyRationale",
        "binding_digest",
        "card_payload",
        "exact_block",
        "format_daily",
        "format_dual_card",
        "format_physique_card",
        "format_weekly",
        "revalidate",
    }
    assert {r.value for r in RevalidationReason} == {
        "not_a_candidate",
        "not_publishable",
        "ineligible",
        "surface_mismatch",
        "binding_mismatch",
        "render_mismatch",
    }

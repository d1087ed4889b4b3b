"""The coordinator's weekly and adaptive entry points and the host integration
contract (`binding_digest`, `revalidate`), against a scripted worker thread.

Rules checked: disabled and ineligible write zero files; the capsule carries
each surface's slots and nothing else; the artifact key uses the plan's inputs
per surface; a candidate re-proves itself only against the same payload and
binding it was made from.

Under the fit table (design §6.1, §6.2) the one message with a slot to ask is the
weekly report whose goal range is missing (branch I2): every other weekly branch,
the dual card and the physique card are eligible with nothing to style
(`nothing_to_style`, zero files), and a capsule for one of their slots cannot be
built (`slot_unstyleable`)."""

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
from kit.bodies import STYLED_BODY, STYLED_HOLD, STYLED_SELECTED, STYLED_SURFACE
from reference_host.host_render import render_weekly
from reference_host.samples import (
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    SCHEDULE,
    WEEKLY_BODY,
    WEEKLY_FIELDS,
    WEEKLY_SUMMARY,
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
    WeeklyInterpretation,
    WeeklyJudgment,
    binding_digest,
    exact_block,
    format_weekly,
    revalidate,
)
from gateway_shim.surfaces import Ineligible, IneligibleReason
from kexpr.spool.contract import (
    CONTRACT_VERSION,
    Capsule,
    CapsuleError,
    CapsuleReason,
    SlotPolicy,
    slot_policy,
)
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


def written(root: DataRoot) -> set[Path]:
    """Every file under the data root but a serving worker's heartbeat (and its
    staging file) and an installed operator glossary: what the coordinator wrote."""
    beat = root.status_file.name
    return {
        p
        for p in files_under(root.root)
        if p.name not in (beat, "operator-glossary.json") and not p.name.startswith(f".{beat}.")
    }


def capsule_refusal(surface: str, *slots: SlotPolicy) -> CapsuleReason:
    """Why a capsule of ``slots`` cannot be built (AssertionError if it can)."""
    with pytest.raises(CapsuleError) as info:
        Capsule(
            schema_version=CONTRACT_VERSION, surface=surface, artifact_key="a" * 32, slots=slots
        )
    return info.value.reason


def test_weekly_goal_missing_selected_with_its_one_slot(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_weekly(STYLED_BODY, explicit_fields=(), **SCHEDULE)
    assert cand.outcome is Outcome.ACCEPTED and cand.status is CandidateStatus.SELECTED
    assert cand.surface_version == STYLED_SURFACE
    assert cand.body == STYLED_SELECTED
    assert [slot_id for slot_id, _ in cand.generated] == ["weekly.interpretation"]
    capsule = w.requests[0]["capsule"]
    assert capsule["surface"] == "weekly.v1"
    # The interpretation is the one slot; the rationale (records insufficient) is
    # locked host text like every other byte.
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
            ["P_WEEKLY_TREND_OBSERVED"],
            ["A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
            ["[[P:01]]", "[[A:01]]"],
        ),
    ]
    # Locked: everything before the interpretation, and everything after it (the
    # judgment and the rationale paragraph).
    assert len(cand.canonical_locked_spans_utf16) == len(cand.locked_spans_utf16) == 2
    wire = json.dumps(w.requests, ensure_ascii=False)
    for value in (*SCHEDULE.values(), "72.40kg", "+0.42%", "85.71%", STYLED_HOLD):
        assert value not in wire
    assert "weekly.rationale" not in wire and "P_WEEKLY_RECORDS_INSUFFICIENT" not in wire


@pytest.mark.parametrize("judgment", list(WeeklyJudgment), ids=lambda j: j.name)
@pytest.mark.parametrize("branch", list(WeeklyInterpretation), ids=lambda i: i.name)
def test_every_weekly_branch_but_the_missing_goal_is_nothing_to_style(
    root: DataRoot,
    coords: list[KoreanExpressionCoordinator],
    branch: WeeklyInterpretation,
    judgment: WeeklyJudgment,
) -> None:
    body = format_weekly(
        recent="72.40kg",
        prior="72.10kg",
        change="+0.42%",
        rate="85.71%",
        goal_range="기록 없음" if branch is WeeklyInterpretation.GOAL_MISSING else "+0.10~+0.50%",
        interpretation=branch,
        judgment=judgment,
    )
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_weekly(body, explicit_fields=(), **SCHEDULE)
    if branch is WeeklyInterpretation.GOAL_MISSING:
        assert cand.outcome is Outcome.ACCEPTED and cand.body != body
        assert [[s["slot_id"] for s in r["capsule"]["slots"]] for r in w.requests] == [
            ["weekly.interpretation"]
        ]
        return
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.body == body
    assert cand.status is CandidateStatus.CANONICAL and cand.publication_permitted
    assert cand.artifact_key is None and cand.generated == ()
    assert w.requests == [] and written(root) == set()


def test_a_host_weekly_report_in_goal_is_nothing_to_style(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    """The host's own rendering of a week in its goal range (I3 + 유지, a rate line,
    two explicit actions) is eligible, and both its slots are locked: the host's
    text, zero files. A capsule for either of them cannot be built."""
    summary = {**WEEKLY_SUMMARY, "goal_range": "+0.10~+0.50%"}
    body, explicit = render_weekly(summary)
    assert not explicit and "현재 속도라면 이번 주에는 기준을 유지합니다." in body
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_weekly(body, explicit_fields=tuple(summary), **SCHEDULE)
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.body == body
    assert w.requests == [] and written(root) == set()
    interpretation = slot_policy(
        "weekly.interpretation", ["P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"]
    )
    rationale = slot_policy("weekly.rationale", ["A_WEEKLY_KEEP_BASELINE"])
    for slots in ((interpretation,), (rationale,), (interpretation, rationale)):
        assert capsule_refusal("weekly.v1", *slots) is CapsuleReason.SLOT_UNSTYLEABLE


def test_weekly_artifact_key_inputs(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    coord = make(root, coords, Mode.SHADOW)
    with ScriptedWorker(root, compose=provider_error):  # canonical at once: keys only
        keys = [
            coord.present_weekly(
                STYLED_BODY, explicit_fields=(), **{**SCHEDULE, **changes}
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


def test_dual_card_is_nothing_to_style_and_persists_as_rendered(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    """Every line of the dual card is locked (design §6.2): with a worker serving,
    the card comes back as the host rendered it, no request, no file; the host
    persists it through `revalidate` unchanged. A capsule for any of its slots,
    the decision or a review line, cannot be built."""
    coord = make(root, coords)
    with ScriptedWorker(root) as w:
        cand = coord.present_adaptive(DUAL_PAYLOAD, **bind(surface=DUAL_SURFACE))
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.surface_version == DUAL_SURFACE
    assert cand.status is CandidateStatus.CANONICAL and cand.body == DUAL_PAYLOAD["text"]
    assert cand.attempt_id is None and cand.artifact_key is None and cand.generated == ()
    assert w.requests == [] and written(root) == set()
    assert cand.binding_digest == binding_digest(DUAL_PAYLOAD, **bind())
    persisted = revalidate(cand, DUAL_PAYLOAD, **bind(surface=DUAL_SURFACE))
    assert persisted == DUAL_PAYLOAD
    assert (
        persisted["buttons"] == DUAL_PAYLOAD["buttons"]
        and persisted["buttons"] is not DUAL_PAYLOAD["buttons"]
    )
    for slot in (
        slot_policy("adaptive.dual.judgment", ["P_DUAL_DECISION_HOLD"]),
        slot_policy("adaptive.dual.review.1", ["P_DUAL_REASON_EDIT"]),
        slot_policy("adaptive.dual.review.2", ["P_DUAL_REASON_LATEST"]),
    ):
        assert capsule_refusal(DUAL_SURFACE, slot) is CapsuleReason.SLOT_UNSTYLEABLE


@pytest.mark.parametrize(
    ("mode", "compose"),
    [(Mode.ENABLED, None), (Mode.SHADOW, None), (Mode.ENABLED, invalid)],
    ids=["enabled", "shadow", "hostile_worker"],
)
def test_physique_card_is_nothing_to_style_and_presents_its_projection(
    root: DataRoot,
    coords: list[KoreanExpressionCoordinator],
    mode: Mode,
    compose: Any,
) -> None:
    """The review instruction is locked (design §6.2): the candidate is the card's
    canonical projection (the code-owned review block) in every mode, whatever
    a worker would answer, since none is asked; its slot's capsule cannot be built."""
    coord = make(root, coords, mode)
    with ScriptedWorker(root, **({"compose": compose} if compose else {})) as w:
        cand = coord.present_adaptive(PHYSIQUE_PAYLOAD, **bind(surface=PHYSIQUE_SURFACE))
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.body == PHYSIQUE_PROJECTION
    assert cand.status is CandidateStatus.CANONICAL and cand.publication_permitted
    assert w.requests == [] and written(root) == set()
    assert revalidate(cand, PHYSIQUE_PAYLOAD, **bind())["text"] == PHYSIQUE_PROJECTION
    review = slot_policy("adaptive.physique.review_instruction", ["A_OPERATOR_REVIEW_DECISION"])
    assert capsule_refusal(PHYSIQUE_SURFACE, review) is CapsuleReason.SLOT_UNSTYLEABLE


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


def test_an_operator_glossary_card_is_nothing_to_style_and_its_texts_stay_home(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    """The operator's decision and reason take their families' cells, both empty
    (design §6.2): the card with the operator's texts is recognized (eligible, not
    refused) and has nothing to style; its texts and IDs reach no file. A capsule
    asking for an operator's ID cannot be built."""
    _install_glossary(root, json.dumps(OPERATOR_FILE, ensure_ascii=False).encode())
    coord = make(root, coords)
    payload = _edited(DUAL_PAYLOAD, text=OPERATOR_TEXT)
    with ScriptedWorker(root) as w:
        cand = coord.present_adaptive(payload, **bind(surface=DUAL_SURFACE))
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.body == OPERATOR_TEXT
    assert w.requests == [] and written(root) == set()
    assert revalidate(cand, payload, **bind(), glossary=coord.dual_glossary()) == payload
    # Without the operator's glossary the host cannot prove the card: fail closed.
    with pytest.raises(RevalidationError) as info:
        revalidate(cand, payload, **bind())
    assert info.value.reason is RevalidationReason.INELIGIBLE
    for slot in (
        slot_policy("adaptive.dual.judgment", ["P_DUAL_DECISION_KEEP_TARGET"]),
        slot_policy("adaptive.dual.review.2", ["P_DUAL_REASON_TREND_SHORT"]),
    ):
        assert capsule_refusal(DUAL_SURFACE, slot) is CapsuleReason.SLOT_UNSTYLEABLE


def test_invalid_operator_glossary_makes_dual_canonical_with_no_new_files(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    _install_glossary(root, b'{"version": "kexpr-dual-glossary-v1"}')
    coord = make(root, coords)
    cand = coord.present_adaptive(DUAL_PAYLOAD, **bind(surface=DUAL_SURFACE))
    assert cand.outcome is Outcome.INELIGIBLE and cand.body == DUAL_PAYLOAD["text"]
    assert [p.name for p in files_under(root.root)] == ["operator-glossary.json"]
    # A physique card does not read the dual glossary: eligible (nothing to style).
    with ScriptedWorker(root):
        physique = coord.present_adaptive(PHYSIQUE_PAYLOAD, **bind(surface=PHYSIQUE_SURFACE))
    assert physique.outcome is Outcome.NOTHING_TO_STYLE and physique.body == PHYSIQUE_PROJECTION


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


def test_a_card_of_six_reasons_is_nothing_to_style_with_no_new_files(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    """Six review reasons, the operator's among them: every line locked, nothing
    to ask, the canonical card and no new file."""
    _install_glossary(root, json.dumps(OVER_BUDGET_FILE, ensure_ascii=False).encode())
    coord = make(root, coords)
    payload = _edited(DUAL_PAYLOAD, text=SIX_REASONS_TEXT)
    glossary = coord.dual_glossary()
    assert len(glossary.reasons) == 6
    with ScriptedWorker(root) as w:
        cand = coord.present_adaptive(payload, **bind(surface=DUAL_SURFACE))
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.body == SIX_REASONS_TEXT
    assert cand.publication_permitted
    assert w.requests == [] and written(root) == set()


def test_a_body_whose_answer_cannot_arrive_is_ineligible_with_no_new_files(
    root: DataRoot, coords: list[KoreanExpressionCoordinator], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A surface whose minimal answer is more than the tokens that can arrive in
    the wait (`ANSWER_BUDGET_TOKENS`) is never sent: no request, no key, no spool,
    the canonical body. Forced on the styled weekly report by a budget one token
    short of its bound; with the real budget the same body is sent."""
    from gateway_shim.surfaces import _model
    from gateway_shim.surfaces.weekly import parse_weekly

    bound = parse_weekly(STYLED_BODY, explicit_fields=()).answer_token_bound()
    assert bound is not None and bound <= _model.ANSWER_BUDGET_TOKENS
    coord = make(root, coords)
    monkeypatch.setattr(_model, "ANSWER_BUDGET_TOKENS", bound - 1)
    cand = coord.present_weekly(STYLED_BODY, explicit_fields=(), **SCHEDULE)
    assert cand.outcome is Outcome.INELIGIBLE and cand.body == STYLED_BODY
    assert cand.publication_permitted and cand.artifact_key is None
    assert not root.root.exists()
    monkeypatch.setattr(_model, "ANSWER_BUDGET_TOKENS", bound)
    with ScriptedWorker(root) as w:
        sent = coord.present_weekly(STYLED_BODY, explicit_fields=(), **SCHEDULE)
    assert sent.outcome is Outcome.ACCEPTED and len(w.requests) == 1


def test_adaptive_artifact_key_inputs(
    root: DataRoot, coords: list[KoreanExpressionCoordinator]
) -> None:
    """No adaptive card is asked (nothing to style: no key is made), but the
    inputs its key would be made of are still the plan's: session, revision,
    proposal digest and the card kind (= surface); not the pressed action, the
    authority pins or the surface argument."""
    coord = make(root, coords, Mode.SHADOW)
    other_session = callback_data(session(session_id="1" * 24))

    def key_fields(payload: Any, **changes: Any) -> tuple[object, ...]:
        args = bind(**changes)
        assert coord.present_adaptive(payload, **args).artifact_key is None
        spec = coord._adaptive.spec(
            payload,
            args["callback_data"],
            args["origin"],
            args["surface"],
            args["authority_pins"],
        )
        assert spec.key_fields
        return spec.key_fields

    key = key_fields(PHYSIQUE_PAYLOAD)
    same = key_fields(
        PHYSIQUE_PAYLOAD,
        callback_data=callback_data(SESSION, "hold"),
        authority_pins=(),
        surface=PHYSIQUE_SURFACE,
    )
    other_session_key = key_fields(PHYSIQUE_PAYLOAD, callback_data=other_session)
    other_revision = key_fields(physique_card(session(revision=4)))
    other_digest = key_fields(physique_card(session(proposal_digest="d" * 64)))
    dual = key_fields(DUAL_PAYLOAD)
    assert key == same
    assert len({key, other_session_key, other_revision, other_digest, dual}) == 5
    assert not root.root.exists()


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
        weekly = coord.present_weekly(STYLED_BODY, explicit_fields=(), **SCHEDULE)
        assert coord.report(weekly, "selected")
        card = coord.present_adaptive(DUAL_PAYLOAD, **bind())
    assert weekly.outcome is Outcome.ACCEPTED and card.outcome is Outcome.NOTHING_TO_STYLE
    files = [p for p in files_under(root.root) if p.suffix == ".json"]
    assert {p.parent.name for p in files} >= {"reports"}  # the spool has files to search
    blobs = json.dumps(w.requests) + "".join(p.read_text("utf-8") for p in files)
    for digest in (weekly.binding_digest, card.binding_digest):
        assert digest and digest not in blobs


# --- revalidate ----------------------------------------------------------------------------


@pytest.fixture
def presented(root: DataRoot, coords: list[KoreanExpressionCoordinator]) -> Any:
    """The dual card as the coordinator hands it out: nothing to style."""
    coord = make(root, coords)
    with ScriptedWorker(root):
        cand = coord.present_adaptive(DUAL_PAYLOAD, **bind())
    assert cand.outcome is Outcome.NOTHING_TO_STYLE
    return cand


# The body the dual card was selected as before the fit table followed the
# readers (`그리고` before the second review line), and its composition: what a
# forged or stale candidate may still claim.
STALE_BODY = str(DUAL_PAYLOAD["text"]).replace("\n최신 확정", "\n그리고 최신 확정", 1)
STALE_GENERATED = (("adaptive.dual.review.2", "그리고 [[P:01]]."),)
assert STALE_BODY != DUAL_PAYLOAD["text"]


def test_revalidate_refusals(presented: Any) -> None:
    def reason(cand: Any, payload: Any = DUAL_PAYLOAD, **changes: Any) -> RevalidationReason:
        with pytest.raises(RevalidationError) as info:
            revalidate(cand, payload, **bind(**changes))
        assert str(info.value) == info.value.reason.value  # enum only, never content
        return info.value.reason

    assert revalidate(presented, DUAL_PAYLOAD, **bind())["text"] == presented.body
    assert reason({"body": presented.body}) is RevalidationReason.NOT_A_CANDIDATE
    assert (
        reason(dataclasses.replace(presented, publication_permitted=False))
        is RevalidationReason.NOT_PUBLISHABLE
    )
    # The host's reloaded state moved on: a different payload, origin or surface.
    assert reason(presented, dual_card(session(revision=4))) is RevalidationReason.BINDING_MISMATCH
    assert (
        reason(presented, _edited(DUAL_PAYLOAD, status="published"))
        is RevalidationReason.INELIGIBLE
    )
    assert reason(presented, origin=CardOrigin.RECOVERY) is RevalidationReason.INELIGIBLE
    assert reason(presented, surface=PHYSIQUE_SURFACE) is RevalidationReason.INELIGIBLE
    assert (
        reason(presented, authority_pins=("owner=coach-2", "epoch=7"))
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(presented, callback_data=callback_data(SESSION, "hold"))
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(presented, _button_session(DUAL_PAYLOAD, "4" * 24))
        is RevalidationReason.BINDING_MISMATCH
    )
    assert (
        reason(dataclasses.replace(presented, surface_version=PHYSIQUE_SURFACE))
        is RevalidationReason.SURFACE_MISMATCH
    )
    # A tampered canonical candidate: its body.
    altered = presented.body.replace("\n최신", "\n잘 최신")
    assert altered != presented.body
    assert (
        reason(dataclasses.replace(presented, body=altered)) is RevalidationReason.RENDER_MISMATCH
    )
    # A selected claim: the card has no slot, so no composition re-renders to a
    # body other than the host's — the card as selected before the fit table
    # followed the readers included.
    claim = dataclasses.replace(
        presented, status=CandidateStatus.SELECTED, outcome=Outcome.ACCEPTED
    )
    stale = dataclasses.replace(claim, body=STALE_BODY, generated=STALE_GENERATED)
    assert reason(stale) is RevalidationReason.RENDER_MISMATCH
    tampered = tuple((slot_id, "오늘은 " + text) for slot_id, text in STALE_GENERATED)
    assert (
        reason(dataclasses.replace(stale, generated=tampered)) is RevalidationReason.RENDER_MISMATCH
    )
    assert reason(dataclasses.replace(stale, generated=())) is RevalidationReason.RENDER_MISMATCH
    assert (
        reason(dataclasses.replace(stale, outcome=Outcome.SHADOW_SELECTED))
        is RevalidationReason.RENDER_MISMATCH
    )
    assert (
        reason(dataclasses.replace(claim, locked_spans_utf16=((0, 1),)))
        is RevalidationReason.RENDER_MISMATCH
    )
    canonical_claim = dataclasses.replace(
        presented, status=CandidateStatus.CANONICAL, outcome=Outcome.TIMEOUT
    )
    assert (
        reason(dataclasses.replace(canonical_claim, body=STALE_BODY))
        is RevalidationReason.RENDER_MISMATCH
    )
    assert revalidate(canonical_claim, DUAL_PAYLOAD, **bind()) == DUAL_PAYLOAD


def test_revalidate_does_not_mutate_the_canonical_payload(presented: Any) -> None:
    before = copy.deepcopy(DUAL_PAYLOAD)
    persisted = revalidate(presented, DUAL_PAYLOAD, **bind())
    persisted["buttons"][0]["label"] = "changed"  # type: ignore[index]
    persisted["envelope"]["state"] = "changed"  # type: ignore[index]
    assert DUAL_PAYLOAD == before


# --- async twins and the public API ---------------------------------------------------------


def test_async_twins(root: DataRoot, coords: list[KoreanExpressionCoordinator]) -> None:
    coord = make(root, coords)

    async def main() -> tuple[Any, Any]:
        return (
            await coord.apresent_weekly(STYLED_BODY, explicit_fields=(), **SCHEDULE),
            await coord.apresent_adaptive(PHYSIQUE_PAYLOAD, **bind()),
        )

    with ScriptedWorker(root) as w:
        weekly, physique = asyncio.run(main())
    assert (weekly.outcome, weekly.body) == (Outcome.ACCEPTED, STYLED_SELECTED)
    assert (physique.outcome, physique.body) == (Outcome.NOTHING_TO_STYLE, PHYSIQUE_PROJECTION)
    assert len(w.requests) == 1  # the weekly's
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

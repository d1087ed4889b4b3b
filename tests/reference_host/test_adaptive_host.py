"""Adaptive validation and persistence are one locked service operation (plan
section of that name; design §8), proven with the reference host and the shim's
pure ``revalidate``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    RevalidationError,
    RevalidationReason,
)
from kexpr.spool.layout import DataRoot
from reference_host.adaptive import (
    AdaptiveGatewayHost,
    AdaptiveOperatorService,
    Callback,
    PublicationConflict,
    StaleAuthority,
)
from reference_host.samples import (
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    SESSION_ID,
    callback_data,
    dual_card,
    physique_card,
    session,
)
from reference_host.scripted_worker import ScriptedWorker, report_outcomes, spool_request_files

MakeCoordinator = Callable[[Mode], KoreanExpressionCoordinator]
CALLBACK = Callback(callback_data=callback_data(session()), epoch=7)
CARDS = {"dual": dual_card, "physique": physique_card}
SURFACES = {"dual": DUAL_SURFACE, "physique": PHYSIQUE_SURFACE}


class Editor:
    def __init__(self) -> None:
        self.edits: list[Mapping[str, object]] = []

    def __call__(self, payload: Mapping[str, object]) -> None:
        self.edits.append(payload)


def service() -> AdaptiveOperatorService:
    s = session()
    return AdaptiveOperatorService(sessions={s.session_id: s})


def host(
    svc: AdaptiveOperatorService, coord: KoreanExpressionCoordinator, card: str, editor: Editor
) -> AdaptiveGatewayHost:
    return AdaptiveGatewayHost(svc, coord, CARDS[card], editor, surface=SURFACES[card])


@pytest.mark.parametrize("card", ["dual", "physique"])
def test_fresh_card_is_validated_and_pinned_before_the_edit(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator, card: str
) -> None:
    svc, editor = service(), Editor()
    gateway = host(svc, make_coordinator(Mode.ENABLED), card, editor)
    persisted = gateway.handle_review_callback(CALLBACK)
    canonical = CARDS[card](session())
    assert persisted is not None
    (row,) = svc.pending_rows
    assert row.payload == persisted and editor.edits == [persisted]
    # Only the text differs; status, customer key, digest, revision, buttons and
    # envelope are the canonical ones.
    assert {k: v for k, v in persisted.items() if k != "text"} == {
        k: v for k, v in canonical.items() if k != "text"
    }
    assert persisted["text"] != canonical["text"] and "차분히, " in str(persisted["text"])
    assert report_outcomes(root) == ["selected"]
    assert worker.provider_calls == 1
    assert svc.published == [(SESSION_ID, 3, SURFACES[card])]


def test_shadow_pins_the_canonical_presentation(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    svc, editor = service(), Editor()
    gateway = host(svc, make_coordinator(Mode.SHADOW), "physique", editor)
    persisted = gateway.handle_review_callback(CALLBACK)
    canonical = physique_card(session())
    assert persisted is not None
    # The physique projection (with the canonical sentence) is what is pinned.
    assert str(persisted["text"]).startswith(
        str(canonical["text"])[: -len("상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음")]
    )
    assert "\n\n검토 안내\n제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n상태: " in str(
        persisted["text"]
    )
    assert report_outcomes(root) == ["shadow_selected"]


# --- the race: a barrier after candidate creation, an authority change, commit ----

CHANGES: dict[str, tuple[dict[str, Any], RevalidationReason]] = {
    "owner": ({"owner": "coach-2"}, RevalidationReason.BINDING_MISMATCH),
    "config": ({"config_version": "cfg-13"}, RevalidationReason.BINDING_MISMATCH),
    "epoch": ({"epoch": 8}, RevalidationReason.BINDING_MISMATCH),
    "revision": (
        {"revision": 4, "proposal_digest": "f" * 64},
        RevalidationReason.BINDING_MISMATCH,
    ),
}


@pytest.mark.parametrize("card", ["dual", "physique"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_authority_change_between_candidate_and_commit_persists_nothing(
    root: DataRoot,
    worker: ScriptedWorker,
    make_coordinator: MakeCoordinator,
    card: str,
    change: str,
) -> None:
    svc, editor = service(), Editor()
    gateway = host(svc, make_coordinator(Mode.ENABLED), card, editor)
    barrier = threading.Barrier(2, timeout=10)
    changed = threading.Event()
    outcome: dict[str, Any] = {}

    def gateway_thread() -> None:
        cand, payload = gateway.present(CALLBACK)
        outcome["candidate"] = cand
        barrier.wait()  # after candidate creation, before the service locks
        assert changed.wait(10)
        try:
            gateway.commit(CALLBACK, cand, payload)
        except BaseException as e:  # noqa: BLE001 - recorded and asserted below
            outcome["error"] = e

    def authority_thread() -> None:
        barrier.wait()
        svc.change_session(SESSION_ID, **CHANGES[change][0])
        changed.set()

    threads = [threading.Thread(target=gateway_thread), threading.Thread(target=authority_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    cand = outcome["candidate"]
    assert cand.outcome is Outcome.ACCEPTED
    error = outcome.get("error")
    assert isinstance(error, RevalidationError)
    assert error.reason is CHANGES[change][1]
    assert svc.pending_rows == []  # zero pending rows
    assert editor.edits == []  # no edit
    assert worker.provider_calls == 1  # and no second expression call
    assert report_outcomes(root) == ["commit_failed"]


def test_expired_callback_fails_step_one(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    svc, editor = service(), Editor()
    gateway = host(svc, make_coordinator(Mode.ENABLED), "dual", editor)
    cand, payload = gateway.present(CALLBACK)
    svc.change_session(SESSION_ID, expired=True)
    with pytest.raises(StaleAuthority):
        gateway.commit(CALLBACK, cand, payload)
    assert svc.pending_rows == [] and editor.edits == [] and worker.provider_calls == 1


# --- duplicate and conflicting commits ----------------------------------------------


def _race(
    commits: list[Callable[[], Mapping[str, object]]],
) -> list[BaseException | Mapping[str, object]]:
    barrier = threading.Barrier(len(commits), timeout=10)
    results: list[BaseException | Mapping[str, object]] = [RuntimeError("not run")] * len(commits)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = commits[i]()
        except BaseException as e:  # noqa: BLE001 - returned to the test
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(commits))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    return results


@pytest.mark.parametrize("card", ["dual", "physique"])
def test_two_commits_of_the_same_candidate_make_one_pending_row(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator, card: str
) -> None:
    svc = service()
    gateway = host(svc, make_coordinator(Mode.ENABLED), card, Editor())
    cand, payload = gateway.present(CALLBACK)

    def commit() -> Mapping[str, object]:
        return svc.validate_and_mark_presented_card(
            CALLBACK, canonical_payload=payload, candidate=cand, surface=SURFACES[card]
        )

    first, second = _race([commit, commit])
    assert isinstance(first, Mapping) and first == second
    (row,) = svc.pending_rows
    assert row.payload == first and row.payload["text"] == cand.body
    assert worker.provider_calls == 1


@pytest.mark.parametrize("card", ["dual", "physique"])
def test_two_unequal_candidates_make_one_row_and_a_deterministic_conflict(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator, card: str
) -> None:
    svc = service()
    coord = make_coordinator(Mode.ENABLED)
    gateway = host(svc, coord, card, Editor())
    selected, payload = gateway.present(CALLBACK)
    canonical, _ = gateway.present(CALLBACK)  # the same artifact again: no call
    assert selected.status is CandidateStatus.SELECTED
    assert canonical.outcome is Outcome.ALREADY_ATTEMPTED
    assert canonical.status is CandidateStatus.CANONICAL and canonical.body != selected.body

    def commit(cand: Any) -> Callable[[], Mapping[str, object]]:
        return lambda: svc.validate_and_mark_presented_card(
            CALLBACK, canonical_payload=payload, candidate=cand, surface=SURFACES[card]
        )

    results = _race([commit(selected), commit(canonical)])
    conflicts = [r for r in results if isinstance(r, PublicationConflict)]
    persisted = [r for r in results if isinstance(r, Mapping)]
    assert len(conflicts) == 1 and len(persisted) == 1
    (row,) = svc.pending_rows
    assert row.payload == persisted[0]  # the winner's payload, never overwritten
    assert worker.provider_calls == 1

    # Deterministic by order: whichever commits first owns the row.
    for first, second in ((selected, canonical), (canonical, selected)):
        fresh = service()
        fresh.validate_and_mark_presented_card(
            CALLBACK, canonical_payload=payload, candidate=first, surface=SURFACES[card]
        )
        with pytest.raises(PublicationConflict):
            fresh.validate_and_mark_presented_card(
                CALLBACK, canonical_payload=payload, candidate=second, surface=SURFACES[card]
            )
        (only,) = fresh.pending_rows
        assert only.payload["text"] == first.body


# --- recovery -----------------------------------------------------------------------


class CrashingEditor(Editor):
    def __call__(self, payload: Mapping[str, object]) -> None:
        raise ConnectionError("telegram unavailable")


class NoPresentation(KoreanExpressionCoordinator):
    def _present(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        raise AssertionError("recovery must not present")


@pytest.mark.parametrize("card", ["dual", "physique"])
def test_recovery_republishes_the_stored_payload_with_zero_requests(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator, card: str
) -> None:
    from gateway_shim import KoreanExpressionConfig, exact_block

    svc = service()
    crashed = host(svc, make_coordinator(Mode.ENABLED), card, CrashingEditor())
    with pytest.raises(ConnectionError):
        crashed.handle_review_callback(CALLBACK)
    (row,) = svc.pending_rows  # persisted before the (failed) edit
    requests_before = len(worker.requests)

    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, adaptive_operator=True))
    restarted_coord = NoPresentation(config, root.root)
    editor = Editor()
    try:
        restarted = host(svc, restarted_coord, card, editor)
        assert restarted.recover_pending_cards() == 1
        assert restarted.recover_pending_cards() == 0  # published: not again
    finally:
        restarted_coord.close()
    assert editor.edits == [row.payload]  # the exact stored payload
    assert len(worker.requests) == requests_before and worker.provider_calls == 1
    assert spool_request_files(root) == []
    assert report_outcomes(root) == ["selected"]  # committed before the edit failed


# --- payloads kexpr does not present ------------------------------------------------


def test_a_menu_is_persisted_as_the_host_always_did_without_a_call(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    menu: dict[str, object] = {
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
    svc, editor = service(), Editor()
    gateway = AdaptiveGatewayHost(
        svc, make_coordinator(Mode.ENABLED), lambda s: menu, editor, surface=DUAL_SURFACE
    )
    persisted = gateway.handle_review_callback(Callback(callback_data(session(), "back"), 7))
    assert persisted == menu and editor.edits == [menu]
    assert worker.provider_calls == 0 and spool_request_files(root) == []


def test_an_invalid_operator_glossary_keeps_the_dual_card_canonical(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    path = root.root / "operator-glossary.json"
    path.write_bytes(b"{}")
    path.chmod(0o600)
    svc, editor = service(), Editor()
    persisted = host(svc, coord, "dual", editor).handle_review_callback(CALLBACK)
    assert persisted == dual_card(session())  # the host's text, byte for byte
    assert worker.provider_calls == 0

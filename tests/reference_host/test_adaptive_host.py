"""Adaptive validation and persistence are one locked service operation (plan section
of that name; design §8), proven with the reference host, whose seams are the host's
at the pin: a re-entrant authority lock, a ledger lock that is a
no-op under a profile root and an ``fcntl`` lock otherwise, ``mark_publish_pending``
taking both itself, the plan's ``validate_and_mark_presented_card`` signature, and the
handler running ``handle_callback`` on the loop and awaiting ``query.answer`` under
the authority lock. A host that deadlocks or reports twice fails these tests."""

from __future__ import annotations

import asyncio
import fcntl
import inspect
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    RevalidationError,
    RevalidationReason,
    exact_block,
)
from kexpr.spool.layout import DataRoot
from reference_host.adaptive import (
    AdaptiveGatewayHost,
    AdaptiveOperatorService,
    PendingRow,
    ProfileAuthorityLock,
    PublicationConflict,
    StaleAuthority,
)
from reference_host.bot import Message, RecordingQuery
from reference_host.hooks import NoPresentation, WatchedCoordinator
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
DATA = callback_data(session())
CARDS = {"dual": dual_card, "physique": physique_card}
SURFACES = {"dual": DUAL_SURFACE, "physique": PHYSIQUE_SURFACE}
# Neither card has anything to style (the fit table, design §6.2): the candidate is
# `nothing_to_style`, no request, no call, no report. What the host pins is the
# canonical text: the dual card's own, the physique card's projection (its review
# instruction under `검토 안내`, before the status line).
STATUS_LINE = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
INSTRUCTION = "\n\n검토 안내\n제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"


def pinned_text(card: str) -> str:
    text = str(CARDS[card](session())["text"])
    if card == "dual":
        return text
    return text[: -len(STATUS_LINE)].rstrip("\n") + INSTRUCTION + STATUS_LINE


def nothing_sent(root: DataRoot, worker: ScriptedWorker) -> bool:
    """No request, no call, no report: the surface had nothing to style."""
    return (
        worker.requests == []
        and worker.provider_calls == 0
        and spool_request_files(root) == []
        and report_outcomes(root) == []
    )


# A generous bound for "did not hang": only a deadlock comes near it.
DEADLOCK_BOUND_S = 60.0


def service(
    coord: KoreanExpressionCoordinator | None,
    card: str = "dual",
    *,
    service_type: type[AdaptiveOperatorService] = AdaptiveOperatorService,
    profile_root: Path | None = None,
    session_path: Path | None = None,
) -> AdaptiveOperatorService:
    s = session()
    return service_type(
        sessions={s.session_id: s},
        render_card=CARDS[card],
        surface=SURFACES[card],
        glossary=coord.dual_glossary if coord is not None else (lambda: None),
        profile_root=profile_root,
        session_path=session_path,
    )


def located(
    tmp_path: Path, mode: str, coord: KoreanExpressionCoordinator | None = None, **kw: Any
) -> AdaptiveOperatorService:
    """A service whose ledger lock is a no-op (``profile_root``) or an fcntl lock
    (``session_path`` only): the host's two modes."""
    if mode == "profile_root":
        (tmp_path / "profile").mkdir()
        return service(coord, profile_root=tmp_path / "profile", **kw)
    return service(coord, session_path=tmp_path / "sessions.jsonl", **kw)


def press(gateway: AdaptiveGatewayHost, query: RecordingQuery | None = None) -> RecordingQuery:
    query = query or RecordingQuery(DATA)
    asyncio.run(gateway.handle_review_callback(query))
    return query


def flocked(path: Path) -> bool:
    """Whether another open file description holds an exclusive ``flock`` on ``path``."""
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def held(svc: AdaptiveOperatorService) -> dict[str, bool]:
    """Which of the service's locks are held right now, seen from another thread and
    another descriptor (what a second gateway thread or process would meet)."""
    seen: dict[str, bool] = {}

    def probe() -> None:
        got = svc._session_lock.acquire(blocking=False)
        if got:
            svc._session_lock.release()
        seen["session"] = not got

    t = threading.Thread(target=probe)
    t.start()
    t.join(DEADLOCK_BOUND_S)
    ledger = (
        svc.session_path.with_name(svc.session_path.name + ".lock") if svc.session_path else None
    )
    seen["ledger"] = ledger is not None and flocked(ledger)
    profile = svc.profile_root / "profile-authority.lock" if svc.profile_root else None
    seen["profile"] = profile is not None and flocked(profile)
    return seen


def run_bounded(fn: Callable[[], object]) -> None:
    """Run ``fn`` in a daemon thread; fail (instead of hanging the suite) on a deadlock."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(DEADLOCK_BOUND_S)
    assert not t.is_alive(), "deadlock: the operation never returned"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("card", ["dual", "physique"])
def test_fresh_card_is_validated_and_pinned_before_the_edit(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator, card: str
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    svc = service(coord, card)
    query = press(AdaptiveGatewayHost(svc, coord))
    canonical = CARDS[card](session())
    (row,) = svc.pending_rows
    persisted = row.payload
    assert query.edits == [persisted["text"]] and query.answers == [None]
    # Only the text differs; status, customer key, digest, revision, buttons and
    # envelope are the canonical ones.
    assert {k: v for k, v in persisted.items() if k != "text"} == {
        k: v for k, v in canonical.items() if k != "text"
    }
    assert persisted["text"] == pinned_text(card)
    assert nothing_sent(root, worker)
    assert svc.published == [(SESSION_ID, "501")]


def test_shadow_pins_the_canonical_presentation(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    coord = make_coordinator(Mode.SHADOW)
    svc = service(coord, "physique")
    press(AdaptiveGatewayHost(svc, coord))
    canonical = physique_card(session())
    (row,) = svc.pending_rows
    text = str(row.payload["text"])
    # The physique projection (with the canonical sentence) is what is pinned.
    assert text.startswith(
        str(canonical["text"])[: -len("상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음")]
    )
    assert "\n\n검토 안내\n제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n상태: " in text
    assert text == pinned_text("physique")
    assert nothing_sent(root, worker)  # nothing to style: not even the shim's report


# --- the seams themselves ----------------------------------------------------------


def test_the_plan_signatures() -> None:
    """The plan's ``validate_and_mark_presented_card`` and the host's
    ``mark_publish_pending``, parameter for parameter."""

    def shape(fn: Callable[..., object]) -> list[tuple[str, str, object]]:
        return [(p.name, p.kind.name, p.default) for p in inspect.signature(fn).parameters.values()]

    empty = inspect.Parameter.empty
    assert shape(AdaptiveOperatorService.validate_and_mark_presented_card) == [
        ("self", "POSITIONAL_OR_KEYWORD", empty),
        ("callback_data", "POSITIONAL_OR_KEYWORD", empty),
        ("canonical_payload", "KEYWORD_ONLY", empty),
        ("candidate", "KEYWORD_ONLY", empty),
        ("origin_message_id", "KEYWORD_ONLY", ""),
    ]
    assert shape(AdaptiveOperatorService.mark_publish_pending) == [
        ("self", "POSITIONAL_OR_KEYWORD", empty),
        ("session_id", "POSITIONAL_OR_KEYWORD", empty),
        ("card_payload", "KEYWORD_ONLY", empty),
        ("origin_message_id", "KEYWORD_ONLY", ""),
    ]


@pytest.mark.parametrize("mode", ["profile_root", "session_path"])
def test_the_authority_lock_is_reentrant_and_excludes_other_threads(
    tmp_path: Path, mode: str
) -> None:
    svc = located(tmp_path, mode)

    def nested() -> None:
        with svc._authority_session_lock(), svc._authority_session_lock():
            seen = held(svc)
            assert seen["session"]
            assert seen["profile"] is (mode == "profile_root")
            with svc._authority_session_lock():  # and a third time, as the handler does
                pass
            assert held(svc)["session"]

    run_bounded(nested)
    assert held(svc) == {"session": False, "ledger": False, "profile": False}


def test_the_ledger_lock_is_a_no_op_under_a_profile_root(tmp_path: Path) -> None:
    svc = service(None, profile_root=tmp_path)
    assert svc.session_path == tmp_path / "adaptive-operator-sessions.jsonl"
    with svc._publication_ledger_lock():
        assert held(svc) == {"session": False, "ledger": False, "profile": False}
    assert not (tmp_path / "adaptive-operator-sessions.jsonl.lock").exists()


def test_the_ledger_lock_is_an_fcntl_lock_without_a_profile_root(tmp_path: Path) -> None:
    svc = service(None, session_path=tmp_path / "sessions.jsonl")
    with svc._publication_ledger_lock():
        assert held(svc)["ledger"]  # another process would wait here
    assert not held(svc)["ledger"]


class Probed(AdaptiveOperatorService):
    """Records which locks are held at the moment a pending row is written."""

    seen: list[dict[str, bool]]

    def _mark_publish_pending_unlocked(
        self, session: Any, payload: Mapping[str, object], origin_message_id: object
    ) -> Mapping[str, object]:
        self.seen = [*getattr(self, "seen", []), held(self)]
        return super()._mark_publish_pending_unlocked(session, payload, origin_message_id)


@pytest.mark.parametrize("mode", ["profile_root", "session_path"])
def test_mark_publish_pending_takes_both_locks_itself(tmp_path: Path, mode: str) -> None:
    svc = located(tmp_path, mode, service_type=Probed)
    assert isinstance(svc, Probed)
    menu = {"status": "menu", "text": "적응형 영양 검토\n고객을 선택하세요.", "buttons": []}
    run_bounded(lambda: svc.mark_publish_pending(DATA, card_payload=menu))
    ledger = mode == "session_path"
    assert svc.seen == [{"session": True, "ledger": ledger, "profile": not ledger}]
    assert svc.pending_rows == [PendingRow(SESSION_ID, menu)]


@pytest.mark.parametrize("mode", ["profile_root", "session_path"])
@pytest.mark.parametrize("card", ["dual", "physique"])
def test_the_handler_commits_under_both_locks_in_either_ledger_mode(
    root: DataRoot,
    worker: ScriptedWorker,
    make_coordinator: MakeCoordinator,
    tmp_path: Path,
    mode: str,
    card: str,
) -> None:
    """The handler holds the authority lock around the plan's method, which takes it
    again and the ledger lock once: no deadlock (an fcntl lock taken twice in one
    process would wait for itself), both held while the row is written, one report."""
    coord = make_coordinator(Mode.ENABLED)
    svc = located(tmp_path, mode, coord, card=card, service_type=Probed)
    assert isinstance(svc, Probed)
    query = RecordingQuery(DATA)
    run_bounded(lambda: press(AdaptiveGatewayHost(svc, coord), query))
    ledger = mode == "session_path"
    assert svc.seen == [{"session": True, "ledger": ledger, "profile": not ledger}]
    (row,) = svc.pending_rows
    assert query.edits == [row.payload["text"]]
    assert nothing_sent(root, worker)


@pytest.fixture
def watched(root: DataRoot) -> Iterator[WatchedCoordinator]:
    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, adaptive_operator=True))
    coord = WatchedCoordinator(config, root.root)
    yield coord
    coord.close()


def test_kexpr_is_awaited_outside_the_authority_lock(
    root: DataRoot, worker: ScriptedWorker, watched: WatchedCoordinator, tmp_path: Path
) -> None:
    """An ``RLock`` held across an ``await`` stops other threads for as long as the
    wait lasts (up to the request's 4 s deadline): the presentation comes before the lock."""
    svc = service(watched, profile_root=tmp_path)
    seen: list[dict[str, bool]] = []
    watched.hook = lambda cand: seen.append(held(svc))
    press(AdaptiveGatewayHost(svc, watched))
    assert seen == [{"session": False, "ledger": False, "profile": False}]
    assert nothing_sent(root, worker)


def test_a_stale_callback_is_answered_under_the_lock_and_persists_nothing(
    root: DataRoot, worker: ScriptedWorker, watched: WatchedCoordinator
) -> None:
    """The host's own recheck fails after the candidate was made: the handler awaits
    ``query.answer`` while it holds the authority lock (as the host does), persists
    nothing and edits nothing. The candidate had nothing to style, so there is no
    attempt to report (the weekly host's ``commit_failed`` is
    test_host_journal.py's)."""
    svc = service(watched)
    watched.hook = lambda cand: svc.change_session(SESSION_ID, expired=True)
    during_answer: list[dict[str, bool]] = []
    query = RecordingQuery(DATA, probe=lambda call: during_answer.append(held(svc)))
    press(AdaptiveGatewayHost(svc, watched), query)
    assert query.answers == ["검토 카드 권한이 변경되었습니다."] and query.edits == []
    assert during_answer == [{"session": True, "ledger": False, "profile": False}]
    assert svc.pending_rows == [] and nothing_sent(root, worker)


class OnTheLoop(AdaptiveOperatorService):
    """Records the event loop ``handle_callback`` ran on (none: it ran elsewhere)."""

    loops: list[asyncio.AbstractEventLoop]

    def handle_callback(self, callback_data: str, *, message_id: str) -> dict[str, object]:
        self.loops = [*getattr(self, "loops", []), asyncio.get_running_loop()]
        return super().handle_callback(callback_data, message_id=message_id)


def test_handle_callback_runs_synchronously_on_the_event_loop(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    """As the host calls it: a plain call from the handler coroutine, on the loop's
    thread (never an executor), so everything it locks is locked on that thread."""
    coord = make_coordinator(Mode.ENABLED)
    svc = service(coord, service_type=OnTheLoop)
    assert isinstance(svc, OnTheLoop)
    press(AdaptiveGatewayHost(svc, coord))
    assert len(svc.loops) == 1 and nothing_sent(root, worker)


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


class Refusals(AdaptiveOperatorService):
    """Records what ``validate_and_mark_presented_card`` raised."""

    raised: list[BaseException]

    def validate_and_mark_presented_card(
        self,
        callback_data: object,
        *,
        canonical_payload: Mapping[str, object],
        candidate: PresentationCandidate,
        origin_message_id: object = "",
    ) -> Mapping[str, object]:
        try:
            return super().validate_and_mark_presented_card(
                callback_data,
                canonical_payload=canonical_payload,
                candidate=candidate,
                origin_message_id=origin_message_id,
            )
        except BaseException as e:
            self.raised = [*getattr(self, "raised", []), e]
            raise


@pytest.mark.parametrize("card", ["dual", "physique"])
@pytest.mark.parametrize("change", sorted(CHANGES))
def test_authority_change_between_candidate_and_commit_persists_nothing(
    root: DataRoot, worker: ScriptedWorker, watched: WatchedCoordinator, card: str, change: str
) -> None:
    svc = service(watched, card, service_type=Refusals)
    assert isinstance(svc, Refusals)
    barrier = threading.Barrier(2, timeout=10)
    changed = threading.Event()

    def after_candidate(cand: PresentationCandidate) -> None:  # before the service locks
        barrier.wait()
        assert changed.wait(10)

    def authority_thread() -> None:
        barrier.wait()
        svc.change_session(SESSION_ID, **CHANGES[change][0])
        changed.set()

    watched.hook = after_candidate
    authority = threading.Thread(target=authority_thread)
    authority.start()
    query = press(AdaptiveGatewayHost(svc, watched))
    authority.join(15)
    (error,) = svc.raised
    assert isinstance(error, RevalidationError) and error.reason is CHANGES[change][1]
    assert svc.pending_rows == []  # zero pending rows
    assert query.edits == [] and query.answers == ["검토 카드를 저장할 수 없습니다."]
    assert nothing_sent(root, worker)  # and no expression call


def test_expired_callback_fails_step_one(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    svc = service(coord)
    payload = svc.handle_callback(DATA, message_id="501")
    cand = coord.present_adaptive(
        payload,
        callback_data=DATA,
        surface=DUAL_SURFACE,
        authority_pins=svc.authority_pins_for(DATA),
    )
    svc.change_session(SESSION_ID, expired=True)
    with pytest.raises(StaleAuthority):
        svc.validate_and_mark_presented_card(DATA, canonical_payload=payload, candidate=cand)
    assert cand.outcome is Outcome.NOTHING_TO_STYLE
    assert svc.pending_rows == [] and nothing_sent(root, worker)


def test_a_foreign_origin_message_is_a_conflict_and_persists_nothing(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    svc = service(coord)
    query = press(AdaptiveGatewayHost(svc, coord), RecordingQuery(DATA, message=Message("999")))
    assert svc.pending_rows == [] and query.edits == []
    assert query.answers == ["검토 카드를 저장할 수 없습니다."]
    assert nothing_sent(root, worker)


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


def _present(
    svc: AdaptiveOperatorService, coord: KoreanExpressionCoordinator
) -> tuple[PresentationCandidate, dict[str, object]]:
    payload = svc.handle_callback(DATA, message_id="501")
    cand = coord.present_adaptive(
        payload,
        callback_data=DATA,
        surface=svc.surface,
        authority_pins=svc.authority_pins_for(DATA),
    )
    return cand, payload


@pytest.mark.parametrize("card", ["dual", "physique"])
def test_two_commits_of_the_same_candidate_make_one_pending_row(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator, card: str
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    svc = service(coord, card)
    cand, payload = _present(svc, coord)

    def commit() -> Mapping[str, object]:
        return svc.validate_and_mark_presented_card(
            DATA, canonical_payload=payload, candidate=cand, origin_message_id="501"
        )

    first, second = _race([commit, commit])
    assert isinstance(first, Mapping) and first == second
    (row,) = svc.pending_rows
    assert row.payload == first and row.payload["text"] == cand.body == pinned_text(card)
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and nothing_sent(root, worker)


@pytest.mark.parametrize("card", ["dual", "physique"])
def test_two_unequal_candidates_make_one_row_and_a_deterministic_conflict(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator, card: str
) -> None:
    """No card has a selected body now, so the unequal pair is the enabled
    gateway's (`nothing_to_style`: the physique card's projection) and a disabled
    gateway's (the host's card text as it is). The physique pair differs: one row,
    and whichever commits second is a conflict. The dual pair is the same text:
    both commits make the same one row."""
    svc = service(make_coordinator(Mode.ENABLED), card)
    projected, payload = _present(svc, make_coordinator(Mode.ENABLED))
    plain, _ = _present(svc, make_coordinator(Mode.DISABLED))
    assert projected.outcome is Outcome.NOTHING_TO_STYLE and plain.outcome is Outcome.DISABLED
    assert projected.status is plain.status is CandidateStatus.CANONICAL
    assert plain.body == payload["text"] and projected.body == pinned_text(card)
    unequal = card == "physique"
    assert (projected.body != plain.body) is unequal

    def commit(
        target: AdaptiveOperatorService, cand: PresentationCandidate
    ) -> Callable[[], Mapping[str, object]]:
        return lambda: target.validate_and_mark_presented_card(
            DATA, canonical_payload=payload, candidate=cand
        )

    results = _race([commit(svc, projected), commit(svc, plain)])
    conflicts = [r for r in results if isinstance(r, PublicationConflict)]
    persisted = [r for r in results if isinstance(r, Mapping)]
    assert (len(conflicts), len(persisted)) == ((1, 1) if unequal else (0, 2))
    (row,) = svc.pending_rows
    assert row.payload == persisted[0]  # the winner's payload, never overwritten
    assert nothing_sent(root, worker)

    # Deterministic by order: whichever commits first owns the row.
    for first, second in ((projected, plain), (plain, projected)):
        fresh = service(make_coordinator(Mode.ENABLED), card)
        commit(fresh, first)()
        if unequal:
            with pytest.raises(PublicationConflict):
                commit(fresh, second)()
        else:
            commit(fresh, second)()
        (only,) = fresh.pending_rows
        assert only.payload["text"] == first.body


# --- recovery -----------------------------------------------------------------------


@pytest.mark.parametrize("card", ["dual", "physique"])
def test_recovery_republishes_the_stored_payload_with_zero_requests(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator, card: str
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    svc = service(coord, card)
    failed = press(AdaptiveGatewayHost(svc, coord), RecordingQuery(DATA, fail_edit=True))
    assert failed.edits == [] and failed.answers == ["검토 카드 게시를 완료하지 못했습니다."]
    (row,) = svc.pending_rows  # persisted before the (failed) edit
    requests_before = len(worker.requests)

    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, adaptive_operator=True))
    restarted_coord = NoPresentation(config, root.root)
    edits: list[Mapping[str, object]] = []
    try:
        restarted = AdaptiveGatewayHost(svc, restarted_coord)
        assert restarted.recover_pending_cards(edits.append) == 1
        assert restarted.recover_pending_cards(edits.append) == 0  # published: not again
    finally:
        restarted_coord.close()
    assert edits == [row.payload]  # the exact stored payload
    assert row.payload["text"] == pinned_text(card)
    assert len(worker.requests) == requests_before == 0
    assert nothing_sent(root, worker)


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
    coord = make_coordinator(Mode.ENABLED)
    s = session()
    svc = AdaptiveOperatorService(
        sessions={s.session_id: s}, render_card=lambda _: menu, surface=DUAL_SURFACE
    )
    query = press(AdaptiveGatewayHost(svc, coord), RecordingQuery(callback_data(s, "back")))
    assert svc.pending_rows == [PendingRow(SESSION_ID, menu)] and query.edits == [menu["text"]]
    assert worker.provider_calls == 0 and spool_request_files(root) == []


def test_an_invalid_operator_glossary_keeps_the_dual_card_canonical(
    root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    path = root.root / "operator-glossary.json"
    path.write_bytes(b"{}")
    path.chmod(0o600)
    svc = service(coord)
    query = press(AdaptiveGatewayHost(svc, coord))
    (row,) = svc.pending_rows
    assert row.payload == dual_card(session())  # the host's text, byte for byte
    assert query.edits == [dual_card(session())["text"]]
    assert worker.provider_calls == 0


def test_the_profile_lock_is_one_per_root(tmp_path: Path) -> None:
    assert ProfileAuthorityLock.for_root(tmp_path) is ProfileAuthorityLock.for_root(
        tmp_path / "." / ""
    )

"""Black-box end to end for every surface: real `kexpr supervise` + worker
processes, the real shim in this process, a loopback HTTPS fake reached only
through a real CONNECT proxy. One worker serves the whole module (the machine's
cores are shared); every test uses its own artifacts, so the worker's dedupe
never couples them.

Per surface, with a model that writes an accepted and then a rejected composition:
the weekly report (its goal-missing sample, the one message the fit table styles,
design §6.1) is selected, then canonical after one call each; daily, the
dualcoachtest card and the physique card have nothing to style, so both are
``nothing_to_style``: the host's body, no request, no journal row, no call (the
model is never asked). Then the host-side guarantees that depend on the provider
call count, with the real worker: the weekly restart sends pinned bytes with zero
requests, and an authority change between a (nothing_to_style) card candidate and
the host's commit persists nothing and costs nothing, while the same callback
without the change pins the canonical card.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import RunningWorker, journal_rows, start_supervised_worker
from fakeapi import FakeOpenAI, compose_reply, default_style, invalid_style
from kit.spool import files_bytes
from reference_host.adaptive import AdaptiveGatewayHost, AdaptiveOperatorService
from reference_host.bot import RecordingQuery
from reference_host.hooks import WatchedCoordinator
from reference_host.host_render import render_daily
from reference_host.samples import (
    CUSTOMER_VALUES,
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    SCHEDULE,
    WEEKLY_BODY,
    WEEKLY_FIELDS,
    WEEKLY_SELECTED,
    WEEKLY_SUMMARY,
    callback_data,
    dual_card,
    physique_card,
    session,
)
from reference_host.weekly import ScheduledDeliveryLedger, SimulatedCrash, WeeklyTaskHost

from gateway_shim import (
    CandidateStatus,
    DailyFacts,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    exact_block,
    revalidate,
)
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot

pytestmark = pytest.mark.e2e

STATUS_LINE = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
REVIEW_SENTENCE = "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요."
# The host's daily reply for a complete check-in (host-shaped, docs/host-formats.md).
DAILY_BODY = render_daily(
    {
        "bodyweight": "72.4",
        "calories": "2150",
        "macros": "탄수화물 260g, 단백질 138g, 지방 70g",
        "training_summary": "김민지 님 스쿼트 5세트",
        "sleep_duration": "6.7",
        "sleep_quality": "4",
        "condition": "3",
        "digestion": "normal",
        "water": "2.1",
    }
)


@dataclass
class Stack:
    root: Path
    fake: FakeOpenAI
    worker: RunningWorker


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    base = tmp_path_factory.mktemp("surfaces-e2e")
    (base / "data").mkdir(mode=0o700)
    root = base / "data" / "korean-expression-v1"
    with FakeOpenAI(base / "fake") as fake:
        worker = start_supervised_worker(root, fake)
        try:
            yield Stack(root, fake, worker)
        finally:
            worker.stop()
        assert fake.errors == []
    Journal(DataRoot(root)).load()  # the run leaves a verifiable journal


@pytest.fixture
def coordinator(stack: Stack) -> Iterator[Callable[[Mode], KoreanExpressionCoordinator]]:
    made: list[KoreanExpressionCoordinator] = []

    def make(mode: Mode) -> KoreanExpressionCoordinator:
        cfg = KoreanExpressionConfig.from_block(
            exact_block(mode, daily=True, weekly=True, adaptive_operator=True)
        )
        coord = KoreanExpressionCoordinator(cfg, stack.root)
        made.append(coord)
        return coord

    yield make
    for coord in made:
        coord.close()


def journal_outcomes(
    root: Path, artifact_key: str | None, n: int, timeout: float = 15.0
) -> list[str]:
    """(state, outcome) rows of one artifact, once there are ``n`` of them."""
    end = time.monotonic() + timeout
    while True:
        rows = journal_rows(root)
        mine = [r["outcome"] for r in rows if r["artifact_key"] == artifact_key]
        if len(mine) >= n or time.monotonic() > end:
            return mine
        time.sleep(0.05)


# --- one accepted and one rejected composition per surface ----------------------------------


@dataclass(frozen=True)
class Case:
    """How to present one surface's sample, what its selected body is (``None``: the
    fit table leaves it nothing to style) and its canonical body, and (adaptive)
    how a host re-proves the candidate."""

    present: Callable[[KoreanExpressionCoordinator, str], PresentationCandidate]
    selected: Callable[[str], str] | None
    canonical: Callable[[str], str]
    recheck: Callable[[PresentationCandidate, str], object] | None = None


def _session_id(tag: str) -> str:
    """A per-test 24-hex session (the host's callback format); see SESSION_IDS."""
    sid = hashlib.sha256(f"e2e-{tag}".encode()).hexdigest()[:24]
    SESSION_IDS.add(sid)
    return sid


SESSION_IDS: set[str] = set()


def _adaptive(
    tag: str, render: Callable[[Any], dict[str, object]], surface: str
) -> tuple[dict[str, object], dict[str, Any]]:
    s = session(session_id=_session_id(tag))
    kwargs = {
        "callback_data": callback_data(s),
        "surface": surface,
        "authority_pins": AdaptiveOperatorService.authority_pins(s),
    }
    return render(s), kwargs


def _dual(tag: str) -> tuple[dict[str, object], dict[str, Any]]:
    return _adaptive(tag, dual_card, DUAL_SURFACE)


def _physique(tag: str) -> tuple[dict[str, object], dict[str, Any]]:
    return _adaptive(tag, physique_card, PHYSIQUE_SURFACE)


def _projection(text: str) -> str:
    return text[: -len(STATUS_LINE)] + f"검토 안내\n{REVIEW_SENTENCE}\n" + STATUS_LINE


def _present_adaptive(
    make: Callable[[str], tuple[dict[str, object], dict[str, Any]]],
) -> Callable[[KoreanExpressionCoordinator, str], PresentationCandidate]:
    def present(coord: KoreanExpressionCoordinator, tag: str) -> PresentationCandidate:
        payload, kwargs = make(tag)
        return coord.present_adaptive(payload, **kwargs)

    return present


def _recheck(
    make: Callable[[str], tuple[dict[str, object], dict[str, Any]]],
) -> Callable[[PresentationCandidate, str], object]:
    def recheck(cand: PresentationCandidate, tag: str) -> object:
        payload, kwargs = make(tag)
        persisted = revalidate(cand, payload, **kwargs)
        assert {k: v for k, v in persisted.items() if k != "text"} == {
            k: v for k, v in payload.items() if k != "text"
        }
        return persisted

    return recheck


def _dual_text(tag: str) -> str:
    return str(_dual(tag)[0]["text"])


def _physique_text(tag: str) -> str:
    return str(_physique(tag)[0]["text"])


CASES: dict[str, Case] = {
    "daily.v1": Case(
        present=lambda c, tag: c.present_daily(
            DAILY_BODY, facts=DailyFacts(complete=True), finalized_event_id=f"evt-e2e-{tag}"
        ),
        selected=None,
        canonical=lambda tag: DAILY_BODY,
    ),
    "weekly.v1": Case(
        present=lambda c, tag: c.present_weekly(
            WEEKLY_BODY,
            explicit_fields=WEEKLY_FIELDS,
            **{**SCHEDULE, "schedule_key": f"sched-e2e-{tag}"},
        ),
        selected=lambda tag: WEEKLY_SELECTED,
        canonical=lambda tag: WEEKLY_BODY,
    ),
    "adaptive.dualcoachtest.card.v1": Case(
        present=_present_adaptive(_dual),
        selected=None,
        canonical=_dual_text,
        recheck=_recheck(_dual),
    ),
    "adaptive.physique.card.v1": Case(
        present=_present_adaptive(_physique),
        selected=None,
        canonical=lambda tag: _projection(_physique_text(tag)),
        recheck=_recheck(_physique),
    ),
}


def assert_no_customer_bytes(stack: Stack) -> None:
    blobs = files_bytes(stack.root, skip=["identity.key"])
    blobs += [r.body for r in stack.fake.requests]
    for value in (*CUSTOMER_VALUES, *SESSION_IDS, "evt-e2e", "sched-e2e", "coach-1", "테스트 전용"):
        needle = value.encode("utf-8")
        assert not any(needle in blob for blob in blobs), value


def spool_files(stack: Stack) -> list[Path]:
    root = DataRoot(stack.root)
    return sorted(p for d in root.spool_dirs() for p in d.rglob("*") if p.is_file())


def assert_nothing_to_style(
    stack: Stack, case: Case, tag: str, present: Callable[[], PresentationCandidate]
) -> None:
    """A surface the fit table leaves nothing to style: the host's body, publishable,
    no attempt; no spool file, no journal row, no wire request (and so no call)."""
    files, rows, requests = spool_files(stack), journal_rows(stack.root), len(stack.fake.requests)
    cand = present()
    assert (cand.outcome, cand.status) == (Outcome.NOTHING_TO_STYLE, CandidateStatus.CANONICAL)
    assert cand.body == case.canonical(tag) and cand.publication_permitted
    assert cand.attempt_id is None and cand.artifact_key is None and cand.generated == ()
    if case.recheck is not None:
        case.recheck(cand, tag)  # the host persists the canonical card
    assert spool_files(stack) == files
    assert journal_rows(stack.root) == rows
    assert len(stack.fake.requests) == requests


@pytest.mark.parametrize("surface", sorted(CASES))
def test_accepted_composition_is_selected(
    stack: Stack, coordinator: Callable[[Mode], KoreanExpressionCoordinator], surface: str
) -> None:
    case, tag = CASES[surface], f"accept-{surface}"
    stack.fake.behaviour = compose_reply(default_style)
    coord = coordinator(Mode.ENABLED)
    if case.selected is None:
        assert_nothing_to_style(stack, case, tag, lambda: case.present(coord, tag))
        assert_no_customer_bytes(stack)
        return
    cand = case.present(coord, tag)
    assert (cand.outcome, cand.status, cand.surface_version) == (
        Outcome.ACCEPTED,
        CandidateStatus.SELECTED,
        surface,
    )
    assert cand.body == case.selected(tag) != case.canonical(tag)
    if case.recheck is not None:
        case.recheck(cand, tag)  # what the host runs under its locks
    coord.report(cand, "selected")  # after the host's durable write / edit
    assert journal_outcomes(stack.root, cand.artifact_key, 2) == ["attempt_started", "selected"]
    assert stack.fake.count_for(cand.artifact_key or "") == 1
    assert_no_customer_bytes(stack)


@pytest.mark.parametrize("surface", sorted(CASES))
def test_rejected_composition_is_canonical(
    stack: Stack, coordinator: Callable[[Mode], KoreanExpressionCoordinator], surface: str
) -> None:
    case, tag = CASES[surface], f"reject-{surface}"
    stack.fake.behaviour = compose_reply(invalid_style)  # "오늘은 …": outside the lexicon
    coord = coordinator(Mode.ENABLED)
    if case.selected is None:  # the model is never asked: nothing to reject
        assert_nothing_to_style(stack, case, tag, lambda: case.present(coord, tag))
        return
    cand = case.present(coord, tag)
    assert (cand.outcome, cand.status) == (
        Outcome.VALIDATION_REJECTED,
        CandidateStatus.CANONICAL,
    )
    assert cand.body == case.canonical(tag) and cand.publication_permitted
    if case.recheck is not None:
        case.recheck(cand, tag)  # a canonical candidate persists the canonical card
    assert journal_outcomes(stack.root, cand.artifact_key, 2) == [
        "attempt_started",
        "validation_rejected",
    ]
    assert stack.fake.count_for(cand.artifact_key or "") == 1


# --- host-side guarantees with the real worker ------------------------------------------------


def test_weekly_restart_sends_the_pinned_bytes_with_zero_requests(
    stack: Stack, coordinator: Callable[[Mode], KoreanExpressionCoordinator], tmp_path: Path
) -> None:
    stack.fake.behaviour = compose_reply(default_style)
    schedule = {**SCHEDULE, "schedule_key": "sched-e2e-restart"}
    path = tmp_path / "ledger.jsonl"
    sent: list[tuple[object, str]] = []
    destination = {"chat_id": "-100200300"}

    def renders() -> dict[str, object]:
        return WEEKLY_SUMMARY

    first = WeeklyTaskHost(
        ScheduledDeliveryLedger(path),
        coordinator(Mode.ENABLED),
        lambda d, b: sent.append((d, b)),
        renders,
        crash_after_reserve=True,
    )
    with pytest.raises(SimulatedCrash):
        asyncio.run(first.run(**schedule, destination=destination))
    requests_after_crash = len(stack.fake.requests)

    def must_not_render() -> dict[str, object]:
        raise AssertionError("rendered after restart")

    restarted = WeeklyTaskHost(
        ScheduledDeliveryLedger(path),
        coordinator(Mode.ENABLED),
        lambda d, b: sent.append((d, b)),
        must_not_render,
    )
    assert asyncio.run(restarted.run(**schedule, destination=destination)) == "sent_pinned"
    assert sent == [(destination, WEEKLY_SELECTED)]
    assert len(stack.fake.requests) == requests_after_crash
    assert list(DataRoot(stack.root).requests.iterdir()) == []


def test_authority_change_between_candidate_and_commit_persists_nothing(stack: Stack) -> None:
    """The dualcoachtest card has nothing to style: its candidate is the canonical
    card, and the host's pending write pins it. An authority change between that
    candidate and the commit is still caught by the write's re-proof of the
    candidate's authority pins under the host's lock: no pending row, no edit, and
    (nothing having been asked) no call and no journal row. The same callback
    without the change pins the canonical card and publishes it."""
    stack.fake.behaviour = compose_reply(default_style)
    requests = len(stack.fake.requests)
    s = session(session_id=_session_id("race"))
    calm = session(session_id=_session_id("calm"))
    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, adaptive_operator=True))
    coord = WatchedCoordinator(config, stack.root)
    svc = AdaptiveOperatorService(
        sessions={s.session_id: s, calm.session_id: calm},
        render_card=dual_card,
        surface=DUAL_SURFACE,
        glossary=coord.dual_glossary,
    )
    barrier, changed = threading.Barrier(2, timeout=20), threading.Event()
    seen: dict[str, Any] = {}

    def after_candidate(cand: Any) -> None:  # in the handler, before the service locks
        seen["candidate"] = cand
        barrier.wait()
        assert changed.wait(20)

    def authority_thread() -> None:
        barrier.wait()
        svc.change_session(s.session_id, epoch=s.epoch + 1)
        changed.set()

    coord.hook = after_candidate
    authority = threading.Thread(target=authority_thread)
    authority.start()
    query = RecordingQuery(callback_data(s))
    calm_query = RecordingQuery(callback_data(calm))
    rows = journal_rows(stack.root)
    try:
        asyncio.run(AdaptiveGatewayHost(svc, coord).handle_review_callback(query))
        authority.join(30)
        cand = seen["candidate"]
        # The control: the same handler, no change in between.
        coord.hook = lambda c: seen.__setitem__("calm", c)
        asyncio.run(AdaptiveGatewayHost(svc, coord).handle_review_callback(calm_query))
    finally:
        coord.close()
    assert not authority.is_alive()
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.artifact_key is None
    assert query.answers == ["검토 카드를 저장할 수 없습니다."]  # the commit was refused
    assert [r.session_id for r in svc.pending_rows] == [calm.session_id]  # none for `s`
    assert query.edits == []
    calm_card = dual_card(calm)
    assert seen["calm"].outcome is Outcome.NOTHING_TO_STYLE
    assert svc.pending_rows[0].payload == calm_card  # the canonical card, pinned
    assert calm_query.edits == [calm_card["text"]]
    # Nothing was asked: no request, no call, no journal row, either way.
    assert len(stack.fake.requests) == requests
    assert journal_rows(stack.root) == rows

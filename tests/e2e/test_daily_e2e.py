"""Black-box end to end: real `kexpr supervise` + worker processes, the real shim in
this process, and a loopback HTTPS fake reached only through a real CONNECT proxy
with a test CA. No test seam in product code."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RunningWorker, journal_rows, start_supervised_worker
from e2e.e2e_support import supervised
from fakeapi import (
    FakeOpenAI,
    FakeReply,
    chat_completion,
    compose_reply,
    default_style,
    invalid_style,
)
from kit.poll import poll
from kit.spool import files_bytes
from reference_host.host_render import render_daily

from gateway_shim import (
    CandidateStatus,
    DailyFacts,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    exact_block,
)

pytestmark = pytest.mark.e2e

# Customer material used in the sample: none of it may reach the spool or journal.
CUSTOMER_VALUES = (
    "김민지",
    "72.4kg",
    "2,150kcal",
    "138g",
    "2.1L",
    "스쿼트 5세트",
    "6.7시간",
    "11월 30일",
    "evt-7f3a9c",
)
# The host's reply to a complete check-in (answers rendered as the host renders them).
BODY = render_daily(
    {
        "bodyweight": "72.4",
        "calories": "2150",
        "macros": {"탄수화물": 260, "단백질": 138, "지방": 70},
        "training_summary": "김민지 님 스쿼트 5세트",
        "performance": "11월 30일 기록 갱신",
        "sleep_duration": "6.7",
        "sleep_quality": "4",
        "condition": "4",
        "digestion": "bristol_4",
        "water": "2.1",
    }
)
EVENT_ID = "evt-7f3a9c-finalized-0001"
EXPECTED_SELECTED = BODY.replace(
    "저장된 오늘 기록을 확인했습니다.", "그리고 저장된 오늘 기록을 확인했습니다."
)


def coordinator(root: Path, mode: Mode) -> KoreanExpressionCoordinator:
    cfg = KoreanExpressionConfig.from_block(exact_block(mode, daily=True))
    assert cfg.valid
    return KoreanExpressionCoordinator(cfg, root)


def present(coord: KoreanExpressionCoordinator) -> PresentationCandidate:
    """The sample, presented once (a complete check-in, its finalized event)."""
    return coord.present_daily(BODY, facts=DailyFacts(complete=True), finalized_event_id=EVENT_ID)


def present_once(root: Path, mode: Mode) -> PresentationCandidate:
    """The sample, presented once by a coordinator of its own (closed after)."""
    coord = coordinator(root, mode)
    try:
        return present(coord)
    finally:
        coord.close()


def wait_rows(root: Path, pred: object, timeout: float = 10.0) -> list[dict[str, object]]:
    assert callable(pred)
    return poll(lambda: journal_rows(root), pred, timeout)


def terminal(rows: list[dict[str, object]]) -> list[object]:
    return [r["outcome"] for r in rows if r["state"] == "finalized"]


@pytest.fixture
def worker(data_root: Path, fake_api: FakeOpenAI) -> Iterator[RunningWorker]:
    yield from supervised(data_root, fake_api)


def test_enabled_accepted_composition_is_selected(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.behaviour = compose_reply(lambda capsule: {"daily.status": "그리고 [[P:01]]."})
    coord = coordinator(data_root, Mode.ENABLED)
    try:
        cand = present(coord)
        assert cand.outcome is Outcome.ACCEPTED
        assert cand.status is CandidateStatus.SELECTED
        assert cand.publication_permitted
        assert cand.body == EXPECTED_SELECTED
        coord.report(cand, "selected")
    finally:
        coord.close()
    rows = wait_rows(data_root, lambda rows: len(rows) == 2)
    assert [(r["state"], r["outcome"]) for r in rows] == [
        ("attempt_started", "attempt_started"),
        ("finalized", "selected"),
    ]
    assert fake_api.count_for(cand.artifact_key or "") == 1
    req = fake_api.requests[0]
    assert req.headers["authorization"] == "Bearer sk-test-kexpr-0000"
    assert req.json is not None and req.json["model"] == "gpt-4.1-mini"
    assert_no_customer_bytes(data_root, fake_api)


def test_shadow_accepted_composition_publishes_canonical(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.behaviour = compose_reply(default_style)
    cand = present_once(data_root, Mode.SHADOW)
    assert cand.outcome is Outcome.SHADOW_SELECTED
    assert cand.status is CandidateStatus.CANONICAL
    assert cand.body == BODY
    rows = wait_rows(data_root, lambda rows: len(rows) == 2)
    assert terminal(rows) == ["shadow_selected"]
    assert rows[0]["mode"] == "shadow"


def test_invalid_composition_is_canonical(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.behaviour = compose_reply(invalid_style)  # "오늘은 [[P:01]]." — not in the lexicon
    cand = present_once(data_root, Mode.ENABLED)
    assert cand.outcome is Outcome.VALIDATION_REJECTED
    assert cand.body == BODY and cand.status is CandidateStatus.CANONICAL
    assert terminal(wait_rows(data_root, lambda rows: len(rows) == 2)) == ["validation_rejected"]
    assert len(fake_api.requests) == 1


def test_malformed_provider_answer_is_canonical(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.behaviour = lambda req: FakeReply(body=chat_completion("{}", finish_reason="length"))
    cand = present_once(data_root, Mode.ENABLED)
    assert cand.outcome is Outcome.INVALID_RESPONSE
    assert cand.body == BODY
    assert len(fake_api.requests) == 1


def test_slow_provider_times_out_canonical_within_the_deadline(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.behaviour = compose_reply(default_style, delay_s=6.0)
    coord = coordinator(data_root, Mode.ENABLED)
    try:
        t0 = time.monotonic()
        cand = present(coord)
        elapsed = time.monotonic() - t0
    finally:
        coord.close()
    assert cand.outcome is Outcome.TIMEOUT
    assert cand.body == BODY
    # A correctness bound (the 4 s deadline plus scheduling slack), not a benchmark.
    assert elapsed < 5.5
    assert terminal(wait_rows(data_root, lambda rows: len(rows) == 2)) == ["timeout"]
    assert len(fake_api.requests) == 1


def test_second_presentation_of_same_artifact_makes_no_request(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.behaviour = compose_reply(default_style)
    coord = coordinator(data_root, Mode.SHADOW)
    try:
        first = present(coord)
        wait_rows(data_root, lambda rows: len(rows) == 2)
        second = present(coord)
    finally:
        coord.close()
    assert first.outcome is Outcome.SHADOW_SELECTED
    assert second.outcome is Outcome.ALREADY_ATTEMPTED
    assert second.body == BODY
    assert fake_api.count_for(first.artifact_key or "") == 1
    assert len(fake_api.requests) == 1


def test_second_presentation_survives_worker_restart(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.behaviour = compose_reply(default_style)
    coord = coordinator(data_root, Mode.SHADOW)
    try:
        present(coord)
        wait_rows(data_root, lambda rows: len(rows) == 2)
        worker.stop()
        restarted = start_supervised_worker(data_root, fake_api)
        try:
            again = present(coord)
        finally:
            restarted.stop()
    finally:
        coord.close()
    assert again.outcome is Outcome.ALREADY_ATTEMPTED
    assert len(fake_api.requests) == 1


def test_no_key_is_credential_unavailable_with_zero_requests(
    data_root: Path, fake_api: FakeOpenAI
) -> None:
    w = start_supervised_worker(data_root, fake_api, key=None)
    try:
        cand = present_once(data_root, Mode.ENABLED)
    finally:
        w.stop()
    assert cand.outcome is Outcome.CREDENTIAL_UNAVAILABLE
    assert cand.body == BODY
    assert fake_api.requests == [] and fake_api.tunnels == []
    assert terminal(journal_rows(data_root)) == ["credential_unavailable"]


def assert_no_customer_bytes(root: Path, fake: FakeOpenAI) -> None:
    """No customer value in any file under the data root, nor on the wire."""
    blobs = files_bytes(root, skip=["identity.key"])
    blobs += [r.body for r in fake.requests]
    for value in (*CUSTOMER_VALUES, EVENT_ID, BODY):
        needle = value.encode("utf-8")
        for blob in blobs:
            assert needle not in blob


def test_spool_and_journal_hold_no_customer_values(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.behaviour = compose_reply(default_style)
    coord = coordinator(data_root, Mode.ENABLED)
    seen: list[bytes] = []
    original = fake_api.behaviour

    def capture(req):
        # Snapshot the spool while the worker is mid-call: the claimed request exists.
        seen.extend(p.read_bytes() for p in (data_root / "spool").rglob("*.json"))
        return original(req)

    fake_api.behaviour = capture
    try:
        cand = present(coord)
        coord.report(cand, "selected")
    finally:
        coord.close()
    wait_rows(data_root, lambda rows: len(rows) == 2)
    assert seen, "the claimed request was visible during the call"
    for value in (*CUSTOMER_VALUES, EVENT_ID):
        for blob in seen:
            assert value.encode("utf-8") not in blob
    assert_no_customer_bytes(data_root, fake_api)

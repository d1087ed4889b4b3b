"""Black-box end to end: real `kexpr supervise` + worker processes, the real shim in
this process, and a loopback HTTPS fake reached only through a real CONNECT proxy
with a test CA. No test seam in product code.

The subject is the one message the fit table styles (design §6.1): the host's weekly
report whose goal range is missing (`reference_host.samples.WEEKLY_BODY`, branch I2),
rendered from a summary with customer values; every outcome of a call is walked on
it. A daily check-in reply (also rendered from customer values) is eligible but has
nothing to style: ``nothing_to_style``, canonical, with nothing written, journaled or
sent, in either mode.
"""

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
from reference_host.samples import (
    CUSTOMER_VALUES,
    SCHEDULE,
    WEEKLY_BODY,
    WEEKLY_FIELDS,
    WEEKLY_HOLD,
)

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

# Customer material in the samples: none of it may reach the spool, the journal or
# the wire (the weekly's own values, the sample's list, and the daily's).
WEEKLY_VALUES = ("72.40kg", "72.10kg", "+0.42%", "85.7%", "김민지 님 매일 아침 체중 기록하기")
DAILY_VALUES = ("138g", "2.1L", "스쿼트 5세트", "6.7시간", "evt-7f3a9c")
# The host's weekly report (the one styled message) and its selected body: the
# composition with the comma, which is not the fake's default (so a pass is this
# test's answer, never a default's).
BODY = WEEKLY_BODY
STYLED = "[[P:01]]. 다만, [[A:01]]."
EXPECTED_SELECTED = BODY.replace("\n" + WEEKLY_HOLD, "\n다만, " + WEEKLY_HOLD, 1)
assert EXPECTED_SELECTED != BODY
# The host's reply to a complete check-in (answers rendered as the host renders them).
DAILY_BODY = render_daily(
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


def coordinator(root: Path, mode: Mode) -> KoreanExpressionCoordinator:
    cfg = KoreanExpressionConfig.from_block(exact_block(mode, daily=True, weekly=True))
    assert cfg.valid
    return KoreanExpressionCoordinator(cfg, root)


def present(coord: KoreanExpressionCoordinator) -> PresentationCandidate:
    """The weekly sample, presented once (its summary's fields, its schedule)."""
    return coord.present_weekly(BODY, explicit_fields=WEEKLY_FIELDS, **SCHEDULE)


def present_daily(coord: KoreanExpressionCoordinator) -> PresentationCandidate:
    """The daily sample, presented once (a complete check-in, its finalized event)."""
    return coord.present_daily(
        DAILY_BODY, facts=DailyFacts(complete=True), finalized_event_id=EVENT_ID
    )


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
    fake_api.behaviour = compose_reply(lambda capsule: {"weekly.interpretation": STYLED})
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
    # "오늘은 [[P:01]]. [[A:01]]." — not in the lexicon
    fake_api.behaviour = compose_reply(invalid_style)
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
    for value in (*CUSTOMER_VALUES, *WEEKLY_VALUES, *DAILY_VALUES, EVENT_ID, BODY, DAILY_BODY):
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
        assert cand.outcome is Outcome.ACCEPTED, cand.outcome
        coord.report(cand, "selected")
        daily = present_daily(coord)  # nothing to style: nothing more to hold
        assert daily.outcome is Outcome.NOTHING_TO_STYLE, daily.outcome
    finally:
        coord.close()
    wait_rows(data_root, lambda rows: len(rows) == 2)
    assert seen, "the claimed request was visible during the call"
    for value in (*CUSTOMER_VALUES, *WEEKLY_VALUES, *DAILY_VALUES, EVENT_ID):
        for blob in seen:
            assert value.encode("utf-8") not in blob
    assert_no_customer_bytes(data_root, fake_api)


def spool_files(root: Path) -> list[Path]:
    """Every file under the spool (requests, claims, answers, reports)."""
    return sorted(p for p in (root / "spool").rglob("*") if p.is_file())


@pytest.mark.parametrize("mode", [Mode.ENABLED, Mode.SHADOW], ids=lambda m: m.value)
def test_daily_check_in_is_nothing_to_style_with_nothing_written_or_sent(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker, mode: Mode
) -> None:
    """A daily reply is eligible (the weekly presented after it is answered) but has
    nothing to style: the host's body, no request, no journal row, no call."""
    fake_api.behaviour = compose_reply(default_style)
    before = spool_files(data_root)
    coord = coordinator(data_root, mode)
    try:
        daily = present_daily(coord)
        assert daily.outcome is Outcome.NOTHING_TO_STYLE, daily.outcome
        assert daily.status is CandidateStatus.CANONICAL and daily.body == DAILY_BODY
        assert daily.attempt_id is None and daily.artifact_key is None
        assert spool_files(data_root) == before
        assert journal_rows(data_root) == []
        assert fake_api.requests == [] and fake_api.tunnels == []
        # The same coordinator and worker do answer the styled weekly (so nothing
        # above is a dead worker's silence).
        weekly = present(coord)
    finally:
        coord.close()
    expected = Outcome.ACCEPTED if mode is Mode.ENABLED else Outcome.SHADOW_SELECTED
    assert weekly.outcome is expected, weekly.outcome
    assert len(fake_api.requests) == 1
    assert fake_api.count_for(weekly.artifact_key or "") == 1

"""Black-box end to end with a model that takes time to write: real
`kexpr supervise` + worker processes, the real shim in this process, and the
loopback fake whose model writes ``first_token + completion_tokens / rate``
(tokens counted with o200k_base, `fakeapi.generation`) at published gpt-4.1-mini
speeds. The suite's other tests use the instant model; these two pin what speed
does to the one call, each far from the 3 s edge so that the result never depends
on this machine's load: at the fastest published speed a compact daily answer
arrives (~1.2 s), and at the community speed a pretty-printed weekly answer
(~4.6 s) cannot, so the artifact ends ``timeout``, canonical, with one request.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RunningWorker, journal_rows
from e2e.e2e_support import host_example, supervised
from fakeapi import FakeModel, FakeOpenAI, brief_style, compose_reply

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)

pytestmark = pytest.mark.e2e

SDK_TIMEOUT_S = 3.0  # design §9


def coordinator(root: Path) -> KoreanExpressionCoordinator:
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, daily=True, weekly=True))
    return KoreanExpressionCoordinator(cfg, root)


def terminal_rows(root: Path, akey: str | None, timeout: float = 10.0) -> list[str]:
    end = time.monotonic() + timeout
    while True:
        rows = [r for r in journal_rows(root) if r["artifact_key"] == akey]
        done = [r["outcome"] for r in rows if r["state"] == "finalized"]
        if done or time.monotonic() > end:
            return done
        time.sleep(0.05)


@pytest.fixture
def worker(data_root: Path, fake_api: FakeOpenAI) -> Iterator[RunningWorker]:
    fake_api.behaviour = compose_reply(brief_style)  # the instruction's brief style
    yield from supervised(data_root, fake_api)


def test_compact_daily_answer_arrives_at_the_fastest_published_speed(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.model = FakeModel(first_token_s=0.3, tokens_per_s=110.0)
    body = host_example("D4")["body"]
    coord = coordinator(data_root)
    try:
        t0 = time.monotonic()
        cand = coord.present_daily(body, finalized_event_id="evt-speed-daily-1")
        elapsed = time.monotonic() - t0
        assert cand.outcome is Outcome.ACCEPTED, cand.outcome
        assert cand.status is CandidateStatus.SELECTED and cand.body != body
        coord.report(cand, Outcome.SELECTED)
    finally:
        coord.close()
    [written] = fake_api.model_answers
    assert written.artifact_key == cand.artifact_key and written.finish_reason == "stop"
    # The compact daily answer is ~85 tokens (it depends on the random key's split:
    # docs/budget.md): ~1.1 s of the 3 s at this speed.
    assert 70 <= written.completion_tokens <= 130
    assert written.seconds == pytest.approx(0.3 + written.completion_tokens / 110.0)
    assert written.seconds < SDK_TIMEOUT_S - 1.0
    # The host waited for the model (a lower bound: the fake held its reply that long).
    assert elapsed >= written.seconds
    assert terminal_rows(data_root, cand.artifact_key) == ["selected"]
    assert fake_api.count_for(cand.artifact_key or "") == 1


def test_pretty_weekly_answer_at_the_community_speed_times_out_with_one_request(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    fake_api.model = FakeModel(first_token_s=0.3, tokens_per_s=55.0, layout="pretty")
    weekly = host_example("W3")
    coord = coordinator(data_root)
    try:
        cand = coord.present_weekly(
            weekly["body"],
            explicit_fields=weekly["explicit_fields"],
            schedule_key="sched-speed-weekly-1",
            kind="weekly",
            kst_day="2026-07-28",
        )
    finally:
        coord.close()
    assert cand.outcome is Outcome.TIMEOUT
    assert cand.status is CandidateStatus.CANONICAL and cand.body == weekly["body"]
    # The SDK's 3 s timeout came before the 4 s deadline: the worker said so at once
    # (its answer names the attempt), the shim did not wait out its deadline.
    assert cand.attempt_id is not None
    [written] = fake_api.model_answers
    # ~235 pretty tokens: ~4.6 s at 55 tokens/s, far beyond the SDK's 3 s.
    assert written.artifact_key == cand.artifact_key
    assert written.seconds > SDK_TIMEOUT_S + 1.0
    assert terminal_rows(data_root, cand.artifact_key) == ["timeout"]
    assert fake_api.count_for(cand.artifact_key or "") == 1 and len(fake_api.requests) == 1

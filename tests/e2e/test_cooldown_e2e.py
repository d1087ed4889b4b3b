"""Black-box end to end: a failing provider puts the real worker
in its cool-down, during which presentations are answered canonical without a
call (zero requests at the loopback fake), then one probe goes through.

Real `kexpr supervise` + worker processes, the real shim in this process, the
loopback fake behind the HTTPS proxy and test CA (tests/conftest.py). The
cool-down lasts `COOL_DOWN_S` (30 s) on the worker's clock; the test waits for
the worker's own status to say it is over, never for a guessed time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RunningWorker
from e2e.e2e_support import supervised
from fakeapi import FakeOpenAI, brief_style, compose_reply, error_reply
from fakeapi.replies import FakeReply, RecordedRequest
from kit.bodies import STYLED_BODY, STYLED_SURFACE, present_styled
from kit.poll import poll

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)
from kexpr.ops.status_cli import collect
from kexpr.spool.layout import DataRoot
from kexpr.worker.cooldown import COOL_DOWN_S, FAILURES_IN_A_ROW

pytestmark = pytest.mark.e2e


def _error500(req: RecordedRequest) -> FakeReply:
    return error_reply(500, "The server had an error while processing your request.")


@pytest.fixture
def worker(data_root: Path, fake_api: FakeOpenAI) -> Iterator[RunningWorker]:
    fake_api.behaviour = _error500
    yield from supervised(data_root, fake_api)


def cooldown(data_root: Path) -> dict[str, Any]:
    status = json.loads(DataRoot(data_root).status_file.read_bytes())
    state: dict[str, Any] = status["admission"]["cooldown"]
    return state


def wait_cooldown(data_root: Path, predicate: Any, timeout: float) -> dict[str, Any]:
    return poll(lambda: cooldown(data_root), predicate, timeout, 0.2)


def test_a_failing_provider_cools_down_without_requests_then_probes(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    body = STYLED_BODY
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    coord = KoreanExpressionCoordinator(cfg, data_root)
    try:

        def present(n: int) -> Any:
            return present_styled(coord, f"sched-cooldown-{n}")

        for n in range(FAILURES_IN_A_ROW):
            cand = present(n)
            assert cand.outcome is Outcome.PROVIDER_ERROR, cand.outcome
        assert len(fake_api.requests) == FAILURES_IN_A_ROW
        # The cool-down: canonical at once, no request reaches the fake.
        for n in range(FAILURES_IN_A_ROW, FAILURES_IN_A_ROW + 3):
            cand = present(n)
            assert cand.outcome is Outcome.PROVIDER_COOLING_DOWN, cand.outcome
            assert cand.status is CandidateStatus.CANONICAL and cand.body == body
            assert cand.attempt_id is None  # no start row
        assert len(fake_api.requests) == FAILURES_IN_A_ROW
        state = wait_cooldown(data_root, lambda s: s["state"] == "open", 5.0)
        assert state["state"] == "open" and state["cool_downs"] == 1
        report = collect(DataRoot(data_root))
        assert report.worker is not None
        refused = report.worker.fields["admission"]["refused_by_surface"][STYLED_SURFACE]
        assert refused["provider_cooling_down"] == 3
        # The provider is back; once the worker's cool-down is over, ONE probe.
        fake_api.behaviour = compose_reply(brief_style)
        state = wait_cooldown(data_root, lambda s: s["seconds_left"] == 0, COOL_DOWN_S + 15)
        assert state["seconds_left"] == 0, state
        cand = present(100)
        assert cand.outcome is Outcome.ACCEPTED, cand.outcome
        assert len(fake_api.requests) == FAILURES_IN_A_ROW + 1
        cand = present(101)
        assert cand.outcome is Outcome.ACCEPTED, cand.outcome
        assert len(fake_api.requests) == FAILURES_IN_A_ROW + 2
        state = wait_cooldown(data_root, lambda s: s["state"] == "closed", 5.0)
        assert (state["state"], state["probes"]) == ("closed", 1)
    finally:
        coord.close()

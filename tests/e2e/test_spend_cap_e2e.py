"""Black-box end to end: a host that presents a new artifact every time (the styled
weekly report under a new schedule key in a loop) gets exactly the worker's spend cap of wire
requests; every other presentation is canonical ``spend_cap_reached`` with no
start row and no request, ``kexpr status`` is not ``healthy``, and a restarted
worker still counts the hour's calls (from the journal).

Real `kexpr supervise` + worker processes started with a small cap, the real shim
in this process, the loopback fake behind the HTTPS proxy and test CA
(tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import RunningWorker, journal_rows, start_supervised_worker
from fakeapi import FakeOpenAI, brief_style, compose_reply
from kit.bodies import STYLED_BODY, present_styled
from kit.poll import poll

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)
from kexpr.ops.status_cli import HealthVerdict, StatusReport, collect
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot

pytestmark = pytest.mark.e2e

CAP = 4
PRESENTED = 10
CAP_ARGS = ("--max-calls-per-hour", str(CAP))


@pytest.fixture
def started(data_root: Path, fake_api: FakeOpenAI) -> Iterator[list[RunningWorker]]:
    """The supervised workers this test starts (a restart adds one); each is
    stopped after it, and the journal they leave verifies."""
    fake_api.behaviour = compose_reply(brief_style)
    workers = [start_supervised_worker(data_root, fake_api, args=CAP_ARGS)]
    try:
        yield workers
    finally:
        for w in workers:
            w.stop()
    Journal(DataRoot(data_root)).load()


def wait_status(
    data_root: Path, predicate: Callable[[StatusReport], bool], timeout: float
) -> StatusReport:
    """The worker rewrites its status on every tick (1 s): the first report for
    which ``predicate`` holds, or the last one after ``timeout``."""
    return poll(lambda: collect(DataRoot(data_root)), predicate, timeout, 0.2)


def test_a_host_presenting_new_artifacts_in_a_loop_gets_the_cap_of_calls(
    data_root: Path, fake_api: FakeOpenAI, started: list[RunningWorker]
) -> None:
    """Regression: no cap in config, CLI or worker; every new artifact was a
    paid call, and ``kexpr status`` said ``healthy``."""
    body = STYLED_BODY
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.SHADOW, weekly=True))
    coord = KoreanExpressionCoordinator(cfg, data_root)
    try:
        outcomes = []
        for n in range(PRESENTED):
            cand = present_styled(coord, f"sched-loop-{n}")
            outcomes.append(cand.outcome)
            if cand.outcome is Outcome.SPEND_CAP_REACHED:
                assert cand.status is CandidateStatus.CANONICAL and cand.body == body
                assert cand.attempt_id is None  # no start row
        assert outcomes == [Outcome.SHADOW_SELECTED] * CAP + [Outcome.SPEND_CAP_REACHED] * (
            PRESENTED - CAP
        )
        # Exactly the cap of wire requests, one per artifact; as many start rows.
        assert len(fake_api.requests) == CAP
        assert len(set(fake_api.artifact_keys_seen())) == CAP
        starts = [r for r in journal_rows(data_root) if r["outcome"] == "attempt_started"]
        assert len(starts) == CAP
        report = wait_status(
            data_root,
            lambda r: r.worker is not None and r.worker.fields["spend"].get("refused") == 6,
            10.0,
        )
        assert report.verdict is HealthVerdict.SPEND_CAPPED
        assert report.worker is not None
        spend = report.worker.fields["spend"]
        assert (spend["per_hour"], spend["last_hour"], spend["today"]) == (CAP, CAP, CAP)
        assert spend["refused"] == PRESENTED - CAP
        assert report.worker.fields["counters"]["spend_cap_reached"] == PRESENTED - CAP
    finally:
        coord.close()
    # A restart does not reset the count: it is the journal's start rows.
    assert started[0].stop() == 0
    started.append(start_supervised_worker(data_root, fake_api, args=CAP_ARGS))
    coord = KoreanExpressionCoordinator(cfg, data_root)
    try:
        cand = present_styled(coord, "sched-after-restart")
        assert cand.outcome is Outcome.SPEND_CAP_REACHED
        assert len(fake_api.requests) == CAP
        report = wait_status(data_root, lambda r: r.verdict is not HealthVerdict.STARTING, 10.0)
        assert report.verdict is HealthVerdict.SPEND_CAPPED
    finally:
        coord.close()

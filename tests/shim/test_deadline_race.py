"""The wait ends at its deadline even when the coordinator's executor is busy
(coordinator rule 4): with thousands of waiters on one loop, the read of an
answer that arrived can sit in the executor's queue past the deadline. The wait
then ends ``timeout`` at its deadline, and the queued read, when it runs,
concludes nothing a second time: it only collects the answer it finds.

The monotonic clock is the test's (it moves only when told), and the executor is
held by the test until the presentation has returned, so nothing here depends on
the machine's speed: without the race the presentation could not return before
the executor is released, and the test says so.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from kit.bodies import STYLED_BODY, apresent_styled

from gateway_shim import CandidateStatus, Outcome, PresentationCandidate
from gateway_shim._guest import MAX_WORKERS
from gateway_shim._presentation import Pending, Wait
from gateway_shim._specs import weekly_spec
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import MAX_WAIT
from shim.test_coordinator import ScriptedWorker, accepted, status
from shim.test_deadline_and_liveness import Clocks, make

LEFT_S = 0.3  # what the test leaves of the wait once the answer is published


class Sink:
    def __init__(self) -> None:
        self.events: list[dict[str, object]] = []

    def __call__(self, event: dict[str, object]) -> None:
        self.events.append(event)


@pytest.mark.parametrize(
    "answer",
    [status("canonical", "no_time_to_answer"), accepted()],
    ids=["canonical", "accepted"],
)
def test_a_read_queued_past_the_deadline_does_not_hold_the_wait(root: DataRoot, answer) -> None:
    clocks = Clocks()
    sink = Sink()
    coord = make(root, clocks, telemetry=sink)
    release = threading.Event()
    returned_first: list[bool] = []

    def busy_executor_then(req: dict[str, object]) -> dict[str, object]:
        # Every executor thread held: the read the watcher's wake asks for queues.
        for _ in range(MAX_WORKERS):
            coord._executor.submit(lambda: release.wait(30))
        clocks.advance(MAX_WAIT.total_seconds() - LEFT_S)
        return answer(req)

    async def host() -> PresentationCandidate:
        cand = await apresent_styled(coord, "e")
        returned_first.append(not release.is_set())
        return cand

    def release_later() -> None:
        # Only a safety net: the presentation must return long before this.
        if not release.wait(15):
            release.set()

    threading.Thread(target=release_later, daemon=True).start()
    with ScriptedWorker(root, busy_executor_then) as w:
        cand = asyncio.run(host())
        release.set()
    coord.close()  # joins the executor: the queued read has run

    assert returned_first == [True], "the wait waited for the busy executor"
    assert cand.outcome is Outcome.TIMEOUT and cand.status is CandidateStatus.CANONICAL
    assert cand.body == STYLED_BODY
    [req] = w.requests
    # One conclusion, one telemetry event: the queued read never ran.
    assert [e["outcome"] for e in sink.events] == ["timeout"]
    # The answer is left as any answer after the deadline is (the worker removes
    # it after RESPONSE_TTL, or with its attempt's terminal row).
    assert (root.responses / f"{req['request_id']}.json").exists()


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        (status("canonical", "no_time_to_answer"), False),
        (accepted(), True),
        # Not a response at all: removed like any answer that is not accepted.
        (lambda _req: b'{"spool_version": ', False),
    ],
    ids=["canonical", "accepted", "malformed"],
)
def test_a_read_that_runs_after_the_wait_ended_only_collects(
    root: DataRoot, answer, kept: bool
) -> None:
    """The read had started when the deadline passed and the wait took the
    conclusion: the read concludes nothing (no candidate, no telemetry, no
    report) and collects the answer as `_conclude` would a late one."""
    clocks = Clocks()
    sink = Sink()
    coord = make(root, clocks, telemetry=sink)
    with ScriptedWorker(root, answer) as w:
        spec = lambda: weekly_spec(  # noqa: E731
            STYLED_BODY,
            explicit_fields=(),
            schedule_key="e",
            kind="weekly_report",
            kst_day="2025-11-30",
        )
        step = coord._setup.begin(spec, lambda: None, coord._presenter.called())
        assert isinstance(step, Pending)
        for _ in range(1000):
            if step.response_path.exists():
                break
            threading.Event().wait(0.01)
    assert step.take_conclusion()  # the wait's deadline passed first
    assert coord._presenter.read_and_conclude(step) is Wait.EXPIRED
    assert step.response_path.exists() is kept
    assert sink.events == [] and list(root.reports.iterdir()) == []
    assert len(w.requests) == 1
    coord.close()

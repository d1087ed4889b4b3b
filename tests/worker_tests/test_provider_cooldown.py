"""The provider cool-down, the worker's side: after `FAILURES_IN_A_ROW` failed
calls no row and no call for `COOL_DOWN_S`, then the next presentation is the
probe (`kexpr.worker.cooldown`).

In process, with a controllable clock (nothing depends on this machine), on the
one capsule the fit table styles: the weekly report whose goal range is missing.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable

import httpx
import pytest
from worker_tests.worker_kit import (
    Clock,
    Provider,
    completion,
    composition_for,
    make_worker,
    outcomes,
    response,
    rid,
)

from kexpr.spool.contract import Capsule, slot_policy
from kexpr.spool.fsio import publish
from kexpr.spool.journal import format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.messages import SPOOL_VERSION, ResponseStatus, SpoolRequest
from kexpr.spool.outcomes import Outcome
from kexpr.worker.cooldown import COOL_DOWN_S, FAILURES_IN_A_ROW
from kexpr.worker.daemon import Worker

WEEKLY = "weekly.v1"
STYLED = "[[P:01]]. 다만 [[A:01]]."


def weekly_capsule(akey: str) -> Capsule:
    return Capsule(
        schema_version="korean-expression-v4",
        surface=WEEKLY,
        artifact_key=akey,
        slots=(
            slot_policy(
                "weekly.interpretation",
                ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
            ),
        ),
    )


def accept(capsule: dict[str, object]) -> httpx.Response:
    return httpx.Response(200, json=completion(composition_for(capsule, STYLED)))


def failing(provider: Provider, status_code: int = 500) -> None:
    provider.reply = lambda capsule: httpx.Response(status_code, json={"error": {"message": "x"}})


class Requests:
    """Fresh weekly artifacts, numbered, one presentation a second."""

    def __init__(self, w: Worker, root: DataRoot, clock: Clock) -> None:
        self.w, self.root, self.clock, self.n = w, root, clock, 0

    def weekly(self) -> str:
        self.n += 1
        request_id = rid(self.n)
        req = SpoolRequest(
            spool_version=SPOOL_VERSION,
            request_id=request_id,
            submitted_at_utc=format_ts(self.clock.now),
            deadline_at_utc=format_ts(self.clock.now + dt.timedelta(seconds=4)),
            mode=SpoolMode.SHADOW,
            capsule=weekly_capsule(f"{self.n:032x}"),
        )
        publish(self.root.tmp, self.root.claimed / f"{request_id}.json", req.to_bytes())
        self.w.handle_claimed(f"{request_id}.json")
        self.clock.advance(1.0)  # the next presentation a second later
        return request_id


def cooldown_status(root: DataRoot) -> dict[str, object]:
    cooldown = json.loads(root.status_file.read_bytes())["admission"]["cooldown"]
    assert isinstance(cooldown, dict)
    return cooldown


@pytest.fixture
def worker_and_requests(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> tuple[Worker, Requests, Clock]:
    clock = Clock()
    provider.reply = accept
    w = make_worker(root, provider, clock, env)
    return w, Requests(w, root, clock), clock


def test_the_styled_weekly_is_called_and_accepted(
    root: DataRoot, provider: Provider, worker_and_requests: tuple[Worker, Requests, Clock]
) -> None:
    _, ask, _ = worker_and_requests
    assert response(root, ask.weekly()).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 1


def test_a_failing_provider_cools_down_then_one_probe(
    root: DataRoot, provider: Provider, worker_and_requests: tuple[Worker, Requests, Clock]
) -> None:
    """Regression: the old worker called a failing provider for every request,
    each a wait in front of the customer."""
    w, ask, clock = worker_and_requests
    failing(provider)
    for _ in range(FAILURES_IN_A_ROW):
        assert response(root, ask.weekly()).outcome is Outcome.PROVIDER_ERROR
    assert len(provider.calls) == FAILURES_IN_A_ROW
    rows = outcomes(root)
    # The cool-down: canonical at once, no row, no call, counted per surface.
    for _ in range(3):
        r = response(root, ask.weekly())
        assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.PROVIDER_COOLING_DOWN)
    assert len(provider.calls) == FAILURES_IN_A_ROW and outcomes(root) == rows
    assert w.counters.provider_cooling_down == 3
    assert w.counters.refused_by_surface[WEEKLY] == {"provider_cooling_down": 3}
    w.status.write()
    assert cooldown_status(root)["state"] == "open"
    # After the cool-down one probe; it fails: the cool-down starts again.
    clock.advance(COOL_DOWN_S)
    assert response(root, ask.weekly()).outcome is Outcome.PROVIDER_ERROR
    assert len(provider.calls) == FAILURES_IN_A_ROW + 1
    assert response(root, ask.weekly()).outcome is Outcome.PROVIDER_COOLING_DOWN
    assert len(provider.calls) == FAILURES_IN_A_ROW + 1
    # The next probe succeeds: calls go through again.
    clock.advance(COOL_DOWN_S)
    provider.reply = accept
    assert response(root, ask.weekly()).status is ResponseStatus.ACCEPTED
    assert response(root, ask.weekly()).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == FAILURES_IN_A_ROW + 3
    w.status.write()
    cooldown = cooldown_status(root)
    assert (cooldown["state"], cooldown["probes"], cooldown["cool_downs"]) == ("closed", 2, 2)


def test_while_the_probe_is_out_other_requests_are_refused(
    root: DataRoot, provider: Provider, worker_and_requests: tuple[Worker, Requests, Clock]
) -> None:
    _, ask, clock = worker_and_requests
    failing(provider)
    for _ in range(FAILURES_IN_A_ROW):
        ask.weekly()
    clock.advance(COOL_DOWN_S)
    during: list[str] = []

    def probe_reply(capsule: dict[str, object]) -> httpx.Response:
        if not during:  # another presentation arrives while the probe's call runs
            during.append(ask.weekly())
        return accept(capsule)

    provider.reply = probe_reply
    probe = ask.weekly()
    assert response(root, probe).status is ResponseStatus.ACCEPTED
    assert response(root, during[0]).outcome is Outcome.PROVIDER_COOLING_DOWN
    assert len(provider.calls) == FAILURES_IN_A_ROW + 1


@pytest.mark.parametrize("answer", ["timeout", "invalid"])
def test_what_counts_as_failing(
    provider: Provider, worker_and_requests: tuple[Worker, Requests, Clock], answer: str
) -> None:
    """Timeouts count; an answer the contract rejects is the provider answering."""
    w, ask, _ = worker_and_requests

    def timeout(capsule: dict[str, object]) -> httpx.Response:
        raise httpx.ReadTimeout("injected")

    def invalid(capsule: dict[str, object]) -> httpx.Response:
        return httpx.Response(200, json=completion("not json"))

    replies: dict[str, Callable[[dict[str, object]], httpx.Response]] = {
        "timeout": timeout,
        "invalid": invalid,
    }
    provider.reply = replies[answer]
    for _ in range(FAILURES_IN_A_ROW + 1):
        ask.weekly()
    cooled = answer == "timeout"
    assert len(provider.calls) == FAILURES_IN_A_ROW + (0 if cooled else 1)
    assert w.counters.provider_cooling_down == (1 if cooled else 0)


@pytest.mark.parametrize("outage_s", [40.0, 95.0, 200.0])
def test_after_an_outage_the_first_answer_is_within_one_cool_down_of_recovery(
    root: DataRoot,
    provider: Provider,
    worker_and_requests: tuple[Worker, Requests, Clock],
    outage_s: float,
) -> None:
    """Regression: with the learned admission, after a 40 s outage the first answer
    came a median 14 s and up to 179 s after the provider was back (the probe was
    spent on a shape the model refused). Now the probe is the next presentation
    after the pause, whatever its shape: one a second, each timed-out call taking
    the SDK's 3 s on the worker's clock."""
    _, ask, clock = worker_and_requests
    recovered_at = clock.mono + outage_s
    answered_at: list[float] = []

    def reply(capsule: dict[str, object]) -> httpx.Response:
        if clock.mono < recovered_at:
            clock.advance(3.0)
            raise httpx.ReadTimeout("injected")
        answered_at.append(clock.mono)
        return accept(capsule)

    provider.reply = reply
    first_accepted: float | None = None
    while first_accepted is None and clock.mono < recovered_at + 3 * COOL_DOWN_S:
        at = clock.mono
        if response(root, ask.weekly()).status is ResponseStatus.ACCEPTED:
            first_accepted = at
    assert first_accepted is not None and answered_at
    assert first_accepted - recovered_at <= COOL_DOWN_S
    # The outage was long enough to open the cool-down, and every call made in it
    # was a failure (no call spent once the provider is back, but the probe).
    assert len(provider.calls) - len(answered_at) >= FAILURES_IN_A_ROW

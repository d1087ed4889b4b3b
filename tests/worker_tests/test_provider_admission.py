"""Issues 28 and 27 item 5, the worker's side: admission at the provider's measured
speed and the provider cool-down, both before the start row (no row, no call).

In process, with a controllable clock: each call of the scripted provider advances
the worker's clocks by the time a model at the given speed would take to write the
tokens it reports in ``usage.completion_tokens``; nothing depends on this machine.
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
    submit,
)

from kexpr.spool.contract import MANIFEST, Capsule, slot_policy
from kexpr.spool.contract.budget import answer_token_bound
from kexpr.spool.fsio import publish
from kexpr.spool.journal import format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.messages import SPOOL_VERSION, ResponseStatus, SpoolRequest
from kexpr.spool.outcomes import Outcome
from kexpr.worker.cooldown import COOL_DOWN_S, FAILURES_IN_A_ROW
from kexpr.worker.daemon import Worker
from kexpr.worker.speed import MAX_AGE_S, MIN_SAMPLES, WINDOW

DUAL = "adaptive.dualcoachtest.card.v1"
DAILY = "daily.v1"


def dual_capsule(akey: str, reasons: int = 4) -> Capsule:
    """The capsule of a dual card with ``reasons`` review lines, as the shim sends
    it: the judgment and the first review line are locked (the fit table lets no
    word stand before them), so it asks for lines 2..``reasons`` only."""
    reason = MANIFEST["adaptive.dual.review.N"].branches[0]
    return Capsule(
        schema_version="korean-expression-v4",
        surface=DUAL,
        artifact_key=akey,
        slots=tuple(
            slot_policy(f"adaptive.dual.review.{i}", reason) for i in range(2, reasons + 1)
        ),
    )


def submit_capsule(root: DataRoot, clock: Clock, capsule: Capsule, request_id: str) -> str:
    req = SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=request_id,
        submitted_at_utc=format_ts(clock.now),
        deadline_at_utc=format_ts(clock.now + dt.timedelta(seconds=4)),
        mode=SpoolMode.SHADOW,
        capsule=capsule,
    )
    publish(root.tmp, root.claimed / f"{request_id}.json", req.to_bytes())
    return request_id


def paced(provider: Provider, clock: Clock, first_s: float, rate: float, tokens: int) -> None:
    """Every call takes ``first_s + tokens / rate`` on the worker's clocks and
    reports ``tokens`` completion tokens."""

    def reply(capsule: dict[str, object]) -> httpx.Response:
        body = completion(composition_for(capsule, "그리고 [[P:01]]."))
        body["usage"] = {
            "prompt_tokens": 900,
            "completion_tokens": tokens,
            "total_tokens": 900 + tokens,
        }
        clock.advance(first_s + tokens / rate)
        return httpx.Response(200, json=body)

    provider.reply = reply


class Requests:
    """Fresh artifacts, numbered: daily cards and 4-reason dual cards."""

    def __init__(self, w: Worker, root: DataRoot, clock: Clock) -> None:
        self.w, self.root, self.clock, self.n = w, root, clock, 0

    def daily(self) -> str:
        self.n += 1
        request_id = submit(self.root, self.clock, f"{self.n:032x}", rid=rid(self.n))
        self.w.handle_claimed(f"{request_id}.json")
        self.clock.advance(1.0)  # the next presentation a second later
        return request_id

    def dual(self) -> str:
        self.n += 1
        capsule = dual_capsule(f"{self.n:032x}")
        request_id = submit_capsule(self.root, self.clock, capsule, rid(self.n))
        self.w.handle_claimed(f"{request_id}.json")
        self.clock.advance(1.0)
        return request_id


def status(root: DataRoot) -> dict[str, object]:
    admission = json.loads(root.status_file.read_bytes())["admission"]
    assert isinstance(admission, dict)
    return admission


def test_the_dual_card_is_two_hundred_tokens_and_more() -> None:
    # A 4-reason card asks for three review lines: about what the 2-reason card
    # cost when its judgment and first line were still asked.
    bound = answer_token_bound(dual_capsule("a" * 32))
    assert bound is not None and 195 <= bound <= 205  # docs/budget.md §2: 196-199


def test_a_shape_too_slow_for_the_measured_speed_gets_no_row_and_no_call(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Regression: the old worker called a dual card of ~200 tokens (then the
    2-reason card; under the fit table the 4-reason one) at 77 tokens/s after 0.7 s
    (3.3 s): a billed timeout every time."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    paced(provider, clock, 0.7, 77.0, 104)
    ask = Requests(w, root, clock)
    for _ in range(MIN_SAMPLES):
        assert response(root, ask.daily()).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == MIN_SAMPLES
    rows = outcomes(root)
    refused = ask.dual()
    r = response(root, refused)
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.PROVIDER_TOO_SLOW)
    assert r.attempt_id is None
    assert len(provider.calls) == MIN_SAMPLES  # no call
    assert outcomes(root) == rows  # no start row
    assert w.counters.provider_too_slow == 1
    assert w.counters.refused_by_surface[DUAL]["provider_too_slow"] == 1
    assert w.counters.refused_by_surface[DAILY]["provider_too_slow"] == 0
    # The daily card still fits and is called.
    ask.daily()
    assert len(provider.calls) == MIN_SAMPLES + 1
    w.status.write()
    written = status(root)
    speed = written["speed"]
    assert isinstance(speed, dict) and speed["state"] == "learned"
    assert speed["samples"] == MIN_SAMPLES + 1 and speed["first_token_s"] >= 0.3
    assert written["refused_by_surface"] == {
        s: {"provider_cooling_down": 0, "provider_too_slow": 1 if s == DUAL else 0}
        for s in sorted(w.counters.refused_by_surface)
    }


def test_the_cold_start_is_todays_rule(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Fewer than MIN_SAMPLES calls: admitted at the fastest published rate, even
    after slow calls (today's rule; the model does not guess from one or two)."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    paced(provider, clock, 0.7, 40.0, 104)
    ask = Requests(w, root, clock)
    for _ in range(MIN_SAMPLES - 1):
        ask.daily()
    ask.dual()
    assert len(provider.calls) == MIN_SAMPLES
    assert w.counters.provider_too_slow == 0


def test_a_refused_shape_is_readmitted_when_the_cheap_calls_say_it_fits(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Rule 4 of kexpr.worker.speed: the refusals do not freeze the estimate; the
    daily cards' calls keep it fresh, and once the provider is fast again the
    dual card is called (within WINDOW calls)."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    ask = Requests(w, root, clock)
    paced(provider, clock, 0.7, 77.0, 104)
    for _ in range(WINDOW):
        ask.daily()
    ask.dual()
    assert w.counters.provider_too_slow == 1
    paced(provider, clock, 0.3, 110.0, 104)
    refusals = 0
    while True:
        before = len(provider.calls)
        ask.dual()
        if len(provider.calls) == before + 1:
            break
        refusals += 1
        assert refusals <= WINDOW, "the dual card was never admitted again"
        ask.daily()
    assert refusals >= 1  # not at once: the window still held the slow calls
    assert w.counters.provider_too_slow == 1 + refusals


def test_without_calls_the_estimate_decays_to_the_cold_start(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    ask = Requests(w, root, clock)
    paced(provider, clock, 0.7, 77.0, 104)
    for _ in range(MIN_SAMPLES):
        ask.daily()
    ask.dual()
    assert w.counters.provider_too_slow == 1
    clock.advance(MAX_AGE_S)
    calls = len(provider.calls)
    ask.dual()  # the estimate's evidence is gone: called once, as at the start
    assert len(provider.calls) == calls + 1


# -------------------------------------------------------------- the cool-down


def failing(provider: Provider, status_code: int = 500) -> None:
    provider.reply = lambda capsule: httpx.Response(status_code, json={"error": {"message": "x"}})


def test_a_failing_provider_cools_down_then_one_probe(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Regression: the old worker called a failing provider for
    every request, each a wait in front of the customer."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    ask = Requests(w, root, clock)
    failing(provider)
    for _ in range(FAILURES_IN_A_ROW):
        assert response(root, ask.daily()).outcome is Outcome.PROVIDER_ERROR
    assert len(provider.calls) == FAILURES_IN_A_ROW
    rows = outcomes(root)
    # The cool-down: canonical at once, no row, no call, counted per surface.
    for _ in range(3):
        r = response(root, ask.daily())
        assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.PROVIDER_COOLING_DOWN)
    r = response(root, ask.dual())
    assert r.outcome is Outcome.PROVIDER_COOLING_DOWN
    assert len(provider.calls) == FAILURES_IN_A_ROW and outcomes(root) == rows
    assert w.counters.provider_cooling_down == 4
    assert w.counters.refused_by_surface[DAILY]["provider_cooling_down"] == 3
    assert w.counters.refused_by_surface[DUAL]["provider_cooling_down"] == 1
    w.status.write()
    cooldown = status(root)["cooldown"]
    assert isinstance(cooldown, dict) and cooldown["state"] == "open"
    # After the cool-down one probe; it fails: the cool-down starts again.
    clock.advance(COOL_DOWN_S)
    assert response(root, ask.daily()).outcome is Outcome.PROVIDER_ERROR
    assert len(provider.calls) == FAILURES_IN_A_ROW + 1
    assert response(root, ask.daily()).outcome is Outcome.PROVIDER_COOLING_DOWN
    assert len(provider.calls) == FAILURES_IN_A_ROW + 1
    # The next probe succeeds: calls go through again.
    clock.advance(COOL_DOWN_S)
    provider.reply = Provider().reply
    assert response(root, ask.daily()).status is ResponseStatus.ACCEPTED
    assert response(root, ask.daily()).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == FAILURES_IN_A_ROW + 3
    w.status.write()
    cooldown = status(root)["cooldown"]
    assert isinstance(cooldown, dict)
    assert (cooldown["state"], cooldown["probes"], cooldown["cool_downs"]) == ("closed", 2, 2)


def test_while_the_probe_is_out_other_requests_are_refused(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    ask = Requests(w, root, clock)
    failing(provider)
    for _ in range(FAILURES_IN_A_ROW):
        ask.daily()
    clock.advance(COOL_DOWN_S)
    during: list[str] = []
    accept = Provider().reply

    def probe_reply(capsule: dict[str, object]) -> httpx.Response:
        if not during:  # another presentation arrives while the probe's call runs
            during.append(ask.daily())
        return accept(capsule)

    provider.reply = probe_reply
    probe = ask.daily()
    assert response(root, probe).status is ResponseStatus.ACCEPTED
    assert response(root, during[0]).outcome is Outcome.PROVIDER_COOLING_DOWN
    assert len(provider.calls) == FAILURES_IN_A_ROW + 1


@pytest.mark.parametrize("answer", ["timeout", "invalid"])
def test_what_counts_as_failing(
    root: DataRoot, provider: Provider, env: dict[str, str], answer: str
) -> None:
    """Timeouts count; an answer the contract rejects is the provider answering."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    ask = Requests(w, root, clock)

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
        ask.daily()
    cooled = answer == "timeout"
    assert len(provider.calls) == FAILURES_IN_A_ROW + (0 if cooled else 1)
    assert w.counters.provider_cooling_down == (1 if cooled else 0)

"""Issues 28 and 27 item 5, the worker's side: admission at the provider's measured
speed and the provider cool-down, both before the start row (no row, no call).

In process, with a controllable clock: each call of the scripted provider advances
the worker's clocks by the time a model at the given speed would take to write the
tokens it reports in ``usage.completion_tokens``; nothing depends on this machine.

The fit table leaves one message to style (design §6.1), so one shape reaches the
worker: the styled weekly capsule. A request is too slow for what the provider's
calls measured when it has less time left than they took: a *late* request, one
that waited in the spool before the worker read it (its deadline is its shim's,
four seconds after it was written), against a *fresh* one with its whole time.
The dual card of four reasons, about 200 tokens, that the worker used to refuse at
the published speed, is no capsule any more (its review lines are locked).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT
from worker_tests.worker_kit import (
    STYLED_GENERATED,
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

from kexpr.spool.contract import MANIFEST, Capsule, CapsuleError, CapsuleReason, slot_policy
from kexpr.spool.contract.budget import answer_token_bound
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import Outcome
from kexpr.worker.cooldown import COOL_DOWN_S, FAILURES_IN_A_ROW
from kexpr.worker.daemon import Worker
from kexpr.worker.speed import MAX_AGE_S, MIN_SAMPLES, WINDOW

WEEKLY = STYLED_SURFACE


# The styled capsule's answer bound: every call reports that many tokens.
def _styled_bound() -> int:
    bound = answer_token_bound(
        Capsule(
            schema_version="korean-expression-v4",
            surface=WEEKLY,
            artifact_key="a" * 32,
            slots=(STYLED_SLOT,),
        )
    )
    assert bound is not None
    return bound


BOUND = _styled_bound()
# A late request waited this long in the spool: 4 - 2 - 0.1 (the publish margin)
# = 1.9 s left, less than a call after 0.7 s at 77 tokens/s (0.7 + BOUND / 77 = 2.4 s),
# more than one at the fastest published rate (0.3 + BOUND / 110 = 1.5 s).
LATE_S = 2.0


def paced(provider: Provider, clock: Clock, first_s: float, rate: float, tokens: int) -> None:
    """Every call takes ``first_s + tokens / rate`` on the worker's clocks and
    reports ``tokens`` completion tokens."""

    def reply(capsule: dict[str, object]) -> httpx.Response:
        body = completion(composition_for(capsule, STYLED_GENERATED))
        body["usage"] = {
            "prompt_tokens": 900,
            "completion_tokens": tokens,
            "total_tokens": 900 + tokens,
        }
        clock.advance(first_s + tokens / rate)
        return httpx.Response(200, json=body)

    provider.reply = reply


class Requests:
    """Fresh artifacts, numbered: fresh requests (their whole time left) and late
    ones (`LATE_S` in the spool before the worker reads them)."""

    def __init__(self, w: Worker, root: DataRoot, clock: Clock) -> None:
        self.w, self.root, self.clock, self.n = w, root, clock, 0

    def fresh(self, age_s: float = 0.0) -> str:
        self.n += 1
        request_id = submit(self.root, self.clock, f"{self.n:032x}", rid=rid(self.n), age_s=age_s)
        self.w.handle_claimed(f"{request_id}.json")
        self.clock.advance(1.0)  # the next presentation a second later
        return request_id

    def late(self) -> str:
        return self.fresh(age_s=LATE_S)


def status(root: DataRoot) -> dict[str, object]:
    admission = json.loads(root.status_file.read_bytes())["admission"]
    assert isinstance(admission, dict)
    return admission


def test_the_one_shape_is_the_styled_weekly() -> None:
    # The styled weekly capsule's answer: about 130 tokens (docs/budget.md). The
    # 4-reason dual card (about 200) is refused at construction: its review lines
    # are locked, so it never reaches the worker.
    assert 120 <= BOUND <= 140, BOUND
    reason = MANIFEST["adaptive.dual.review.N"].branches[0]
    with pytest.raises(CapsuleError) as refused:
        Capsule(
            schema_version="korean-expression-v4",
            surface="adaptive.dualcoachtest.card.v1",
            artifact_key="a" * 32,
            slots=tuple(slot_policy(f"adaptive.dual.review.{i}", reason) for i in range(2, 5)),
        )
    assert refused.value.reason is CapsuleReason.SLOT_UNSTYLEABLE


def test_a_shape_too_slow_for_the_measured_speed_gets_no_row_and_no_call(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Regression: the old worker called a request whose answer could not arrive
    in the time it had (a dual card of ~200 tokens at 77 tokens/s after 0.7 s,
    3.3 s): a billed timeout every time. Here: the styled weekly, late, with
    1.9 s left where its calls take 2.4 s."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    paced(provider, clock, 0.7, 77.0, BOUND)
    ask = Requests(w, root, clock)
    for _ in range(MIN_SAMPLES):
        assert response(root, ask.fresh()).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == MIN_SAMPLES
    rows = outcomes(root)
    refused = ask.late()
    r = response(root, refused)
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.PROVIDER_TOO_SLOW)
    assert r.attempt_id is None
    assert len(provider.calls) == MIN_SAMPLES  # no call
    assert outcomes(root) == rows  # no start row
    assert w.counters.provider_too_slow == 1
    assert w.counters.refused_by_surface[WEEKLY]["provider_too_slow"] == 1
    # A fresh request still fits and is called.
    ask.fresh()
    assert len(provider.calls) == MIN_SAMPLES + 1
    w.status.write()
    written = status(root)
    speed = written["speed"]
    assert isinstance(speed, dict) and speed["state"] == "learned"
    assert speed["samples"] == MIN_SAMPLES + 1 and speed["first_token_s"] >= 0.3
    assert written["refused_by_surface"] == {
        s: {"provider_cooling_down": 0, "provider_too_slow": 1 if s == WEEKLY else 0}
        for s in sorted(w.counters.refused_by_surface)
    }


def test_the_cold_start_is_todays_rule(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Fewer than MIN_SAMPLES calls: admitted at the fastest published rate, even
    after slow calls (today's rule; the model does not guess from one or two)."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    paced(provider, clock, 0.7, 60.0, BOUND)  # 2.9 s: every call arrives
    ask = Requests(w, root, clock)
    for _ in range(MIN_SAMPLES - 1):
        assert response(root, ask.fresh()).status is ResponseStatus.ACCEPTED
    ask.late()
    assert len(provider.calls) == MIN_SAMPLES
    assert w.counters.provider_too_slow == 0


def test_a_refused_shape_is_readmitted_when_the_cheap_calls_say_it_fits(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Rule 4 of kexpr.worker.speed: the refusals do not freeze the estimate; the
    fresh requests' calls keep it fresh, and once the provider is fast again a
    late request is called (within WINDOW calls)."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    ask = Requests(w, root, clock)
    paced(provider, clock, 0.7, 77.0, BOUND)
    for _ in range(WINDOW):
        ask.fresh()
    ask.late()
    assert w.counters.provider_too_slow == 1
    paced(provider, clock, 0.3, 110.0, BOUND)
    refusals = 0
    while True:
        before = len(provider.calls)
        ask.late()
        if len(provider.calls) == before + 1:
            break
        refusals += 1
        assert refusals <= WINDOW, "a late request was never admitted again"
        ask.fresh()
    assert refusals >= 1  # not at once: the window still held the slow calls
    assert w.counters.provider_too_slow == 1 + refusals


def test_without_calls_the_estimate_decays_to_the_cold_start(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    ask = Requests(w, root, clock)
    paced(provider, clock, 0.7, 77.0, BOUND)
    for _ in range(MIN_SAMPLES):
        ask.fresh()
    ask.late()
    assert w.counters.provider_too_slow == 1
    clock.advance(MAX_AGE_S)
    calls = len(provider.calls)
    ask.late()  # the estimate's evidence is gone: called once, as at the start
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
        assert response(root, ask.fresh()).outcome is Outcome.PROVIDER_ERROR
    assert len(provider.calls) == FAILURES_IN_A_ROW
    rows = outcomes(root)
    # The cool-down: canonical at once, no row, no call, counted per surface.
    for _ in range(3):
        r = response(root, ask.fresh())
        assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.PROVIDER_COOLING_DOWN)
    r = response(root, ask.late())
    assert r.outcome is Outcome.PROVIDER_COOLING_DOWN
    assert len(provider.calls) == FAILURES_IN_A_ROW and outcomes(root) == rows
    assert w.counters.provider_cooling_down == 4
    assert w.counters.refused_by_surface[WEEKLY]["provider_cooling_down"] == 4
    assert w.counters.refused_by_surface[WEEKLY]["provider_too_slow"] == 0
    w.status.write()
    cooldown = status(root)["cooldown"]
    assert isinstance(cooldown, dict) and cooldown["state"] == "open"
    # After the cool-down one probe; it fails: the cool-down starts again.
    clock.advance(COOL_DOWN_S)
    assert response(root, ask.fresh()).outcome is Outcome.PROVIDER_ERROR
    assert len(provider.calls) == FAILURES_IN_A_ROW + 1
    assert response(root, ask.fresh()).outcome is Outcome.PROVIDER_COOLING_DOWN
    assert len(provider.calls) == FAILURES_IN_A_ROW + 1
    # The next probe succeeds: calls go through again.
    clock.advance(COOL_DOWN_S)
    provider.reply = Provider().reply
    assert response(root, ask.fresh()).status is ResponseStatus.ACCEPTED
    assert response(root, ask.fresh()).status is ResponseStatus.ACCEPTED
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
        ask.fresh()
    clock.advance(COOL_DOWN_S)
    during: list[str] = []
    accept = Provider().reply

    def probe_reply(capsule: dict[str, object]) -> httpx.Response:
        if not during:  # another presentation arrives while the probe's call runs
            during.append(ask.fresh())
        return accept(capsule)

    provider.reply = probe_reply
    probe = ask.fresh()
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
        ask.fresh()
    cooled = answer == "timeout"
    assert len(provider.calls) == FAILURES_IN_A_ROW + (0 if cooled else 1)
    assert w.counters.provider_cooling_down == (1 if cooled else 0)

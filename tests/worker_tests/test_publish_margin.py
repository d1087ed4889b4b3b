"""Never publish an accepted answer the shim
can no longer take.

Observed in a burst (1,000 artifacts, 20 gateway processes): 1-2 accepted answers
per run were published after the shim had stopped waiting — paid for, never used,
left to expire. Publishing, the shim's wake-up and its read take time
(`PUBLISH_MARGIN_S`, measured by bench/publish_margin.py): an answer concluded
later than ``deadline - PUBLISH_MARGIN_S`` is discarded as late (the journal's
``timeout``), counted (``late_for_publish``), and never called for again.

Injected clocks only: the provider's reply moves the worker's clocks.
"""

from __future__ import annotations

import json

import pytest
from worker_tests.worker_kit import Clock, Provider, make_worker, outcomes, rid, submit

from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import ResponseStatus, parse_response
from kexpr.worker.attempt import PUBLISH_MARGIN_S

DEADLINE_S = 4.0  # submit()'s request: the shim's 4 s


def test_an_answer_inside_the_margin_is_discarded_as_late(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Regression: the answer comes back before the deadline but within the
    margin. The old worker published it (accepted, awaiting a report that could
    not come); now: no response, a ``timeout`` row, counted, and the artifact is
    never called for again."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    provider.on_call = lambda: clock.advance(DEADLINE_S - PUBLISH_MARGIN_S / 2)
    w.handle_claimed(f"{submit(root, clock, 'c' * 32, rid=rid(1))}.json")
    assert len(provider.calls) == 1
    assert not (root.responses / f"{rid(1)}.json").exists()
    assert outcomes(root) == ["timeout"]
    assert w.counters.late_for_publish == 1
    assert w.counters.late_results == 1
    assert w.counters.accepted == 0
    # The same artifact again: already attempted, no second call.
    provider.on_call = lambda: None
    w.handle_claimed(f"{submit(root, clock, 'c' * 32, rid=rid(2))}.json")
    again = parse_response((root.responses / f"{rid(2)}.json").read_bytes())
    assert again.status is ResponseStatus.ALREADY_ATTEMPTED
    assert len(provider.calls) == 1


def test_an_answer_before_the_margin_is_delivered(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """The other side of the line: just before deadline - margin it is in time."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    provider.on_call = lambda: clock.advance(DEADLINE_S - PUBLISH_MARGIN_S * 2)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    r = parse_response((root.responses / f"{rid(1)}.json").read_bytes())
    assert r.status is ResponseStatus.ACCEPTED
    assert w.counters.late_for_publish == 0


def test_the_call_is_given_only_the_time_that_can_still_be_delivered(
    root: DataRoot, provider: Provider, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call's own bound ends at deadline - margin: waiting longer could only
    produce an answer that is discarded."""
    from kexpr.worker import attempt

    seen: list[float] = []
    real = attempt.call_with_deadline

    def spy(client: object, capsule_json: str, *, seconds: float, **kw: object) -> object:
        seen.append(seconds)
        return real(client, capsule_json, seconds=seconds, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(attempt, "call_with_deadline", spy)
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert seen == [pytest.approx(DEADLINE_S - PUBLISH_MARGIN_S, abs=1e-9)]
    assert json.loads((root.responses / f"{rid(1)}.json").read_bytes())["status"] == "accepted"

"""The call's margin histograms and the last minute's counts: fixed edges tied to
the plan's numbers, counts only."""

from __future__ import annotations

import math

import pytest
from worker_tests.worker_kit import completion

from kexpr.spool.contract import SURFACES
from kexpr.spool.outcomes import Outcome
from kexpr.worker import provider
from kexpr.worker.histograms import (
    CALL_BUDGET_S,
    CALL_SECONDS_EDGES,
    COMPLETION_TOKENS_EDGES,
    DEADLINE_S,
    MAX_TOKENS,
    TIME_BUDGET_TOKENS,
    Margin,
    SurfaceCalls,
    bucket,
    margin,
    new_surfaces,
    upper_edge,
)
from kexpr.worker.status import ROLLING_WINDOW_S, Counters, RollingCount


def test_the_edges_are_the_plans_numbers() -> None:
    # The budget is the client's timeout and the token cap the request's (design §9);
    # histograms.py does not import the provider (openai), so they are pinned here.
    assert CALL_BUDGET_S == provider.SDK_TIMEOUT_S == 3.0
    assert MAX_TOKENS == provider.request_kwargs("{}")["max_tokens"] == 384
    assert TIME_BUDGET_TOKENS == round((3.0 - 0.3) * 110) == 297
    # Quarter seconds up to the budget, then the 4 s deadline.
    assert CALL_SECONDS_EDGES[:12] == tuple(0.25 * i for i in range(1, 13))
    assert CALL_SECONDS_EDGES[-1] == DEADLINE_S and CALL_BUDGET_S in CALL_SECONDS_EDGES
    assert COMPLETION_TOKENS_EDGES[-1] == MAX_TOKENS
    assert TIME_BUDGET_TOKENS in COMPLETION_TOKENS_EDGES
    for edges in (CALL_SECONDS_EDGES, COMPLETION_TOKENS_EDGES):
        assert list(edges) == sorted(set(edges))


@pytest.mark.parametrize(
    ("value", "index"),
    [(0.0, 0), (0.25, 0), (0.2501, 1), (2.99, 11), (3.0, 11), (3.01, 12), (4.0, 13), (4.01, 14)],
)
def test_buckets_are_upper_inclusive_with_one_beyond_the_last_edge(
    value: float, index: int
) -> None:
    assert bucket(CALL_SECONDS_EDGES, value) == index
    assert bucket(CALL_SECONDS_EDGES, math.nan) == len(CALL_SECONDS_EDGES)


def test_p95_reads_the_upper_edge_and_judges_it_against_the_budget() -> None:
    counts = [0] * (len(CALL_SECONDS_EDGES) + 1)
    assert margin(counts) == (Margin.NO_CALLS, None)
    counts[3] = 95  # (0.75, 1.0]
    counts[12] = 5  # (3.0, 3.5]
    assert upper_edge(counts, CALL_SECONDS_EDGES, 0.95) == 1.0
    assert margin(counts) == (Margin.WITHIN_BUDGET, 1.0)
    counts[12] = 6  # now more than 5 % are over the budget
    assert margin(counts) == (Margin.OVER_BUDGET, 3.5)
    counts[-1] = 100  # beyond the deadline: no edge to name
    assert margin(counts) == (Margin.OVER_BUDGET, None)
    assert upper_edge(counts, CALL_SECONDS_EDGES, 0.95) == math.inf
    counts = [0] * (len(CALL_SECONDS_EDGES) + 1)
    counts[11] = 1  # exactly the budget is within it
    assert margin(counts) == (Margin.WITHIN_BUDGET, 3.0)


def test_a_record_keeps_counts_only() -> None:
    calls = SurfaceCalls()
    calls.record(2.6, None, 150)
    calls.record(3.2, Outcome.TIMEOUT, None)
    calls.record(0.1, Outcome.INVALID_RESPONSE, 384)
    calls.record(0.1, None, 10**9)  # an API that reports nonsense lands beyond the last edge
    doc = calls.to_json()
    assert doc["calls"] == 4 and doc["tokens_absent"] == 1
    assert doc["failures"] == {"invalid_response": 1, "timeout": 1}
    assert [i for i, c in enumerate(calls.call_seconds) for _ in range(c)] == [0, 0, 10, 12]
    assert [i for i, c in enumerate(calls.completion_tokens) for _ in range(c)] == [4, 12, 13]
    # Every number in it is a count: the values themselves are nowhere.
    flat = [doc["calls"], doc["tokens_absent"], *doc["call_seconds"], *doc["completion_tokens"]]  # type: ignore[misc]
    assert 150 not in flat and 384 not in flat and 2.6 not in flat


def test_every_public_surface_has_a_record_and_nothing_else_can() -> None:
    assert list(new_surfaces()) == list(SURFACES)
    c = Counters()
    c.record_call("not.a.surface", 1.0, None, 100)
    c.record_call("daily.v1", 1.0, None, 100)
    assert list(c.calls_by_surface) == list(SURFACES)
    assert c.calls_by_surface["daily.v1"].calls == 1
    assert sum(v.calls for v in c.calls_by_surface.values()) == 1


def test_the_last_minute_forgets_what_is_older_than_a_minute() -> None:
    r = RollingCount()
    r.add(1000.2, 3)
    r.add(1000.9)
    r.add(1030.0, 2)
    assert r.total(1030.5) == 6
    assert r.total(1059.9) == 6  # the seconds (999, 1059]: 1000 still counts
    assert r.total(1060.0) == 2
    assert r.total(1090.0) == 0
    # A slot reused a minute later starts from zero, however many it held.
    r.add(1000.0 + ROLLING_WINDOW_S, 1)
    assert r.total(1000.0 + ROLLING_WINDOW_S) == 1 + 2


def test_counters_keep_the_rolling_names_on_their_own_clock() -> None:
    now = [500.0]
    c = Counters(clock=lambda: now[0])
    for _ in range(10):
        c.bump("claimed")
        c.bump("expired_requests")
    c.bump("calls", 2)
    c.bump("accepted")  # not a rolling counter
    with c.lock:
        assert c.recent() == {
            "claimed": 10,
            "calls": 2,
            "expired_requests": 10,
            "no_time_to_answer": 0,
        }
    now[0] += ROLLING_WINDOW_S
    with c.lock:
        assert set(c.recent().values()) == {0}
    assert (c.claimed, c.expired_requests, c.calls) == (10, 10, 2)  # the totals stay


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        ({"prompt_tokens": 3, "completion_tokens": 211, "total_tokens": 214}, 211),
        ({"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}, 0),
        (None, None),  # absent
        ({"prompt_tokens": 3, "completion_tokens": -4, "total_tokens": 0}, None),
        ({"prompt_tokens": 3, "completion_tokens": "many", "total_tokens": 0}, None),
        ({"prompt_tokens": 3, "completion_tokens": 2.5, "total_tokens": 0}, None),
        ({"prompt_tokens": 3, "completion_tokens": None, "total_tokens": 0}, None),
        # openai 2.24.0's model construction coerces these to ints itself
        # (True -> 1, "211" -> 211): still a count, and only ever bucketed.
        ({"prompt_tokens": 3, "completion_tokens": True, "total_tokens": 0}, 1),
        ({"prompt_tokens": 3, "completion_tokens": "211", "total_tokens": 0}, 211),
    ],
)
@pytest.mark.parametrize("finish_reason", ["stop", "length"])
def test_the_result_carries_the_reported_completion_tokens_or_none(
    usage: dict[str, object] | None,
    tokens: int | None,
    finish_reason: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import httpx

    body = completion("{}", finish_reason)
    if usage is not None:
        body["usage"] = usage
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    client = provider.build_client(
        http_client=httpx.Client(
            transport=httpx.MockTransport(lambda request: httpx.Response(200, json=body))
        )
    )
    assert client is not None
    result = provider.call_once(client, "{}")
    # A truncated answer (finish_reason "length") is invalid_response and still
    # reports how long it was: exactly what the histogram should show.
    assert result.outcome is (None if finish_reason == "stop" else Outcome.INVALID_RESPONSE)
    assert result.completion_tokens == tokens
    assert "completion_tokens" in repr(result) and "{}" not in repr(result)


def test_a_failed_call_reports_no_tokens() -> None:
    assert provider.ProviderResult(Outcome.TIMEOUT).completion_tokens is None
    with pytest.raises(TypeError):
        provider.ProviderResult(Outcome.TIMEOUT, completion_tokens=-1)


def test_a_rolling_count_of_ten_second_slots_spans_ten_minutes() -> None:
    r = RollingCount(10)
    r.add(1000.0, 2)
    r.add(1595.0)
    assert r.total(1599.9) == 3  # the slots (99, 159]: 100 and 159 count
    assert r.total(1600.0) == 1
    assert r.total(2200.0) == 0

"""Rehearsal of the controlled shadow proof in `make test`: the very harness of
`test_live_shadow.py`, against the loopback HTTPS fake behind a real CONNECT
proxy, so the harness is known to work here before a real call is spent on it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakeapi import FakeOpenAI, compose_reply, default_style, invalid_style
from shadow_harness import CASES, COUNT, NOTHING_TO_STYLE, PROOF_CASES, run_proof

from kexpr.spool.outcomes import Outcome

pytestmark = pytest.mark.e2e

KEY = "sk-rehearsal-4c8e2a9f71"


def test_rehearsal_12_of_12_shadow_selected(
    data_root: Path, fake_api: FakeOpenAI, tmp_path: Path
) -> None:
    fake_api.behaviour = compose_reply(default_style)
    run = run_proof(
        data_root,
        tmp_path / "proof",
        key=KEY,
        mode="rehearsal",
        https_proxy=fake_api.proxy_url,
        ssl_cert_file=str(fake_api.ca_file),
        wire=lambda: [r.body for r in fake_api.requests],
    )
    summary = json.loads((tmp_path / "proof" / "proof-summary.json").read_text())
    assert summary == run.summary
    assert run.passed, json.dumps(summary, indent=2)
    # Only the surface with something to style is called (design §6.2); the others
    # are said, with the reason, neither failed nor passed.
    assert sorted(summary["surfaces"]) == [c.surface for c in PROOF_CASES] == ["weekly.v1"]
    assert all(s["shadow_selected"] == COUNT for s in summary["surfaces"].values())
    assert summary["nothing_to_style"] == {
        s: {
            "gate": "nothing to style: not promotable",
            "reason": "no style word reads at least as well as the host's text before any of"
            " its sentences (docs/design.md §6.2)",
        }
        for s in NOTHING_TO_STYLE
    }
    assert sorted([*summary["surfaces"], *summary["nothing_to_style"]]) == sorted(
        c.surface for c in CASES
    )
    assert summary["wire_requests"] == COUNT and summary["wire_max_requests_per_artifact"] == 1
    assert summary["host_calls"] == 0 and summary["telemetry_events"] == COUNT
    assert summary["audit"] == "clean"
    # The margin (issue 19 item 6): the worker's own histograms, one call per artifact.
    from kexpr.worker.histograms import CALL_BUDGET_S, edges_json

    assert summary["call_budget_s"] == CALL_BUDGET_S == 3.0
    assert summary["histogram_edges"] == edges_json()
    for margin in (s["margin"] for s in summary["surfaces"].values()):
        assert margin["calls_measured"] == COUNT and margin["failures"] == {}
        assert sum(margin["call_seconds"]) == COUNT
        # The fake reports usage.completion_tokens for every answer.
        assert margin["tokens_absent"] == 0 and sum(margin["completion_tokens"]) == COUNT
        assert margin["call_margin"] in ("within_budget", "over_budget")
        assert margin["p95_completion_tokens"] is not None
    # The worker's own check needs root (it is non-dumpable); as another user the
    # audit still covers the gateway process and the data root.
    assert summary["audit_worker_checked"] is (os.geteuid() == 0)
    # The summary itself is counts, enums and booleans.
    text = json.dumps(summary, ensure_ascii=False)
    assert KEY not in text and not any("\uac00" <= c <= "\ud7a3" for c in text)
    # The worker's key stayed in the worker: the fake saw it, the gateway never had it.
    assert {r.headers["authorization"] for r in fake_api.requests} == {f"Bearer {KEY}"}


def test_rehearsal_fails_on_a_single_rejected_composition(
    data_root: Path, fake_api: FakeOpenAI, tmp_path: Path
) -> None:
    """The harness is not a rubber stamp: one invalid composition fails the proof."""
    seen: list[str] = []
    good, bad = compose_reply(default_style), compose_reply(invalid_style)

    def behaviour(req):
        seen.append(req.artifact_key or "")
        return bad(req) if len(seen) == 2 else good(req)

    fake_api.behaviour = behaviour
    run = run_proof(
        data_root,
        tmp_path / "proof",
        key=KEY,
        mode="rehearsal",
        https_proxy=fake_api.proxy_url,
        ssl_cert_file=str(fake_api.ca_file),
        cases=PROOF_CASES,
        count=3,
        wire=lambda: [r.body for r in fake_api.requests],
    )
    assert not run.passed
    weekly = run.summary["surfaces"]["weekly.v1"]
    assert weekly["other_outcomes"] == {"validation_rejected": 2}
    assert weekly["shadow_selected"] == 2
    # A rejected composition is still a call that returned content: measured.
    assert weekly["margin"]["calls_measured"] == 3


def test_a_summary_without_the_workers_figures_does_not_pass() -> None:
    """The margin is part of the proof: a worker status without the histograms
    (an older worker, a status file that did not validate) fails it."""
    import datetime as dt

    from shadow_harness import summarize

    now = dt.datetime.now(dt.UTC)
    (case,) = PROOF_CASES
    results = {
        "candidates": [
            {"surface": case.surface, "artifact_key": f"{i:032x}", "outcome": "shadow_selected"}
            for i in range(2)
        ],
        "log_records": [],
        "host_calls": [],
        "telemetry": [
            {
                "event": "e",
                "contract_version": "korean-expression-v4",
                "surface": case.surface,
                "mode": "shadow",
                "outcome": "shadow_selected",
                "latency_bucket": "lt_100ms",
            }
        ]
        * 2,
        "gateway_environment_had_key": False,
        "gateway_imported_openai": False,
    }
    rows = [
        {"surface": case.surface, "state": state, "outcome": outcome, "mode": "shadow"}
        for _ in range(2)
        for state, outcome in (
            ("attempt_started", "attempt_started"),
            ("finalized", "shadow_selected"),
        )
    ]
    common = dict(
        worker_log="", key=KEY, mode="rehearsal", started=now, finished=now,
        journal_verified=True, wire=None,
    )  # fmt: skip
    from kexpr.worker.histograms import SurfaceCalls

    calls = SurfaceCalls()
    calls.record(0.3, None, 120)
    calls.record(0.4, None, 130)
    from kexpr.ops.status_cli import call_figures
    from kexpr.worker.histograms import edges_json

    status = {"calls_by_surface": {case.surface: calls.to_json()}, "histogram_edges": edges_json()}
    with_figures = summarize(
        (case,), 2, results, rows, "clean", figures=call_figures(status), **common
    )
    assert with_figures["passed"], with_figures
    assert with_figures["surfaces"][case.surface]["margin"]["p95_call_s"] == 0.5
    without = summarize((case,), 2, results, rows, "clean", figures={}, **common)
    assert not without["passed"]
    assert without["surfaces"][case.surface]["margin"]["calls_measured"] is None


def test_host_entry_points_all_raise() -> None:
    from shadow_harness import HostCallForbidden, HostSpy

    spy = HostSpy()
    for name in (
        "send_message",
        "edit_message",
        "reserve_customer_task_delivery",
        "validate_and_mark_presented_card",
        "mark_published",
    ):
        with pytest.raises(HostCallForbidden):
            getattr(spy, name)("body")
    assert len(spy.calls) == 5


def test_a_selected_candidate_in_shadow_would_reach_the_spy() -> None:
    from shadow_harness import HostCallForbidden, HostSpy, host_step

    from gateway_shim import CandidateStatus, PresentationCandidate

    cand = PresentationCandidate(
        surface_version="daily.v1",
        attempt_id=None,
        artifact_key=None,
        binding_digest="0" * 64,
        status=CandidateStatus.SELECTED,
        body="x",
        publication_permitted=True,
        outcome=Outcome.ACCEPTED,
    )
    spy = HostSpy()
    with pytest.raises(HostCallForbidden):
        host_step(spy, "daily.v1", cand)
    assert spy.calls == ["edit_message"]


def test_content_checks_catch_content() -> None:
    from shadow_harness import content_free, telemetry_content_free

    assert content_free(["watchdog: scheduled /tmp/x"])
    assert not content_free(["presented 김하늘 body"])
    assert not content_free(["evt-live-ab12-3"])
    assert not content_free(["a Hangul word: 차분히"])
    assert content_free(["a Hangul word: 차분히"], hangul_ok=True)
    assert not content_free(["Bearer sk-x"], secrets=["sk-x"])
    ok = {
        "event": "e",
        "contract_version": "korean-expression-v4",
        "surface": "daily.v1",
        "mode": "shadow",
        "outcome": "shadow_selected",
        "latency_bucket": "lt_100ms",
    }
    assert telemetry_content_free([ok])
    assert not telemetry_content_free([{**ok, "body": "x"}])
    assert not telemetry_content_free([{**ok, "outcome": "김하늘"}])

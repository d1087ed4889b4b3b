"""`kexpr promotion-report`: the plan's gates from the journal alone."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from ops_support import Row, build_journal, kexpr

from kexpr.ops.promotion import FLAGS, Gate, evaluate
from kexpr.ops.readers import JournalRecord

NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)
DAILY, WEEKLY = "daily.v1", "weekly.v1"
DUAL, PHYSIQUE = "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1"


def rec(
    surface: str,
    outcome: str | None = "shadow_selected",
    *,
    days_ago: float = 1,
    mode: str = "shadow",
) -> JournalRecord:
    t = NOW - dt.timedelta(days=days_ago)
    return JournalRecord(surface, mode, t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), outcome)


def gates(records: list[JournalRecord], **kw: object) -> dict[str, str]:
    report = evaluate(records, now=NOW, **kw)  # type: ignore[arg-type]
    return {s.surface: s.gate.value for s in report.surfaces} | {
        f.flag: f.gate.value for f in report.flags
    }


def test_ten_of_ten_selected_holds_the_gate() -> None:
    g = gates([rec(DAILY) for _ in range(10)])
    assert g[DAILY] == g["daily"] == "held"
    assert g[WEEKLY] == g["weekly"] == "insufficient_observations"


def test_nine_is_not_enough() -> None:
    assert gates([rec(DAILY) for _ in range(9)])["daily"] == "insufficient_observations"


@pytest.mark.parametrize(
    "failure",
    [
        "timeout",
        "provider_error",
        "invalid_response",
        "validation_rejected",
        "credential_unavailable",
        "claim_expired_canonical",
    ],
)
def test_any_failure_in_the_window_breaks_the_gate(failure: str) -> None:
    report = evaluate([*(rec(DAILY) for _ in range(20)), rec(DAILY, failure)], now=NOW)
    daily = report.surfaces[0]
    assert (
        daily.gate is Gate.FAILURES_PRESENT
        and daily.failures == {failure: 1}
        and daily.selected == 20
    )


def test_an_open_attempt_holds_the_gate_back() -> None:
    assert (
        gates([*(rec(DAILY) for _ in range(10)), rec(DAILY, None)])["daily"] == "pending_attempts"
    )


def test_only_the_window_counts() -> None:
    old_failure = rec(DAILY, "timeout", days_ago=15)
    assert gates([*(rec(DAILY) for _ in range(10)), old_failure])["daily"] == "held"
    assert (
        gates([*(rec(DAILY, days_ago=15) for _ in range(10))])["daily"]
        == "insufficient_observations"
    )
    assert gates([*(rec(DAILY, days_ago=15) for _ in range(10))], days=16)["daily"] == "held"


def test_enabled_mode_attempts_are_not_shadow_evidence() -> None:
    report = evaluate([rec(DAILY, "selected", mode="enabled") for _ in range(10)], now=NOW)
    assert (
        report.surfaces[0].gate is Gate.INSUFFICIENT_OBSERVATIONS
        and report.surfaces[0].enabled_attempts == 10
    )


def test_adaptive_operator_needs_both_adaptive_sets() -> None:
    dual_only = [rec(DUAL) for _ in range(10)] + [rec(PHYSIQUE) for _ in range(9)]
    g = gates(dual_only)
    assert g[DUAL] == "held" and g[PHYSIQUE] == "insufficient_observations"
    assert g["adaptive_operator"] == "insufficient_observations"
    g = gates(dual_only + [rec(PHYSIQUE, "validation_rejected")])
    assert g["adaptive_operator"] == "failures_present"
    assert (
        gates([rec(DUAL) for _ in range(10)] + [rec(PHYSIQUE) for _ in range(10)])[
            "adaptive_operator"
        ]
        == "held"
    )


def test_the_order_is_daily_then_weekly_then_adaptive() -> None:
    assert [name for name, _ in FLAGS] == ["daily", "weekly", "adaptive_operator"]
    assert evaluate([], now=NOW).to_json()["order"] == ["daily", "weekly", "adaptive_operator"]


def test_a_quarantined_day_in_the_window_makes_every_gate_incomplete() -> None:
    records = [rec(DAILY) for _ in range(10)]
    assert gates(records, quarantined_days=["2026-11-29"])["daily"] == "journal_incomplete"
    assert gates(records, quarantined_days=["2026-10-01"])["daily"] == "held"


# ------------------------------------------------------------------ the command


def rows(surface: str, n: int, outcome: str | None = "shadow_selected") -> list[Row]:
    now = dt.datetime.now(dt.UTC)
    return [
        Row(surface, "shadow", now - dt.timedelta(hours=1, seconds=i), outcome) for i in range(n)
    ]


def test_cli_reads_the_real_journal(data_root: Path) -> None:
    build_journal(
        data_root,
        [
            *rows(DAILY, 10),
            *rows(WEEKLY, 10),
            rows(WEEKLY, 1, "timeout")[0],
            *rows(DUAL, 10),
            *rows(PHYSIQUE, 10),
        ],
    )
    out = kexpr("promotion-report", "--data-root", data_root)
    assert out.returncode == 0
    lines = {ln.split()[0]: ln.split()[1:] for ln in out.stdout.splitlines() if ln.strip()}
    assert lines[DAILY] == ["10", "10", "0", "0", "0", "held"]
    assert lines[WEEKLY] == ["11", "10", "1", "0", "0", "failures_present"]
    assert lines["adaptive_operator"][0] == "held"
    report = json.loads(kexpr("promotion-report", "--data-root", data_root, "--json").stdout)
    assert {f["flag"]: f["gate"] for f in report["flags"]} == {
        "daily": "held",
        "weekly": "failures_present",
        "adaptive_operator": "held",
    }
    assert report["surfaces"][1]["failures"] == {"timeout": 1}
    assert kexpr("promotion-report", "--data-root", data_root, "--require", "daily").returncode == 0
    assert (
        kexpr(
            "promotion-report",
            "--data-root",
            data_root,
            "--require",
            "daily",
            "--require",
            "weekly",
        ).returncode
        == 1
    )


def test_an_unverified_journal_is_no_evidence(data_root: Path) -> None:
    build_journal(data_root, rows(DAILY, 10))
    segment = next((data_root / "outcomes").glob("*.jsonl"))
    segment.write_bytes(segment.read_bytes()[:-5])  # torn tail
    out = kexpr("promotion-report", "--data-root", data_root)
    assert out.returncode == 2 and "journal unverified (torn_tail)" in out.stderr
    assert kexpr("promotion-report", "--data-root", data_root / "nope").returncode == 2


# ---------------------------------------------- the margin


def _status_doc(seconds: dict[str, list[float]], started: str = "2026-11-30T08:00:00.000000Z"):
    """A worker status file whose histograms hold ``seconds`` per surface (each
    call 100 completion tokens), as the worker writes it."""
    from kexpr.worker.histograms import edges_json, new_surfaces

    surfaces = new_surfaces()
    for surface, values in seconds.items():
        for v in values:
            surfaces[surface].record(v, None, 100)
    return {
        "schema": "kexpr-worker-status-v1",
        "started_at_utc": started,
        "calls_by_surface": {s: v.to_json() for s, v in surfaces.items()},
        "histogram_edges": edges_json(),
    }


def test_timeout_share_from_the_journal_and_p95_from_the_status() -> None:
    from kexpr.ops.promotion import STATUS_READ, CallFigures
    from kexpr.ops.status_cli import call_figures

    doc = _status_doc({DAILY: [0.4] * 19 + [1.9], WEEKLY: [2.6] * 18 + [3.3, 3.9]})
    figures = CallFigures(STATUS_READ, doc["started_at_utc"], call_figures(doc))
    records = [
        *(rec(DAILY) for _ in range(10)),
        *(rec(WEEKLY) for _ in range(6)),
        *(rec(WEEKLY, "timeout") for _ in range(3)),
        rec(WEEKLY, "timeout", mode="enabled"),  # the call is the same in either mode
        rec(WEEKLY, "timeout", days_ago=20),  # outside the window
        rec(WEEKLY, None),  # open: not a terminal attempt
    ]
    report = evaluate(records, now=NOW, call_figures=figures)
    by = {s.surface: s.margin_json() for s in report.surfaces}
    assert by[DAILY] == {
        "terminal_attempts": 10,
        "timeouts": 0,
        "timeout_share": 0.0,
        "calls_measured": 20,
        "p95_call_s": 0.5,
        "p95_completion_tokens": 128,
        "call_budget_s": 3.0,
        "call_margin": "within_budget",
    }
    assert by[WEEKLY]["terminal_attempts"] == 10 and by[WEEKLY]["timeouts"] == 4
    assert by[WEEKLY]["timeout_share"] == 0.4
    # 19 of 20 at or below 3.5 s: p95 is over the 3 s budget.
    assert (by[WEEKLY]["p95_call_s"], by[WEEKLY]["call_margin"]) == (3.5, "over_budget")
    assert by[DUAL]["timeout_share"] is None and by[DUAL]["call_margin"] == "no_calls"
    # The margin is shown, never a gate: the plan's gate is unchanged.
    assert {s.surface: s.gate.value for s in report.surfaces}[DAILY] == "held"
    assert report.to_json()["call_figures"] == {
        "file": "worker.status.json",
        "source": "read",
        "worker_started_at_utc": "2026-11-30T08:00:00.000000Z",
    }


def test_without_a_status_file_the_call_time_is_not_known() -> None:
    report = evaluate([rec(DAILY, "timeout")], now=NOW)
    daily = report.surfaces[0].margin_json()
    assert daily["timeout_share"] == 1.0
    assert daily["p95_call_s"] is None and daily["call_margin"] == "no_status"


def test_cli_shows_the_margin_from_the_journal_and_the_status_file(data_root: Path) -> None:
    """Regression: the report had no timeout share or call time."""
    import os

    build_journal(
        data_root,
        [*rows(DAILY, 10), *rows(WEEKLY, 3), *rows(WEEKLY, 1, "timeout")],
    )
    status = data_root / "worker.status.json"
    out = kexpr("promotion-report", "--data-root", data_root, "--json")
    no_status = json.loads(out.stdout)
    assert no_status["call_figures"]["source"] == "no_status"
    assert no_status["surfaces"][1]["margin"]["timeout_share"] == 0.25
    status.write_text(json.dumps(_status_doc({DAILY: [0.6] * 10, WEEKLY: [3.2] * 4})))
    os.chmod(status, 0o600)
    out = kexpr("promotion-report", "--data-root", data_root)
    assert out.returncode == 0
    margin = {
        ln.split()[1]: ln.split()[2:] for ln in out.stdout.splitlines() if ln.startswith("margin  ")
    }
    assert margin[DAILY] == ["10", "0", "0.0%", "10", "<=0.75", "<=128", "within_budget"]
    assert margin[WEEKLY] == ["4", "1", "25.0%", "4", "<=3.5", "<=128", "over_budget"]
    assert margin[DUAL] == ["0", "0", "-", "0", "-", "-", "no_calls"]
    assert "since worker start 2026-11-30T08:00:00.000000Z" in out.stdout
    report = json.loads(kexpr("promotion-report", "--data-root", data_root, "--json").stdout)
    assert report["surfaces"][1]["margin"]["p95_call_s"] == 3.5
    # A planted status file is validated like `kexpr status` does: nothing echoed.
    planted = _status_doc({DAILY: [0.6]}, started="김민지")
    planted["calls_by_surface"]["sk-planted"] = planted["calls_by_surface"][DAILY]
    status.write_text(json.dumps(planted))
    out = kexpr("promotion-report", "--data-root", data_root, "--json")
    assert "김민지" not in out.stdout and "sk-planted" not in out.stdout
    assert json.loads(out.stdout)["call_figures"]["worker_started_at_utc"] is None
    status.unlink()
    status.symlink_to(data_root / "outcomes")
    out = kexpr("promotion-report", "--data-root", data_root, "--json")
    assert json.loads(out.stdout)["call_figures"]["source"] == "status_unreadable"


# --------------------------- refusals apart from failures


def test_refusals_are_not_failures_and_the_excluded_shapes_are_named() -> None:
    """Regression: the report had no refusals, and at 77 tokens/s after
    0.7 s the operator saw only an adaptive gate that never passed."""
    from kexpr.ops.promotion import STATUS_READ, CallFigures, render, shape_verdicts
    from kexpr.ops.status_cli import admission_figures

    admission = admission_figures(
        {
            "admission": {
                "speed": {
                    "state": "learned",
                    "first_token_s": 0.7,
                    "tokens_per_s": 77.0,
                    "overall_tokens_per_s": 60.0,
                    "samples": 24,
                    "length_ratio": 1.0,
                },
                "refused_by_surface": {
                    s: {"provider_too_slow": 4 if s == DUAL else 0, "provider_cooling_down": 0}
                    for s in (DAILY, WEEKLY, DUAL, PHYSIQUE)
                },
            }
        }
    )
    figures = CallFigures(STATUS_READ, None, {}, admission)
    records = [rec(DUAL) for _ in range(3)]
    report = evaluate(records, now=NOW, call_figures=figures)
    dual = next(s for s in report.surfaces if s.surface == DUAL)
    assert dual.failures == {} and dual.refused_too_slow == 4
    assert dual.to_json()["refused"] == {
        "provider_too_slow": 4,
        "provider_cooling_down": 0,
        "share": None,  # no call figures in this status: no share
        "main_reason_not_styled": False,
        "last_too_slow": None,
    }
    verdicts = {v.shape: v.verdict for v in shape_verdicts(0.7, 77.0)}
    assert verdicts["daily cards"] == verdicts["physique cards"] == "styled"
    # The fit table locks the decision and the first review line: a card of 0 or 1
    # reason is never sent (no shape of a call), one of n asks for lines 2..n, so
    # the ~200-token card that is too slow here is the one with 4 reasons.
    dual_shapes = [s for s in verdicts if s.startswith("dual cards")]
    assert dual_shapes == [f"dual cards with {n} reasons" for n in range(2, 7)]
    assert verdicts["dual cards with 3 reasons"] == "styled"
    assert verdicts["dual cards with 4 reasons"] == "not_styled"
    text = render(report)
    assert "dual cards with 4 reasons are not styled at this provider's speed" in text
    assert "dual cards with 3 reasons are not styled" not in text
    assert "daily cards are not styled" not in text
    assert report.to_json()["call_figures"]["speed"]["tokens_per_s"] == 77.0
    # At the fastest published rate every eligible shape is styled.
    assert {v.verdict for v in shape_verdicts(0.3, 110.0)} == {"styled"}


def test_the_shapes_not_styled_are_the_workers_own_refused_bounds() -> None:
    """With the worker's refused bounds in the status file, the report names the
    shapes by the worker's own verdicts (not by a line of its own); and says when
    refusals are the main reason a surface is not styled."""
    from kexpr.ops.promotion import STATUS_READ, CallFigures, refused_shape_verdicts, render
    from kexpr.ops.status_cli import admission_figures

    verdicts = {v.shape: v.verdict for v in refused_shape_verdicts([(187, 297)])}
    # Under the fit table a card of n reasons asks lines 2..n: 3 reasons ~151
    # tokens arrive, 4 reasons ~196 are in the refused range.
    assert verdicts["daily cards"] == verdicts["dual cards with 3 reasons"] == "styled"
    assert verdicts["dual cards with 4 reasons"] == "not_styled"
    # weekly reports span bounds 162-171: only the longer are refused at 165-297
    assert {v.shape: v.verdict for v in refused_shape_verdicts([(165, 297)])}[
        "weekly reports"
    ] == "some"
    admission = admission_figures(
        {
            "admission": {
                "speed": {
                    "state": "learned",
                    "first_token_s": 0.5,
                    "tokens_per_s": 70.0,
                    "overall_tokens_per_s": 60.0,
                    "samples": 20,
                    "length_ratio": 0.95,
                    "refused_bounds": [[187, 297]],
                },
                "refused_by_surface": {
                    s: {"provider_too_slow": 12 if s == DUAL else 0, "provider_cooling_down": 0}
                    for s in (DAILY, WEEKLY, DUAL, PHYSIQUE)
                },
                "too_slow_last": {
                    DUAL: {
                        "bound": 198,
                        "evidence": "comparable",
                        "fits": 1,
                        "misses": 3,
                        "estimate_s": 3.1,
                        "limit_s": 3.0,
                    }
                },
            }
        }
    )
    calls = {"calls": 6, "failures": {"timeout": 1}, "margin": "within_budget"}
    measured = {DUAL: {**calls, "p95_call_s": 2.75, "p95_completion_tokens": 192}}
    figures = CallFigures(STATUS_READ, None, measured, admission)
    report = evaluate([rec(DUAL) for _ in range(3)], now=NOW, call_figures=figures)
    dual = next(s for s in report.surfaces if s.surface == DUAL)
    assert dual.refused_share == 12 / 18 and dual.refusals_main_reason
    out = dual.to_json()["refused"]
    assert out["main_reason_not_styled"] is True and out["share"] == round(12 / 18, 4)
    assert out["last_too_slow"]["bound"] == 198
    text = render(report)
    assert "refusals are the main reason it is not styled" in text
    assert "last too slow: bound 198, estimated 3.10 s against 3.00 s" in text
    assert "dual cards with 4 reasons are not styled at this provider's speed" in text
    assert "dual cards with 3 reasons are not styled" not in text
    # More failed calls than refusals: refusals are not the main reason.
    many = {DUAL: {**measured[DUAL], "failures": {"timeout": 13}, "calls": 20}}
    report = evaluate([], now=NOW, call_figures=CallFigures(STATUS_READ, None, many, admission))
    dual = next(s for s in report.surfaces if s.surface == DUAL)
    assert dual.refused_share == 12 / 32 and not dual.refusals_main_reason

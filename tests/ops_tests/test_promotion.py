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
    g = gates([rec(WEEKLY) for _ in range(10)])
    assert g[WEEKLY] == g["weekly"] == "held"


def test_nine_is_not_enough() -> None:
    assert gates([rec(WEEKLY) for _ in range(9)])["weekly"] == "insufficient_observations"


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
    report = evaluate([*(rec(WEEKLY) for _ in range(20)), rec(WEEKLY, failure)], now=NOW)
    weekly = report.surfaces[1]
    assert (
        weekly.gate is Gate.FAILURES_PRESENT
        and weekly.failures == {failure: 1}
        and weekly.selected == 20
    )


def test_an_open_attempt_holds_the_gate_back() -> None:
    assert (
        gates([*(rec(WEEKLY) for _ in range(10)), rec(WEEKLY, None)])["weekly"]
        == "pending_attempts"
    )


def test_only_the_window_counts() -> None:
    old_failure = rec(WEEKLY, "timeout", days_ago=15)
    assert gates([*(rec(WEEKLY) for _ in range(10)), old_failure])["weekly"] == "held"
    assert (
        gates([*(rec(WEEKLY, days_ago=15) for _ in range(10))])["weekly"]
        == "insufficient_observations"
    )
    assert gates([*(rec(WEEKLY, days_ago=15) for _ in range(10))], days=16)["weekly"] == "held"


def test_enabled_mode_attempts_are_not_shadow_evidence() -> None:
    report = evaluate([rec(WEEKLY, "selected", mode="enabled") for _ in range(10)], now=NOW)
    assert (
        report.surfaces[1].gate is Gate.INSUFFICIENT_OBSERVATIONS
        and report.surfaces[1].enabled_attempts == 10
    )


# ---------------------------------------------- nothing to style


def test_a_surface_with_nothing_to_style_is_not_promotable_whatever_its_rows() -> None:
    """daily, the dual card and the physique card: no shape has a slot the fit table
    leaves a choice (design §6.2). Their gate is its own state, never held and never
    a failure, even with ten selected rows (a journal of an earlier table) or a
    failure among them; and so is the flag that covers them."""
    from kexpr.spool.contract.fit import surface_styleable

    assert [s for s in (DAILY, WEEKLY, DUAL, PHYSIQUE) if surface_styleable(s)] == [WEEKLY]
    for records in (
        [],
        [rec(s) for s in (DAILY, DUAL, PHYSIQUE) for _ in range(10)],
        [rec(DAILY, "timeout"), rec(DUAL, None)],
    ):
        report = evaluate(records, now=NOW)
        g = gates(records)
        for name in (DAILY, DUAL, PHYSIQUE, "daily", "adaptive_operator"):
            assert g[name] == "nothing_to_style", (name, records)
        assert g[WEEKLY] == g["weekly"] == "insufficient_observations"
        out = report.to_json()
        for surface in out["surfaces"]:
            assert surface["promotable"] is (surface["surface"] == WEEKLY)
            assert (surface["reason"] is None) is (surface["surface"] == WEEKLY)
        assert {f["flag"]: f["promotable"] for f in out["flags"]} == {
            "daily": False,
            "weekly": True,
            "adaptive_operator": False,
        }
        assert out["nothing_to_style"]["surfaces"] == [DAILY, DUAL, PHYSIQUE]
        assert "docs/design.md §6.2" in out["nothing_to_style"]["reason"]
        assert "gate 2" in out["nothing_to_style"]["gate_2"]
    # A quarantined day hides evidence; it cannot give a surface something to style.
    g = gates([], quarantined_days=["2026-11-29"])
    assert (g[DAILY], g[WEEKLY]) == ("nothing_to_style", "journal_incomplete")


def test_the_human_report_says_nothing_to_style_and_why() -> None:
    from kexpr.ops.promotion import render

    text = render(evaluate([rec(WEEKLY) for _ in range(10)], now=NOW))
    gate_of = {ln.split()[0]: ln for ln in text.splitlines() if ln.strip()}
    for name in (DAILY, DUAL, PHYSIQUE, "daily", "adaptive_operator"):
        assert "nothing to style: not promotable" in gate_of[name], name
        assert "held" not in gate_of[name] and "failures" not in gate_of[name].split()[-4:]
    assert gate_of[WEEKLY].endswith("  held") and gate_of["weekly"].startswith("weekly  ")
    assert (
        f"nothing to style: not promotable: {DAILY}, {DUAL}, {PHYSIQUE}\n"
        "  no style word reads at least as well as the host's text before any of its"
        " sentences (docs/design.md §6.2);\n"
        '  the plan\'s gate 2 ("a real model authors … in every requested surface") cannot'
        " be met on these surfaces with the reviewed lexicon (docs/design.md §6.2)."
    ) in text
    assert "a flag with nothing to style is\nnot promotable and is passed over" in text


def test_adaptive_operator_needs_both_adaptive_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared flag's rule ("both adaptive versions must pass independently"),
    for a table under which both cards have something to style; under the shipped
    table neither has, and the flag is not promotable (above)."""
    monkeypatch.setattr("kexpr.ops.promotion.surface_styleable", lambda surface: True)
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
    monkeypatch.setattr("kexpr.ops.promotion.surface_styleable", lambda surface: surface != DUAL)
    both = [rec(DUAL) for _ in range(10)] + [rec(PHYSIQUE) for _ in range(10)]
    assert gates(both)["adaptive_operator"] == "nothing_to_style"


def test_the_order_is_daily_then_weekly_then_adaptive() -> None:
    assert [name for name, _ in FLAGS] == ["daily", "weekly", "adaptive_operator"]
    assert evaluate([], now=NOW).to_json()["order"] == ["daily", "weekly", "adaptive_operator"]


def test_a_quarantined_day_in_the_window_makes_every_gate_incomplete() -> None:
    records = [rec(WEEKLY) for _ in range(10)]
    assert gates(records, quarantined_days=["2026-11-29"])["weekly"] == "journal_incomplete"
    assert gates(records, quarantined_days=["2026-10-01"])["weekly"] == "held"


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
            # Rows of the surfaces with nothing to style (an earlier table's): no gate.
            *rows(DAILY, 10),
            *rows(WEEKLY, 10),
            *rows(DUAL, 10),
            *rows(PHYSIQUE, 10),
        ],
    )
    out = kexpr("promotion-report", "--data-root", data_root)
    assert out.returncode == 0
    lines = {ln.split()[0]: ln.split()[1:] for ln in out.stdout.splitlines() if ln.strip()}
    assert lines[DAILY] == [
        "10",
        "10",
        "0",
        "0",
        "0",
        "nothing",
        "to",
        "style:",
        "not",
        "promotable",
    ]
    assert lines[WEEKLY] == ["10", "10", "0", "0", "0", "held"]
    assert lines["adaptive_operator"][:5] == ["nothing", "to", "style:", "not", "promotable"]
    report = json.loads(kexpr("promotion-report", "--data-root", data_root, "--json").stdout)
    assert {f["flag"]: f["gate"] for f in report["flags"]} == {
        "daily": "nothing_to_style",
        "weekly": "held",
        "adaptive_operator": "nothing_to_style",
    }
    assert (
        kexpr("promotion-report", "--data-root", data_root, "--require", "weekly").returncode == 0
    )
    for flag in ("daily", "adaptive_operator"):
        argv = ("--require", "weekly", "--require", flag)
        assert kexpr("promotion-report", "--data-root", data_root, *argv).returncode == 1
    # A failure breaks the one promotable gate.
    build_journal(data_root, [*rows(WEEKLY, 10), rows(WEEKLY, 1, "timeout")[0]])
    out = kexpr("promotion-report", "--data-root", data_root)
    lines = {ln.split()[0]: ln.split()[1:] for ln in out.stdout.splitlines() if ln.strip()}
    assert lines[WEEKLY][-1] == "failures_present"
    report = json.loads(kexpr("promotion-report", "--data-root", data_root, "--json").stdout)
    assert report["surfaces"][1]["failures"] == {"timeout": 1}
    assert (
        kexpr("promotion-report", "--data-root", data_root, "--require", "weekly").returncode == 1
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

    # daily's rows and calls: an earlier table's (its margin is shown all the same).
    doc = _status_doc({WEEKLY: [0.4] * 19 + [1.9], DAILY: [2.6] * 18 + [3.3, 3.9]})
    figures = CallFigures(STATUS_READ, doc["started_at_utc"], call_figures(doc))
    records = [
        *(rec(WEEKLY) for _ in range(10)),
        *(rec(DAILY) for _ in range(6)),
        *(rec(DAILY, "timeout") for _ in range(3)),
        rec(DAILY, "timeout", mode="enabled"),  # the call is the same in either mode
        rec(DAILY, "timeout", days_ago=20),  # outside the window
        rec(DAILY, None),  # open: not a terminal attempt
    ]
    report = evaluate(records, now=NOW, call_figures=figures)
    by = {s.surface: s.margin_json() for s in report.surfaces}
    assert by[WEEKLY] == {
        "terminal_attempts": 10,
        "timeouts": 0,
        "timeout_share": 0.0,
        "calls_measured": 20,
        "p95_call_s": 0.5,
        "p95_completion_tokens": 128,
        "call_budget_s": 3.0,
        "call_margin": "within_budget",
    }
    assert by[DAILY]["terminal_attempts"] == 10 and by[DAILY]["timeouts"] == 4
    assert by[DAILY]["timeout_share"] == 0.4
    # 19 of 20 at or below 3.5 s: p95 is over the 3 s budget.
    assert (by[DAILY]["p95_call_s"], by[DAILY]["call_margin"]) == (3.5, "over_budget")
    assert by[DUAL]["timeout_share"] is None and by[DUAL]["call_margin"] == "no_calls"
    # The margin is shown, never a gate: the plan's gate is unchanged.
    assert {s.surface: s.gate.value for s in report.surfaces}[WEEKLY] == "held"
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


def test_cool_down_refusals_are_not_failures_and_may_be_the_main_reason() -> None:
    """Refusals (no row, no call) are counted apart from failures, and the report
    says when they are the main reason a surface is not styled. An older worker's
    speed figures in the same status file are read past (docs/upgrade.md)."""
    from kexpr.ops.promotion import STATUS_READ, CallFigures, render
    from kexpr.ops.status_cli import admission_figures

    admission = admission_figures(
        {
            "admission": {
                "speed": {"state": "learned", "first_token_s": 0.9, "tokens_per_s": 55.0},
                "refused_by_surface": {
                    s: {"provider_too_slow": 7, "provider_cooling_down": 12 if s == WEEKLY else 0}
                    for s in (DAILY, WEEKLY, DUAL, PHYSIQUE)
                },
                "too_slow_last": {WEEKLY: {"bound": 131, "evidence": "comparable"}},
            }
        }
    )
    assert set(admission) == {"refused_by_surface"}
    calls = {"calls": 6, "failures": {"timeout": 1}, "margin": "within_budget"}
    measured = {WEEKLY: {**calls, "p95_call_s": 2.75, "p95_completion_tokens": 120}}
    figures = CallFigures(STATUS_READ, None, measured, admission)
    report = evaluate([rec(WEEKLY) for _ in range(3)], now=NOW, call_figures=figures)
    weekly = next(s for s in report.surfaces if s.surface == WEEKLY)
    assert weekly.failures == {} and weekly.gate is Gate.INSUFFICIENT_OBSERVATIONS
    assert weekly.refused_share == 12 / 18 and weekly.refusals_main_reason
    assert weekly.to_json()["refused"] == {
        "provider_cooling_down": 12,
        "share": round(12 / 18, 4),
        "main_reason_not_styled": True,
    }
    text = render(report)
    assert "refusals are the main reason it is not styled" in text
    assert "speed" not in text and "too slow" not in text
    assert "speed" not in json.dumps(report.to_json())
    # More failed calls than refusals: refusals are not the main reason.
    many = {WEEKLY: {**measured[WEEKLY], "failures": {"timeout": 13}, "calls": 20}}
    report = evaluate([], now=NOW, call_figures=CallFigures(STATUS_READ, None, many, admission))
    weekly = next(s for s in report.surfaces if s.surface == WEEKLY)
    assert weekly.refused_share == 12 / 32 and not weekly.refusals_main_reason

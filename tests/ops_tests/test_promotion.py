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

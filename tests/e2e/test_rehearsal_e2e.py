"""`kexpr supervise --rehearsal` end to end: real processes
(supervisor -> worker, the built-in model behind the SDK's transport hook, no key,
no network) and an asyncio host wired as docs/wiring.md says (`apresent_*`, report
after the edit). What it writes is marked; nothing counts it.

The host presents the demo's daily reply and its weekly report (the goal range
missing: the one message the fit table styles, design §6.1): the daily has nothing
to style (``nothing_to_style``, published as is, never a request or a row); the
weekly is answered by the built-in model."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import journal_rows, start_supervised_worker
from kit.poll import poll, wait_file
from kit.supervisor import start_supervisor, stop_supervisor

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    exact_block,
)
from kexpr.ops.demo import host_bodies
from kexpr.spool.layout import DataRoot
from kexpr.spool.rehearsal import MARKER_NAME, MARKER_SCHEMA
from kexpr.worker.status import wait_ready

pytestmark = pytest.mark.e2e

# Instant: the suite must not depend on the machine's speed (the default pace,
# 77 tokens/s after 0.5 s, is proven with an injected clock in
# tests/worker_tests/test_rehearsal.py).
FAST = ("--tokens-per-second", "100000", "--first-token-seconds", "0")
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def kexpr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", *args],
        env=env or ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def supervise_rehearsal(
    data_root: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return start_supervisor(
        data_root,
        key=None,
        args=("--rehearsal", *extra),
        env=env or ENV,
        wait=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    stop_supervisor(proc)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def rehearsal(data_root: Path) -> Iterator[subprocess.Popen[str]]:
    proc = supervise_rehearsal(data_root, *FAST)
    try:
        if not wait_ready(DataRoot(data_root), 60.0):
            raise AssertionError("rehearsal worker did not become ready")
        yield proc
    finally:
        stop(proc)


# The demo's own samples (`kexpr run` presents the same bodies).
DAILY = host_bodies().daily_complete
WEEKLY = host_bodies().weekly
WEEKLY_HOLD = "목표 범위가 없어 이번 주 조정 판단은 보류합니다."
assert "\n" + WEEKLY_HOLD + "\n" in WEEKLY


async def host(data_root: Path, mode: Mode, run: str) -> list[tuple[PresentationCandidate, str]]:
    """A host as docs/wiring.md wires one: the block under platforms.telegram.extra,
    one coordinator, `apresent_*` from the handlers, the edit, then the report."""
    extra = {"korean_expression_postprocessor": exact_block(mode, daily=True, weekly=True)}
    config = KoreanExpressionConfig.from_extra(extra)
    assert config.valid
    coord = KoreanExpressionCoordinator(config, data_root)
    published: list[tuple[PresentationCandidate, str]] = []

    edits: list[str] = []

    async def edit_save_message(text: str) -> bool:
        edits.append(text)
        return True

    try:
        for cand_coro in (
            coord.apresent_daily(DAILY, finalized_event_id=f"evt-{run}-daily"),
            coord.apresent_weekly(
                WEEKLY,
                explicit_fields=("average_weight_kg", "prior_average_weight_kg", "goal_range"),
                schedule_key=f"sched-{run}",
                kind="weekly_report",
                kst_day="2025-11-30",
            ),
        ):
            cand = await cand_coro
            if cand.publication_permitted:
                ok = await edit_save_message(cand.body)
                published.append((cand, edits[-1]))
                if cand.outcome is Outcome.ACCEPTED:
                    coord.report(cand, Outcome.SELECTED if ok else Outcome.PUBLICATION_FAILED)
    finally:
        coord.close()
    return published


def wait_terminal(root: Path, n: int, timeout: float = 30.0) -> list[dict[str, object]]:
    def terminal() -> list[dict[str, object]]:
        return [r for r in journal_rows(root) if r["state"] == "finalized"]

    return poll(terminal, lambda rows: len(rows) >= n, timeout)


def test_rehearsal_shadow_and_enabled_end_to_end(
    data_root: Path, rehearsal: subprocess.Popen[str]
) -> None:
    # The marker is there before any row, and the status file says rehearsal.
    marker = json.loads((data_root / MARKER_NAME).read_text("utf-8"))
    assert marker["schema"] == MARKER_SCHEMA and set(marker) == {"schema", "created_at_utc"}
    assert journal_rows(data_root) == []
    status = json.loads((data_root / "worker.status.json").read_bytes())
    assert status["rehearsal"] is True and status["credential"] == "rehearsal"
    # The supervisor's heartbeat is written on its own loop: once the worker has
    # made the data root, at its next turn (not necessarily before "ready").
    supervisor_status = data_root / "supervisor.status.json"
    assert wait_file(supervisor_status, 20.0), "no supervisor heartbeat"
    supervisor = json.loads(supervisor_status.read_bytes())
    assert supervisor["rehearsal"] is True

    shadow = asyncio.run(host(data_root, Mode.SHADOW, "s"))
    assert [c.outcome for c, _ in shadow] == [Outcome.NOTHING_TO_STYLE, Outcome.SHADOW_SELECTED]
    assert all(c.status is CandidateStatus.CANONICAL for c, _ in shadow)
    assert [text for _, text in shadow] == [DAILY, WEEKLY]  # shadow publishes the canonical

    enabled = asyncio.run(host(data_root, Mode.ENABLED, "e"))
    assert [c.outcome for c, _ in enabled] == [Outcome.NOTHING_TO_STYLE, Outcome.ACCEPTED]
    (daily, daily_text), (weekly, weekly_text) = enabled
    assert daily.status is CandidateStatus.CANONICAL and daily_text == DAILY
    assert daily.attempt_id is None and daily.generated == ()
    assert weekly.status is CandidateStatus.SELECTED
    assert weekly_text == weekly.body and weekly_text != WEEKLY  # the model's words
    assert weekly.generated and all(g for _, g in weekly.generated)
    # ...which are one of the slot's two compositions, at the hold line.
    assert weekly_text in {
        WEEKLY.replace("\n" + WEEKLY_HOLD, "\n" + word + WEEKLY_HOLD, 1)
        for word in ("다만 ", "다만, ")
    }

    # Two attempts, both weekly: the daily replies never reached the worker.
    rows = wait_terminal(data_root, 2)
    assert sorted(str(r["outcome"]) for r in rows) == ["selected", "shadow_selected"]
    assert {r["mode"] for r in rows} == {"shadow", "enabled"}
    assert {r["surface"] for r in journal_rows(data_root)} == {"weekly.v1"}

    # The journal verifies; the promotion report refuses it, in one line.
    verify = kexpr("journal", "verify", "--data-root", str(data_root))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    report = kexpr("promotion-report", "--data-root", str(data_root))
    assert report.returncode == 2 and report.stdout == ""
    assert report.stderr.strip().splitlines() == [
        f"kexpr promotion-report: {data_root} is a rehearsal data root (rehearsal.marker): "
        "rehearsal evidence is never counted"
    ]
    as_json = kexpr("promotion-report", "--json", "--data-root", str(data_root))
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout) == {"schema": "kexpr-promotion-report-v1", "rehearsal": True}
    shown = kexpr("status", "--data-root", str(data_root))
    assert "credential rehearsal" in shown.stdout
    assert "rehearsal   built-in model, no key, no network" in shown.stdout
    # The audit knows the marker: not an unexpected file.
    audit = kexpr("audit", "--json", "--data-root", str(data_root))
    assert "rehearsal.marker" not in audit.stdout, audit.stdout


def test_rehearsal_refuses_a_data_root_with_real_evidence(data_root: Path) -> None:
    # Real evidence: a real worker (no key) journals credential_unavailable.
    worker = start_supervised_worker(data_root, None, key=None)
    try:
        (daily, _), (weekly, _) = asyncio.run(host(data_root, Mode.SHADOW, "real"))
        assert daily.outcome is Outcome.NOTHING_TO_STYLE
        assert weekly.outcome is Outcome.CREDENTIAL_UNAVAILABLE
        assert wait_terminal(data_root, 1)
    finally:
        worker.stop()
    before = sorted(p.name for p in (data_root / "outcomes").iterdir())
    proc = supervise_rehearsal(data_root, *FAST)
    try:
        code = proc.wait(60)
        assert proc.stderr is not None
        err = proc.stderr.read()
    finally:
        stop(proc)
    assert code == 74, err
    assert "kexpr worker: refusing the data root: real_evidence" in err
    assert not (data_root / MARKER_NAME).exists()
    assert sorted(p.name for p in (data_root / "outcomes").iterdir()) == before


def test_a_real_worker_refuses_a_rehearsal_root(
    data_root: Path, rehearsal: subprocess.Popen[str]
) -> None:
    stop(rehearsal)
    proc = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "supervise", "--data-root", str(data_root)],
        env={**ENV, "OPENAI_API_KEY": "sk-test-kexpr-0000"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 74, proc.stderr
    assert "kexpr worker: refusing the data root: rehearsal_root" in proc.stderr
    assert journal_rows(data_root) == []


def test_rehearsal_with_a_key_present_is_refused(data_root: Path) -> None:
    env = {**ENV, "OPENAI_API_KEY": "sk-test-kexpr-0000"}
    out = kexpr("supervise", "--rehearsal", "--data-root", str(data_root), env=env)
    assert out.returncode == 78
    assert out.stderr.strip() == "kexpr supervise: refusing to start: rehearsal_key_present"
    assert "sk-test" not in out.stderr
    assert not data_root.exists()
    # The worker itself refuses too (a key, even blank; any proxy or CA variable).
    for extra, word in (
        ({"OPENAI_API_KEY": "sk-test-kexpr-0000"}, "rehearsal_key_present"),
        ({"OPENAI_API_KEY": ""}, "rehearsal_key_present"),
        ({"HTTPS_PROXY": "http://127.0.0.1:9"}, "rehearsal_proxy_present"),
        ({"SSL_CERT_FILE": "/nonexistent"}, "rehearsal_proxy_present"),
    ):
        worker = subprocess.run(
            [sys.executable, "-m", "kexpr.worker", "--rehearsal", "--data-root", str(data_root)],
            env={**ENV, **extra},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert worker.returncode == 78, worker.stderr
        assert worker.stderr.strip() == f"kexpr worker: refusing to start: {word}"
    assert not data_root.exists()


def test_rehearsal_takes_no_proxy() -> None:
    out = kexpr("supervise", "--rehearsal", "--https-proxy", "http://127.0.0.1:9")
    assert out.returncode == 2 and "--rehearsal takes no --https-proxy" in out.stderr
    out = kexpr("supervise", "--tokens-per-second", "50")
    assert out.returncode == 2 and "need --rehearsal" in out.stderr

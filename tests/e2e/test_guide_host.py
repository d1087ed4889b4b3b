"""The Korean guide's minimal host runs as written: its ``python`` block is taken
out of docs/operator-guide.ko.md and run, in a process of its own without the key,
against a real rehearsal worker (`kexpr supervise --rehearsal`), with the guide's
own config block switched to shadow and then to enabled (daily and weekly on).

The guide's host presents a daily reply, which has nothing to style (design §6.1):
as written it prints ``nothing_to_style`` and the host's body, and writes no request
and no journal row. The one styled message, the goal-missing weekly report
(`kit.bodies.STYLED_BODY`), is run through the same script with only its message
swapped (the body and the present call, each matched once): styled in enabled,
reported selected, and what the guide says of one message shown in shadow and then
in enabled: ``already_attempted``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import journal_rows
from kit.bodies import STYLED_BODY, STYLED_HOLD
from ops_tests.ops_support import start_supervisor, wait_for

from kexpr.spool.layout import DataRoot

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
GUIDE = (REPO / "docs" / "operator-guide.ko.md").read_text("utf-8")
FAST = ("--rehearsal", "--tokens-per-second", "100000", "--first-token-seconds", "0")
DAILY_STATUS = "저장된 오늘 기록을 확인했습니다."


def host_script() -> str:
    (code,) = re.findall(
        r"<!-- guide-host: kexpr_host_example.py -->\n```python\n(.*?)```", GUIDE, re.S
    )
    return code


def weekly_host_script() -> str:
    """The guide's host with its message swapped for the styled weekly, the schedule
    key taken from the script's third argument (its event id); nothing else changes."""
    code, bodies = re.subn(
        r"\n    body = format_daily\(\n.*?\n    \)\n",
        lambda _: f"\n    body = {STYLED_BODY!r}\n",  # a function: no escapes read
        host_script(),
        flags=re.S,
    )
    present = (
        "coord.apresent_weekly(body, explicit_fields=(), schedule_key=event_id,"
        ' kind="weekly_report", kst_day="2025-11-30")'
    )
    old = "coord.apresent_daily(body, finalized_event_id=event_id)"
    calls = code.count(old)
    assert (bodies, calls) == (1, 1), (bodies, calls)
    return code.replace(old, present)


def guide_config(mode: str) -> str:
    blocks = re.findall(r"```yaml\n(.*?)```", GUIDE, re.S)
    (block,) = [b for b in blocks if "korean_expression_postprocessor" in b]
    assert "mode: disabled " in block and "daily: false" in block and "weekly: false" in block
    return (
        block.replace("mode: disabled ", f"mode: {mode} ")
        .replace("daily: false", "daily: true")
        .replace("weekly: false", "weekly: true")
    )


def run_host(
    tmp_path: Path, config: str, data_root: Path, event: str, *, weekly: bool = False
) -> list[str]:
    script = tmp_path / ("kexpr_host_weekly.py" if weekly else "kexpr_host_example.py")
    script.write_text(weekly_host_script() if weekly else host_script(), "utf-8")
    cfg = tmp_path / f"config-{event}.yaml"
    cfg.write_text(config, "utf-8")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, str(script), str(cfg), str(data_root), event],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout.splitlines()


def spool_files(data_root: Path) -> list[Path]:
    root = DataRoot(data_root)
    return sorted(p for d in root.spool_dirs() for p in d.rglob("*") if p.is_file())


def test_the_guides_host_runs_against_the_rehearsal_worker(tmp_path: Path, data_root: Path) -> None:
    # Disabled (the guide's block as it is): canonical, and nothing is written.
    out = run_host(tmp_path, guide_config("disabled"), data_root, "evt-0000")
    assert out[0] == "outcome disabled" and not data_root.exists()
    sup = start_supervisor(data_root, key=None, extra_args=FAST)
    try:
        # The guide's own message, a daily reply: nothing to style in either mode,
        # the host's body published as is, no request, no journal row.
        for mode, event in (("shadow", "evt-0001"), ("enabled", "evt-0002")):
            out = run_host(tmp_path, guide_config(mode), data_root, event)
            assert out[0] == "outcome nothing_to_style", out
            assert DAILY_STATUS in out[1:]  # the canonical status line, unstyled
        assert spool_files(data_root) == [] and journal_rows(data_root) == []

        # The styled weekly in shadow: the canonical body is published.
        out = run_host(tmp_path, guide_config("shadow"), data_root, "sched-0001", weekly=True)
        assert out[0] == "outcome shadow_selected", out
        assert "\n".join(out[1:]) == STYLED_BODY
        # The same message again once enabled: one request per message, ever.
        out = run_host(tmp_path, guide_config("enabled"), data_root, "sched-0001", weekly=True)
        assert out[0] == "outcome already_attempted", out
        # A new message in enabled mode: styled, published, reported selected.
        out = run_host(tmp_path, guide_config("enabled"), data_root, "sched-0002", weekly=True)
        assert out[0] == "outcome accepted", out
        styled = "\n".join(out[1:])
        hold = next(line for line in out if line.endswith(STYLED_HOLD))
        assert hold in ("다만 " + STYLED_HOLD, "다만, " + STYLED_HOLD), styled
        assert styled == STYLED_BODY.replace("\n" + STYLED_HOLD, "\n" + hold, 1)
        assert wait_for(
            lambda: any(
                b'"outcome":"selected"' in p.read_bytes()
                for p in (data_root / "outcomes").glob("*.jsonl")
            )
        )
    finally:
        sup.stop()
    # Only the two weekly messages reached the worker (two attempts, two ends).
    rows = journal_rows(data_root)
    assert sorted(r["outcome"] for r in rows if r["state"] == "finalized") == [
        "selected",
        "shadow_selected",
    ]


def test_the_guides_host_says_worker_unavailable_without_a_worker(
    tmp_path: Path, data_root: Path
) -> None:
    # The styled weekly needs the worker; the guide's daily reply never asks it.
    out = run_host(tmp_path, guide_config("shadow"), data_root, "sched-0003", weekly=True)
    assert out[0] == "outcome worker_unavailable"
    out = run_host(tmp_path, guide_config("shadow"), data_root, "evt-0003")
    assert out[0] == "outcome nothing_to_style"

"""The Korean guide's minimal host runs as written: its ``python`` block is taken
out of docs/operator-guide.ko.md and run, in a process of its own without the key,
against a real rehearsal worker (`kexpr supervise --rehearsal`), with the guide's
own config block switched to shadow and then to enabled. It also shows what the
guide says of one message shown in shadow and then in enabled: ``already_attempted``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ops_tests.ops_support import start_supervisor, wait_for

from kexpr.spool.contract import SAFE_STYLE_LEXEMES

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
GUIDE = (REPO / "docs" / "operator-guide.ko.md").read_text("utf-8")
FAST = ("--rehearsal", "--tokens-per-second", "100000", "--first-token-seconds", "0")


def host_script() -> str:
    (code,) = re.findall(
        r"<!-- guide-host: kexpr_host_example.py -->\n```python\n(.*?)```", GUIDE, re.S
    )
    return code


def guide_config(mode: str) -> str:
    blocks = re.findall(r"```yaml\n(.*?)```", GUIDE, re.S)
    (block,) = [b for b in blocks if "korean_expression_postprocessor" in b]
    assert "mode: disabled " in block and "daily: false" in block
    return block.replace("mode: disabled ", f"mode: {mode} ").replace("daily: false", "daily: true")


def run_host(tmp_path: Path, config: str, data_root: Path, event: str) -> list[str]:
    script = tmp_path / "kexpr_host_example.py"
    script.write_text(host_script(), "utf-8")
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


def test_the_guides_host_runs_against_the_rehearsal_worker(tmp_path: Path, data_root: Path) -> None:
    # Disabled (the guide's block as it is): canonical, and nothing is written.
    out = run_host(tmp_path, guide_config("disabled"), data_root, "evt-0000")
    assert out[0] == "outcome disabled" and not data_root.exists()
    sup = start_supervisor(data_root, key=None, extra_args=FAST)
    try:
        out = run_host(tmp_path, guide_config("shadow"), data_root, "evt-0001")
        assert out[0] == "outcome shadow_selected"
        body = "\n".join(out[1:])
        assert "저장된 오늘 기록을 확인했습니다." in body  # the canonical body is published
        # The same message again once enabled: one request per message, ever.
        out = run_host(tmp_path, guide_config("enabled"), data_root, "evt-0001")
        assert out[0] == "outcome already_attempted"
        # A new message in enabled mode: styled, published, reported selected.
        out = run_host(tmp_path, guide_config("enabled"), data_root, "evt-0002")
        assert out[0] == "outcome accepted"
        styled = "\n".join(out[1:])
        status_line = next(line for line in out if "저장된 오늘 기록을 확인했습니다" in line)
        assert status_line != "저장된 오늘 기록을 확인했습니다."
        assert any(word in status_line for word in SAFE_STYLE_LEXEMES), styled
        assert wait_for(
            lambda: any(
                b'"outcome":"selected"' in p.read_bytes()
                for p in (data_root / "outcomes").glob("*.jsonl")
            )
        )
    finally:
        sup.stop()


def test_the_guides_host_says_worker_unavailable_without_a_worker(
    tmp_path: Path, data_root: Path
) -> None:
    out = run_host(tmp_path, guide_config("shadow"), data_root, "evt-0003")
    assert out[0] == "outcome worker_unavailable"

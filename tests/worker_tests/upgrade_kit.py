"""The upgrade harness: an earlier release of this repository, built from its own
git history into a scratch venv, whose worker and shim run as real processes
beside today's (tests/worker_tests/test_upgrade.py and test_upgrade_key.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import TEST_KEY, journal_rows
from fakeapi import FakeOpenAI

from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

REPO = Path(__file__).resolve().parents[2]

# A shim in its own process, of whichever release's gateway_shim it imports: it
# presents the styled weekly body (kit.bodies.STYLED_BODY: a weekly report whose
# goal range is missing), artifact ``evt-<name>``, and reports as Hermes does. Every
# release since the weekly surface lays this body out the same way; what each
# release's shim sends for it is its own capsule.
SHIM = r"""
import json, sys
from pathlib import Path
from gateway_shim import (KoreanExpressionConfig, KoreanExpressionCoordinator, Mode,
                          WeeklyInterpretation, WeeklyJudgment, exact_block, format_weekly)
root = Path(sys.argv[1])
coords = {m: KoreanExpressionCoordinator(
    KoreanExpressionConfig.from_block(exact_block(m, weekly=True)), root)
    for m in (Mode.ENABLED, Mode.SHADOW)}
body = format_weekly(recent="72.40kg", prior="72.10kg", change="+0.42%", rate="85.71%",
                     goal_range="기록 없음", interpretation=WeeklyInterpretation.GOAL_MISSING,
                     judgment=WeeklyJudgment.RECORDS)
cands = {}
for line in sys.stdin:
    cmd, name, arg = line.split()
    if cmd == "present":
        c = coords[Mode(arg)].present_weekly(body, explicit_fields=(), schedule_key=f"evt-{name}",
                                             kind="weekly_report", kst_day="2025-11-30")
        cands[name] = c
        print(json.dumps({"outcome": c.outcome.value, "attempt_id": c.attempt_id}), flush=True)
    elif cmd == "report":
        coords[Mode.ENABLED].report(cands[name], arg)
        print(json.dumps({"reported": arg}), flush=True)
"""


def previous_release_style(capsule: dict[str, Any]) -> dict[str, str]:
    """What a release before the fit table accepts for every slot of its capsule:
    ``그리고`` before the first token (its grammar allowed any lexicon word in any
    place; today's table allows none there)."""
    return {
        str(s["slot_id"]): "그리고 " + " ".join(f"{t}." for t in s["required_placeholder_tokens"])
        for s in capsule["slots"]
    }


@dataclass
class OldRelease:
    python: Path
    # The working directory of its processes: ``python -m``/``-c`` put it first
    # on the path, and this repository's root holds today's top-level packages.
    cwd: Path


def release_source(
    commit: str, tmp_path_factory: pytest.TempPathFactory, name: str
) -> tuple[Path, Path]:
    """(scratch dir, source tree) of release ``commit``, read from this checkout's
    git history; skips when git cannot read it (not a checkout, a shallow clone, or
    a checkout git refuses to read for this user: safe.directory, another owner)."""
    git = shutil.which("git")
    if git is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the previous release is built from its history")
    probe = subprocess.run(
        [git, "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip("git cannot read the previous release from this checkout's history")
    scratch = tmp_path_factory.mktemp(name)
    src = scratch / "src"
    src.mkdir()
    archive = subprocess.run(
        [git, "-C", str(REPO), "archive", commit], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    return scratch, src


def scratch_venv(scratch: Path, *code: Path) -> Path:
    """The python of a scratch venv whose path holds ``code`` (the old release's
    folders) and this venv's third-party packages (pydantic, watchdog, openai: the
    same pins), not today's kexpr: its editable-install hook is a .pth of this
    venv's site-packages, which a path added by a .pth line never runs."""
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = sysconfig.get_paths()["purelib"]
    Path(site, "previous_release.pth").write_text("".join(f"{p}\n" for p in (*code, deps)))
    return python


def imports(python: Path, cwd: Path, code: str) -> str:
    """What ``code`` prints under ``python`` (its imports must succeed)."""
    check = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        cwd=cwd,
    )
    assert check.returncode == 0, check.stderr[-2000:]
    return check.stdout


def _env(fake: FakeOpenAI) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": TEST_KEY,
        "HTTPS_PROXY": fake.proxy_url,
        "SSL_CERT_FILE": str(fake.ca_file),
    }


def start_worker(
    python: Path, module: str, root: DataRoot, fake: FakeOpenAI, cwd: Path
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [str(python), "-m", module, "--data-root", str(root.root)],
        env=_env(fake),
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )
    if not wait_ready(root, 30.0, pid=proc.pid):
        proc.kill()
        proc.wait()
        raise AssertionError(f"{module} did not become ready")
    return proc


def stop_worker(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0


class Shim:
    """The old release's shim in its own process (the host, not restarted)."""

    def __init__(self, old: OldRelease, root: DataRoot) -> None:
        self.proc = subprocess.Popen(
            [str(old.python), "-c", SHIM, str(root.root)],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=old.cwd,
        )

    def ask(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = self.proc.stdout.readline()
        assert out, "the old shim died"
        return json.loads(out)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def final_outcomes(root: DataRoot) -> dict[str, str | None]:
    """attempt_id -> its terminal outcome (None: still open)."""
    out: dict[str, str | None] = {}
    for row in journal_rows(root.root):
        if row["outcome"] == "attempt_started":
            out.setdefault(row["attempt_id"], None)
        else:
            out[row["attempt_id"]] = row["outcome"]
    return out

"""An upgrade in place keeps what the host published.

Observed: a data root from the release before the attempt lifecycle (an
accepted attempt, the host published the styled body, its report written while
the worker was stopped for the upgrade), then today's worker: the attempt was
journaled ``claim_expired_canonical`` and the host's ``selected`` report
dropped as an orphan. That release's shim deleted the accepted response when it
read it, so today's "answered" test (an accepted response on disk) called the
attempt lost, and lost attempts were expired before reports were read.

The previous release is built from this repository's own history: `PREVIOUS`
is the last commit of ``main`` before the lifecycle merge (``fe706e7``), taken
with ``git archive`` into a scratch venv (this venv's dependencies, the old
release's own code; its import names are the old top-level ``worker``,
``gateway_shim``, ``spool``). Its worker and its shim run as real processes
against the loopback fake API; then today's worker runs on the same root, with
the old shim still running (the host not restarted yet).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import TEST_KEY, journal_rows
from fakeapi import FakeOpenAI, compose_reply, default_style

from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

REPO = Path(__file__).resolve().parents[2]
# main before the lifecycle merge: its shim deletes every response it reads.
PREVIOUS = "e598171"

_SHIM = r"""
import json, sys
from pathlib import Path
from gateway_shim import (DailyFacts, KoreanExpressionConfig, KoreanExpressionCoordinator,
                          Mode, exact_block, format_daily)
root = Path(sys.argv[1])
coords = {m: KoreanExpressionCoordinator(
    KoreanExpressionConfig.from_block(exact_block(m, daily=True)), root)
    for m in (Mode.ENABLED, Mode.SHADOW)}
cands = {}
for line in sys.stdin:
    cmd, name, arg = line.split()
    if cmd == "present":
        body = format_daily(weight=f"{60 + len(cands)}.4kg", intake="2,150kcal",
                            macros="탄수화물 260g · 단백질 138g · 지방 70g",
                            training="스쿼트 5세트", sleep="6.7시간 · 수면 질 4/5",
                            condition="4/5", digestion="정상", water="2.1L")
        c = coords[Mode(arg)].present_daily(body, facts=DailyFacts(complete=True),
                                           finalized_event_id=f"evt-{name}")
        cands[name] = c
        print(json.dumps({"outcome": c.outcome.value, "attempt_id": c.attempt_id}), flush=True)
    elif cmd == "report":
        coords[Mode.ENABLED].report(cands[name], arg)
        print(json.dumps({"reported": arg}), flush=True)
"""


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


@pytest.fixture(scope="module")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> OldRelease:
    scratch, src = release_source(PREVIOUS, tmp_path_factory, "previous-release")
    # A scratch venv whose path holds the old release's code and this venv's
    # third-party packages (pydantic, watchdog, openai: the same pins), not
    # today's kexpr: its editable-install hook is a .pth of this venv's
    # site-packages, which a path added by a .pth line never runs.
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
    Path(site, "previous_release.pth").write_text(f"{src}\n{src / 'queue'}\n{deps}\n")
    check = subprocess.run(
        [str(python), "-c", "import worker.daemon, gateway_shim, spool; print(spool.__file__)"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        cwd=scratch,
    )
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.startswith(str(src))
    return OldRelease(python, scratch)


def _env(fake: FakeOpenAI) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": TEST_KEY,
        "HTTPS_PROXY": fake.proxy_url,
        "SSL_CERT_FILE": str(fake.ca_file),
    }


def _worker(
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


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0


class Shim:
    """The old release's shim in its own process (the host, not restarted)."""

    def __init__(self, old: OldRelease, root: DataRoot) -> None:
        self.proc = subprocess.Popen(
            [str(old.python), "-c", _SHIM, str(root.root)],
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


@pytest.fixture
def shim_and_root(old_release: OldRelease, data_root: Path) -> Iterator[tuple[Shim, DataRoot]]:
    root = DataRoot(data_root)
    root.ensure()
    shim = Shim(old_release, root)
    try:
        yield shim, root
    finally:
        shim.close()


def _final(root: DataRoot) -> dict[str, str | None]:
    """attempt_id -> its terminal outcome (None: still open)."""
    out: dict[str, str | None] = {}
    for row in journal_rows(root.root):
        if row["outcome"] == "attempt_started":
            out.setdefault(row["attempt_id"], None)
        else:
            out[row["attempt_id"]] = row["outcome"]
    return out


def _until(pred: Any, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return bool(pred())


@pytest.mark.e2e
def test_the_previous_release_then_todays_worker_journals_what_the_host_published(
    old_release: OldRelease,
    shim_and_root: tuple[Shim, DataRoot],
    fake_api: FakeOpenAI,
) -> None:
    shim, root = shim_and_root
    fake_api.behaviour = compose_reply(default_style)
    old = _worker(old_release.python, "worker", root, fake_api, old_release.cwd)
    try:
        # A: accepted; the host publishes it during the upgrade (below).
        a = shim.ask("present a enabled")
        # B: accepted; the host fails to publish it, also reported during the upgrade.
        b = shim.ask("present b enabled")
        # C: shadow; its shim reports at once and the old worker journals it.
        c = shim.ask("present c shadow")
        # D: accepted; the host never reports (it crashed before its write).
        d = shim.ask("present d enabled")
        assert [x["outcome"] for x in (a, b, d)] == ["accepted"] * 3, (a, b, d)
        assert c["outcome"] == "shadow_selected"
        # The old shim deleted the accepted responses on read.
        assert not any(
            (root.responses / n).exists() for n in os.listdir(root.responses) if n.endswith(".json")
        )
    finally:
        _stop(old)  # stopped for the upgrade
    # The host's reports land while no worker runs.
    assert shim.ask("report a selected") == {"reported": "selected"}
    assert shim.ask("report b publication_failed") == {"reported": "publication_failed"}
    assert _final(root)[c["attempt_id"]] == "shadow_selected"

    new = _worker(Path(sys.executable), "kexpr.worker", root, fake_api, old_release.cwd)
    try:
        final = _final(root)
        # What the host really published, not claim_expired_canonical + an orphan.
        assert final[a["attempt_id"]] == "selected"
        assert final[b["attempt_id"]] == "publication_failed"
        assert final[c["attempt_id"]] == "shadow_selected"
        # D: no response (deleted on read) and no report: the host never
        # published it, and no owner can finish it.
        assert final[d["attempt_id"]] == "claim_expired_canonical"
        assert sorted(os.listdir(root.reports)) == []
        status = json.loads(root.status_file.read_bytes())
        assert status["counters"]["orphan_reports"] == 0
        # The old shim still runs (Hermes not restarted): today's worker answers
        # it in its own protocol version, and its report is journaled.
        e = shim.ask("present e enabled")
        assert e["outcome"] == "accepted"
        assert shim.ask("report e selected") == {"reported": "selected"}
        assert _until(lambda: _final(root).get(e["attempt_id"]) == "selected")
        # One wire request per artifact, ever: five artifacts, five requests.
        assert len(fake_api.requests) == 5
    finally:
        _stop(new)

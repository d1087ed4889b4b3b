"""Shared fixtures: real processes, a real proxy and a loopback fake of the API."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakeapi import FakeOpenAI

from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

TEST_KEY = "sk-test-kexpr-0000"


@pytest.fixture
def fake_api(tmp_path: Path) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(tmp_path / "fake") as fake:
        yield fake
        assert fake.errors == []


@dataclass
class RunningWorker:
    root: DataRoot
    supervisor: subprocess.Popen[bytes]

    def stop(self) -> int:
        if self.supervisor.poll() is None:
            self.supervisor.send_signal(signal.SIGTERM)
            try:
                self.supervisor.wait(20)
            except subprocess.TimeoutExpired:
                self.supervisor.kill()
                self.supervisor.wait()
        return self.supervisor.returncode


def start_supervised_worker(
    data_root: Path,
    fake: FakeOpenAI | None,
    *,
    key: str | None = TEST_KEY,
    python: str = sys.executable,
) -> RunningWorker:
    """``kexpr supervise`` exactly as an operator runs it: explicit env, the key,
    and the egress proxy + CA passed as operator flags. ``python``: the
    interpreter of the environment it runs from (a scratch venv's, for the
    dependency-range tests)."""
    root = DataRoot(data_root)
    root.ensure()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if key is not None:
        env["OPENAI_API_KEY"] = key
    cmd = [python, "-m", "kexpr.ops.cli", "supervise", "--data-root", str(data_root)]
    if fake is not None:
        cmd += ["--https-proxy", fake.proxy_url, "--ssl-cert-file", str(fake.ca_file)]
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
    running = RunningWorker(root, proc)
    if not wait_ready(root, 30.0):
        running.stop()
        raise AssertionError("worker did not become ready")
    return running


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    d = tmp_path / "data" / "korean-expression-v1"
    d.parent.mkdir(mode=0o700)
    return d


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    """A fresh, set-up data root under the test's own tmp_path."""
    r = DataRoot(tmp_path / "root")
    r.ensure()
    return r


def journal_rows(root: Path) -> list[dict[str, Any]]:
    """Every complete journal row under data root ``root``, oldest segment first.

    Tests poll this while a worker appends: a line without its newline yet is an
    append in progress (or one being undone), not a row, and is left for the next
    poll instead of failing the JSON parse."""
    rows: list[dict[str, Any]] = []
    for seg in sorted((root / "outcomes").glob("*.jsonl")):
        complete, _, _partial = seg.read_bytes().rpartition(b"\n")
        rows += [json.loads(line) for line in complete.decode("utf-8").splitlines()]
    return rows


# The worker tests' two fixtures (tests/worker_tests, tests/faults): one definition.
@pytest.fixture
def provider() -> Any:
    """A scripted provider (`worker_tests.test_daemon.Provider`) for `make_worker`."""
    from worker_tests.test_daemon import Provider

    return Provider()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A worker environment with a test key (set in this process too)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return {"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin"}


@contextlib.contextmanager
def mounted_tmpfs(mnt: Path, options: str, why: str) -> Iterator[Path]:
    """A tmpfs mounted at ``mnt`` (made here) with ``options`` for the test's run,
    unmounted after. Root only: as a regular user the test skips with ``why`` (the
    regular user's counterpart test, which injects the same failure)."""
    if os.geteuid() != 0:
        pytest.skip(f"mounting a tmpfs needs root ({why})")
    mnt.mkdir(mode=0o700)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"{options},mode=0700", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip("this container cannot mount a tmpfs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)

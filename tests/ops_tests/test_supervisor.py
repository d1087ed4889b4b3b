"""The supervisor: an explicit minimal worker environment, restart, clean stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import start_supervised_worker

from ops.supervisor import BASE_ENV, WorkerSpec, worker_command, worker_environment
from spool.layout import DataRoot
from worker.daemon import wait_ready


def test_worker_environment_is_an_allow_list(tmp_path: Path) -> None:
    source = {
        "OPENAI_API_KEY": "sk-live",
        "OPENAI_BASE_URL": "https://evil.example/v1",
        "OPENAI_ORG_ID": "org",
        "OPENAI_LOG": "debug",
        "OPENAI_CUSTOM_HEADERS": "Authorization: x",
        "SSLKEYLOGFILE": "/tmp/keys",
        "HTTPS_PROXY": "http://ambient:3128",
        "SSL_CERT_FILE": "/ambient.pem",
        "HOME": "/root",
        "PYTHONPATH": "/somewhere",
        "LD_PRELOAD": "/evil.so",
    }
    env = worker_environment(WorkerSpec(tmp_path), source)
    assert env == {**BASE_ENV, "OPENAI_API_KEY": "sk-live"}
    env = worker_environment(WorkerSpec(tmp_path, "http://127.0.0.1:9", "/ca.pem"), source)
    assert env == {**BASE_ENV, "OPENAI_API_KEY": "sk-live", "HTTPS_PROXY": "http://127.0.0.1:9", "SSL_CERT_FILE": "/ca.pem"}
    assert "OPENAI_API_KEY" not in worker_environment(WorkerSpec(tmp_path), {"HOME": "/"})


def test_worker_command_uses_an_absolute_data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cmd = worker_command(WorkerSpec(Path("rel/root")))
    assert cmd[:3] == [sys.executable, "-m", "worker"]
    assert Path(cmd[-1]).is_absolute()


def test_worker_refuses_hazardous_environment_as_a_process(tmp_path: Path) -> None:
    cases = (
        ({"OPENAI_BASE_URL": "https://evil"}, "openai_variable"),
        ({"SSLKEYLOGFILE": str(tmp_path / "k")}, "sslkeylogfile"),
    )
    for extra, finding in cases:
        out = subprocess.run(
            [sys.executable, "-m", "worker", "--data-root", str(tmp_path / "root")],
            env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk", **extra},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 78
        assert finding in out.stderr  # the enum, never the value
        assert "evil" not in out.stderr and str(tmp_path) not in out.stderr
        assert not (tmp_path / "k").exists()


def _worker_pid(root: DataRoot) -> int:
    return int(json.loads(root.status_file.read_bytes())["pid"])


def test_worker_environment_at_execve_holds_only_the_allow_list(data_root: Path) -> None:
    w = start_supervised_worker(data_root, None, key="sk-only-here")
    try:
        pid = _worker_pid(w.root)
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        names = sorted(item.split(b"=", 1)[0].decode() for item in raw.split(b"\0") if item)
        assert names == sorted({*BASE_ENV, "OPENAI_API_KEY"})
    finally:
        w.stop()


def test_supervisor_restarts_a_dead_worker_and_stops_cleanly(data_root: Path) -> None:
    w = start_supervised_worker(data_root, None)
    try:
        first = _worker_pid(w.root)
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if _worker_pid(w.root) != first and wait_ready(w.root, 0.1):
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        second = _worker_pid(w.root)
        assert second != first
        assert wait_ready(w.root, 10, pid=second)
    finally:
        code = w.stop()
    assert code == 0
    status = json.loads(w.root.status_file.read_bytes())
    assert status["state"] == "stopped"
    with pytest.raises(ProcessLookupError):
        os.kill(second, 0)

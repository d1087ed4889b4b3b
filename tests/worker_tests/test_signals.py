"""Only SIGTERM and SIGINT stop the worker, gracefully.

Observed: ``SIGUSR1``/``SIGUSR2`` terminated the worker (no handler, the
default action); the supervisor restarted it, and the presentations in flight
paid for it. The real worker process (``python -m kexpr.worker``, no key: each
request is answered ``credential_unavailable`` with zero HTTP)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kit.spool import await_answer, write_request

from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready
from kexpr.worker.main import IGNORED_SIGNALS


def _start(data_root: Path) -> tuple[DataRoot, subprocess.Popen[bytes]]:
    root = DataRoot(data_root)
    root.ensure()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kexpr.worker", "--data-root", str(data_root)],
        env=env,
        stdin=subprocess.DEVNULL,
    )
    if not wait_ready(root, 30.0, pid=proc.pid):
        proc.kill()
        proc.wait()
        raise AssertionError("worker did not become ready")
    return root, proc


def test_the_ignored_signals_are_the_three_without_meaning() -> None:
    assert set(IGNORED_SIGNALS) == {signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2}


@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["term", "int"])
def test_usr1_usr2_and_hup_leave_the_worker_serving(data_root: Path, stop: signal.Signals) -> None:
    root, proc = _start(data_root)
    try:
        for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
            proc.send_signal(signum)
        # The old worker died of the first one at once (returncode -SIGUSR1).
        end = time.monotonic() + 1.0
        while time.monotonic() < end and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None
        assert await_answer(root, write_request(root, 1))["outcome"] == "credential_unavailable"
        status = json.loads(root.status_file.read_bytes())
        assert status["pid"] == proc.pid and status["state"] == "ready"
        proc.send_signal(stop)
        assert proc.wait(20) == 0
        assert json.loads(root.status_file.read_bytes())["state"] == "stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

"""Process-level concurrency and crash behaviour (issue 4), black-box: real
``kexpr supervise`` / worker processes, real shim processes, the loopback fake."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import TEST_KEY, start_supervised_worker
from fakeapi import FakeOpenAI, compose_reply, default_style

from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

# Real processes (design §10 black-box): the registered `e2e` marker; included in
# the default run (`make test`) in this short, bounded form.
pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
GATEWAY_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def _shim(root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "shim_driver.py"), "--data-root", str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=GATEWAY_ENV,
        text=True,
        bufsize=1,
    )


def _line(p: subprocess.Popen[str]) -> dict[str, Any]:
    assert p.stdout is not None
    return json.loads(p.stdout.readline())


@pytest.mark.parametrize("mode", ["shadow", "enabled"])
def test_several_shims_submitting_one_artifact_at_once_make_one_request(
    data_root: Path, fake_api: FakeOpenAI, mode: str
) -> None:
    fake_api.behaviour = compose_reply(default_style, delay_s=0.8)  # all arrive while in flight
    w = start_supervised_worker(data_root, fake_api)
    shims = [_shim(data_root) for _ in range(4)]
    try:
        assert all(_line(s)["kind"] == "ready" for s in shims)
        cmd = (
            json.dumps({"id": 1, "event": "evt-same-artifact", "mode": mode, "host": "selected"})
            + "\n"
        )
        gate = threading.Barrier(len(shims))

        def go(s: subprocess.Popen[str]) -> None:
            assert s.stdin is not None
            gate.wait()
            s.stdin.write(cmd)
            s.stdin.flush()

        threads = [threading.Thread(target=go, args=(s,)) for s in shims]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        got = [_line(s) for s in shims]
        for s in shims:
            assert s.stdin is not None
            s.stdin.close()
            s.wait(30)
    finally:
        for s in shims:
            if s.poll() is None:
                s.kill()
                s.wait()
            for f in (s.stdin, s.stdout):
                if f is not None and not f.closed:
                    f.close()
        w.stop()
    akeys = {g["artifact_key"] for g in got}
    assert len(akeys) == 1
    assert fake_api.count_for(akeys.pop()) == 1 and len(fake_api.requests) == 1
    outcomes = sorted(g["outcome"] for g in got)
    winner = "accepted" if mode == "enabled" else "shadow_selected"
    # The property is the one request. Which shim won, and whether the winner beat
    # its 4 s wait on a loaded machine (else: timeout, canonical), may vary.
    assert outcomes.count(winner) <= 1, outcomes
    assert set(outcomes) - {winner} <= {"in_flight", "already_attempted", "timeout"}, outcomes
    assert all(g["body"] in ("canonical", "selected") for g in got)
    selected = [g for g in got if g["body"] == "selected"]
    assert len(selected) == outcomes.count("accepted") and all(
        g["outcome"] == "accepted" for g in selected
    )
    Journal(DataRoot(data_root)).load()


def test_a_second_worker_on_one_data_root_refuses_as_a_process(data_root: Path) -> None:
    env = {**GATEWAY_ENV, "OPENAI_API_KEY": TEST_KEY}
    cmd = [sys.executable, "-m", "kexpr.worker", "--data-root", str(data_root)]
    first = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
    try:
        assert wait_ready(DataRoot(data_root), 30, pid=first.pid)
        second = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert second.returncode == 73  # ANOTHER_WORKER: the lock, not a race
        assert "another_worker" in second.stderr
        assert first.poll() is None  # the first is untouched
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(30)
    assert first.returncode == 0


def test_a_sigkilled_supervisors_worker_stops_on_its_own(data_root: Path) -> None:
    """PR_SET_PDEATHSIG: the orphan gets SIGTERM, stops gracefully and frees
    worker.lock, so that the next supervisor's worker can start."""
    w = start_supervised_worker(data_root, None)
    root = DataRoot(data_root)
    worker_pid = json.loads(root.status_file.read_bytes())["pid"]
    w.supervisor.send_signal(signal.SIGKILL)
    w.supervisor.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _running(worker_pid):
        time.sleep(0.05)
    assert not _running(worker_pid), "the orphaned worker is still running"
    assert json.loads(root.status_file.read_bytes())["state"] == "stopped"  # graceful
    again = start_supervised_worker(data_root, None)
    try:
        assert json.loads(root.status_file.read_bytes())["pid"] != worker_pid
    finally:
        assert again.stop() == 0


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")

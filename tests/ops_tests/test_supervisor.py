"""The supervisor: an explicit minimal worker environment, restart with backoff,
crash-loop stop, heartbeat status, clean stop; and the worker's non-dumpable start."""

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
from kit.supervisor import ExitedChild
from ops_support import NOGROUP, kexpr, start_supervisor, wait_for

from kexpr.ops.supervisor import (
    BASE_ENV,
    CRASH_LOOP_EXIT,
    FATAL_EXITS,
    Action,
    RestartPolicy,
    RestartTracker,
    Supervisor,
    WorkerSpec,
    supervisor_status_path,
    worker_command,
    worker_environment,
)
from kexpr.spool.layout import ROOT_ID_VARIABLE, DataRoot
from kexpr.worker.daemon import wait_ready
from kexpr.worker.exitcodes import ExitCode


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
    assert env == {
        **BASE_ENV,
        "OPENAI_API_KEY": "sk-live",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "SSL_CERT_FILE": "/ca.pem",
    }
    assert "OPENAI_API_KEY" not in worker_environment(WorkerSpec(tmp_path), {"HOME": "/"})


def test_worker_command_uses_an_absolute_data_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cmd = worker_command(WorkerSpec(Path("rel/root")))
    assert cmd[:3] == [sys.executable, "-m", "kexpr.worker"]
    assert Path(cmd[cmd.index("--data-root") + 1]).is_absolute()


def test_worker_refuses_hazardous_environment_as_a_process(tmp_path: Path) -> None:
    cases = (
        ({"OPENAI_BASE_URL": "https://evil"}, "openai_variable"),
        ({"SSLKEYLOGFILE": str(tmp_path / "k")}, "sslkeylogfile"),
    )
    for extra, finding in cases:
        out = subprocess.run(
            [sys.executable, "-m", "kexpr.worker", "--data-root", str(tmp_path / "root")],
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


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="reading a non-dumpable worker's /proc/PID/environ needs root (CAP_SYS_PTRACE); the non-root counterpart is test_worker_environment_is_closed_to_its_own_user",
)
def test_worker_environment_at_execve_holds_only_the_allow_list(data_root: Path) -> None:
    w = start_supervised_worker(data_root, None, key="sk-only-here")
    try:
        pid = _worker_pid(w.root)
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        items = dict(item.split(b"=", 1) for item in raw.split(b"\0") if item)
        names = sorted(name.decode() for name in items)
        # The checked root's identity is the one value the supervisor adds itself.
        assert names == sorted({*BASE_ENV, "OPENAI_API_KEY", ROOT_ID_VARIABLE})
        ident = DataRoot(data_root).identity()
        assert items[ROOT_ID_VARIABLE.encode()] == f"{ident.dev}:{ident.ino}".encode()
    finally:
        w.stop()


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root reads every environment; as root the allow-list itself is read (test_worker_environment_at_execve_holds_only_the_allow_list)",
)
def test_worker_environment_is_closed_to_its_own_user(data_root: Path) -> None:
    """Not root: the worker runs as this very user, and still its environment (the
    key) cannot be read: it made itself non-dumpable before anything else."""
    w = start_supervised_worker(data_root, None, key="sk-only-here")
    try:
        pid = _worker_pid(w.root)
        assert os.stat(f"/proc/{pid}").st_uid == os.geteuid()  # the same user
        with pytest.raises(PermissionError):
            Path(f"/proc/{pid}/environ").read_bytes()
        # The supervisor, same user and dumpable, is readable: the refusal is the worker's own.
        assert b"PATH=" in Path(f"/proc/{w.supervisor.pid}/environ").read_bytes()
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


# ----------------------------------------------------------------- restart policy
# The decision is pure (ops.supervisor.RestartTracker): tested with a hand-driven
# clock, never with sleeps.


def test_backoff_doubles_to_the_cap_and_resets_after_a_healthy_run() -> None:
    t = RestartTracker(
        RestartPolicy(backoff_start_s=0.5, backoff_max_s=4.0, healthy_after_s=60, max_restarts=100)
    )
    now = 0.0
    delays = []
    for _ in range(6):
        now += 1
        d = t.on_exit(1, ran_s=1.0, now=now)
        assert d.action is Action.RESTART
        delays.append(d.delay_s)
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    now += 1000
    assert t.on_exit(1, ran_s=120.0, now=now).delay_s == 0.5


def test_crash_loop_is_more_than_max_restarts_within_the_window() -> None:
    t = RestartTracker(RestartPolicy(max_restarts=3, window_s=100))
    assert [t.on_exit(-9, 0.1, now).action for now in (0, 10, 20)] == [Action.RESTART] * 3
    assert t.on_exit(-9, 0.1, 30).action is Action.STOP_CRASH_LOOP


def test_exits_outside_the_window_do_not_count() -> None:
    t = RestartTracker(RestartPolicy(max_restarts=3, window_s=100))
    for now in (0, 50, 150, 250, 350, 450):  # never more than 2 within any 100 s
        assert t.on_exit(1, 0.1, now).action is Action.RESTART


def test_fatal_exits_are_never_restarted() -> None:
    assert FATAL_EXITS == {
        int(ExitCode.HAZARDOUS_ENVIRONMENT),
        int(ExitCode.UNSAFE_DATA_ROOT),
        int(ExitCode.NOT_UNDUMPABLE),
        int(ExitCode.UNSUPPORTED_DEPENDENCY),
    }
    for code in FATAL_EXITS:
        assert RestartTracker(RestartPolicy()).on_exit(code, 0.1, 0).action is Action.STOP_FATAL
    # Another live worker is transient (an orphan draining its last call): restarted.
    assert (
        RestartTracker(RestartPolicy()).on_exit(int(ExitCode.ANOTHER_WORKER), 0.1, 0).action
        is Action.RESTART
    )


def test_supervisor_loop_stops_on_a_crash_loop_and_records_it(
    data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    DataRoot(data_root).ensure()
    spawned: list[ExitedChild] = []

    def spawn() -> ExitedChild:
        spawned.append(ExitedChild(1))
        return spawned[-1]

    sup = Supervisor(
        WorkerSpec(data_root),
        {},
        policy=RestartPolicy(backoff_start_s=0.001, backoff_max_s=0.001, max_restarts=4),
        spawn=spawn,
    )
    assert sup.run() == CRASH_LOOP_EXIT
    assert len(spawned) == 5 and sup.restarts == 4
    assert "crash_loop" in capsys.readouterr().err
    status = json.loads(supervisor_status_path(DataRoot(data_root)).read_bytes())
    assert status["state"] == "crash_loop" and status["restarts"] == 4 and status["last_exit"] == 1
    assert set(status) == {
        "schema",
        "pid",
        "state",
        "heartbeat_at_utc",
        "worker_pid",
        "restarts",
        "last_exit",
        "rehearsal",
        "policy",
    }
    assert status["rehearsal"] is False  # a rehearsal says so; this is no rehearsal


def test_supervisor_loop_stops_at_once_on_a_fatal_exit(data_root: Path) -> None:
    sup = Supervisor(
        WorkerSpec(data_root), {}, spawn=lambda: ExitedChild(int(ExitCode.HAZARDOUS_ENVIRONMENT))
    )
    assert sup.run() == int(ExitCode.HAZARDOUS_ENVIRONMENT)
    assert sup.restarts == 0


# ----------------------------------------------------------------- real processes


def test_crash_loop_stops_supervising_with_a_diagnostic(data_root: Path) -> None:
    """Kill the worker each time it is up: after --max-restarts the supervisor
    gives up (exit 70, enum diagnostic) and `kexpr status` says crash_loop."""
    sup = start_supervisor(data_root, extra_args=["--max-restarts", "2", "--restart-window", "120"])
    try:
        killed: set[int] = set()
        while sup.proc.poll() is None and len(killed) < 5:
            assert wait_for(
                lambda: (
                    sup.proc.poll() is not None
                    or (wait_ready(sup.root, 0.1) and sup.worker_pid() not in killed)
                )
            )
            if sup.proc.poll() is not None:
                break
            pid = sup.worker_pid()
            killed.add(pid)
            os.kill(pid, signal.SIGKILL)
        sup.proc.wait(30)
    finally:
        sup.stop()
    assert sup.proc.returncode == CRASH_LOOP_EXIT
    assert len(killed) == 3
    assert "kexpr supervise: crash_loop" in sup.stderr
    out = kexpr("status", "--data-root", data_root, "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert report["verdict"] == "crash_loop"
    assert report["supervisor"]["state"] == "crash_loop" and report["supervisor"]["restarts"] == 2


def test_status_reports_a_healthy_supervised_worker_and_then_a_stopped_one(data_root: Path) -> None:
    sup = start_supervisor(data_root, key="sk-status-secret-value-000")
    try:
        assert wait_for(
            lambda: (
                json.loads(kexpr("status", "--data-root", data_root, "--json").stdout)["supervisor"]
                is not None
            )
        )
        out = kexpr("status", "--data-root", data_root)
        assert out.returncode == 0, out.stdout
        assert "verdict     healthy" in out.stdout
        assert "sk-status-secret-value-000" not in out.stdout
        report = json.loads(kexpr("status", "--data-root", data_root, "--json").stdout)
        assert report["worker"]["state"] == "ready" and report["worker"]["alive"] is True
        assert (
            report["worker"]["credential"] == "present"
            and report["worker"]["journal"] == "verified"
        )
        assert report["supervisor"]["state"] == "running"
        assert report["supervisor"]["worker_pid"] == report["worker"]["pid"]
    finally:
        assert sup.stop() == 0
    out = kexpr("status", "--data-root", data_root, "--json")
    assert out.returncode == 1
    assert json.loads(out.stdout)["verdict"] == "stopped"


def test_worker_makes_itself_undumpable_and_verifies_it() -> None:
    from kexpr.worker.main import PR_GET_DUMPABLE, PR_SET_DUMPABLE, make_undumpable

    calls: list[tuple[int, int]] = []
    state = {"dumpable": 1}

    def prctl(option: int, arg: int, *_: int) -> int:
        calls.append((option, arg))
        if option == PR_SET_DUMPABLE:
            state["dumpable"] = arg
            return 0
        return state["dumpable"]

    assert make_undumpable(prctl) is True
    assert calls == [(PR_SET_DUMPABLE, 0), (PR_GET_DUMPABLE, 0)]
    # Fail closed: a refused prctl, or one that does not hold, is not undumpable.
    assert make_undumpable(lambda *a: -1) is False
    assert make_undumpable(lambda option, *a: 0 if option == PR_SET_DUMPABLE else 1) is False


def test_supervised_worker_is_non_dumpable_by_the_kernels_own_account(data_root: Path) -> None:
    """proc(5): the files of a non-dumpable process's /proc/PID are root:root. As
    root the worker runs under a non-root group here so that the two cases can be
    told apart; as another user its own group already differs from root's."""
    as_root = os.geteuid() == 0
    gid = NOGROUP if as_root else os.getegid()
    assert gid != 0
    sup = start_supervisor(data_root, group=NOGROUP if as_root else None)
    try:
        pid = sup.worker_pid()
        assert os.stat(f"/proc/{pid}").st_gid == gid  # the directory keeps the ids
        assert os.stat(f"/proc/{sup.proc.pid}/environ").st_gid == gid  # supervisor: dumpable
        st = os.stat(f"/proc/{pid}/environ")
        assert (st.st_uid, st.st_gid) == (0, 0)
    finally:
        sup.stop()


def test_the_supervisor_ignores_the_signals_the_worker_ignores() -> None:
    from kexpr.ops.supervisor import SUPERVISOR_IGNORED_SIGNALS
    from kexpr.worker.main import IGNORED_SIGNALS

    assert SUPERVISOR_IGNORED_SIGNALS == IGNORED_SIGNALS


def test_usr1_usr2_and_hup_leave_supervision_running(data_root: Path) -> None:
    """The supervisor once died of SIGUSR1 (the default action), and its
    worker with it; only SIGTERM and SIGINT stop it."""
    w = start_supervised_worker(data_root, None)
    try:
        worker = _worker_pid(w.root)
        for signum in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
            w.supervisor.send_signal(signum)
        # The old supervisor died at once of the first; wait a moment for it to.
        end = time.monotonic() + 1.0
        while time.monotonic() < end and w.supervisor.poll() is None:
            time.sleep(0.05)
        assert w.supervisor.poll() is None
        assert _worker_pid(w.root) == worker and wait_ready(w.root, 5, pid=worker)
    finally:
        code = w.stop()
    assert code == 0

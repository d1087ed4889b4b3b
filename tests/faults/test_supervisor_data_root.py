"""Issue 14 item 3: ``kexpr supervise`` applies the worker's own path rules to
the data root, passes the path it checked (never a resolved one) and re-checks
it at every restart; refusing is exit 74 (`ExitCode.UNSAFE_DATA_ROOT`), not a
crash loop. Real supervisor and worker processes."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from kit.spool import write_request
from kit.supervisor import ExitedChild
from ops_tests.ops_support import kexpr, start_supervisor, wait_for

from kexpr.ops.supervisor import (
    BASE_ENV,
    Child,
    RestartPolicy,
    Supervisor,
    WorkerSpec,
    worker_command,
    worker_environment,
)
from kexpr.spool.fsio import FileId
from kexpr.spool.layout import ROOT_ID_VARIABLE, DataRoot, format_root_id, parse_root_id
from kexpr.worker.exitcodes import ExitCode

pytestmark = pytest.mark.e2e


def test_the_worker_gets_the_path_as_given_not_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    cmd = worker_command(WorkerSpec(link))
    # The old code passed str(real): the symlink followed.
    assert cmd[cmd.index("--data-root") + 1] == str(link)


def test_supervise_refuses_a_symlinked_data_root_with_74(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    r = kexpr("supervise", "--data-root", link, timeout=60)
    assert r.returncode == int(ExitCode.UNSAFE_DATA_ROOT)
    assert r.stderr.strip() == "kexpr supervise: unsafe_data_root: symlink"
    assert "Traceback" not in r.stderr
    assert os.listdir(real) == []  # no worker ever ran in the target


@pytest.mark.parametrize("swap", ["symlink", "other_directory", "removed"])
def test_a_swapped_data_root_is_refused_at_the_restart(data_root: Path, swap: str) -> None:
    sup = start_supervisor(data_root)
    try:
        worker = sup.worker_pid()
        moved = data_root.with_name("moved")
        os.rename(data_root, moved)
        other = data_root.with_name("other")
        other.mkdir(mode=0o700)
        if swap == "symlink":
            data_root.symlink_to(other)
        elif swap == "other_directory":
            os.rename(other, data_root)
        os.kill(worker, signal.SIGKILL)
        # The old code restarted the worker on the swapped-in directory, with an
        # empty journal; now the supervisor stops with 74 at once.
        assert wait_for(lambda: sup.proc.poll() is not None, timeout=30)
        assert sup.stop() == int(ExitCode.UNSAFE_DATA_ROOT)
        expected = {
            "symlink": "symlink",
            "other_directory": "inode_changed",
            "removed": "data_root_missing",
        }
        assert f"kexpr supervise: unsafe_data_root: {expected[swap]}" in sup.stderr
        assert "Traceback" not in sup.stderr
        assert not os.path.exists(other / "outcomes") and not os.path.exists(data_root / "outcomes")
    finally:
        sup.stop()


def test_a_root_swapped_right_after_the_first_worker_made_it_is_refused(data_root: Path) -> None:
    """The first worker made the missing root; the supervisor learnt its identity
    only at a later poll, so a swap before that poll was taken for the root
    itself and the next worker ran in the swapped-in directory (a chance failure
    of the real-process test above). The supervisor now makes the root before
    the first worker starts."""
    spawned: list[int] = []

    def spawn() -> ExitedChild:
        spawned.append(1)
        if len(spawned) > 1:
            return ExitedChild(int(ExitCode.HAZARDOUS_ENVIRONMENT))  # a second start: stop
        # The worker: its root is there; it is swapped, and the worker killed.
        assert (data_root / "outcomes").is_dir()
        os.rename(data_root, data_root.with_name("moved"))
        data_root.mkdir(mode=0o700)
        return ExitedChild(-int(signal.SIGKILL))

    sup = Supervisor(
        WorkerSpec(data_root), {}, policy=RestartPolicy(backoff_start_s=0.01), spawn=spawn
    )
    assert not data_root.exists()
    assert sup.run() == int(ExitCode.UNSAFE_DATA_ROOT)
    assert len(spawned) == 1 and not (data_root / "outcomes").exists()


def test_a_missing_root_the_supervisor_cannot_make_is_refused_before_any_worker(
    data_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first start's `DataRoot.ensure` refusing (the worker's own rules) is the
    supervisor's refusal: exit 74 with the reason, and no worker is started."""
    from kexpr.spool.fsio import UnsafePath, UnsafeReason
    from kexpr.spool.layout import DataRoot

    def refuse(self: DataRoot) -> None:
        raise UnsafePath(UnsafeReason.BAD_MODE)

    monkeypatch.setattr(DataRoot, "ensure", refuse)
    spawned: list[int] = []

    def spawn() -> ExitedChild:
        spawned.append(1)
        return ExitedChild(0)

    sup = Supervisor(WorkerSpec(data_root), {}, spawn=spawn)
    assert sup.run() == int(ExitCode.UNSAFE_DATA_ROOT)
    assert spawned == [] and not data_root.exists()
    assert "kexpr supervise: unsafe_data_root: bad_mode" in capsys.readouterr().err


def _quiet_files(top: Path, sub: str) -> list[str]:
    d = top / sub
    return sorted(os.listdir(d)) if d.is_dir() else []


def test_a_root_swapped_before_the_worker_opens_it_is_never_served(
    data_root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The supervisor checked the root, then handed the worker only a path it
    opened ~0.5 s later: a directory swapped in meanwhile was served with an
    empty journal (its requests claimed and journaled, what the real root had
    paid paid again). Now the worker is handed the checked identity and refuses
    any other directory: exit 74, nothing claimed in either, no row anywhere.
    A real worker process, started by the supervisor's own `_start`."""
    checked = DataRoot(data_root)
    checked.ensure()
    write_request(checked, 1)
    moved = data_root.with_name("moved")
    spawned: list[int] = []

    def spawn() -> Child:
        spawned.append(1)
        if len(spawned) > 1:
            return ExitedChild(int(ExitCode.HAZARDOUS_ENVIRONMENT))  # never a second start
        # Between the supervisor's check and the worker's open: another set-up
        # root, with a request of its own, takes the path.
        os.rename(data_root, moved)
        other = DataRoot(data_root.with_name("other"))
        other.ensure()
        write_request(other, 2)
        os.rename(other.root, data_root)
        return sup._start()

    sup = Supervisor(
        WorkerSpec(data_root), {}, policy=RestartPolicy(backoff_start_s=0.01), spawn=spawn
    )
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(sup.run()))
    runner.start()
    served = DataRoot(data_root)
    # The old worker served the swapped-in root: its request was answered.
    wait_for(lambda: not runner.is_alive() or _quiet_files(data_root, "spool/responses"), 30)
    sup.stop.set()
    runner.join(30)
    assert not runner.is_alive()
    err = capfd.readouterr().err
    assert codes == [int(ExitCode.UNSAFE_DATA_ROOT)] and len(spawned) == 1
    assert "kexpr worker: refusing the data root: inode_changed" in err
    assert "Traceback" not in err
    for top, rid in ((moved, 1), (data_root, 2)):
        assert _quiet_files(top, "spool/requests") == [f"{rid:032x}.json"]
        assert _quiet_files(top, "spool/claimed") == []
        assert _quiet_files(top, "spool/responses") == []
        assert _quiet_files(top, "outcomes") == []
    assert not served.worker_lock.exists()  # the worker locked nothing there either


def test_the_worker_is_handed_the_root_the_supervisor_checked(data_root: Path) -> None:
    """Its environment carries the checked identity; the allow-list is otherwise
    unchanged, and the variable is never taken from the supervisor's own."""
    sup = Supervisor(WorkerSpec(data_root), {ROOT_ID_VARIABLE: "1:2", "OPENAI_API_KEY": "sk-x"})
    assert sup.check_data_root(restart=False) is None
    ident = DataRoot(data_root).identity()
    env = worker_environment(WorkerSpec(data_root), {ROOT_ID_VARIABLE: "1:2"}, ident)
    assert env == {**BASE_ENV, ROOT_ID_VARIABLE: f"{ident.dev}:{ident.ino}"}
    assert ROOT_ID_VARIABLE not in worker_environment(
        WorkerSpec(data_root), {ROOT_ID_VARIABLE: "1:2"}
    )
    assert parse_root_id(format_root_id(ident)) == ident


@pytest.mark.parametrize(
    ("value", "reason"),
    [("0:0", "inode_changed"), ("1:", "root_id_malformed"), ("+1:2", "root_id_malformed")],
)
def test_a_worker_handed_another_root_refuses_to_start(
    root: DataRoot, value: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 74 with the enum word, before the worker lock or any claim."""
    from kexpr.worker.daemon import Worker

    write_request(root, 1)
    worker = Worker(root, environ={ROOT_ID_VARIABLE: value}, client_factory=lambda: None)
    stop = threading.Event()
    bound = threading.Timer(10.0, stop.set)  # a worker that serves stops, and fails below
    bound.start()
    try:
        assert worker.run(stop) is ExitCode.UNSAFE_DATA_ROOT
    finally:
        bound.cancel()
    assert capsys.readouterr().err == f"kexpr worker: refusing the data root: {reason}\n"
    assert os.listdir(root.claimed) == [] and os.listdir(root.outcomes) == []
    assert not root.worker_lock.exists()


def test_a_root_swapped_after_the_worker_checked_it_is_never_remembered(root: DataRoot) -> None:
    """The swap lands between the worker's check and its start-up walk: the walk
    is not remembered (quarantine ``inode_changed``), and no operator's clear
    adopts that root later."""
    from kexpr.worker.quarantine import Quarantine
    from kexpr.worker.status import Counters

    q = Quarantine(root, Counters())
    q.checked_root = FileId(root.identity().dev, root.identity().ino + 1)
    assert q.remember_tree() is False
    assert q.reason == "inode_changed"
    q2 = Quarantine(root, Counters())
    q2.checked_root = root.identity()
    assert q2.remember_tree() is True and q2.reason is None

"""Issue 14 item 3: ``kexpr supervise`` applies the worker's own path rules to
the data root, passes the path it checked (never a resolved one) and re-checks
it at every restart; refusing is exit 74 (`ExitCode.UNSAFE_DATA_ROOT`), not a
crash loop. Real supervisor and worker processes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from kit.supervisor import ExitedChild
from ops_tests.ops_support import kexpr, start_supervisor, wait_for

from kexpr.ops.supervisor import RestartPolicy, Supervisor, WorkerSpec, worker_command
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

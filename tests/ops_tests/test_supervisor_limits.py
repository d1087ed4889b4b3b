"""`kexpr supervise` starts the worker with RLIMIT_AS and RLIMIT_NPROC lowered
(ops/supervisor.py rule 6; docs/systemd.md "Memory and tasks")."""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import pytest
from conftest import start_supervised_worker

from kexpr.ops import supervisor
from kexpr.spool.layout import DataRoot


def _limits(pid: int) -> dict[str, tuple[str, str]]:
    """``/proc/<pid>/limits``: name -> (soft, hard)."""
    out: dict[str, tuple[str, str]] = {}
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines()[1:]:
        name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
        out[name] = (soft, hard)
    return out


def test_the_supervised_worker_runs_under_its_limits(data_root: Path) -> None:
    running = start_supervised_worker(data_root, None)
    try:
        pid = int(json.loads(DataRoot(data_root).status_file.read_bytes())["pid"])
        limits = _limits(pid)
    finally:
        running.stop()
    as_bytes = str(supervisor.WORKER_ADDRESS_SPACE_BYTES)
    assert limits["Max address space"] == (as_bytes, as_bytes)
    soft, hard = limits["Max processes"]
    assert soft == hard != "unlimited"
    assert supervisor.WORKER_TASKS_HEADROOM < int(soft)


def test_the_limits_are_never_above_the_supervisors_own(monkeypatch: pytest.MonkeyPatch) -> None:
    own = {resource.RLIMIT_AS: 1024**3, resource.RLIMIT_NPROC: 100}
    monkeypatch.setattr(resource, "getrlimit", lambda res: (own[res], resource.RLIM_INFINITY))
    assert dict(supervisor.worker_rlimits()) == own


def test_the_task_limit_is_the_users_tasks_plus_the_headroom(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        resource, "getrlimit", lambda res: (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
    )
    monkeypatch.setattr(supervisor, "_user_tasks", lambda uid: 40)
    assert dict(supervisor.worker_rlimits()) == {
        resource.RLIMIT_AS: supervisor.WORKER_ADDRESS_SPACE_BYTES,
        resource.RLIMIT_NPROC: 40 + supervisor.WORKER_TASKS_HEADROOM,
    }
    monkeypatch.setattr(supervisor, "_user_tasks", lambda uid: None)
    assert dict(supervisor.worker_rlimits()) == {
        resource.RLIMIT_AS: supervisor.WORKER_ADDRESS_SPACE_BYTES
    }


def test_the_users_tasks_are_counted_from_proc() -> None:
    mine = supervisor._user_tasks(os.getuid())
    assert mine is not None and mine >= 1
    assert supervisor._user_tasks(2**31 - 3) == 0  # no such user runs anything

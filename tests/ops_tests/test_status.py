"""`kexpr status`: verdicts from the status files alone; nothing unvalidated echoed."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from ops_support import kexpr

from kexpr.ops.status_cli import EXIT, Verdict, collect, render
from kexpr.ops.supervisor import supervisor_status_path
from kexpr.spool.layout import DataRoot

NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def _ts(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj))
    os.chmod(path, 0o600)


def _worker(state: str = "ready", age: float = 0.5, pid: int = 4242) -> dict[str, object]:
    return {
        "schema": "kexpr-worker-status-v1",
        "pid": pid,
        "state": state,
        "started_at_utc": _ts(100),
        "heartbeat_at_utc": _ts(age),
        "journal": "verified",
        "credential": "present",
        "counters": {"claimed": 3, "calls": 3, "by_outcome": {"shadow_selected": 2, "timeout": 1}},
    }


@pytest.fixture
def root(data_root: Path) -> DataRoot:
    dr = DataRoot(data_root)
    dr.ensure()
    return dr


@pytest.mark.parametrize(
    ("worker", "alive", "verdict"),
    [
        (_worker(), True, Verdict.HEALTHY),
        (_worker(age=30), True, Verdict.STALE_HEARTBEAT),
        (_worker(), False, Verdict.WORKER_NOT_RUNNING),
        (_worker(state="starting"), True, Verdict.STARTING),
        (_worker(state="stopping"), True, Verdict.STOPPING),
        (_worker(state="stopped"), False, Verdict.STOPPED),
        (None, True, Verdict.NO_STATUS),
    ],
)
def test_verdicts(
    root: DataRoot, worker: dict[str, object] | None, alive: bool, verdict: Verdict
) -> None:
    if worker is not None:
        _write(root.status_file, worker)
    report = collect(root, now=NOW, alive=lambda pid: alive)
    assert report.verdict is verdict
    assert EXIT[verdict] == (0 if verdict is Verdict.HEALTHY else 1)


def test_a_supervisor_that_gave_up_explains_the_rest(root: DataRoot) -> None:
    _write(root.status_file, _worker(state="stopped"))
    _write(
        supervisor_status_path(root),
        {
            "pid": 1,
            "state": "crash_loop",
            "heartbeat_at_utc": _ts(5),
            "restarts": 5,
            "last_exit": -9,
        },
    )
    report = collect(root, now=NOW, alive=lambda pid: False)
    assert report.verdict is Verdict.CRASH_LOOP
    assert "restarts 5" in render(report) and "last worker exit -9" in render(report)


def test_a_quarantined_worker_is_not_healthy(root: DataRoot) -> None:
    _write(
        root.status_file,
        {**_worker(), "journal": "unverified", "quarantine": "torn_tail", "unsafe": {"symlink": 2}},
    )
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.verdict is Verdict.QUARANTINED and EXIT[report.verdict] == 1
    assert "quarantine  torn_tail  unsafe paths: symlink 2" in render(report)


def test_an_observed_clock_step_is_shown(root: DataRoot) -> None:
    _write(root.status_file, {**_worker(), "clock_step_observed": True})
    report = collect(root, now=NOW, alive=lambda p: True)
    assert "clock       wall-clock step observed: retention off until restart" in render(report)
    _write(root.status_file, _worker())
    assert "clock" not in render(collect(root, now=NOW, alive=lambda p: True))


def test_stale_after_is_the_operators_choice(root: DataRoot) -> None:
    _write(root.status_file, _worker(age=8))
    assert collect(root, now=NOW, alive=lambda p: True).verdict is Verdict.HEALTHY
    assert (
        collect(root, now=NOW, alive=lambda p: True, stale_after_s=5).verdict
        is Verdict.STALE_HEARTBEAT
    )


def test_planted_strings_are_never_echoed(root: DataRoot) -> None:
    planted = _worker()
    planted["state"] = "김민지 72.4kg"
    planted["journal"] = "sk-planted-secret"
    planted["counters"] = {
        "claimed": "72.4kg",
        "김민지": 3,
        "by_outcome": {"김민지": 1, "timeout": "x"},
    }
    _write(root.status_file, planted)
    report = collect(root, now=NOW, alive=lambda p: True)
    text = render(report) + json.dumps(report.to_json(), ensure_ascii=False)
    for needle in ("김민지", "72.4kg", "sk-planted-secret"):
        assert needle not in text
    assert report.worker is not None and report.worker.state == "unknown"


def test_unusable_status_files_exit_2(root: DataRoot, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    _write(target, _worker())
    os.symlink(target, root.status_file)
    out = kexpr("status", "--data-root", root.root)
    assert out.returncode == 2 and "status_unreadable (worker_symlink)" in out.stdout
    os.unlink(root.status_file)
    root.status_file.write_text("{not json")
    out = kexpr("status", "--data-root", root.root, "--json")
    assert out.returncode == 2 and json.loads(out.stdout)["problem"] == "worker_io_error"
    assert kexpr("status", "--data-root", tmp_path / "missing").returncode == 2

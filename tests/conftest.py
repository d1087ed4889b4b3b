"""Shared fixtures: real processes, a real proxy and a loopback fake of the API."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fakeapi import FakeOpenAI
from hypothesis import HealthCheck, settings
from kit.supervisor import TEST_KEY, start_supervisor, stop_supervisor

from kexpr.spool.layout import DataRoot

# Hypothesis' defaults, less the two checks that measure the machine instead of the
# code: a 200 ms deadline per example and the "input generation is slow" health
# check. On parallel workers of a loaded machine both failed by chance (a dual-card
# property generated 8 inputs in 1.01 s). Example counts stay Hypothesis' own (the
# generative profiles of tests/adversarial/hypothesis_profiles.py set theirs).
settings.register_profile(
    "kexpr-suite", deadline=None, suppress_health_check=(HealthCheck.too_slow,)
)
settings.load_profile("kexpr-suite")

# `make test` runs the suite on parallel workers (pytest-xdist, `-n auto`). Each
# worker is its own process with its own tmp_path tree (pytest's basetemp/popen-gwN),
# so process-wide state (umask, signals, rlimits, os.environ, cwd, threads, fds) is
# never shared; what would be shared across processes (a fixed path, a fixed port,
# a machine-wide count) the tests do not use.
MAX_AUTO_WORKERS = 8


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per CPU this process may run on (its affinity
    mask, which a container's cpuset narrows, not the machine's count), at least
    one and at most `MAX_AUTO_WORKERS` (past that, start-up and collection per
    worker cost more than they save). pytest-xdist's own override still holds:
    ``PYTEST_XDIST_AUTO_NUM_WORKERS=N`` (and ``make test JOBS=N`` passes ``-n N``)."""
    wanted = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if wanted.isdigit():
        return int(wanted)
    return max(1, min(MAX_AUTO_WORKERS, len(os.sched_getaffinity(0))))


# Modules whose tests share one costly module-scoped fixture: each runs on one
# worker (`--dist loadgroup`), since a worker that runs any one of its tests builds
# that fixture again. They are marked `xdist_group`, and `pytest_xdist_make_scheduler`
# below groups them by this table as well: pytest-xdist 3.8 does not apply the marks
# under pytest 9.2 (it renames `item._nodeid`, which pytest 9.2 no longer reads;
# measured: a marked module spread over both workers).
ONE_WORKER_MODULES: dict[str, str] = {
    "tests/packaging_tests/test_distribution.py": "builds the sdist and wheel (minutes)",
    "tests/worker_tests/test_upgrade.py": "the previous release in a scratch venv",
    "tests/e2e/test_surfaces_e2e.py": "one supervised worker and fake API for all",
    "tests/reference_host/test_host_journal.py": "one supervised worker and fake API for all",
    "tests/redaction/test_redaction_paths.py": "one world of real processes for all",
    "tests/adversarial/test_adversarial_shim.py": "one compromised worker for all",
    "tests/faults/test_nothing_escapes.py": "one tmpfs for all",
}


# `make check` (the quick tier) leaves these out: `slow`, by folder ("/" at the end)
# or by module. Measured with --durations on parallel workers: together they were
# ~85 % of the suite's test time (wheel builds, mypy, the crash campaign, and tests
# that start real supervisors, workers and CLI processes one after another).
SLOW_MODULES: dict[str, str] = {
    "tests/crash/": "the crash campaign and real processes SIGKILLed",
    "tests/e2e/": "real supervised workers, the proxy and the fake API",
    "tests/faults/": "real worker and CLI processes under injected faults",
    "tests/live/": "the shadow harness against real processes",
    "tests/packaging_tests/": "sdist/wheel builds, scratch venvs, mypy",
    "tests/ops_tests/test_audit.py": "real worker processes",
    "tests/ops_tests/test_glossary_cli.py": "a CLI process per case",
    "tests/ops_tests/test_graceful_stop.py": "real supervisors stopped",
    "tests/ops_tests/test_preflight.py": "a CLI process per case",
    "tests/ops_tests/test_promotion.py": "a CLI process per case",
    "tests/ops_tests/test_quarantine_cli.py": "a real supervised worker",
    "tests/ops_tests/test_supervisor.py": "real supervisors and workers",
    "tests/ops_tests/test_supervisor_limits.py": "real supervisors and workers",
    "tests/redaction/test_log_records.py": "real worker processes",
    "tests/redaction/test_redaction_paths.py": "real processes, end to end",
    "tests/reference_host/test_host_journal.py": "a real supervised worker",
    "tests/test_bench_announce.py": "the bench's entry points started",
    "tests/test_fakeapi.py": "the fake API's own process and proxy",
    "tests/worker_tests/test_provider_hostile.py": "a real worker against hostile answers",
    "tests/worker_tests/test_upgrade.py": "the previous release in a scratch venv",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: xdist's own scheduler, whose work unit is one test,
    one ``@group`` suffix, or here one module of `ONE_WORKER_MODULES`."""
    if config.getvalue("dist") != "loadgroup":
        return None  # xdist's own choice
    from xdist.scheduler import LoadGroupScheduling

    class ModuleGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER_MODULES else str(super()._split_scope(nodeid))

    return ModuleGroups(config, log)


def _listed(module: str, table: dict[str, str]) -> bool:
    return module in table or any(k.endswith("/") and module.startswith(k) for k in table)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if module in ONE_WORKER_MODULES:
            item.add_marker(pytest.mark.xdist_group(module))
        if _listed(module, SLOW_MODULES):
            item.add_marker(pytest.mark.slow)


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
        return stop_supervisor(self.supervisor)


def start_supervised_worker(
    data_root: Path,
    fake: FakeOpenAI | None,
    *,
    key: str | None = TEST_KEY,
    python: str = sys.executable,
    args: tuple[str, ...] = (),
) -> RunningWorker:
    """``kexpr supervise`` exactly as an operator runs it: explicit env, the key,
    and the egress proxy + CA passed as operator flags. ``python``: the
    interpreter of the environment it runs from (a scratch venv's, for the
    dependency-range tests); ``args``: more of the operator's options."""
    root = DataRoot(data_root)
    root.ensure()
    proc = start_supervisor(data_root, fake=fake, key=key, python=python, args=args)
    return RunningWorker(root, proc)


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
    """A scripted provider (`worker_tests.worker_kit.Provider`) for `make_worker`."""
    from worker_tests.worker_kit import Provider

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

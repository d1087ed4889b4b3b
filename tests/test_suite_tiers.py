"""How the suite runs (issue 24 item 4): `make test` on parallel workers, `make
check` the lint plus the fast tests, CI calling only what the README says, and
the README stating `make test`'s count and duration.

Structure only, never a time: the durations are figures in the README."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import conftest
import pytest

REPO = Path(__file__).resolve().parents[1]


def _make_dry_run(target: str) -> list[str]:
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on this machine")
    out = subprocess.run(
        [make, "-n", "-s", "-C", str(REPO), target, "-o", ".venv/.installed-test"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},  # no JOBS from the caller
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_make_test_lints_then_runs_the_suite_on_parallel_workers() -> None:
    lines = _make_dry_run("test")
    assert lines == [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        ".venv/bin/python -m pytest -n auto --dist loadgroup",
    ]


def test_make_check_lints_then_runs_only_the_fast_tests() -> None:
    lines = _make_dry_run("check")
    assert lines == [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        '.venv/bin/python -m pytest -n auto --dist loadgroup -m "not slow"',
    ]


def test_ci_calls_only_what_the_readme_says() -> None:
    script = (REPO / ".ci" / "run").read_text()
    commands = [
        line.strip()
        for line in script.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert commands[-2:] == ["make test-tools", "make test"]
    assert not any("pytest" in c or "make check" in c for c in commands)


@pytest.mark.parametrize(("cpus", "workers"), [(1, 1), (2, 2), (3, 3), (8, 8), (64, 8)])
def test_auto_is_one_worker_per_usable_cpu_bounded(
    cpus: int, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert conftest.pytest_xdist_auto_num_workers(pytest.Config.__new__(pytest.Config)) == workers


def test_auto_keeps_xdists_own_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert conftest.pytest_xdist_auto_num_workers(pytest.Config.__new__(pytest.Config)) == 3


@pytest.mark.parametrize("table", ["ONE_WORKER_MODULES", "SLOW_MODULES"])
def test_every_listed_module_exists(table: str) -> None:
    """A renamed file must not drop out of its group or tier unnoticed."""
    for path in getattr(conftest, table):
        assert (REPO / path).is_dir() if path.endswith("/") else (REPO / path).is_file(), path


def test_the_tiers_and_groups_are_set_at_collection() -> None:
    """One module of each kind, collected as `make check` and `make test` do."""
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"]
    files = ["tests/e2e/test_main_job.py", "tests/spool_tests/test_outcome_maps.py"]

    def collected(*extra: str) -> set[str]:
        out = subprocess.run(
            [*args, *extra, *files], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout
        return {line.split("::", 1)[0] for line in out.splitlines() if "::" in line}

    assert collected() == set(files)
    assert collected("-m", "not slow") == {"tests/spool_tests/test_outcome_maps.py"}
    assert collected("-m", "slow") == {"tests/e2e/test_main_job.py"}


def test_the_readme_states_make_tests_count_and_duration() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    setup = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split()[:2] for line in setup] == [["make", "run"], ["make", "test"]]
    assert re.search(r"`make test` ran [\d,]+ tests in \d+ min \d+ s", readme)
    assert "`make check`" in readme.split("## What it is", 1)[0]


def test_a_one_worker_module_runs_on_one_worker() -> None:
    """`--dist loadgroup` keeps a module of ONE_WORKER_MODULES on one worker (its
    module fixture built once); pytest-xdist's own marks alone spread it over both."""
    if not _has_xdist():
        pytest.skip("pytest-xdist is not installed")
    grouped = "tests/adversarial/test_adversarial_shim.py"
    assert grouped in conftest.ONE_WORKER_MODULES
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"]
        + ["--dist", "loadgroup", "-v", grouped, "tests/spool_tests/test_outcome_maps.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    workers = {line.split()[0] for line in out.splitlines() if " PASSED " + grouped + "::" in line}
    assert len(workers) == 1, workers
    assert " failed" not in out and " passed" in out, out[-2000:]


def _has_xdist() -> bool:
    import importlib.util

    return importlib.util.find_spec("xdist") is not None


def test_the_placement_rule_names_every_test_folder() -> None:
    """tests/README.md's table places a test by folder: every folder that holds a
    test module has its row, each row is a folder that exists, and every test
    path the README gives as an example is a real file or folder."""
    readme = (REPO / "tests" / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(tests/[a-z0-9_]+/)` \|", readme, re.M))
    folders = {
        f"tests/{p.parent.relative_to(REPO / 'tests').parts[0]}/"
        for p in (REPO / "tests").rglob("test_*.py")
        if p.parent != REPO / "tests"
    }
    assert rows == folders
    named = set(re.findall(r"`(tests/[\w/]+(?:\.py|/))`", readme))
    named |= {f"tests/{p}" for p in re.findall(r"`([a-z0-9_]+/\w+\.py)`", readme)}
    named = {p for p in named if not p.startswith("tests/tests/")}
    missing = [p for p in sorted(named) if "<" not in p and not (REPO / p).exists()]
    assert missing == []

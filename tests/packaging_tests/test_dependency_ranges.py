"""Issue 26 item 5: declared, tested dependency ranges for the worker.

The bounded transport subclasses httpcore's stream and backend and reaches private
httpx/httpcore attributes (worker/dependencies.py says which), but the worker extra
declared no range: with httpx 0.23.0 / httpcore 0.15 (``pip check`` clean under
openai 2.24.0) ``kexpr worker`` died at import with a traceback and exit 1 — a
restart loop under ``kexpr supervise`` or systemd.

Here: the extra states `SUPPORTED`; the floor and the newest allowed releases are
installed into scratch venvs (pip from the registry; wheels come from pip's cache
after the first run, and each venv is kept per user, keyed by its versions) and a
real supervised worker from each answers a presentation and cuts a slow body at
its deadline; the issue's versions make the worker refuse with one line and exit
69, which ``kexpr supervise`` does not restart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from conftest import start_supervised_worker
from fakeapi import FakeOpenAI, compose_reply, default_style
from fakeapi.hostile import Tally, hostile_behaviour
from worker_tests.test_provider_hostile import DEADLINE_S, SLACK_S, _present, _wait_terminal

from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import Outcome
from kexpr.worker import dependencies
from kexpr.worker.dependencies import SUPPORTED, requirement, unsupported
from kexpr.worker.exitcodes import ExitCode

REPO = Path(__file__).resolve().parents[2]

# The ends of the ranges (worker/dependencies.py): the floor it needs, and the
# newest releases below the caps when the ranges were set.
FLOOR = {"httpx": "0.24.0", "httpcore": "0.17.3"}
NEWEST = {"httpx": "0.28.1", "httpcore": "1.0.9"}
# The environment: what openai 2.24.0 allows, outside our ranges.
OUTSIDE = {"httpx": "0.23.0", "httpcore": "0.15.0"}
# The rest of the worker's environment (pyproject's base and worker dependencies).
OTHERS = ("openai==2.24.0", "pydantic>=2.7,<3", "watchdog>=7.1,<8")


# --- the statement ----------------------------------------------------------------


def test_the_worker_extra_states_the_supported_ranges() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    worker = project["optional-dependencies"]["worker"]
    for name in SUPPORTED:
        assert requirement(name) in worker, name
    assert FLOOR == {n: ".".join(map(str, low)) for n, (low, _) in SUPPORTED.items()}


@pytest.mark.parametrize(
    ("name", "version", "ok"),
    [
        ("httpx", "0.23.3", False),
        ("httpx", "0.24", True),
        ("httpx", "0.24.0", True),
        ("httpx", "0.28.1", True),
        ("httpx", "0.29.0", False),
        ("httpx", "1.0.0.dev3", False),
        ("httpcore", "0.17.2", False),
        ("httpcore", "0.17.3", True),
        ("httpcore", "1.0.9", True),
        ("httpcore", "1.1.0rc1", False),
        ("httpcore", "garbage", False),
    ],
)
def test_versions_are_judged_against_the_ranges(
    monkeypatch: pytest.MonkeyPatch, name: str, version: str, ok: bool
) -> None:
    real = metadata.version
    monkeypatch.setattr(
        dependencies.metadata, "version", lambda n: version if n == name else real(n)
    )
    assert (unsupported() == []) is ok


def test_a_missing_dependency_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def version(n: str) -> str:
        raise metadata.PackageNotFoundError(n)

    monkeypatch.setattr(dependencies.metadata, "version", version)
    assert unsupported() == ["httpx missing", "httpcore missing"]


def test_the_installed_environment_is_in_range() -> None:
    assert unsupported() == []


def test_the_refusal_is_one_line_and_exit_69(tmp_path: Path) -> None:
    """In this venv, with httpcore's reported version patched: the entry point
    refuses before importing the transport (no traceback)."""
    code = (
        "import importlib.metadata as m, sys; real = m.version;"
        " m.version = lambda n: '0.15.0' if n == 'httpcore' else real(n);"
        " from kexpr.worker.main import main;"
        f" sys.exit(main(['--data-root', {str(tmp_path / 'root')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == ExitCode.UNSUPPORTED_DEPENDENCY == 69
    assert done.stderr.splitlines() == [
        "kexpr worker: refusing to start: unsupported_dependency: httpcore 0.15.0"
        " (supported: httpx>=0.24.0,<0.29, httpcore>=0.17.3,<1.1)"
    ]
    assert not (tmp_path / "root").exists()  # nothing was started


# --- real environments ----------------------------------------------------------------


def _cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    try:
        d = base / "kexpr-dep-venvs"
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".w{os.getpid()}"
        probe.touch()
        probe.unlink()
        return d
    except OSError:
        return tmp_path_factory.mktemp("dep-venvs")


def _venv(cache: Path, versions: dict[str, str]) -> Path:
    """A venv with ``versions`` of httpx/httpcore and the worker's other
    dependencies, and this checkout on its path (a .pth to a symlink tree laid
    out like the installed packages). Its python."""
    slug = "-".join(f"{n}{v}" for n, v in sorted(versions.items()))
    venv = cache / f"py{sys.version_info[0]}{sys.version_info[1]}-{slug}"
    python = venv / "bin" / "python"
    pins = [f"{n}=={v}" for n, v in versions.items()]
    if not (venv / ".ready").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q"]
        probe = subprocess.run(
            [*pip, "download", "--no-deps", "-d", str(venv / "probe"), pins[0]],
            capture_output=True,
            check=False,
        )
        if probe.returncode != 0:
            pytest.skip(f"the package registry is unreachable ({pins[0]} could not be fetched)")
        subprocess.run([*pip, "install", *pins, *OTHERS], check=True, capture_output=True)
        (venv / ".ready").touch()
    tree = venv / "kexpr-src"
    (tree / "kexpr").mkdir(parents=True, exist_ok=True)
    links = {
        tree / "kexpr" / "spool": REPO / "queue" / "spool",
        tree / "kexpr" / "worker": REPO / "worker",
        tree / "kexpr" / "ops": REPO / "ops",
        tree / "gateway_shim": REPO / "gateway_shim",
    }
    for link, target in links.items():
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    (site / "kexpr-src.pth").write_text(f"{tree}\n")
    got = subprocess.run(
        [
            str(python),
            "-c",
            "import httpx, httpcore; print(httpx.__version__, httpcore.__version__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert got == [versions["httpx"], versions["httpcore"]]
    return python


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield _cache_dir(tmp_path_factory)


@pytest.mark.e2e
@pytest.mark.parametrize("versions", [FLOOR, NEWEST], ids=["floor", "newest"])
def test_the_worker_runs_and_cuts_a_slow_body_at_each_end(
    venvs: Path, data_root: Path, fake_api: FakeOpenAI, versions: dict[str, str]
) -> None:
    python = _venv(venvs, versions)
    worker = start_supervised_worker(data_root, fake_api, python=str(python))
    try:
        fake_api.behaviour = compose_reply(default_style)
        assert _present(data_root, "evt-range-ok") is Outcome.ACCEPTED
        assert _wait_terminal(data_root, 1, DEADLINE_S + SLACK_S) == ["selected"]
        tally = Tally()
        fake_api.behaviour = hostile_behaviour("drip", tally)
        started = time.monotonic()
        _present(data_root, "evt-range-drip")
        assert _wait_terminal(data_root, 2, DEADLINE_S + SLACK_S)[1:] == ["timeout"]
        assert time.monotonic() - started < DEADLINE_S + SLACK_S
        assert fake_api.wait_until(lambda: tally.ended_at is not None, SLACK_S + 1.0)
        assert tally.peer_gone  # the worker cut the dripping connection
        assert len(fake_api.requests) == 2
    finally:
        assert worker.stop() == 0


@pytest.mark.e2e
def test_outside_the_ranges_the_worker_refuses_once_and_is_not_restarted(
    venvs: Path, data_root: Path
) -> None:
    """The issue's versions: one line, exit 69; ``kexpr supervise`` passes it
    through and stops (it used to be a traceback, exit 1, restarted in a loop)."""
    python = _venv(venvs, OUTSIDE)
    DataRoot(data_root).ensure()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    env["OPENAI_API_KEY"] = "sk-test"
    direct = subprocess.run(
        [str(python), "-m", "kexpr.worker", "--data-root", str(data_root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert direct.returncode == 69
    (line,) = direct.stderr.splitlines()
    assert line.startswith("kexpr worker: refusing to start: unsupported_dependency: httpx 0.23.0")
    supervised = subprocess.run(
        [str(python), "-m", "kexpr.ops.cli", "supervise", "--data-root", str(data_root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert supervised.returncode == 69
    refusals = [x for x in supervised.stderr.splitlines() if "unsupported_dependency" in x]
    assert len(refusals) == 1  # started once, never restarted
    status = json.loads((data_root / "supervisor.status.json").read_bytes())
    assert status["restarts"] == 0 and status["last_exit"] == 69

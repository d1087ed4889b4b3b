"""The built distribution (issue 15): the sdist holds what the tests and docs need,
the wheel built *from that sdist* carries the license, classifiers, ``py.typed`` and
the docs, a gateway-only install of it works and refuses the worker commands, and
a smoke subset of the test suite passes from the unpacked sdist against a fresh
venv that installed it (never against this source tree).

pip resolves the dependencies through the machine's configured package registry,
as ``make test`` itself does to create ``.venv``; nothing else leaves the machine.
"""

from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMOKE = (
    "tests/ops_tests/test_cli_conventions.py",
    "tests/contract/test_contract_cli.py",
    "tests/packaging_tests/test_packaging.py::test_console_script_dispatches",
)
# Where each package lands in the wheel (pyproject `package-dir`).
PACKAGES = ("gateway_shim", "kexpr/worker", "kexpr/ops", "kexpr/spool")
# What a working tree holds that is not source (and never goes into the sdist).
LOCAL_ONLY = (
    ".git",
    ".venv",
    "var",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
)


def sh(
    *args: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, (args[:4], done.stdout[-3000:], done.stderr[-3000:])
    return done


def venv_env(venv: Path) -> dict[str, str]:
    # No PYTHONPATH, no user site: the venv sees its own site-packages only.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    env["PYTHONNOUSERSITE"] = "1"
    return env


def new_venv(path: Path) -> Path:
    sh(sys.executable, "-m", "venv", path)
    return path


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    out = tmp_path_factory.mktemp("dist")
    # `python -m build` builds the sdist, then the wheel *from the unpacked sdist*:
    # a file the sdist misses breaks the wheel here, not on an operator's machine.
    # The source tree is copied first so that build's egg-info never touches it.
    src = tmp_path_factory.mktemp("src") / "kexpr"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(*LOCAL_ONLY))
    done = sh(sys.executable, "-m", "build", "--outdir", out, src)
    # build shows the backend's warnings as "WARNING ..." lines, e.g. setuptools'
    # "Package would be ignored" for a folder Python can import that `packages`
    # does not list: the configuration must not be ambiguous.
    backend_warnings = [
        line for line in (done.stdout + done.stderr).splitlines() if line.startswith("WARNING")
    ]
    assert backend_warnings == []
    (sdist,) = out.glob("kexpr-*.tar.gz")
    (wheel,) = out.glob("kexpr-*.whl")
    yield Built(sdist, wheel)


def test_the_sdist_holds_the_tests_docs_and_license(built: Built) -> None:
    with tarfile.open(built.sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for name in (
        "LICENSE",
        "README.md",
        "Makefile",
        "MANIFEST.in",
        ".ci/run",
        "mypy-tests.ini",
        "mypy-scripts.ini",
        "docs/cli.md",
        "docs/systemd.md",
        "docs/operator-guide.ko.md",
        "docs/performance.md",
        "tests/conftest.py",
        "tests/test_fakeapi.py",
        "tests/fakeapi/__init__.py",
        "tests/ops_tests/ensure-systemd-analyze.sh",
        "tests/ops_tests/fixtures/physique-coach.config.yaml",
        "ops/systemd/kexpr-worker@.service",
        "ops/examples/model-responses.json",
        "queue/spool/py.typed",
        "fuzz/judge.dict",
        "reading/verdicts.json",
        "reading/sheets/sheet-1.md",
    ):
        assert name in names, name
    assert not any(n.startswith(("var/", ".venv/")) or "__pycache__" in n for n in names)
    assert "queue/__init__.py" not in names


def test_the_wheel_metadata_and_files(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as whl:
        names = set(whl.namelist())
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(whl.read(meta_name))
    assert meta["License-Expression"] == "MIT"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Operating System :: POSIX :: Linux" in meta.get_all("Classifier", [])
    assert "Typing :: Typed" in meta.get_all("Classifier", [])
    requires = meta.get_all("Requires-Dist", [])
    base = sorted(
        r.split(">")[0].split("<")[0].split("=")[0].strip() for r in requires if "extra ==" not in r
    )
    assert base == ["pydantic", "watchdog"]
    assert set(meta.get_all("Provides-Extra", [])) == {"worker", "ops", "test", "fuzz"}
    for package in PACKAGES:
        assert f"{package}/py.typed" in names, package
    assert "kexpr/ops/systemd/kexpr-worker@.service" in names
    assert "kexpr/ops/examples/model-responses.json" in names  # `kexpr run`'s example answers
    docs = {n.rsplit("/", 1)[1] for n in names if "/share/doc/kexpr/" in n}
    assert {"operator-guide.ko.md", "systemd.md", "cli.md", "README.md", "LICENSE"} <= docs
    assert not any(n.startswith(("tests/", "queue/", "fakeapi/")) for n in names)
    # Two top-level import names only: the host-facing one and the namespace.
    top = {n.split("/", 1)[0] for n in names if "/" in n and ".dist-info" not in n.split("/")[0]}
    assert {t for t in top if not t.endswith(".data")} == {"gateway_shim", "kexpr"}
    assert "kexpr/__init__.py" not in names  # a PEP 420 namespace, shared by nothing else


def test_a_gateway_only_install_works_and_refuses_the_worker_commands(
    built: Built, tmp_path: Path
) -> None:
    venv = new_venv(tmp_path / "gw")
    env = venv_env(venv)
    sh(venv / "bin" / "python", "-m", "pip", "install", "-q", built.wheel, env=env)
    # The host's side: the shim imports, and the worker's SDK is not there.
    probe = sh(
        venv / "bin" / "python",
        "-c",
        "import importlib.util, gateway_shim, kexpr.spool.contract;"
        "print(importlib.util.find_spec('openai') is None, importlib.util.find_spec('httpx') is None)",
        cwd=tmp_path,
        env=env,
    )
    assert probe.stdout == "True True\n"
    for command in ("worker", "supervise", "run"):
        done = subprocess.run(
            [str(venv / "bin" / "kexpr"), command, "--data-root", str(tmp_path / "root")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2 and done.stdout == "", command
        assert done.stderr.splitlines() == [
            f"kexpr {command}: needs the worker extra (openai, httpx missing here): install `kexpr[worker]`"
        ]
    assert not (tmp_path / "root").exists()
    # The unit files come from the installed package, not a source tree.
    sh(
        venv / "bin" / "kexpr",
        "systemd-units",
        "--instance",
        "p",
        "--dest",
        tmp_path / "units",
        cwd=tmp_path,
        env=env,
    )
    assert (tmp_path / "units" / "kexpr-worker@.service").read_bytes() == (
        REPO / "ops" / "systemd" / "kexpr-worker@.service"
    ).read_bytes()
    assert (venv / "share" / "doc" / "kexpr" / "operator-guide.ko.md").is_file()


def test_a_smoke_subset_passes_from_the_unpacked_sdist(built: Built, tmp_path: Path) -> None:
    with tarfile.open(built.sdist) as tar:
        # The "data" filter exists from 3.11.4 (and is the default from 3.14).
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp_path, filter="data")
        else:  # pragma: no cover - an older 3.11: our own freshly built sdist
            tar.extractall(tmp_path)
    (tree,) = tmp_path.glob("kexpr-*")
    venv = new_venv(tmp_path / "venv")
    env = venv_env(venv)
    sh(venv / "bin" / "python", "-m", "pip", "install", "-q", f"{built.sdist}[test]", env=env)
    # Against the installed package: the sdist's own ops/, worker/ … must not be
    # importable (they would shadow it), so the unpacked tree keeps only tests/.
    for package in ("ops", "worker", "gateway_shim", "queue"):
        subprocess.run(["rm", "-rf", str(tree / package)], check=True)
    done = sh(venv / "bin" / "pytest", "-q", "-p", "no:cacheprovider", *SMOKE, cwd=tree, env=env)
    assert " passed" in done.stdout and "failed" not in done.stdout
    where = sh(
        venv / "bin" / "python",
        "-c",
        "import kexpr.ops.cli; print(kexpr.ops.cli.__file__)",
        cwd=tree,
        env=env,
    )
    assert where.stdout.startswith(str(venv))


HOST_PACKAGES = ("ops", "worker", "spool")


def test_the_wheel_installs_beside_a_host_that_has_its_own_ops_worker_and_spool(
    built: Built, tmp_path: Path
) -> None:
    """Issue 15 item 1: a host environment (Hermes has its own top-level `ops/`) with
    unrelated top-level `ops`, `worker` and `spool` packages keeps them, and both
    sides work after kexpr is installed into it."""
    venv = new_venv(tmp_path / "host")
    env = venv_env(venv)
    site = Path(
        sh(
            venv / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            env=env,
        ).stdout.strip()
    )
    for name in HOST_PACKAGES:
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(f"HOST = 'the host {name}'\n")
    sh(venv / "bin" / "python", "-m", "pip", "install", "-q", f"{built.wheel}[worker]", env=env)
    probe = sh(
        venv / "bin" / "python",
        "-c",
        "import ops, worker, spool, gateway_shim, kexpr.ops.cli, kexpr.worker.main,"
        " kexpr.spool.contract;"
        "print(ops.HOST, worker.HOST, spool.HOST, sep='|');"
        "print(gateway_shim.__name__, kexpr.ops.cli.__name__, kexpr.worker.main.__name__)",
        cwd=tmp_path,
        env=env,
    )
    assert probe.stdout.splitlines() == [
        "the host ops|the host worker|the host spool",
        "gateway_shim kexpr.ops.cli kexpr.worker.main",
    ]
    for name in HOST_PACKAGES:
        assert (site / name / "__init__.py").read_text() == f"HOST = 'the host {name}'\n"
    # The console script runs kexpr's own commands, not the host's packages.
    version = sh(venv / "bin" / "kexpr", "--version", cwd=tmp_path, env=env)
    assert version.stdout.startswith("kexpr ")
    # The worker really starts from this environment: it refuses a symlinked data
    # root with its own exit code (74, unsafe_data_root), which only kexpr.worker gives.
    (tmp_path / "real-root").mkdir(mode=0o700)
    (tmp_path / "root-link").symlink_to(tmp_path / "real-root")
    done = subprocess.run(
        [str(venv / "bin" / "kexpr"), "worker", "--data-root", str(tmp_path / "root-link")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 74, done.stderr

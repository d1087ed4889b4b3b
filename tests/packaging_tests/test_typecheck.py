"""mypy --strict over the product packages (STYLE.md habits), as part of make test;
mypy over tests/ (mypy-tests.ini) and --strict over bench/ and fuzz/ (mypy-scripts.ini).

The packages install as `gateway_shim` and `kexpr.{spool,worker,ops}` (pyproject
`package-dir`); mypy cannot follow setuptools' editable finder, so it checks a tree
of symlinks laid out like the installed packages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYOUT = {
    "gateway_shim": REPO / "gateway_shim",
    "kexpr/spool": REPO / "queue" / "spool",
    "kexpr/worker": REPO / "worker",
    "kexpr/ops": REPO / "ops",
}


def installed_layout(base: Path) -> Path:
    """``base`` with one symlink per package, as pip lays them out."""
    for name, target in LAYOUT.items():
        link = base / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
    return base


def mypy(config: str, *paths: Path, cwd: Path, mypypath: Path | None = None) -> str:
    """mypy's findings (empty when clean), with no cache and a minimal environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if mypypath is not None:
        env["MYPYPATH"] = str(mypypath)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / config)]
        + ["--no-error-summary", "--cache-dir", "/dev/null", *map(str, paths)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return "" if out.returncode == 0 else out.stdout + out.stderr or f"exit {out.returncode}"


def test_product_packages_typecheck_strict(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path / "tree")
    assert mypy("pyproject.toml", cwd=tree) == ""


def test_tests_typecheck(tmp_path: Path) -> None:
    """mypy over tests/ (mypy-tests.ini: not strict, but untyped bodies are checked),
    with the product packages' real types from the same installed-layout tree."""
    tree = installed_layout(tmp_path / "tree")
    assert mypy("mypy-tests.ini", REPO / "tests", cwd=REPO, mypypath=tree) == ""


def test_bench_and_fuzz_typecheck_strict(tmp_path: Path) -> None:
    """mypy --strict over the scripts beside the suite (mypy-scripts.ini): bench/,
    fuzz/ and reading/, with the test modules they import (the fake API, the adversarial builders)."""
    tree = installed_layout(tmp_path / "tree")
    scripts = (REPO / "bench", REPO / "fuzz", REPO / "reading")
    assert mypy("mypy-scripts.ini", *scripts, cwd=REPO, mypypath=tree) == ""

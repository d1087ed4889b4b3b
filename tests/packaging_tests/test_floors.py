"""The product's floors, and rules that stand without their history.

Three floors, imported only downwards (README "Where each part lives"):
`kexpr.spool` imports no other product package; `gateway_shim` and `kexpr.worker`
import only the spool, never each other nor the ops; `kexpr.ops` sits on top.
Every import counts, a lazy one inside a function too (read from the source,
not from what a run happened to import).

And a product comment states its rule and its reason, not the ticket it came
from nor a file that is not in the repository.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {
    "spool": "queue/spool",
    "gateway_shim": "gateway_shim",
    "worker": "worker",
    "ops": "ops",
}
# Which other floors each may import.
MAY_IMPORT = {
    "spool": set(),
    "gateway_shim": {"spool"},
    "worker": {"spool"},
    "ops": {"spool", "gateway_shim", "worker"},
}


def _floor(module: str) -> str | None:
    if module == "kexpr.spool" or module.startswith("kexpr.spool."):
        return "spool"
    if module.split(".")[0] == "gateway_shim" or module.startswith("kexpr.gateway_shim"):
        return "gateway_shim"
    if module == "kexpr.worker" or module.startswith("kexpr.worker."):
        return "worker"
    if module == "kexpr.ops" or module.startswith("kexpr.ops."):
        return "ops"
    return None


def _imports(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _sources(package: str) -> list[Path]:
    return sorted((REPO / PACKAGES[package]).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_each_floor_imports_only_the_floors_below(package: str) -> None:
    assert _sources(package)
    upward = sorted(
        f"{path.relative_to(REPO)}: {module}"
        for path in _sources(package)
        for module in _imports(path)
        if (floor := _floor(module)) not in (None, package) and floor not in MAY_IMPORT[package]
    )
    assert upward == []


def test_the_floor_check_sees_an_upward_import(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from kexpr.worker import daemon\n    import gateway_shim\n")
    assert [_floor(m) for m in _imports(source)] == ["worker", "gateway_shim"]


# Our own history in a comment: "issue 20 item 2", "(issues 14, 20)"; a file
# outside the repository: the style file, the shared spec folder, the plan file.
HISTORY = re.compile(r"\bissues? \d+|STYLE\.md|\.\./shared|seed-plan", re.IGNORECASE)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_product_comments_carry_no_ticket_and_cite_no_outside_file(package: str) -> None:
    found = sorted(
        f"{path.relative_to(REPO)}:{n}"
        for path in _sources(package)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    )
    assert found == []


@pytest.mark.parametrize(
    ("line", "hit"),
    [
        ("# issue 20 item 2", True),
        ("(issues 14 item 1, 20 item 1)", True),
        ("the style file (STYLE.md: trio)", True),
        ("see ../shared/spec/SPEC.md", True),
        ("upstream's fix (NousResearch/hermes-agent PR #112231, issue #111723)", False),
        ("design §4: the issued sentence IDs", False),
    ],
)
def test_the_history_pattern(line: str, hit: bool) -> None:
    assert bool(HISTORY.search(line)) is hit

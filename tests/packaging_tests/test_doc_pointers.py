"""The documents point at things that exist: every backticked repository path
(`worker/inbox.py`, `tests/faults/`) in README.md and docs/*.md is a file or folder of
this tree, and every backticked dotted name (`kexpr.spool.lifecycle.TRANSITIONS`,
`gateway_shim.Outcome`) imports and resolves. A rename that leaves a doc behind
fails here, naming the doc and the pointer."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Only the project's own top-level folders: the host's files (`gateway/platforms/…`)
# and system paths (`/etc/kexpr/…`) are not ours to check.
ROOTS = (
    "gateway_shim",
    "worker",
    "queue",
    "ops",
    "bench",
    "fuzz",
    "reading",
    "tests",
    "docs",
    ".ci",
)
SPAN = re.compile(r"`([^`\s]+)`")
PATH = re.compile(rf"^(?:{'|'.join(re.escape(r) for r in ROOTS)})/[\w./-]*$")
DOTTED = re.compile(r"^(?:kexpr|gateway_shim)(?:\.\w+)+$")
# Named on purpose though not in this tree: the file that must never exist, and the
# host's own test file (Hermes's tree, not ours).
ABSENT = {"queue/__init__.py", "tests/gateway/test_telegram_physique_checkin.py"}
# A dotted name ending so is a file's name (`kexpr.sysusers.conf`), not an import.
FILE_SUFFIXES = {"conf", "json", "jsonl", "md", "py", "service"}
# The `kexpr.<name>` loggers, as the product code names them (`kexpr.spool.log.logger`).
LOGGERS = {
    f"kexpr.{name}"
    for folder in ("gateway_shim", "worker", "queue", "ops")
    for source in (REPO / folder).rglob("*.py")
    for name in re.findall(r'\blogger\("([a-z_]+)"\)', source.read_text("utf-8"))
}


def _spans(doc: Path) -> list[str]:
    return SPAN.findall(doc.read_text("utf-8"))


def resolves(dotted: str) -> bool:
    """``dotted`` is a module, or an attribute chain below the longest importable
    module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_the_checks_can_fail() -> None:
    assert resolves("kexpr.spool.lifecycle.TRANSITIONS")
    assert not resolves("kexpr.worker.daemon._Wake")  # it lives in kexpr.worker.inbox
    assert not resolves("kexpr.spool.no_such_module")
    assert PATH.match("worker/inbox.py") and not PATH.match("gateway/platforms/telegram.py")
    assert {"kexpr.shim", "kexpr.worker"} <= LOGGERS


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = [
        s
        for s in _spans(doc)
        if PATH.match(s) and s not in ABSENT and not (REPO / s.rstrip(".")).exists()
    ]
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_dotted_name_a_doc_names_resolves(doc: Path) -> None:
    names = [s for s in _spans(doc) if DOTTED.match(s) and s.rsplit(".", 1)[1] not in FILE_SUFFIXES]
    missing = [s for s in names if s not in LOGGERS and not resolves(s)]
    assert not missing, f"{doc.name} names what does not exist: {missing}"

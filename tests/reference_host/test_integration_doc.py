"""docs/hermes-integration.md shows the code the reference hosts run:
every ``python`` block in it is preceded by ``<!-- reference-host: PATH -->`` and
appears verbatim in that file, up to one uniform indentation, so the walk-through
and the tested code cannot drift apart."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "hermes-integration.md"
BLOCK = re.compile(
    r"(?:<!-- reference-host: (?P<path>\S+) -->\n)?```python\n(?P<code>.*?)```", re.S
)


def snippets() -> list[tuple[str | None, str]]:
    return [(m["path"], m["code"]) for m in BLOCK.finditer(DOC.read_text("utf-8"))]


def appears_in(code: str, source: str) -> bool:
    """``code`` (dedented) is a run of consecutive lines of ``source`` once the run's
    common indentation is removed."""
    want = textwrap.dedent(code).rstrip("\n").split("\n")
    lines = source.split("\n")
    for start in range(len(lines) - len(want) + 1):
        window = "\n".join(lines[start : start + len(want)])
        if textwrap.dedent(window).split("\n") == want:
            return True
    return False


def test_every_python_block_names_the_reference_host_file_it_comes_from() -> None:
    found = snippets()
    assert len(found) >= 8
    assert all(path is not None for path, _ in found), "a python block without its source"
    files = {path for path, _ in found}
    assert files == {
        "tests/reference_host/daily.py",
        "tests/reference_host/weekly.py",
        "tests/reference_host/adaptive.py",
    }


@pytest.mark.parametrize(("path", "code"), snippets(), ids=lambda v: str(v).split("\n")[0][:50])
def test_the_block_is_the_reference_host_code(path: str, code: str) -> None:
    assert appears_in(code, (REPO / path).read_text("utf-8")), f"drifted from {path}"


def test_the_matcher_refuses_a_changed_line() -> None:
    source = "class A:\n    def f(self):\n        x = 1\n        return x\n"
    assert appears_in("x = 1\nreturn x\n", source)
    assert not appears_in("x = 2\nreturn x\n", source)
    assert not appears_in("x = 1\n    return x\n", source)


@pytest.mark.parametrize(
    "commit", ["4305027f67e404cddc634cbd7da5c1825ac7920d", "d9e03e93", "0dc0f228"]
)
def test_the_doc_names_the_pin_and_the_later_commits(commit: str) -> None:
    assert commit in DOC.read_text("utf-8")


@pytest.mark.parametrize("linking", ["README.md", "docs/design.md"])
def test_the_doc_is_linked(linking: str) -> None:
    assert "docs/hermes-integration.md" in (REPO / linking).read_text("utf-8")

"""docs/cli.md says what the code does: the `surfaces check` example runs as
documented, the bad-input table is `kexpr.ops.inputs`'s, and the config rules are the
shim's."""

from __future__ import annotations

import io
import re
from pathlib import Path

from gateway_shim.config import ConfigRule
from kexpr.ops.inputs import WORDS, Problem
from kexpr.ops.surfaces_cli import EXIT_ELIGIBLE, run_check

DOC = (Path(__file__).parents[2] / "docs" / "cli.md").read_text("utf-8")


def _section(heading: str) -> str:
    return DOC.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _fenced(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def test_the_documented_surfaces_check_example_works(tmp_path: Path) -> None:
    section = _section("`kexpr surfaces check`: the request schema")
    (requests,) = _fenced(section, "jsonl")
    (command,) = _fenced(section, "sh")
    (expected,) = _fenced(section, "text")
    path = tmp_path / "requests.jsonl"
    path.write_text(requests, "utf-8")
    argv = command.split("#")[0].split()
    assert argv[:4] == ["kexpr", "surfaces", "check", "--jsonl"] and "exit 0" in command
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(b""))
    code = run_check([*argv[3:-1], str(path)], stdin, out, err)
    assert (code, err.getvalue()) == (EXIT_ELIGIBLE, "")
    assert out.getvalue() == expected


def test_the_bad_input_table_is_the_codes() -> None:
    section = _section("Bad input: one line, exit 2")
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| ([^|]+?) \|", section, flags=re.MULTILINE))
    assert rows == {p.value: WORDS[p] for p in Problem if p is not Problem.IO_ERROR}


def test_the_config_rules_are_the_shims() -> None:
    section = _section("Config diagnostics: where each key lives")
    for rule in ConfigRule:
        assert f"`{rule.value}`" in section, rule

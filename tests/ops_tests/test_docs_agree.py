"""The documents say what the code does, where they could drift:
docs/cli.md's commands table is `kexpr --help`'s commands; the README's "gateway-only
install" sentence names the commands that need an extra; the Korean guide's calls are
those of docs/wiring.md; the goldens' README runs its examples the way
`kexpr surfaces check` takes them."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kexpr.ops.cli import COMMANDS, REQUIRES, main

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text("utf-8")
CLI_DOC = (REPO / "docs" / "cli.md").read_text("utf-8")
# The short version of the wiring: the three calls a host makes.
WIRING = (REPO / "docs" / "wiring.md").read_text("utf-8")
GUIDE = (REPO / "docs" / "operator-guide.ko.md").read_text("utf-8")
GOLDENS = REPO / "tests" / "surfaces" / "goldens"


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


# --- the commands table -------------------------------------------------------------


def help_commands(capsys: pytest.CaptureFixture[str]) -> set[str]:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = out[out.index("commands:") :].splitlines()[1:]
    return {line.split()[0] for line in listed if line.startswith("  ") and line.strip()}


def test_the_cli_docs_commands_table_is_kexpr_help(capsys: pytest.CaptureFixture[str]) -> None:
    table = _section(CLI_DOC, "Commands")
    rows = re.findall(r"^\| `kexpr (?:-\S+ )*([a-z][a-z-]*)", table, re.MULTILINE)
    assert len(rows) == len(set(rows)), "a command listed twice"
    assert set(rows) == help_commands(capsys) == set(COMMANDS)


# --- which commands need an extra ---------------------------------------------------


def _gateway_only_sentence() -> str:
    install = _section(README, "Install")
    start = install.index("In a gateway-only install")
    return " ".join(install[start : install.index("(`docs/cli.md`)", start)].split())


def test_the_readme_names_the_commands_that_need_the_worker_extra() -> None:
    sentence = _gateway_only_sentence()
    worker_part = sentence[: sentence.index("install `kexpr[worker]`")]
    named = set(re.findall(r"`kexpr ([a-z-]+)`", worker_part))
    assert named == {name for name, (extra, _) in REQUIRES.items() if extra == "worker"}


# Hidden in the child: what a gateway-only install lacks.
HIDE = "import sys\nfor m in ('openai', 'httpx', 'ruamel', 'ruamel.yaml', 'yaml', 'dotenv'):\n    sys.modules[m] = None\n"


def _gateway_only(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HIDE + code],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_commands_the_readme_says_need_ops_do_and_say_so(tmp_path: Path) -> None:
    sentence = _gateway_only_sentence()
    ops_part = sentence[sentence.index("install `kexpr[worker]`") : sentence.index("`kexpr[ops]`")]
    named = set(re.findall(r"`kexpr ([a-z-]+)(?: --[a-z-]+)?`", ops_part))
    assert {"preflight", "migrate-config"} <= named <= set(COMMANDS)
    config = tmp_path / "config.yaml"
    config.write_text("platforms: {}\n", "utf-8")
    for command in sorted({"preflight", "migrate-config"}):
        done = _gateway_only(
            f"from kexpr.ops.cli import main\nraise SystemExit(main([{command!r}, {str(config)!r}]))",
            tmp_path,
        )
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "[ops]" in done.stdout + done.stderr, command
        assert "Traceback" not in done.stderr, command


def test_every_other_command_starts_in_a_gateway_only_install(tmp_path: Path) -> None:
    """'everything else works': without openai, httpx, ruamel.yaml, PyYAML and python-dotenv,
    every command outside the worker extra at least parses its options."""
    others = sorted(set(COMMANDS) - set(REQUIRES))
    code = (
        "import contextlib, io\nfrom kexpr.ops.cli import main\ncodes = {}\n"
        f"for name in {others!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        codes[name] = main([name, '--help'])\n"
        "print(codes)\n"
    )
    done = _gateway_only(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert ast.literal_eval(done.stdout.strip().splitlines()[-1]) == dict.fromkeys(others, 0)


# --- the Korean guide's calls are the wiring's --------------------------------------


def _call(source: str) -> tuple[str, int, frozenset[str]]:
    """(method name, positional count, keyword names) of one call expression."""
    node = ast.parse(source.replace("…", "..."), mode="eval").body
    if isinstance(node, ast.Await):
        node = node.value
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute), source
    return node.func.attr, len(node.args), frozenset(k.arg for k in node.keywords if k.arg)


def _readme_calls() -> dict[str, tuple[str, int, frozenset[str]]]:
    calls = {}
    for m in re.finditer(r"coord\.(a?present_[a-z]+)\(", WIRING):
        depth, i = 0, m.end() - 1
        while True:
            depth += {"(": 1, ")": -1}.get(WIRING[i], 0)
            if depth == 0:
                break
            i += 1
        text = "\n".join(line.split("#")[0] for line in WIRING[m.start() : i + 1].splitlines())
        calls[m.group(1)] = _call(text)
    return calls


def test_the_korean_guides_calls_are_the_readmes() -> None:
    readme = _readme_calls()
    assert set(readme) == {"apresent_daily", "apresent_weekly", "apresent_adaptive"}
    # Inline code only: the guide's fenced blocks (its runnable host) are tested by running.
    prose = re.sub(r"```.*?```", "", GUIDE, flags=re.S)
    spans = re.findall(r"`([^`]*present_[^`]*)`", prose)
    calls = [s for s in spans if "(" in s]
    assert len(calls) >= 3
    for span in calls:
        name, positional, keywords = _call(span)
        assert name in readme, span  # the async call docs/wiring.md shows, never the sync twin
        r_name, r_positional, r_keywords = readme[name]
        assert positional == r_positional, span
        # Every keyword docs/wiring.md passes; beyond it only a documented option.
        assert r_keywords <= keywords, span
    for span in spans:
        for name in re.findall(r"\b(a?present_[a-z]+)\b", span):
            assert name in readme, span
    assert not re.search(r"(?<![a-z])present_(daily|weekly|adaptive)\b", GUIDE)


# --- the goldens' README ------------------------------------------------------------


def test_the_goldens_readme_command_runs_every_example(tmp_path: Path) -> None:
    text = (GOLDENS / "README.md").read_text("utf-8")
    (command,) = re.findall(r"```sh\n(.*?)\n```", text, re.S)
    assert command.endswith("| kexpr surfaces check --jsonl -")
    kexpr = Path(sys.executable).with_name("kexpr")
    done = subprocess.run(
        ["bash", "-c", "set -o pipefail; " + command],
        cwd=REPO,
        env={"PATH": f"{kexpr.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    examples = [
        json.loads(line)
        for line in (GOLDENS / "host-examples.jsonl").read_text("utf-8").splitlines()
    ]
    verdicts = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 1, done.stderr  # some examples are ineligible on purpose
    assert len(verdicts) == len(examples)
    assert all(v["reason"] != "invalid_request" for v in verdicts)
    assert [v["eligible"] for v in verdicts] == [e["expected"] == "eligible" for e in examples]

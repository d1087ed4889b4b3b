"""Every command's bad input (issue 14 item 6, issue 24 item 2): one line naming the
path (or field) and the reason in true words, the documented exit code, never a
traceback, never a hang.

Two tables:

- ``CASES``: hand-picked inputs (YAML bombs, FIFOs, range errors), each run as a
  real ``kexpr`` process bounded by a timeout (the old code hung > 20 s on a
  "billion laughs" file and on a FIFO; the bound is generous for a loaded machine).
- ``MATRIX``: every path argument of every command (`kexpr --help` lists them)
  × {missing, FIFO, device, directory, empty, binary, unreadable} for files and
  {missing, FIFO, regular file, empty directory, unreadable} for data roots, run
  in-process through `kexpr.ops.cli.main` (a process per cell would take minutes
  on a loaded machine). Each cell names the exact problem enum, the words
  `kexpr.ops.inputs` says for it and the path. Unreadable cells are skipped as
  root, where permissions do not bite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest
from kit.spool import STYLED_SLOT

from kexpr.ops.cli import COMMANDS, main
from kexpr.ops.inputs import WORDS, Problem
from kexpr.ops.preflight import MAX_YAML_DEPTH, MAX_YAML_NODES
from kexpr.spool.contract import Capsule
from kexpr.spool.layout import DataRoot

pytestmark = pytest.mark.e2e

AS_ROOT = "file permissions do not bite here (root): run as a regular user to exercise it"


def _permissions_bite(d: Path) -> bool:
    try:
        (d / "unreadable").read_bytes()
    except PermissionError:
        return True
    return False


LAUGHS = "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for c, p in zip("abcdefghi", ["", *"abcdefgh"], strict=True)
)
LEGACY_VIA_MERGE = """\
base: &base
  coaching_feedback_enabled: true
  enabled: true
platforms:
  telegram:
    extra:
      other: 1
      physique_checkin:
        <<: *base
        x: 1
"""
GLOSSARY = {
    "version": "kexpr-dual-glossary-v1",
    "decisions": {"P_DUAL_DECISION_KEEP_TARGET": "현재 목표 섭취량 유지"},
    "reasons": {"P_DUAL_REASON_TREND_SHORT": "체중 추세를 판단할 기간이 짧습니다."},
}


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("bad")
    os.mkfifo(d / "fifo")
    (d / "real").mkdir(mode=0o700)
    (d / "link").symlink_to(d / "real")
    (d / "laughs.yaml").write_text(LAUGHS)
    (d / "recursive.yaml").write_text("a: &a [*a]\n")
    (d / "deep.yaml").write_text("a: " + "[" * 20000 + "]" * 20000 + "\n")
    (d / "deep_maps.yaml").write_text(
        "a:\n" + "".join(" " * i + "b:\n" for i in range(1, MAX_YAML_DEPTH + 5))
    )
    (d / "merge.yaml").write_text(LEGACY_VIA_MERGE)
    (d / "big.yaml").write_bytes(b"#" * (4 * 1024 * 1024 + 1))
    # The matrix's inputs.
    (d / "directory").mkdir()
    (d / "directory" / "x").write_text("x\n")
    (d / "emptydir").mkdir()
    (d / "empty").write_bytes(b"")
    (d / "binary").write_bytes(bytes(range(256)) * 4)
    (d / "latin1").write_bytes("caf\u00e9: 1\n".encode("latin-1"))
    (d / "unreadable").write_text("a: 1\n")
    (d / "unreadable").chmod(0)
    (d / "unreadabledir").mkdir()
    (d / "unreadabledir" / "x").write_text("x\n")
    (d / "unreadabledir").chmod(0)
    (d / "regular").write_text("a regular file\n")
    (d / "glossary.json").write_text(json.dumps(GLOSSARY, ensure_ascii=False))
    (d / "capsule.json").write_text(_capsule_json())
    (d / "requests.jsonl").write_text('{"surface": "daily.v1", "body": "x"}\n')
    DataRoot(d / "root").ensure()
    yield d
    (d / "unreadabledir").chmod(0o700)


def _capsule_json() -> str:
    """A valid capsule: the one styled slot (the weekly goal-missing interpretation)."""
    return Capsule(
        schema_version="korean-expression-v4",
        surface="weekly.v1",
        artifact_key="0123456789abcdef0123456789abcdef",
        slots=(STYLED_SLOT,),
    ).to_json()


# (argv with {bad} placeholders, exit code, a fragment of the one error line)
CASES: list[tuple[str, int, str]] = [
    ("preflight {bad}/fifo", 2, "not a regular file (a FIFO, device or socket)"),
    ("preflight /dev/zero", 2, "config /dev/zero: not a regular file"),
    ("preflight {bad}/big.yaml", 2, "big.yaml: larger than this input may be (too_large)"),
    ("preflight {bad}/missing.yaml", 2, "missing.yaml: no such file or directory (missing)"),
    ("preflight {bad}/laughs.yaml", 1, "FAIL yaml_error:too_many_nodes"),
    ("preflight {bad}/recursive.yaml", 1, "FAIL yaml_error:recursive_alias"),
    ("preflight {bad}/deep.yaml", 1, "FAIL yaml_error:too_deep"),
    ("preflight {bad}/deep_maps.yaml", 1, "FAIL yaml_error:too_deep"),
    ("preflight {bad}/merge.yaml", 1, "FAIL legacy_coaching_feedback_enabled"),
    ("migrate-config {bad}/fifo", 2, "fifo: not a regular file"),
    ("migrate-config {bad}/laughs.yaml", 1, "yaml_error:too_many_nodes"),
    ("migrate-config {bad}/recursive.yaml", 1, "yaml_error:recursive_alias"),
    ("migrate-config {bad}/deep.yaml", 1, "yaml_error:too_deep"),
    (
        "migrate-config {bad}/merge.yaml",
        1,
        "not_line_editable at platforms.telegram.extra.physique_checkin",
    ),
    (
        "contract check --capsule {bad}/fifo --response {bad}/fifo",
        2,
        "--capsule {bad}/fifo: not a regular file",
    ),
    (
        "contract check --capsule /dev/zero --response /dev/zero",
        2,
        "--capsule /dev/zero: not a regular file",
    ),
    ("contract check --jsonl {bad}/fifo", 2, "--jsonl {bad}/fifo: not a regular file"),
    ("contract check --jsonl /dev/zero", 2, "--jsonl /dev/zero: not a regular file"),
    ("contract nope", 2, "usage: kexpr contract check"),
    ("promotion-report --days 800000", 2, "argument --days: must be between 1 and 3660"),
    ("promotion-report --days 0", 2, "argument --days: must be between 1 and 3660"),
    ("promotion-report --days x", 2, "argument --days: not an integer"),
    ("promotion-report --data-root {bad}/fifo", 2, "fifo: not a directory (not_a_directory)"),
    ("status --stale-after nan", 2, "argument --stale-after: must be in (0, 86400]"),
    ("status --stale-after -1", 2, "argument --stale-after: must be in (0, 86400]"),
    ("status --data-root {bad}/fifo", 2, "fifo: not a directory (not_a_directory)"),
    ("supervise --max-restarts -1", 2, "argument --max-restarts: must be between 0 and 10000"),
    ("supervise --restart-window inf", 2, "argument --restart-window: must be in (0, 604800]"),
    (
        "supervise --max-calls-per-hour 0",
        2,
        "argument --max-calls-per-hour: must be between 1 and 100000",
    ),
    ("run --max-calls-per-day x", 2, "argument --max-calls-per-day: not an integer"),
    (
        "worker --max-calls-per-day 100001",
        2,
        "argument --max-calls-per-day: must be between 1 and 100000",
    ),
    ("supervise --data-root {bad}/link", 74, "kexpr supervise: unsafe_data_root: symlink"),
    ("supervise --data-root {bad}/fifo", 74, "kexpr supervise: unsafe_data_root: not_directory"),
    ("worker --data-root {bad}/link", 74, "kexpr worker: exit unsafe_data_root"),
    ("run --data-root {bad}/link", 74, "kexpr run: unsafe_data_root: symlink"),
    # docs/cli.md: a data root that is not a directory is unusable input (2).
    ("journal verify --data-root {bad}/fifo", 2, "fifo: not a directory (not_a_directory)"),
    ("journal quarantine --data-root {bad}/root --segment x", 2, "--segment must be YYYY-MM-DD"),
    ("journal nope", 2, "invalid choice"),
    ("audit --worker-pid 0", 2, "argument --worker-pid: must be between 1 and 2147483647"),
    (
        "audit --gateway-pid 99999999999999999999",
        2,
        "argument --gateway-pid: must be between 1 and 2147483647",
    ),
    ("audit --env-file {bad}/fifo", 2, "UNUSABLE env_file_unreadable: not a regular file"),
    ("nope", 2, "kexpr: unknown command 'nope'"),
]


@pytest.mark.parametrize(
    ("argv", "code", "fragment"), CASES, ids=[c[0].replace("{bad}/", "") for c in CASES]
)
def test_each_subcommand_fails_cleanly_on_bad_input(
    bad: Path, argv: str, code: int, fragment: str
) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    r = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", *argv.format(bad=bad).split()],
        capture_output=True,
        text=True,
        # A bound for a hang, not a speed: parallel workers on a loaded machine
        # took > 20 s for the 20,000-deep YAML (which ends in ~1 s when idle).
        timeout=120,
        env=env,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "Error:" not in r.stderr.replace("error:", "")
    assert r.returncode == code, out
    # One line says what is wrong (argparse's usage banner aside).
    hits = [line for line in out.splitlines() if fragment.format(bad=bad) in line]
    assert len(hits) == 1, out
    errors = [
        line for line in r.stderr.splitlines() if line and not line.startswith((" ", "usage:"))
    ]
    assert len(errors) <= 1, r.stderr


def test_the_yaml_budget_is_the_documented_one() -> None:
    # The laughs file expands to 9**9 nodes: far past the budget, refused
    # without being walked (the test above runs it within its bound).
    assert 9**9 > MAX_YAML_NODES >= 10_000 and MAX_YAML_DEPTH >= 32


# ------------------------------------------------------------ the matrix


@dataclass(frozen=True)
class PathArg:
    """One path argument: ``argv`` with ``{p}`` for the path under test and
    ``{bad}`` for the fixtures' directory; ``what`` as the line names it."""

    argv: str
    what: str
    # "file" (a text file), "lines" (JSON lines), "response" (judged as bytes),
    # "data_root", "dest"
    kind: str


PATH_ARGS: list[PathArg] = [
    PathArg("preflight {p}", "config", "file"),
    PathArg("migrate-config {p}", "config", "file"),
    PathArg("contract check --jsonl {p}", "--jsonl", "lines"),
    PathArg("contract check --capsule {p} --response {bad}/regular", "--capsule", "file"),
    PathArg("contract check --capsule {bad}/capsule.json --response {p}", "--response", "response"),
    PathArg("surfaces check --jsonl {p}", "--jsonl", "lines"),
    PathArg("surfaces check --surface daily.v1 {p}", "FILE", "file"),
    PathArg("surfaces check --glossary {p} --jsonl {bad}/requests.jsonl", "--glossary", "file"),
    PathArg("glossary check {p}", "FILE", "file"),
    PathArg("glossary install {p} --data-root {bad}/root", "FILE", "file"),
    PathArg("glossary install {bad}/glossary.json --data-root {p}", "--data-root", "data_root"),
    PathArg("audit --env-file {p}", "env_file", "file"),
    PathArg("audit --data-root {p}", "data_root", "data_root"),
    PathArg("status --data-root {p}", "--data-root", "data_root"),
    PathArg("promotion-report --data-root {p}", "--data-root", "data_root"),
    PathArg("identity check --data-root {p}", "--data-root", "data_root"),
    PathArg("identity rotate --data-root {p}", "--data-root", "data_root"),
    PathArg("journal verify --data-root {p}", "--data-root", "data_root"),
    PathArg("journal stats --data-root {p}", "--data-root", "data_root"),
    PathArg("journal prune --data-root {p}", "--data-root", "data_root"),
    PathArg("journal quarantine --segment 2026-11-30 --data-root {p}", "--data-root", "data_root"),
    PathArg("quarantine clear --data-root {p}", "--data-root", "data_root"),
    PathArg("systemd-units --instance x --dest {p}", "--dest", "dest"),
    PathArg("run --data-root {bad}/unused --ssl-cert-file {p}", "--ssl-cert-file", "file"),
    PathArg("supervise --data-root {bad}/unused --ssl-cert-file {p}", "--ssl-cert-file", "file"),
]

# (fixture name, expected problem) per kind; None: the input is not refused.
FILE_CASES: list[tuple[str, Problem]] = [
    ("missing", Problem.MISSING),
    ("fifo", Problem.NOT_REGULAR_FILE),
    ("/dev/null", Problem.NOT_REGULAR_FILE),
    ("directory", Problem.IS_DIRECTORY),
    ("empty", Problem.EMPTY),
    ("binary", Problem.BINARY),
    ("latin1", Problem.NOT_TEXT),
    ("unreadable", Problem.PERMISSION_DENIED),
]
# JSON lines judge each line's encoding (one bad line does not hide the others).
LINES_CASES: list[tuple[str, Problem | None]] = [
    *((n, p) for n, p in FILE_CASES if n != "latin1"),
    ("latin1", None),
]
RESPONSE_CASES: list[tuple[str, Problem | None]] = [
    ("missing", Problem.MISSING),
    ("fifo", Problem.NOT_REGULAR_FILE),
    ("directory", Problem.IS_DIRECTORY),
    ("unreadable", Problem.PERMISSION_DENIED),
    # The response is the model's raw bytes: empty or binary is judged (rejected).
    ("empty", None),
    ("binary", None),
]
DATA_ROOT_CASES: list[tuple[str, Problem]] = [
    ("missing", Problem.MISSING),
    ("fifo", Problem.NOT_A_DIRECTORY),
    ("regular", Problem.NOT_A_DIRECTORY),
    ("emptydir", Problem.EMPTY_DIRECTORY),
    ("unreadabledir", Problem.PERMISSION_DENIED),
]
DEST_CASES: list[tuple[str, Problem | None]] = [
    ("fifo", Problem.NOT_A_DIRECTORY),
    ("regular", Problem.NOT_A_DIRECTORY),
    ("/dev/null", Problem.NOT_A_DIRECTORY),
    ("unreadabledir", Problem.PERMISSION_DENIED),
]
KINDS: dict[str, list[tuple[str, Problem]] | list[tuple[str, Problem | None]]] = {
    "file": FILE_CASES,
    "lines": LINES_CASES,
    "response": RESPONSE_CASES,
    "data_root": DATA_ROOT_CASES,
    "dest": DEST_CASES,
}
MATRIX = [(arg, name, problem) for arg in PATH_ARGS for name, problem in KINDS[arg.kind]]


def _id(cell: tuple[PathArg, str, Problem | None]) -> str:
    arg, name, _ = cell
    return f"{arg.argv.split(' {')[0].replace(' --', ' ').replace(' ', '-')}[{arg.what}]-{name}"


class _Hung(Exception):
    pass


@pytest.fixture
def bounded() -> Iterator[None]:
    """No cell may block (a FIFO opened for reading would): 20 s, then it fails."""

    def hung(signum: int, frame: FrameType | None) -> None:
        raise _Hung

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("arg", "name", "problem"), MATRIX, ids=[_id(c) for c in MATRIX])
def test_every_path_argument_refuses_bad_input_in_one_true_line(
    bad: Path,
    capsys: pytest.CaptureFixture[str],
    bounded: None,
    arg: PathArg,
    name: str,
    problem: Problem | None,
) -> None:
    if name.startswith("unreadable") and not _permissions_bite(bad):
        pytest.skip(AS_ROOT)
    path = name if name.startswith("/") else f"{bad}/{name}"
    argv = arg.argv.format(p=path, bad=bad).split()
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if problem is None and arg.kind == "lines":  # read, and the line judged invalid
        assert code == 2, out + err
        assert len(out.splitlines()) == 1 and json.loads(out)["reason"].startswith("invalid_")
        assert err.splitlines()[0].endswith("line 1: " + json.loads(out)["reason"])
        return
    if problem is None:  # judged, not refused
        assert code == 1, out + err
        assert json.loads(out)["verdict"] in ("invalid_response", "validation_rejected")
        return
    assert code == 2, out + err
    expected = f"{arg.what} {path}: {WORDS[problem]} ({problem.value})"
    if arg.what in ("env_file", "data_root"):  # the audit's report line names the check
        expected = f"{path}: UNUSABLE {arg.what}_"
        assert f": {WORDS[problem]} ({problem.value})" in out, out
        assert sum(expected in line for line in out.splitlines()) == 1, out
        return
    lines = [line for line in err.splitlines() if line]
    assert lines == [f"kexpr {' '.join(argv[:2]) if _two_words(argv) else argv[0]}: {expected}"]
    # Nothing was started or created: no data root for run/supervise.
    assert not (bad / "unused").exists()


def _two_words(argv: list[str]) -> bool:
    return argv[0] in ("contract", "surfaces", "glossary", "identity", "journal", "quarantine")


def test_the_matrix_covers_every_command() -> None:
    covered = {arg.argv.split()[0] for arg in PATH_ARGS}
    # `worker` takes only --data-root, which it creates or refuses as unsafe (exit 74,
    # CASES above): a missing data root is the worker's to make.
    assert covered | {"worker"} == set(COMMANDS)


@pytest.mark.parametrize(
    "argv",
    [
        "status --json --data-root {p}",
        "promotion-report --json --data-root {p}",
        "journal verify --json --data-root {p}",
        "preflight --json {p}",
        "migrate-config --json {p}",
    ],
)
def test_json_commands_also_say_it_as_json(
    bad: Path, capsys: pytest.CaptureFixture[str], argv: str
) -> None:
    path = bad / "fifo"
    code = main(argv.format(p=path).split())
    out, err = capsys.readouterr()
    assert code == 2
    doc = json.loads(out)
    if argv.startswith(("preflight", "migrate-config")):  # a config, not a data root
        words = "not a regular file (a FIFO, device or socket)"
        assert err.endswith(f"config {path}: {words} (not_regular_file)\n")
        assert doc["error"] == {"input": "config", "path": str(path), "problem": "not_regular_file"}
        return
    assert err.endswith(f"--data-root {path}: not a directory (not_a_directory)\n")
    if argv.startswith("status"):  # the status schema: verdict and problem
        assert (doc["verdict"], doc["problem"]) == (
            "status_unreadable",
            "data_root_not_a_directory",
        )
    else:
        assert doc["error"] == {
            "input": "--data-root",
            "path": str(path),
            "problem": "not_a_directory",
        }


def test_audit_json_carries_the_problem(bad: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--json", "--env-file", f"{bad}/binary"]) == 2
    (check,) = json.loads(capsys.readouterr().out)["checks"]
    assert (check["unusable"], check["problem"]) == ("env_file_unreadable", "binary")


def test_audit_env_file_on_binary_says_not_text_without_dotenv_warnings(bad: Path) -> None:
    # The old code decoded with replacement characters, let python-dotenv warn once
    # per unparsable line on stderr, and said `clean`.
    r = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "audit", "--env-file", f"{bad}/binary"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 2
    assert r.stderr == ""
    assert "clean" not in r.stdout and "python-dotenv" not in r.stdout
    assert f"{bad}/binary: UNUSABLE env_file_unreadable: a binary file" in r.stdout


def test_audit_env_file_with_unparsable_lines_prints_no_parser_warnings(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text("TELEGRAM_BOT_TOKEN=x\nthis is not an assignment\n'unclosed\n")
    r = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "audit", "--env-file", env],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (r.returncode, r.stderr) == (0, ""), r.stdout + r.stderr
    assert f"{env}: clean" in r.stdout


_NO_DOTENV = (
    "import importlib.abc, sys\n"
    "class Hide(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name.split('.')[0] == 'dotenv':\n"
    "            raise ModuleNotFoundError(name)\n"
    "        return None\n"
    "sys.meta_path.insert(0, Hide())\n"
    "from kexpr.ops.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def test_audit_env_file_without_the_ops_extra_says_one_line(tmp_path: Path) -> None:
    # A gateway-only install has no python-dotenv: the old code printed a traceback
    # (`No module named 'dotenv'`) and exited 1.
    env = tmp_path / ".env"
    env.write_text("TELEGRAM_BOT_TOKEN=x\n")
    r = subprocess.run(
        [sys.executable, "-c", _NO_DOTENV, "audit", "--env-file", str(env)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (
        "kexpr audit: --env-file needs the ops extra (python-dotenv missing here): "
        "install `kexpr[ops]`\n"
    )


def test_an_unprintable_path_is_shown_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = f"{tmp_path}/x\x1b[2Jy"
    assert main(["glossary", "check", path]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b[2Jy" in err and "(missing)" in err

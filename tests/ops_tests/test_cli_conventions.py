"""CLI conventions (docs/cli.md): `--version`, unknown commands, `--help`
of every command, one exit-code table for every command, worker commands in a
gateway-only install."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from ops_support import CLEAN_ENV, kexpr

from kexpr.ops.cli import COMMANDS, REQUIRES, main, missing_packages

DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    code, out, _ = run(capsys, "--version")
    assert (code, out) == (0, f"kexpr {metadata.version('kexpr')}\n")
    assert kexpr("-V").stdout == out


def test_unknown_command_says_so_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "bogus")
    assert (code, out) == (2, "")
    assert err == "kexpr: unknown command 'bogus' (`kexpr --help` lists them)\n"
    # Nothing unprintable or long is echoed back.
    assert (
        run(capsys, "x\x1b[2J" + "y" * 100)[2]
        == "kexpr: unknown command '?' (`kexpr --help` lists them)\n"
    )
    assert run(capsys, "y" * 100)[2].count("y") == 40


def test_no_command_is_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert (code, out) == (2, "") and err.startswith("usage: kexpr")
    code, out, err = run(capsys, "--help")
    assert (code, err) == (0, "") and all(f"  {name} " in out for name in COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_help_and_refuses_an_unknown_option(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0 and out.startswith(f"usage: kexpr {command}")
    code, out, err = run(capsys, command, "--no-such-option")
    assert code == 2 and out == "" and "usage: kexpr" in err


def test_subcommands_of_journal_and_contract_have_help(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (
        ("journal", "verify"),
        ("journal", "stats"),
        ("journal", "prune"),
        ("journal", "quarantine"),
        ("contract", "check"),
    ):
        code, out, _ = run(capsys, *args, "--help")
        assert code == 0 and out.startswith(f"usage: kexpr {' '.join(args)}"), args
    assert run(capsys, "contract")[0] == 2
    assert run(capsys, "contract", "judge")[0] == 2


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("promotion-report",),
        ("journal", "verify"),
        ("journal", "stats"),
        ("journal", "prune"),
        ("journal", "quarantine", "--segment", "2026-11-30"),
        ("audit",),
    ],
)
def test_a_missing_data_root_is_unusable_input_everywhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...]
) -> None:
    code, _, _ = run(capsys, *args, "--data-root", tmp_path / "missing")
    assert code == 2


def test_the_documented_table_covers_every_command() -> None:
    text = DOC.read_text()
    per_command = text.split("Per command", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z-]+)` \|", per_command, flags=re.MULTILINE)
    assert rows == list(COMMANDS)
    for code in ("69", "70", "71", "73", "74", "78"):
        assert re.search(rf"^\| {code} \|", text, flags=re.MULTILINE), code


def test_the_worker_exit_codes_are_the_documented_ones() -> None:
    from kexpr.ops.supervisor import CRASH_LOOP_EXIT, FATAL_EXITS
    from kexpr.worker.exitcodes import ExitCode

    text = DOC.read_text()
    documented = {int(c) for c in re.findall(r"^\| (6\d|7\d) \|", text, flags=re.MULTILINE)}
    assert documented == {CRASH_LOOP_EXIT} | {int(c) for c in ExitCode if c}
    for code in FATAL_EXITS:
        assert f"| {code} | worker: `{ExitCode(code).name.lower()}`" in text
        assert re.search(rf"^\| {code} \|.*never restarted", text, flags=re.MULTILINE)


# ------------------------------------------------------------ gateway-only install

# Hides the worker's packages from this interpreter, as in a base install.
_HIDE = (
    "import importlib.abc, sys\n"
    "class Hide(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name.split('.')[0] in ('openai', 'httpx'):\n"
    "            raise ModuleNotFoundError(name)\n"
    "        return None\n"
    "sys.meta_path.insert(0, Hide())\n"
    "from kexpr.ops.cli import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


def gateway_only(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _HIDE, *map(str, args)],
        env=dict(CLEAN_ENV, OPENAI_API_KEY="sk-unused-0000"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", sorted(REQUIRES))
def test_worker_commands_without_the_worker_extra_say_one_line_and_exit_2(
    tmp_path: Path, command: str
) -> None:
    root = tmp_path / "root"
    done = gateway_only(command, "--data-root", root)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"kexpr {command}: needs the worker extra (openai, httpx missing here): install `kexpr[worker]`\n"
    )
    # Refused before anything started: no data root, no supervisor status, no restarts.
    assert not root.exists()
    # --help still works there.
    assert gateway_only(command, "--help").returncode == 0


def test_missing_packages_is_found_without_importing() -> None:
    assert missing_packages(["json", "kexpr_no_such_package_zz"]) == ["kexpr_no_such_package_zz"]
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys; from kexpr.ops.cli import missing_packages;"
                "missing_packages(['openai', 'httpx']); print('openai' in sys.modules, 'httpx' in sys.modules)"
            ),
        ],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert probe.stdout == "False False\n"


# ------------------------------------------------------------ systemd-units

# The package's own copy (the source tree here, site-packages when run from the sdist).
UNITS = Path(str(resources.files("kexpr.ops").joinpath("systemd")))


def test_systemd_units_writes_the_shipped_files_for_an_instance(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dest = tmp_path / "units"
    code, out, err = run(capsys, "systemd-units", "--instance", "physique-coach", "--dest", dest)
    assert (code, err) == (0, "")
    shipped = sorted(p.name for p in UNITS.iterdir())
    assert sorted(p.name for p in dest.iterdir()) == shipped
    for name in shipped:
        assert (dest / name).read_bytes() == (UNITS / name).read_bytes(), name
    assert "systemctl daemon-reload && systemctl enable --now kexpr-worker@physique-coach" in out
    assert "/var/lib/kexpr/physique-coach/korean-expression-v1" in out
    # Again: identical files are fine.
    assert run(capsys, "systemd-units", "--instance", "physique-coach", "--dest", dest)[0] == 0


def test_systemd_units_exec_rewrites_only_the_program(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, _ = run(
        capsys,
        "systemd-units",
        "--instance",
        "dualcoachtest",
        "--dest",
        tmp_path,
        "--exec",
        "/srv/kexpr/venv/bin/kexpr",
    )
    assert code == 0
    got = (tmp_path / "kexpr-worker@.service").read_text().splitlines()
    want = (UNITS / "kexpr-worker@.service").read_text().splitlines()
    diff = [(a, b) for a, b in zip(want, got, strict=True) if a != b]
    assert diff == [
        (
            "ExecStart=/opt/kexpr/venv/bin/kexpr worker --data-root /var/lib/kexpr/%i/korean-expression-v1"
            " --max-calls-per-hour 120 --max-calls-per-day 600",
            "ExecStart=/srv/kexpr/venv/bin/kexpr worker --data-root /var/lib/kexpr/%i/korean-expression-v1"
            " --max-calls-per-hour 120 --max-calls-per-day 600",
        )
    ]


@pytest.mark.parametrize(
    "args",
    [
        ("--instance", "../etc", "--dest", "D"),
        ("--instance", "a@b", "--dest", "D"),
        ("--instance", "-x", "--dest", "D"),
        ("--instance", "ok", "--dest", "D", "--exec", "relative/kexpr"),
        ("--instance", "ok", "--dest", "D", "--exec", "/a b/kexpr"),
        ("--instance", "ok", "--dest", "D", "--exec", "/%h/kexpr"),
        ("--dest", "D"),
    ],
)
def test_systemd_units_usage_errors_write_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: tuple[str, ...]
) -> None:
    args = tuple(str(tmp_path / "D") if a == "D" else a for a in args)
    assert run(capsys, "systemd-units", *args)[0] == 2
    assert not (tmp_path / "D").exists()


def test_systemd_units_never_overwrites_other_contents(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "kexpr.tmpfiles.conf").write_text("# the operator's own edit\n")
    code, out, err = run(capsys, "systemd-units", "--instance", "p", "--dest", tmp_path)
    assert (code, out) == (1, "")
    assert (
        err
        == "kexpr systemd-units: refused: kexpr.tmpfiles.conf already in --dest with other contents\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kexpr.tmpfiles.conf"]
    assert (tmp_path / "kexpr.tmpfiles.conf").read_text() == "# the operator's own edit\n"

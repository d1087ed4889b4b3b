"""Packaging invariants (design §2): the layout, the light gateway-side install, the
console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_queue_is_not_a_package_and_stdlib_queue_wins() -> None:
    assert not (REPO / "queue" / "__init__.py").exists()
    assert (REPO / "queue" / "spool" / "__init__.py").exists()
    # With the repo root first on sys.path (as `python -m pytest` does), `queue`
    # must still be the standard library's.
    code = "import queue, concurrent.futures, logging.handlers; print(queue.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO)},
    )
    assert "site-packages" not in out.stdout and str(REPO / "queue") not in out.stdout


def test_base_install_is_light_and_never_pulls_openai() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {
        d.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()
        for d in project["dependencies"]
    }
    # filelock is gone: the project's own flock (spool.fsio.ProductLock) needs the
    # locked descriptor, which filelock keeps private (issue 15).
    assert names == {"pydantic", "watchdog"}
    # The worker's own environment narrows watchdog to the major version whose
    # InotifyFD its wake-up calls (worker/inbox.py _InboxWatch).
    # And it states the httpx/httpcore ranges its bounded transport is tested on
    # (issue 26 item 5; test_dependency_ranges.py installs both ends).
    assert project["optional-dependencies"]["worker"] == [
        "openai==2.24.0",
        "watchdog>=7.1,<8",
        "httpx>=0.24.0,<0.29",
        "httpcore>=0.17.3,<1.1",
    ]
    base = [r for r in metadata.requires("kexpr") or [] if "extra ==" not in r]
    assert not any(r.lower().startswith("openai") for r in base)


def test_console_script_dispatches(tmp_path: Path) -> None:
    kexpr = Path(sys.executable).with_name("kexpr")
    out = subprocess.run([str(kexpr), "--help"], capture_output=True, text=True, check=True)
    for cmd in ("run", "supervise", "worker", "contract"):
        assert cmd in out.stdout
    assert subprocess.run([str(kexpr), "no-such-command"], capture_output=True).returncode == 2
    capsule = {
        "schema_version": "korean-expression-v4",
        "surface": "weekly.v1",
        "artifact_key": "a" * 64,
        "slots": [
            {
                "slot_id": "weekly.interpretation",
                "allowed_predicate_ids": ["P_WEEKLY_TREND_OBSERVED"],
                "allowed_action_ids": ["A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
                "required_placeholder_tokens": ["[[P:01]]", "[[A:01]]"],
                "max_generated_chars": 220,
                "max_style_lexemes": 16,
            }
        ],
    }
    response = {
        "schema_version": "korean-expression-v4",
        "surface": "weekly.v1",
        "artifact_key": "a" * 64,
        "slots": [
            {
                "slot_id": "weekly.interpretation",
                "predicate_ids": ["P_WEEKLY_TREND_OBSERVED"],
                "action_ids": ["A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
                "placeholder_tokens": ["[[P:01]]", "[[A:01]]"],
                "generated_ko": "[[P:01]]. 다만 [[A:01]].",
            }
        ],
    }
    (tmp_path / "c.json").write_text(json.dumps(capsule))
    (tmp_path / "r.txt").write_text(json.dumps(response, ensure_ascii=False, indent=2))
    out = subprocess.run(
        [
            str(kexpr),
            "contract",
            "check",
            "--capsule",
            str(tmp_path / "c.json"),
            "--response",
            str(tmp_path / "r.txt"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and json.loads(out.stdout) == {"verdict": "accepted", "reason": None}
    response["slots"][0]["generated_ko"] = "[[P:01]]. 오늘은 [[A:01]]."  # type: ignore[index]
    (tmp_path / "r.txt").write_text(json.dumps(response, ensure_ascii=False))
    out = subprocess.run(
        [
            str(kexpr),
            "contract",
            "check",
            "--capsule",
            str(tmp_path / "c.json"),
            "--response",
            str(tmp_path / "r.txt"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    assert json.loads(out.stdout) == {"verdict": "validation_rejected", "reason": "unknown_word"}
    assert "오늘은" not in out.stdout + out.stderr


def test_contract_check_does_not_import_the_worker() -> None:
    code = (
        "import sys, io; from kexpr.ops.contract_cli import run_contract_check;"
        "run_contract_check(['--help'], io.StringIO(), io.StringIO()) if False else None;"
        "import kexpr.ops.cli; assert 'openai' not in sys.modules and 'kexpr.worker.daemon' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

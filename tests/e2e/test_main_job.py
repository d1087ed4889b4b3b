"""`kexpr run` (what `make run` runs): the main job end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakeapi import FakeOpenAI

pytestmark = pytest.mark.e2e


def run_job(data_root: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ops.cli", "run", "--data-root", str(data_root), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def rows(stdout: str) -> list[list[str]]:
    lines = [line for line in stdout.splitlines() if line.startswith("daily.v1")]
    return [line.split() for line in lines]


def test_main_job_without_key_is_canonical(data_root: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = run_job(data_root, env)
    assert out.returncode == 0, out.stderr
    got = rows(out.stdout)
    assert len(got) == 2
    assert all("credential_unavailable" in r and "canonical" in r for r in got)


def test_main_job_with_key_reaches_the_provider(data_root: Path, fake_api: FakeOpenAI) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": "sk-demo"}
    out = run_job(data_root, env, "--https-proxy", fake_api.proxy_url, "--ssl-cert-file", str(fake_api.ca_file))
    assert out.returncode == 0, out.stderr
    got = rows(out.stdout)
    assert len(got) == 2
    assert all("shadow_selected" in r for r in got)
    assert len(fake_api.requests) == 2
    assert all(r.headers["authorization"] == "Bearer sk-demo" for r in fake_api.requests)

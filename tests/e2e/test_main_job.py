"""`kexpr run` (what `make run` runs): the main job end to end."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakeapi import FakeOpenAI

from kexpr.spool.outcomes import CANDIDATE_OUTCOMES

pytestmark = pytest.mark.e2e


def run_job(data_root: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "run", "--data-root", str(data_root), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


SURFACES = ("daily.v1", "weekly.v1", "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1")
# The samples, one row each: every surface, the dual card with two review reasons.
EXPECTED_SAMPLES = [
    ("daily.v1", "daily complete"),
    ("daily.v1", "daily partial"),
    ("weekly.v1", "weekly in goal"),
    ("adaptive.dualcoachtest.card.v1", "dual card, 2 reasons"),
    ("adaptive.physique.card.v1", "physique card"),
]


def rows(stdout: str) -> list[list[str]]:
    """The table's data rows as columns, cut at the dashed rule's column starts."""
    lines = stdout.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    starts = [0] + [m.end() for m in re.finditer(r"  (?=-)", lines[rule])]
    out = []
    for line in lines[rule + 1 :]:
        if line.startswith(SURFACES):
            cuts = [*starts, len(line)]
            out.append([line[a:b].strip() for a, b in itertools.pairwise(cuts)])
    return out


def samples(got: list[list[str]]) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in got]


def test_main_job_without_key_is_canonical(data_root: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = run_job(data_root, env)
    assert out.returncode == 0, out.stderr
    got = rows(out.stdout)
    assert samples(got) == EXPECTED_SAMPLES
    assert all(r[2:4] == ["credential_unavailable", "canonical"] for r in got)
    legend = out.stdout.split("\noutcome:\n", 1)[1].splitlines()
    assert legend[0].split(None, 1) == [
        "credential_unavailable",
        "the worker has no OPENAI_API_KEY: no request was made, canonical body",
    ]
    assert (
        "live call: `OPENAI_API_KEY=sk-... make run` (only the worker receives the key; shadow mode)"
        in legend
    )
    # Then the example answers, replayed through the shim, each labelled as such.
    examples = [line for line in out.stdout.splitlines() if line.startswith("[example, replayed] ")]
    assert [line.split(" · ")[0].removeprefix("[example, replayed] ") for line in examples] == list(
        SURFACES
    )
    assert all(line.endswith(" · accepted") for line in examples)
    assert "not a live call" in out.stdout and out.stdout.count("  styled:") == len(SURFACES)
    # Each row shows its first slot's canonical sentence.
    text = out.stdout
    assert "현재 판단: 순응도 근거 충돌로 조정 보류" in text
    assert "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요." in text


def test_main_job_with_key_reaches_the_provider(data_root: Path, fake_api: FakeOpenAI) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": "sk-demo"}
    out = run_job(
        data_root,
        env,
        "--https-proxy",
        fake_api.proxy_url,
        "--ssl-cert-file",
        str(fake_api.ca_file),
    )
    assert out.returncode == 0, out.stderr
    got = rows(out.stdout)
    assert samples(got) == EXPECTED_SAMPLES
    assert all(r[2:4] == ["shadow_selected", "canonical"] for r in got)
    legend = out.stdout.split("\noutcome:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in legend] == [
        "shadow_selected"
    ]  # and no hint: the call was made
    assert "[example, replayed]" not in out.stdout  # the live rows show the point
    assert len(fake_api.requests) == len(EXPECTED_SAMPLES)
    capsules = [r.capsule for r in fake_api.requests]
    assert sorted(c["surface"] for c in capsules if c) == sorted(s for s, _ in EXPECTED_SAMPLES)
    (dual,) = [c for c in capsules if c and c["surface"] == "adaptive.dualcoachtest.card.v1"]
    assert [s["slot_id"] for s in dual["slots"]] == [
        "adaptive.dual.judgment",
        "adaptive.dual.review.1",
        "adaptive.dual.review.2",
    ]
    assert all(r.headers["authorization"] == "Bearer sk-demo" for r in fake_api.requests)


def test_the_legend_explains_every_outcome() -> None:
    from kexpr.ops.demo import OUTCOME_LEGEND

    assert set(OUTCOME_LEGEND) == {o.value for o in CANDIDATE_OUTCOMES}
    assert all(OUTCOME_LEGEND.values())

"""The short crash campaign, in ``make test`` (the long one: ``make crash N=1000``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Real processes (design §10 black-box): the registered `e2e` marker; included in
# the default run (`make test`) in this short, bounded form.
pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
SHORT_ROUNDS = 24
# A fixed seed: the same plan of kills every run (which victim, at which phase),
# so two runs of `make test` exercise the same rounds; where a kill lands within
# its phase still depends on real timing. `make crash` draws a fresh seed.
SEED = 20261201


def test_short_crash_campaign(tmp_path: Path) -> None:
    seed = SEED
    p = subprocess.run(
        [
            sys.executable,
            str(HERE / "campaign.py"),
            "--rounds",
            str(SHORT_ROUNDS),
            "--seed",
            str(seed),
            "--workdir",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    lines = p.stdout.strip().splitlines()
    assert lines, p.stderr[-4000:]
    counts = json.loads(lines[-1])
    detail = f"seed={seed} counts={counts} stderr={p.stderr[-4000:]}"
    assert p.returncode == 0, detail
    assert counts["violations"] == 0, detail
    assert counts["max_requests_per_artifact"] <= 1, detail
    assert counts["verify_failures"] == 0, detail
    # Open at the end only if answered (awaiting a report within COMMIT_GRACE).
    assert counts["open_attempts_at_end"] == 0, detail
    assert counts["rounds"] == SHORT_ROUNDS and counts["kills_total"] > 0, detail
    assert counts["requests_total"] == counts["artifacts_requested"], detail

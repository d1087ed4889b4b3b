"""The controlled live shadow proof (plan "Verification … controlled live shadow").

Runs only with ``RUN_KOREAN_EXPRESSION_LIVE=1`` and ``OPENAI_API_KEY`` set::

    RUN_KOREAN_EXPRESSION_LIVE=1 OPENAI_API_KEY=… \\
        .venv/bin/python -m pytest -q -m live_korean_expression tests/live

12 real calls: 12 distinct synthetic redacted capsules for each surface with
something to style — the goal-missing weekly report alone under the reviewed fit
table (design §6.2) — through the real supervised worker (the only process given
the key) and a gateway process started without it. The daily summary and both
adaptive cards have nothing to style: never presented, and the summary says
"nothing to style: not promotable" with the reason (never a failure, never
passed). Passes only with 12 ``shadow_selected``, zero other outcomes, zero host calls and zero content in any
captured field. The proof summary is written to ``$KEXPR_LIVE_PROOF_DIR`` (default
``var/live-proof/<UTC time>/``); ``make test`` runs the same harness against the
loopback fake (`test_shadow_rehearsal.py`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from shadow_harness import CASES, COUNT, NOTHING_TO_STYLE, PROOF_CASES, run_proof

pytestmark = [
    pytest.mark.live_korean_expression,
    pytest.mark.skipif(
        os.environ.get("RUN_KOREAN_EXPRESSION_LIVE") != "1",
        reason="live shadow proof: set RUN_KOREAN_EXPRESSION_LIVE=1 and OPENAI_API_KEY (12 real API calls)",
    ),
]


def test_live_shadow_12_of_12(tmp_path: Path) -> None:
    key = os.environ.get("OPENAI_API_KEY", "")
    if not key.strip():
        pytest.fail("RUN_KOREAN_EXPRESSION_LIVE=1 needs OPENAI_API_KEY")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = Path(os.environ.get("KEXPR_LIVE_PROOF_DIR") or Path("var/live-proof") / stamp)
    root = tmp_path / "data" / "korean-expression-v1"
    root.parent.mkdir(mode=0o700)
    run = run_proof(
        root,
        out_dir,
        key=key,
        mode="live",
        https_proxy=os.environ.get("KEXPR_LIVE_HTTPS_PROXY"),
        ssl_cert_file=os.environ.get("KEXPR_LIVE_SSL_CERT_FILE"),
    )
    assert run.passed, json.dumps(run.summary, indent=2)
    assert list(run.summary["surfaces"]) == [c.surface for c in PROOF_CASES] == ["weekly.v1"]
    assert sum(s["shadow_selected"] for s in run.summary["surfaces"].values()) == COUNT == 12
    assert sorted(run.summary["nothing_to_style"]) == sorted(NOTHING_TO_STYLE)
    assert len(CASES) == len(PROOF_CASES) + len(NOTHING_TO_STYLE) == 4

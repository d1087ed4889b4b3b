"""The controlled live shadow proof (plan "Verification … controlled live shadow").

Runs only with ``RUN_KOREAN_EXPRESSION_LIVE=1`` and ``OPENAI_API_KEY`` set::

    RUN_KOREAN_EXPRESSION_LIVE=1 OPENAI_API_KEY=… \\
        .venv/bin/python -m pytest -q -m live_korean_expression tests/live

48 real calls: 12 distinct synthetic redacted capsules for each of the four
surfaces, through the real supervised worker (the only process given the key)
and a gateway process started without it. Passes only with 48
``shadow_selected``, zero other outcomes, zero host calls and zero content in any
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
from shadow_harness import CASES, COUNT, run_proof

pytestmark = [
    pytest.mark.live_korean_expression,
    pytest.mark.skipif(
        os.environ.get("RUN_KOREAN_EXPRESSION_LIVE") != "1",
        reason="live shadow proof: set RUN_KOREAN_EXPRESSION_LIVE=1 and OPENAI_API_KEY (48 real API calls)",
    ),
]


def test_live_shadow_48_of_48(tmp_path: Path) -> None:
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
    assert len(run.summary["surfaces"]) == len(CASES) == 4
    assert sum(s["shadow_selected"] for s in run.summary["surfaces"].values()) == 4 * COUNT == 48

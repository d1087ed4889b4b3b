"""An operator ID is a generic type, never a field (`kexpr.spool.contract.manifest`
Rule 6), at the worker too: a request whose capsule carries an open-family ID
outside the grammar (a digit, a name and a phone number in it; an older shim's
glossary) is refused by a real worker before any row or call. Before, the
grammar allowed digits and any length, and such an ID went to the model."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pytest
from conftest import start_supervised_worker
from fakeapi import FakeOpenAI

from kexpr.spool.contract import Capsule, slot_policy
from kexpr.spool.fsio import publish
from kexpr.spool.journal import Journal, SpoolMode, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import SPOOL_VERSION, SpoolRequest

STAND_IN = "P_DUAL_REASON_KEEP_TARGET"


def _request(root: DataRoot, n: int, semantic_id: str) -> str:
    """A dual request issuing ``semantic_id``, written byte for byte as an older
    shim would (the stand-in ID replaced in the serialized request: today's
    models refuse to build it)."""
    rid = f"{n:032x}"
    now = dt.datetime.now(dt.UTC)
    req = SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=rid,
        submitted_at_utc=format_ts(now),
        deadline_at_utc=format_ts(now + dt.timedelta(seconds=4)),
        mode=SpoolMode.SHADOW,
        capsule=Capsule(
            schema_version="korean-expression-v4",
            surface="adaptive.dualcoachtest.card.v1",
            artifact_key=f"{n:032x}",
            slots=(slot_policy("adaptive.dual.review.2", [STAND_IN]),),
        ),
    )
    data = req.to_bytes().replace(STAND_IN.encode(), semantic_id.encode())
    publish(root.tmp, root.requests / f"{rid}.json", data)
    return rid


def _answer(root: DataRoot, rid: str, timeout: float = 20.0) -> dict[str, object]:
    path = root.responses / f"{rid}.json"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            return json.loads(path.read_bytes())  # type: ignore[no-any-return]
        except (FileNotFoundError, ValueError):
            time.sleep(0.02)
    raise AssertionError("no response")


@pytest.mark.e2e
@pytest.mark.parametrize(
    "semantic_id",
    [
        "P_DUAL_REASON_KIM_MINJI_01012345678",
        "P_DUAL_REASON_" + "A" * 4000,
        "P_DUAL_REASON_" + "_".join(["ABCDEFGHIJKL"] * 3),
    ],
    ids=["digits", "4000_chars", "49_chars"],
)
def test_a_real_worker_refuses_an_open_id_outside_the_grammar(
    data_root: Path, fake_api: FakeOpenAI, semantic_id: str
) -> None:
    worker = start_supervised_worker(data_root, fake_api)
    root = worker.root
    try:
        refused = _answer(root, _request(root, 1, semantic_id))
        assert (refused["status"], refused["outcome"]) == ("canonical", "invalid_request")
        assert fake_api.requests == []  # nothing went to the model
        assert Journal(root, create_lock=False).load().by_attempt == {}  # no row
        assert semantic_id[16:].encode() not in b"".join(
            p.read_bytes() for p in root.root.rglob("*") if p.is_file()
        )
    finally:
        assert worker.stop() == 0

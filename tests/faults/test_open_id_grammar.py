"""An operator ID is a generic type, never a field (`kexpr.spool.contract.manifest`
Rule 6), at the worker too: a request whose capsule carries an open-family ID
outside the grammar (a digit, a name and a phone number in it; an older shim's
glossary) is refused by a real worker before any row or call. Before, the
grammar allowed digits and any length, and such an ID went to the model.

The open families are the dual card's operator IDs, and the dual card has nothing
to style now (design §6.2): today's shim writes no request for it, and a capsule
with a dual slot is refused (`slot_unstyleable`). An older shim's request can
still carry one, so the grammar is still the first thing such an ID meets: the
slot's own rules run before the capsule's, and an ID outside the grammar is
refused as not in the manifest, whatever the table allows."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from conftest import start_supervised_worker
from fakeapi import FakeOpenAI
from kit.spool import await_answer, files_bytes

from kexpr.spool.canonical import canonical_json
from kexpr.spool.contract import Capsule, CapsuleError, slot_policy
from kexpr.spool.contract.reasons import CapsuleReason
from kexpr.spool.fsio import publish
from kexpr.spool.journal import Journal, SpoolMode, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import SPOOL_VERSION

STAND_IN = "P_DUAL_REASON_KEEP_TARGET"
DUAL = "adaptive.dualcoachtest.card.v1"


def _capsule_doc(semantic_id: str, key: str) -> dict[str, object]:
    """A dual card's second review line carrying ``semantic_id``, as an older shim
    wrote its capsule (today's models refuse to build it)."""
    slot = slot_policy("adaptive.dual.review.2", [STAND_IN]).model_dump(mode="json")
    slot["allowed_predicate_ids"] = [semantic_id]
    return {
        "schema_version": "korean-expression-v4",
        "surface": DUAL,
        "artifact_key": key,
        "slots": [slot],
    }


def _write_older_request(root: DataRoot, n: int, semantic_id: str) -> str:
    rid = f"{n:032x}"
    now = dt.datetime.now(dt.UTC)
    doc = {
        "spool_version": SPOOL_VERSION,
        "request_id": rid,
        "submitted_at_utc": format_ts(now),
        "deadline_at_utc": format_ts(now + dt.timedelta(seconds=4)),
        "mode": SpoolMode.SHADOW.value,
        "capsule": _capsule_doc(semantic_id, rid),
    }
    publish(root.tmp, root.requests / f"{rid}.json", canonical_json(doc).encode())
    return rid


def _capsule_reason(semantic_id: str) -> CapsuleReason:
    with pytest.raises(CapsuleError) as e:
        Capsule.from_json(canonical_json(_capsule_doc(semantic_id, "1" * 32)))
    return e.value.reason


def test_the_grammar_refuses_before_the_table() -> None:
    """An in-grammar operator ID is refused only because its slot is locked; one
    outside the grammar is refused by the grammar itself, first."""
    assert _capsule_reason(STAND_IN) is CapsuleReason.SLOT_UNSTYLEABLE
    assert _capsule_reason("P_DUAL_REASON_KIM_MINJI_01012345678") is (
        CapsuleReason.IDS_NOT_IN_MANIFEST
    )


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
    # The same bytes in-process: refused by the grammar, not by the table.
    assert _capsule_reason(semantic_id) is CapsuleReason.IDS_NOT_IN_MANIFEST
    worker = start_supervised_worker(data_root, fake_api)
    root = worker.root
    try:
        refused = await_answer(root, _write_older_request(root, 1, semantic_id))
        assert (refused["status"], refused["outcome"]) == ("canonical", "invalid_request")
        assert fake_api.requests == []  # nothing went to the model
        assert Journal(root, create_lock=False).load().by_attempt == {}  # no row
        assert semantic_id[16:].encode() not in b"".join(files_bytes(root.root))
    finally:
        assert worker.stop() == 0

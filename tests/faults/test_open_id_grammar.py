"""An operator ID is a generic type, never a field (`kexpr.spool.contract.manifest`
Rule 6), at the worker too: a request whose capsule carries an open-family ID
outside the grammar (a digit, a name and a phone number in it; an older shim's
glossary) is refused by a real worker before any row or call. Before, the
grammar allowed digits and any length, and such an ID went to the model."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import start_supervised_worker
from fakeapi import FakeOpenAI
from kit.spool import await_answer, files_bytes, write_request

from kexpr.spool.contract import slot_policy
from kexpr.spool.journal import Journal

STAND_IN = "P_DUAL_REASON_KEEP_TARGET"


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
        refused = await_answer(
            root,
            write_request(
                root,
                1,
                surface="adaptive.dualcoachtest.card.v1",
                # Swapped in as an older shim would write it: today's models refuse it.
                slot=slot_policy("adaptive.dual.review.2", [STAND_IN]),
                replace=(STAND_IN, semantic_id),
            ),
        )
        assert (refused["status"], refused["outcome"]) == ("canonical", "invalid_request")
        assert fake_api.requests == []  # nothing went to the model
        assert Journal(root, create_lock=False).load().by_attempt == {}  # no row
        assert semantic_id[16:].encode() not in b"".join(files_bytes(root.root))
    finally:
        assert worker.stop() == 0

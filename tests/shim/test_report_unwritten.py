"""A report that cannot be written is visible (coordinator rule 16): `report`
returns False and `reports_unwritten` counts it. A written one returns True."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kit.bodies import STYLED_BODY, STYLED_SELECTED, present_styled

from gateway_shim import Mode, Outcome
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import parse_report
from shim.test_coordinator import ScriptedWorker, accepted, coordinator

# The styled weekly's interpretation slot, as the fit table allows it (design §6.1).
STYLED = "[[P:01]]. 다만 [[A:01]]."


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    return DataRoot(tmp_path / "root")


def _block_reports(root: DataRoot) -> None:
    # A plain file where reports/ should be: every publish into it fails
    # (NotADirectoryError), for root too.
    shutil.rmtree(root.reports)
    root.reports.write_bytes(b"")


def test_a_written_report_returns_true_and_counts_nothing(root: DataRoot) -> None:
    coord = coordinator(root.root, weekly=True)
    with ScriptedWorker(root, accepted(STYLED)):
        cand = present_styled(coord, "evt")
        assert (cand.outcome, cand.body) == (Outcome.ACCEPTED, STYLED_SELECTED)
        assert coord.report(cand, Outcome.SELECTED) is True
    coord.close()
    assert parse_report((root.reports / f"{'e' * 32}.json").read_bytes()).outcome.value == (
        "selected"
    )
    assert coord.reports_unwritten == 0


def test_a_report_that_cannot_be_written_returns_false_and_is_counted(root: DataRoot) -> None:
    coord = coordinator(root.root, weekly=True)
    with ScriptedWorker(root, accepted(STYLED)):
        cand = present_styled(coord, "evt")
        assert cand.outcome is Outcome.ACCEPTED
        _block_reports(root)
        written = coord.report(cand, Outcome.SELECTED)
    coord.close()
    assert written is False
    assert coord.reports_unwritten == 1
    # Still exactly once: the attempt's report was used up, not retried.
    with pytest.raises(ValueError, match="^report_not_expected$"):
        coord.report(cand, Outcome.SELECTED)


def test_the_shims_own_report_that_cannot_be_written_is_counted(root: DataRoot) -> None:
    coord = coordinator(root.root, Mode.SHADOW, weekly=True)

    def answer_then_block(req: dict[str, object]) -> dict[str, object] | bytes | None:
        _block_reports(root)
        return accepted(STYLED)(req)

    with ScriptedWorker(root, answer_then_block):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome is Outcome.SHADOW_SELECTED and cand.body == STYLED_BODY
    assert coord.reports_unwritten == 1

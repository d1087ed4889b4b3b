"""The host's own examples (tests/surfaces/goldens/host-examples.jsonl, recorded from
the Hermes gateway at the pin, docs/host-formats.md) through `kexpr surfaces check`'s
core: every eligible one is eligible and round-trips byte for byte; every
ineligible one is ineligible with an enum reason. Of the eligible ones only the
goal-missing weekly report (W5, interpretation branch I2) has a slot to style, its
interpretation with two compositions (design §6.1, §6.2); every other one has
nothing to style."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_host.host_render import BRANCH_TEXT

from kexpr.ops.surfaces_cli import check_request

GOLDENS = Path(__file__).parent / "goldens" / "host-examples.jsonl"
EXAMPLES = [json.loads(line) for line in GOLDENS.read_text("utf-8").splitlines()]


def test_the_examples_cover_every_surface_both_ways() -> None:
    seen = {(e["request"]["surface"], e["expected"]) for e in EXAMPLES}
    for surface in ("daily.v1", "weekly.v1", "adaptive.dualcoachtest.card.v1"):
        assert {(surface, "eligible"), (surface, "ineligible")} <= seen


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["example"] for e in EXAMPLES])
def test_host_example_verdict(example: dict[str, object]) -> None:
    result = check_request(example["request"])
    if example["expected"] == "eligible":
        assert (result.eligible, result.reason, result.roundtrip) == (True, None, True)
        request = example["request"]
        assert isinstance(request, dict)
        if request["surface"] == "weekly.v1" and BRANCH_TEXT["I2"] in str(request.get("body")):
            assert result.slots == (
                (
                    "weekly.interpretation",
                    ("P_WEEKLY_TREND_OBSERVED",),
                    ("A_WEEKLY_HOLD_FOR_MISSING_GOAL",),
                ),
            )
            assert result.compositions == (2,)
        else:
            assert (result.slots, result.words, result.compositions) == ((), (), ())
    else:
        assert (result.eligible, result.slots, result.roundtrip) == (False, (), None)
        assert isinstance(result.reason, str) and result.reason.isascii()


def test_the_examples_include_the_one_styled_message() -> None:
    styled = [
        e for e in EXAMPLES if e["expected"] == "eligible" and check_request(e["request"]).slots
    ]
    assert [e["example"] for e in styled] == ["HOST-FORMATS.md W5"]

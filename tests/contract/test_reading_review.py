"""The reading review ties the fit table to blind readers' verdicts (design §6.2).

`reading/` holds the review as data: the A/B sheets a reader saw, their keys, every
reader's answers and the verdicts. These tests recompute the verdicts from the answers,
rebuild the sheets from the script, and hold the table to them: no word in a cell that
a counted reader liked less than the host's text or read as a change of meaning, and no
word beyond the plan's twenty without readers who preferred it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kexpr.spool.contract.fit import FIT, OPEN_FAMILY_FIT, Position
from kexpr.spool.contract.lexicon import SAFE_STYLE_LEXEMES

READING = Path(__file__).resolve().parents[2] / "reading"
sys.path.insert(0, str(READING))

import review  # noqa: E402

# The plan's own lexicon (seed plan, "Korean style grammar"); a word beyond it entered
# by the readers' route alone.
PLAN_LEXICON = frozenset(
    "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 순서대로 함께 지금 이제 여기서 아래 "
    "바로 그대로 특히 잠시 다시".split()
)


def _committed_verdicts() -> dict[str, dict[str, Any]]:
    data = json.loads((READING / "verdicts.json").read_text(encoding="utf-8"))
    cells: dict[str, dict[str, Any]] = data["cells"]
    return cells


def test_the_committed_verdicts_are_the_answers_tallied() -> None:
    committed = json.loads((READING / "verdicts.json").read_text(encoding="utf-8"))
    assert review.verdicts() == committed


def test_the_sheets_are_the_script_s_own(tmp_path: Path) -> None:
    review.build_sheets(tmp_path)
    for folder in ("sheets", "keys"):
        built = {p.name: p.read_bytes() for p in (tmp_path / folder).iterdir()}
        committed = {p.name: p.read_bytes() for p in (READING / folder).iterdir()}
        assert built == committed


def test_a_sheet_shows_messages_and_nothing_of_what_is_tested() -> None:
    for sheet in (READING / "sheets").glob("sheet-*.md"):
        text = sheet.read_text(encoding="utf-8")
        for telltale in ("host", "styled", "canonical", "P_", "A_", "cell", "lexeme"):
            assert telltale not in text, (sheet.name, telltale)


def test_every_sheet_has_its_three_controls_and_at_least_two_counted_readers() -> None:
    readers = json.loads((READING / "verdicts.json").read_text(encoding="utf-8"))["readers"]
    for keys in (READING / "keys").glob("sheet-*.json"):
        kinds = [k["kind"] for k in json.loads(keys.read_text(encoding="utf-8"))]
        assert sorted(k for k in kinds if k != "cell") == ["calm", "identical", "meaning"]
        sheet = keys.name.removesuffix(".json")
        counted = [r for r, v in readers.items() if r.startswith(sheet + ".") and v["counted"]]
        assert len(counted) >= 2, sheet


@pytest.mark.parametrize(
    ("kind", "better", "meaning"),
    [
        ("identical", "A", "same"),  # an identical pair judged different
        ("identical", "same", "different"),
        ("calm", "same", "same"),  # 차분히, not read as worse
        ("calm", "styled", "same"),
        ("meaning", "same", "same"),  # 잠시 not read as a change of meaning
    ],
)
def test_a_reader_whose_control_fails_is_not_counted(kind: str, better: str, meaning: str) -> None:
    key = review.KeyItem(1, kind, None, "daily-complete-b", "A")
    side = {"styled": "B"}.get(better, better)
    answer = review.Answer(1, side, 3, 3, meaning, "")
    assert review.controls_pass([key], [answer]) is False


def test_a_reader_whose_controls_hold_is_counted() -> None:
    keys = [
        review.KeyItem(1, "identical", None, "daily-complete-b", "A"),
        review.KeyItem(2, "calm", None, "daily-complete-b", "B"),
        review.KeyItem(3, "meaning", None, "daily-complete-b", "A"),
    ]
    answers = [
        review.Answer(1, "same", 4, 4, "same", ""),
        review.Answer(2, "B", 2, 4, "same", ""),
        review.Answer(3, "A", 4, 2, "different", ""),
    ]
    assert review.controls_pass(keys, answers) is True


@pytest.mark.parametrize(
    "row",
    [
        {"item": 1, "better": "A", "natural_a": 4, "natural_b": 3, "meaning": "same"},
        {"item": 1, "better": "C", "natural_a": 4, "natural_b": 3, "meaning": "same", "note": ""},
        {"item": 1, "better": "A", "natural_a": 6, "natural_b": 3, "meaning": "same", "note": ""},
        {"item": 1, "better": "A", "natural_a": 4, "natural_b": 3, "meaning": "maybe", "note": ""},
    ],
)
def test_an_answer_outside_the_form_is_refused(tmp_path: Path, row: dict[str, object]) -> None:
    path = tmp_path / "sheet-1.reader-9.json"
    path.write_text(json.dumps([row]), encoding="utf-8")
    with pytest.raises(ValueError):
        review.read_answers(path)


def _table_cells() -> list[str]:
    keys = []
    for semantic_id, cells in FIT.items():
        for position in Position:
            for style in cells[position]:
                comma = "," if style.comma else ""
                keys.append(f"{semantic_id}/{position.value}/{style.lexeme}{comma}")
    return keys


def test_every_word_of_the_table_has_readers_who_liked_it_at_least_as_well() -> None:
    verdicts = _committed_verdicts()
    cells = _table_cells()
    assert cells, "the table styles nothing: this test would hold vacuously"
    for key in cells:
        verdict = verdicts[key]
        assert verdict["verdict"] in ("keep", "admit"), key
        assert verdict["host_preferred"] == 0 and verdict["meaning_change"] == 0, key
        assert verdict["judgements"] >= 2 * review.BODIES_PER_CELL, key


def test_no_word_the_readers_dropped_is_in_the_table() -> None:
    in_table = set(_table_cells())
    dropped = {k for k, v in _committed_verdicts().items() if v["verdict"] not in ("keep", "admit")}
    assert not in_table & dropped


def test_the_operator_families_take_no_unreviewed_word() -> None:
    # The operator's IDs have no body of the host's to be read on: their family cell
    # holds only words some shipped ID of the same slot was read with.
    reviewed = {k.split("/", 1)[1] for k in _table_cells()}
    for cells in OPEN_FAMILY_FIT.values():
        for position in Position:
            for style in cells[position]:
                comma = "," if style.comma else ""
                assert f"{position.value}/{style.lexeme}{comma}" in reviewed


def test_a_word_beyond_the_plan_s_lexicon_was_preferred_where_the_table_uses_it() -> None:
    verdicts = _committed_verdicts()
    new_words = set(SAFE_STYLE_LEXEMES) - PLAN_LEXICON
    assert PLAN_LEXICON <= set(SAFE_STYLE_LEXEMES)
    # The one word the readers preferred (design §6.2), and nothing else beyond the plan.
    assert new_words == {"다만"}
    for key in _table_cells():
        word = key.rsplit("/", 1)[1].rstrip(",")
        if word in new_words:
            assert verdicts[key]["verdict"] == "admit"
            assert verdicts[key]["styled_preferred"] >= 1
    # and the lexicon holds no new word that no cell uses
    used = {k.rsplit("/", 1)[1].rstrip(",") for k in _table_cells()}
    assert new_words <= used


def test_the_readers_preferred_one_word_and_read_every_other_worse() -> None:
    # What the review found (design §6.2), pinned so that a new answer file that
    # changes it changes the design text with it.
    verdicts = _committed_verdicts()
    kept = sorted(k for k, v in verdicts.items() if v["verdict"] in ("keep", "admit"))
    assert kept == [
        "A_WEEKLY_HOLD_FOR_MISSING_GOAL/later/다만",
        "A_WEEKLY_HOLD_FOR_MISSING_GOAL/later/다만,",
    ]
    assert all(v["meaning_change"] == 0 for v in verdicts.values())


def test_every_reviewed_body_is_one_the_surfaces_accept() -> None:
    from gateway_shim.surfaces.daily import parse_daily
    from gateway_shim.surfaces.weekly import parse_weekly

    for name, body in review.BODIES.items():
        if name.startswith("daily-"):
            parse_daily(body)
        elif name.startswith("weekly-"):
            parse_weekly(body, explicit_fields=())

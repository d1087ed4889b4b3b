"""`make run`'s example answers (ops/replay.py): replayed through the shim's real
validation and rendering, marked, labelled as examples, and refused like a live
answer when they break the contract. The samples are `make run`'s own."""

from __future__ import annotations

from pathlib import Path

import pytest

from kexpr.ops.demo import _samples
from kexpr.ops.replay import ExampleResponder, load_examples, mark_slots, replay

SURFACES = {"daily.v1", "weekly.v1", "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1"}
# The one surface with a slot to ask (design §6.2): the goal-missing weekly report.
STYLED = "weekly.v1"


def first_per_surface():
    seen: dict[str, object] = {}
    for s in _samples():
        seen.setdefault(s.surface, s)
    return [(s.surface, s.label, s.present) for s in seen.values()]  # type: ignore[attr-defined]


def test_mark_slots_wraps_everything_outside_the_locked_spans() -> None:
    body = "가\n😀 나다\n라"
    # UTF-16: "가\n" = 2 units, "😀" = 2 units (a surrogate pair).
    assert mark_slots(body, [(0, 2), (7, 9)]) == "가\n⟦😀 나다⟧\n라"
    assert mark_slots(body, []) == "⟦" + body + "⟧"
    assert mark_slots(body, [(0, 9)]) == body


def locked(text: str) -> list[str]:
    """The text between the marked runs."""
    return [part.split("⟧")[-1] for part in text.split("⟦")]


def test_the_styled_example_is_accepted_and_changes_only_slot_text() -> None:
    assert set(load_examples()) == {STYLED}
    results = replay(first_per_surface())
    assert {r.surface for r in results} == SURFACES
    for r in results:
        if r.surface != STYLED:
            # Nothing to style: the host's text, no request, no slot text to mark.
            assert (r.outcome, r.styled) == ("nothing_to_style", None), r.surface
            assert "⟦" not in r.canonical, r.surface
            continue
        assert r.outcome == "accepted" and r.styled is not None, r.surface
        # Same locked bytes in the same places: only the marked runs differ.
        assert locked(r.styled) == locked(r.canonical), r.surface
        assert r.styled != r.canonical and r.styled.count("⟦") == r.canonical.count("⟦") >= 1
        assert "다만, " in r.styled and "다만" not in r.canonical


def test_every_example_answer_is_one_the_fit_table_accepts() -> None:
    """The hand-written answers follow the table (design §6.1): each is one of its
    slot's listed compositions for the demo's sample."""
    from kexpr.spool.contract.fit import compositions

    ids = ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL")
    for slot_id, generated in load_examples()[STYLED].items():
        assert generated in compositions(slot_id, ids), slot_id


def test_an_example_that_breaks_the_contract_is_canonical(monkeypatch: pytest.MonkeyPatch) -> None:
    (weekly,) = [s for s in first_per_surface() if s[0] == STYLED]
    bad = {
        "[[P:01]]. 오늘은 [[A:01]].",  # 오늘은: not in the lexicon
        "[[P:01]]. 그리고 [[A:01]].",  # a lexicon word outside its cell (style_misfit)
        "[[P:01]]. [[A:01]].",  # no style word at all
    }
    for generated in bad:
        monkeypatch.setattr(
            "kexpr.ops.replay.load_examples",
            lambda g=generated: {STYLED: {"weekly.interpretation": g}},
        )
        (r,) = replay([weekly])
        assert (r.outcome, r.styled) == ("validation_rejected", None), generated
    monkeypatch.setattr("kexpr.ops.replay.load_examples", dict)  # no example for the surface at all
    (r,) = replay([weekly])
    assert r.outcome == "validation_rejected" and r.styled is None


def test_the_responder_leaves_nothing_behind(tmp_path: Path) -> None:
    with ExampleResponder(tmp_path / "root", load_examples()) as responder:
        assert responder.root.requests.is_dir()
    assert not list(responder.root.requests.iterdir())

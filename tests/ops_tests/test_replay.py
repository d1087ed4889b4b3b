"""`make run`'s example answers (ops/replay.py): replayed through the shim's real
validation and rendering, marked, labelled as examples, and refused like a live
answer when they break the contract. The samples are `make run`'s own."""

from __future__ import annotations

from pathlib import Path

import pytest

from kexpr.ops.demo import _samples
from kexpr.ops.replay import ExampleResponder, load_examples, mark_slots, replay

SURFACES = {"daily.v1", "weekly.v1", "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1"}


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


def test_every_surface_example_is_accepted_and_changes_only_slot_text() -> None:
    assert set(load_examples()) == SURFACES
    results = replay(first_per_surface())
    assert {r.surface for r in results} == SURFACES
    for r in results:
        assert r.outcome == "accepted" and r.styled is not None, r.surface
        # Same locked bytes in the same places: only the marked runs differ.
        assert locked(r.styled) == locked(r.canonical), r.surface
        assert r.styled != r.canonical and r.styled.count("⟦") == r.canonical.count("⟦") >= 1


def test_an_example_that_breaks_the_contract_is_canonical(monkeypatch: pytest.MonkeyPatch) -> None:
    (daily,) = [s for s in first_per_surface() if s[0] == "daily.v1"]
    monkeypatch.setattr(
        "kexpr.ops.replay.load_examples",
        lambda: {"daily.v1": {"daily.status": "오늘은 차분히, [[P:01]]."}},
    )
    (r,) = replay([daily])  # 오늘은: not in the lexicon
    assert (r.outcome, r.styled) == ("validation_rejected", None)
    monkeypatch.setattr("kexpr.ops.replay.load_examples", dict)  # no example for the surface at all
    (r,) = replay([daily])
    assert r.outcome == "validation_rejected" and r.styled is None


def test_the_responder_leaves_nothing_behind(tmp_path: Path) -> None:
    with ExampleResponder(tmp_path / "root", load_examples()) as responder:
        assert responder.root.requests.is_dir()
    assert not list(responder.root.requests.iterdir())

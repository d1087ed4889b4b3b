"""The fit table (design §6.1), cell by cell, in both validators.

For every shipped semantic ID, every slot and position it can take, every lexeme of
the lexicon and both joins (``", "`` and ``" "``), one composition carries that one
word before that one sentence: the worker's `judge` and the shim's re-validation
(`CanonicalSurface.render`) must accept it exactly when the table's cell holds the
word with that join, and otherwise reject it with ``style_misfit``. The expected
verdict is read from the reviewed table as data (`EXPECTED`, written out here, not
derived from `fit.FIT`), so an edit of the table that the review did not make fails.
"""

from __future__ import annotations

import itertools

import pytest

from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces._model import (
    CanonicalSurface,
    Locked,
    Placeholder,
    ProseSlot,
    RenderError,
    RenderReason,
    SlotRef,
    sentence_separator,
)
from kexpr.spool.contract import (
    SAFE_STYLE_LEXEMES,
    Capsule,
    CapsuleError,
    CapsuleReason,
    Reason,
    Verdict,
    check_generated,
    check_grammar,
    fit,
    judge,
    slot_policy,
    tokens_for,
)
from kexpr.spool.contract.answers import answer_json
from kexpr.spool.contract.manifest import MANIFEST

KEY = "0f" * 16

# The review of design §6.1 as the blind readers' verdicts left it (§6.2), as (ID,
# position) -> the runs allowed ("word," with the comma, "word" with a plain space).
# Every cell not listed is empty: 다만, with or without its comma, before the
# goal-missing hold, and nothing anywhere else.
EXPECTED: dict[tuple[str, fit.Position], frozenset[str]] = {
    ("A_WEEKLY_HOLD_FOR_MISSING_GOAL", fit.Position.LATER): frozenset({"다만", "다만,"}),
}
# The one slot the table leaves a choice: the weekly interpretation, branch I2.
I2: tuple[str, tuple[str, ...]] = (
    "weekly.interpretation",
    ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"),
)


def _placements() -> list[tuple[str, tuple[str, ...], int]]:
    """(slot_id, branch, index of the sentence) for every slot a shipped ID can take."""
    out: list[tuple[str, tuple[str, ...], int]] = []
    for row in MANIFEST.values():
        for slot_id in row.slot_ids[:2]:  # review.1 (first) and review.2 (later) stand for all
            for branch in row.branches:
                out.extend((slot_id, branch, n) for n in range(len(branch)))
    return out


PLACEMENTS = _placements()
RUNS = [(word, comma) for word in SAFE_STYLE_LEXEMES for comma in (True, False)]


def _text(branch: tuple[str, ...], index: int, word: str, comma: bool) -> str:
    tokens = tokens_for(branch)
    run = word + (", " if comma else " ")
    return " ".join((run if n == index else "") + t + "." for n, t in enumerate(tokens))


def _expected(slot_id: str, semantic_id: str, index: int, word: str, comma: bool) -> bool:
    allowed = EXPECTED.get((semantic_id, fit.position_of(slot_id, index)), frozenset())
    return (word + ("," if comma else "")) in allowed


def _surface(slot_id: str, branch: tuple[str, ...], surface: str) -> CanonicalSurface:
    placeholders = tuple(
        Placeholder(token=t, semantic_id=i, expansion=GLOSSARY[i])
        for t, i in zip(tokens_for(branch), branch, strict=True)
    )
    final_period = slot_id != "adaptive.dual.judgment"
    canonical = sentence_separator(slot_id).join(p.expansion + "." for p in placeholders)
    if not final_period:
        canonical = canonical[:-1]
    slot = ProseSlot(
        slot_id=slot_id,
        placeholders=placeholders,
        canonical_text=canonical,
        final_period=final_period,
    )
    return CanonicalSurface(
        surface=surface,
        body="머리\n" + canonical + "\n꼬리",
        slots=(slot,),
        segments=(Locked("머리\n"), SlotRef(0), Locked("\n꼬리")),
    )


def test_the_expected_table_is_the_shipped_table() -> None:
    # The review above and the module's data say the same, cell for cell.
    for semantic_id in fit.FIT:
        for position in fit.Position:
            runs = {s.text.rstrip() for s in fit.cell(semantic_id, position)}
            assert runs == EXPECTED.get((semantic_id, position), frozenset()), semantic_id


@pytest.mark.parametrize(("slot_id", "branch", "index"), PLACEMENTS)
def test_every_cell_in_the_worker_judge(slot_id: str, branch: tuple[str, ...], index: int) -> None:
    policy = slot_policy(slot_id, branch)
    row = MANIFEST[next(p for p, r in MANIFEST.items() if slot_id in r.slot_ids)]
    styleable = fit.slot_styleable(slot_id, branch)
    for word, comma in RUNS:
        text = _text(branch, index, word, comma)
        want = _expected(slot_id, branch[index], index, word, comma)
        # The contract's own verdict on the slot (what `judge` runs per slot).
        assert check_grammar(policy, text) is None, text
        assert check_generated(policy, text) is (None if want else Reason.STYLE_MISFIT), text
        if not styleable:
            # A slot without a choice is never asked: no capsule can carry it.
            with pytest.raises(CapsuleError) as e:
                Capsule(
                    schema_version="korean-expression-v4",
                    surface=row.surface,
                    artifact_key=KEY,
                    slots=(policy,),
                )
            assert e.value.reason is CapsuleReason.SLOT_UNSTYLEABLE
            continue
        capsule = Capsule(
            schema_version="korean-expression-v4",
            surface=row.surface,
            artifact_key=KEY,
            slots=(policy,),
        )
        verdict = judge(capsule, answer_json(capsule, {slot_id: text}))
        if want:
            assert verdict.verdict is Verdict.ACCEPTED, text
        else:
            assert (verdict.verdict, verdict.reason) == (
                Verdict.VALIDATION_REJECTED,
                Reason.STYLE_MISFIT,
            ), text


@pytest.mark.parametrize(("slot_id", "branch", "index"), PLACEMENTS)
def test_every_cell_in_the_shim_revalidation(
    slot_id: str, branch: tuple[str, ...], index: int
) -> None:
    row = MANIFEST[next(p for p, r in MANIFEST.items() if slot_id in r.slot_ids)]
    surface = _surface(slot_id, branch, row.surface)
    for word, comma in RUNS:
        text = _text(branch, index, word, comma)
        if _expected(slot_id, branch[index], index, word, comma):
            rendered = surface.render({slot_id: text})
            assert rendered.body.startswith("머리\n") and rendered.body.endswith("\n꼬리")
        else:
            with pytest.raises(RenderError) as e:
                surface.render({slot_id: text})
            assert (e.value.reason, e.value.contract_reason) == (
                RenderReason.COMPOSITION_REJECTED,
                Reason.STYLE_MISFIT,
            ), text


@pytest.mark.parametrize(("slot_id", "branch", "index"), PLACEMENTS)
def test_two_words_before_one_sentence_are_stacked(
    slot_id: str, branch: tuple[str, ...], index: int
) -> None:
    # Even two words each allowed alone: one word at most per sentence.
    policy = slot_policy(slot_id, branch)
    for first, second in itertools.product(("다만", "그리고", "먼저"), repeat=2):
        text = _text(branch, index, f"{first} {second}", comma=False)
        assert check_generated(policy, text) is Reason.STACKED_STYLE, text
        text = _text(branch, index, f"{first} {second}", comma=True)
        assert check_generated(policy, text) is Reason.STACKED_STYLE, text


def test_a_slot_no_word_fits_cannot_be_asked() -> None:
    # design §6.1: the dual decision label and the first review line are locked; a
    # capsule carrying one is refused before any row or call.
    for slot_id, ids in (
        ("adaptive.dual.judgment", ("P_DUAL_DECISION_HOLD",)),
        ("adaptive.dual.review.1", ("P_DUAL_REASON_EDIT",)),
        ("adaptive.dual.judgment", ("P_DUAL_DECISION_OPERATOR",)),
    ):
        assert not fit.slot_styleable(slot_id, ids)
        with pytest.raises(CapsuleError) as e:
            Capsule(
                schema_version="korean-expression-v4",
                surface="adaptive.dualcoachtest.card.v1",
                artifact_key=KEY,
                slots=(slot_policy(slot_id, ids),),
            )
        assert e.value.reason is CapsuleReason.SLOT_UNSTYLEABLE


def test_operator_ids_take_their_family_cell() -> None:
    assert fit.cell("P_DUAL_REASON_OPERATOR", fit.Position.LATER) == fit.cell(
        "P_DUAL_REASON_EDIT", fit.Position.LATER
    )
    assert fit.cell("P_DUAL_REASON_OPERATOR", fit.Position.FIRST) == frozenset()
    assert fit.cell("P_DUAL_DECISION_OPERATOR", fit.Position.FIRST) == frozenset()
    # An ID of no family has no cell at all (Rule 5: it can only fail).
    assert fit.cell("P_NOT_A_FAMILY", fit.Position.FIRST) == frozenset()


def test_compositions_are_exactly_what_the_contract_accepts() -> None:
    # The listed compositions of each slot are accepted, and the count is the
    # product of (1 + cell size) per sentence minus the unstyled one (design §6.1's
    # price table).
    for slot_id, branch, _ in PLACEMENTS:
        listed = fit.compositions(slot_id, branch)
        policy = slot_policy(slot_id, branch)
        assert all(check_generated(policy, c) is None for c in listed)
        product = 1
        for c in fit.slot_cells(slot_id, branch):
            product *= 1 + len(c)
        assert len(listed) == product - 1
        assert len(set(listed)) == len(listed)


def test_the_price_table_of_the_design() -> None:
    # design §6.2's table: one slot with two compositions, every other slot none.
    counts = {
        (slot_id, branch): len(fit.compositions(slot_id, branch))
        for slot_id, branch, _ in PLACEMENTS
    }
    assert counts[("daily.status", ("P_DAILY_COMPLETE",))] == 0
    assert counts[("daily.status", ("P_DAILY_PARTIAL",))] == 0
    interpretation = MANIFEST["weekly.interpretation"].branches
    assert [counts[("weekly.interpretation", b)] for b in interpretation] == [0, 2, 0, 0]
    assert interpretation[1] == I2[1]
    assert {counts[("weekly.rationale", b)] for b in MANIFEST["weekly.rationale"].branches} == {0}
    assert counts[("adaptive.dual.judgment", ("P_DUAL_DECISION_HOLD",))] == 0
    assert counts[("adaptive.dual.review.1", ("P_DUAL_REASON_EDIT",))] == 0
    assert counts[("adaptive.dual.review.2", ("P_DUAL_REASON_EDIT",))] == 0
    assert counts[("adaptive.physique.review_instruction", ("A_OPERATOR_REVIEW_DECISION",))] == 0
    assert sorted(fit.compositions(*I2)) == [
        "[[P:01]]. 다만 [[A:01]].",
        "[[P:01]]. 다만, [[A:01]].",
    ]


def test_composition_count_of_synthetic_cells() -> None:
    # Each sentence carries no word or one of its cell's, and at least one carries a
    # word: the product of (1 + cell size), less the unstyled composition.
    but, but_comma, first = (
        fit.Style("다만", comma=False),
        fit.Style("다만", comma=True),
        fit.Style("먼저", comma=True),
    )
    none: frozenset[fit.Style] = frozenset()
    assert fit.composition_count(()) == 0
    assert fit.composition_count((none,)) == 0
    assert fit.composition_count((none, none, none)) == 0
    assert fit.composition_count((frozenset({but}),)) == 1
    assert fit.composition_count((none, frozenset({but}))) == 1
    assert fit.composition_count((frozenset({but, but_comma}),)) == 2
    assert fit.composition_count((none, frozenset({but, but_comma}))) == 2
    assert fit.composition_count((frozenset({first}), frozenset({but}))) == 3
    assert fit.composition_count((frozenset({first}), frozenset({but, but_comma}))) == 5


def test_a_slot_with_exactly_one_composition_is_not_styleable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # design §6.2: a single composition is a constant the code knows before the call,
    # so the slot is locked like a slot with none. MIN_CHOICES is the threshold.
    assert fit.MIN_CHOICES == 2
    but, but_comma = fit.Style("다만", comma=False), fit.Style("다만", comma=True)
    for cells, styleable in (
        ((), False),
        ((frozenset(),), False),
        ((frozenset(), frozenset({but})), False),
        ((frozenset({but}),), False),
        ((frozenset(), frozenset({but, but_comma})), True),
    ):
        monkeypatch.setattr(fit, "slot_cells", lambda _slot, _ids, cells=cells: cells)
        assert fit.slot_styleable("weekly.interpretation", I2[1]) is styleable, cells


def test_only_the_i2_interpretation_is_styleable() -> None:
    # On real IDs: the I2 interpretation has its two compositions; every other shipped
    # branch of every slot has none, so none is offered to the model.
    assert fit.composition_count(fit.slot_cells(*I2)) == 2
    assert fit.slot_styleable(*I2)
    styleable = [
        (slot_id, branch)
        for row in MANIFEST.values()
        for slot_id in row.slot_ids
        for branch in row.branches
        if fit.slot_styleable(slot_id, branch)
    ]
    assert styleable == [I2]
    # The operator families' IDs lock too.
    assert not fit.slot_styleable("adaptive.dual.review.2", ("P_DUAL_REASON_OPERATOR",))
    assert not fit.slot_styleable("adaptive.dual.judgment", ("P_DUAL_DECISION_OPERATOR",))

"""Property tests: grammar-generated compositions are accepted by the grammar, and by the
contract exactly when every word fits its sentence's cell of the fit table (design
§6.1); forbidden insertions are rejected; and judge()/check_generated() never raise
on any input."""

from __future__ import annotations

import json

import pytest
from adversarial.hypothesis_profiles import PROPERTY
from contract_support import STYLED, STYLED_SLOT, all_policies, capsule, doc
from hypothesis import given, settings
from hypothesis import strategies as st

from kexpr.spool.contract import (
    MANIFEST,
    SAFE_STYLE_LEXEMES,
    CapsuleError,
    CapsuleReason,
    Judgement,
    Reason,
    SlotPolicy,
    Verdict,
    check_generated,
    check_grammar,
    fit,
    judge,
    manifest_for,
)

# Small in `make test`; 10**5 examples with KEXPR_HYPOTHESIS_PROFILE=fuzz.
PROFILE = PROPERTY
POLICIES = all_policies()
STYLEABLE = [p for p in POLICIES if fit.slot_styleable(p.slot_id, p.semantic_ids)]

# One sentence's style: its words and whether a comma ends the run.
Run = tuple[tuple[str, ...], bool]


@st.composite
def styled(draw: st.DrawFn, policy: SlotPolicy) -> tuple[str, tuple[Run, ...]]:
    """A string of the style grammar for `policy`, within its limits, and each
    sentence's run. Half of the runs are drawn from the sentence's cell (zero or one
    word), so that both verdicts of the table occur."""
    budget = policy.max_style_lexemes
    cells = fit.slot_cells(policy.slot_id, policy.semantic_ids)
    sentences: list[str] = []
    runs: list[Run] = []
    used = 0
    for index, token in enumerate(policy.required_placeholder_tokens):
        remaining_tokens = len(policy.required_placeholder_tokens) - index - 1
        at_least = 1 if used == 0 and remaining_tokens == 0 else 0
        cell = sorted(cells[index])
        from_cell: bool = draw(st.booleans())
        if cell and from_cell:
            pick = draw(st.sampled_from([None, *cell] if at_least == 0 else cell))
            lexemes: list[str] = [] if pick is None else [pick.lexeme]
            comma = pick is not None and pick.comma
        else:
            count = draw(st.integers(at_least, min(4, budget - used)))
            lexemes = draw(
                st.lists(st.sampled_from(SAFE_STYLE_LEXEMES), min_size=count, max_size=count)
            )
            comma = draw(st.booleans())
        used += len(lexemes)
        style = " ".join(lexemes) + (", " if comma else " ") if lexemes else ""
        sentences.append(f"{style}{token}.")
        runs.append((tuple(lexemes), comma))
    return " ".join(sentences), tuple(runs)


def table_verdict(policy: SlotPolicy, runs: tuple[Run, ...]) -> Reason | None:
    """The oracle: the first sentence whose run does not fit its cell decides."""
    for index, (words, comma) in enumerate(runs):
        if not words:
            continue
        if len(words) > fit.MAX_LEXEMES_PER_SENTENCE:
            return Reason.STACKED_STYLE
        position = fit.position_of(policy.slot_id, index)
        if fit.Style(words[0], comma) not in fit.cell(policy.semantic_ids[index], position):
            return Reason.STYLE_MISFIT
    return None


@st.composite
def policy_and_styled(draw: st.DrawFn) -> tuple[SlotPolicy, str, tuple[Run, ...]]:
    policy = draw(st.sampled_from(POLICIES))
    return policy, *draw(styled(policy))


@st.composite
def policy_and_composition(draw: st.DrawFn) -> tuple[SlotPolicy, str]:
    policy, text, _ = draw(policy_and_styled())
    return policy, text


@PROFILE
@given(policy_and_styled())
def test_grammar_compositions_are_judged_by_the_fit_table(
    case: tuple[SlotPolicy, str, tuple[Run, ...]],
) -> None:
    policy, text, runs = case
    assert len(text) <= policy.max_generated_chars
    assert check_grammar(policy, text) is None
    expected = table_verdict(policy, runs)
    assert check_generated(policy, text) is expected
    row = manifest_for(policy.slot_id)
    assert row is not None
    if policy not in STYLEABLE:
        # No word fits any of its sentences: the slot is never asked (design §6.1).
        assert expected is not None
        with pytest.raises(CapsuleError) as info:
            capsule(row.surface, policy)
        assert info.value.reason is CapsuleReason.SLOT_UNSTYLEABLE
        return
    cap = capsule(row.surface, policy)
    judgement = judge(cap, doc(cap, text))
    if expected is not None:
        assert (judgement.verdict, judgement.reason) == (Verdict.VALIDATION_REJECTED, expected)
        return
    assert judgement.verdict is Verdict.ACCEPTED, judgement
    assert judgement.composition is not None
    # Re-validation of a composition's canonical JSON (what the shim does) accepts it.
    assert judge(cap, judgement.composition.to_json()).verdict is Verdict.ACCEPTED


def test_the_generator_yields_both_verdicts_for_every_styleable_slot() -> None:
    # Not vacuous: for every slot a word can style, the strategy reaches accepted
    # and rejected compositions (derandomized: the same examples every run).
    @given(st.data())
    @settings(derandomize=True, database=None, max_examples=600, deadline=None)
    def seen(data: st.DataObject) -> None:
        policy = data.draw(st.sampled_from(STYLEABLE))
        _, runs = data.draw(styled(policy))
        verdicts.setdefault(policy.slot_id, set()).add(table_verdict(policy, runs) is None)

    verdicts: dict[str, set[bool]] = {}
    seen()
    assert verdicts == {p.slot_id: {True, False} for p in STYLEABLE}


_INSERTABLE = st.characters(exclude_characters=" ,.")


@PROFILE
@given(policy_and_composition(), st.data())
def test_inserting_any_other_character_is_rejected(
    case: tuple[SlotPolicy, str], data: st.DataObject
) -> None:
    # Space, comma and period are excluded: "차분히 [[P:01]]." → "차분히, [[P:01]]." is
    # itself a grammatical composition. Any other single inserted character is
    # rejected by the grammar, inside a token too (a token has a fixed length, so it
    # stops being one). The grammar alone: the fit table would reject most of these
    # texts before any insertion.
    policy, text = case
    at = data.draw(st.integers(0, len(text)))
    ch = data.draw(_INSERTABLE)
    assert check_grammar(policy, text[:at] + ch + text[at:]) is not None


@PROFILE
@given(policy_and_composition(), st.data())
def test_deleting_a_non_separator_character_is_rejected(
    case: tuple[SlotPolicy, str], data: st.DataObject
) -> None:
    policy, text = case
    at = data.draw(st.sampled_from([i for i, ch in enumerate(text) if ch not in " ,"]))
    assert check_grammar(policy, text[:at] + text[at + 1 :]) is not None


@PROFILE
@given(st.text(max_size=300))
def test_judge_never_raises_on_text(content: str) -> None:
    assert isinstance(judge(STYLED, content), Judgement)


@PROFILE
@given(st.binary(max_size=300))
def test_judge_never_raises_on_bytes(content: bytes) -> None:
    assert isinstance(judge(STYLED, content), Judgement)


@PROFILE
@given(st.text(max_size=200))
def test_judge_never_raises_on_any_generated_ko(text: str) -> None:
    # Any str, lone surrogates included, inside an otherwise valid document: either the
    # reader refuses it, or the verdict is exactly check_generated's.
    judgement = judge(STYLED, doc(STYLED, text))
    if judgement.verdict is not Verdict.INVALID_RESPONSE:
        assert judgement.reason is check_generated(STYLED_SLOT, text)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@PROFILE
@given(_JSON)
def test_judge_never_raises_on_any_json(value: object) -> None:
    judgement = judge(STYLED, json.dumps(value, ensure_ascii=False))
    assert judgement.verdict is not Verdict.ACCEPTED


@PROFILE
@given(st.sampled_from(POLICIES), st.text(max_size=200))
def test_check_generated_never_raises(policy: SlotPolicy, text: str) -> None:
    check_generated(policy, text)


def test_policies_cover_the_manifest() -> None:
    assert {p.slot_id for p in POLICIES} == {s for row in MANIFEST.values() for s in row.slot_ids}

"""Property tests: grammar-generated compositions are accepted, forbidden insertions are
rejected, and judge()/check_generated() never raise on any input."""

from __future__ import annotations

import json

from adversarial.hypothesis_profiles import PROPERTY
from contract_support import DAILY, WEEKLY, all_policies, capsule, doc
from hypothesis import given
from hypothesis import strategies as st

from kexpr.spool.contract import (
    MANIFEST,
    SAFE_STYLE_LEXEMES,
    Judgement,
    SlotPolicy,
    Verdict,
    check_generated,
    judge,
    manifest_for,
)

# Small in `make test`; 10**5 examples with KEXPR_HYPOTHESIS_PROFILE=fuzz.
PROFILE = PROPERTY
POLICIES = all_policies()


@st.composite
def compositions(draw: st.DrawFn, policy: SlotPolicy) -> str:
    """A string of the style grammar for `policy`, within its limits."""
    budget = policy.max_style_lexemes
    sentences: list[str] = []
    used = 0
    for index, token in enumerate(policy.required_placeholder_tokens):
        remaining_tokens = len(policy.required_placeholder_tokens) - index - 1
        at_least = 1 if used == 0 and remaining_tokens == 0 else 0
        count = draw(st.integers(at_least, min(4, budget - used)))
        used += count
        lexemes = draw(
            st.lists(st.sampled_from(SAFE_STYLE_LEXEMES), min_size=count, max_size=count)
        )
        style = " ".join(lexemes) + draw(st.sampled_from([", ", " "])) if lexemes else ""
        sentences.append(f"{style}{token}.")
    return " ".join(sentences)


@st.composite
def policy_and_composition(draw: st.DrawFn) -> tuple[SlotPolicy, str]:
    policy = draw(st.sampled_from(POLICIES))
    return policy, draw(compositions(policy))


@PROFILE
@given(policy_and_composition())
def test_grammar_compositions_are_accepted(case: tuple[SlotPolicy, str]) -> None:
    policy, text = case
    assert len(text) <= policy.max_generated_chars
    assert check_generated(policy, text) is None
    row = manifest_for(policy.slot_id)
    assert row is not None
    cap = capsule(row.surface, policy)
    judgement = judge(cap, doc(cap, text))
    assert judgement.verdict is Verdict.ACCEPTED, judgement
    assert judgement.composition is not None
    # Re-validation of a composition's canonical JSON (what the shim does) accepts it.
    assert judge(cap, judgement.composition.to_json()).verdict is Verdict.ACCEPTED


_INSERTABLE = st.characters(exclude_characters=" ,.")


@PROFILE
@given(policy_and_composition(), st.data())
def test_inserting_any_other_character_is_rejected(
    case: tuple[SlotPolicy, str], data: st.DataObject
) -> None:
    # Space, comma and period are excluded: "차분히 [[P:01]]." → "차분히, [[P:01]]." is
    # itself a valid composition. Any other single inserted character is rejected,
    # inside a token too (a token has a fixed length, so it stops being one).
    policy, text = case
    at = data.draw(st.integers(0, len(text)))
    ch = data.draw(_INSERTABLE)
    assert check_generated(policy, text[:at] + ch + text[at:]) is not None


@PROFILE
@given(policy_and_composition(), st.data())
def test_deleting_a_non_separator_character_is_rejected(
    case: tuple[SlotPolicy, str], data: st.DataObject
) -> None:
    policy, text = case
    at = data.draw(st.sampled_from([i for i, ch in enumerate(text) if ch not in " ,"]))
    assert check_generated(policy, text[:at] + text[at + 1 :]) is not None


@PROFILE
@given(st.text(max_size=300))
def test_judge_never_raises_on_text(content: str) -> None:
    assert isinstance(judge(DAILY, content), Judgement)


@PROFILE
@given(st.binary(max_size=300))
def test_judge_never_raises_on_bytes(content: bytes) -> None:
    assert isinstance(judge(WEEKLY, content), Judgement)


@PROFILE
@given(st.text(max_size=200))
def test_judge_never_raises_on_any_generated_ko(text: str) -> None:
    # Any str, lone surrogates included, inside an otherwise valid document: either the
    # reader refuses it, or the verdict is exactly check_generated's.
    judgement = judge(DAILY, doc(DAILY, text))
    if judgement.verdict is not Verdict.INVALID_RESPONSE:
        assert judgement.reason is check_generated(DAILY.slots[0], text)


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
    judgement = judge(WEEKLY, json.dumps(value, ensure_ascii=False))
    assert judgement.verdict is not Verdict.ACCEPTED


@PROFILE
@given(st.sampled_from(POLICIES), st.text(max_size=200))
def test_check_generated_never_raises(policy: SlotPolicy, text: str) -> None:
    check_generated(policy, text)


def test_policies_cover_the_manifest() -> None:
    assert {p.slot_id for p in POLICIES} == {s for row in MANIFEST.values() for s in row.slot_ids}

"""Generative contract tests judged against an independent oracle.

The oracle (``adversarial.oracle``) is a regular expression built from the spec's
lexicon and the issued tokens plus the two counts, design §6.1's review read slot by
slot (which word may stand before which sentence), and a yes/no reading of design §6's
response rules; it shares no code with ``kexpr.spool.contract._grammar`` or
``kexpr.spool.contract.fit``. Some mutations stay grammatical (deleting the comma of
``먼저, [[P:01]].`` leaves ``먼저 [[P:01]].``), and whether the table then accepts them
depends on the sentence, so each mutated example is compared with the oracle, not
assumed rejected.

Example counts come from ``adversarial.hypothesis_profiles`` (``make test``: a few
hundred per property; ``make fuzz``: 10**5). ``STATS`` tallies what was accepted and
rejected for the closing counts.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adversarial.builders import (
    LOCKED,
    STYLED,
    STYLED_OTHER_KEY,
    all_policies,
    capsule,
    capsule_dict,
    doc,
    dumps,
    response,
)
from adversarial.hypothesis_profiles import PROPERTY, STATS
from adversarial.oracle import (
    SPEC_LEXICON,
    document_ok,
    fits,
    generated_ok,
    grammar_ok,
    grammar_regex,
)
from adversarial.strategies import (
    Mutation,
    canonical_only,
    compositions,
    fitted_composition_of,
    fitted_compositions,
    json_document,
    mutation,
    mutation_of,
)
from kexpr.spool.contract import (
    REASON_VERDICT,
    SAFE_STYLE_LEXEMES,
    Capsule,
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
    slot_policy,
)
from kexpr.spool.contract.answers import answer_document

POLICIES = all_policies()
# The policies a capsule may carry: the fit table leaves them a choice of
# compositions (design §6.1): only the goal-missing interpretation (§6.2). The others
# are locked: the shim presents their bodies unstyled, a capsule asking for one is refused.
STYLEABLE = [p for p in POLICIES if fit.slot_styleable(p.slot_id, p.semantic_ids)]


def _surface(policy: SlotPolicy) -> str:
    row = manifest_for(policy.slot_id)
    assert row is not None
    return row.surface


def _single(policy: SlotPolicy) -> Capsule:
    return capsule(_surface(policy), policy)


def _grammatical(policy: SlotPolicy, text: str) -> bool:
    return grammar_ok(
        policy.required_placeholder_tokens,
        policy.max_generated_chars,
        policy.max_style_lexemes,
        text,
    )


def _ok(policy: SlotPolicy, text: str) -> bool:
    return generated_ok(
        policy.slot_id,
        policy.semantic_ids,
        policy.required_placeholder_tokens,
        policy.max_generated_chars,
        policy.max_style_lexemes,
        text,
    )


def _consistent(judgement: Judgement) -> None:
    """A verdict's own invariants: composition iff accepted, reason of its verdict."""
    assert (judgement.composition is not None) is (judgement.verdict is Verdict.ACCEPTED)
    if judgement.reason is not None:
        assert REASON_VERDICT[judgement.reason] is judgement.verdict


def _tally(test: str, accepted: bool) -> None:
    STATS.add(test, "accepted" if accepted else "rejected")


def test_oracle_lexicon_is_the_code_constant() -> None:
    # The oracle copies design §6; the code constant must be the same list.
    assert SPEC_LEXICON == SAFE_STYLE_LEXEMES


def test_oracle_reads_the_spec_examples() -> None:
    daily = slot_policy("daily.status", ["P_DAILY_COMPLETE"])
    physique = slot_policy("adaptive.physique.review_instruction", ["A_OPERATOR_REVIEW_DECISION"])
    weekly = slot_policy("weekly.interpretation", ["P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"])
    timed = slot_policy("weekly.interpretation", ["P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT"])
    styled = slot_policy(
        "weekly.interpretation", ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"]
    )
    review_2 = slot_policy("adaptive.dual.review.2", ["P_DUAL_REASON_EDIT"])
    # design §6: the grammar (every slot has one, styled or not)
    assert _grammatical(daily, "차분히, [[P:01]].") and _grammatical(daily, "차분히 [[P:01]].")
    assert not _grammatical(daily, "오늘은 차분히, [[P:01]].")  # design §6: rejected
    assert _grammatical(physique, "하나씩 순서대로, [[A:01]].")
    assert not _grammatical(physique, "하나, [[A:01]].")
    assert _grammatical(weekly, "차분히, [[P:01]]. 이어서 [[P:02]].")
    assert not _grammatical(daily, "[[P:01]].")  # canonical-only
    assert not _grammatical(
        daily, "차분히 천천히 가볍게 우선 먼저 이어서 또 그리고 하나씩 [[P:01]]."
    )
    assert _grammatical(styled, "[[P:01]]. 다만 [[A:01]].")
    assert grammar_regex(("[[P:01]]",)).fullmatch("차분히, [[P:01]].") is not None
    # design §6.1, §6.2: the fit table, on grammatical texts: 다만 (with or without its
    # comma) before the goal-missing hold, nothing else anywhere
    assert _ok(styled, "[[P:01]]. 다만 [[A:01]].") and _ok(styled, "[[P:01]]. 다만, [[A:01]].")
    assert not _ok(styled, "다만 [[P:01]]. [[A:01]].")
    assert not _ok(styled, "[[P:01]]. 그리고 [[A:01]].")
    assert not _ok(styled, "[[P:01]]. 다만 그리고 [[A:01]].")
    assert not _ok(styled, "먼저, [[P:01]]. 다만 [[A:01]].")
    assert not _ok(daily, "그리고 [[P:01]].") and not _ok(daily, "다만 [[P:01]].")
    assert not _ok(physique, "먼저 [[A:01]].") and not _ok(physique, "다만 [[A:01]].")
    assert not _ok(weekly, "먼저, [[P:01]]. 이어서, [[P:02]].")
    assert not _ok(timed, "[[P:01]]. 그리고 [[A:01]].") and not _ok(
        timed, "[[P:01]]. 다만 [[A:01]]."
    )
    assert not _ok(review_2, "그리고 [[P:01]].")
    assert not fits(
        "adaptive.dual.review.1", ["P_DUAL_REASON_EDIT"], ["[[P:01]]"], "그리고 [[P:01]]."
    )
    assert not fits("daily.status", ["P_DAILY_COMPLETE"], ["[[P:01]]"], "그리고 먼저 [[P:01]].")
    assert fits(
        styled.slot_id,
        styled.semantic_ids,
        styled.required_placeholder_tokens,
        "[[P:01]]. 다만, [[A:01]].",
    )


def test_only_the_goal_missing_interpretation_is_styleable() -> None:
    # What the generative tests below sample from: one policy (design §6.2).
    assert STYLEABLE == list(STYLED.slots)


def _candidates(policy: SlotPolicy) -> list[str]:
    """Every text with no word or one lexicon word (either join) before each token."""
    runs = ["", *(w + j for w in SPEC_LEXICON for j in (", ", " "))]
    out: list[str] = []
    for pick in itertools.product(runs, repeat=len(policy.required_placeholder_tokens)):
        if any(pick):
            out.append(
                " ".join(
                    r + t + "."
                    for r, t in zip(pick, policy.required_placeholder_tokens, strict=True)
                )
            )
    return out


def test_the_oracle_and_the_contract_accept_the_same_compositions() -> None:
    # The oracle's reading of design §6.1 and the product's table agree on every
    # one-word-per-sentence composition of every (slot, branch) the manifest allows.
    accepted = 0
    for policy in POLICIES:
        for text in _candidates(policy):
            expected = _ok(policy, text)
            assert (check_generated(policy, text) is None) is expected, (policy.slot_id, text)
            accepted += expected
        listed = fit.compositions(policy.slot_id, policy.semantic_ids)
        assert {t for t in _candidates(policy) if _ok(policy, t)} == set(listed), policy.slot_id
    assert accepted > 0


# -- 1. what the grammar generates, and what the fit table accepts ------------------------


@st.composite
def policy_and_composition(
    draw: st.DrawFn, *, over_limit: bool = False, policies: list[SlotPolicy] = POLICIES
) -> tuple[SlotPolicy, str]:
    policy = draw(st.sampled_from(policies))
    return policy, draw(compositions(policy, over_limit=over_limit))


@st.composite
def policy_and_base(draw: st.DrawFn) -> tuple[SlotPolicy, str]:
    """A slot a capsule may carry and, half of the time, a composition the contract
    accepts (else one of the grammar): the base that mutations start from."""
    policy = draw(st.sampled_from(STYLEABLE))
    strategy = fitted_compositions(policy) if draw(st.booleans()) else compositions(policy)
    return policy, draw(strategy)


@PROPERTY
@given(policy_and_composition())
def test_every_grammar_composition_is_judged_by_the_fit_table(
    case: tuple[SlotPolicy, str],
) -> None:
    # Accepted by the grammar; accepted by the contract exactly when the oracle's
    # reading of design §6.1 accepts every word where it stands.
    policy, text = case
    assert _grammatical(policy, text)  # the generator and the oracle agree on the grammar
    assert check_grammar(policy, text) is None
    expected = _ok(policy, text)
    reason = check_generated(policy, text)
    assert (reason is None) is expected
    assert reason in (None, Reason.STYLE_MISFIT, Reason.STACKED_STYLE)
    if policy not in STYLEABLE:
        assert not expected
        with pytest.raises(CapsuleError) as info:
            _single(policy)
        assert info.value.reason is CapsuleReason.SLOT_UNSTYLEABLE
        _tally("grammar compositions", False)
        return
    cap = _single(policy)
    judgement = judge(cap, doc(cap, text))
    _consistent(judgement)
    assert (judgement.verdict, judgement.reason) == (
        (Verdict.ACCEPTED, None) if expected else (Verdict.VALIDATION_REJECTED, reason)
    )
    _tally("grammar compositions", expected)


@PROPERTY
@given(st.sampled_from(STYLEABLE), st.data())
def test_every_fitted_composition_is_accepted(policy: SlotPolicy, data: st.DataObject) -> None:
    text = data.draw(fitted_compositions(policy))
    assert _ok(policy, text)  # the oracle reads design §6.1 as the table does
    assert check_generated(policy, text) is None
    cap = _single(policy)
    judgement = judge(cap, doc(cap, text))
    assert judgement.verdict is Verdict.ACCEPTED, judgement.reason
    assert judgement.composition is not None
    assert judgement.composition.slots[0].generated_ko == text
    # The shim re-validates the canonical JSON of what the worker accepted.
    assert judge(cap, judgement.composition.to_json()).composition == judgement.composition
    _tally("fitted compositions", True)


@PROPERTY
@given(policy_and_composition(over_limit=True, policies=STYLEABLE))
def test_grammar_compositions_over_the_limits_are_rejected(case: tuple[SlotPolicy, str]) -> None:
    # The only grammar rule these break is a limit, so the reason is exactly that
    # limit (the grammar decides before the fit table).
    policy, text = case
    assert not _grammatical(policy, text)
    expected = (
        Reason.TOO_LONG if len(text) > policy.max_generated_chars else Reason.TOO_MANY_LEXEMES
    )
    assert check_generated(policy, text) is expected
    cap = _single(policy)
    assert judge(cap, doc(cap, text)).reason is expected
    _tally("over-limit compositions", False)


def test_canonical_only_is_rejected_for_every_policy() -> None:
    for policy in POLICIES:
        text = canonical_only(policy)
        assert not _ok(policy, text)
        assert check_generated(policy, text) is Reason.NO_STYLE_LEXEME


# -- 2. single-character mutations against the oracle ------------------------------------


@st.composite
def mutated(draw: st.DrawFn, *, anywhere: bool) -> tuple[SlotPolicy, str, Mutation]:
    policy, text = draw(policy_and_base())
    m = draw(mutation(text, policy.required_placeholder_tokens, anywhere=anywhere))
    return policy, m.apply(text), m


def _agree(test: str, policy: SlotPolicy, text: str) -> None:
    expected = _ok(policy, text)
    assert (check_generated(policy, text) is None) is expected
    cap = _single(policy)
    judgement = judge(cap, doc(cap, text))
    _consistent(judgement)
    assert (judgement.verdict is Verdict.ACCEPTED) is expected
    _tally(test, expected)


@PROPERTY
@given(mutated(anywhere=False))
def test_single_character_mutations_outside_tokens_agree_with_the_oracle(
    case: tuple[SlotPolicy, str, Mutation],
) -> None:
    policy, text, _ = case
    _agree("mutations outside tokens", policy, text)


@PROPERTY
@given(mutated(anywhere=True))
def test_single_character_mutations_anywhere_agree_with_the_oracle(
    case: tuple[SlotPolicy, str, Mutation],
) -> None:
    # Inside a token too: a token has a fixed spelling, so nearly every change to it
    # is rejected — but [[P:01]] -> [[P:02]] in a two-token slot is a duplicate, and
    # the oracle decides.
    policy, text, _ = case
    _agree("mutations anywhere", policy, text)


@PROPERTY
@given(st.data())
def test_repeated_mutations_agree_with_the_oracle(data: st.DataObject) -> None:
    policy, text = data.draw(policy_and_base())
    for _ in range(data.draw(st.integers(2, 5))):
        text = data.draw(mutation(text, policy.required_placeholder_tokens, anywhere=True)).apply(
            text
        )
        if not text:
            break
    _agree("repeated mutations", policy, text)


def test_deleting_the_comma_keeps_a_grammatical_composition() -> None:
    # A mutation that stays grammatical: the comma is optional in the grammar, and
    # whether the table then accepts the text depends on its cell (design §6.1).
    # Before the goal-missing hold 다만 stands with or without it (design §6.2).
    policy = STYLED.slots[0]
    text = Mutation("delete", 12, "").apply("[[P:01]]. 다만, [[A:01]].")
    assert text == "[[P:01]]. 다만 [[A:01]]." and _grammatical(policy, text)
    assert _ok(policy, text) and check_generated(policy, text) is None
    # ... and before the finding no word stands, with or without its comma.
    text = Mutation("delete", 2, "").apply("먼저, [[P:01]]. [[A:01]].")
    assert text == "먼저 [[P:01]]. [[A:01]]." and check_grammar(policy, text) is None
    assert not _ok(policy, text) and check_generated(policy, text) is Reason.STYLE_MISFIT


# -- 3. one bad slot rejects the whole document --------------------------------------------


# A capsule has one slot (design §6.1: every other slot is locked), so the whole
# document is the one slot plus whatever the model adds: a slot it was never asked
# (a locked policy, answered with any composition of the grammar) rejects the
# document, whichever slot is mutated and wherever the extra slot stands.


@st.composite
def with_unasked_slot(draw: st.DrawFn) -> str:
    rng = random.Random(draw(st.integers(0, 2**64 - 1)))
    _, extra = rng.choice(LOCKED)
    good = response(STYLED)
    slot = answer_document({"slots": [extra]}, {extra.slot_id: draw(compositions(extra))})["slots"][
        0
    ]
    slots = [good["slots"][0]]
    slots.insert(rng.randrange(2), slot)
    bad = rng.randrange(2)
    text = slots[bad]["generated_ko"]
    slots[bad] = {**slots[bad], "generated_ko": mutation_of(rng, text, ()).apply(text)}
    return dumps({**good, "slots": slots})


@PROPERTY
@given(with_unasked_slot())
def test_a_slot_never_asked_rejects_the_whole_document(content: str) -> None:
    judgement = judge(STYLED, content)
    _consistent(judgement)
    assert judgement.verdict is not Verdict.ACCEPTED
    assert not document_ok(capsule_dict(STYLED), content)
    if judgement.verdict is Verdict.VALIDATION_REJECTED:
        # The echo rules decide before any style: the slots are not the capsule's.
        assert judgement.reason is Reason.SLOT_MISMATCH
    _tally("documents with an unasked slot", False)


# -- 4. random JSON documents around valid slots ----------------------------------------------

# The capsules that can exist: the goal-missing interpretation, under two keys.
_DOC_CAPSULES = [STYLED, STYLED_OTHER_KEY]


@st.composite
def document(draw: st.DrawFn) -> tuple[Capsule, str | bytes]:
    cap = draw(st.sampled_from(_DOC_CAPSULES))
    texts = [draw(fitted_compositions(p)) for p in cap.slots]
    generated = [
        st.one_of(
            fitted_compositions(p),
            compositions(p),
            st.builds(lambda m, t=t: m.apply(t), mutation(t, p.required_placeholder_tokens)),
        )
        for p, t in zip(cap.slots, texts, strict=True)
    ]
    return cap, draw(json_document(response(cap, *texts), generated))


@PROPERTY
@given(document())
def test_random_documents_around_valid_slots_agree_with_the_oracle(
    case: tuple[Capsule, str | bytes],
) -> None:
    cap, content = case
    judgement = judge(cap, content)  # never raises: any exception fails the test
    _consistent(judgement)
    expected = document_ok(capsule_dict(cap), content)
    assert (judgement.verdict is Verdict.ACCEPTED) is expected, judgement.reason
    _tally("random JSON documents", expected)


@st.composite
def byte_mutated(draw: st.DrawFn) -> tuple[Capsule, bytes]:
    rng = random.Random(draw(st.integers(0, 2**64 - 1)))
    cap = rng.choice(_DOC_CAPSULES)
    valid = response(cap, *[fitted_composition_of(rng, p) for p in cap.slots])
    raw = bytearray(dumps(valid, indent=rng.choice((None, 1))).encode())
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("insert", "delete", "replace"))
        at = rng.randrange(len(raw) + (1 if kind == "insert" else 0))
        byte = rng.randrange(256) if rng.random() < 0.5 else rng.choice(b' \t\n\r",:[]{}\\u0')
        if kind == "insert":
            raw.insert(at, byte)
        elif kind == "delete":
            del raw[at]
        else:
            raw[at] = byte
    return cap, bytes(raw)


@PROPERTY
@given(byte_mutated())
def test_byte_mutations_of_a_valid_document_agree_with_the_oracle(
    case: tuple[Capsule, bytes],
) -> None:
    cap, content = case
    judgement = judge(cap, content)
    _consistent(judgement)
    expected = document_ok(capsule_dict(cap), content)
    assert (judgement.verdict is Verdict.ACCEPTED) is expected, judgement.reason
    _tally("byte mutations of documents", expected)


@PROPERTY
@given(st.one_of(st.text(max_size=400), st.binary(max_size=400)))
def test_arbitrary_content_gets_a_verdict(content: str | bytes) -> None:
    cap = _DOC_CAPSULES[0]
    judgement = judge(cap, content)
    _consistent(judgement)
    assert (judgement.verdict is Verdict.ACCEPTED) is document_ok(capsule_dict(cap), content)
    _tally("arbitrary content", judgement.verdict is Verdict.ACCEPTED)

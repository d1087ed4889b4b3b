"""The answer budget: `kexpr.spool.contract.budget`'s bound is an upper
bound of the real o200k_base count of every capsule's minimal compact answer, for every
capsule shape, every artifact key and operator IDs of any allowed length; the pinned
pre-token table is the real encoding's; the budget is the plan's numbers."""

from __future__ import annotations

import secrets

import pytest
from budget_support import capsule, composed_answers, computed_table, count, shipped_shapes
from hypothesis import given, settings
from hypothesis import strategies as st

from kexpr.spool.contract import CapsuleError, CapsuleReason, Verdict, judge, slot_policy
from kexpr.spool.contract._budget_table import PRETOKEN_TOKENS
from kexpr.spool.contract.budget import (
    ANSWER_BUDGET_TOKENS,
    FASTEST_TOKENS_PER_S,
    FIRST_TOKEN_S,
    KEY_TOKENS_MAX,
    LEGACY_KEY_TOKENS_MAX,
    MAX_COMPLETION_TOKENS,
    SDK_TIMEOUT_S,
    TIME_BUDGET_TOKENS,
    _split,
    answer_token_bound,
    id_token_bound,
    min_answer_seconds,
    minimal_answer,
    minimal_generated,
    slots_token_bound,
)
from kexpr.spool.contract.fit import compositions, slot_styleable
from kexpr.spool.contract.manifest import (
    DUAL_DECISION_ID_PATTERN,
    DUAL_REASON_ID_PATTERN,
    OPEN_ID_MAX_CHARS,
    OPEN_ID_MAX_WORD,
)

SHAPES = list(shipped_shapes())
DUAL = "adaptive.dualcoachtest.card.v1"
HEX = "0123456789abcdef"
# Keys that stress the split: one pre-token per character (the worst case, 32), long
# letter and digit runs, and the boundaries (a letter or a digit first and last).
# The key is 128 bits (32 hex); an older shim's request still carries 64.
EDGE_KEYS = ("a1" * 16, "1a" * 16, "0" * 32, "f" * 32, "abcdef" * 5 + "01", "9" + "e" * 31)
LEGACY_EDGE_KEYS = (
    "a1" * 32,
    "1a" * 32,
    "0" * 64,
    "f" * 64,
    "abcdef" * 10 + "0123",
    "9" + "e" * 63,
)
keys = st.text(alphabet=HEX, min_size=32, max_size=32)
DERANDOMIZED = settings(derandomize=True, max_examples=300, deadline=None)


def test_the_budget_is_the_plans_numbers() -> None:
    assert (MAX_COMPLETION_TOKENS, SDK_TIMEOUT_S) == (384, 3.0)
    assert (FIRST_TOKEN_S, FASTEST_TOKENS_PER_S) == (0.3, 110)
    assert TIME_BUDGET_TOKENS == 297 == ANSWER_BUDGET_TOKENS
    assert min_answer_seconds(ANSWER_BUDGET_TOKENS) == pytest.approx(SDK_TIMEOUT_S)


def test_the_worker_sends_the_budgets_numbers() -> None:
    from kexpr.worker import provider

    kwargs = provider.request_kwargs("{}")
    assert kwargs["max_tokens"] == MAX_COMPLETION_TOKENS
    assert provider.SDK_TIMEOUT_S == SDK_TIMEOUT_S


def test_the_pinned_table_is_the_real_encodings() -> None:
    # Regenerate: budget_support.py > /tmp/t.py && mv /tmp/t.py queue/spool/contract/_budget_table.py
    assert dict(PRETOKEN_TOKENS) == computed_table()


def test_the_minimal_answer_is_the_cheapest_composition() -> None:
    """Rule 2: in every slot of every shipped shape the minimal answer carries the
    composition of the fit table whose whole answer the real encoding counts fewest
    tokens for (ties: the first in sorted order), so that no valid answer is shorter."""
    for surface, slots in shipped_shapes(max_reasons=3):
        for key in EDGE_KEYS[:2]:
            minimal = count(minimal_answer(capsule(surface, slots, key)))
            costs: dict[str, dict[str, int]] = {}
            for slot, text, answer in composed_answers(surface, slots, key):
                costs.setdefault(slot.slot_id, {})[text] = count(answer)
            for slot in slots:
                cost = costs[slot.slot_id]
                assert set(cost) == set(compositions(slot.slot_id, slot.semantic_ids))
                cheapest = min(cost.values())
                assert cost[minimal_generated(slot)] == cheapest == minimal, slot
                assert minimal_generated(slot) == min(t for t, n in cost.items() if n == cheapest)


def test_the_key_bound_is_the_128_bit_keys_worst_case() -> None:
    """32 hex, at most one o200k_base token each (today's key);
    an older shim's 64-hex key, 64."""
    assert (KEY_TOKENS_MAX, LEGACY_KEY_TOKENS_MAX) == (32, 64)
    assert count("a1" * 16) == KEY_TOKENS_MAX and count("a1" * 32) == LEGACY_KEY_TOKENS_MAX
    assert max(count(secrets.token_hex(16)) for _ in range(200)) <= KEY_TOKENS_MAX


@pytest.mark.parametrize(
    "key",
    EDGE_KEYS + LEGACY_EDGE_KEYS + tuple(secrets.token_hex(n) for n in (16, 16, 32)),
    # Fresh random keys each run, under stable test IDs: parallel workers (pytest-xdist)
    # each collect the suite and must name the same tests.
    ids=[*EDGE_KEYS, *LEGACY_EDGE_KEYS, "random-32hex-0", "random-32hex-1", "random-64hex-0"],
)
def test_every_shipped_shape_is_bounded_and_its_minimal_answer_valid(key: str) -> None:
    for surface, slots in SHAPES:
        c = capsule(surface, slots, key)
        answer = minimal_answer(c)
        exact = count(answer)
        # The split is the encoding's: the count is the sum over pre-tokens.
        assert sum(count(p) for p in _split(answer)) == exact
        bound = answer_token_bound(c)
        assert bound is not None and bound >= exact
        # Tight: the only slack is the key counted at its worst case.
        # (The key's pre-tokens are those of the key alone: quotes bound them.)
        key_tokens = sum(count(p) for p in _split(key))
        assert bound - exact == len(key) - key_tokens  # one token per hex at most
        # The shim's verdict (before any key exists) is the 32-hex key's.
        if len(key) == 32:
            assert bound == slots_token_bound(surface, slots)
        else:
            assert bound == slots_token_bound(surface, slots) + 32  # type: ignore[operator]
        verdict = judge(c, answer)
        assert verdict.verdict is Verdict.ACCEPTED


def test_the_worst_key_reaches_the_key_bound() -> None:
    surface, slots = SHAPES[0]
    for key in ("a1" * 16, "a1" * 32):
        c = capsule(surface, slots, key)
        assert answer_token_bound(c) == count(minimal_answer(c))


@DERANDOMIZED
@given(key=keys, shape=st.sampled_from(SHAPES))
def test_the_bound_holds_for_every_key(key: str, shape: tuple[str, tuple]) -> None:
    surface, slots = shape
    c = capsule(surface, slots, key)
    answer = minimal_answer(c)
    assert sum(count(p) for p in _split(answer)) == count(answer)
    assert answer_token_bound(c) is not None
    assert answer_token_bound(c) >= count(answer)
    # Key-independent: the verdict of a message never depends on its key.
    assert answer_token_bound(c) == slots_token_bound(surface, slots)


operator_decisions = st.from_regex(DUAL_DECISION_ID_PATTERN, fullmatch=True).filter(
    lambda s: len(s) <= OPEN_ID_MAX_CHARS
)
operator_reasons = st.from_regex(DUAL_REASON_ID_PATTERN, fullmatch=True).filter(
    lambda s: len(s) <= OPEN_ID_MAX_CHARS
)


@DERANDOMIZED
@given(key=keys, reasons=st.lists(operator_reasons, min_size=1, max_size=8))
def test_the_bound_holds_for_operator_ids_of_any_length(key: str, reasons: list[str]) -> None:
    # design §6.2: every review line is locked, whatever its ID (an operator's reason
    # takes its family's empty cell): no capsule carries one and no bound is figured.
    slots = tuple(slot_policy(f"adaptive.dual.review.{i + 2}", (r,)) for i, r in enumerate(reasons))
    with pytest.raises(CapsuleError) as e:
        capsule(DUAL, slots, key)
    assert e.value.reason is CapsuleReason.SLOT_UNSTYLEABLE
    assert slots_token_bound(DUAL, slots) is None
    for r in reasons:
        bound = id_token_bound(r)
        assert bound is not None and bound >= count(r)


def test_a_slot_without_a_composition_has_no_bound() -> None:
    # Rule 2: no answer, so no bound (never a figure for a slot that cannot be styled).
    for slot_id, ident in (
        ("adaptive.dual.judgment", "P_DUAL_DECISION_HOLD"),
        ("adaptive.dual.review.1", "P_DUAL_REASON_EDIT"),
    ):
        assert slots_token_bound(DUAL, (slot_policy(slot_id, (ident,)),)) is None
        assert minimal_generated(slot_policy(slot_id, (ident,))) == ""


def _dual_bound(decision: str, reasons: list[str]) -> int | None:
    """The card's bound as the shim asks it: only the slots the fit table lets be
    styled (design §6.1: the decision and the first review line are locked); a
    card with none is never sent (0: nothing to carry)."""
    slots = tuple(
        p
        for p in (
            slot_policy("adaptive.dual.judgment", (decision,)),
            *(slot_policy(f"adaptive.dual.review.{i + 1}", (r,)) for i, r in enumerate(reasons)),
        )
        if slot_styleable(p.slot_id, p.semantic_ids)
    )
    return slots_token_bound(DUAL, slots) if slots else 0


def _worst_id(prefix: str, chars: int) -> str:
    """A grammatical ID of ``chars`` characters whose every piece is off the
    table (each character costs one token in the bound): 12-letter words."""
    out = (prefix + "_".join(["Q" * OPEN_ID_MAX_WORD] * 8))[:chars]
    return out[:-2] + "_Q" if out.endswith("_") else out


def test_the_open_id_length_is_what_the_budget_carries() -> None:
    """manifest Rule 6: at `OPEN_ID_MAX_CHARS`, the costliest grammatical IDs (those
    whose pieces the table does not list) cost one token a character in the bound.
    Under the fit table (design §6.2) a dual card has no slot to ask, whatever IDs
    and however many reasons it carries: nothing to carry, so nothing over budget."""
    decision = _worst_id("P_DUAL_DECISION_", OPEN_ID_MAX_CHARS)
    reason = _worst_id("P_DUAL_REASON_", OPEN_ID_MAX_CHARS)
    assert len(decision) == len(reason) == OPEN_ID_MAX_CHARS
    for ident in (decision, reason):
        bound = id_token_bound(ident)
        assert bound is not None and count(ident) <= bound <= OPEN_ID_MAX_CHARS
    assert all(_dual_bound(decision, [reason] * n) == 0 for n in range(0, 10))


@DERANDOMIZED
@given(decision=operator_decisions, reasons=st.lists(operator_reasons, min_size=0, max_size=2))
def test_every_grammatical_card_of_up_to_two_reasons_fits(
    decision: str, reasons: list[str]
) -> None:
    bound = _dual_bound(decision, reasons)
    assert bound is not None and bound <= ANSWER_BUDGET_TOKENS


def test_which_shipped_shapes_fit() -> None:
    """The budget's verdict per shape (docs/budget.md's table), exactly. The fit
    table (design §6.2) leaves one capsule, the weekly goal-missing interpretation:
    with the 128-bit key and its cheapest composition it fits. Daily, physique and
    every dual card have no slot to ask (nothing_to_style), so no shape."""
    fits: dict[tuple[str, int], set[bool]] = {}
    for surface, slots in SHAPES:
        bound = slots_token_bound(surface, slots)
        assert bound is not None
        fits.setdefault((surface, len(slots)), set()).add(bound <= ANSWER_BUDGET_TOKENS)
    expected = {("weekly.v1", 1): {True}}
    assert fits == expected


def test_the_shipped_dual_ids_are_short() -> None:
    """The shipped dual IDs (ours; the design fixes the prefixes) cost
    7, 5 and 6 o200k_base tokens, each the measured cheapest of its candidates, and
    `id_token_bound` is their exact cost."""
    from gateway_shim.glossary import RETIRED_SHIPPED_IDS

    costs = {new: count(new) for new in RETIRED_SHIPPED_IDS.values()}
    assert costs == {"P_DUAL_DECISION_HOLD": 7, "P_DUAL_REASON_EDIT": 5, "P_DUAL_REASON_LATEST": 6}
    for old, new in RETIRED_SHIPPED_IDS.items():
        assert count(new) < count(old)
        assert id_token_bound(new) == count(new) and id_token_bound(old) == count(old)
    for candidate in ("P_DUAL_DECISION_ADHERENCE_HOLD", "P_DUAL_DECISION_CONFLICT"):
        assert count(candidate) >= costs["P_DUAL_DECISION_HOLD"]
    for candidate in ("P_DUAL_REASON_REVISED", "P_DUAL_REASON_REVISION"):
        assert count(candidate) > costs["P_DUAL_REASON_EDIT"]
    assert count("P_DUAL_REASON_RECALC") > costs["P_DUAL_REASON_LATEST"]


@DERANDOMIZED
@given(ident=st.one_of(operator_decisions, operator_reasons))
def test_id_token_bound_bounds_any_operator_id(ident: str) -> None:
    bound = id_token_bound(ident)
    assert bound is not None and bound >= count(ident)


def test_no_bound_outside_the_alphabet() -> None:
    surface, slots = SHAPES[0]
    assert slots_token_bound(surface + "\u00e9", slots) is None

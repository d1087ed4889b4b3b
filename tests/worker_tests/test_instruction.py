"""The static instruction answers the cold trials' questions and states the fit table
(design §6.1), and every example and every rule it shows is judged by the contract as
the instruction says: a rule the instruction states is the contract's real behaviour,
not a second opinion."""

from __future__ import annotations

import re

import pytest

from kexpr.spool.contract import (
    MANIFEST,
    SAFE_STYLE_LEXEMES,
    Reason,
    check_generated,
    check_grammar,
    fit,
    slot_policy,
    tokens_for,
)
from kexpr.worker import instruction
from kexpr.worker.instruction import INVALID_EXAMPLES, SYSTEM_INSTRUCTION, VALID_EXAMPLES

# The one slot the fit table styles (design §6.1): the goal-missing interpretation.
HOLD = ("weekly.interpretation", ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"))
# Slots it locks, whose sentences take no word.
DAILY = ("daily.status", ("P_DAILY_COMPLETE",))
WEEKLY = ("weekly.interpretation", ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"))
PHYSIQUE = ("adaptive.physique.review_instruction", ("A_OPERATOR_REVIEW_DECISION",))


def test_static() -> None:
    assert instruction._build() == SYSTEM_INSTRUCTION


@pytest.mark.parametrize(("slot_id", "ids", "text"), VALID_EXAMPLES)
def test_every_valid_example_is_accepted(slot_id: str, ids: tuple[str, ...], text: str) -> None:
    assert f"\n  {text}\n" in SYSTEM_INSTRUCTION
    assert check_generated(slot_policy(slot_id, ids), text) is None


@pytest.mark.parametrize(("slot_id", "ids", "text", "reason"), INVALID_EXAMPLES)
def test_every_invalid_example_is_rejected_for_its_reason(
    slot_id: str, ids: tuple[str, ...], text: str, reason: str
) -> None:
    assert f"\n  {text}\n" in SYSTEM_INSTRUCTION
    assert check_generated(slot_policy(slot_id, ids), text) is Reason(reason)


def _reason(text: str, slot_id: str = HOLD[0], ids: tuple[str, ...] = HOLD[1]) -> Reason | None:
    return check_generated(slot_policy(slot_id, ids), text)


def test_characters_are_code_points() -> None:
    # (a) max_generated_chars counts code points: a Hangul syllable is one, not three
    # UTF-8 bytes; a token's eight characters are eight. Sixteen lexemes (the slot's
    # maximum), 99 code points and 227 bytes: within the limit, so the contract's
    # reason is the fit table's (one word per sentence), never too_long.
    assert "counts Unicode code points" in SYSTEM_INSTRUCTION
    policy = slot_policy(*HOLD)
    limit = policy.max_generated_chars
    text = "[[P:01]]. " + " ".join(["순서대로"] * policy.max_style_lexemes) + " [[A:01]]."
    assert len(text) <= limit < len(text.encode("utf-8"))
    assert check_grammar(policy, text) is None
    assert _reason(text) is Reason.STACKED_STYLE
    # Over the limit in code points is too_long, before anything else.
    assert _reason("[[P:01]]. " + "다만 " * 70 + "[[A:01]].") is Reason.TOO_LONG


def test_the_comma_only_ends_a_style_run() -> None:
    # (b) the comma only ends a run, followed by one space and the token.
    assert "A comma may only end a style run" in SYSTEM_INSTRUCTION
    assert _reason("[[P:01]]. 다만, [[A:01]].") is None
    for wrong in (
        "[[P:01]]. 다만,[[A:01]].",
        "[[P:01]]., 다만 [[A:01]].",
        "[[P:01]], 다만 [[A:01]].",
        ", [[P:01]]. 다만 [[A:01]].",
        "[[P:01]]. 다만,, [[A:01]].",
        "[[P:01]]. 다만 [[A:01]].,",
    ):
        assert _reason(wrong) is Reason.GRAMMAR, wrong


def test_one_lexeme_at_most_before_a_token_and_every_one_counts() -> None:
    # (c) one word before a token at most (fit table Rule 3); every occurrence of a
    # lexeme counts toward max_style_lexemes, so a run over the slot's limit is
    # too_many_lexemes (the grammar decides before the table), one at it stacked.
    assert (
        f"Before one token write at most {fit.MAX_LEXEMES_PER_SENTENCE} lexeme"
        in SYSTEM_INSTRUCTION
    )
    assert "every lexeme counts toward max_style_lexemes" in SYSTEM_INSTRUCTION
    assert fit.MAX_LEXEMES_PER_SENTENCE == 1
    assert _reason("[[P:01]]. 다만 [[A:01]].") is None
    assert _reason("[[P:01]]. 다만 다만 [[A:01]].") is Reason.STACKED_STYLE
    assert _reason("[[P:01]]. 그리고 다만 [[A:01]].") is Reason.STACKED_STYLE
    limit = slot_policy(*HOLD).max_style_lexemes
    many = " ".join(["다만"] * limit)
    assert _reason(f"[[P:01]]. {many} [[A:01]].") is Reason.STACKED_STYLE
    assert _reason(f"[[P:01]]. {many} 다만 [[A:01]].") is Reason.TOO_MANY_LEXEMES
    # Counted over the whole string: one word before each token, one over the limit.
    assert _reason(f"다만 [[P:01]]. {many} [[A:01]].") is Reason.TOO_MANY_LEXEMES


def test_at_least_one_lexeme_per_generated_ko_not_per_sentence() -> None:
    # (d) one lexeme somewhere in the string; a sentence may have none.
    assert "at least one lexeme in each generated_ko as a whole" in SYSTEM_INSTRUCTION
    assert _reason("[[P:01]]. 다만, [[A:01]].") is None  # the first sentence has none
    assert _reason("[[P:01]]. [[A:01]].") is Reason.NO_STYLE_LEXEME
    assert _reason("[[P:01]]. [[P:02]].", *WEEKLY) is Reason.NO_STYLE_LEXEME


def test_lexemes_take_no_particle_or_ending() -> None:
    # (e) the lexeme as listed, nothing attached.
    assert "never attach a particle or an ending" in SYSTEM_INSTRUCTION
    assert _reason("[[P:01]]. 다만 [[A:01]].") is None
    for wrong in ("다만은 ", "다만요, ", "다만도 ", "지금은 ", "먼저는 ", "다시요 ", "그리고요, "):
        assert _reason(f"[[P:01]]. {wrong}[[A:01]].") is Reason.UNKNOWN_WORD, wrong


def test_compact_and_brief_are_asked_for() -> None:
    # Compact JSON (no whitespace outside strings) and brief style.
    assert "no space, tab or line break anywhere outside string values" in SYSTEM_INSTRUCTION
    assert "a compact answer with brief style is the one that arrives" in SYSTEM_INSTRUCTION
    assert "JSON" in SYSTEM_INSTRUCTION  # JSON mode needs the word (design §9)


def test_the_join_is_part_of_the_word() -> None:
    # The second cold trial asked whether a run may end either way: under the fit
    # table the join is the cell's (design §6.1: the comma changes the reading), and
    # a run is one word. The one cell takes 다만 with either join, each an entry of
    # its own; the same word at the other sentence is a misfit with either join.
    assert "joined exactly as shown there (with the comma or with a plain space)" in (
        SYSTEM_INSTRUCTION
    )
    hold = fit.cell("A_WEEKLY_HOLD_FOR_MISSING_GOAL", fit.Position.LATER)
    assert hold == {fit.Style("다만", comma=False), fit.Style("다만", comma=True)}
    assert _reason("[[P:01]]. 다만 [[A:01]].") is None
    assert _reason("[[P:01]]. 다만, [[A:01]].") is None
    assert _reason("다만 [[P:01]]. [[A:01]].") is Reason.STYLE_MISFIT
    assert _reason("다만, [[P:01]]. [[A:01]].") is Reason.STYLE_MISFIT
    # The words the table held before (design §6.1) misfit with either join.
    assert _reason("먼저 [[A:01]].", *PHYSIQUE) is Reason.STYLE_MISFIT
    assert _reason("먼저, [[P:01]]. [[P:02]].", *WEEKLY) is Reason.STYLE_MISFIT
    assert _reason("그리고 [[P:01]].", *DAILY) is Reason.STYLE_MISFIT
    assert _reason("[[P:01]]. 이제 잠시 [[A:01]].") is Reason.STACKED_STYLE


# The instruction's table, as it reads: "  ID: kind. First: "w " or "w, ". Later: nothing."
_LINE = re.compile(
    r"  (?P<id>\S+)(?: \(operator IDs\))?: (?P<kind>[^.]+(?:\([^)]*\))?)\. First: (?P<first>.+?)\. Later: (?P<later>.+?)\."
)
_RUN = re.compile(r'"([^"]+)"')


def _stated_table() -> dict[str, dict[fit.Position, tuple[str, ...]]]:
    section = SYSTEM_INSTRUCTION.split("WORDS BEFORE A TOKEN, per ID", 1)[1]
    table: dict[str, dict[fit.Position, tuple[str, ...]]] = {}
    for line in section.splitlines()[1:]:
        m = _LINE.fullmatch(line)
        if m is None:
            continue
        table[m["id"]] = {
            fit.Position.FIRST: tuple(_RUN.findall(m["first"])),
            fit.Position.LATER: tuple(_RUN.findall(m["later"])),
        }
    return table


def test_the_stated_table_lists_every_id_and_family() -> None:
    table = _stated_table()
    assert set(table) == set(fit.FIT) | set(fit.OPEN_FAMILY_FIT)
    for runs in table.values():
        for run in (*runs[fit.Position.FIRST], *runs[fit.Position.LATER]):
            assert run.rstrip(", ") in SAFE_STYLE_LEXEMES and run.endswith(" "), run


def _placements() -> list[tuple[str, tuple[str, ...], int]]:
    out: list[tuple[str, tuple[str, ...], int]] = []
    for row in MANIFEST.values():
        for slot_id in row.slot_ids[:2]:  # review.1 (first) and review.2 (later) stand for all
            for branch in row.branches:
                out.extend((slot_id, branch, n) for n in range(len(branch)))
    return out


@pytest.mark.parametrize(("slot_id", "branch", "index"), _placements())
def test_every_word_the_table_states_is_accepted_and_no_other(
    slot_id: str, branch: tuple[str, ...], index: int
) -> None:
    # What the instruction tells the model before a token, at that sentence's
    # position (review line N > 1 is Later), is exactly what the contract accepts
    # there: each stated run alone in the slot is accepted, every other lexeme with
    # either join is style_misfit.
    stated = _stated_table()[branch[index]][fit.position_of(slot_id, index)]
    policy = slot_policy(slot_id, branch)
    tokens = tokens_for(branch)
    for word in SAFE_STYLE_LEXEMES:
        for run in (word + ", ", word + " "):
            text = " ".join((run if n == index else "") + t + "." for n, t in enumerate(tokens))
            expected = None if run in stated else Reason.STYLE_MISFIT
            assert check_generated(policy, text) is expected, text


def test_the_review_lines_are_one_list() -> None:
    # "the line with N greater than 1 counts as Later": review.2's one sentence
    # takes the Later cell, review.1's the First. Both cells are empty now (design
    # §6.2: every word read worse), so no review line is ever asked.
    assert "the line with N greater than 1 counts as Later" in SYSTEM_INSTRUCTION
    assert fit.position_of("adaptive.dual.review.1", 0) is fit.Position.FIRST
    assert fit.position_of("adaptive.dual.review.2", 0) is fit.Position.LATER
    for line in ("adaptive.dual.review.1", "adaptive.dual.review.2"):
        assert _reason("그리고 [[P:01]].", line, ("P_DUAL_REASON_EDIT",)) is Reason.STYLE_MISFIT
        assert not fit.slot_styleable(line, ("P_DUAL_REASON_EDIT",))


def test_an_empty_list_stays_an_empty_list() -> None:
    import json

    from kexpr.spool.contract import Capsule, Verdict, judge
    from kexpr.spool.contract.budget import minimal_answer

    # The ID lists are echoed exactly: a list is never dropped, and never emptied.
    # (The one slot asked carries a predicate and an action, so no capsule sent
    # today has an empty list; the rule stands for the contract's echo.)
    assert "An empty list in the capsule stays an empty list, []" in SYSTEM_INSTRUCTION
    capsule = Capsule(
        schema_version="korean-expression-v4",
        surface="weekly.v1",
        artifact_key="a" * 32,
        slots=(slot_policy(*HOLD),),
    )
    answer = json.loads(minimal_answer(capsule))
    assert answer["slots"][0]["action_ids"] == ["A_WEEKLY_HOLD_FOR_MISSING_GOAL"]
    assert judge(capsule, json.dumps(answer)).verdict is Verdict.ACCEPTED
    emptied = json.loads(json.dumps(answer))
    emptied["slots"][0]["action_ids"] = []
    assert judge(capsule, json.dumps(emptied)).verdict is not Verdict.ACCEPTED
    del answer["slots"][0]["action_ids"]
    assert judge(capsule, json.dumps(answer)).verdict is Verdict.INVALID_RESPONSE


_HANGUL = re.compile(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]+")


def test_the_instruction_offers_only_daman_before_the_hold_and_states_no_other_word() -> None:
    # The fit table follows the readers' verdicts (design §6.2): one cell, 다만
    # with or without its comma before the goal-missing hold. The instruction
    # states that cell and no other word: its table, its valid examples and its
    # rules carry no Hangul but 다만; the invalid examples only misplace, double
    # or inflect it (다만은, a particle).
    stated = {i: runs for i, runs in _stated_table().items() if any(runs[p] for p in fit.Position)}
    assert stated == {
        "A_WEEKLY_HOLD_FOR_MISSING_GOAL": {
            fit.Position.FIRST: (),
            fit.Position.LATER: ("다만 ", "다만, "),
        }
    }
    assert set(_HANGUL.findall(SYSTEM_INSTRUCTION)) == {"다만", "다만은"}
    invalid = {f"  {text}" for _, _, text, _ in INVALID_EXAMPLES}
    rest = "\n".join(line for line in SYSTEM_INSTRUCTION.splitlines() if line not in invalid)
    assert set(_HANGUL.findall(rest)) == {"다만"}
    # Every example is on the one slot the table styles, and the valid ones are
    # exactly its compositions.
    assert {(slot_id, ids) for slot_id, ids, _ in VALID_EXAMPLES} == {HOLD}
    assert {(slot_id, ids) for slot_id, ids, _, _ in INVALID_EXAMPLES} == {HOLD}
    assert sorted(text for _, _, text in VALID_EXAMPLES) == list(fit.compositions(*HOLD))

"""The static instruction answers the cold trial's five questions, and
every example it shows is judged by the contract as the instruction says: a rule the
instruction states is the contract's real behaviour, not a second opinion."""

from __future__ import annotations

import pytest

from kexpr.spool.contract import Reason, check_generated, slot_policy
from kexpr.worker import instruction
from kexpr.worker.instruction import INVALID_EXAMPLES, SYSTEM_INSTRUCTION, VALID_EXAMPLES


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


def _valid(
    text: str, slot_id: str = "daily.status", ids: tuple[str, ...] = ("P_DAILY_COMPLETE",)
) -> bool:
    return check_generated(slot_policy(slot_id, ids), text) is None


def test_characters_are_code_points() -> None:
    # (a) max_generated_chars counts code points: a Hangul syllable is one, not three
    # UTF-8 bytes; a token's eight characters are eight.
    assert "counts Unicode code points" in SYSTEM_INSTRUCTION
    limit = slot_policy("daily.status", ("P_DAILY_COMPLETE",)).max_generated_chars
    run = " ".join(["순서대로"] * 8)  # 8 lexemes (the slot's maximum), 39 code points
    text = f"{run} [[P:01]]."
    assert len(text) <= limit < len(text.encode("utf-8"))
    assert _valid(text)


def test_the_comma_only_ends_a_style_run() -> None:
    # (b) the comma only ends a run, followed by one space and the token.
    assert "A comma may only end a style run" in SYSTEM_INSTRUCTION
    assert _valid("또 다시, [[P:01]].")
    for wrong in (
        "또, 다시 [[P:01]].",
        "또,[[P:01]].",
        "또 [[P:01]].,",
        "또 [[P:01]],",
        ", 또 [[P:01]].",
    ):
        assert not _valid(wrong), wrong


def test_a_lexeme_may_repeat_and_each_occurrence_counts() -> None:
    # (c) repeats are allowed and counted.
    assert "A lexeme may repeat, and every occurrence counts" in SYSTEM_INSTRUCTION
    limit = slot_policy("daily.status", ("P_DAILY_COMPLETE",)).max_style_lexemes
    assert _valid(" ".join(["다시"] * limit) + " [[P:01]].")
    assert (
        check_generated(
            slot_policy("daily.status", ("P_DAILY_COMPLETE",)),
            " ".join(["다시"] * (limit + 1)) + " [[P:01]].",
        )
        is Reason.TOO_MANY_LEXEMES
    )


def test_at_least_one_lexeme_per_generated_ko_not_per_sentence() -> None:
    # (d) one lexeme somewhere in the string; a sentence may have none.
    assert "at least one lexeme in each generated_ko as a whole" in SYSTEM_INSTRUCTION
    two = ("weekly.interpretation", ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"))
    assert _valid("[[P:01]]. 이어서 [[P:02]].", *two)
    assert _valid("우선 [[P:01]]. [[P:02]].", *two)
    assert not _valid("[[P:01]]. [[P:02]].", *two)


def test_lexemes_take_no_particle_or_ending() -> None:
    # (e) the lexeme as listed, nothing attached.
    assert "never attach a particle or an ending" in SYSTEM_INSTRUCTION
    assert _valid("지금 [[P:01]].")
    for wrong in (
        "지금은 [[P:01]].",
        "먼저는 [[P:01]].",
        "다시요 [[P:01]].",
        "그리고요, [[P:01]].",
    ):
        assert not _valid(wrong), wrong


def test_compact_and_brief_are_asked_for() -> None:
    # Item 3: compact JSON (no whitespace outside strings) and brief style.
    assert "no space, tab or line break anywhere outside string values" in SYSTEM_INSTRUCTION
    assert "Keep the style brief" in SYSTEM_INSTRUCTION
    assert "JSON" in SYSTEM_INSTRUCTION  # JSON mode needs the word (design §9)


def test_a_run_may_mix_lexemes_and_end_either_way() -> None:
    # The second cold trial's questions: different lexemes in one run, and ", " or " ".
    assert "may mix different lexemes or repeat one" in SYSTEM_INSTRUCTION
    assert _valid("이제 잠시 [[P:01]].") and _valid("이제 잠시, [[P:01]].")
    assert _valid("차분히 [[P:01]].") and _valid("차분히, [[P:01]].")


def test_an_empty_list_stays_an_empty_list() -> None:
    import json

    from kexpr.spool.contract import Capsule, Verdict, judge
    from kexpr.spool.contract.budget import minimal_answer

    assert "An empty list in the capsule stays an empty list, []" in SYSTEM_INSTRUCTION
    capsule = Capsule(
        schema_version="korean-expression-v4",
        surface="daily.v1",
        artifact_key="a" * 64,
        slots=(slot_policy("daily.status", ("P_DAILY_COMPLETE",)),),
    )
    answer = json.loads(minimal_answer(capsule))
    assert answer["slots"][0]["action_ids"] == []
    assert judge(capsule, json.dumps(answer)).verdict is Verdict.ACCEPTED
    del answer["slots"][0]["action_ids"]
    assert judge(capsule, json.dumps(answer)).verdict is Verdict.INVALID_RESPONSE

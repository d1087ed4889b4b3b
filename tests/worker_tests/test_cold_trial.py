"""The recorded cold-trial answers (tests/worker_tests/cold_trial/README.md), judged under
today's contract.

They were recorded under two earlier instructions, before the fit table (design §6.1):
`old` asked for neither compact JSON nor brief style, `new` asked for both. Every one of
them was accepted then, and every one is still grammatical. Since the table, the
contract accepts only the words the table allows where they stand, and a capsule that
carries a slot no word fits (the dual card's decision and first review line) cannot be
asked at all. So each answer is judged against the capsule today's shim sends for the
same card: the recorded capsule without its locked slots, the answer without theirs (a
card left with no slot is `nothing_to_style`: no call). The counts are pinned here and
quoted in docs/budget.md §5: almost none of the recorded words fit the table.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from kexpr.spool.contract import (
    Capsule,
    CapsuleError,
    CapsuleReason,
    Reason,
    Verdict,
    check_grammar,
    fit,
    judge,
    slot_policy,
)
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS, minimal_answer

HERE = Path(__file__).parent / "cold_trial"


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (HERE / name).read_text(encoding="utf-8").splitlines()]


RECORDED: list[dict[str, Any]] = [
    json.loads(str(row["capsule"])) for row in _lines("capsules.jsonl")
]


def _answers(version: str) -> list[str]:
    rows = _lines(f"answers-{version}.jsonl")
    assert [row["i"] for row in rows] == list(range(len(RECORDED)))
    return [str(row["content"]) for row in rows]


def _styleable(slot: dict[str, Any]) -> bool:
    policy = slot_policy(
        slot["slot_id"], slot["allowed_predicate_ids"] + slot["allowed_action_ids"]
    )
    return fit.slot_styleable(policy.slot_id, policy.semantic_ids)


def _today(capsule: dict[str, Any]) -> Capsule | None:
    """The capsule today's shim sends for the recorded card (None: nothing to style)."""
    slots = [s for s in capsule["slots"] if _styleable(s)]
    return Capsule.from_object({**capsule, "slots": slots}) if slots else None


def _restricted(answer: str, capsule: Capsule) -> str:
    """The recorded answer without the slots today's capsule does not ask for."""
    document = json.loads(answer)
    kept = {s.slot_id for s in capsule.slots}
    document["slots"] = [s for s in document["slots"] if s["slot_id"] in kept]
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def _compact(text: str) -> bool:
    return text == json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))


def test_the_recorded_capsules_under_the_fit_table() -> None:
    # 16 capsules; the 6 dual cards carry the locked decision (and first review line):
    # refused as recorded; 2 of them (a decision only, one reason) have nothing left.
    assert len(RECORDED) == 16
    refused = 0
    for capsule in RECORDED:
        try:
            Capsule.from_object(capsule)
        except CapsuleError as e:
            assert e.reason is CapsuleReason.SLOT_UNSTYLEABLE
            refused += 1
    today = [_today(c) for c in RECORDED]
    assert refused == 6
    assert sum(c is None for c in today) == 2
    assert sum(len(c.slots) for c in today if c is not None) == 19


def test_every_recorded_answer_is_still_grammatical() -> None:
    # What was accepted before the table is still grammatical, in every slot (the
    # locked ones included): every rejection below is the fit table's.
    for version in ("old", "new"):
        for capsule, answer in zip(RECORDED, _answers(version), strict=True):
            document = json.loads(answer)
            for slot, out in zip(capsule["slots"], document["slots"], strict=True):
                policy = slot_policy(
                    slot["slot_id"], slot["allowed_predicate_ids"] + slot["allowed_action_ids"]
                )
                assert check_grammar(policy, out["generated_ko"]) is None, version


def _verdicts(version: str) -> list[tuple[int, Verdict, Reason | None]]:
    out = []
    for i, (capsule, answer) in enumerate(zip(RECORDED, _answers(version), strict=True)):
        today = _today(capsule)
        if today is not None:
            judgement = judge(today, _restricted(answer, today))
            out.append((i, judgement.verdict, judgement.reason))
    return out


def test_how_many_recorded_answers_are_still_accepted() -> None:
    # Of the 14 cards that are still asked: the old instruction's answers, 1 (a dual
    # card's second review line with 그리고); the brief-style instruction's, 2 (the
    # same card, and a physique card with 먼저). Every other answer is rejected by the
    # fit table: a word outside its cell, or two before one sentence.
    expected = {
        "old": ({9}, Counter({Reason.STYLE_MISFIT: 13})),
        "new": ({9, 15}, Counter({Reason.STYLE_MISFIT: 11, Reason.STACKED_STYLE: 1})),
    }
    for version, (accepted, rejected) in expected.items():
        verdicts = _verdicts(version)
        assert len(verdicts) == 14
        assert {i for i, v, _ in verdicts if v is Verdict.ACCEPTED} == accepted, version
        assert all(v is Verdict.VALIDATION_REJECTED for i, v, _ in verdicts if i not in accepted), (
            version
        )
        assert Counter(r for _, _, r in verdicts if r is not None) == rejected, version


def test_the_brief_style_instruction_got_compact_short_answers() -> None:
    # Independent of the table: the brief-style instruction's answers are compact and
    # a few tokens above today's minimal answer (the cards still asked as recorded).
    import quicktok

    enc = quicktok.get_encoding("o200k_base")
    new, old = _answers("new"), _answers("old")
    assert all(_compact(a) for a in new)
    assert not any(_compact(a) for a in old)
    askable = []
    for i, capsule in enumerate(RECORDED):
        try:
            askable.append((i, Capsule.from_object(capsule)))
        except CapsuleError:
            continue
    assert len(askable) == 10

    def extra(answers: list[str]) -> list[int]:
        return [
            len(enc.encode(answers[i])) - len(enc.encode(minimal_answer(c))) for i, c in askable
        ]

    assert max(len(enc.encode(a)) for a in new) <= ANSWER_BUDGET_TOKENS
    assert (statistics.median(extra(new)), max(extra(new))) == (3, 5)
    assert statistics.median(extra(new)) < statistics.median(extra(old))

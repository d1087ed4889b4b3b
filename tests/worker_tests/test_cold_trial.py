"""The recorded cold-trial answers (tests/worker_tests/cold_trial/README.md), judged under
today's contract.

They were recorded under two earlier instructions, before the fit table (design §6.1):
`old` asked for neither compact JSON nor brief style, `new` asked for both. Every one of
them was accepted then, and every one is still grammatical. Since the table, the
contract accepts only the words the table allows where they stand, and a capsule that
carries a slot the table leaves no choice (design §6.1/§6.2: every slot but the
goal-missing weekly interpretation) cannot be asked at all. So each answer is judged
against the capsule today's shim sends for the same card: the recorded capsule without
its locked slots, the answer without theirs (a card left with no slot is
`nothing_to_style`: no call). The counts are pinned here and quoted in docs/budget.md
§5: of the 16 recorded cards one is still asked, and neither of its answers fits.
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
from kexpr.spool.contract.answers import answer_json
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS

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
    # 16 capsules, every one carrying a locked slot: refused as recorded. Today's shim
    # asks for one of them, the goal-missing weekly report (card 6), its
    # interpretation only; the other 15 have nothing left to style.
    assert len(RECORDED) == 16
    refused = 0
    for capsule in RECORDED:
        try:
            Capsule.from_object(capsule)
        except CapsuleError as e:
            assert e.reason is CapsuleReason.SLOT_UNSTYLEABLE
            refused += 1
    today = [_today(c) for c in RECORDED]
    assert refused == 16
    assert [i for i, c in enumerate(today) if c is not None] == [6]
    asked = today[6]
    assert asked is not None and [s.slot_id for s in asked.slots] == ["weekly.interpretation"]
    assert asked.slots[0].semantic_ids == (
        "P_WEEKLY_TREND_OBSERVED",
        "A_WEEKLY_HOLD_FOR_MISSING_GOAL",
    )


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
    # Of the one card still asked (the goal-missing interpretation), neither answer is
    # accepted: the old instruction's put 먼저 and 이제 where the table allows no word
    # (style_misfit), the brief-style instruction's 이제 잠시 before the hold (two
    # words before one sentence: stacked_style). Neither wrote 다만.
    expected: dict[str, tuple[set[int], Counter[Reason]]] = {
        "old": (set(), Counter({Reason.STYLE_MISFIT: 1})),
        "new": (set(), Counter({Reason.STACKED_STYLE: 1})),
    }
    for version, (accepted, rejected) in expected.items():
        verdicts = _verdicts(version)
        assert [i for i, _, _ in verdicts] == [6]
        assert {i for i, v, _ in verdicts if v is Verdict.ACCEPTED} == accepted, version
        assert all(v is Verdict.VALIDATION_REJECTED for i, v, _ in verdicts if i not in accepted), (
            version
        )
        assert Counter(r for _, _, r in verdicts if r is not None) == rejected, version


def _shortest(capsule: dict[str, Any]) -> str:
    """The grammar's shortest answer to the recorded capsule, compact: one lexeme
    (``그리고``) per slot, before its first token. Independent of the fit table."""
    tokens = {s["slot_id"]: s["required_placeholder_tokens"] for s in capsule["slots"]}
    return answer_json(
        capsule, lambda slot_id: "그리고 " + " ".join(f"{t}." for t in tokens[slot_id])
    )


def test_the_brief_style_instruction_got_compact_short_answers() -> None:
    # Independent of the table: the brief-style instruction's answers are compact and
    # a few tokens above the grammar's shortest answer to the same recorded capsule.
    import quicktok

    enc = quicktok.get_encoding("o200k_base")
    new, old = _answers("new"), _answers("old")
    assert all(_compact(a) for a in new)
    assert not any(_compact(a) for a in old)
    shortest = [_shortest(c) for c in RECORDED]
    for capsule, answer in zip(RECORDED, shortest, strict=True):
        document = json.loads(answer)
        for slot, out in zip(capsule["slots"], document["slots"], strict=True):
            policy = slot_policy(
                slot["slot_id"], slot["allowed_predicate_ids"] + slot["allowed_action_ids"]
            )
            assert check_grammar(policy, out["generated_ko"]) is None

    def extra(answers: list[str]) -> list[int]:
        return [
            len(enc.encode(a)) - len(enc.encode(b)) for a, b in zip(answers, shortest, strict=True)
        ]

    assert max(len(enc.encode(a)) for a in new) <= ANSWER_BUDGET_TOKENS
    assert (statistics.median(extra(new)), max(extra(new))) == (3, 5)
    assert statistics.median(extra(new)) < statistics.median(extra(old))

"""The recorded cold-trial answers (tests/worker_tests/cold_trial/README.md): the answers
to today's instruction are all accepted by the contract, compact, within the budget and
shorter than the answers to the old instruction, which asked for neither."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from kexpr.spool.contract import Capsule, Verdict, judge
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS, minimal_answer

HERE = Path(__file__).parent / "cold_trial"


def _lines(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (HERE / name).read_text(encoding="utf-8").splitlines()]


CAPSULES = [Capsule.from_json(str(row["capsule"])) for row in _lines("capsules.jsonl")]


def _answers(version: str) -> list[str]:
    rows = _lines(f"answers-{version}.jsonl")
    assert [row["i"] for row in rows] == list(range(len(CAPSULES)))
    return [str(row["content"]) for row in rows]


def _compact(text: str) -> bool:
    return text == json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))


def test_every_answer_to_either_instruction_is_accepted() -> None:
    for version in ("old", "new"):
        for capsule, answer in zip(CAPSULES, _answers(version), strict=True):
            assert judge(capsule, answer).verdict is Verdict.ACCEPTED, version


def test_todays_instruction_gets_compact_short_answers() -> None:
    import quicktok

    enc = quicktok.get_encoding("o200k_base")
    new, old = _answers("new"), _answers("old")
    assert all(_compact(a) for a in new)
    assert not any(_compact(a) for a in old)
    extra_new = [
        len(enc.encode(a)) - len(enc.encode(minimal_answer(c)))
        for c, a in zip(CAPSULES, new, strict=True)
    ]
    extra_old = [
        len(enc.encode(a)) - len(enc.encode(minimal_answer(c)))
        for c, a in zip(CAPSULES, old, strict=True)
    ]
    assert max(len(enc.encode(a)) for a in new) <= ANSWER_BUDGET_TOKENS
    assert statistics.median(extra_new) < statistics.median(extra_old)

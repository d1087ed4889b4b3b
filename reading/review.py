"""The reading review of the fit table (design §6.2): A/B sheets, answers, verdicts.

A cell of `kexpr.spool.contract.fit` keeps a word only if whole host messages with that
word before that sentence (every other byte the host's) read at least as well as the host's
own text to blind readers of Korean, and no reader finds a change of meaning. This script
holds that review as data, reproducibly:

- ``python reading/review.py sheets`` writes ``reading/sheets/sheet-N.md`` (what a reader
  sees: numbered A/B pairs of whole messages and nothing else) and
  ``reading/keys/sheet-N.json`` (which side is the host's, which cell an item tests). The
  items are every cell under review on two or more different bodies, shuffled over the
  sheets, sides and order random from a fixed seed, and three controls in every sheet:
  an identical pair, `차분히, ` before the daily status (reads worse), `잠시 ` before it (a
  change of meaning: "checked for a moment").
- A reader answers one sheet in ``reading/answers/sheet-N.reader-R.json`` (the form is
  the sheet's own last section).
- ``python reading/review.py verdicts`` writes ``reading/verdicts.json``: a reader whose
  controls fail is not counted; a cell is ``keep`` when each of its items has at least two
  counted judgements and none of them prefers the host's text or finds a change of
  meaning; a word new to the lexicon is ``admit`` only if, besides, at least one counted
  judgement prefers it.

`tests/contract/test_reading_review.py` recomputes the verdicts from the answers and ties
every non-empty cell of the table, and every lexicon word the table uses beyond the plan's
twenty, to them.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final, Literal

HERE: Final = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bodies import BODIES, sentence  # noqa: E402

SEED: Final = 20261205
BODIES_PER_CELL: Final = 2

Kind = Literal["cell", "identical", "calm", "meaning"]


@dataclass(frozen=True, slots=True, order=True)
class Cell:
    """One reviewed cell: a word (and its comma) directly before one sentence."""

    semantic_id: str
    position: Literal["first", "later"]
    lexeme: str
    comma: bool
    new_word: bool

    @property
    def key(self) -> str:
        return f"{self.semantic_id}/{self.position}/{self.lexeme}{',' if self.comma else ''}"

    @property
    def prefix(self) -> str:
        return self.lexeme + (", " if self.comma else " ")


def _c(sid: str, pos: Literal["first", "later"], word: str, *, comma: bool, new: bool) -> Cell:
    return Cell(sid, pos, word, comma, new)


# The cells under review: every cell of the table as it stood before the review, then
# the candidate words (one word each, the plan's character rules, outside its forbidden
# vocabulary, no cause or consequence connective on weekly; design §6.2 says why each).
CELLS: Final[tuple[Cell, ...]] = (
    # the table before the review
    _c("P_DAILY_COMPLETE", "first", "그리고", comma=False, new=False),
    _c("P_DAILY_PARTIAL", "first", "그리고", comma=False, new=False),
    _c("P_WEEKLY_TREND_UNAVAILABLE", "first", "먼저", comma=True, new=False),
    _c("P_WEEKLY_TREND_OBSERVED", "first", "먼저", comma=True, new=False),
    _c("P_WEEKLY_IN_GOAL", "first", "먼저", comma=True, new=False),
    _c("P_WEEKLY_OUT_OF_GOAL", "first", "먼저", comma=True, new=False),
    _c("A_WEEKLY_RECHECK_AFTER_RECORD", "later", "그리고", comma=False, new=False),
    _c("A_WEEKLY_RECHECK_INPUT", "later", "그리고", comma=False, new=False),
    _c("A_WEEKLY_HOLD_FOR_MISSING_GOAL", "later", "그리고", comma=False, new=False),
    _c("A_WEEKLY_HOLD_FOR_MISSING_GOAL", "later", "이어서", comma=True, new=False),
    _c("P_WEEKLY_KEEP_BASIS", "later", "그리고", comma=False, new=False),
    _c("P_WEEKLY_KEEP_BASIS", "later", "이어서", comma=True, new=False),
    _c("A_WEEKLY_KEEP_BASELINE", "first", "그리고", comma=False, new=False),
    _c("A_WEEKLY_REVIEW_ADJUSTMENT", "first", "그리고", comma=False, new=False),
    _c("P_WEEKLY_RECORDS_INSUFFICIENT", "first", "그리고", comma=False, new=False),
    _c("P_DUAL_REASON_EDIT", "later", "그리고", comma=False, new=False),
    _c("P_DUAL_REASON_LATEST", "later", "그리고", comma=False, new=False),
    _c("A_OPERATOR_REVIEW_DECISION", "first", "먼저", comma=False, new=False),
    # candidate words
    _c("P_DAILY_COMPLETE", "first", "이렇게", comma=False, new=True),
    _c("P_DAILY_PARTIAL", "first", "다만", comma=True, new=True),
    _c("P_DAILY_PARTIAL", "first", "참고로", comma=True, new=True),
    _c("P_WEEKLY_TREND_UNAVAILABLE", "first", "정리하면", comma=True, new=True),
    _c("P_WEEKLY_TREND_OBSERVED", "first", "정리하면", comma=True, new=True),
    _c("P_WEEKLY_IN_GOAL", "first", "정리하면", comma=True, new=True),
    _c("P_WEEKLY_OUT_OF_GOAL", "first", "정리하면", comma=True, new=True),
    _c("A_WEEKLY_HOLD_FOR_MISSING_GOAL", "later", "다만", comma=True, new=True),
    _c("A_WEEKLY_KEEP_BASELINE", "first", "참고로", comma=True, new=True),
    _c("A_WEEKLY_REVIEW_ADJUSTMENT", "first", "참고로", comma=True, new=True),
    _c("P_WEEKLY_RECORDS_INSUFFICIENT", "first", "참고로", comma=True, new=True),
    _c("A_WEEKLY_KEEP_BASELINE", "first", "종합하면", comma=True, new=True),
    _c("A_WEEKLY_REVIEW_ADJUSTMENT", "first", "종합하면", comma=True, new=True),
    _c("P_WEEKLY_RECORDS_INSUFFICIENT", "first", "종합하면", comma=True, new=True),
    _c("P_DUAL_REASON_EDIT", "later", "또한", comma=False, new=True),
    _c("P_DUAL_REASON_LATEST", "later", "또한", comma=False, new=True),
    _c("P_DUAL_REASON_EDIT", "later", "아울러", comma=False, new=True),
    _c("P_DUAL_REASON_LATEST", "later", "아울러", comma=False, new=True),
)

# The second round (sheet 5): after the first, `다만,` before the goal-missing hold was the
# one word preferred, which left that slot one composition (no choice for the model). So
# the other contrast words before the same sentence, and the two contrast-like words before
# the other interpretation lines that follow a finding.
CELLS_ROUND_2: Final[tuple[Cell, ...]] = (
    _c("A_WEEKLY_HOLD_FOR_MISSING_GOAL", "later", "하지만", comma=True, new=True),
    _c("A_WEEKLY_HOLD_FOR_MISSING_GOAL", "later", "그러나", comma=True, new=True),
    _c("A_WEEKLY_HOLD_FOR_MISSING_GOAL", "later", "다만", comma=False, new=True),
    _c("A_WEEKLY_HOLD_FOR_MISSING_GOAL", "later", "그런데", comma=True, new=True),
    _c("A_WEEKLY_RECHECK_AFTER_RECORD", "later", "대신", comma=True, new=True),
    _c("A_WEEKLY_RECHECK_AFTER_RECORD", "later", "다만", comma=True, new=True),
    _c("A_WEEKLY_RECHECK_INPUT", "later", "다만", comma=True, new=True),
)
ROUNDS: Final[Mapping[int, tuple[tuple[Cell, ...], range]]] = {
    1: (CELLS, range(1, 5)),
    2: (CELLS_ROUND_2, range(5, 6)),
}
ALL_CELLS: Final = CELLS + CELLS_ROUND_2

# The controls (the same in every sheet, on a daily body).
_CONTROL_BODY: Final = "daily-complete-b"
_CONTROL_SENTENCE: Final = "P_DAILY_COMPLETE"
CONTROLS: Final[Mapping[Kind, str]] = {"identical": "", "calm": "차분히, ", "meaning": "잠시 "}


def position_in(body: str, semantic_id: str) -> Literal["first", "later"] | None:
    """The sentence's position in ``body`` (None: not in it).

    ``first``: the first sentence of its run (the slot's first line, the first review
    line under its heading); ``later``: a sentence after another of the same run.
    """
    text = sentence(semantic_id)
    at = body.find(text)
    if at < 0:
        return None
    if body.count(text) != 1:
        raise AssertionError("a sentence stands once in a body")
    line_start = body.rfind("\n", 0, at) + 1
    if line_start != at:
        raise AssertionError("a reviewed sentence opens its line")
    previous = body[:at].removesuffix("\n").rpartition("\n")[2]
    return "first" if previous in ("", "검토 안내") else "later"


def bodies_for(cell: Cell) -> list[str]:
    """The names of the bodies the cell is read on (the first `BODIES_PER_CELL`)."""
    names = [n for n, b in BODIES.items() if position_in(b, cell.semantic_id) == cell.position]
    if len(names) < BODIES_PER_CELL:
        raise AssertionError(f"{cell.key}: fewer than {BODIES_PER_CELL} bodies")
    return names[:BODIES_PER_CELL]


def styled(body: str, semantic_id: str, prefix: str) -> str:
    """``body`` with ``prefix`` directly before ``semantic_id``'s sentence, all else equal."""
    text = sentence(semantic_id)
    if body.count(text) != 1:
        raise AssertionError("a sentence stands once in a body")
    return body.replace(text, prefix + text, 1)


@dataclass(frozen=True, slots=True)
class KeyItem:
    """What one numbered item of a sheet tests (never shown to the reader)."""

    item: int
    kind: Kind
    cell: str | None
    body: str
    host_side: Literal["A", "B"]


def _items(
    rng: random.Random, cells: Sequence[Cell], count: int
) -> list[list[tuple[Kind, Cell | None, str]]]:
    pairs: list[tuple[Kind, Cell | None, str]] = [
        ("cell", c, b) for c in cells for b in bodies_for(c)
    ]
    rng.shuffle(pairs)
    sheets: list[list[tuple[Kind, Cell | None, str]]] = [[] for _ in range(count)]
    for n, pair in enumerate(pairs):
        sheets[n % count].append(pair)
    for sheet in sheets:
        for kind in CONTROLS:
            sheet.append((kind, None, _CONTROL_BODY))
        rng.shuffle(sheet)
    return sheets


_HEAD: Final = """# 읽기 비교 {n}

아래는 한국어 코칭 봇이 텔레그램으로 보내는 메시지입니다(고객에게 보내는 체크인 답장과
주간 리포트, 운영자에게 보내는 검토 카드). 각 항목에는 같은 메시지의 두 판 A와 B가
있습니다. 둘은 같을 수도 있고, 한 곳이 다를 수도 있습니다.

항목마다 메시지 전체를 받는 사람의 입장에서 읽고 답해 주세요.

1. `better`: 어느 쪽이 한국어로 더 자연스럽고 읽기 좋습니까? `A`, `B`, 또는 차이가 없거나
   우열을 가릴 수 없으면 `same`.
2. `natural_a`, `natural_b`: 각 판의 자연스러움, 1(매우 어색함)부터 5(매우 자연스러움).
3. `meaning`: 두 판이 전하는 내용(사실, 판단, 지시, 시점, 정도)이 같습니까? `same` 또는
   `different`.
4. `note`: 한 문장으로 이유(한국어나 영어).
"""

_FOOT: Final = """## 답하는 형식

JSON 배열 하나, 항목마다 객체 하나:

```json
[{{"item": 1, "better": "A", "natural_a": 4, "natural_b": 3, "meaning": "same", "note": "…"}}]
```

항목은 1부터 {count}까지 모두 답해 주세요.
"""


def _fence(text: str) -> str:
    return "```text\n" + text + "\n```"


def build_sheets(out: Path = HERE) -> None:
    """Write every round's sheets and keys (deterministic: `SEED` plus the round)."""
    (out / "sheets").mkdir(exist_ok=True)
    (out / "keys").mkdir(exist_ok=True)
    for number, (cells, sheets) in ROUNDS.items():
        rng = random.Random(SEED if number == 1 else SEED + number)
        _build_round(out, rng, cells, sheets)


def _build_round(out: Path, rng: random.Random, cells: Sequence[Cell], numbers: range) -> None:
    for s, sheet in zip(numbers, _items(rng, cells, len(numbers)), strict=True):
        parts = [_HEAD.format(n=s)]
        keys: list[KeyItem] = []
        for n, (kind, cell, name) in enumerate(sheet, start=1):
            host = BODIES[name]
            if cell is not None:
                other = styled(host, cell.semantic_id, cell.prefix)
            else:
                other = styled(host, _CONTROL_SENTENCE, CONTROLS[kind])
            host_side: Literal["A", "B"] = "A" if rng.random() < 0.5 else "B"
            a, b = (host, other) if host_side == "A" else (other, host)
            parts.append(f"## 항목 {n}\n\nA\n\n{_fence(a)}\n\nB\n\n{_fence(b)}\n")
            keys.append(KeyItem(n, kind, None if cell is None else cell.key, name, host_side))
        parts.append(_FOOT.format(count=len(sheet)))
        (out / "sheets" / f"sheet-{s}.md").write_text("\n".join(parts), encoding="utf-8")
        (out / "keys" / f"sheet-{s}.json").write_text(
            json.dumps([asdict(k) for k in keys], ensure_ascii=False, indent=1) + "\n",
            encoding="utf-8",
        )


# --- verdicts -------------------------------------------------------------------------

Judgement = Literal["styled", "host", "same"]


@dataclass(frozen=True, slots=True)
class Answer:
    item: int
    better: Literal["A", "B", "same"]
    natural_a: int
    natural_b: int
    meaning: Literal["same", "different"]
    note: str


def read_answers(path: Path) -> list[Answer]:
    """One reader's answers to one sheet; anything but the sheet's form is refused."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    out: list[Answer] = []
    for row in raw:
        if set(row) != {"item", "better", "natural_a", "natural_b", "meaning", "note"}:
            raise ValueError(f"{path.name}: an answer has other keys")
        answer = Answer(**row)
        if answer.better not in ("A", "B", "same") or answer.meaning not in ("same", "different"):
            raise ValueError(f"{path.name}: an answer outside the form")
        if not all(
            isinstance(x, int) and 1 <= x <= 5 for x in (answer.natural_a, answer.natural_b)
        ):
            raise ValueError(f"{path.name}: a naturalness outside 1-5")
        out.append(answer)
    return out


def judgement(key: KeyItem, answer: Answer) -> Judgement:
    if answer.better == "same":
        return "same"
    return "host" if answer.better == key.host_side else "styled"


def controls_pass(keys: Sequence[KeyItem], answers: Sequence[Answer]) -> bool:
    """A reader is counted only if every control of the sheet came out as it must:
    the identical pair `same` in both questions; `차분히,` not preferred to the host's
    text; `잠시` read as a change of meaning."""
    by_item = {a.item: a for a in answers}
    for key in keys:
        answer = by_item[key.item]
        if key.kind == "identical" and (answer.better != "same" or answer.meaning != "same"):
            return False
        if key.kind == "calm" and judgement(key, answer) != "host":
            return False
        if key.kind == "meaning" and answer.meaning != "different":
            return False
    return True


def _load_keys(root: Path, sheet: str) -> list[KeyItem]:
    raw = json.loads((root / "keys" / f"{sheet}.json").read_text(encoding="utf-8"))
    return [KeyItem(**k) for k in raw]


def answer_files(root: Path = HERE) -> Iterator[tuple[str, str, Path]]:
    """(sheet, reader, path) of every committed answer file."""
    for path in sorted((root / "answers").glob("sheet-*.reader-*.json")):
        sheet, reader = path.name.removesuffix(".json").split(".")
        yield sheet, reader, path


def verdicts(root: Path = HERE) -> dict[str, object]:
    """Every reader's standing and every cell's verdict, from the committed answers."""
    readers: dict[str, dict[str, object]] = {}
    judgements: dict[str, list[dict[str, object]]] = {c.key: [] for c in ALL_CELLS}
    for sheet, reader, path in answer_files(root):
        keys = _load_keys(root, sheet)
        answers = read_answers(path)
        if sorted(a.item for a in answers) != [k.item for k in keys]:
            raise ValueError(f"{path.name}: not every item answered once")
        counted = controls_pass(keys, answers)
        readers[f"{sheet}.{reader}"] = {"counted": counted}
        if not counted:
            continue
        by_item = {a.item: a for a in answers}
        for key in keys:
            if key.kind != "cell" or key.cell is None:
                continue
            answer = by_item[key.item]
            judgements[key.cell].append(
                {
                    "reader": f"{sheet}.{reader}",
                    "body": key.body,
                    "judgement": judgement(key, answer),
                    "meaning_change": answer.meaning == "different",
                }
            )
    cells: dict[str, object] = {}
    for cell in ALL_CELLS:
        rows = judgements[cell.key]
        per_body = {b: [r for r in rows if r["body"] == b] for b in bodies_for(cell)}
        enough = all(len(r) >= 2 for r in per_body.values())
        worse = sum(1 for r in rows if r["judgement"] == "host")
        changed = sum(1 for r in rows if r["meaning_change"])
        better = sum(1 for r in rows if r["judgement"] == "styled")
        if not enough:
            verdict = "unread"
        elif worse or changed:
            verdict = "drop"
        elif cell.new_word and not better:
            verdict = "drop"
        else:
            verdict = "admit" if cell.new_word else "keep"
        cells[cell.key] = {
            "verdict": verdict,
            "judgements": len(rows),
            "host_preferred": worse,
            "styled_preferred": better,
            "same": len(rows) - worse - better,
            "meaning_change": changed,
        }
    return {"readers": readers, "cells": cells}


def main(argv: Sequence[str]) -> int:
    if argv == ["sheets"]:
        build_sheets()
        return 0
    if argv == ["verdicts"]:
        text = json.dumps(verdicts(), ensure_ascii=False, indent=1, sort_keys=True)
        (HERE / "verdicts.json").write_text(text + "\n", encoding="utf-8")
        return 0
    print("usage: python reading/review.py sheets|verdicts", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

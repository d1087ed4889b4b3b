"""Writes the seed corpus ``fuzz/corpus/judge`` and the dictionary ``fuzz/judge.dict``.

    python fuzz/seeds.py

Seeds are small: valid responses for the capsules of ``judge_target.CAPSULES`` (files
``valid-*``, which must be accepted: both compositions of the one styled slot) and a
few attack shapes from the plan's list and the fit table's (design §6.1, §6.2). The dictionary holds the schema's keys, tokens,
lexemes, the fit table's style runs and escapes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the adversarial suite's builders and oracle

from adversarial.builders import GOOD, response
from adversarial.oracle import SPEC_LEXICON
from judge_target import CAPSULES, encode_input

CORPUS = HERE / "corpus" / "judge"
DICTIONARY = HERE / "judge.dict"


def _doc(index: int, *generated: str, **dumps: Any) -> bytes:
    cap = CAPSULES[index]
    return json.dumps(
        response(cap, *(generated or GOOD[cap])), ensure_ascii=False, **dumps
    ).encode()


def seeds() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for index, cap in enumerate(CAPSULES):
        out[f"valid-{index}-{cap.surface}"] = encode_input(index, _doc(index))
    out["valid-0-pretty"] = encode_input(0, _doc(0, indent=2))
    out["valid-1-ascii"] = encode_input(1, json.dumps(response(CAPSULES[1])).encode())
    out["valid-0-comma"] = encode_input(0, _doc(0, "[[P:01]]. 다만, [[A:01]]."))
    out["valid-1-no-comma"] = encode_input(1, _doc(1, "[[P:01]]. 다만 [[A:01]]."))
    styled = _doc(0).decode()
    attacks = {  # name: (capsule index, content)
        "duplicate-escaped-key": (0, styled[:-1] + ',"\\u0073urface":"weekly.v1"}'),
        "plan-daily-example": (0, _doc(0, "[[P:01]]. 오늘은 차분히, [[A:01]].").decode()),
        "number-word": (1, _doc(1, "[[P:01]]. 하나, [[A:01]].").decode()),
        "evidential": (1, _doc(1, "[[P:01]]. 확인 결과, [[A:01]].").decode()),
        "canonical-only": (0, _doc(0, "[[P:01]]. [[A:01]].").decode()),
        "nfd": (0, styled.replace("다만", "\\u1103\\u1161\\u1106\\u1161\\u11ab")),
        "zero-width": (0, styled.replace("다만 ", "다만\\u200b ")),
        "style-misfit": (0, _doc(0, "[[P:01]]. 차분히, [[A:01]].").decode()),
        "former-cell": (0, _doc(0, "[[P:01]]. 그리고 [[A:01]].").decode()),
        "but-before-the-finding": (1, _doc(1, "다만, [[P:01]]. [[A:01]].").decode()),
        "stacked-style": (0, _doc(0, "[[P:01]]. 다만 다만 [[A:01]].").decode()),
        "comma-elsewhere": (1, _doc(1, "[[P:01]]. 다만 ,[[A:01]].").decode()),
        "nan": (0, styled[:-1] + ',"x":NaN}'),
        "tokens-reordered": (0, _doc(0, "다만 [[A:01]]. [[P:01]].").decode()),
        "key-of-the-other-capsule": (1, _doc(0).decode()),
    }
    for name, (index, text) in attacks.items():
        out[f"attack-{name}"] = encode_input(index, text.encode())
    out["attack-bom"] = encode_input(0, b"\xef\xbb\xbf" + _doc(0))
    out["attack-invalid-utf8"] = encode_input(0, _doc(0).replace("다".encode(), b"\xed\xa0\x80"))
    # form 1 (str with surrogateescape): the first byte is capsule 0 + 1 * len(CAPSULES)
    out["attack-lone-surrogate-str"] = bytes([len(CAPSULES)]) + _doc(0) + b"\xed\xa0"
    return out


def dictionary() -> str:
    words = [
        '"schema_version"', '"surface"', '"artifact_key"', '"slots"', '"slot_id"',
        '"predicate_ids"', '"action_ids"', '"placeholder_tokens"', '"generated_ko"',
        "[[P:01]]", "[[P:02]]", "[[A:01]]", "[[P:", "]]", ", ", ". ", "\\u", "\\ud800",
        "\\u0073", "NaN", "Infinity", "1e999", "true", "null", "[]", "{}", "\ufeff",
        *SPEC_LEXICON, "하나", "오늘", "확인 결과", "잘", "일", "kg",
        # the fit table's runs (design §6.1, §6.2), and words of its former cells
        "다만 ", "다만, ", "그리고 ", "먼저, ",
    ]  # fmt: skip
    lines = []
    for number, word in enumerate(words):
        escaped = "".join(
            chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else f"\\x{b:02x}"
            for b in word.encode("utf-8")
        )
        lines.append(f'kw{number}="{escaped}"')
    return "\n".join(lines) + "\n"


def main() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.iterdir():
        old.unlink()
    for name, data in seeds().items():
        (CORPUS / name).write_bytes(data)
    DICTIONARY.write_text(dictionary(), "ascii")


if __name__ == "__main__":
    main()

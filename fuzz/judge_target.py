"""The fuzz target: ``kexpr.spool.contract.judge(capsule, raw)`` on arbitrary input.

A *crash* is any exception other than a verdict, **or** a verdict that disagrees with
the independent oracle (``tests/adversarial/oracle.py``: a regular expression built
from the spec's lexicon and the issued tokens, design §6.1's fit table read slot by
slot, plus a yes/no reading of design §6's response rules). So the fuzzer looks for both robustness bugs and acceptance bugs.

Input layout: the first byte picks the capsule and how the rest is handed to
``judge``; the rest is the content.

    capsule = CAPSULES[b0 % 2]
    form    = (b0 // 2) % 3   0: bytes as is
                              1: str, decoded with surrogateescape (lone surrogates)
                              2: str, decoded with replacement characters

Importable without atheris: ``tests/adversarial/test_adversarial_fuzz_corpus.py``
replays the committed seed corpus through ``one_input`` in ``make test``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

_TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))

from adversarial.builders import STYLED, STYLED_OTHER_KEY, capsule_dict
from adversarial.oracle import document_ok

from kexpr.spool.contract import REASON_VERDICT, Capsule, Judgement, Verdict, judge

# The capsules that can exist (design §6.2: the fit table leaves one slot a choice,
# the weekly goal-missing interpretation), under two keys.
CAPSULES: Final[tuple[Capsule, ...]] = (STYLED, STYLED_OTHER_KEY)
_DICTS: Final = tuple(capsule_dict(c) for c in CAPSULES)
FORMS: Final = 3


class OracleDisagreement(AssertionError):
    """judge and the independent oracle disagree on accept/reject."""


class BrokenVerdict(AssertionError):
    """A Judgement that breaks its own invariants."""


def decode_input(data: bytes) -> tuple[int, str | bytes]:
    """(capsule index, content) for one fuzz input."""
    if not data:
        return 0, b""
    head, body = data[0], data[1:]
    form = (head // len(CAPSULES)) % FORMS
    content: str | bytes
    if form == 0:
        content = body
    elif form == 1:
        content = body.decode("utf-8", "surrogateescape")
    else:
        content = body.decode("utf-8", "replace")
    return head % len(CAPSULES), content


def encode_input(capsule_index: int, content: bytes) -> bytes:
    """The fuzz input that hands ``content`` (bytes form) to capsule ``capsule_index``."""
    return bytes([capsule_index]) + content


def one_input(data: bytes) -> Judgement:
    index, content = decode_input(data)
    judgement = judge(CAPSULES[index], content)
    if not isinstance(judgement, Judgement):
        raise BrokenVerdict("not a Judgement")
    accepted = judgement.verdict is Verdict.ACCEPTED
    if accepted != (judgement.composition is not None) or accepted != (judgement.reason is None):
        raise BrokenVerdict("accepted <=> composition <=> no reason")
    if judgement.reason is not None and REASON_VERDICT[judgement.reason] is not judgement.verdict:
        raise BrokenVerdict("reason of another verdict")
    if accepted != document_ok(_DICTS[index], content):
        raise OracleDisagreement(f"judge={judgement.to_dict()} oracle={not accepted}")
    return judgement

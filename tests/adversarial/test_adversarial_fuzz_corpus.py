"""The coverage-guided fuzz harness (``fuzz/``) in ``make test``: its committed seed
corpus replays through the same target ``make fuzz`` runs under atheris, without
atheris, and the seeds are what ``fuzz/seeds.py`` writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kexpr.spool.contract import Verdict

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"
CORPUS = FUZZ / "corpus" / "judge"
sys.path.insert(0, str(FUZZ))  # judge_target and seeds are scripts of fuzz/, not a package

import judge_target
import seeds

SEEDS = sorted(CORPUS.iterdir())


def test_corpus_is_small_and_present() -> None:
    assert 10 <= len(SEEDS) <= 50
    assert sum(p.stat().st_size for p in SEEDS) < 64 * 1024


@pytest.mark.parametrize("seed", SEEDS, ids=[p.name for p in SEEDS])
def test_seed_replays(seed: Path) -> None:
    judgement = judge_target.one_input(seed.read_bytes())  # raises on a crash
    assert (judgement.verdict is Verdict.ACCEPTED) is seed.name.startswith("valid-")


def test_corpus_is_what_seeds_py_writes() -> None:
    assert {p.name: p.read_bytes() for p in SEEDS} == seeds.seeds()
    assert (FUZZ / "judge.dict").read_text("ascii") == seeds.dictionary()


def test_target_flags_an_oracle_disagreement(monkeypatch: pytest.MonkeyPatch) -> None:
    # The target is only as good as its crash conditions: an input the oracle and
    # judge disagree on must raise. Simulate a contract bug by lying to the target.
    monkeypatch.setattr(judge_target, "document_ok", lambda capsule, content: False)
    with pytest.raises(judge_target.OracleDisagreement):
        judge_target.one_input((CORPUS / "valid-0-weekly.v1").read_bytes())


@pytest.mark.parametrize("form", range(judge_target.FORMS))
def test_every_input_form_reaches_judge(form: int) -> None:
    body = (CORPUS / "valid-0-weekly.v1").read_bytes()[1:]
    index, content = judge_target.decode_input(bytes([form * len(judge_target.CAPSULES)]) + body)
    assert index == 0
    assert isinstance(content, bytes if form == 0 else str)
    assert (
        judge_target.one_input(bytes([form * len(judge_target.CAPSULES)]) + body).verdict
        is Verdict.ACCEPTED
    )

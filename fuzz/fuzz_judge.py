"""Coverage-guided fuzzing of ``judge(capsule, raw)`` with atheris (libFuzzer).

    pip install -e '.[fuzz]'
    mkdir -p var/fuzz/corpus var/fuzz/artifacts
    python fuzz/fuzz_judge.py var/fuzz/corpus fuzz/corpus/judge \\
        -dict=fuzz/judge.dict -max_total_time=300 -artifact_prefix=var/fuzz/artifacts/

``make fuzz`` runs exactly this (``FUZZ_SECONDS`` bounds it). libFuzzer writes new
inputs into the *first* corpus directory, so the committed seeds under
``fuzz/corpus/judge`` are only read; a crashing input lands in ``var/fuzz/artifacts``
and replays with ``python fuzz/fuzz_judge.py var/fuzz/artifacts/crash-…``.
What counts as a crash is in ``judge_target.py``.
"""

from __future__ import annotations

import sys

import atheris

# Instrument the contract (and the oracle) for coverage feedback. The json scanner and
# pydantic-core are native code and are exercised, not instrumented.
with atheris.instrument_imports(include=["spool", "adversarial"]):
    import judge_target


def test_one_input(data: bytes) -> None:
    judge_target.one_input(data)


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

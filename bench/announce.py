"""The bench's progress lines: each phase says what it runs and about how long it
takes as it starts, so that a run is never silent for a minute.

Progress goes to stderr, flushed at once; stdout keeps only the figures (the
table, then the JSON object as its last line), so ``bench/run.py > figures.txt``
still shows the phases on the terminal and the file stays parseable. The
durations are rough expectations for a two-core machine, printed beside what the
previous phase really took: figures, never targets.

Imports nothing heavy: the entry points call `start` before their own imports.
"""

from __future__ import annotations

import sys
import time

_T0 = time.monotonic()
_current: list[tuple[str, float]] = []


def _say(text: str) -> None:
    print(f"[bench +{time.monotonic() - _T0:5.1f}s] {text}", file=sys.stderr, flush=True)


def _close() -> None:
    if _current:
        name, started = _current.pop()
        _say(f"  {name}: done in {time.monotonic() - started:.1f} s")


def start(script: str, profile: str, expected: str) -> None:
    """The first line of a run: which script, which profile, how long in all."""
    _say(f"{script} ({profile}): about {expected} in all; figures print at the end (stdout)")


def phase(name: str, what: str, expected: str) -> None:
    """A phase starts: its name, what it runs, its rough expected duration.
    Closes the previous phase with the time it really took."""
    _close()
    _say(f"{name}: {what} (about {expected})")
    _current.append((name, time.monotonic()))


def done() -> None:
    """The last phase ended: its real duration and the run's."""
    _close()
    _say("all phases done; printing the figures")

"""Bounded waits for what another process makes true (a file, a journal row, a
status). Each looks again every ``step`` seconds until ``timeout`` seconds have
passed on the monotonic clock; none of them measures time. A wait for what this
process itself does belongs in an event or an injected clock, not here."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def until(
    pred: Callable[[], object],
    timeout: float = 20.0,
    step: float = 0.05,
    *,
    tolerate: tuple[type[Exception], ...] = (),
) -> bool:
    """True as soon as ``pred()`` is true, False once ``timeout`` has passed (after
    one last look). ``tolerate``: exceptions that mean "not yet" (a file read while
    its writer replaces it), not a failure."""
    end = time.monotonic() + timeout
    while True:
        last = time.monotonic() >= end
        try:
            if pred():
                return True
        except tolerate:
            pass
        if last:
            return False
        time.sleep(step)


def poll(
    get: Callable[[], T], done: Callable[[T], object], timeout: float, step: float = 0.05
) -> T:
    """The first value of ``get()`` for which ``done`` holds, or the last one read
    once ``timeout`` has passed (the caller's assertion then says what was seen)."""
    end = time.monotonic() + timeout
    while True:
        value = get()
        if done(value) or time.monotonic() > end:
            return value
        time.sleep(step)


def wait_file(path: Path, timeout: float = 20.0, step: float = 0.02) -> bool:
    """True once ``path`` exists, False after ``timeout``."""
    return until(path.exists, timeout, step)

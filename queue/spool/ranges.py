"""Numeric ranges, checked one way wherever a number comes in: on the command line
of a ``kexpr`` command (ops and the worker alike) or in a constructor.

1. A number is within a range when it is finite and ``lo <= value <= hi``
   (`within`); ``nan`` and the infinities never are.
2. On a command line a value out of range is refused at parse time, never used:
   argparse calls a ``type=`` with the raw string; raising
   `argparse.ArgumentTypeError` makes it print a one-line ``error:`` and exit 2,
   instead of a value that later overflows (``--days 800000``) or never ends
   (``nan``/``inf``). `int_range` and `float_range` are those types.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["float_range", "int_range", "within"]


def within(value: float, bounds: tuple[float, float]) -> bool:
    """Rule 1: is ``value`` finite and in the inclusive ``bounds``?"""
    lo, hi = bounds
    return math.isfinite(value) and lo <= value <= hi


def int_range(lo: int, hi: int) -> Callable[[str], int]:
    """An ``int`` in ``[lo, hi]``."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text[:32]!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be between {lo} and {hi}")
        return value

    parse.__name__ = "integer"
    return parse


def float_range(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """A finite ``float`` in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text[:32]!r}") from None
        if not within(value, (lo, hi)) or (lo_open and value == lo):
            left = "(" if lo_open else "["
            raise argparse.ArgumentTypeError(f"must be in {left}{lo:g}, {hi:g}]")
        return value

    parse.__name__ = "number"
    return parse

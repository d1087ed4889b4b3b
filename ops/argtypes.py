"""Range-checked numeric arguments for the ``kexpr`` commands: a
value out of range is refused at parse time, never used.

argparse calls a ``type=`` with the raw string; raising `argparse.ArgumentTypeError`
makes it print a one-line ``error:`` and exit 2, instead of a value that later
overflows (``--days 800000``) or never ends (``nan``/``inf``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path


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
        if not math.isfinite(value) or value > hi or value < lo or (lo_open and value == lo):
            left = "(" if lo_open else "["
            raise argparse.ArgumentTypeError(f"must be in {left}{lo:g}, {hi:g}]")
        return value

    parse.__name__ = "number"
    return parse


def add_worker_options(p: argparse.ArgumentParser) -> None:
    """The options of a command that starts the worker (``kexpr run``, ``kexpr
    supervise``): its data root, its operator-configured egress and its spend
    bound (passed on to ``kexpr worker``, `kexpr.worker.spend`)."""
    from kexpr.spool.layout import DEFAULT_DATA_ROOT
    from kexpr.worker.spend import CAP_RANGE, DEFAULT_PER_DAY, DEFAULT_PER_HOUR

    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    p.add_argument("--https-proxy", help="egress proxy for the worker (operator-configured)")
    p.add_argument("--ssl-cert-file", help="CA bundle for the worker (operator-configured)")
    p.add_argument(
        "--max-calls-per-hour",
        type=int_range(*CAP_RANGE),
        default=DEFAULT_PER_HOUR,
        help=f"the worker's paid calls in any rolling hour (default {DEFAULT_PER_HOUR})",
    )
    p.add_argument(
        "--max-calls-per-day",
        type=int_range(*CAP_RANGE),
        default=DEFAULT_PER_DAY,
        help=f"the worker's paid calls in one UTC day (default {DEFAULT_PER_DAY})",
    )

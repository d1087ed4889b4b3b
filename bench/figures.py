"""What the benches share: the host-shaped body they present (the one message the fit
table styles) and the percentiles their figures are read at."""

from __future__ import annotations

# The goal-missing weekly report (tests/kit/bodies.py; design §6.1): the one body
# with a slot to ask, so the one whose presentation writes a request and makes a
# call. Every other body is ``nothing_to_style``: no request, nothing to measure.
# The benches put tests/ on sys.path before importing this module.
from kit.bodies import STYLED_BODY as BODY
from kit.bodies import STYLED_SURFACE as SURFACE
from kit.bodies import apresent_styled as apresent
from kit.bodies import present_styled as present

__all__ = ["BODY", "SURFACE", "UNCAPPED", "apresent", "pct", "present", "summary"]

# The benches present thousands of fresh artifacts in minutes to measure the
# product, far past a profile's spend bound (docs/cli.md, "The spend bound"),
# which they do not measure: their workers are started with the widest caps.
UNCAPPED = ("--max-calls-per-hour", "100000", "--max-calls-per-day", "100000")


def summary(
    xs: list[float], percentiles: tuple[float, ...] = (50, 90, 99), scale: float = 1.0
) -> dict[str, float]:
    """``xs`` times ``scale`` at each percentile (``p50``, ``p999`` for 99.9), then its
    largest value and its count."""
    scaled = [x * scale for x in xs]
    out = {f"p{p:g}".replace(".", ""): pct(scaled, p) for p in percentiles}
    return {**out, "max": max(scaled), "n": float(len(scaled))}


def pct(xs: list[float], p: float) -> float:
    """The ``p``-th percentile of ``xs``: the nearest rank, no interpolation."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]

"""What the benches share: the host-shaped daily body they present and the
percentiles their figures are read at."""

from __future__ import annotations

from gateway_shim import DailyFacts, format_daily

# A host-shaped daily body (docs/host-formats.md, HOST-FORMATS D4's shape).
BODY = format_daily(
    weight="72.4kg",
    intake="2,150kcal",
    macros="탄수화물 260g · 단백질 138g · 지방 70g",
    training="스쿼트 5세트 · RPE 7",
    sleep="6.7시간 · 수면 질 4/5",
    condition="3/5",
    digestion="정상",
    water="2.1L",
)
DAILY = DailyFacts(complete=True)

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

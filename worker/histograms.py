"""The margin of the one call, per surface: content-free histograms.

The plan fixes the call's budget (design §9): ``timeout=3.0`` s on the client, a 4 s
deadline, ``max_tokens=384``. A real model writes its answer token by token, so
whether a surface fits is a matter of measured time and length. The worker counts,
per surface, how long each call took (monotonic clock, from just before the call
to its return) and how many completion tokens the API says it wrote
(``usage.completion_tokens``); ``kexpr status`` and ``kexpr promotion-report``
show the figures, and the live shadow proof writes them into its summary.

Rules of this module:

* Counts only. A histogram is a fixed tuple of bucket edges (the constants below,
  with their reasons) and one integer count per bucket. No value is kept beyond
  the bucket it falls in: no sample list, no last value, no identifier.
* Keys are public constants: the four surface names
  (`kexpr.spool.contract.SURFACES`), the figure names (`FIGURES`) and the
  provider failure words (`kexpr.spool.outcomes.PROVIDER_FAILURES`). A surface
  outside `SURFACES` is not recorded (the capsule's own validation already
  refuses one). So nothing a request or an answer carries can become a key.
* Bucket ``i`` counts values ``v`` with ``edges[i-1] < v <= edges[i]``; the extra
  last bucket counts ``v > edges[-1]``. Edges are upper-inclusive, so "p95 <= 3.0 s"
  reads straight off the edge 3.0.
* Pure data and arithmetic: no I/O, no clock (the caller measures), no ``openai``
  (ops reads these constants in a gateway-only install).
"""

from __future__ import annotations

import bisect
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from kexpr.spool.contract import SURFACES
from kexpr.spool.contract.budget import (
    MAX_COMPLETION_TOKENS,
    SDK_TIMEOUT_S,
    TIME_BUDGET_TOKENS,
)
from kexpr.spool.lifecycle import MAX_WAIT
from kexpr.spool.outcomes import PROVIDER_FAILURES, ProviderFailure

# The plan's budget, from its one home (kexpr.spool.contract.budget, docs/budget.md;
# pure, so this module still does not import the provider, which imports openai):
# the client's ``timeout=3.0`` (p95 is judged against it), ``max_tokens=384`` (a
# longer answer is truncated) and the time budget in tokens, (3.0 s - 0.3 s) x 110
# = 297 (an answer above it cannot arrive even at the fastest published rate; its own
# edge shows how many calls were past it).
CALL_BUDGET_S: Final = SDK_TIMEOUT_S
MAX_TOKENS: Final = MAX_COMPLETION_TOKENS
# design §4: the request's deadline (the spool protocol's wait); no call is
# waited on longer.
DEADLINE_S: Final = MAX_WAIT.total_seconds()

# Call seconds: 0.25 s steps up to the 3 s budget (p95 is read to a quarter
# second), then 3.5 and the 4 s deadline; the last bucket (> 4 s) holds calls whose
# thread returned after the deadline's wait (scheduling), which is itself a finding.
CALL_SECONDS_EDGES: Final[tuple[float, ...]] = (
    0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0,
)  # fmt: skip
# Completion tokens: 32-token steps up to max_tokens=384, with the time budget's
# 297 as an edge of its own. The minimal compact answers measured are
# ~103 (daily) to ~311 (dual card, 4 reasons) tokens, so the steps resolve every
# surface. The last bucket (> 384) cannot be a complete answer: it is what an API
# that reports more than it was allowed to write would show.
COMPLETION_TOKENS_EDGES: Final[tuple[int, ...]] = (
    32, 64, 96, 128, 160, 192, 224, 256, 288, TIME_BUDGET_TOKENS, 320, 352, MAX_TOKENS,
)  # fmt: skip

Figure: TypeAlias = Literal["call_seconds", "completion_tokens"]
FIGURES: Final[Mapping[Figure, tuple[float, ...]]] = {
    "call_seconds": CALL_SECONDS_EDGES,
    "completion_tokens": tuple(float(e) for e in COMPLETION_TOKENS_EDGES),
}
# The status file's field names for one surface (worker.status.json,
# ``calls_by_surface``): what `SurfaceCalls.to_json` writes and ops validates.
SURFACE_FIELDS: Final = ("calls", "failures", "tokens_absent", *FIGURES)


def bucket(edges: Sequence[float], value: float) -> int:
    """The bucket index of ``value`` (module rule 3). NaN counts as the last
    bucket: a measurement that is not a number is never "within"."""
    if math.isnan(value):
        return len(edges)
    return bisect.bisect_left(edges, value)


def upper_edge(counts: Sequence[int], edges: Sequence[float], q: float) -> float | None:
    """The upper edge of the bucket holding the ``q`` quantile (0 < q <= 1) of the
    counted values: the smallest edge with at least ``ceil(q * n)`` values at or
    below it. ``math.inf`` when it falls in the last bucket (beyond every edge),
    None when nothing was counted."""
    n = sum(counts)
    if n == 0:
        return None
    need = math.ceil(q * n)
    seen = 0
    for i, c in enumerate(counts):
        seen += c
        if seen >= need:
            return edges[i] if i < len(edges) else math.inf
    return math.inf  # unreachable: the counts sum to n


class Margin(enum.StrEnum):
    """A surface's call time against `CALL_BUDGET_S`, read off its histogram."""

    NO_CALLS = "no_calls"  # nothing measured yet
    WITHIN_BUDGET = "within_budget"  # p95 bucket's upper edge <= 3.0 s
    OVER_BUDGET = "over_budget"  # p95 falls in a bucket above 3.0 s


P95: Final = 0.95


def margin(call_seconds: Sequence[int]) -> tuple[Margin, float | None]:
    """The margin and the p95 call time's upper edge (None: no calls, or beyond
    the last edge, the 4 s deadline) of one surface's call-seconds counts."""
    p95 = upper_edge(call_seconds, CALL_SECONDS_EDGES, P95)
    if p95 is None:
        return Margin.NO_CALLS, None
    if p95 <= CALL_BUDGET_S:
        return Margin.WITHIN_BUDGET, p95
    return Margin.OVER_BUDGET, None if math.isinf(p95) else p95


@dataclass(slots=True)
class SurfaceCalls:
    """One surface's calls: how many, how they failed, and the two histograms.
    Not locked itself: `kexpr.worker.status.Counters` holds its lock around every
    change and every read."""

    calls: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # ProviderFailure values
    tokens_absent: int = 0  # calls whose answer reported no usable completion_tokens
    call_seconds: list[int] = field(default_factory=lambda: [0] * (len(CALL_SECONDS_EDGES) + 1))
    completion_tokens: list[int] = field(
        default_factory=lambda: [0] * (len(COMPLETION_TOKENS_EDGES) + 1)
    )

    def record(
        self, seconds: float, failure: ProviderFailure | None, completion_tokens: int | None
    ) -> None:
        self.calls += 1
        if failure is not None:
            assert failure in PROVIDER_FAILURES
            self.failures[failure.value] = self.failures.get(failure.value, 0) + 1
        self.call_seconds[bucket(CALL_SECONDS_EDGES, seconds)] += 1
        if completion_tokens is None:
            self.tokens_absent += 1
        else:
            self.completion_tokens[bucket(FIGURES["completion_tokens"], completion_tokens)] += 1

    def to_json(self) -> dict[str, object]:
        return {
            "calls": self.calls,
            "failures": dict(sorted(self.failures.items())),
            "tokens_absent": self.tokens_absent,
            "call_seconds": list(self.call_seconds),
            "completion_tokens": list(self.completion_tokens),
        }


def new_surfaces() -> dict[str, SurfaceCalls]:
    """One empty record per public surface, so the status file always has the same
    keys (an operator's tooling, and the redaction proof, see a fixed shape)."""
    return {s: SurfaceCalls() for s in SURFACES}


def edges_json() -> dict[str, list[float]]:
    """The bucket edges as the status file states them next to the counts."""
    return {name: list(edges) for name, edges in FIGURES.items()}

"""The provider's real speed, learned from the worker's own calls (admission, design §9).

The answer budget (`kexpr.spool.contract.budget`) admits a capsule whose minimal
answer could arrive at the FASTEST published gpt-4.1-mini rate: a first token after
0.3 s, then 110 tokens/s. The published median on OpenAI's own API is slower (77
tokens/s after about 0.7 s), and there a dual card with two reasons can only time
out: every such call is billed, is a 3 s wait in front of the operator's card, and
is a failure in the promotion gate. The worker measures every call anyway; this
module turns the recent successful calls into a conservative estimate of the
provider's speed, and `fits` says whether an answer of a given length can arrive
within the time a request has left. `kexpr.worker.attempt` asks it under the
journal lock, right before the start row; a request that cannot fit gets no row
and no call (``provider_too_slow``).

Rules of this module:

Rule 1: the model is ``time = a + b x tokens`` (``a``: the first token and the
        fixed cost of one call; ``b``: seconds per completion token), fitted
        over the last `WINDOW` calls that returned content with a usable
        ``usage.completion_tokens`` (a failed call says nothing about its
        length). Numbers only: a sample is (monotonic second, call seconds,
        completion tokens, its length against its bound: Rule 6); no surface, key, ID
        or content is kept.
Rule 2: the fit is robust and deterministic. ``b`` is the Theil-Sen slope (the
        median of the slopes of all sample pairs whose lengths differ by at least
        `MIN_SPREAD_TOKENS`); with fewer than `MIN_PAIRS` such pairs (one shape
        only, e.g. daily cards alone) the length cannot separate ``a`` from ``b``
        and every second above the published first token is charged to the
        tokens (``b`` = the median of ``(t - FIRST_TOKEN_S) / n``), which
        overestimates a longer answer's time, never underestimates it. ``a`` is
        the `QUANTILE` (nearest rank) of the residuals ``t - b x n``: nine calls
        in ten of the window's were at least this fast. No randomness, no clock
        of its own (the caller passes the monotonic ``now``).
Rule 3: never more optimistic than the cold start: ``a >= FIRST_TOKEN_S`` and
        ``b >= 1 / FASTEST_TOKENS_PER_S``. With fewer than `MIN_SAMPLES` samples
        the model is cold and `fits` is today's rule alone (the caller keeps
        `min_answer_seconds`, the fastest published rate).
Rule 4: no shape is shut out for good by its own refusals. A refusal changes
        nothing in the estimate; every successful call of any shape moves the
        window, so a refused shape is re-admitted as soon as the cheaper shapes'
        calls say it fits. If nothing at all is being called (every shape
        refused: a provider slower than ~45 tokens/s, or a pretty-printing one),
        `admit` lets ONE refused request through as a speed probe once no call
        has succeeded and no probe was let through for `PROBE_AFTER_S`, so the
        model can learn that the provider is fast again. And samples older than
        `MAX_AGE_S` are dropped: without calls the model decays to the cold start.
Rule 5: how fast it follows a change (stated, and measured by the bench): a
        slowdown moves the `QUANTILE` of the residuals as soon as one tenth of the
        window is slow (3 of `WINDOW` = 24 calls); a speed-up takes effect once
        nine tenths of the window is fast (22 calls; at most `WINDOW`).
Rule 6: the answer's length is learned too. The budget's bound counts the
        minimal answer with the key at its worst case (64 tokens; a real
        64-hex key is ~37), and a brief answer adds style words to it. Each call
        records its answer's ``completion tokens / bound``; the estimate's
        ``length_ratio`` is the `QUANTILE` of the window's ratios (nine answers
        in ten were at most this long against their bound). A ratio, not a
        difference: a pretty-printed answer is longer by a share of its length
        (~40 %), so a difference learned on daily cards would let a dual card
        through that cannot arrive. `fits` asks whether ``bound x
        length_ratio`` tokens can arrive, and before any sample ``bound +
        STYLE_TOKENS``: the length the provider's answers really have (compact
        or pretty, brief or not), not a guess.
Rule 7: the line of Rule 2 assumes one speed over the window. When the speed
        or the answers' layout changed within it (old pretty answers at 77
        tokens/s beside new compact ones at 110), the pairs across the change
        give the line a slope no provider has, steep enough to refuse even the
        daily card; and a shape that is refused makes no call, so the model
        could not learn its way out. So the estimate is also the samples' own
        rate, every second above the published first token charged to the
        tokens (the `QUANTILE` of ``(t - FIRST_TOKEN_S) / n``, conservative for
        every answer at least as long as the samples'), and an answer's time is
        the lesser of the two: a change between regimes can no longer make the
        model refuse what its own latest calls show arriving.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Final

from kexpr.spool.contract.budget import FASTEST_TOKENS_PER_S, FIRST_TOKEN_S, SDK_TIMEOUT_S

# Rule 1: the last 24 successful calls. Long enough for a robust median over
# several shapes (daily, weekly, physique and dual cards each appear a few times
# in a normal mix), short enough to follow a change of the provider's speed
# within minutes at a few calls a minute (Rule 5).
WINDOW: Final = 24
# Rule 3: below 6 samples the quantile of Rule 2 would be the slowest sample or
# the one before it; the cold start (today's rule) is used instead.
MIN_SAMPLES: Final = 6
# Rule 2: two calls whose lengths differ by at least 32 tokens (the completion
# histogram's step; ~0.3 s at 110 tokens/s, well above the call's jitter) say
# something about the rate; closer ones only measure the jitter.
MIN_SPREAD_TOKENS: Final = 32
MIN_PAIRS: Final = 6
# Rule 2: the conservative quantile of the residuals (nine calls in ten).
QUANTILE: Final = 0.9
# Rule 4: samples expire after ten minutes (the provider's speed changes over
# minutes; a model that old is no longer evidence, and the cold start returns).
MAX_AGE_S: Final = 600.0
# Rule 4: at most one speed probe a minute, and only while nothing succeeds: a
# billed call that may time out, against a model that could otherwise never learn
# that the provider is fast again.
PROBE_AFTER_S: Final = 60.0
# Rule 6, before any answer was measured: the style words a brief answer adds
# above the minimal answer the budget counts: the cold trial's recorded answers
# with today's instruction were 3 tokens above it at the median and 5 at most
# (docs/budget.md §5); the most is used.
STYLE_TOKENS: Final = 5
# A call's answer can arrive only within the client's timeout (the plan's
# ``timeout=3.0``), whatever the request's deadline still leaves.
CALL_LIMIT_S: Final = SDK_TIMEOUT_S

_MIN_SLOPE: Final = 1.0 / FASTEST_TOKENS_PER_S


@dataclass(frozen=True, slots=True)
class Estimate:
    """The provider's estimated speed: numbers only (``worker.status.json``)."""

    first_token_s: float  # a (Rule 1)
    seconds_per_token: float  # b (Rule 1)
    samples: int
    cold: bool  # True: fewer than MIN_SAMPLES samples (today's rule alone)
    length_ratio: float | None = None  # Rule 6: completion tokens / bound (None: none yet)
    # Rule 7: seconds per token with every second above the published first
    # token charged to the tokens (the QUANTILE of the samples' own rates).
    overall_seconds_per_token: float = 1.0 / FASTEST_TOKENS_PER_S

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.seconds_per_token

    @property
    def overall_tokens_per_s(self) -> float:
        return 1.0 / self.overall_seconds_per_token

    def answer_tokens(self, bound: int) -> int:
        """The expected length of an answer to a capsule with this bound (Rule 6)."""
        if self.length_ratio is None:
            return bound + STYLE_TOKENS
        return math.ceil(bound * self.length_ratio)

    def seconds(self, tokens: int) -> float:
        """The estimated time of an answer of ``tokens`` completion tokens: the
        lesser of the line's and the samples' own rates (Rule 7)."""
        line = self.first_token_s + self.seconds_per_token * tokens
        overall = FIRST_TOKEN_S + self.overall_seconds_per_token * tokens
        return min(line, overall)

    def to_json(self) -> dict[str, object]:
        return {
            "state": "cold" if self.cold else "learned",
            "first_token_s": round(self.first_token_s, 3),
            "tokens_per_s": round(self.tokens_per_s, 1),
            "overall_tokens_per_s": round(self.overall_tokens_per_s, 1),
            "samples": self.samples,
            "length_ratio": None if self.length_ratio is None else round(self.length_ratio, 3),
            "window": WINDOW,
            "quantile": QUANTILE,
        }


COLD: Final = Estimate(FIRST_TOKEN_S, _MIN_SLOPE, 0, cold=True)


def _nearest_rank(sorted_values: list[float], q: float) -> float:
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def _median(sorted_values: list[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else (sorted_values[mid - 1] + sorted_values[mid]) / 2


def fit(samples: list[tuple[float, int]], ratios: list[float] | None = None) -> Estimate:
    """Rules 2, 3, 6 and 7 over ``(call seconds, completion tokens)`` samples and
    the answers' ``completion tokens / bound`` ratios (Rule 6)."""
    usable = [(t, n) for t, n in samples if n > 0 and math.isfinite(t) and t >= 0]
    ratio = _nearest_rank(sorted(ratios), QUANTILE) if ratios else None
    if len(usable) < MIN_SAMPLES:
        return Estimate(
            COLD.first_token_s, COLD.seconds_per_token, len(usable), cold=True, length_ratio=ratio
        )
    slopes: list[float] = []
    for i, (ti, ni) in enumerate(usable):
        for tj, nj in usable[i + 1 :]:
            if abs(nj - ni) >= MIN_SPREAD_TOKENS:
                bisect.insort(slopes, (tj - ti) / (nj - ni))
    if len(slopes) >= MIN_PAIRS:
        b = _median(slopes)
    else:
        b = _median(sorted((t - FIRST_TOKEN_S) / n for t, n in usable))
    b = max(b, _MIN_SLOPE)
    a = _nearest_rank(sorted(t - b * n for t, n in usable), QUANTILE)
    overall = _nearest_rank(sorted((t - FIRST_TOKEN_S) / n for t, n in usable), QUANTILE)
    return Estimate(
        max(a, FIRST_TOKEN_S),
        b,
        len(usable),
        cold=False,
        length_ratio=ratio,
        overall_seconds_per_token=max(overall, _MIN_SLOPE),
    )


class SpeedModel:
    """The rolling window of Rule 1 and its estimate, shared by the call threads
    (which add samples) and the admission under the journal lock (which reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (monotonic second, call seconds, completion tokens, tokens / bound)
        self._samples: deque[tuple[float, float, int, float]] = deque(maxlen=WINDOW)
        self._estimate = COLD
        self._last_evidence: float | None = None  # the last sample or speed probe (Rule 4)
        self.probes = 0

    def observe(
        self, now: float, seconds: float, completion_tokens: int | None, bound: int
    ) -> None:
        """One call that returned content: its duration, its reported length and
        its capsule's bound (`kexpr.spool.contract.budget.answer_token_bound`)."""
        if completion_tokens is None or completion_tokens <= 0 or not math.isfinite(seconds):
            return
        if bound <= 0:
            return
        with self._lock:
            self._samples.append((now, seconds, completion_tokens, completion_tokens / bound))
            self._last_evidence = now
            self._refit(now)

    def estimate(self, now: float) -> Estimate:
        with self._lock:
            if self._samples and self._samples[0][0] <= now - MAX_AGE_S:
                self._refit(now)
            return self._estimate

    def _refit(self, now: float) -> None:
        while self._samples and self._samples[0][0] <= now - MAX_AGE_S:
            self._samples.popleft()  # Rule 4: old evidence decays to the cold start
        self._estimate = fit(
            [(t, n) for _, t, n, _ in self._samples], [x for *_, x in self._samples]
        )

    def admit(self, now: float, bound: int, seconds_left: float) -> bool:
        """`fits`, or the speed probe of Rule 4: True for one refused request once
        neither a successful call nor a probe happened for `PROBE_AFTER_S` (and
        only with the client's whole timeout left: a probe is worth its call)."""
        if self.fits(now, bound, seconds_left):
            return True
        with self._lock:
            if self._last_evidence is None or now - self._last_evidence < PROBE_AFTER_S:
                return False
            if seconds_left < CALL_LIMIT_S:
                return False
            self._last_evidence = now
            self.probes += 1
            return True

    def fits(self, now: float, bound: int, seconds_left: float) -> bool:
        """Whether an answer to a capsule whose budget bound is ``bound`` (its
        minimal answer, worst-case key), as long as the provider's answers are
        (Rule 6), can arrive within ``seconds_left`` and the client's timeout at
        the estimated speed. Cold: True (the caller's fastest-rate rule alone)."""
        e = self.estimate(now)
        if e.cold:
            return True
        return e.seconds(e.answer_tokens(bound)) <= min(seconds_left, CALL_LIMIT_S)

"""The provider's real speed, learned from the worker's own calls (admission, design §9).

The answer budget (`kexpr.spool.contract.budget`) admits a capsule whose minimal
answer could arrive at the FASTEST published gpt-4.1-mini rate: a first token after
0.3 s, then 110 tokens/s. On OpenAI's own API the published median is 77 tokens/s,
and the first token comes after 0.3-0.9 s, from one call to the next. There a dual
card with four reasons mostly times out: every such call is billed, is a 3 s wait in
front of the operator's card, and is a failure in the promotion gate. The worker
measures every call anyway; this module keeps the recent calls' numbers, and
`SpeedModel.admit` says whether an answer to a capsule can arrive within the time its
request has left. `kexpr.worker.attempt` asks it under the journal lock, right before
the start row; a request it refuses gets no row and no call (``provider_too_slow``).

A refusal is a canonical answer to a message the operator enabled styling for, so a
refusal needs evidence: the calls comparable to this one must say that it cannot
arrive. Where they cannot tell, the request is called.

Rules of this module:

Rule 1: the evidence is the last `WINDOW` calls of two kinds. An *arrival*: a call
        that returned content with a usable ``usage.completion_tokens``. A
        *timeout*: a call that was sent and ended ``timeout`` (it did not arrive).
        Any other failure says nothing about the speed and is not kept. Numbers
        only: a call is (monotonic second, call seconds, completion tokens or 0 for
        a timeout, its capsule's budget bound); no surface, key, ID or content.
        Calls older than `MAX_AGE_S` are dropped. No randomness, no clock of its
        own (the caller passes the monotonic ``now``).
Rule 2: a call's time is its own first token (plus the call's fixed cost), then its
        tokens at the provider's rate. The first token is each call's own (the
        published spread), so no one first token is assumed for all; instead each
        arrival bounds the rate, in seconds per token, between ``(t -
        SLOWEST_FIRST_TOKEN_S - CALL_OVERHEAD_S) / n`` and ``(t - FIRST_TOKEN_S) /
        n``, and a timeout bounds it from below by ``(t - SLOWEST_FIRST_TOKEN_S -
        CALL_OVERHEAD_S) / bound``; each bound widened by `RATE_TOLERANCE` (one
        call's rate varies around the provider's), and never faster than ``1 /
        FASTEST_TOKENS_PER_S``.
Rule 3: a *regime* is a run of calls that agree on one rate (their ranges of Rule 2
        have a common point), on one layout (their arrivals' ``completion tokens
        / bound`` lie within `LAYOUT_SPAN`: compact and pretty-printed answers
        differ by ~40 %) and, once its first token has been steady
        (`STEADY_CALLS` arrivals within `STEADY_BAND_S` at its rate), on that
        first token within `FIRST_TOKEN_JUMP_S` (a constant first token can hide
        a change of rate: 110 tokens/s after 0.9 s, then 55 after 0.5 s). The
        calls are read in order. A call the current regime cannot explain is
        *pending*, with the calls after it that agree with it. Once
        `CHANGE_CALLS` pending calls are unexplained by the regime, they are the
        new regime: the provider's speed or layout changed and the older calls
        are no longer evidence. A call that contradicts the pending ones while the
        regime explains it shows they were outliers (a slow first connection, a
        hiccup): those the regime cannot explain are dropped, the others rejoin
        it. While a change is pending, the pending calls decide once they are
        `CHANGE_CALLS` (the newer evidence); a lone pending call can only refuse.
        Calls without an arrival say nothing (Rule 4): a provider that answers
        nothing is the cool-down's to judge (`kexpr.worker.cooldown`), and a lone
        timeout is a hiccup until another call agrees with it.
Rule 4: a refusal needs evidence: the regime's calls vote. The *comparable* calls
        are the newest `COMPARABLE_VOTES` of those whose bound is within
        `COMPARABLE_TOKENS` of the request's: its own shape and its neighbours in
        length; the newest, so that a change the regime could not see still shows
        in the shape's own calls within a few of them. An arrival votes with its
        time for this answer: a longer answer's (a larger bound) less the tokens it
        had beyond this answer at the fastest rate (the least time they took), a
        shorter one's plus the extra tokens at the regime's slowest rate (the
        least upper bound of Rule 2 over the regime: never an underestimate within
        the regime). It votes *fits* when that time plus `ROOM_S` is within the
        time the request has. A timeout no longer than the request (its bound at
        most the request's) votes *does not fit* if it ran about as long as the
        request may; a longer one says nothing. Without a comparable call, every
        arrival of the regime and every timeout no longer than the request vote
        (an extrapolation). A regime without an arrival does not vote. The request
        is refused only when more vote *does not fit* than *fits*: an answer no
        longer than one that arrived with room is refused only when as many
        comparable calls did not arrive; a short answer is judged by the short
        calls' own times, whatever the long ones' first tokens were; a long one by
        how many of the regime's calls, each with its own first token, would have
        delivered it.
Rule 5: the latest evidence first. A request the vote refuses is still called when
        the newest `LATEST_CALLS` calls, read as a regime of their own (Rule 3),
        agree and at least `LATEST_FITS` of them vote *fits* (Rule 4, at their own
        slowest rate), and none that is no longer than the request timed out:
        then there is no evidence now that it cannot arrive. This is how a faster
        provider re-admits the refused shapes at once: one call at 110 tokens/s
        after 0.9 s looks like one at 77 after 0.3 s, so the regime may take
        several calls to see the change (Rule 3), the newest calls do not.
Rule 6: cold start: with fewer than `MIN_SAMPLES` arrivals in the window the
        request is admitted and the caller's fastest-rate rule
        (`min_answer_seconds`) is the whole admission. At low traffic (a call
        every few minutes) the calls expire (Rule 1) before there are enough: the
        worker is then exactly the cold start, never more refusing than it.
Rule 7: the answer's length is learned too. The budget's bound counts the minimal
        answer with the key at its worst case, and a brief answer adds style words.
        An answer's expected tokens are the longer of ``bound x`` the `QUANTILE` of
        the regime's ``completion tokens / bound`` and ``bound +`` the `QUANTILE`
        of its ``completion tokens - bound``: a pretty-printed answer is longer by
        a share of its length, a compact one by a count (the key's saving is the
        same for every shape, so a ratio learned on short cards underestimates a
        long one). Before any arrival: ``bound + STYLE_TOKENS``.
Rule 8: no shape is shut out for good by its own refusals. A refusal changes
        nothing in the evidence; every call of any shape moves the window, so a
        refused shape is re-admitted as soon as the calls say it fits (Rules 3-5).
        If nothing at all is being called (every shape refused), `admit` lets ONE
        refused request through as a speed probe once no call has arrived and no
        probe was let through for `PROBE_AFTER_S`.
Rule 9: how fast it follows a change (stated, and measured by the bench, which
        draws each call's first token from the published spread): a faster
        provider re-admits a refused shape once its newest calls show it (Rule 5:
        after 77 -> 110 tokens/s a median of 2 successful calls, within 4 in 9
        trials of 10); a slower one is seen by the first call the regime
        cannot explain (Rule 3: a lone pending call can refuse) or by the shape's
        own newest calls timing out (Rule 4) (docs/performance.md, "Admission at
        interleaved first tokens").
Rule 10: what the status file shows (`SpeedModel.to_json`, numbers only): the
        regime's slowest rate of Rule 4 and its fastest (the rates its calls
        allow), the `QUANTILE` of its calls' first tokens at the slowest (a
        summary line; the decision is the vote), the length ratio, the calls and
        timeouts in the window, the calls of the regime and of a pending change,
        and the bounds refused now with the client's whole timeout left
        (``refused_bounds``: inclusive ranges within the answer budget), which
        `kexpr.ops.promotion` reads to name the shapes not styled.
"""

from __future__ import annotations

import enum
import math
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kexpr.spool.contract.budget import (
    ANSWER_BUDGET_TOKENS,
    FASTEST_TOKENS_PER_S,
    FIRST_TOKEN_S,
    SDK_TIMEOUT_S,
)

# Rule 1: the last 24 calls. Long enough for several calls of each shape in a
# normal mix (daily, weekly, physique and dual cards), short enough that old
# evidence leaves within minutes at a few calls a minute.
WINDOW: Final = 24
# Rule 6: below 6 arrivals the worker is the cold start (today's rule).
MIN_SAMPLES: Final = 6
# Rule 1: calls expire after ten minutes (the provider's speed changes over
# minutes; a call that old is no longer evidence, and the cold start returns).
MAX_AGE_S: Final = 600.0
# Rule 8: at most one speed probe a minute, and only while nothing arrives: a
# billed call that may time out, against a model that could otherwise never learn
# that the provider is fast again.
PROBE_AFTER_S: Final = 60.0
# Rule 7, before any answer was measured: the style words a brief answer adds
# above the minimal answer the budget counts: the cold trial's recorded answers
# with today's instruction were 3 tokens above it at the median and 5 at most
# (docs/budget.md §5); the most is used.
STYLE_TOKENS: Final = 5
# Rule 7: nine answers in ten at most this long against their bound (and the
# first token of the status line, Rule 10).
QUANTILE: Final = 0.9
# Rule 2: the published first-token spread for a prompt of this size is 0.3-0.9 s
# (docs/budget.md); FIRST_TOKEN_S is its fast end. The call's fixed cost beyond
# the model's own time (the connection, the bodies, the worker's judging) was
# 0.02-0.09 s on this project's bench (docs/performance.md); 0.1 s bounds it.
SLOWEST_FIRST_TOKEN_S: Final = 0.9
CALL_OVERHEAD_S: Final = 0.1
# Rule 2: one call's rate within 5 % of the provider's is the same regime, so that
# call-to-call noise does not split the evidence (77 -> 110 tokens/s is 43 %; the
# bench checks calls whose rates vary by +-8 %).
RATE_TOLERANCE: Final = 0.05
# Rule 3: compact and pretty-printed answers differ by ~0.35 of their bound; the
# shapes' own compact ratios span ~0.1 (a short shape's key saves more of it).
LAYOUT_SPAN: Final = 0.25
# Rule 3: two calls the regime cannot explain are a change; one is only pending
# (an outlier cannot move the model).
CHANGE_CALLS: Final = 2
# Rule 4: within 24 tokens of the request's bound: its own shape and the shapes
# next to it in length (daily 96, physique and the 2-reason dual card 106-107;
# weekly 162-171 and the 3-reason dual card 151-153), not the next dual card
# (~45 tokens per review line).
COMPARABLE_TOKENS: Final = 24
# Rule 4: what a repeat of the same call may take longer than it did: the host's
# part of one call (the worker's own measure around it) varies by a few tens of
# milliseconds on this project's bench; the answer's own length varies with its
# key, which Rule 7's quantile already covers. At 0.07 s the bench's simulation
# refused 3.8 % of the arrivable calls at 110 tokens/s, at 0.05 s 2.1 %, for 0.5 %
# more calls that could not arrive at 77.
ROOM_S: Final = 0.05
# Rule 3: a regime's first token is steady once 6 of its arrivals are within
# 0.2 s of each other at its rate (a provider whose first token does not vary
# much, as the bench's fake; with the published spread of 0.6 s this is rare);
# then a call 0.15 s beyond that range is one the regime cannot explain (at 77
# tokens/s the daily card's 82 tokens shift by 0.33 s at 110, by 0.43 s at 55).
STEADY_CALLS: Final = 6
STEADY_BAND_S: Final = 0.2
FIRST_TOKEN_JUMP_S: Final = 0.15
# Rule 4: the newest 4 comparable calls vote: enough that one unlucky first token
# does not decide, few enough that a change the regime could not see shows in
# the shape's own calls within a few of them.
COMPARABLE_VOTES: Final = 4
# Rule 5: the newest three calls, two of which say it fits: one unlucky first
# token among them does not hold back what the others show (the bench's
# simulation: re-admission after 77 -> 110 tokens/s within 4 successful calls in
# 9 trials of 10, at most 8, where every one of the two newest had to: at most 12).
LATEST_CALLS: Final = 3
LATEST_FITS: Final = 2
# A call's answer can arrive only within the client's timeout (the plan's
# ``timeout=3.0``), whatever the request's deadline still leaves.
CALL_LIMIT_S: Final = SDK_TIMEOUT_S

_MIN_SLOPE: Final = 1.0 / FASTEST_TOKENS_PER_S
_SLOWEST_START_S: Final = SLOWEST_FIRST_TOKEN_S + CALL_OVERHEAD_S


@dataclass(frozen=True, slots=True)
class Call:
    """One call's numbers (Rule 1). ``tokens`` 0: it timed out."""

    at: float
    seconds: float
    tokens: int
    bound: int

    @property
    def arrived(self) -> bool:
        return self.tokens > 0

    @property
    def ratio(self) -> float:
        return self.tokens / self.bound

    def projected(self, bound: int, tokens: int, seconds_per_token: float) -> float:
        """Rule 4: this arrival's time for an answer of ``tokens`` to a capsule
        with ``bound``: longer (a larger bound) by the extra tokens at
        ``seconds_per_token``; shorter by the tokens it had beyond it at the
        fastest rate (the least time they can have taken)."""
        if bound > self.bound:
            return self.seconds + max(0, tokens - self.tokens) * seconds_per_token
        return self.seconds - max(0, self.tokens - tokens) * _MIN_SLOPE

    def rates(self) -> tuple[float, float]:
        """Rule 2: the seconds per token this call is consistent with."""
        if not self.arrived:
            lo = (self.seconds - _SLOWEST_START_S) / self.bound / (1 + RATE_TOLERANCE)
            return max(lo, _MIN_SLOPE), math.inf
        lo = (self.seconds - _SLOWEST_START_S) / self.tokens / (1 + RATE_TOLERANCE)
        hi = (self.seconds - FIRST_TOKEN_S) / self.tokens * (1 + RATE_TOLERANCE)
        return max(lo, _MIN_SLOPE), max(hi, _MIN_SLOPE)


class Evidence(enum.StrEnum):
    """What decided a request (the status file's word for a refusal's cause)."""

    COLD = "cold"  # Rule 6: too few arrivals, the cold start
    COMPARABLE = "comparable"  # Rule 4: the calls of its own length voted
    EXTRAPOLATED = "extrapolated"  # Rule 4: no comparable call; the regime's voted
    NONE = "none"  # nothing in the regime says anything about it: admitted
    CHANGE_PENDING = "change_pending"  # Rule 3: the pending calls said no
    LATEST = "latest"  # Rule 5: the newest calls say it fits
    PROBE = "probe"  # Rule 8: refused, let through as the speed probe


@dataclass(frozen=True, slots=True)
class Verdict:
    """One request's admission at the estimated speed: the vote of Rule 4 and
    the time it had (numbers and an enum word only)."""

    admitted: bool
    evidence: Evidence
    fits: int = 0  # calls that voted it fits
    misses: int = 0  # calls that voted it does not
    estimate_s: float | None = None  # the median of the voters' times (None: no arrival)
    limit_s: float = CALL_LIMIT_S

    def __bool__(self) -> bool:
        raise TypeError("a Verdict is not a truth value: read .admitted")

    def to_json(self) -> dict[str, object]:
        return {
            "evidence": self.evidence.value,
            "fits": self.fits,
            "misses": self.misses,
            "estimate_s": None if self.estimate_s is None else round(self.estimate_s, 3),
            "limit_s": round(self.limit_s, 3),
        }


@dataclass(frozen=True, slots=True)
class Regime:
    """Rule 3: calls that agree on one rate and one layout."""

    calls: tuple[Call, ...] = ()
    lo: float = _MIN_SLOPE  # the rates every call of it is consistent with
    hi: float = math.inf
    ratio_lo: float = math.inf  # its arrivals' completion tokens / bound
    ratio_hi: float = -math.inf
    # Rule 7: the QUANTILE of its arrivals' tokens / bound and tokens - bound
    # (None: no arrival).
    ratio_q: float | None = None
    extra_q: float = 0.0
    # Rule 3: (rate, lowest, highest first token at that rate) while its first
    # token has been steady; None otherwise.
    steady: tuple[float, float, float] | None = None

    def explains(self, c: Call) -> bool:
        lo, hi = c.rates()
        if max(lo, self.lo) > min(hi, self.hi) * (1 + 1e-9):
            return False
        if c.arrived and max(self.ratio_hi, c.ratio) - min(self.ratio_lo, c.ratio) > LAYOUT_SPAN:
            return False
        if c.arrived and self.steady is not None:
            rate, first_lo, first_hi = self.steady
            first = c.seconds - rate * c.tokens
            if not first_lo - FIRST_TOKEN_JUMP_S <= first <= first_hi + FIRST_TOKEN_JUMP_S:
                return False
        return True

    def joined(self, c: Call) -> Regime:
        lo, hi = c.rates()
        calls = (*self.calls, c)
        if not c.arrived:
            return Regime(
                calls,
                max(self.lo, lo),
                min(self.hi, hi),
                self.ratio_lo,
                self.ratio_hi,
                self.ratio_q,
                self.extra_q,
            )
        arrivals = [x for x in calls if x.arrived]
        j_lo, j_hi = max(self.lo, lo), min(self.hi, hi)
        return Regime(
            calls,
            j_lo,
            j_hi,
            min(self.ratio_lo, c.ratio),
            max(self.ratio_hi, c.ratio),
            _nearest_rank(sorted(x.ratio for x in arrivals), QUANTILE),
            _nearest_rank(sorted(float(x.tokens - x.bound) for x in arrivals), QUANTILE),
            _steady(arrivals, j_lo, j_hi),
        )

    @property
    def arrivals(self) -> list[Call]:
        return [c for c in self.calls if c.arrived]

    @property
    def length_ratio(self) -> float | None:
        """Rule 7: the QUANTILE of the arrivals' length against their bound."""
        return self.ratio_q

    def answer_tokens(self, bound: int) -> int:
        """Rule 7: the longer of the two readings of the arrivals' lengths."""
        if self.ratio_q is None:
            return bound + STYLE_TOKENS
        return max(math.ceil(bound * self.ratio_q), bound + math.ceil(self.extra_q))

    def vote(self, bound: int, limit_s: float) -> Verdict:
        """Rule 4 for a request whose budget bound is ``bound`` and which has
        ``limit_s`` seconds for its answer."""
        if math.isinf(self.hi):  # no arrival: an outage is the cool-down's to judge
            return Verdict(True, Evidence.NONE, limit_s=limit_s)
        near = [c for c in self.calls if abs(c.bound - bound) <= COMPARABLE_TOKENS]
        if len(near) > COMPARABLE_VOTES:
            near = sorted(near, key=lambda c: c.at)[-COMPARABLE_VOTES:]
        evidence = Evidence.COMPARABLE if near else Evidence.EXTRAPOLATED
        voters = near or [c for c in self.calls if c.tokens or c.bound <= bound]
        tokens = self.answer_tokens(bound)
        room = limit_s - ROOM_S
        hi = self.hi
        fits = misses = 0
        times: list[float] = []
        for c in voters:
            if c.tokens:  # an arrival: Call.projected, inline (refused_bounds runs it often)
                if bound > c.bound:
                    t = c.seconds + (tokens - c.tokens) * hi if tokens > c.tokens else c.seconds
                elif c.tokens > tokens:
                    t = c.seconds - (c.tokens - tokens) * _MIN_SLOPE
                else:
                    t = c.seconds
                times.append(t)
                if t <= room:
                    fits += 1
                else:
                    misses += 1
            elif c.bound <= bound and c.seconds >= room:
                misses += 1  # it did not arrive within (about) this much time
        if not fits and not misses:
            return Verdict(True, Evidence.NONE, limit_s=limit_s)
        times.sort()
        return Verdict(
            fits >= misses,
            evidence,
            fits,
            misses,
            _median(times) if times else None,
            limit_s,
        )


def _steady(arrivals: list[Call], lo: float, hi: float) -> tuple[float, float, float] | None:
    """Rule 3: the rate and the first-token range of ``arrivals`` if their first
    token has been steady (at least `STEADY_CALLS`, within `STEADY_BAND_S` at the
    rate their shortest and longest calls give), else None."""
    if len(arrivals) < STEADY_CALLS:
        return None
    short = min(arrivals, key=lambda x: x.tokens)
    long = max(arrivals, key=lambda x: x.tokens)
    if long.tokens - short.tokens >= 32:
        rate = (long.seconds - short.seconds) / (long.tokens - short.tokens)
    else:
        rate = hi
    rate = min(max(rate, lo), hi)
    firsts = [x.seconds - rate * x.tokens for x in arrivals]
    first_lo, first_hi = min(firsts), max(firsts)
    return (rate, first_lo, first_hi) if first_hi - first_lo <= STEADY_BAND_S else None


def regimes(calls: Iterable[Call]) -> tuple[Regime, Regime | None]:
    """Rule 3 over ``calls`` in order: (the current regime, the pending change
    or None). Deterministic, one pass."""
    current, pending, unexplained = Regime(), None, 0
    for c in calls:
        if pending is None:
            if current.explains(c):
                current = current.joined(c)
            else:
                pending, unexplained = Regime().joined(c), 1
            continue
        if pending.explains(c):
            pending = pending.joined(c)
            unexplained += not current.explains(c)
            if unexplained >= CHANGE_CALLS:
                current, pending = pending, None
        elif current.explains(c):
            # The pending calls were outliers: those the regime explains rejoin it.
            for x in pending.calls:
                if current.explains(x):
                    current = current.joined(x)
            current, pending = current.joined(c), None
        else:
            for x in pending.calls:
                if current.explains(x):
                    current = current.joined(x)
            pending, unexplained = Regime().joined(c), 1
    return current, pending


@dataclass(frozen=True, slots=True)
class Estimate:
    """The evidence as the model reads it now (Rules 3-7), and its summary line
    for ``worker.status.json`` (Rule 10)."""

    current: Regime
    pending: Regime | None
    samples: int  # arrivals in the window
    timeouts: int  # timeouts in the window
    latest: tuple[Call, ...] = ()  # the newest calls (Rule 5)
    # the newest calls as a regime of their own (None: fewer, or they disagree)
    latest_regime: Regime | None = None

    @property
    def cold(self) -> bool:
        return self.samples < MIN_SAMPLES

    @property
    def seconds_per_token(self) -> float:
        """The regime's slowest rate consistent with all its calls (Rule 4)."""
        hi = self.current.hi
        return _MIN_SLOPE if self.cold or math.isinf(hi) else hi

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.seconds_per_token

    @property
    def tokens_per_s_fastest(self) -> float:
        """The regime's fastest rate consistent with all its calls (Rule 2)."""
        return FASTEST_TOKENS_PER_S if self.cold else 1.0 / self.current.lo

    @property
    def first_token_s(self) -> float:
        """The QUANTILE of the regime's first tokens at `seconds_per_token`."""
        arrivals = self.current.arrivals
        if self.cold or not arrivals:
            return FIRST_TOKEN_S
        b = self.seconds_per_token
        residuals = sorted(c.seconds - b * c.tokens for c in arrivals)
        return max(FIRST_TOKEN_S, _nearest_rank(residuals, QUANTILE))

    @property
    def overall_seconds_per_token(self) -> float:
        """Every second above the fastest first token charged to the tokens (the
        QUANTILE of the regime's own rates; shown beside the line)."""
        arrivals = self.current.arrivals
        if self.cold or not arrivals:
            return _MIN_SLOPE
        own = sorted((c.seconds - FIRST_TOKEN_S) / c.tokens for c in arrivals)
        return max(_nearest_rank(own, QUANTILE), _MIN_SLOPE)

    @property
    def overall_tokens_per_s(self) -> float:
        return 1.0 / self.overall_seconds_per_token

    @property
    def length_ratio(self) -> float | None:
        return self.current.length_ratio

    def answer_tokens(self, bound: int) -> int:
        """The expected length of an answer to a capsule with this bound (Rule 7)."""
        return self.current.answer_tokens(bound)

    def verdict(self, bound: int, limit_s: float) -> Verdict:
        """Rules 3-6 for one request."""
        if self.cold:
            return Verdict(True, Evidence.COLD, limit_s=limit_s)
        v = self.current.vote(bound, limit_s)
        if self.pending is not None:
            p = self.pending.vote(bound, limit_s)
            if len(self.pending.calls) >= CHANGE_CALLS and p.evidence is not Evidence.NONE:
                v = p  # Rule 3: the newer calls decide while the change is pending
            elif v.admitted and not p.admitted:  # a lone slow arrival (Rule 3)
                return Verdict(
                    False, Evidence.CHANGE_PENDING, p.fits, p.misses, p.estimate_s, limit_s
                )
        if not v.admitted and self.latest_fit(bound, limit_s):
            return Verdict(True, Evidence.LATEST, v.fits, v.misses, v.estimate_s, limit_s)
        return v

    def latest_fit(self, bound: int, limit_s: float) -> bool:
        """Rule 5: the newest `LATEST_CALLS` calls, read as a regime of their own,
        say the answer fits (`LATEST_FITS` of them) and none no longer timed out."""
        latest = self.latest_regime
        if latest is None:
            return False
        tokens = max(latest.answer_tokens(bound), self.current.answer_tokens(bound))
        fits = 0
        for c in self.latest:
            if not c.arrived:
                if c.bound <= bound:
                    return False  # a call no longer than this one did not arrive
                continue
            if c.projected(bound, tokens, latest.hi) + ROOM_S <= limit_s:
                fits += 1
        return fits >= LATEST_FITS

    def refused_bounds(self) -> list[tuple[int, int]]:
        """Rule 10: the bounds (1 .. the answer budget) refused now with the
        client's whole timeout left, as inclusive ranges."""
        out: list[tuple[int, int]] = []
        if self.cold:
            return out
        for bound in range(1, ANSWER_BUDGET_TOKENS + 1):
            if self.verdict(bound, CALL_LIMIT_S).admitted:
                continue
            if out and out[-1][1] == bound - 1:
                out[-1] = (out[-1][0], bound)
            else:
                out.append((bound, bound))
        return out

    def to_json(self, refused_bounds: list[tuple[int, int]]) -> dict[str, object]:
        ratio = self.length_ratio
        return {
            "state": "cold" if self.cold else "learned",
            "first_token_s": round(self.first_token_s, 3),
            "tokens_per_s": round(self.tokens_per_s, 1),
            "tokens_per_s_fastest": round(self.tokens_per_s_fastest, 1),
            "overall_tokens_per_s": round(self.overall_tokens_per_s, 1),
            "samples": self.samples,
            "timeouts": self.timeouts,
            "regime_calls": len(self.current.calls),
            "change_pending": 0 if self.pending is None else len(self.pending.calls),
            "length_ratio": None if ratio is None else round(ratio, 3),
            "refused_bounds": [list(r) for r in refused_bounds],
            "window": WINDOW,
            "quantile": QUANTILE,
        }


COLD: Final = Estimate(Regime(), None, 0, 0)


def estimate_of(calls: Iterable[Call]) -> Estimate:
    """Rules 3-7 over ``calls`` (oldest first): pure."""
    window = list(calls)
    current, pending = regimes(window)
    arrived = sum(1 for c in window if c.arrived)
    latest = tuple(window[-LATEST_CALLS:])
    latest_regime: Regime | None = Regime()
    for c in latest:
        if latest_regime is None or not latest_regime.explains(c):
            latest_regime = None
            break
        latest_regime = latest_regime.joined(c)
    if len(latest) < LATEST_CALLS:
        latest_regime = None
    return Estimate(current, pending, arrived, len(window) - arrived, latest, latest_regime)


def _nearest_rank(sorted_values: list[float], q: float) -> float:
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def _median(sorted_values: list[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else (sorted_values[mid - 1] + sorted_values[mid]) / 2


class SpeedModel:
    """The rolling window of Rule 1 and its estimate, shared by the call threads
    (which add calls) and the admission under the journal lock (which reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: deque[Call] = deque(maxlen=WINDOW)
        self._estimate = COLD
        self._last_evidence: float | None = None  # the last arrival or speed probe (Rule 8)
        # Rule 10: the refused bounds of the estimate they were computed for.
        self._refused: tuple[Estimate, list[tuple[int, int]]] = (COLD, [])
        self.probes = 0

    def observe(
        self, now: float, seconds: float, completion_tokens: int | None, bound: int
    ) -> None:
        """One call that returned content: its duration, its reported length and
        its capsule's bound (`kexpr.spool.contract.budget.answer_token_bound`)."""
        if completion_tokens is None or completion_tokens <= 0 or not math.isfinite(seconds):
            return
        if bound <= 0 or seconds < 0:
            return
        with self._lock:
            self._calls.append(Call(now, seconds, completion_tokens, bound))
            self._last_evidence = now
            self._refit(now)

    def timed_out(self, now: float, seconds: float, bound: int) -> None:
        """One call that was sent and ended ``timeout`` after ``seconds`` (Rule 1)."""
        if bound <= 0 or not math.isfinite(seconds) or seconds < 0:
            return
        with self._lock:
            self._calls.append(Call(now, seconds, 0, bound))
            self._refit(now)

    def estimate(self, now: float) -> Estimate:
        with self._lock:
            if self._calls and self._calls[0].at <= now - MAX_AGE_S:
                self._refit(now)
            return self._estimate

    def _refit(self, now: float) -> None:
        while self._calls and self._calls[0].at <= now - MAX_AGE_S:
            self._calls.popleft()  # Rule 1: old evidence decays to the cold start
        self._estimate = estimate_of(self._calls)

    def admit(self, now: float, bound: int, seconds_left: float) -> Verdict:
        """`verdict`, or the speed probe of Rule 8: admitted for one refused request
        once neither an arrival nor a probe happened for `PROBE_AFTER_S` (and
        only with the client's whole timeout left: a probe is worth its call)."""
        v = self.verdict(now, bound, seconds_left)
        if v.admitted:
            return v
        with self._lock:
            if self._last_evidence is None or now - self._last_evidence < PROBE_AFTER_S:
                return v
            if seconds_left < CALL_LIMIT_S:
                return v
            self._last_evidence = now
            self.probes += 1
        return Verdict(True, Evidence.PROBE, v.fits, v.misses, v.estimate_s, v.limit_s)

    def verdict(self, now: float, bound: int, seconds_left: float) -> Verdict:
        """Whether an answer to a capsule whose budget bound is ``bound`` (its
        minimal answer, worst-case key) can arrive within ``seconds_left`` and the
        client's timeout, by the evidence of Rules 3-7. Cold: admitted (the
        caller's fastest-rate rule alone)."""
        return self.estimate(now).verdict(bound, min(seconds_left, CALL_LIMIT_S))

    def fits(self, now: float, bound: int, seconds_left: float) -> bool:
        return self.verdict(now, bound, seconds_left).admitted

    def to_json(self, now: float) -> dict[str, object]:
        """Rule 10, for ``worker.status.json``. The refused bounds (297 verdicts,
        a few milliseconds) are computed once per estimate, not per heartbeat."""
        e = self.estimate(now)
        with self._lock:
            cached, refused = self._refused
            probes = self.probes
        if cached is not e:  # computed outside the lock: an estimate never changes
            refused = e.refused_bounds()
            with self._lock:
                self._refused = (e, refused)
        return {**e.to_json(refused), "speed_probes": probes}

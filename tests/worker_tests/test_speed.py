"""The speed model (`kexpr.worker.speed`) -- the fit, the cold start and
the decay, on an injected monotonic clock. Numbers only, no timing of this machine."""

from __future__ import annotations

import itertools
import random

import pytest

from kexpr.spool.contract.budget import FASTEST_TOKENS_PER_S, FIRST_TOKEN_S
from kexpr.worker.speed import (
    COLD,
    MAX_AGE_S,
    MIN_SAMPLES,
    QUANTILE,
    STYLE_TOKENS,
    WINDOW,
    SpeedModel,
    fit,
)

# Completion tokens of the four surfaces' brief answers (daily, physique, weekly,
# dual cards with 1 and 2 reasons; docs/budget.md §2).
MIX = (104, 116, 175, 173, 223)


def line(first: float, rate: float, tokens: int) -> float:
    return first + tokens / rate


def seen(m: SpeedModel, now: float, seconds: float, tokens: int | None) -> None:
    """One call whose answer was exactly as long as its capsule's bound."""
    m.observe(now, seconds, tokens, tokens or 1)


def test_the_cold_start_is_the_fastest_published_rate() -> None:
    assert (COLD.first_token_s, COLD.tokens_per_s) == (FIRST_TOKEN_S, FASTEST_TOKENS_PER_S)
    assert COLD.cold
    few = [(line(0.7, 30.0, n), n) for n in MIX[: MIN_SAMPLES - 1]]
    assert fit(few).cold and fit(few).seconds(100) == COLD.seconds(100)


def test_cold_fits_everything_the_fastest_rate_rule_admits() -> None:
    """Cold, `fits` defers to today's rule (the caller's min_answer_seconds)."""
    m = SpeedModel()
    for n in MIX[: MIN_SAMPLES - 1]:
        seen(m, 1.0, line(2.0, 20.0, n), n)  # very slow, but too few samples
    assert m.fits(1.0, 290, 3.0)


@pytest.mark.parametrize(("first", "rate"), [(0.3, 110.0), (0.7, 77.0), (0.5, 55.0)])
def test_an_exact_line_is_recovered(first: float, rate: float) -> None:
    samples = [(line(first, rate, n), n) for n in MIX * 3]
    e = fit(samples)
    assert not e.cold and e.samples == len(samples)
    assert e.first_token_s == pytest.approx(first)
    assert e.tokens_per_s == pytest.approx(rate)


def test_the_fit_is_deterministic_and_order_free() -> None:
    rng = random.Random(28)
    samples = [(line(0.7, 77.0, n) + rng.uniform(0.0, 0.2), n) for n in MIX * 4]
    e = fit(samples)
    for _ in range(5):
        rng.shuffle(samples)
        assert fit(samples) == e


def test_one_outlier_does_not_move_the_rate() -> None:
    samples = [(line(0.7, 77.0, n), n) for n in MIX * 4]
    samples[3] = (0.2, 175)  # a sample no provider can produce
    samples[7] = (9.0, 104)  # and one far beyond
    e = fit(samples)
    assert e.tokens_per_s == pytest.approx(77.0, rel=0.02)


def test_the_first_token_is_a_high_quantile_of_the_residuals() -> None:
    """Conservative: nine calls in ten were at least as fast as the estimate."""
    jitter = [0.0, 0.05, 0.1, 0.15, 0.2]
    samples = [(line(0.7, 77.0, n) + j, n) for n, j in itertools.product(MIX, jitter)]
    e = fit(samples)
    within = sum(t <= e.seconds(n) + 1e-9 for t, n in samples)
    assert within >= QUANTILE * len(samples)
    assert e.first_token_s >= 0.7 + 0.15


def test_one_shape_alone_charges_the_overhead_to_the_tokens() -> None:
    """Daily cards alone (all ~104 tokens) cannot separate a from b: the estimate
    then overestimates a longer answer's time, never underestimates it."""
    samples = [(line(0.7, 77.0, n), n) for n in (102, 104, 106, 104, 103, 105)]
    e = fit(samples)
    assert not e.cold
    for n in (104, 175, 223, 290):
        assert e.seconds(n) >= line(0.7, 77.0, n) - 1e-9
    # Still admits the daily card itself, well within 3 s.
    assert e.seconds(128 + STYLE_TOKENS) < 3.0


def test_never_more_optimistic_than_the_cold_start() -> None:
    samples = [(line(0.05, 500.0, n), n) for n in MIX * 2]
    e = fit(samples)
    assert e.first_token_s == FIRST_TOKEN_S
    assert e.tokens_per_s == FASTEST_TOKENS_PER_S


def test_at_77_tokens_per_s_after_0_7_s_the_two_reason_dual_card_does_not_fit() -> None:
    """An example: the 2-reason dual card's bound (247) does not fit the
    3 s at the published median; the daily and physique cards (129, 138) do."""
    m = SpeedModel()
    for i, n in enumerate(MIX * 3):
        seen(m, float(i), line(0.7, 77.0, n), n)
    assert m.fits(20.0, 129, 4.0) and m.fits(20.0, 138, 4.0)
    assert not m.fits(20.0, 247, 4.0)
    # The time left counts too: a daily card with 2 s left does not fit.
    assert not m.fits(20.0, 129, 2.0)


def test_samples_decay_to_the_cold_start() -> None:
    """Rule 4: no estimate outlives its evidence, so a refused shape is tried again."""
    m = SpeedModel()
    for i, n in enumerate(MIX * 2):
        seen(m, float(i), line(0.7, 40.0, n), n)
    assert not m.fits(10.0, 247, 4.0)
    assert not m.estimate(10.0).cold
    assert m.estimate(MAX_AGE_S + 9.0).cold  # every sample is older than MAX_AGE_S
    assert m.fits(MAX_AGE_S + 9.0, 247, 4.0)


def test_a_failed_or_unmeasured_call_is_no_sample() -> None:
    m = SpeedModel()
    for _ in range(WINDOW):
        seen(m, 1.0, 2.0, None)
        seen(m, 1.0, 2.0, 0)
        seen(m, 1.0, float("nan"), 100)
    assert m.estimate(1.0).cold and m.estimate(1.0).samples == 0


def _follow(m: SpeedModel, first: float, rate: float, shapes: tuple[int, ...], t0: float) -> int:
    """Calls of ``shapes`` at the new speed until the 2-reason dual card's
    verdict (bound 247) matches the truth at that speed; how many it took."""
    truth = line(first, rate, 247) <= 3.0
    for k, n in enumerate(itertools.cycle(shapes)):
        if m.fits(t0 + k, 247, 4.0) is truth:
            return k
        seen(m, t0 + k, line(first, rate, n), n)
        assert k < 10 * WINDOW
    raise AssertionError("unreachable")


def test_a_speed_change_is_followed_within_the_window() -> None:
    """Rule 5: 110 -> 55 -> 110 tokens/s; at 55 only the cheap shapes answer."""
    m = SpeedModel()
    for i, n in enumerate(MIX * 5):
        seen(m, float(i), line(0.3, 110.0, n), n)
    assert m.fits(30.0, 247, 4.0)
    slower = _follow(m, 0.3, 55.0, (104, 116), 100.0)
    assert slower <= 3  # a slowdown: as soon as a tenth of the window is slow
    faster = _follow(m, 0.3, 110.0, (104, 116), 200.0)
    assert faster <= WINDOW  # a speed-up: within the window


def test_the_answers_length_against_the_bound_is_learned() -> None:
    """Rule 6: compact answers measured at 0.8 of their bound (a real key is ~27
    tokens shorter than the worst case) let a shape in that the cold margin (+5)
    would refuse; pretty-printed ones at 1.25 of it keep the long shapes out."""
    assert fit([]).length_ratio is None and fit([]).answer_tokens(100) == 100 + STYLE_TOKENS
    short, long_ = SpeedModel(), SpeedModel()
    for i, n in enumerate(MIX * 3):
        short.observe(float(i), line(0.5, 77.0, n), n, round(n / 0.8))
        long_.observe(float(i), line(0.5, 77.0, n), n, round(n / 1.25))
    assert short.estimate(20.0).length_ratio == pytest.approx(0.8, abs=0.01)
    assert long_.estimate(20.0).length_ratio == pytest.approx(1.25, abs=0.01)
    # The weekly report's bound, 203: 0.5 s + 208 / 77 = 3.2 s with the cold margin.
    assert short.fits(20.0, 203, 4.0) and not long_.fits(20.0, 203, 4.0)
    # A daily card (bound 128) fits either way.
    assert short.fits(20.0, 128, 4.0) and long_.fits(20.0, 128, 4.0)


def test_a_change_of_layout_and_speed_does_not_shut_everything_out() -> None:
    """Rule 7, found by the bench: pretty answers at 77 tokens/s then compact ones
    at 110 tokens/s; the pairs across the change made the line's slope about 39
    tokens/s, the daily card (bound 128) no longer fitted, and with every shape
    refused no call could correct it."""
    m = SpeedModel()
    for i in range(WINDOW):
        n = (140, 148)[i % 2]  # pretty daily and physique answers at 77 tokens/s
        m.observe(float(i), line(0.3, 77.0, n), n, round(n / 1.1))
    for i in range(WINDOW // 2):
        n = (100, 110)[i % 2]  # compact ones at 110 tokens/s
        m.observe(100.0 + i, line(0.3, 110.0, n), n, round(n / 0.8))
    assert m.fits(200.0, 128, 4.0) and m.fits(200.0, 138, 4.0)


def test_when_nothing_is_called_one_speed_probe_a_minute() -> None:
    """Rule 4: every shape refused (here the provider was at 30 tokens/s) means no
    call can show that it is fast again; one request a minute is let through."""
    from kexpr.worker.speed import PROBE_AFTER_S

    m = SpeedModel()
    for i, n in enumerate(MIX * 2):
        seen(m, float(i), line(0.3, 30.0, n), n)
    last = float(len(MIX) * 2 - 1)
    assert not m.fits(last + 1, 128, 4.0)
    assert not m.admit(last + 1, 128, 4.0)  # the last call was a second ago
    assert not m.admit(last + PROBE_AFTER_S - 0.1, 128, 4.0)
    assert not m.admit(last + PROBE_AFTER_S, 128, 2.9)  # not with less than 3 s left
    assert m.admit(last + PROBE_AFTER_S, 128, 4.0)  # the probe
    assert not m.admit(last + PROBE_AFTER_S + 1, 128, 4.0)  # one a minute
    assert m.admit(last + 2 * PROBE_AFTER_S, 128, 4.0) and m.probes == 2
    # A shape that fits is no probe.
    assert m.admit(last + 2 * PROBE_AFTER_S + 1, 10, 4.0) and m.probes == 2

"""The worker's status counters: counted from several threads, all shown."""

from __future__ import annotations

import dataclasses
import threading
from typing import get_args

from kexpr.spool.contract import SURFACES
from kexpr.spool.outcomes import Outcome
from kexpr.worker.status import CounterName, Counters, Fault


def test_every_counter_is_named_once_and_shown() -> None:
    # StatusFile.write shows the counters named by CounterName: every int field.
    ints = [f.name for f in dataclasses.fields(Counters) if f.type == "int"]
    assert list(get_args(CounterName)) == ints and "canonical" in ints


def test_counts_from_many_threads_add_up() -> None:
    c = Counters()
    start = threading.Barrier(8)

    def count() -> None:
        start.wait()
        for _ in range(5000):
            c.bump("calls")
            c.bump("retired_segments", 2)
            c.fault(Fault.ENTRY_ERROR)
            c.outcome(Outcome.TIMEOUT)

    threads = [threading.Thread(target=count) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (c.calls, c.retired_segments) == (40000, 80000)
    assert c.faults == {"entry_error": 40000}
    assert c.by_outcome == {"timeout": 40000}


def test_a_speed_refusal_is_counted_with_the_verdict_that_caused_it() -> None:
    """Per surface: the count, the last refusal's bound and verdict (numbers and
    an enum word), and the last ten minutes' calls and refusals, on the worker's
    own clock; a surface outside the public ones is counted in the total only."""
    from kexpr.worker.speed import Evidence, Verdict
    from kexpr.worker.status import RECENT_ADMISSION_SLOT_S, ROLLING_WINDOW_S

    now = [500.0]
    c = Counters(clock=lambda: now[0])
    verdict = Verdict(False, Evidence.COMPARABLE, 1, 3, 3.0712, 3.0)
    for _ in range(4):
        c.refused(
            Outcome.PROVIDER_TOO_SLOW, "adaptive.dualcoachtest.card.v1", bound=198, verdict=verdict
        )
    c.refused(Outcome.PROVIDER_COOLING_DOWN, "adaptive.dualcoachtest.card.v1")
    c.refused(Outcome.PROVIDER_TOO_SLOW, "sk-not-a-surface", bound=1, verdict=verdict)
    c.record_call("adaptive.dualcoachtest.card.v1", 2.1, None, 150)
    assert c.provider_too_slow == 5 and c.provider_cooling_down == 1
    assert c.refused_by_surface["adaptive.dualcoachtest.card.v1"] == {
        "provider_too_slow": 4,
        "provider_cooling_down": 1,
    }
    assert c.too_slow_last == {
        "adaptive.dualcoachtest.card.v1": {
            "bound": 198,
            "evidence": "comparable",
            "fits": 1,
            "misses": 3,
            "estimate_s": 3.071,
            "limit_s": 3.0,
        }
    }
    with c.lock:
        recent = c.recent_by_surface()
    assert recent["adaptive.dualcoachtest.card.v1"] == {"calls": 1, "provider_too_slow": 4}
    assert set(recent) == set(SURFACES)
    now[0] += RECENT_ADMISSION_SLOT_S * ROLLING_WINDOW_S  # ten minutes later
    with c.lock:
        assert c.recent_by_surface()["adaptive.dualcoachtest.card.v1"] == {
            "calls": 0,
            "provider_too_slow": 0,
        }

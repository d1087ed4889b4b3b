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


def test_a_cool_down_refusal_is_counted_per_surface() -> None:
    """Per public surface and in the total; a surface outside the public ones is
    counted in the total only."""
    c = Counters()
    for _ in range(4):
        c.refused(Outcome.PROVIDER_COOLING_DOWN, "weekly.v1")
    c.refused(Outcome.PROVIDER_COOLING_DOWN, "sk-not-a-surface")
    assert c.provider_cooling_down == 5
    assert c.refused_by_surface["weekly.v1"] == {"provider_cooling_down": 4}
    assert set(c.refused_by_surface) == set(SURFACES)

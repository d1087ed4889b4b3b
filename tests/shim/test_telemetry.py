"""Telemetry: exactly six fields; a raising or blocking sink never hurts a presentation."""

from __future__ import annotations

import threading
import time

from gateway_shim.telemetry import TELEMETRY_FIELDS, Telemetry, latency_bucket


def test_six_fields_exactly() -> None:
    got: list[dict[str, str]] = []
    done = threading.Event()

    def sink(ev):
        got.append(dict(ev))
        done.set()

    Telemetry(sink).emit(surface="daily.v1", mode="shadow", outcome="timeout", seconds=4.2)
    assert done.wait(5)
    assert set(got[0]) == TELEMETRY_FIELDS
    assert got[0]["latency_bucket"] == "ge_4s" and got[0]["outcome"] == "timeout"


def test_raising_sink_is_ignored() -> None:
    calls = threading.Event()

    def sink(ev):
        calls.set()
        raise RuntimeError("sink down")

    t = Telemetry(sink)
    t.emit(surface="daily.v1", mode="shadow", outcome="x", seconds=0)
    assert calls.wait(5)
    t.emit(surface="daily.v1", mode="shadow", outcome="x", seconds=0)  # still fine


def test_blocking_sink_does_not_block_emit() -> None:
    release = threading.Event()

    def blocking_sink(ev: object) -> None:
        release.wait(10)

    t = Telemetry(blocking_sink)
    t0 = time.monotonic()
    for _ in range(2000):  # beyond the pending cap: dropped, not blocked
        t.emit(surface="daily.v1", mode="shadow", outcome="x", seconds=0)
    assert time.monotonic() - t0 < 2.0
    release.set()


def test_buckets() -> None:
    assert [latency_bucket(s) for s in (0.0, 0.2, 0.7, 1.5, 3.9, 4.0)] == [
        "lt_100ms",
        "lt_500ms",
        "lt_1s",
        "lt_2s",
        "lt_4s",
        "ge_4s",
    ]

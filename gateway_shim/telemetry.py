"""Telemetry: exactly ``{event, contract_version, surface, mode, outcome, latency_bucket}``.

No text, prompt, response, placeholder, semantic ID, artifact key, raw ID, value,
exception message, provider, model, destination or length (design §8).
The sink is the host's; it is called on a daemon thread so that a sink that
blocks cannot delay a presentation, and an exception it raises is swallowed
and counted (`Telemetry.sink_faults`): a host's sink must never break a
presentation. The thread starts with the first event, `close` stops it (a
host that recreates coordinators must not accumulate threads), and a forked child starts its own
(the parent's does not exist there).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from typing import Final

from kexpr.spool.contract import CONTRACT_VERSION

TelemetrySink = Callable[[Mapping[str, str]], None]
EVENT: Final = "korean_expression.presentation"
TELEMETRY_FIELDS: Final = frozenset(
    {"event", "contract_version", "surface", "mode", "outcome", "latency_bucket"}
)
_BUCKETS: Final = (
    (0.1, "lt_100ms"),
    (0.5, "lt_500ms"),
    (1.0, "lt_1s"),
    (2.0, "lt_2s"),
    (4.0, "lt_4s"),
)
_MAX_PENDING: Final = 1024


def latency_bucket(seconds: float) -> str:
    for limit, name in _BUCKETS:
        if seconds < limit:
            return name
    return "ge_4s"


class Telemetry:
    """Non-blocking fan-out to one host sink. Drops events when the sink lags."""

    def __init__(self, sink: TelemetrySink | None) -> None:
        self._sink = sink
        self._q: queue.SimpleQueue[Mapping[str, str] | None] = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Events the host's sink raised on: counted, never raised (rule 6 of
        # the coordinator: a sink that raises or blocks is ignored).
        self.sink_faults = 0

    def emit(self, *, surface: str, mode: str, outcome: str, seconds: float) -> None:
        if self._sink is None:
            return
        event = {
            "event": EVENT,
            "contract_version": CONTRACT_VERSION,
            "surface": surface,
            "mode": mode,
            "outcome": outcome,
            "latency_bucket": latency_bucket(seconds),
        }
        with self._lock:
            if self._closed or self._pending >= _MAX_PENDING:
                return
            if self._thread is None:
                thread = threading.Thread(target=self._drain, name="kexpr-telemetry", daemon=True)
                try:
                    thread.start()
                except RuntimeError:
                    return  # no thread to be had: the event is dropped, never raised
                self._thread = thread
            self._pending += 1
        self._q.put(event)

    def close(self, *, wait: bool = True) -> None:
        """Deliver what is queued, then stop the thread (bounded; ``wait=False``,
        a finalizer: not awaited, the thread ends after the queue). Idempotent."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        if thread is not None:
            self._q.put(None)
            if wait and thread is not threading.current_thread():
                thread.join(timeout=5)

    def after_fork_in_child(self) -> None:
        # The parent's thread and whatever it had queued are the parent's.
        self._lock = threading.Lock()
        self._q = queue.SimpleQueue()
        self._pending = 0
        self._thread = None

    def _drain(self) -> None:
        q, sink = self._q, self._sink
        assert sink is not None
        while True:
            event = q.get()
            if event is None:
                return
            with self._lock:
                self._pending -= 1
            try:
                sink(event)
            except Exception:  # noqa: BLE001 - a host sink may never break a presentation; counted
                self.sink_faults += 1

"""Telemetry: exactly ``{event, contract_version, surface, mode, outcome, latency_bucket}``.

No text, prompt, response, placeholder, semantic ID, artifact key, raw ID, value,
exception message, provider, model, destination or length (plan: "Telemetry").
The sink is the host's; it is called on a daemon thread so that a sink that
blocks cannot delay a presentation, and an exception it raises is swallowed —
the one deliberate swallow in this product (STYLE.md: trio).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Mapping
from typing import Final

TelemetrySink = Callable[[Mapping[str, str]], None]
EVENT: Final = "korean_expression.presentation"
CONTRACT_VERSION: Final = "korean-expression-v4"
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
        self._q: queue.SimpleQueue[Mapping[str, str]] | None = None
        self._pending = 0
        self._lock = threading.Lock()
        if sink is not None:
            self._q = queue.SimpleQueue()
            threading.Thread(target=self._drain, name="kexpr-telemetry", daemon=True).start()

    def emit(self, *, surface: str, mode: str, outcome: str, seconds: float) -> None:
        if self._q is None:
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
            if self._pending >= _MAX_PENDING:
                return
            self._pending += 1
        self._q.put(event)

    def _drain(self) -> None:
        assert self._q is not None and self._sink is not None
        while True:
            event = self._q.get()
            with self._lock:
                self._pending -= 1
            try:
                self._sink(event)
            except Exception:  # noqa: BLE001 - a host sink may never break a presentation
                pass

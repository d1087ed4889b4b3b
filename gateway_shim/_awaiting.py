"""The attempts a coordinator handed out as ``accepted`` and not yet reported.

Holds `AwaitingReports`: what `KoreanExpressionCoordinator.report` checks a
candidate against (only an attempt this coordinator returned as ``accepted``,
once), bounded in count and in age so that nothing grows with the host's uptime
(an unpruned set of reported ids would). Private to
`gateway_shim.coordinator`; its rule 9 (``report`` never lets a foreign
attempt id reach the spool's models) applies.

An entry older than the worker's own patience is useless: after its deadline
plus ``COMMIT_GRACE`` the worker has journaled the attempt
``claim_expired_canonical`` and a report would change nothing, so the age bound
is that (with a minute to spare). The count bound only matters for a host that
presents thousands of selected candidates within ten minutes and reports none.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from kexpr.spool.lifecycle import COMMIT_GRACE

MAX_AWAITING: Final = 4096
MAX_AGE_S: Final = COMMIT_GRACE.total_seconds() + 60.0


class AwaitingReports:
    """attempt_id -> when it was handed out (monotonic), oldest first."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        # The coordinator's monotonic clock: ages are durations (spool.lifecycle rule 6).
        self._clock = clock
        self._lock = threading.Lock()
        self._issued: OrderedDict[str, float] = OrderedDict()

    def add(self, attempt_id: str) -> None:
        now = self._clock()
        with self._lock:
            self._issued[attempt_id] = now
            self._issued.move_to_end(attempt_id)
            self._prune(now)

    def take(self, attempt_id: str) -> bool:
        """True exactly once for an attempt handed out and still awaited."""
        with self._lock:
            self._prune(self._clock())
            return self._issued.pop(attempt_id, None) is not None

    def __len__(self) -> int:
        with self._lock:
            return len(self._issued)

    def after_fork_in_child(self) -> None:
        # The parent's attempts are the parent's to report, exactly once.
        self._lock = threading.Lock()
        self._issued = OrderedDict()

    def _prune(self, now: float) -> None:
        while self._issued and (
            len(self._issued) > MAX_AWAITING or now - next(iter(self._issued.values())) > MAX_AGE_S
        ):
            self._issued.popitem(last=False)

"""The worker's parts, wired once by `kexpr.worker.daemon.Worker`: each keeps its
own state and is passed to the modules that act on it (`kexpr.worker.scan`,
`attempt`, `reports`, `housekeeping`, `status`).

Wall time (``clock``) stamps rows; every duration is measured on ``mono``
(spool.lifecycle rule 6). Both are injected so tests can step one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from kexpr.worker.cooldown import CoolDown
from kexpr.worker.held import HeldAttempts
from kexpr.worker.housekeeping import ClockWatch
from kexpr.worker.outbox import Outbox
from kexpr.worker.quarantine import Quarantine
from kexpr.worker.reports import KeptReports
from kexpr.worker.retention_guard import RetentionGuard
from kexpr.worker.spend import SpendBound, SpendCaps
from kexpr.worker.status import Counters

if TYPE_CHECKING:
    import openai


@dataclass(slots=True, eq=False)
class Parts:
    root: DataRoot
    clock: Callable[[], dt.datetime]
    mono: Callable[[], float]
    grace: dt.timedelta
    journal: Journal
    counters: Counters
    quarantine: Quarantine
    outbox: Outbox
    clockwatch: ClockWatch
    # Whether retention may remove anything (spool.journal rule 7a).
    retention: RetentionGuard
    attempts: HeldAttempts = field(default_factory=HeldAttempts)
    # The provider cool-down (kexpr.worker.cooldown): in memory, on ``mono``.
    cooldown: CoolDown = field(default_factory=CoolDown)
    # The spend caps and the start rows counted against them (kexpr.worker.spend):
    # read off the journal at start-up, on the wall ``clock`` like the rows.
    spend: SpendBound = field(default_factory=SpendBound)
    # reports/ files of a protocol version this release does not know: kept,
    # counted once, read once per change (kexpr.worker.reports.KeptReports).
    kept_reports: KeptReports = field(default_factory=KeptReports)
    # The one provider client (None without a key), built by `Worker.prepare`.
    client: openai.OpenAI | None = None

    @classmethod
    def build(
        cls,
        root: DataRoot,
        *,
        clock: Callable[[], dt.datetime],
        monotonic: Callable[[], float],
        grace: dt.timedelta,
        spend: SpendCaps | None = None,
    ) -> Parts:
        counters = Counters(clock=monotonic)
        quarantine = Quarantine(root, counters)
        return cls(
            root=root,
            clock=clock,
            mono=monotonic,
            grace=grace,
            journal=Journal(root),
            counters=counters,
            quarantine=quarantine,
            outbox=Outbox(root, counters, quarantine, monotonic),
            clockwatch=ClockWatch(clock, monotonic),
            retention=RetentionGuard(root, clock, monotonic),
            spend=SpendBound(spend),
        )

"""The worker's side of `kexpr.spool.retention`: it keeps the data root's
retention record, and says before every retention whether anything may go.

Rules:
1. The first look (under the journal lock, after the journal is loaded)
   continues from the record on disk (`kexpr.spool.retention.at_start`); every
   later look measures the wall clock against the monotonic one since the last
   look: a divergence beyond `kexpr.spool.lifecycle.step_observed` is a step,
   held like one found at a start.
2. The record is written durably at the first look, at every step, and at
   least every `WRITE_EVERY_S` of monotonic time after. Retention runs only
   after the record that allows it is on disk.
3. ``hold`` is the reason of the last look (None: retention may run);
   `kexpr.worker.status` reports it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Final

from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import step_observed
from kexpr.spool.retention import (
    Hold,
    Record,
    RecordUnreadable,
    at_start,
    journal_disagrees,
    read_record,
    write_record,
)

WRITE_EVERY_S: Final = 60.0


class RetentionGuard:
    __slots__ = ("_clock", "_mono", "_mono_seen", "_record", "_root", "_written", "hold")

    def __init__(
        self, root: DataRoot, clock: Callable[[], dt.datetime], monotonic: Callable[[], float]
    ) -> None:
        self._root, self._clock, self._mono = root, clock, monotonic
        self._record: Record | None = None
        self._mono_seen = 0.0
        self._written: float | None = None
        self.hold: Hold | None = Hold.NOT_JUDGED

    def look(self, newest: dt.datetime | None, *, step: bool) -> Hold | None:
        """Rules 1-3 (caller holds the journal lock). ``step``: this process's
        `kexpr.worker.housekeeping.ClockWatch` saw one."""
        now, mono = self._clock(), self._mono()
        before = self._record
        if before is None:
            try:
                record = at_start(read_record(self._root), now, newest)
            except (OSError, RecordUnreadable):
                known = now if newest is None else max(now, newest)
                record = Record(now).step(Hold.RECORD_UNREADABLE, now, known)
        else:
            expected = before.seen + dt.timedelta(seconds=mono - self._mono_seen)
            if step_observed((now - before.seen).total_seconds(), mono - self._mono_seen):
                reason = Hold.CLOCK_BEHIND_RECORD if now < expected else Hold.CLOCK_AHEAD_OF_RECORD
                record = before.step(reason, now, expected)
            else:
                record = Record(max(now, before.seen), before.held_until, before.held_reason)
        self._record, self._mono_seen = record, mono
        due = (
            before is None
            or record.held_until != before.held_until
            or self._written is None
            or mono - self._written >= WRITE_EVERY_S
        )
        if due:
            try:
                write_record(self._root, record)
                self._written = mono
            except OSError:
                self._written = None
        if self._written is None:
            self.hold = Hold.RECORD_UNWRITABLE
        elif step:
            self.hold = Hold.CLOCK_STEP
        else:
            self.hold = record.holding(now) or journal_disagrees(now, newest)
        return self.hold

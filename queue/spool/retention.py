"""When retention may remove anything (`kexpr.spool.journal` rule 7a).

A segment is never removed on the word of one process's clock alone. Three
witnesses must agree before retention removes anything:

1. The journal: its newest start row is neither later than now (beyond
   `CLOCK_SKEW`) nor older than `AGREEMENT`. A journal far from now means the
   clock or the journal is wrong (`Hold.JOURNAL_IN_FUTURE`,
   `Hold.JOURNAL_STALE`); an empty journal has no witness (`Hold.JOURNAL_EMPTY`).
2. The record (``retention.json`` at the data root, `Record`): the last wall
   time a worker saw, kept across restarts. A worker that starts before it
   (beyond `CLOCK_SKEW`) or more than `AGREEMENT` after it, or that sees its
   wall clock step against its monotonic one while running, has seen a step it
   cannot explain.
3. After such a step nothing is removed until the wall clock has passed
   ``held_until``: the later of the step's two readings plus `SETTLE`
   (`RETENTION_DAYS` + 1 days). Every row written under a wrong clock was
   written before that moment, so by then it has aged out by any reading; the
   segment names it carries are not trusted before. ``held_until`` only grows.
4. A record that cannot be read is treated as a step at the newest reading
   known (`Hold.RECORD_UNREADABLE`); one that cannot be written holds retention
   (`Hold.RECORD_UNWRITABLE`). Fail closed: holding costs disk, removing
   history costs a second paid call.
5. The record holds timestamps and an enum only; it is written durably with
   the no-follow discipline of `kexpr.spool.fsio` (staged beside it, fsynced,
   renamed over, directory fsynced).
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kexpr.spool._journal_rows import RETENTION_DAYS
from kexpr.spool.canonical import canonical_json, format_ts, parse_ts
from kexpr.spool.fsio import read_private, replace_private
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import CLOCK_SKEW

RECORD_NAME: Final = "retention.json"
MAX_RECORD_BYTES: Final = 512
# Rule 1's and rule 2's bound: a restart or an idle journal within it is not a step.
AGREEMENT: Final = dt.timedelta(days=2)
SETTLE: Final = dt.timedelta(days=RETENTION_DAYS + 1)
_FIELDS: Final = frozenset({"seen_utc", "held_until_utc", "held_reason"})


class Hold(enum.StrEnum):
    """Why retention removes nothing now (content-free)."""

    NOT_JUDGED = "not_judged"  # no look yet (start-up, or a quarantined journal)
    CLOCK_STEP = "clock_step"  # this process saw its wall clock step
    CLOCK_BEHIND_RECORD = "clock_behind_record"  # a start or step before the record
    CLOCK_AHEAD_OF_RECORD = "clock_ahead_of_record"  # a start or step far after it
    RECORD_UNREADABLE = "record_unreadable"
    RECORD_UNWRITABLE = "record_unwritable"
    JOURNAL_EMPTY = "journal_empty"
    JOURNAL_IN_FUTURE = "journal_in_future"
    JOURNAL_STALE = "journal_stale"


# The holds that set ``held_until`` (rule 3); the others last while they are true.
STEP_HOLDS: Final = frozenset(
    {Hold.CLOCK_BEHIND_RECORD, Hold.CLOCK_AHEAD_OF_RECORD, Hold.RECORD_UNREADABLE}
)


class RecordUnreadable(Exception):
    """The record exists but is not one this module wrote."""


@dataclass(frozen=True, slots=True)
class Record:
    seen: dt.datetime
    held_until: dt.datetime | None = None
    held_reason: Hold | None = None

    def to_bytes(self) -> bytes:
        doc = {
            "seen_utc": format_ts(self.seen),
            "held_until_utc": None if self.held_until is None else format_ts(self.held_until),
            "held_reason": None if self.held_reason is None else self.held_reason.value,
        }
        return (canonical_json(doc) + "\n").encode("ascii")

    @classmethod
    def from_bytes(cls, data: bytes) -> Record:
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict) or set(doc) != _FIELDS:
                raise RecordUnreadable
            until, reason = doc["held_until_utc"], doc["held_reason"]
            if (until is None) != (reason is None):
                raise RecordUnreadable
            return cls(
                seen=parse_ts(doc["seen_utc"]),
                held_until=None if until is None else parse_ts(until),
                held_reason=None if reason is None else Hold(reason),
            )
        except (ValueError, TypeError) as e:
            raise RecordUnreadable from e

    def step(self, reason: Hold, *readings: dt.datetime) -> Record:
        """Rule 3: held until the latest of ``readings`` (and any earlier
        ``held_until``) plus `SETTLE`; the record's time becomes the first reading."""
        until = max(readings) + SETTLE
        if self.held_until is not None and self.held_until >= until:
            return Record(readings[0], self.held_until, self.held_reason)
        return Record(readings[0], until, reason)

    def holding(self, now: dt.datetime) -> Hold | None:
        if self.held_until is not None and now < self.held_until:
            return self.held_reason
        return None


def record_path(root: DataRoot) -> Path:
    return root.root / RECORD_NAME


def read_record(root: DataRoot) -> Record | None:
    """None when absent; `RecordUnreadable` (an OSError too) when not ours."""
    try:
        data = read_private(record_path(root), max_bytes=MAX_RECORD_BYTES)
    except FileNotFoundError:
        return None
    return Record.from_bytes(data)


def write_record(root: DataRoot, record: Record) -> None:
    replace_private(record_path(root), record.to_bytes(), durable=True)


def at_start(record: Record | None, now: dt.datetime, newest: dt.datetime | None) -> Record:
    """Rule 2 at a process's first look: the record it continues from. With no
    record, the journal's newest row stands in for it (or now, if empty)."""
    if record is None:
        record = Record(now if newest is None else newest)
    if now < record.seen - CLOCK_SKEW:
        return record.step(Hold.CLOCK_BEHIND_RECORD, now, record.seen)
    if now > record.seen + AGREEMENT:
        return record.step(Hold.CLOCK_AHEAD_OF_RECORD, now, record.seen)
    return Record(max(now, record.seen), record.held_until, record.held_reason)


def journal_disagrees(now: dt.datetime, newest: dt.datetime | None) -> Hold | None:
    """Rule 1."""
    if newest is None:
        return Hold.JOURNAL_EMPTY
    if newest > now + CLOCK_SKEW:
        return Hold.JOURNAL_IN_FUTURE
    if newest < now - AGREEMENT:
        return Hold.JOURNAL_STALE
    return None


def offline_hold(
    record: Record | None, now: dt.datetime, newest: dt.datetime | None
) -> Hold | None:
    """For a process that does not keep the record (``kexpr journal prune``):
    the record must exist, agree with now, and hold nothing; the journal agree."""
    if record is None:
        return Hold.RECORD_UNREADABLE
    if now < record.seen - CLOCK_SKEW:
        return Hold.CLOCK_BEHIND_RECORD
    if now > record.seen + AGREEMENT:
        return Hold.CLOCK_AHEAD_OF_RECORD
    return record.holding(now) or journal_disagrees(now, newest)


__all__ = [
    "AGREEMENT",
    "MAX_RECORD_BYTES",
    "RECORD_NAME",
    "SETTLE",
    "STEP_HOLDS",
    "Hold",
    "Record",
    "RecordUnreadable",
    "at_start",
    "journal_disagrees",
    "offline_hold",
    "read_record",
    "record_path",
    "write_record",
]

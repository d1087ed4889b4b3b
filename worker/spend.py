"""The spend bound: at most so many paid calls in any rolling hour and any UTC day.

One artifact is at most one wire request, ever; but a host that presents a new
artifact every time (a bug that mints a fresh ``finalized_event_id`` in a loop)
is a new paid call every time. This module bounds that, the way an LLM gateway's
``rpm_limit`` and ``max_budget`` (LiteLLM's names) bound a key: by a count the
operator states, enforced before the money is spent (docs/cli.md, "The spend
bound").

Rules of this module:

Rule 1: what is counted is the start row (``attempt_started``). Every wire
        request has one, written and fsynced before the call, and an attempt
        has at most one request; so the count is an upper bound on the paid
        calls (an attempt without a key, or whose call never left the process,
        is counted and cost nothing).
Rule 2: the count comes from the journal, never from this process's memory
        alone: it is derived from the verified index's start rows (the rows the
        dedupe is rebuilt from) at start-up, again after an operator's clear
        (`kexpr.worker.resume`) and again after every wall-clock step the worker
        observes (`kexpr.worker.housekeeping.ClockWatch`); between derivations
        every start row this worker appends is added, under the journal lock.
        A restart, a crash, a clear or a second worker later on the same data
        root does not reset it; what memory forgets is only what no window can
        hold again, and a derivation puts back whatever the journal holds. An
        artifact found in a quarantined file (its rows set aside, its day known,
        not its time) counts in that UTC day, not in any hour.
Rule 3: every counted start row has two times: its stamp (the wall clock the
        rows are stamped with, the worker's injected ``clock``) and its place on
        this process's monotonic clock (``mono``): the monotonic reading when
        this worker appended it, or, for a row this process did not write, the
        reading when it was first derived less its age on the wall clock (never
        less than zero, and measured against the earlier of the wall clock and
        the wall clock as carried forward on the monotonic one since this bound
        first read the time). A row counts in a window when either time puts it
        there: the rolling hour holds every row stamped after ``now - 1 h`` or
        placed after ``mono - 1 h``; the UTC day every row stamped at or after
        today's 00:00 UTC or placed after the last 00:00 UTC of the carried-
        forward clock. Neither window has an upper bound: a row stamped after
        ``now`` (the wall clock stepped back) still counts. So a step of the
        wall clock, either way and of any size, frees no budget: a step forward
        leaves every row's place where it was, a step back leaves every stamp.
        The worker reports a step (``clock_step_observed``).
Rule 4: admission (`SpendBound.admit`) is judged under the journal lock, right
        before the start row, beside the speed and cool-down admission
        (`kexpr.worker.attempt`): when either window already holds its cap, the
        request is answered canonical ``spend_cap_reached`` with no row and no
        call. An artifact refused so is not attempted: presented again after the
        window has room, it is judged afresh. Dedupe answers (``in_flight``,
        ``already_attempted``) come before this rule and cost nothing.
Rule 5: a WARNING (one stderr line and a ``kexpr.worker`` record, counts and
        the window's name only) when a window's count reaches `WARN_SHARE` of
        its cap (``spend_cap_near``) and when a request is first refused at it
        (``spend_cap_reached``): once per crossing, re-armed when the window's
        count is back at or below `REARM_SHARE` of the cap (the UTC day: the
        next day). A count that hovers at the threshold warns once, not once a
        row.
Rule 6: the profile's history (``kexpr status``'s ``unusual_rate``): the start
        rows per clock hour over the journal's retention window; the baseline is
        the median of the *active* hours (those with at least one start row),
        leaving out the two clock hours the rolling last hour overlaps. The last
        hour is far above it when it holds at least `rate_threshold` start rows:
        `RATE_FACTOR` times the baseline, and never fewer than `RATE_FLOOR`
        (a new profile has no history; a quiet one's median is 1 or 2, and an
        honest morning batch must not flip the verdict). Counts only.
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
import math
import statistics
import sys
import threading
from dataclasses import dataclass
from typing import Final

from kexpr.spool import log
from kexpr.spool.canonical import format_ts, parse_ts
from kexpr.spool.journal import RETENTION_DAYS, Index

# The defaults, stated. A Hermes profile sends tens of messages a day, each at
# most one call. 120 an hour lets a whole ordinary day's volume (and a backlog
# flushed after an outage) arrive within one hour; 600 a day is more than ten
# times an ordinary day, five hours at the hourly cap. At `max_tokens=384`
# (kexpr.worker.provider) that is at most 230,400 completion tokens a day per
# profile, whatever the host does.
DEFAULT_PER_HOUR: Final = 120
DEFAULT_PER_DAY: Final = 600
# What an operator may state (both ends included): a cap of zero is the config
# block's ``mode: disabled``, not a spend bound.
CAP_RANGE: Final = (1, 100_000)
# Rule 5.
WARN_SHARE: Final = 0.8
REARM_SHARE: Final = 0.5
# Rule 6.
RATE_FACTOR: Final = 10
RATE_FLOOR: Final = 30

HOUR: Final = dt.timedelta(hours=1)
DAY: Final = dt.timedelta(days=1)
_HOUR_KEY: Final = len("YYYY-MM-DDTHH")
_log = log.logger("worker")


class Window(enum.StrEnum):
    """The two windows of Rule 3 (log fields and the status file's keys)."""

    HOUR = "hour"
    DAY = "day"


@dataclass(frozen=True, slots=True)
class SpendCaps:
    """The operator's caps (``--max-calls-per-hour``, ``--max-calls-per-day``)."""

    per_hour: int = DEFAULT_PER_HOUR
    per_day: int = DEFAULT_PER_DAY

    def __post_init__(self) -> None:
        lo, hi = CAP_RANGE
        for cap in (self.per_hour, self.per_day):
            if type(cap) is not int or not lo <= cap <= hi:
                raise ValueError("spend_cap_out_of_range")

    def cap(self, window: Window) -> int:
        return self.per_hour if window is Window.HOUR else self.per_day


def warn_at(cap: int) -> int:
    """The count at which a window warns (Rule 5): `WARN_SHARE` of ``cap``, at least 1."""
    return max(1, math.ceil(WARN_SHARE * cap))


def rate_threshold(baseline: float) -> int:
    """Rule 6: the last hour's start rows that are far above a baseline median."""
    return max(RATE_FLOOR, math.ceil(RATE_FACTOR * baseline))


def unusual_rate(last_hour: int, baseline: float) -> bool:
    return last_hour >= rate_threshold(baseline)


def _midnight(now: dt.datetime) -> dt.datetime:
    return dt.datetime.combine(now.date(), dt.time(), dt.UTC)


def _keep_from(now: dt.datetime) -> str:
    """The oldest stamp kept (Rule 3): a day before either window's start."""
    return format_ts(min(_midnight(now), now - HOUR) - DAY)


@dataclass(frozen=True, slots=True)
class _Row:
    """One counted start row: its stamp and its place on the monotonic clock."""

    stamp: str
    place: float


@dataclass(frozen=True, slots=True)
class _Edges:
    """Where the windows start at one reading of both clocks (Rule 3)."""

    hour_stamp: str
    hour_place: float
    day_stamp: str
    day_place: float
    keep_stamp: str
    keep_place: float
    days: frozenset[str]

    @classmethod
    def at(cls, now: dt.datetime, mono: float, carried: dt.datetime) -> _Edges:
        since_midnight = (carried - _midnight(carried)).total_seconds()
        return cls(
            hour_stamp=format_ts(now - HOUR),
            hour_place=mono - HOUR.total_seconds(),
            day_stamp=format_ts(_midnight(now)),
            day_place=mono - since_midnight,
            keep_stamp=_keep_from(now),
            keep_place=mono - (DAY + HOUR).total_seconds(),
            days=frozenset({now.date().isoformat(), carried.date().isoformat()}),
        )

    def kept(self, row: _Row) -> bool:
        return row.stamp >= self.keep_stamp or row.place >= self.keep_place

    def in_hour(self, row: _Row) -> bool:
        return row.stamp > self.hour_stamp or row.place > self.hour_place

    def in_day(self, row: _Row) -> bool:
        return row.stamp >= self.day_stamp or row.place >= self.day_place


class SpendBound:
    """The counts of Rules 2 and 3, the admission of Rule 4 and the warnings of
    Rule 5. The call threads admit and add under the journal lock; the status
    writer reads: every access holds ``_lock``. Every method takes both clocks'
    readings: ``now`` (wall, UTC) and ``mono`` (monotonic seconds)."""

    def __init__(self, caps: SpendCaps | None = None) -> None:
        self.caps = caps if caps is not None else SpendCaps()
        self._lock = threading.Lock()
        # The first reading of both clocks: the wall clock carried forward on
        # the monotonic one from here (Rule 3) cannot step.
        self._anchor: tuple[dt.datetime, float] | None = None
        # The start rows either window may still hold, by attempt id (Rule 3).
        self._rows: dict[str, _Row] = {}
        # Rule 2: artifacts of quarantined files, per UTC day (time unknown).
        self._sealed: dict[str, int] = {}
        # Rule 6: start rows per clock hour ("YYYY-MM-DDTHH").
        self._hours: dict[str, int] = {}
        self._near: set[Window] = set()
        self._reached: set[Window] = set()
        self.refused = 0
        # The count of wall-clock steps observed when the rows were last derived.
        self.derived_at_step = 0

    # -- the journal's rows (Rule 2) -----------------------------------------

    def _carried(self, now: dt.datetime, mono: float) -> dt.datetime:
        """The wall clock carried forward on the monotonic clock (caller holds
        ``_lock``)."""
        if self._anchor is None:
            self._anchor = (now, mono)
        wall0, mono0 = self._anchor
        return wall0 + dt.timedelta(seconds=mono - mono0)

    def seed(self, index: Index, now: dt.datetime, mono: float, *, step: int = 0) -> None:
        """Derive the count from the verified journal's start rows (callers:
        start-up, an operator's clear, an observed clock step; ``step`` is the
        steps observed so far). A row counted before keeps its place; a row not
        counted before is placed at its age on the earlier of the two wall
        clocks, never below zero (Rule 3)."""
        with self._lock:
            carried = self._carried(now, mono)
            earlier = min(now, carried)
            oldest = min(_keep_from(now), _keep_from(earlier))
            before = self._rows
            rows: dict[str, _Row] = {}
            self._hours = {}
            for rec in index.by_attempt.values():
                stamp = rec.started_at_utc
                self._add_hour(stamp)
                known = before.get(rec.attempt_id)
                if known is not None and known.stamp == stamp:
                    rows[rec.attempt_id] = known
                elif stamp >= oldest:
                    rows[rec.attempt_id] = _Row(stamp, mono - _age_s(stamp, earlier))
            self._rows = rows
            self._sealed = {}
            for day in index.sealed.values():
                self._sealed[day] = self._sealed.get(day, 0) + 1
            self.derived_at_step = step
            self._judge(now, mono)

    def started(self, attempt_id: str, started_at_utc: str, now: dt.datetime, mono: float) -> None:
        """One start row this worker appended (caller holds the journal lock)."""
        with self._lock:
            self._carried(now, mono)
            self._rows[attempt_id] = _Row(started_at_utc, mono)
            self._add_hour(started_at_utc)
            self._judge(now, mono)

    def _add_hour(self, started_at_utc: str) -> None:
        key = started_at_utc[:_HOUR_KEY]
        self._hours[key] = self._hours.get(key, 0) + 1

    # -- the windows (Rule 3) ---------------------------------------------------

    def _counts(self, now: dt.datetime, mono: float) -> dict[Window, int]:
        """Caller holds ``_lock``. Forgets what neither window can hold again."""
        edges = _Edges.at(now, mono, self._carried(now, mono))
        gone = [k for k, row in self._rows.items() if not edges.kept(row)]
        for k in gone:
            del self._rows[k]
        rows = self._rows.values()
        return {
            Window.HOUR: sum(1 for row in rows if edges.in_hour(row)),
            Window.DAY: sum(1 for row in rows if edges.in_day(row))
            + sum(self._sealed.get(day, 0) for day in edges.days),
        }

    def counts(self, now: dt.datetime, mono: float) -> dict[Window, int]:
        with self._lock:
            return self._counts(now, mono)

    # -- admission and warnings (Rules 4 and 5) ---------------------------------

    def admit(self, now: dt.datetime, mono: float) -> bool:
        """Whether one more start row is within both caps (caller holds the
        journal lock). A refusal is counted and warned (Rule 5)."""
        with self._lock:
            counts = self._judge(now, mono)
            full = [w for w in Window if counts[w] >= self.caps.cap(w)]
            if not full:
                return True
            self.refused += 1
            for w in full:
                if w not in self._reached:
                    self._reached.add(w)
                    _warn("spend_cap_reached", w, counts[w], self.caps.cap(w))
            return False

    def _judge(self, now: dt.datetime, mono: float) -> dict[Window, int]:
        """Re-arm and raise the warnings of Rule 5 for the counts now (caller
        holds ``_lock``)."""
        counts = self._counts(now, mono)
        for w in Window:
            cap, n = self.caps.cap(w), counts[w]
            if n <= REARM_SHARE * cap:
                self._near.discard(w)
                self._reached.discard(w)
            if n >= warn_at(cap) and w not in self._near:
                self._near.add(w)
                _warn("spend_cap_near", w, n, cap)
        return counts

    # -- the history (Rule 6) ---------------------------------------------------

    def baseline(self, now: dt.datetime) -> tuple[float, int]:
        """(the median start rows of the active clock hours before the last
        hour, how many such hours) over the retention window; (0.0, 0) without
        history. Forgets the hours retention has removed."""
        oldest = (now.date() - dt.timedelta(days=RETENTION_DAYS)).isoformat()
        last = format_ts(now - HOUR)[:_HOUR_KEY]
        with self._lock:
            for key in [k for k in self._hours if k < oldest]:
                del self._hours[key]
            active = [n for k, n in self._hours.items() if k < last]
        if not active:
            return 0.0, 0
        return float(statistics.median(active)), len(active)

    def to_json(self, now: dt.datetime, mono: float) -> dict[str, object]:
        """The status file's ``spend`` record: numbers only."""
        counts = self.counts(now, mono)
        median, hours = self.baseline(now)
        return {
            "per_hour": self.caps.per_hour,
            "per_day": self.caps.per_day,
            "last_hour": counts[Window.HOUR],
            "today": counts[Window.DAY],
            "refused": self.refused,
            "warn_share": WARN_SHARE,
            "history_hours": hours,
            "hourly_median": median,
        }


def _age_s(stamp: str, now: dt.datetime) -> float:
    """How long before ``now`` a row was stamped; zero for a stamp at or after
    ``now`` (and for one that does not parse: fail closed, it counts)."""
    try:
        return max(0.0, (now - parse_ts(stamp)).total_seconds())
    except ValueError:
        return 0.0


def _warn(event: str, window: Window, count: int, cap: int) -> None:
    """Rule 5: one stderr line and one record; the window's name and counts only."""
    print(
        f"kexpr worker: {event} window={window.value} started={count} cap={cap}",
        file=sys.stderr,
        flush=True,
    )
    log.event(_log, logging.WARNING, event, window=window, started=count, cap=cap)


__all__ = [
    "CAP_RANGE",
    "DEFAULT_PER_DAY",
    "DEFAULT_PER_HOUR",
    "RATE_FACTOR",
    "RATE_FLOOR",
    "REARM_SHARE",
    "WARN_SHARE",
    "SpendBound",
    "SpendCaps",
    "Window",
    "rate_threshold",
    "unusual_rate",
    "warn_at",
]

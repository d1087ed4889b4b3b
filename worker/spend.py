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
        alone: at start-up it is read off the verified index's start rows (the
        rows the dedupe is rebuilt from), then every start row this worker
        appends is added, under the journal lock. A restart, a crash or a
        second worker later on the same data root does not reset it. An
        artifact found in a quarantined file (its rows set aside, its day
        known, not its time) counts in that UTC day, not in any hour.
Rule 3: the windows are on the wall clock, the clock the rows are stamped with
        (the worker's injected ``clock``): the rolling hour is every start row
        stamped after ``now - 1 h``; the UTC day every start row stamped at or
        after today's 00:00 UTC. Neither has an upper bound: a row stamped after
        ``now`` (the wall clock stepped back) still counts, and rows are kept a
        day longer than either window needs, so a step back of up to a day
        never frees budget. A step forward frees the hour early; the worker
        reports such a step (``clock_step_observed``).
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

import bisect
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
from kexpr.spool.canonical import format_ts
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


def _day_start(now: dt.datetime) -> str:
    return format_ts(dt.datetime.combine(now.date(), dt.time(), dt.UTC))


def _keep_from(now: dt.datetime) -> str:
    """The oldest start row kept (Rule 3): a day before either window's start."""
    day_start = dt.datetime.combine(now.date(), dt.time(), dt.UTC)
    return format_ts(min(day_start, now - HOUR) - dt.timedelta(days=1))


class SpendBound:
    """The counts of Rules 2 and 3, the admission of Rule 4 and the warnings of
    Rule 5. The call threads admit and add under the journal lock; the status
    writer reads: every access holds ``_lock``."""

    def __init__(self, caps: SpendCaps | None = None) -> None:
        self.caps = caps if caps is not None else SpendCaps()
        self._lock = threading.Lock()
        # Start rows' ``started_at_utc`` (fixed-width, so text order is time
        # order) since the older of the hour's and the day's start: sorted.
        self._recent: list[str] = []
        # Rule 2: artifacts of quarantined files, per UTC day (time unknown).
        self._sealed: dict[str, int] = {}
        # Rule 6: start rows per clock hour ("YYYY-MM-DDTHH").
        self._hours: dict[str, int] = {}
        self._near: set[Window] = set()
        self._reached: set[Window] = set()
        self.refused = 0

    # -- the journal's rows (Rule 2) -----------------------------------------

    def seed(self, index: Index, now: dt.datetime) -> None:
        """Count the verified journal's start rows (caller: start-up, after the
        index was loaded). Replaces whatever was counted before."""
        cutoff = _keep_from(now)
        with self._lock:
            self._hours = {}
            recent: list[str] = []
            for rec in index.by_attempt.values():
                self._add_hour(rec.started_at_utc)
                if rec.started_at_utc >= cutoff:
                    recent.append(rec.started_at_utc)
            recent.sort()
            self._recent = recent
            self._sealed = {}
            for day in index.sealed.values():
                self._sealed[day] = self._sealed.get(day, 0) + 1
            self._near.clear()
            self._reached.clear()
            self._judge(now)

    def started(self, started_at_utc: str, now: dt.datetime) -> None:
        """One start row this worker appended (caller holds the journal lock)."""
        with self._lock:
            bisect.insort(self._recent, started_at_utc)
            self._add_hour(started_at_utc)
            self._judge(now)

    def _add_hour(self, started_at_utc: str) -> None:
        key = started_at_utc[:_HOUR_KEY]
        self._hours[key] = self._hours.get(key, 0) + 1

    # -- the windows (Rule 3) ---------------------------------------------------

    def _counts(self, now: dt.datetime) -> dict[Window, int]:
        """Caller holds ``_lock``. Forgets what neither window can hold again."""
        day_start = _day_start(now)
        hour_start = format_ts(now - HOUR)
        recent = self._recent
        del recent[: bisect.bisect_left(recent, _keep_from(now))]
        return {
            Window.HOUR: len(recent) - bisect.bisect_right(recent, hour_start),
            Window.DAY: len(recent)
            - bisect.bisect_left(recent, day_start)
            + self._sealed.get(day_start[:10], 0),
        }

    def counts(self, now: dt.datetime) -> dict[Window, int]:
        with self._lock:
            return self._counts(now)

    # -- admission and warnings (Rules 4 and 5) ---------------------------------

    def admit(self, now: dt.datetime) -> bool:
        """Whether one more start row is within both caps (caller holds the
        journal lock). A refusal is counted and warned (Rule 5)."""
        with self._lock:
            counts = self._judge(now)
            full = [w for w in Window if counts[w] >= self.caps.cap(w)]
            if not full:
                return True
            self.refused += 1
            for w in full:
                if w not in self._reached:
                    self._reached.add(w)
                    _warn("spend_cap_reached", w, counts[w], self.caps.cap(w))
            return False

    def _judge(self, now: dt.datetime) -> dict[Window, int]:
        """Re-arm and raise the warnings of Rule 5 for the counts now (caller
        holds ``_lock``)."""
        counts = self._counts(now)
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

    def to_json(self, now: dt.datetime) -> dict[str, object]:
        """The status file's ``spend`` record: numbers only."""
        counts = self.counts(now)
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

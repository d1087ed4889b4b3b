"""The spend bound (`kexpr.worker.spend`): at most the operator's cap of start rows
in any rolling hour and any UTC day, counted from the journal; past it a request
is answered canonical ``spend_cap_reached`` with no row and no call; a WARNING
once per crossing near the cap and at it.

Pure counts on stated instants first, then the worker in process on a
controllable clock (`worker_kit.Clock`) and a scripted provider: nothing here
depends on this machine's clock.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from pathlib import Path

import pytest
from worker_tests.worker_kit import T0, Clock, Provider, make_worker, response, rid, status, submit

from kexpr.spool.journal import AttemptRecord, Index, Journal, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import RESPONSE_OUTCOMES, Outcome
from kexpr.worker.daemon import Worker
from kexpr.worker.spend import (
    DEFAULT_PER_DAY,
    DEFAULT_PER_HOUR,
    RATE_FLOOR,
    SpendBound,
    SpendCaps,
    Window,
    rate_threshold,
    unusual_rate,
    warn_at,
)

HOUR, DAY = Window.HOUR, Window.DAY


def minutes(m: float, start: dt.datetime = T0) -> dt.datetime:
    return start + dt.timedelta(minutes=m)


def bound(per_hour: int = 1000, per_day: int = 10_000) -> SpendBound:
    return SpendBound(SpendCaps(per_hour=per_hour, per_day=per_day))


def mono(t: dt.datetime) -> float:
    """The monotonic reading at wall instant ``t`` of a clock that never stepped."""
    return (t - T0).total_seconds()


def admit(b: SpendBound, t: dt.datetime) -> bool:
    return b.admit(t, mono(t))


def counts(b: SpendBound, t: dt.datetime) -> dict[Window, int]:
    return b.counts(t, mono(t))


_attempts = itertools.count(1)


def start_at(b: SpendBound, *instants: dt.datetime, at: float | None = None) -> None:
    """Start rows stamped ``instants``, on a clock that never stepped (``at``:
    the monotonic reading instead, for a wall clock that did)."""
    for t in instants:
        m = mono(t) if at is None else at
        assert b.admit(t, m)
        b.started(f"{next(_attempts):032x}", format_ts(t), t, m)


# ------------------------------------------------------------------ the caps


def test_the_defaults_are_well_above_a_profiles_tens_of_messages_a_day() -> None:
    caps = SpendCaps()
    assert (caps.per_hour, caps.per_day) == (DEFAULT_PER_HOUR, DEFAULT_PER_DAY) == (120, 600)
    assert caps.per_hour > 99 and caps.per_day >= 10 * 50


@pytest.mark.parametrize(
    "caps", [{"per_hour": 0}, {"per_day": 0}, {"per_hour": 100_001}, {"per_day": True}]
)
def test_a_cap_out_of_range_cannot_exist(caps: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="spend_cap_out_of_range"):
        SpendCaps(**caps)  # type: ignore[arg-type]


def test_the_worker_refuses_a_cap_out_of_range_at_its_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kexpr.worker.main import main

    for argv in (["--max-calls-per-hour", "0"], ["--max-calls-per-day", "x"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        assert "--max-calls-per-" in capsys.readouterr().err


def test_supervise_passes_the_caps_on_to_the_worker() -> None:
    from kexpr.ops.supervisor import WorkerSpec, worker_command

    cmd = worker_command(WorkerSpec(Path("/r"), spend=SpendCaps(per_hour=5, per_day=50)))
    assert cmd[cmd.index("--max-calls-per-hour") + 1] == "5"
    assert cmd[cmd.index("--max-calls-per-day") + 1] == "50"
    # The defaults are passed explicitly too: the command line shows the bound.
    cmd = worker_command(WorkerSpec(Path("/r")))
    assert cmd[cmd.index("--max-calls-per-hour") + 1] == str(DEFAULT_PER_HOUR)
    assert cmd[cmd.index("--max-calls-per-day") + 1] == str(DEFAULT_PER_DAY)


def test_the_new_word_is_a_response_word() -> None:
    assert Outcome.SPEND_CAP_REACHED.value == "spend_cap_reached"
    assert Outcome.SPEND_CAP_REACHED in RESPONSE_OUTCOMES


# ---------------------------------------------------------- the windows


def test_the_rolling_hour_is_every_start_row_stamped_after_now_minus_one_hour() -> None:
    b = bound(per_hour=3)
    start_at(b, minutes(0), minutes(20), minutes(40))
    assert counts(b, minutes(40)) == {HOUR: 3, DAY: 3}
    just_before = minutes(60) - dt.timedelta(microseconds=1)
    assert not admit(b, just_before)
    # At exactly one hour the first row is no longer "after now - 1 h".
    assert counts(b, minutes(60))[HOUR] == 2
    assert admit(b, minutes(60))
    assert counts(b, minutes(100))[HOUR] == 0


def test_the_utc_day_starts_at_midnight_and_the_rolling_hour_crosses_it() -> None:
    late = dt.datetime(2026, 11, 30, 23, 30, tzinfo=dt.UTC)
    midnight = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    b = bound(per_hour=1000, per_day=3)
    start_at(b, late, minutes(10, late), minutes(20, late))
    assert not admit(b, midnight - dt.timedelta(microseconds=1))
    assert counts(b, midnight) == {HOUR: 3, DAY: 0}
    assert admit(b, midnight)
    # The hourly cap does not reset at midnight: its window is rolling.
    b = bound(per_hour=3, per_day=1000)
    start_at(b, late, minutes(10, late), minutes(20, late))
    assert not admit(b, midnight)
    assert admit(b, minutes(60, late))


def test_a_step_back_of_the_wall_clock_frees_no_budget() -> None:
    b = bound(per_hour=2, per_day=1000)
    start_at(b, minutes(60), minutes(70))  # 10:00 and 10:10
    assert not admit(b, minutes(70))
    # At 10:20 the wall clock steps back to 09:30 (the monotonic clock goes
    # on): the rows stamped later still count.
    assert b.counts(minutes(30), mono(minutes(80))) == {HOUR: 2, DAY: 2}
    assert not b.admit(minutes(30), mono(minutes(80)))


def test_a_quarantined_files_artifacts_count_in_their_day_not_in_an_hour() -> None:
    index = Index(sealed={"a" * 32: "2026-11-30", "b" * 32: "2026-11-29"})
    b = bound(per_hour=1, per_day=2)
    b.seed(index, T0, mono(T0))
    assert counts(b, T0) == {HOUR: 0, DAY: 1}
    start_at(b, T0)
    assert counts(b, T0) == {HOUR: 1, DAY: 2}
    assert not admit(b, minutes(61))  # the day is full, the hour is not


def _record(n: int, started: dt.datetime) -> AttemptRecord:
    ts = format_ts(started)
    return AttemptRecord(
        attempt_id=f"{n:032x}",
        artifact_key=f"{n:032x}",
        surface="daily.v1",
        mode=SpoolMode.SHADOW,
        started_at_utc=ts,
        deadline_at_utc=format_ts(started + dt.timedelta(seconds=4)),
        segment=ts[:10],
        outcome=Outcome.SHADOW_SELECTED,
    )


def index_of(*instants: dt.datetime) -> Index:
    index = Index()
    for n, t in enumerate(instants):
        index.put(_record(n, t))
    return index


def test_the_count_is_read_off_the_journals_start_rows() -> None:
    index = index_of(minutes(-120), minutes(-30), minutes(-10))
    b = bound(per_hour=2)
    b.seed(index, T0, mono(T0))
    assert counts(b, T0) == {HOUR: 2, DAY: 3}
    assert not admit(b, T0)


# ------------------------------------------------------- the WARNING (Rule 5)


def test_a_warning_once_near_the_cap_and_once_at_it(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.WARNING, logger="kexpr")
    b = bound(per_hour=10)
    assert warn_at(10) == 8
    start_at(b, *(minutes(i) for i in range(7)))
    assert caplog.records == []
    start_at(b, minutes(7))
    start_at(b, minutes(8), minutes(9))  # 9 and 10: no second warning
    assert not admit(b, minutes(10))
    assert not admit(b, minutes(11))  # the second refusal: no second warning
    assert b.refused == 2
    assert [(r.levelno, r.name, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "kexpr.worker", "spend_cap_near window=hour started=8 cap=10"),
        (logging.WARNING, "kexpr.worker", "spend_cap_reached window=hour started=10 cap=10"),
    ]
    assert capsys.readouterr().err.splitlines() == [
        "kexpr worker: spend_cap_near window=hour started=8 cap=10",
        "kexpr worker: spend_cap_reached window=hour started=10 cap=10",
    ]


def test_a_count_that_hovers_at_the_threshold_warns_once_then_rearms_at_half(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="kexpr")
    b = bound(per_hour=10)
    start_at(b, *(minutes(i) for i in range(8)))  # 8 in the hour: warned
    # The first row ages out (7), a new one comes (8): still one warning.
    start_at(b, minutes(60.5))
    assert counts(b, minutes(60.5))[HOUR] == 8
    assert len(caplog.records) == 1
    # The hour drains to half the cap or less: re-armed; the next crossing warns.
    assert counts(b, minutes(64.5))[HOUR] == 4
    start_at(b, minutes(64.5))  # judged at 4 (re-armed), then 5
    start_at(b, minutes(64.6), minutes(64.7), minutes(64.8))
    assert counts(b, minutes(64.8))[HOUR] == 8
    assert [r.getMessage() for r in caplog.records] == [
        "spend_cap_near window=hour started=8 cap=10",
        "spend_cap_near window=hour started=8 cap=10",
    ]


def test_the_day_warns_for_itself(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kexpr")
    b = bound(per_hour=1000, per_day=5)
    start_at(b, *(minutes(10 * i) for i in range(4)))
    assert [r.getMessage() for r in caplog.records] == ["spend_cap_near window=day started=4 cap=5"]


# ---------------------------------------------------- the history (Rule 6)


def test_far_above_is_ten_times_the_median_and_never_below_the_floor() -> None:
    assert RATE_FLOOR == 30
    assert rate_threshold(0.0) == rate_threshold(2.5) == 30
    assert rate_threshold(4.5) == 45
    assert not unusual_rate(29, 0.0) and unusual_rate(30, 0.0)
    assert not unusual_rate(44, 4.5) and unusual_rate(45, 4.5)


def test_the_baseline_is_the_median_of_the_active_hours_before_the_last_hour() -> None:
    day = dt.timedelta(days=1)
    history = [
        *[T0 - 3 * day] * 1,  # an active hour with 1
        *[T0 - 2 * day] * 3,  # 3
        *[T0 - day] * 5,  # 5
        *[T0 - 40 * day] * 99,  # beyond retention: forgotten
    ]
    # The two clock hours the rolling last hour overlaps are left out.
    last_hour = [minutes(-49)] * 40 + [minutes(5)] * 40
    b = bound()
    b.seed(index_of(*history, *last_hour), minutes(10), mono(minutes(10)))
    assert b.baseline(minutes(10)) == (3.0, 3)
    assert counts(b, minutes(10))[HOUR] == 80
    assert unusual_rate(80, 3.0)
    assert bound().baseline(T0) == (0.0, 0)


# ------------------------------------------- the worker, in process (Rule 4)


_requests = itertools.count(1)


def present(w: Worker, root: DataRoot, clock: Clock, n: int) -> str:
    """Artifact ``n``, in a request of its own (a presentation again is a new request)."""
    request_id = submit(root, clock, f"{n:032x}", rid=rid(next(_requests)))
    w.handle_claimed(f"{request_id}.json")
    clock.advance(1.0)
    return request_id


def start_rows(root: DataRoot) -> int:
    return len(Journal(root).load().by_attempt)


def test_past_the_hourly_cap_no_row_no_call_and_dedupe_still_answers(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env, spend=SpendCaps(per_hour=3, per_day=100))
    answered = [response(root, present(w, root, clock, n)) for n in range(1, 6)]
    assert [r.outcome for r in answered] == [Outcome.ACCEPTED] * 3 + [Outcome.SPEND_CAP_REACHED] * 2
    for r in answered[3:]:
        assert (r.status, r.attempt_id) == (ResponseStatus.CANONICAL, None)
    assert len(provider.calls) == 3 and start_rows(root) == 3
    assert w.counters.spend_cap_reached == 2
    # An artifact already attempted is answered as before: no call, no refusal.
    assert response(root, present(w, root, clock, 1)).outcome is Outcome.ALREADY_ATTEMPTED
    w.status.write()
    spend = status(root)["spend"]
    assert isinstance(spend, dict)
    assert {k: spend[k] for k in ("per_hour", "per_day", "last_hour", "today", "refused")} == {
        "per_hour": 3,
        "per_day": 100,
        "last_hour": 3,
        "today": 3,
        "refused": 2,
    }
    # An hour later the window has room: a refused artifact is judged afresh.
    clock.advance(3600)
    assert response(root, present(w, root, clock, 4)).outcome is Outcome.ACCEPTED
    assert len(provider.calls) == 4 and start_rows(root) == 4


def test_a_restart_counts_the_journal_not_the_memory(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    caps = SpendCaps(per_hour=3, per_day=100)
    w = make_worker(root, provider, clock, env, spend=caps)
    for n in range(1, 4):
        assert response(root, present(w, root, clock, n)).outcome is Outcome.ACCEPTED
    # A new worker on the same data root (a restart): the three rows still count.
    again = make_worker(root, provider, clock, env, spend=caps)
    assert again.parts.spend.counts(clock.now, clock.mono) == {HOUR: 3, DAY: 3}
    assert response(root, present(again, root, clock, 4)).outcome is Outcome.SPEND_CAP_REACHED
    assert len(provider.calls) == 3 and start_rows(root) == 3


def test_the_daily_cap_resets_at_midnight_utc_on_the_workers_clock(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    clock.advance((dt.datetime(2026, 11, 30, 23, 59, tzinfo=dt.UTC) - T0).total_seconds())
    w = make_worker(root, provider, clock, env, spend=SpendCaps(per_hour=100, per_day=2))
    outcomes = [response(root, present(w, root, clock, n)).outcome for n in range(1, 4)]
    assert outcomes == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.SPEND_CAP_REACHED]
    clock.advance(60)  # 00:00:03 on 1 December
    assert clock.now.date() == dt.date(2026, 12, 1)
    assert response(root, present(w, root, clock, 3)).outcome is Outcome.ACCEPTED
    assert len(provider.calls) == 3
    assert w.parts.spend.counts(clock.now, clock.mono) == {HOUR: 3, DAY: 1}

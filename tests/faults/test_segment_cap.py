"""Issue 14 item 4: the writer never produces a segment the reader refuses
(`kexpr.spool.journal` rule 8). With a small cap (the constant patched for the test;
the real one is 256 MiB), new attempts are refused once the next start row
would leave no room for the terminal rows of the open attempts, terminal rows
of open attempts are still journaled, the segment stays within the cap and
verifies, and ``kexpr status`` says why new attempts are refused."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from worker_tests.worker_kit import Clock, Provider, make_worker, response, rid, submit

from kexpr.ops.status_cli import HealthVerdict, collect, render
from kexpr.spool import journal as journal_mod
from kexpr.spool.journal import (
    MAX_ROW_BYTES,
    MAX_SEGMENT_BYTES,
    AppendRefused,
    Event,
    Finding,
    Journal,
    Outcome,
    Phase,
    SpoolMode,
    format_ts,
)
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import ResponseStatus
from kexpr.worker import reports

T0 = dt.datetime(2026, 11, 30, 10, 0, 0, tzinfo=dt.UTC)
CAP = 8 * 1024


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(journal_mod, "MAX_SEGMENT_BYTES", CAP)
    return CAP


def _start(j: Journal, n: int):
    with j.locked():
        return j.append_start(
            artifact_key=f"{n:032x}",
            surface="adaptive.dualcoachtest.card.v1",
            mode=SpoolMode.ENABLED,
            attempt_id=f"{n:032x}",
            started_at=T0,
            deadline_at_utc=format_ts(T0 + dt.timedelta(seconds=4)),
        )


def _segment(root: DataRoot) -> Path:
    return root.outcomes / "2026-11-30.jsonl"


def test_new_attempts_stop_short_of_the_cap_and_terminals_still_fit(
    root: DataRoot, small_cap: int
) -> None:
    j = Journal(root)
    j.load()
    started = []
    with pytest.raises(AppendRefused) as e:
        for n in range(1, 1000):  # the old writer grew the segment past the cap
            started.append(_start(j, n))
    assert e.value.finding is Finding.SEGMENT_FULL
    assert started, "at least one attempt fits"
    # Every open attempt still gets its terminal row (the longest outcome).
    for rec in started:
        with j.locked():
            j.append_terminal(rec, Phase.OPEN, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, T0)
    assert _segment(root).stat().st_size <= small_cap
    index = Journal(root).load()  # the reader accepts what the writer wrote
    assert len(index.by_attempt) == len(started) and not list(index.open_attempts())
    # A refusal writes nothing; filling up again with the reservations freed
    # still never crosses the cap.
    size = _segment(root).stat().st_size
    more = []
    with pytest.raises(AppendRefused):
        for n in range(1000, 2000):
            more.append(_start(j, n))
            size = _segment(root).stat().st_size
    assert _segment(root).stat().st_size == size
    for rec in more:
        with j.locked():
            j.append_terminal(rec, Phase.OPEN, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, T0)
    assert _segment(root).stat().st_size <= small_cap
    Journal(root).load()


def test_the_reservation_survives_a_reload(root: DataRoot, small_cap: int) -> None:
    """Open attempts counted from disk at load: a restarted writer keeps the
    room their terminal rows need."""
    j = Journal(root)
    j.load()
    started = []
    with pytest.raises(AppendRefused):
        for n in range(1, 1000):
            started.append(_start(j, n))
    j2 = Journal(root)
    j2.load()
    with pytest.raises(AppendRefused):
        _start(j2, 5000)
    for rec in started:
        with j2.locked():
            j2.append_terminal(
                j2.index.by_attempt[rec.attempt_id],
                Phase.OPEN,
                Event.EXPIRE,
                Outcome.CLAIM_EXPIRED_CANONICAL,
                T0,
            )
    Journal(root).load()


def test_rows_fit_the_reservation_unit() -> None:
    # The reservation per open attempt must hold the longest terminal row;
    # rows are ~600 bytes (measured in the other tests' segments).
    assert 700 < MAX_ROW_BYTES and MAX_SEGMENT_BYTES == 256 * 1024 * 1024


def test_the_worker_refuses_new_attempts_canonical_and_status_says_why(
    root: DataRoot, small_cap: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway_shim.identity import load_or_create_key

    load_or_create_key(root)  # the key of the gateway that writes these requests
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    env = {"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin"}
    provider, clock = Provider(), Clock()
    w = make_worker(root, provider, clock, env)
    answers = []
    for n in range(1, 40):
        r = submit(root, clock, akey=f"{n:032x}", rid=rid(n), mode="enabled")
        w.handle_claimed(f"{r}.json")
        answers.append(response(root, r))
        if answers[-1].outcome is Outcome.JOURNAL_UNAVAILABLE:
            break
    last = answers[-1]
    assert (last.status, last.outcome) == (
        ResponseStatus.CANONICAL,
        Outcome.JOURNAL_UNAVAILABLE,
    )
    calls = len(provider.calls)
    assert calls == len(answers) - 1  # no call for the refused attempt
    assert w.quarantine is None and w.journal_ok and w.refusing == "segment_full"
    # The shims' reports of the accepted (open) attempts are still journaled.
    from kexpr.spool.fsio import publish
    from kexpr.spool.messages import SPOOL_VERSION, SpoolReport

    names = []
    for a in answers[:-1]:
        assert a.attempt_id is not None
        rep = SpoolReport(
            spool_version=SPOOL_VERSION, attempt_id=a.attempt_id, outcome=Outcome.SELECTED
        )
        publish(root.tmp, root.reports / f"{a.attempt_id}.json", rep.to_bytes())
        names.append(f"{a.attempt_id}.json")
    reports.handle_reports(w.parts, names)
    index = Journal(root).load()
    assert not list(index.open_attempts()) and len(index.by_attempt) == calls
    assert _segment(root).stat().st_size <= small_cap
    w.status.state = "ready"
    w.status.write()
    assert json.loads(root.status_file.read_bytes())["refusing"] == "segment_full"
    report = collect(root, alive=lambda pid: True, now=clock.now)
    assert report.verdict is HealthVerdict.REFUSING
    assert "refusing    new attempts: segment_full" in render(report)

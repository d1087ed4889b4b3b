"""The spend bound (`kexpr.worker.spend`) on real processes: neither an operator's
clear nor an excursion of the worker's wall clock hands out budget the journal
has spent (docs/faults.md, "A host that presents new artifacts in a loop";
docs/lifecycle.md, "Time").

Caps of 5 an hour and 7 a day, as an operator would set them to watch the bound;
five styled artifacts paid (one wire request each), then only new artifacts
(distinct schedule keys), presented by the real shim in this process to a worker
process calling the loopback fake of the API through its CONNECT proxy. What is
asserted is what an operator can see: the fake API's wire requests, the journal's
start rows and ``kexpr status --json``'s ``spend.last_hour``. The same rules
through the worker's injected clock: tests/worker_tests/test_spend_derivation.py.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from conftest import journal_rows, start_supervised_worker
from crash.faketime_kit import faked_worker, libfaketime, set_offset, stop_worker
from fakeapi import FakeOpenAI
from kit.bodies import present_styled
from kit.poll import until
from ops_tests.ops_support import kexpr

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)
from kexpr.spool.canonical import format_ts, parse_ts
from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

pytestmark = pytest.mark.e2e

PER_HOUR, PER_DAY = 5, 7
CAP_ARGS = ("--max-calls-per-hour", str(PER_HOUR), "--max-calls-per-day", str(PER_DAY))
HOUR = dt.timedelta(hours=1)
# How long the worker's clock stays ahead, at least (issue 43's excursion).
EXCURSION_S = 3.5


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _coordinator(data_root: Path) -> KoreanExpressionCoordinator:
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.SHADOW, weekly=True))
    return KoreanExpressionCoordinator(cfg, data_root)


def _pay_the_hours_cap(coord: KoreanExpressionCoordinator, keys: Iterator[str]) -> None:
    outcomes = [present_styled(coord, next(keys)).outcome for _ in range(PER_HOUR + 1)]
    assert outcomes == [Outcome.SHADOW_SELECTED] * PER_HOUR + [Outcome.SPEND_CAP_REACHED]


def _new_artifacts_are_refused(coord: KoreanExpressionCoordinator, keys: Iterator[str]) -> None:
    for _ in range(3):
        cand = present_styled(coord, next(keys))
        assert (cand.outcome, cand.status) == (
            Outcome.SPEND_CAP_REACHED,
            CandidateStatus.CANONICAL,
        )
        assert cand.attempt_id is None  # no start row


def _start_rows(data_root: Path) -> list[dict[str, Any]]:
    return [r for r in journal_rows(data_root) if r["outcome"] == "attempt_started"]


def _in_the_last_hour(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    since = _now() - HOUR
    return [r for r in rows if parse_ts(r["started_at_utc"]) > since]


def _heartbeat(root: DataRoot) -> str:
    doc = json.loads(root.status_file.read_bytes())
    return str(doc["heartbeat_at_utc"])


def _last_hour_in_status(root: DataRoot) -> object:
    """``kexpr status --json``'s ``spend.last_hour``, once the worker has written its
    status file after everything presented so far was answered, on a right clock (a
    file written while its clock was ahead is stamped days later, and says what the
    count was then)."""
    answered = _now()
    since, before = format_ts(answered), format_ts(answered + HOUR)

    def written_since() -> bool:
        return since <= _heartbeat(root) < before

    assert until(written_since, 20, tolerate=(OSError, ValueError))
    out = kexpr("status", "--data-root", root.root, "--json")
    assert out.stdout, out.stderr
    return json.loads(out.stdout)["worker"]["spend"]["last_hour"]


def _quarantine(root: DataRoot) -> object:
    return json.loads(root.status_file.read_bytes()).get("quarantine")


def test_a_clear_after_a_restart_in_quarantine_pays_nothing_more(
    data_root: Path, fake_api: FakeOpenAI
) -> None:
    """Issue 43 case 3. A worker that started in quarantine counted nothing (the
    journal did not verify), and the clear did not count the journal it had just
    verified: five more were paid after each clear, 15 start rows in one hour.
    The cause here: a segment restored with the wrong mode (0644), found at the
    start-up (``unsafe_file``), put right by the operator, who then clears."""
    root = DataRoot(data_root)
    keys = (f"sched-clear-{n}" for n in itertools.count())
    w = start_supervised_worker(data_root, fake_api, args=CAP_ARGS)
    try:
        with closing(_coordinator(data_root)) as coord:
            _pay_the_hours_cap(coord, keys)
    finally:
        w.stop()
    segments = sorted(root.outcomes.glob("*.jsonl"))
    assert segments and len(fake_api.requests) == PER_HOUR
    for _ in range(2):
        for seg in segments:
            os.chmod(seg, 0o644)  # the slip, before a restart
        w = start_supervised_worker(data_root, fake_api, args=CAP_ARGS)
        try:
            assert until(
                lambda: _quarantine(root) == "unsafe_file", 10, tolerate=(OSError, ValueError)
            )
            for seg in segments:
                os.chmod(seg, 0o600)
            out = kexpr("quarantine", "clear", "--data-root", data_root, "--wait", "30", "--json")
            assert out.returncode == 0, out.stdout + out.stderr
            assert json.loads(out.stdout) == {
                "result": "cleared",
                "was": "unsafe_file",
                "why": None,
            }
            with closing(_coordinator(data_root)) as coord:
                _new_artifacts_are_refused(coord, keys)
            assert len(fake_api.requests) == PER_HOUR
            starts = _start_rows(data_root)
            assert len(starts) == len(_in_the_last_hour(starts)) == PER_HOUR
            assert _last_hour_in_status(root) == PER_HOUR
        finally:
            w.stop()


@pytest.mark.skipif(libfaketime() is None, reason="libfaketime is not installed (apt: faketime)")
def test_a_clock_excursion_two_days_ahead_frees_no_budget(
    data_root: Path, fake_api: FakeOpenAI, tmp_path: Path
) -> None:
    """Issue 43 case 4. The worker's wall clock two days ahead for a few seconds
    (libfaketime; its monotonic clock untouched), then right again, twice, while
    new artifacts keep coming. The hour's edge moved with the clock: the status
    writer forgot the five paid rows for good, five more were paid after each
    excursion, and ``status`` said ``last_hour 5`` while the journal held 15."""
    lib = libfaketime()
    assert lib is not None
    stamp = tmp_path / "faketime"
    set_offset(stamp, "+0")
    root = DataRoot(data_root)
    root.ensure()
    keys = (f"sched-step-{n}" for n in itertools.count())
    worker = faked_worker(data_root, fake_api, lib, stamp, CAP_ARGS)
    try:
        assert wait_ready(root, 30, pid=worker.pid)
        with closing(_coordinator(data_root)) as coord:
            _pay_the_hours_cap(coord, keys)
            for _ in range(2):
                set_offset(stamp, "+2d")
                ahead = format_ts(_now() + dt.timedelta(days=1))
                began = time.monotonic()
                # New artifacts keep coming, until the worker has written its status on
                # the clock ahead: each is canonical with no call and no row,
                # ``clock_skew`` (the shim stamps it on the right clock), or where a
                # libfaketime build without threads lets one read the real time
                # (`crash.faketime_kit`), judged on that reading, ``spend_cap_reached``.
                while time.monotonic() - began < EXCURSION_S or _heartbeat(root) < ahead:
                    assert time.monotonic() - began < 30, "no status written on the clock ahead"
                    cand = present_styled(coord, next(keys))
                    assert cand.status is CandidateStatus.CANONICAL
                    assert cand.outcome in (Outcome.CLOCK_SKEW, Outcome.SPEND_CAP_REACHED)
                    assert cand.attempt_id is None
                    time.sleep(0.2)
                set_offset(stamp, "+0")
                _new_artifacts_are_refused(coord, keys)
                assert len(fake_api.requests) == PER_HOUR
                starts = _start_rows(data_root)
                assert len(starts) == len(_in_the_last_hour(starts)) == PER_HOUR
                assert _last_hour_in_status(root) == PER_HOUR
        assert json.loads(root.status_file.read_bytes())["clock_step_observed"] is True
    finally:
        stop_worker(worker)

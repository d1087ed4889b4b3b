"""Issue 13 "Why" 1-4 and issue 14 item 7 (litter), black-box: a real ``kexpr
supervise`` and its worker, a gateway process importing `gateway_shim` without
the key (`shim_driver.py`), and the loopback fake of the API behind its CONNECT
proxy. The lifecycle rules are in `kexpr.spool.lifecycle`.

Clock steps on real processes need libfaketime (`crash.faketime_kit`; skipped with the
reason where it is not installed); the same rules are proved through the worker's
injected clock in tests/worker_tests/test_daemon.py.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RunningWorker, start_supervised_worker
from crash.faketime_kit import faked_worker, libfaketime, stop_worker
from crash.shim_driver import artifact_fields
from fakeapi import FakeOpenAI, compose_reply, default_style
from kit.poll import until
from spool_tests.journal_support import hand_rows, write_segment

from gateway_shim.identity import artifact_key, load_or_create_key
from kexpr.spool.fsio import publish
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import RESPONSE_TTL
from kexpr.worker.daemon import wait_ready

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
GATEWAY_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


class Shim:
    """One gateway process (tests/crash/shim_driver.py)."""

    def __init__(self, root: Path) -> None:
        self.p = subprocess.Popen(
            [sys.executable, str(HERE / "shim_driver.py"), "--data-root", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=GATEWAY_ENV,
            text=True,
            bufsize=1,
        )
        assert self.line()["kind"] == "ready"

    def send(self, **cmd: Any) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()

    def line(self) -> dict[str, Any]:
        assert self.p.stdout is not None
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        if self.p.stdin is not None:
            self.p.stdin.close()
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        if self.p.stdout is not None:
            self.p.stdout.close()


@pytest.fixture
def shim_factory(data_root: Path) -> Iterator[Callable[[], Shim]]:
    made: list[Shim] = []

    def make() -> Shim:
        made.append(Shim(data_root))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _worker_pid(w: RunningWorker) -> int:
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            kids = (
                Path(f"/proc/{w.supervisor.pid}/task/{w.supervisor.pid}/children")
                .read_text()
                .split()
            )
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.02)
    raise AssertionError("no worker")


def _kill_and_wait_restart(w: RunningWorker) -> float:
    """SIGKILL the worker; the supervisor restarts it. Returns seconds to ready."""
    old = _worker_pid(w)
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)
    end = t0 + 30
    new = old
    while new == old and time.monotonic() < end:
        time.sleep(0.01)
        try:
            new = _worker_pid(w)
        except AssertionError:
            new = old
    assert new != old and wait_ready(w.root, 30, pid=new, poll_s=0.01)
    return time.monotonic() - t0


def _outcomes(root: DataRoot) -> list[str | None]:
    idx = Journal(root, create_lock=False).load()
    return [r.outcome.value if r.outcome else None for r in idx.by_attempt.values()]


def _akey(root: DataRoot, event: str) -> str:
    return artifact_key(load_or_create_key(root), artifact_fields(event))


def test_why1_sigkill_during_the_call_restart_before_the_deadline_is_canonical_publishable(
    data_root: Path, fake_api: FakeOpenAI, shim_factory: Callable[[], Shim]
) -> None:
    """The worker dies 0.1 s into a slow call; the supervisor has the next one
    ready before the 4 s deadline. The request that started the attempt is
    answered canonical *with* publication permitted (never in_flight), the
    attempt ends claim_expired_canonical, and there is never a second request."""
    fake_api.behaviour = compose_reply(default_style, delay_s=3.5)
    w = start_supervised_worker(data_root, fake_api)
    try:
        shim = shim_factory()
        shim.send(id=1, event="evt-why1", mode="enabled", host="selected")
        assert fake_api.wait_for_requests(1, 3.0)
        time.sleep(0.1)
        ready_s = _kill_and_wait_restart(w)
        got = shim.line()
        assert got["kind"] == "presented"
        assert got["permitted"] is True and got["status"] == "canonical", got
        assert got["outcome"] != "in_flight"
        if got["elapsed"] < 4.0:  # answered by the restarted worker, before the deadline
            assert got["outcome"] in ("already_attempted", "claim_expired_canonical"), got
        assert ready_s < 4.0 or got["outcome"] == "timeout"
        # Any later presentation: canonical, publishable, no call.
        shim.send(id=2, event="evt-why1", mode="enabled", host="selected")
        again = shim.line()
        assert again["permitted"] is True and again["status"] == "canonical"
        assert _outcomes(w.root) == ["claim_expired_canonical"]
        assert len(fake_api.requests) == 1
    finally:
        w.stop()


def test_why2_a_report_after_a_worker_restart_is_journaled_as_reported(
    data_root: Path, fake_api: FakeOpenAI, shim_factory: Callable[[], Shim]
) -> None:
    """The worker dies after its accepted response and before the host's
    report; the restarted worker knows from responses/ that the attempt was
    answered, and journals the report that arrives later (not canonical)."""
    w = start_supervised_worker(data_root, fake_api)
    try:
        shim = shim_factory()
        shim.send(id=1, event="evt-why2", mode="enabled", commit_delay=2.5, host="selected")
        got = shim.line()
        assert got["outcome"] == "accepted" and got["status"] == "selected"
        _kill_and_wait_restart(w)
        assert shim.line()["kind"] == "reported"
        assert until(lambda: _outcomes(w.root) == ["selected"], 10), _outcomes(w.root)
        assert until(lambda: not os.listdir(w.root.responses), 5)
        # The worker removes a report after its row is durable: a moment later.
        assert until(lambda: not os.listdir(w.root.reports), 5), os.listdir(w.root.reports)
        assert len(fake_api.requests) == 1
    finally:
        w.stop()


def test_why3_a_report_whose_row_cannot_be_written_is_kept_for_the_next_worker(
    data_root: Path, fake_api: FakeOpenAI, shim_factory: Callable[[], Shim]
) -> None:
    """The append of the report's terminal row fails (here: the segment was
    replaced by an identical copy, a different inode: append_conflict). The
    worker quarantines and keeps the report; the next worker journals it."""
    w = start_supervised_worker(data_root, fake_api)
    try:
        shim = shim_factory()
        shim.send(id=1, event="evt-why3", mode="enabled", commit_delay=1.5, host="selected")
        got = shim.line()
        assert got["outcome"] == "accepted"
        (segment,) = [n for n in os.listdir(w.root.outcomes) if n.endswith(".jsonl")]
        path = w.root.outcomes / segment
        copy = w.root.outcomes / ".copy"
        shutil.copyfile(path, copy)
        os.chmod(copy, 0o600)
        os.rename(copy, path)
        reported = shim.line()
        assert reported["kind"] == "reported"

        def quarantined() -> bool:
            try:
                return (
                    json.loads(w.root.status_file.read_bytes()).get("quarantine")
                    == "append_conflict"
                )
            except (OSError, ValueError):
                return False

        assert until(quarantined, 10)
        assert os.listdir(w.root.reports) == [f"{reported['attempt_id']}.json"]
        assert _outcomes(w.root) == [None]
        _kill_and_wait_restart(w)
        assert until(lambda: _outcomes(w.root) == ["selected"], 10), _outcomes(w.root)
        assert until(lambda: not os.listdir(w.root.reports), 5), os.listdir(w.root.reports)
    finally:
        w.stop()


def test_responses_nobody_collects_are_removed(data_root: Path, fake_api: FakeOpenAI) -> None:
    """Issue 14 item 7: junk requests are answered canonical (invalid_request)
    and their responses, never collected, are removed after RESPONSE_TTL."""
    w = start_supervised_worker(data_root, fake_api)
    try:
        now = dt.datetime.now(dt.UTC)
        for n in range(40):
            rid = f"{n:032x}"
            junk = {
                "spool_version": "kexpr-spool-v1",
                "request_id": rid,
                "submitted_at_utc": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "deadline_at_utc": (now + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "mode": "shadow",
                "capsule": {},
            }
            publish(w.root.tmp, w.root.requests / f"{rid}.json", json.dumps(junk).encode())
        assert until(lambda: len(os.listdir(w.root.responses)) == 40, 10)
        assert until(lambda: os.listdir(w.root.responses) == [], RESPONSE_TTL.total_seconds() + 10)
        assert fake_api.requests == []
    finally:
        w.stop()


@pytest.mark.skipif(libfaketime() is None, reason="libfaketime is not installed (apt: faketime)")
@pytest.mark.parametrize("step", ["+40d", "-1h", "+1h"])
def test_why4_a_real_worker_under_a_stepped_clock(
    data_root: Path,
    fake_api: FakeOpenAI,
    shim_factory: Callable[[], Shim],
    tmp_path: Path,
    step: str,
) -> None:
    """A worker process whose wall clock steps (libfaketime, monotonic clock
    untouched) never calls twice for an artifact presented before the step,
    never empties the journal, and says so in its status."""
    lib = libfaketime()
    assert lib is not None
    stamp = tmp_path / "faketime"
    stamp.write_text("+0\n")
    root = DataRoot(data_root)
    root.ensure()
    worker = faked_worker(data_root, fake_api, lib, stamp)
    try:
        assert wait_ready(root, 30, pid=worker.pid)
        shim = shim_factory()
        shim.send(id=1, event="evt-why4", mode="shadow", host="selected")
        assert shim.line()["outcome"] == "shadow_selected"
        assert until(lambda: _outcomes(root) == ["shadow_selected"], 10)
        stamp.write_text(f"{step}\n")
        time.sleep(3)  # a few rescan ticks under the stepped clock
        shim.send(id=2, event="evt-why4-new", mode="shadow", host="selected")
        assert shim.line()["status"] == "canonical"
        stamp.write_text("+0\n")
        time.sleep(2)
        shim.send(id=3, event="evt-why4", mode="shadow", host="selected")
        assert shim.line()["outcome"] == "already_attempted"
        status = json.loads(root.status_file.read_bytes())
        assert status["clock_step_observed"] is True
        assert os.listdir(root.outcomes)
        assert fake_api.count_for(_akey(root, "evt-why4")) == 1
        assert until(lambda: os.listdir(root.responses) == [], RESPONSE_TTL.total_seconds() + 5)
    finally:
        stop_worker(worker)


@pytest.mark.skipif(libfaketime() is None, reason="libfaketime is not installed (apt: faketime)")
def test_a_restart_40_days_ahead_keeps_the_dedupe_history(
    data_root: Path, fake_api: FakeOpenAI, shim_factory: Callable[[], Shim], tmp_path: Path
) -> None:
    """Artifacts paid on three days; the worker restarts with its clock 40 days ahead
    (no running process saw a step), then with it right again. The two older segments
    were removed at that start before (the newest row's segment alone is kept), and
    their artifacts were paid a second time. Now retention needs the clock, the
    journal's newest row and `retention.json` to agree (docs/lifecycle.md): nothing is
    removed, and no artifact is paid twice."""
    lib = libfaketime()
    assert lib is not None
    stamp = tmp_path / "faketime"
    root = DataRoot(data_root)
    root.ensure()
    today = dt.datetime.now(dt.UTC).date()
    for n, event in enumerate(("evt-day-1", "evt-day-2")):
        day = (today - dt.timedelta(days=2 - n)).isoformat()
        rows = hand_rows(
            _akey(root, event), f"{n + 1:032x}", day, ["shadow_selected"], surface="weekly.v1"
        )
        write_segment(root, f"{day}.jsonl", rows)

    def run(offset: str, presentations: list[tuple[str, str]]) -> None:
        stamp.write_text(f"{offset}\n")
        worker = faked_worker(data_root, fake_api, lib, stamp)
        try:
            assert wait_ready(root, 30, pid=worker.pid)
            time.sleep(2)  # housekeeping ticks (retention runs there) on this clock
            shim = shim_factory()
            for n, (event, outcome) in enumerate(presentations):
                shim.send(id=n, event=event, mode="shadow", host="selected")
                assert shim.line()["outcome"] == outcome, (offset, event)
        finally:
            stop_worker(worker)

    run("+0", [("evt-day-3", "shadow_selected")])
    segments = sorted(n for n in os.listdir(root.outcomes) if n.endswith(".jsonl"))
    assert len(segments) == 3
    # The shim's clock is right and the worker's 40 days ahead: the request is skewed
    # (no call); what matters is what the worker did to the journal at its start.
    run("+40d", [("evt-ahead", "clock_skew")])
    assert set(segments) <= set(os.listdir(root.outcomes))
    run("+0", [(e, "already_attempted") for e in ("evt-day-1", "evt-day-2", "evt-day-3")])
    assert set(segments) <= set(os.listdir(root.outcomes))
    assert [fake_api.count_for(_akey(root, e)) for e in ("evt-day-1", "evt-day-2")] == [0, 0]
    assert fake_api.count_for(_akey(root, "evt-day-3")) == 1

"""Issue 14 item 2: one bad spool entry harms only itself.

An error while listing, claiming, reading or answering one entry leaves that
entry canonical (or untouched) and is counted (`kexpr.worker.daemon.Fault`, shown by
``kexpr status``); EMFILE/ENFILE/ENOMEM make the scan back off and retry; the
worker never exits with a traceback for them. In process with the provider seam
(tests/worker_tests/worker_kit.py), and once as real processes.
"""

from __future__ import annotations

import concurrent.futures as cf
import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import start_supervised_worker
from fakeapi import FakeOpenAI
from kit.poll import wait_file
from worker_tests.worker_kit import (
    Clock,
    make_worker,
    outcomes,
    response,
    rid,
    submit,
)

from kexpr.spool.fsio import publish
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import Outcome
from kexpr.worker import daemon, listing, scan
from kexpr.worker.daemon import Worker


@pytest.fixture
def pool() -> Iterator[cf.ThreadPoolExecutor]:
    p = cf.ThreadPoolExecutor(max_workers=2)
    yield p
    p.shutdown(wait=True)


def _as_request(root: DataRoot, name: str) -> None:
    """Move a claimed request back to requests/, as a shim would have left it."""
    os.rename(root.claimed / name, root.requests / name)


def _scan(w: Worker, pool: cf.ThreadPoolExecutor) -> None:
    scan.scan(w.parts, pool)
    # Wait for the jobs the scan dispatched.
    pool.submit(lambda: None).result()
    while w.parts.attempts.busy:
        time.sleep(0.01)


def test_a_directory_at_the_claim_target_answers_only_that_request_canonical(
    root, provider, env, pool
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    bad = submit(root, clock, akey="b" * 32, rid=rid(1))
    _as_request(root, f"{bad}.json")
    good = submit(root, clock, akey="c" * 32, rid=rid(2))
    _as_request(root, f"{good}.json")
    # Planted by a process with the gateway's UID: a directory where the claim goes.
    os.mkdir(root.claimed / f"{bad}.json", 0o700)
    _scan(w, pool)  # the old code: IsADirectoryError out of _scan (the worker died)
    r = response(root, bad)
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.INVALID_REQUEST)
    assert response(root, good).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 1 and provider.calls[0]["artifact_key"] == "c" * 32
    assert w.counters.faults.get("claim_failed") == 1
    assert not (root.requests / f"{bad}.json").exists()
    # The planted directory is counted once, then skipped while it stays.
    before = dict(w.counters.faults), dict(w.counters.unsafe)
    _scan(w, pool)
    _scan(w, pool)
    assert (dict(w.counters.faults), dict(w.counters.unsafe)) == before
    assert w.quarantine is None and w.journal_ok


def test_eio_on_one_claim_rename_answers_that_request_canonical(
    root, provider, env, pool, monkeypatch
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    bad = submit(root, clock, akey="b" * 32, rid=rid(1))
    _as_request(root, f"{bad}.json")
    good = submit(root, clock, akey="c" * 32, rid=rid(2))
    _as_request(root, f"{good}.json")
    real_claim = scan.claim

    def failing_claim(src: Path, dst: Path) -> bool:
        if src.name == f"{bad}.json":
            raise OSError(errno.EIO, "injected")
        return real_claim(src, dst)

    monkeypatch.setattr(scan, "claim", failing_claim)
    _scan(w, pool)
    r = response(root, bad)
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.INVALID_REQUEST)
    assert response(root, good).status is ResponseStatus.ACCEPTED
    assert w.counters.faults == {"claim_failed": 1}
    assert outcomes(root) == [None]  # only the good one started an attempt


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOMEM])
def test_resource_exhaustion_while_listing_backs_off_and_the_next_scan_serves(
    root, provider, env, pool, monkeypatch, code
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    good = submit(root, clock, rid=rid(2))
    _as_request(root, f"{good}.json")
    real = listing.list_dir
    failures = [OSError(code, "injected")]

    def failing_listing(d: Path) -> list[str]:
        if failures:
            raise failures.pop()
        return real(d)

    monkeypatch.setattr(listing, "list_dir", failing_listing)
    _scan(w, pool)  # the old code: the OSError escaped _scan
    assert w.counters.faults == {"resource_exhausted": 1}
    assert (root.requests / f"{good}.json").exists()  # untouched, not dropped
    assert not (root.responses / f"{good}.json").exists()
    _scan(w, pool)
    assert response(root, good).status is ResponseStatus.ACCEPTED
    assert w.quarantine is None


def test_emfile_listing_reports_backs_off_instead_of_quarantine(
    root, provider, env, monkeypatch
) -> None:
    w = make_worker(root, provider, Clock(), env)

    def failing(path: Path) -> list[str]:
        raise OSError(errno.EMFILE, "injected")

    monkeypatch.setattr(listing, "list_dir", failing)
    scan.scan_reports(w.parts)  # the old code: quarantine io_error until restarted
    assert w.journal_ok and w.quarantine is None
    assert w.counters.faults == {"resource_exhausted": 1}


def test_emfile_while_reading_a_claimed_request_leaves_it_for_the_next_scan(
    root, provider, env, pool, monkeypatch
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    good = submit(root, clock, rid=rid(2))
    real = scan.read_private_identified
    failures = [OSError(errno.EMFILE, "injected")]

    def reading(path: Path, **kw: object):
        if failures:
            raise failures.pop()
        return real(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(scan, "read_private_identified", reading)
    _scan(w, pool)  # the old code: answered invalid_request and dropped the request
    assert not (root.responses / f"{good}.json").exists()
    assert (root.claimed / f"{good}.json").exists()
    assert w.counters.invalid_requests == 0 and w.counters.faults == {"resource_exhausted": 1}
    _scan(w, pool)
    assert response(root, good).status is ResponseStatus.ACCEPTED


def test_an_error_answering_one_entry_is_counted(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    rid1 = submit(root, clock, rid=rid(1))
    publish(root.tmp, root.responses / f"{rid1}.json", b"planted")
    w.handle_claimed(f"{rid1}.json")
    # The accepted answer and then the canonical one both met the planted file.
    assert w.counters.faults == {"respond_failed": 2}
    # Not published, so not answered: the attempt ends now (issue 21 item 1),
    # instead of waiting for a report that cannot come.
    (rec,) = Journal(root).load().by_attempt.values()
    assert rec.outcome is Outcome.CLAIM_EXPIRED_CANONICAL and w.parts.attempts.held == {}


def test_a_failed_inbox_watch_falls_back_to_the_rescan_timer(
    root, provider, env, monkeypatch
) -> None:
    import threading

    clock = Clock()
    w = make_worker(root, provider, clock, env, rescan_interval_s=0.05)

    def no_watch(*a: object) -> None:
        raise OSError(errno.EMFILE, "injected")

    monkeypatch.setattr(daemon, "_InboxWatch", no_watch)
    monkeypatch.setattr(Worker, "prepare", lambda self: None)
    good = submit(root, clock, rid=rid(2))
    _as_request(root, f"{good}.json")
    stop = threading.Event()
    t = threading.Thread(target=lambda: w.serve(stop))
    t.start()
    try:
        deadline = time.monotonic() + 20
        while not (root.responses / f"{good}.json").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        t.join(20)
    assert response(root, good).status is ResponseStatus.ACCEPTED
    assert w.counters.faults.get("watch_failed") == 1


# ------------------------------------------------------------- real processes


def _request_bytes(akey: str, rid_: str) -> bytes:
    import datetime as dt

    from kit.spool import STYLED_SLOT

    from kexpr.spool.contract import Capsule
    from kexpr.spool.journal import format_ts
    from kexpr.spool.messages import SPOOL_VERSION, SpoolRequest

    now = dt.datetime.now(dt.UTC)
    return SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=rid_,
        submitted_at_utc=format_ts(now),
        deadline_at_utc=format_ts(now + dt.timedelta(seconds=4)),
        mode=SpoolMode.SHADOW,
        capsule=Capsule(
            schema_version="korean-expression-v4",
            surface="weekly.v1",
            artifact_key=akey,
            slots=(STYLED_SLOT,),
        ),
    ).to_bytes()


@pytest.mark.e2e
def test_a_planted_claim_directory_does_not_crash_loop_the_real_worker(
    data_root: Path, fake_api: FakeOpenAI
) -> None:
    w = start_supervised_worker(data_root, fake_api)
    try:
        root = w.root
        pid = json.loads(root.status_file.read_bytes())["pid"]
        os.mkdir(root.claimed / f"{rid(1)}.json", 0o700)
        publish(root.tmp, root.requests / f"{rid(1)}.json", _request_bytes("b" * 32, rid(1)))
        assert wait_file(root.responses / f"{rid(1)}.json")
        publish(root.tmp, root.requests / f"{rid(2)}.json", _request_bytes("c" * 32, rid(2)))
        assert wait_file(root.responses / f"{rid(2)}.json")
        got = json.loads((root.responses / f"{rid(2)}.json").read_bytes())
        assert got["status"] == "accepted"
        end = time.monotonic() + 10
        while time.monotonic() < end:
            status = json.loads(root.status_file.read_bytes())
            if status.get("faults", {}).get("claim_failed") == 1:
                break
            time.sleep(0.05)
        # The same worker process served both: no crash, no restart.
        assert status["pid"] == pid and status["state"] == "ready"
        assert status["faults"]["claim_failed"] == 1 and status["quarantine"] is None
        shown = subprocess.run(
            [sys.executable, "-m", "kexpr.ops.cli", "status", "--data-root", str(data_root)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "claim_failed 1" in shown.stdout
    finally:
        w.stop()

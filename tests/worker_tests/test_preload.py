"""`kexpr.worker.preload`: the journal verified in a forked child during start-up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from spool_tests.journal_support import hand_rows, write_segment

from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from kexpr.worker import preload


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    r = DataRoot(tmp_path / "root")
    r.ensure()
    write_segment(
        r,
        "2026-11-30.jsonl",
        hand_rows("3" * 64, "4" * 32, "2026-11-30", ["selected"], mode="enabled"),
    )
    return r


def test_the_child_verifies_and_the_parent_adopts(root: DataRoot) -> None:
    p = preload.start(root)
    assert p is not None
    blob = p.result()
    assert blob is not None
    j = Journal(root)
    assert j.adopt(blob) and j.index.knows("3" * 64)
    assert p.result() is None  # once


def test_a_child_that_finds_something_sends_nothing(root: DataRoot) -> None:
    seg = root.outcomes / "2026-11-30.jsonl"
    seg.write_bytes(seg.read_bytes()[:-1])  # torn tail: the parent's own load reports it
    p = preload.start(root)
    assert p is not None and p.result() is None


def test_a_missing_data_root_sends_nothing(tmp_path: Path) -> None:
    p = preload.start(DataRoot(tmp_path / "nowhere"))
    assert p is not None and p.result() is None
    assert not (tmp_path / "nowhere").exists()  # the child created nothing


def test_a_child_past_the_timeout_is_killed_and_reaped(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child that never answers
        os.close(r)
        try:
            import time

            time.sleep(60)
        finally:
            os._exit(0)
    os.close(w)
    p = preload.Preload(pid, r)
    assert p.result(timeout_s=0.2) is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)  # already reaped


def test_worker_prefers_its_own_load_when_the_journal_changed(root: DataRoot) -> None:
    """A file that changed after the child read it: the worker loads by itself."""
    import datetime as dt

    from kexpr.worker.daemon import Worker

    p = preload.start(root)
    assert p is not None
    blob = p.result()
    assert blob is not None
    write_segment(
        root, "2026-11-29.jsonl", hand_rows("1" * 64, "2" * 32, "2026-11-29", ["timeout"])
    )

    given: bytes = blob

    class Given:
        def result(self) -> bytes:
            return given

    w = Worker(
        root,
        environ={"PATH": "/usr/bin"},
        client_factory=lambda: None,
        clock=lambda: dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC),
        preload=Given(),  # type: ignore[arg-type]
    )
    w.prepare()
    assert w.journal_ok and all(w.journal.index.knows(k) for k in ("1" * 64, "3" * 64))


def test_a_preload_the_worker_never_used_is_stopped_and_reaped(root: DataRoot) -> None:
    """E.g. another worker holds worker.lock: the child must not outlive us."""
    import threading

    from kexpr.spool.fsio import make_flock
    from kexpr.worker.daemon import Worker
    from kexpr.worker.exitcodes import ExitCode

    other = make_flock(root.worker_lock)
    other.acquire()
    try:
        p = preload.start(root)
        assert p is not None
        w = Worker(root, environ={"PATH": "/usr/bin"}, client_factory=lambda: None, preload=p)
        assert w.run(threading.Event()) is ExitCode.ANOTHER_WORKER
        with pytest.raises(ChildProcessError):
            os.waitpid(p._pid, 0)  # already reaped
        assert p.result() is None
    finally:
        other.release()


def test_a_read_error_on_the_pipe_is_no_result_and_the_child_is_killed(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a child that writes a good-looking prefix, then waits
        os.close(r)
        try:
            os.write(w, b"1partial")
            import time

            time.sleep(60)
        finally:
            os._exit(0)
    os.close(w)

    def failing_read(fd: int, n: int) -> bytes:
        raise OSError(5, "EIO")

    monkeypatch.setattr(preload.os, "read", failing_read)
    p = preload.Preload(pid, r)
    assert p.result(timeout_s=5) is None  # never the partial bytes
    monkeypatch.undo()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, 0)  # killed and reaped
    with pytest.raises(OSError):
        os.fstat(r)  # the pipe was closed

"""Issue 14 item 5: an append that fails part-way is undone under the same lock
(`kexpr.spool.journal` rule 4a), so the journal verifies without an operator once
space returns, and the attempt is handled by the normal rules.

In process (an injected short write, ENOSPC, a failed fsync) and as real
processes: a worker whose file-size limit (RLIMIT_FSIZE) makes the kernel cut a
row short — a real short write followed by EFBIG, as a full disk gives —, and,
as root, a journal on a tiny tmpfs filled up (a real ENOSPC mid-row).
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import mounted_tmpfs, start_supervised_worker
from kit.spool import await_answer, write_request

from kexpr.spool import journal as journal_mod
from kexpr.spool.journal import (
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

T0 = dt.datetime(2026, 11, 30, 10, 0, 0, tzinfo=dt.UTC)


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    root = DataRoot(tmp_path / "root")
    root.ensure()
    j = Journal(root)
    j.load()
    return j


def _start(j: Journal, n: int, at: dt.datetime = T0):
    with j.locked():
        return j.append_start(
            artifact_key=f"{n:032x}",
            surface="daily.v1",
            mode=SpoolMode.SHADOW,
            attempt_id=f"{n:032x}",
            started_at=at,
            deadline_at_utc=format_ts(at + dt.timedelta(seconds=4)),
        )


def _segment(j: Journal) -> Path:
    return j._root.outcomes / "2026-11-30.jsonl"


def _half_write(real: Callable[[int, bytes], int]) -> Callable[[int, bytes], int]:
    def write(fd: int, data: bytes) -> int:
        return real(fd, bytes(data)[: len(data) // 2])  # the kernel's short write

    return write


def _raise(code: int) -> Callable[..., object]:
    def fail(*a: object, **kw: object) -> object:
        raise OSError(code, "injected")

    return fail


@pytest.mark.parametrize(
    "inject",
    ["short_write", "enospc_write", "eio_fsync"],
)
def test_a_failed_start_row_is_undone_and_the_journal_still_verifies(
    journal: Journal, monkeypatch: pytest.MonkeyPatch, inject: str
) -> None:
    _start(journal, 1)
    before = _segment(journal).read_bytes()
    with monkeypatch.context() as m:
        if inject == "short_write":
            m.setattr(journal_mod.os, "write", _half_write(os.write))
        elif inject == "enospc_write":
            m.setattr(journal_mod.os, "write", _raise(errno.ENOSPC))
        else:
            real_fsync = os.fsync
            calls = [0]

            def fsync(fd: int) -> None:
                calls[0] += 1
                if calls[0] == 1:  # the row's fsync; the undo's fsync succeeds
                    raise OSError(errno.EIO, "injected")
                real_fsync(fd)

            m.setattr(journal_mod.os, "fsync", fsync)
        with pytest.raises(AppendRefused) as e:
            _start(journal, 2)
    assert e.value.finding is Finding.APPEND_UNDONE
    # Undone: the bytes are exactly those before (the old code left a torn tail).
    assert _segment(journal).read_bytes() == before
    assert Journal(journal._root).load().by_attempt.keys() == {f"{1:032x}"}
    # Nothing was indexed and the writer continues the same segment.
    assert f"{2:032x}" not in journal.index.by_artifact
    _start(journal, 2)
    rec = journal.index.by_attempt[f"{1:032x}"]
    with journal.locked():
        journal.append_terminal(rec, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT, T0)
    assert len(Journal(journal._root).load().by_attempt) == 2


def test_a_failed_first_row_of_a_new_segment_leaves_an_empty_verifying_segment(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:
        m.setattr(journal_mod.os, "write", _half_write(os.write))
        with pytest.raises(AppendRefused):
            _start(journal, 1)
    assert _segment(journal).read_bytes() == b""
    Journal(journal._root).load()
    _start(journal, 1)  # continues the empty segment (no EEXIST conflict)
    assert len(Journal(journal._root).load().by_attempt) == 1


def test_a_failed_undo_still_fails_closed(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    _start(journal, 1)
    with monkeypatch.context() as m:
        m.setattr(journal_mod.os, "write", _half_write(os.write))
        m.setattr(journal_mod.os, "ftruncate", _raise(errno.EIO))
        with pytest.raises(Exception) as e:
            _start(journal, 2)
    assert not isinstance(e.value, AppendRefused)
    assert getattr(e.value, "finding", None) is Finding.TORN_TAIL


def test_emfile_opening_the_segment_is_refused_not_a_conflict(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    _start(journal, 1)
    with monkeypatch.context() as m:
        m.setattr(journal_mod, "open_append", _raise(errno.EMFILE))
        with pytest.raises(AppendRefused):
            _start(journal, 2)
    _start(journal, 2)


# ------------------------------------------------------------- real processes


def _status(root: DataRoot) -> dict[str, Any]:
    return json.loads(root.status_file.read_bytes())


def _segment_of_today(root: DataRoot) -> Path:
    (name,) = os.listdir(root.outcomes)
    return root.outcomes / name


@pytest.mark.e2e
def test_a_real_short_write_is_undone_and_the_worker_serves_once_space_returns(
    data_root: Path,
) -> None:
    """The worker (no key: each request is one start row and one
    ``credential_unavailable`` row, zero HTTP) runs under RLIMIT_FSIZE, set on
    the running process with prlimit(2): the kernel writes a row up to the
    limit and refuses the rest, exactly the short write a full disk gives."""
    w = start_supervised_worker(data_root, None, key=None)
    root = w.root
    try:
        pid = _status(root)["pid"]
        assert isinstance(pid, int)
        first = await_answer(root, write_request(root, 1))
        assert first["outcome"] == "credential_unavailable"
        size = _segment_of_today(root).stat().st_size
        # Room for less than one more row in the segment (SIGXFSZ is ignored by
        # Python, so the write returns short, then EFBIG).
        limit = size + 200
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        try:
            second = await_answer(root, write_request(root, 2))
            assert (second["status"], second["outcome"]) == (
                ResponseStatus.CANONICAL.value,
                Outcome.JOURNAL_UNAVAILABLE.value,
            )
            # Undone by the worker itself: the segment is exactly as before and
            # verifies (the old code left a torn tail: quarantine, and an operator).
            assert _segment_of_today(root).stat().st_size == size
            Journal(root, create_lock=False).load()
        finally:
            resource.prlimit(
                pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            )
        # Space is back: the same worker, not quarantined, journals the next one.
        third = await_answer(root, write_request(root, 3))
        assert third["outcome"] == "credential_unavailable"
        assert len(Journal(root, create_lock=False).load().by_attempt) == 2
        end = time.monotonic() + 10
        while _status(root).get("faults", {}).get("append_undone") != 1 and time.monotonic() < end:
            time.sleep(0.05)
        st = _status(root)
        assert st["pid"] == pid and st["quarantine"] is None and st["journal"] == "verified"
        assert st["faults"] == {"append_undone": 1}
    finally:
        w.stop()


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(
        tmp_path / "tiny", "size=256k", "the RLIMIT_FSIZE test covers a real short write"
    ) as mnt:
        yield mnt


_CHILD = r"""
import datetime as dt, os, sys
from kexpr.spool.journal import AppendRefused, Journal, SpoolMode, format_ts
from kexpr.spool.layout import DataRoot
j = Journal(DataRoot(sys.argv[1])); j.load()
t = dt.datetime(2026, 11, 30, 10, 0, 0, tzinfo=dt.UTC)
def start(n):
    with j.locked():
        j.append_start(artifact_key=f"{n:032x}", surface="daily.v1", mode=SpoolMode.SHADOW,
                       attempt_id=f"{n:032x}", started_at=t,
                       deadline_at_utc=format_ts(t + dt.timedelta(seconds=4)))
# Rows until the next one cannot fit in the segment's last page (rows are
# ~570 bytes): once every other page is taken, that row is cut short by ENOSPC.
n = 1
start(n)
while not 0 < 4096 - os.stat(sys.argv[2]).st_size % 4096 < 500:
    n += 1
    start(n)
print(n, os.stat(sys.argv[2]).st_size, flush=True)
sys.stdin.readline()  # the parent fills the file system now
try:
    start(n + 1)
    print("written", flush=True)
except AppendRefused as e:
    print(e.finding.value, flush=True)
sys.stdin.readline()  # the parent frees the space
start(n + 1)
print("ok", flush=True)
"""


@pytest.mark.e2e
def test_enospc_mid_row_on_a_full_tmpfs_is_undone(tiny_tmpfs: Path) -> None:
    root = DataRoot(tiny_tmpfs / "root")
    root.ensure()
    seg = root.outcomes / "2026-11-30.jsonl"
    timer = threading.Timer(0, lambda: None)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(root.root), str(seg)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        # Never hang the suite: the child is killed after 60 s whatever happens.
        timer = threading.Timer(60, child.kill)
        timer.start()
        n, size = map(int, child.stdout.readline().split())
        # Fill every free block; the segment's last page keeps (4096 - size)
        # bytes of room, so the next row is cut short by ENOSPC.
        filler = tiny_tmpfs / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while os.write(fd, b"\0" * 4096) == 4096:
                pass
        except OSError as e:
            assert e.errno == errno.ENOSPC
        finally:
            os.close(fd)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "append_undone"
        assert seg.stat().st_size == size
        Journal(root, create_lock=False).load()
        filler.unlink()
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "ok"
        assert len(Journal(root, create_lock=False).load().by_attempt) == n + 1
    finally:
        timer.cancel()
        child.kill() if child.poll() is None else None
        child.wait()
        if child.stdin:
            child.stdin.close()
        if child.stdout:
            child.stdout.close()
        shutil.rmtree(root.root, ignore_errors=True)


def test_every_refused_append_has_its_worker_fault() -> None:
    """The findings the journal refuses one append with (read off its source, so
    a new one cannot be missed) each map to the worker fault of the same name."""
    import inspect
    import re

    from kexpr.worker.status import FAULT_FOR_REFUSED_APPEND

    source = inspect.getsource(journal_mod)
    raised = {Finding[name] for name in re.findall(r"AppendRefused\(Finding\.([A-Z_]+)", source)}
    assert raised == set(FAULT_FOR_REFUSED_APPEND) and len(raised) == 2
    for finding, fault in FAULT_FOR_REFUSED_APPEND.items():
        assert fault.name == finding.name and fault.value == finding.value

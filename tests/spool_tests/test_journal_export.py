"""`Journal.export_verified` / `adopt`: the worker verifies its journal in a forked
child during start-up (`kexpr.worker.preload`) and installs the result only if every
journal file is still exactly the one the child read."""

from __future__ import annotations

import marshal
import os
import time
from pathlib import Path

import pytest
from spool_tests.journal_support import hand_rows, start_attempt, write_segment
from spool_tests.test_journal import _torn

from kexpr.spool.journal import Finding, Journal, JournalUnverified
from kexpr.spool.layout import DataRoot


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    r = DataRoot(tmp_path / "root")
    r.ensure()
    write_segment(r, "2026-11-29.jsonl", hand_rows("1" * 64, "2" * 32, "2026-11-29", ["timeout"]))
    write_segment(
        r,
        "2026-11-30.jsonl",
        hand_rows("3" * 64, "4" * 32, "2026-11-30", ["selected"], mode="enabled"),
    )
    write_segment(
        r, "2026-11-28.jsonl", hand_rows("5" * 64, "6" * 32, "2026-11-28", [])
    )  # still open
    return r


def state(j: Journal) -> tuple[object, ...]:
    i = j.index
    return (
        list(i.by_attempt.items()),
        list(i.by_artifact.items()),
        dict(i.sealed),
        i.sealed_open,
        {k: (t.sequence, t.digest, t.size, t.ino) for k, t in j._tails.items()},
    )


def test_adopt_installs_exactly_what_load_builds(root: DataRoot) -> None:
    loaded = Journal(root)
    loaded.load()
    adopted = Journal(root)
    assert adopted.adopt(Journal(root).export_verified())
    assert state(adopted) == state(loaded)
    assert len(adopted.index.by_attempt) == 3


def test_adopt_with_quarantined_files_matches_load(tmp_path: Path) -> None:
    r = DataRoot(tmp_path / "q")
    r.ensure()
    write_segment(r, "2026-11-30.jsonl", _torn(r))
    Journal(r).quarantine_torn("2026-11-30", apply=True)
    loaded = Journal(r)
    loaded.load()
    adopted = Journal(r)
    assert adopted.adopt(Journal(r).export_verified())
    assert state(adopted) == state(loaded) and adopted.index.sealed


def test_an_adopted_index_appends_like_a_loaded_one(root: DataRoot) -> None:
    import datetime as dt

    j = Journal(root)
    assert j.adopt(Journal(root).export_verified())
    at = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    start_attempt(j, "7" * 64, "8" * 32, at)
    assert Journal(root).load().knows("7" * 64)


def change(root: DataRoot, kind: str) -> None:
    seg = root.outcomes / "2026-11-29.jsonl"
    if kind == "grown":
        write_segment(
            root, "2026-11-27.jsonl", hand_rows("9" * 64, "a" * 32, "2026-11-27", ["timeout"])
        )
    elif kind == "appended":
        with open(seg, "ab") as f:
            f.write(b"x")
    elif kind == "removed":
        os.unlink(root.outcomes / "2026-11-28.jsonl")
    elif kind == "rewritten_in_place":
        # Same bytes, same size, same inode: only the ctime says it was written.
        # File times tick with the kernel's coarse clock (a few ms): let it tick.
        time.sleep(0.05)
        fd = os.open(seg, os.O_WRONLY)
        try:
            os.pwrite(fd, seg.read_bytes()[:1], 0)
        finally:
            os.close(fd)
    elif kind == "swapped":
        data = seg.read_bytes()
        os.rename(seg, root.root / "aside")
        write_segment(root, "2026-11-29.jsonl", data)
    elif kind == "quarantined_added":
        fd = os.open(
            root.quarantine / "2026-11-20.1.jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600
        )
        os.close(fd)
    elif kind == "opened_only":
        with open(seg, "ab"):
            pass


@pytest.mark.parametrize(
    "kind", ["grown", "appended", "removed", "rewritten_in_place", "swapped", "quarantined_added"]
)
def test_adopt_refuses_when_any_journal_file_changed(root: DataRoot, kind: str) -> None:
    blob = Journal(root).export_verified()
    change(root, kind)
    j = Journal(root)
    assert not j.adopt(blob)
    assert j.index.by_attempt == {} and j._tails == {}  # nothing installed


def test_adopt_accepts_an_unchanged_journal_after_a_no_op_open(root: DataRoot) -> None:
    blob = Journal(root).export_verified()
    change(root, "opened_only")  # opened for append, nothing written: same print
    assert Journal(root).adopt(blob)


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"garbage",
        marshal.dumps(("kexpr-journal-export-v0", (), (), 0, (), ())),
        marshal.dumps(("kexpr-journal-export-v1",)),
    ],
    ids=["empty", "garbage", "old_version", "short"],
)
def test_adopt_refuses_a_blob_it_cannot_read(root: DataRoot, blob: bytes) -> None:
    assert not Journal(root).adopt(blob)


def test_export_raises_what_load_raises(root: DataRoot) -> None:
    p = root.outcomes / "2026-11-30.jsonl"
    p.write_bytes(p.read_bytes()[:-1])  # torn tail
    with pytest.raises(JournalUnverified) as e:
        Journal(root).export_verified()
    assert e.value.finding is Finding.TORN_TAIL


@pytest.mark.parametrize("field", [3, 7], ids=["mode", "outcome"])
def test_adopt_refuses_a_record_with_a_value_no_enum_has(root: DataRoot, field: int) -> None:
    """The prints match; only a record is off: still nothing is installed."""
    version, records, sealed, sealed_open, tails, prints = marshal.loads(
        Journal(root).export_verified()
    )
    bad = list(records[0])
    bad[field] = "repaired"
    blob = marshal.dumps((version, (tuple(bad), *records[1:]), sealed, sealed_open, tails, prints))
    j = Journal(root)
    assert not j.adopt(blob) and j.index.by_attempt == {}

"""The worker's wake-up (design §4 "waiting"): watchdog's inotify reader calls
`_Wake`, which only wakes the scanner; the kernel queues nothing but arrivals
in ``requests/`` and ``reports/`` and either inbox itself going away.

Counted, never timed: which spool traffic reaches the scanner at all.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from watchdog.observers.inotify_c import (
    CallbackId,
    InotifyConstants,
    InotifyEvent,
    InotifyFD,
    WatchDescriptor,
)

from kexpr.spool.fsio import claim, publish, read_private, unlink_quiet
from kexpr.spool.layout import DataRoot
from kexpr.worker.inbox import INBOX_MASK, _InboxWatch, _Wake


class Counter:
    """Stands in for the scanner's `threading.Event`: counts `set()` calls."""

    def __init__(self) -> None:
        self.n = 0
        self._lock = threading.Lock()

    def set(self) -> None:
        with self._lock:
            self.n += 1


class Sentinel:
    """A second callback on the same inotify descriptor, watching ``tmp/``.

    One reader thread hands the descriptor's events to the callbacks in kernel
    order, so once the sentinel file is seen every earlier event has been
    delivered (or was never queued)."""

    def __init__(self) -> None:
        self.seen = threading.Event()

    def on_event(self, event: InotifyEvent) -> None:
        if event.name == b"sentinel":
            self.seen.set()

    def on_watch_deleted(self, wd: int) -> None:
        pass

    def on_queue_overflow(self) -> None:
        pass

    def on_events_lost(self) -> None:
        pass


def _settle(watch: _InboxWatch, root: DataRoot) -> None:
    sentinel = Sentinel()
    watch._fd.add_callback(
        os.fsencode(root.tmp), InotifyConstants.IN_CREATE, sentinel, CallbackId(1)
    )
    fd = os.open(root.tmp / "sentinel", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    assert sentinel.seen.wait(10)
    os.unlink(root.tmp / "sentinel")


def _watching(root: DataRoot, counter: Counter) -> _InboxWatch:
    return _InboxWatch((root.requests, root.reports), counter)  # type: ignore[arg-type]


def test_the_mask_is_arrivals_and_the_inbox_itself_only() -> None:
    c = InotifyConstants
    assert INBOX_MASK == (
        c.IN_CREATE
        | c.IN_MOVED_TO
        | c.IN_DELETE_SELF
        | c.IN_MOVE_SELF
        | c.IN_ONLYDIR
        | c.IN_DONT_FOLLOW
    )
    # None of a read's, a write's, a removal's or a move-out's events.
    for noisy in (
        c.IN_OPEN, c.IN_ACCESS, c.IN_CLOSE_WRITE, c.IN_CLOSE_NOWRITE, c.IN_MODIFY,
        c.IN_ATTRIB, c.IN_DELETE, c.IN_MOVED_FROM,
    ):  # fmt: skip
        assert not INBOX_MASK & noisy


def test_one_real_round_trip_wakes_the_scanner_exactly_twice(root: DataRoot) -> None:
    """Request arrival and report arrival; not the dozens of other events around them."""
    counter = Counter()
    watch = _watching(root, counter)
    try:
        publish(root.tmp, root.requests / "r.json", b"{}", durable=False)  # shim
        assert claim(root.requests / "r.json", root.claimed / "r.json")  # worker
        read_private(root.claimed / "r.json", max_bytes=100)
        unlink_quiet(root.claimed / "r.json")
        publish(root.tmp, root.responses / "r.json", b"{}", durable=False)
        read_private(root.responses / "r.json", max_bytes=100)  # shim
        unlink_quiet(root.responses / "r.json")
        publish(root.tmp, root.reports / "a.json", b"{}")  # shim
        read_private(root.reports / "a.json", max_bytes=100)  # worker
        unlink_quiet(root.reports / "a.json")
        _settle(watch, root)
        assert counter.n == 2
    finally:
        watch.stop()  # (removing the watches calls on_watch_deleted: more wakes)


@pytest.mark.parametrize("inbox", ["requests", "reports"])
def test_a_file_moved_into_an_inbox_wakes(root: DataRoot, inbox: str) -> None:
    counter = Counter()
    watch = _watching(root, counter)
    try:
        (root.tmp / "x").write_bytes(b"{}")
        os.rename(root.tmp / "x", getattr(root, inbox) / "x.json")
        _settle(watch, root)
        assert counter.n == 1
    finally:
        watch.stop()


@pytest.mark.parametrize("change", ["removed", "moved"])
def test_an_inbox_removed_or_moved_away_wakes_so_the_tree_check_runs(
    root: DataRoot, change: str
) -> None:
    counter = Counter()
    watch = _watching(root, counter)
    try:
        if change == "removed":
            os.rmdir(root.requests)
        else:
            os.rename(root.reports, root.root / "aside")
        _settle(watch, root)
        assert counter.n >= 1
    finally:
        watch.stop()


def test_every_callback_of_the_reader_wakes() -> None:
    counter = Counter()
    wake = _Wake(counter)  # type: ignore[arg-type]
    wd = WatchDescriptor(1)
    wake.on_event(InotifyEvent(wd, InotifyConstants.IN_CREATE, 0, b"x.json"))
    wake.on_watch_deleted(wd)
    wake.on_queue_overflow()  # design §4 trap 2: the scanner lists the folders
    wake.on_events_lost()  # called after every callback's on_queue_overflow
    assert counter.n == 4


def test_the_wake_implements_every_callback_of_the_reader() -> None:
    """The reader thread calls each member of watchdog's ``WatchCallback`` on
    every callback it holds: one the wake lacks would end that thread."""
    from watchdog.observers.inotify_c import WatchCallback

    wanted = {name for name in vars(WatchCallback) if name.startswith("on_")}
    assert wanted and wanted <= set(vars(_Wake))


def test_an_inbox_that_is_a_symlink_is_not_watched(
    root: DataRoot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kexpr.worker import inbox as daemon

    made: list[InotifyFD] = []

    class Recorded(InotifyFD):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(daemon, "InotifyFD", Recorded)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.rmdir(root.requests)
    os.symlink(elsewhere, root.requests)
    with pytest.raises(OSError):
        _InboxWatch((root.requests, root.reports), Counter())  # type: ignore[arg-type]
    (fd,) = made
    assert not fd.is_alive()  # the reader thread was stopped, not leaked


def test_stop_ends_the_reader_thread(root: DataRoot) -> None:
    watch = _watching(root, Counter())
    watch.stop()
    assert not watch._fd.is_alive()

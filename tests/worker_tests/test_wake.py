"""What wakes the worker's scanner (`worker.daemon._Wake`).

The spool tree is watched recursively (SPEC §4 trap 1), so inotify reports every
staging write, claim, read and removal. Only arrivals may cost a scan; the
rescan timer stays the safety net (trap 2). Tested twice: on synthetic watchdog
events (every kind, deterministic) and on the real event stream of one whole
round trip through a real observer.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from spool.fsio import claim, publish, read_private, unlink_quiet
from spool.layout import DataRoot
from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from worker.daemon import WAKE_EVENTS, _Wake


class Counter:
    """Stands in for the scanner's `threading.Event`: counts `set()` calls."""

    def __init__(self) -> None:
        self.n = 0

    def set(self) -> None:
        self.n += 1


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    r = DataRoot(tmp_path / "root")
    r.ensure()
    return r


def wakes(root: DataRoot, event: FileSystemEvent) -> bool:
    c = Counter()
    _Wake(c, (root.requests, root.reports)).on_any_event(event)  # type: ignore[arg-type]
    return c.n == 1


def test_arrivals_in_requests_and_reports_wake(root: DataRoot) -> None:
    for inbox in (root.requests, root.reports):
        assert wakes(root, FileCreatedEvent(str(inbox / "x.json")))
        assert wakes(root, FileMovedEvent(str(root.tmp / ".x"), str(inbox / "x.json")))


@pytest.mark.parametrize(
    "make",
    [
        lambda r: FileCreatedEvent(str(r.tmp / ".x.json.1.abc")),  # staging of every publish
        lambda r: FileCreatedEvent(str(r.responses / "x.json")),  # our own response
        lambda r: FileCreatedEvent(str(r.claimed / "x.json")),
        lambda r: FileMovedEvent(str(r.requests / "x.json"), str(r.claimed / "x.json")),  # our claim
        lambda r: FileDeletedEvent(str(r.requests / "x.json")),
        lambda r: FileDeletedEvent(str(r.reports / "x.json")),  # we remove a handled report
        lambda r: FileModifiedEvent(str(r.requests / "x.json")),
        lambda r: FileOpenedEvent(str(r.reports / "x.json")),  # we read it
        lambda r: FileClosedNoWriteEvent(str(r.reports / "x.json")),
        lambda r: FileClosedEvent(str(r.tmp / ".x")),
        lambda r: DirModifiedEvent(str(r.requests)),  # queued beside every file event
        lambda r: FileCreatedEvent(str(r.requests / "deeper" / "x.json")),  # not directly in
    ],
)
def test_own_traffic_and_staging_do_not_wake(root: DataRoot, make) -> None:  # type: ignore[no-untyped-def]
    assert not wakes(root, make(root))


@pytest.mark.parametrize(
    "make",
    [
        lambda r: DirCreatedEvent(str(r.requests)),
        lambda r: DirDeletedEvent(str(r.claimed)),
        lambda r: DirMovedEvent(str(r.requests), str(r.root / "aside")),
    ],
)
def test_directory_changes_wake_so_the_tree_check_runs(root: DataRoot, make) -> None:  # type: ignore[no-untyped-def]
    assert wakes(root, make(root))


def test_one_real_round_trip_wakes_the_scanner_exactly_twice(root: DataRoot) -> None:
    """Request arrival and report arrival; not the dozens of other events around them."""
    counter = Counter()
    seen: list[str] = []
    sentinel = threading.Event()

    class Sentinel(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            seen.append(event.event_type)
            if os.fsdecode(event.src_path).endswith("sentinel"):
                sentinel.set()

    observer = Observer()
    # Same watch, two handlers: the dispatcher hands each event to both in turn,
    # so when the sentinel is seen every earlier event has reached _Wake.
    watch = observer.schedule(
        _Wake(counter, (root.requests, root.reports)),  # type: ignore[arg-type]
        str(root.spool),
        recursive=True,
        event_filter=WAKE_EVENTS,  # as the worker schedules it
    )
    observer.add_handler_for_watch(Sentinel(), watch)
    observer.start()
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
        fd = os.open(root.tmp / "sentinel", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        assert sentinel.wait(10)
    finally:
        observer.stop()
        observer.join(10)
    assert counter.n == 2
    # Staging creations and moves still arrive (the stream was not empty) ...
    assert seen.count("created") >= 6 and "moved" in seen
    # ... but the kernel never sent a read's, a write's or a removal's events
    # (the mask).
    assert not {"opened", "closed", "closed_no_write", "modified", "deleted"} & set(seen)

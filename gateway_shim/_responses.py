"""Watching ``responses/`` for the coordinator: waiters, the observer, removal.

Holds `ResponseWaiters` (request_id -> a wake-up callback, called by watchdog
when ``responses/<id>.json`` arrives: a `threading.Event`'s ``set`` for a
blocking presentation, a ``loop.call_soon_threadsafe`` of an `asyncio.Event`'s
``set`` for an asyncio one), `watch_responses` / `stop_watching` /
`forget_inherited` (the observer's start, stop, and a forked child's drop of
its parent's copy) and the two guarded removals of a response the shim has read
or refused (`collect`, `discard`). Private to `gateway_shim.coordinator`.
Coordinator rules that apply: rule 4 (the wait ends on a watchdog
notification, never a busy poll), rule 9 (a removal never raises into the host)
and rule 12 (fork: a child never stops, and so never unwatches, its parent's
observer).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    FileCreatedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from kexpr.spool.fsio import UnsafePath, unlink_quiet

Wake = Callable[[], None]


def collect(path: Path) -> None:
    """Remove a response the shim has read; never raises into the host (a
    folder that became unsafe is the worker's and the audit's to report)."""
    try:
        unlink_quiet(path)
    except (UnsafePath, OSError):
        pass


def discard(path: Path) -> None:
    """Remove a response we read or refused; an unsafe or failing directory
    only means it stays (the worker's checks report it). Never raises."""
    try:
        unlink_quiet(path)
    except OSError:
        pass


class ResponseWaiters(FileSystemEventHandler):
    """request_id -> wake-up, called by watchdog when ``responses/<id>.json`` appears."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wakes: dict[str, Wake] = {}

    def register(self, rid: str, wake: Wake) -> None:
        with self._lock:
            self._wakes[rid] = wake

    def forget(self, rid: str) -> None:
        with self._lock:
            self._wakes.pop(rid, None)

    def wake_all(self) -> None:
        """Wake every waiter (close: each wait then sees the coordinator closed)."""
        with self._lock:
            wakes = list(self._wakes.values())
        for wake in wakes:
            _call(wake)

    def after_fork_in_child(self) -> None:
        # The parent's waiters are the parent's threads' and tasks': none of
        # them exists here, and the lock may have been held at the fork.
        self._lock = threading.Lock()
        self._wakes = {}

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = event.dest_path or event.src_path
        name = os.path.basename(path if isinstance(path, str) else path.decode())
        if name.endswith(".json"):
            with self._lock:
                wake = self._wakes.get(name[:-5])
            if wake is not None:
                _call(wake)


def _call(wake: Wake) -> None:
    try:
        wake()
    except RuntimeError:
        # An asyncio waiter whose loop has closed: nobody waits any more.
        pass


def watch_responses(waiters: ResponseWaiters, responses: Path) -> BaseObserver:
    """Start a daemon observer that wakes ``waiters`` on arrivals in ``responses``.
    Raises ``OSError`` when no inotify instance can be had (``EMFILE``: the
    per-user limit) and ``RuntimeError`` when its threads cannot be started."""
    observer = Observer()
    try:
        # Arrivals only: the inotify mask then leaves out the opens,
        # closes and removals of every response read (ours and the
        # other shims'), which would each cost the observer's threads.
        observer.schedule(
            waiters,
            str(responses),
            recursive=False,
            event_filter=[FileCreatedEvent, FileMovedEvent],
        )
        observer.daemon = True
        observer.start()
    except BaseException:
        # The constructor already holds an inotify instance and its reader
        # thread: release them, or every failed start leaks one.
        stop_watching(observer)
        raise
    return observer


def stop_watching(observer: BaseObserver) -> None:
    """Stop the observer and its inotify reader; never raises."""
    try:
        # stop() also stops the inotify reader the constructor started, even
        # for an observer whose own thread never started (then: no join).
        observer.stop()
        if observer.is_alive():
            observer.join(timeout=5)
    except (OSError, RuntimeError):
        pass


def forget_inherited(observer: BaseObserver) -> None:
    """In a forked child: drop the parent's observer WITHOUT stopping it.

    Its inotify descriptor shares one open file description with the parent's,
    so stopping it here (``inotify_rm_watch``) would remove the parent's watch
    and leave the parent on its periodic re-check for the rest of its life
    (issue 20 item 4). Its threads do not exist in the child; closing the
    child's copies of its descriptors only frees them here (a watch lives as
    long as one descriptor of the description is open: the parent's). The
    attribute names are watchdog's (7.x); where they differ, the descriptors
    simply stay open, unused.
    """
    reader = getattr(observer, "_inotify_fd", None)
    for name in ("_inotify_fd", "_kill_r", "_kill_w"):
        fd = getattr(reader, name, None)
        if isinstance(fd, int) and fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

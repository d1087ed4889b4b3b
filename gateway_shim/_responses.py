"""Watching ``responses/`` for the coordinator: waiters, the observer, removal.

Holds `ResponseWaiters` (request_id -> Event, set by watchdog when
``responses/<id>.json`` arrives), `watch_responses` / `stop_watching` (the
observer's start and stop) and the two guarded removals of a response the shim
has read or refused (`collect`, `discard`). Private to
`gateway_shim.coordinator`. Coordinator rules that apply: rule 4 (the wait
ends on a watchdog notification, never a busy poll) and rule 9 (a removal
never raises into the host).
"""

from __future__ import annotations

import os
import threading
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
    """request_id -> Event, set by watchdog when ``responses/<id>.json`` appears."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}

    def register(self, rid: str) -> threading.Event:
        ev = threading.Event()
        with self._lock:
            self._events[rid] = ev
        return ev

    def forget(self, rid: str) -> None:
        with self._lock:
            self._events.pop(rid, None)

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = event.dest_path or event.src_path
        name = os.path.basename(path if isinstance(path, str) else path.decode())
        if name.endswith(".json"):
            with self._lock:
                ev = self._events.get(name[:-5])
            if ev is not None:
                ev.set()


def watch_responses(waiters: ResponseWaiters, responses: Path) -> BaseObserver:
    """Start a daemon observer that sets ``waiters`` on arrivals in ``responses``.
    Raises ``RuntimeError`` when its thread cannot be started."""
    observer = Observer()
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
    return observer


def stop_watching(observer: BaseObserver) -> None:
    observer.stop()
    observer.join(timeout=5)

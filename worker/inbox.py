"""The worker's inbox watch (design §4 "waiting"): the kernel wakes the scanner."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Final

from watchdog.observers.inotify_c import CallbackId, InotifyConstants, InotifyEvent, InotifyFD, Mask

# What the kernel queues for the worker (design §4 "waiting"): a file or directory
# arriving in ``requests/`` or ``reports/`` (created there, linked there or moved
# in), and either inbox itself being removed or moved away. Everything else —
# every ``tmp/`` staging write, claims (a move *out of* requests/), responses,
# reads, removals — never leaves the kernel. The watched paths must be the
# checked directories themselves: never a symlink (``IN_DONT_FOLLOW``), only a
# directory (``IN_ONLYDIR``).
INBOX_MASK: Final = Mask(
    InotifyConstants.IN_CREATE
    | InotifyConstants.IN_MOVED_TO
    | InotifyConstants.IN_DELETE_SELF
    | InotifyConstants.IN_MOVE_SELF
    | InotifyConstants.IN_ONLYDIR
    | InotifyConstants.IN_DONT_FOLLOW
)


class _Wake:
    """Called by watchdog's inotify reader thread (its ``WatchCallback``); it only
    wakes the scanner. The scanner, not the events, is the source of truth
    (design §4 trap 2): it lists the folders, at start-up, on every wake and on the
    rescan timer. A queue overflow, the events it lost and a removed watch wake
    it too: every member of watchdog's ``WatchCallback`` protocol wakes it (the
    reader thread calls each; one missing would end that thread).
    """

    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def on_event(self, event: InotifyEvent) -> None:
        self._event.set()

    def on_watch_deleted(self, wd: int) -> None:
        self._event.set()

    def on_queue_overflow(self) -> None:
        self._event.set()

    def on_events_lost(self) -> None:
        self._event.set()


class _InboxWatch:
    """watchdog's inotify descriptor (`InotifyFD`, its own instance and reader
    thread) watching the two inboxes, calling `_Wake` directly. Live from
    construction until `stop`.

    Not an `Observer`: the observer's emitter and dispatcher threads, its event
    objects and its move pairing cost the worker CPU on every artifact and two
    thread hand-offs per wake (docs/performance.md, "The figures behind the code's
    comments"). The
    observer's 500 ms hold of an unmatched ``IN_MOVED_FROM`` (design §4 trap 1, the
    reason the whole tree was watched) cannot occur: nothing here pairs moves,
    and a move out of an inbox is not in the mask.
    """

    def __init__(self, inboxes: tuple[Path, ...], event: threading.Event) -> None:
        self._fd = InotifyFD()
        self._fd.start()
        try:
            for inbox in inboxes:
                self._fd.add_callback(os.fsencode(inbox), INBOX_MASK, _Wake(event), CallbackId(0))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._fd.stop()
        self._fd.join(5)

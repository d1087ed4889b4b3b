"""Watching ``responses/`` for the coordinator: waiters, the observer, removal.

Holds `ResponseWaiters` (request_id -> a wake-up callback, called by watchdog
when ``responses/<id>.json`` arrives: a `threading.Event`'s ``set`` for a
blocking presentation, a ``loop.call_soon_threadsafe`` of an `asyncio.Event`'s
``set`` for an asyncio one; also called by the ONE shared re-check scan, and
each entry dropped after its deadline: the class's docstring states the rules),
`watch_responses` / `stop_watching` /
`forget_inherited` (the observer's start, stop, and a forked child's drop of
its parent's copy) and the guarded removal of a response the shim has read
or refused (`collect`). Private to `gateway_shim.coordinator`.
Coordinator rules that apply: rule 4 (the wait ends on a watchdog
notification or the shared re-check, never a per-waiter read, never a busy
poll), rule 9 (a removal never raises into the host)
and rule 12 (fork: a child never stops, and so never unwatches, its parent's
observer).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Final

from watchdog.events import (
    FileCreatedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from kexpr.spool import log
from kexpr.spool.fsio import list_dir, unlink_quiet

Wake = Callable[[], None]
# Content-free records (spool.log): the re-check's own faults.
_log = log.logger("shim")
# The safety re-check's period: one listing of responses/ for all waiters.
RECHECK_S: Final = 0.25
# An entry is dropped this long after its deadline whatever its waiter did.
EXPIRY_GRACE_S: Final = 1.0
# The table's bound (concurrent waits of one coordinator).
MAX_WAITERS: Final = 16384


def collect(path: Path) -> None:
    """Remove a response the shim has read or refused; never raises into the
    host. An unsafe or failing folder only means the file stays (it is the
    worker's and the audit's to report)."""
    try:
        unlink_quiet(path)
    except OSError:  # UnsafePath included
        pass


class ResponseWaiters(FileSystemEventHandler):
    """request_id -> (wake-up, deadline), woken by watchdog when
    ``responses/<id>.json`` appears, and by ONE shared re-check scan.

    Rules (coordinator rules 4, 12):

    - **One wake per response.** A waiter does not read its file periodically:
      it waits on its event, and reads once when woken. Two things wake it:
      the watcher's arrival event, and the safety re-check, which is one
      listing of ``responses/`` every `RECHECK_S` for all the waiters at once
      (an inotify overflow delivers no event at all, design §4 trap 2). So the
      file work per wait is one read, whatever the number of waiters, and
      set-up and finish never queue behind re-checks on the executor.
    - **The scan** runs on one daemon thread (``kexpr-shim-recheck``), started
      with the first waiter and idle (blocked, no tick) while there is none;
      ``close`` stops it, a forked child starts its own. If it cannot be
      started (the host's thread limit), ``scanning`` is False and each wait
      re-checks its own file every `RECHECK_S` instead, as before.
    - **Nothing kept per abandoned wait.** Each entry carries its monotonic
      deadline; the scan (and every ``register``) drops entries
      `EXPIRY_GRACE_S` past it, whatever became of their waiter (a loop
      stopped and closed without cancelling its task never runs the wait's
      ``finally``). At most `MAX_WAITERS` entries: beyond that the oldest is
      dropped (its wait still ends at its deadline).
    - On each pass the scan also calls ``on_tick`` (the data-root hold's check
      that its watch is still alive, coordinator rule 12).
    """

    def __init__(self, responses: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self._responses = responses
        self._clock = clock
        self.on_tick: Callable[[], None] | None = None
        # The re-check's survived faults: counted, each kind said once.
        self._scan_faults = 0
        self._faults_said: set[str] = set()
        self._init_state()

    def _init_state(self) -> None:
        self._lock = threading.Lock()
        self._wakes: OrderedDict[str, tuple[Wake, float]] = OrderedDict()
        self._work = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._scan_failed = False

    @property
    def scanning(self) -> bool:
        """True while the shared re-check scan runs (or will run at the next
        ``register``); False when its thread could not be started."""
        return not self._scan_failed

    def __len__(self) -> int:
        with self._lock:
            return len(self._wakes)

    def register(self, rid: str, wake: Wake, deadline: float) -> None:
        """Wake ``wake`` when ``rid``'s response is there, until ``deadline``
        (monotonic, on the coordinator's clock) plus the grace."""
        with self._lock:
            self._wakes[rid] = (wake, deadline)
            self._wakes.move_to_end(rid)
            self._prune(self._clock())
            self._start_scan()
        self._work.set()

    def forget(self, rid: str) -> None:
        with self._lock:
            self._wakes.pop(rid, None)

    def wake_all(self) -> None:
        """Wake every waiter (close: each wait then sees the coordinator closed)."""
        with self._lock:
            wakes = [wake for wake, _ in self._wakes.values()]
        for wake in wakes:
            _call(wake)

    def close(self, *, wait: bool = True) -> None:
        """Stop the scan (bounded join; ``wait=False``, a finalizer: none, the
        thread ends on its own at once); idempotent."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        self._stop.set()
        self._work.set()
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def after_fork_in_child(self) -> None:
        # The parent's waiters are the parent's threads' and tasks': none of
        # them exists here, nor does the scan thread, and the lock may have
        # been held at the fork.
        self._init_state()

    def on_any_event(self, event: FileSystemEvent) -> None:
        path = event.dest_path or event.src_path
        name = os.path.basename(path if isinstance(path, str) else path.decode())
        if name.endswith(".json"):
            with self._lock:
                entry = self._wakes.get(name[:-5])
            if entry is not None:
                _call(entry[0])

    # ------------------------------------------------------------ the scan

    def _prune(self, now: float) -> None:
        """Drop expired entries and the oldest beyond the bound (lock held)."""
        expired = [
            rid for rid, (_, deadline) in self._wakes.items() if now > deadline + EXPIRY_GRACE_S
        ]
        for rid in expired:
            del self._wakes[rid]
        while len(self._wakes) > MAX_WAITERS:
            self._wakes.popitem(last=False)

    def _start_scan(self) -> None:
        """Start the scan thread if it is not running (lock held)."""
        if self._thread is not None or self._closed:
            return
        thread = threading.Thread(target=self._scan_loop, name="kexpr-shim-recheck", daemon=True)
        try:
            thread.start()
        except RuntimeError:
            self._scan_failed = True  # each wait re-checks its own file instead
            return
        self._scan_failed = False
        self._thread = thread

    def _scan_loop(self) -> None:
        stop, work = self._stop, self._work
        while not stop.is_set():
            with self._lock:
                idle = not self._wakes
                if idle:
                    work.clear()
            if idle:
                work.wait()
                continue
            if stop.wait(RECHECK_S):
                return
            try:
                self.scan_once()
            except Exception:  # noqa: BLE001 - the one scan must outlive any fault
                # Kept broad: this thread is every waiter's safety net, so no
                # fault may end it; each one is counted and said (once per run).
                self.fault("recheck_failed")

    @property
    def scan_faults(self) -> int:
        """How many faults the shared re-check, and the watch's hand-off to these
        waiters (`gateway_shim._watch`), caught and survived."""
        return self._scan_faults

    def fault(self, word: str) -> None:
        """A fault the re-check or the watch's hand-off survived: counted; said
        once per kind at WARNING on ``kexpr.shim`` (a fixed word, no content)."""
        self._scan_faults += 1
        if word not in self._faults_said:
            self._faults_said.add(word)
            log.event(_log, logging.WARNING, word)

    def scan_once(self) -> None:
        """One pass: list ``responses/`` once, wake every waiter whose file is
        there, drop expired entries, check the watch. Never raises."""
        tick = self.on_tick
        if tick is not None:
            try:
                tick()
            except Exception:  # noqa: BLE001 - the scan must outlive any fault
                # Kept broad for the same reason: counted and said, never raised.
                self.fault("watch_check_failed")
        try:
            present: set[str] | None = set(list_dir(self._responses))
        except OSError:  # UnsafePath included
            present = None  # each waiter reads (and fails closed on) its own file
        with self._lock:
            self._prune(self._clock())
            wakes = [
                wake
                for rid, (wake, _) in self._wakes.items()
                if present is None or f"{rid}.json" in present
            ]
        for wake in wakes:
            _call(wake)


def _call(wake: Wake) -> None:
    try:
        wake()
    except RuntimeError:
        # An asyncio waiter whose loop has closed: nobody waits any more.
        pass


def watch_responses(handler: FileSystemEventHandler, responses: Path) -> BaseObserver:
    """Start a daemon observer that hands ``handler`` the arrivals in ``responses``
    (the shared watch's fan-out, `gateway_shim._watch`).
    Raises ``OSError`` when no inotify instance can be had (``EMFILE``: the
    per-user limit) and ``RuntimeError`` when its threads cannot be started."""
    observer = Observer()
    try:
        # Arrivals only: the inotify mask then leaves out the opens,
        # closes and removals of every response read (ours and the
        # other shims'), which would each cost the observer's threads.
        observer.schedule(
            handler,
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


def stop_watching(observer: BaseObserver, *, wait: bool = True) -> None:
    """Stop the observer and its inotify reader; never raises. ``wait=False``:
    the observer's own thread is not joined (it ends on its own at once; the
    inotify descriptor and its reader are gone when ``stop`` returns)."""
    try:
        # stop() also stops the inotify reader the constructor started, even
        # for an observer whose own thread never started (then: no join).
        observer.stop()
        if wait and observer.is_alive():
            observer.join(timeout=5)
    except (OSError, RuntimeError):
        pass


def forget_inherited(observer: BaseObserver) -> None:
    """In a forked child: drop the parent's observer WITHOUT stopping it.

    Its inotify descriptor shares one open file description with the parent's,
    so stopping it here (``inotify_rm_watch``) would remove the parent's watch
    and leave the parent on its periodic re-check for the rest of its life
    (one host process forking workers would silently lose its watch). Its
    threads do not exist in the child; closing the
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

"""One watch of ``responses/`` per process and data root, shared by its coordinators.

Holds `acquire` / `Lease.release` (a reference-counted share of one observer) and
the fork hook that forgets every shared observer in a child. Private to
`gateway_shim._data_root`. Coordinator rules that apply: rule 4 (the wait ends on
the watcher's notification or the shared re-check), rule 11 (a coordinator's
``close``, or its collection when the host dropped it, releases its share) and
rule 12 (fork; no watcher to be had).

Rules:

1. **One inotify instance per directory, not per coordinator.** A host that builds
   a coordinator per message (or per chat) on one data root must not take one
   inotify instance and three threads each (four from watchdog 7.1, which adds a
   dispatcher): the per-user limit is 128 instances (past it every presentation
   falls back to the 0.25 s re-check, and a worker of the same user loses its own
   watch). The key is the ``responses/`` path *and*
   its (device, inode): a directory replaced at its path is another watch.
2. **Reference-counted.** Each `acquire` is one `Lease`; the observer is stopped
   when its last lease is released (a coordinator's ``close``, or the finalizer
   of a coordinator the host dropped). A released lease is never counted twice.
3. **The observer holds no waiter.** Its handler (`_FanOut`) keeps each
   coordinator's `ResponseWaiters` by weak reference: nothing the observer's
   threads reach keeps a dropped coordinator (or its waiters) alive.
4. **A dead watch is replaced for everyone.** A lease whose observer died (its
   emitter stopped, the directory replaced) is released and acquired again; the
   first `acquire` that finds the shared observer dead starts a new one in its
   place, and the dead one is stopped when its last lease goes.
5. **Fork.** In a child the parent's observers do not run; each is forgotten once,
   without being stopped (`gateway_shim._responses.forget_inherited`: stopping
   it would unwatch the parent), and the registry starts empty.
"""

from __future__ import annotations

import os
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers.api import BaseObserver

from gateway_shim._guest import count_fork_fault
from gateway_shim._responses import (
    ResponseWaiters,
    forget_inherited,
    stop_watching,
    watch_responses,
)

__all__ = ["Lease", "acquire", "shared_watches"]

_Key = tuple[str, int, int]


class _FanOut(FileSystemEventHandler):
    """The shared observer's handler: every live lease's waiters (rule 3)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: weakref.WeakSet[ResponseWaiters] = weakref.WeakSet()

    def add(self, waiters: ResponseWaiters) -> None:
        with self._lock:
            self._waiters.add(waiters)

    def discard(self, waiters: ResponseWaiters) -> None:
        with self._lock:
            self._waiters.discard(waiters)

    def on_any_event(self, event: FileSystemEvent) -> None:
        with self._lock:
            targets = list(self._waiters)
        for waiters in targets:
            try:
                waiters.on_any_event(event)
            except Exception:  # noqa: BLE001 - one coordinator's fault is not another's
                # Counted and said once by that coordinator's re-check (`scan_faults`).
                waiters.fault("wake_failed")


@dataclass(slots=True, eq=False)
class _Shared:
    key: _Key
    observer: BaseObserver
    fan: _FanOut
    refs: int = 0


@dataclass(slots=True, eq=False)
class Lease:
    """One coordinator's share of a watch (rule 2)."""

    _shared: _Shared
    _waiters: ResponseWaiters
    released: bool = field(default=False)

    @property
    def observer(self) -> BaseObserver:
        return self._shared.observer

    @property
    def dir_id(self) -> tuple[int, int]:
        return self._shared.key[1], self._shared.key[2]

    def release(self, *, wait: bool = True) -> None:
        """Give the share back; the last one stops the observer. Idempotent;
        never raises. ``wait=False`` (a finalizer): no join of the observer's
        own thread, which ends on its own right after."""
        with _lock:
            if self.released:
                return
            self.released = True
            shared = self._shared
            shared.fan.discard(self._waiters)
            shared.refs -= 1
            last = shared.refs <= 0
            if last and _registry.get(shared.key) is shared:
                del _registry[shared.key]
        if last:
            stop_watching(shared.observer, wait=wait)


_lock = threading.Lock()
_registry: dict[_Key, _Shared] = {}


def _alive(observer: BaseObserver) -> bool:
    emitters = observer.emitters
    return observer.is_alive() and bool(emitters) and all(e.is_alive() for e in emitters)


def acquire(responses: Path, waiters: ResponseWaiters) -> Lease:
    """A share of the watch of ``responses`` as it is now (rules 1, 4). Raises
    ``OSError`` when the directory cannot be looked at or no inotify instance
    can be had, ``RuntimeError`` when the observer's threads cannot start."""
    st = os.stat(responses, follow_symlinks=False)
    key: _Key = (os.fspath(responses), st.st_dev, st.st_ino)
    with _lock:
        shared = _registry.get(key)
        if shared is not None and not _alive(shared.observer):
            del _registry[key]  # rule 4: stopped when its last lease goes
            shared = None
        if shared is None:
            fan = _FanOut()
            shared = _Shared(key, watch_responses(fan, responses), fan)
            _registry[key] = shared
        shared.refs += 1
        shared.fan.add(waiters)
        return Lease(shared, waiters)


def shared_watches() -> int:
    """How many shared observers this process runs (tests, bench)."""
    with _lock:
        return len(_registry)


def _after_fork_in_child() -> None:
    # Rule 5: right after fork, in the forking thread; nothing may block or raise.
    global _lock
    _lock = threading.Lock()
    inherited = list(_registry.values())
    _registry.clear()
    for shared in inherited:
        try:
            forget_inherited(shared.observer)
        except Exception:  # noqa: BLE001 - a child must never die in kexpr's hook; counted
            count_fork_fault()


os.register_at_fork(after_in_child=_after_fork_in_child)

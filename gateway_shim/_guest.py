"""The coordinator's footprint in the host's process: its executor, its release
and the fork hook.

Holds `OwnExecutor` (the small thread pool on which an asyncio presentation
does its blocking file work, so that no thread of the host loop's *default*
executor is ever held by kexpr), `release` (what ``close`` and the finalizer of
a dropped coordinator stop) and `track` (the `os.register_at_fork` hook that
lets each live coordinator reset itself in a forked child before any other code
runs there). Private to `gateway_shim.coordinator`; its rules 11 (closed stays
closed) and 12 (fork) apply.

The pool is bounded (`MAX_WORKERS` threads, started on demand, stopped by
`close`): a presentation's file work is short (a walk, one write, one read
per re-check), so two threads serve a hundred concurrent waits; the waits
themselves hold no thread at all (they are awaitables woken from the watcher).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final, Protocol, TypeVar

from kexpr.spool import log

MAX_WORKERS: Final = 2
T = TypeVar("T")

_log = log.logger("shim")


class ExecutorClosed(Exception):
    """The coordinator was closed: no file work is started any more."""


class OwnExecutor:
    """A lazily started, bounded pool owned by one coordinator."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Raises `ExecutorClosed` after `close`."""
        with self._lock:
            if self._closed:
                raise ExecutorClosed
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=MAX_WORKERS, thread_name_prefix="kexpr-shim"
                )
            try:
                return self._pool.submit(fn)
            except RuntimeError as e:  # shut down, or the interpreter is exiting
                raise ExecutorClosed from e

    def close(self, *, wait: bool = True) -> None:
        """Stop the threads; queued work is cancelled. Idempotent. ``wait=False``
        (a finalizer): the idle threads end on their own at once."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            # Called from one of its own threads it must not wait for itself.
            own = threading.current_thread().name.startswith("kexpr-shim")
            pool.shutdown(wait=wait and not own, cancel_futures=True)

    def after_fork_in_child(self) -> None:
        # The parent's threads do not exist here: a fresh pool on first use.
        self._lock = threading.Lock()
        self._pool = None


class Stoppable(Protocol):
    def close(self, *, wait: bool = ...) -> None: ...


def release(*parts: Stoppable, wait: bool = False) -> None:
    """Rule 11: stop every part a coordinator started (its watch, its re-check
    scan, its executor, its telemetry thread), in that order. From ``close``
    (``wait``: each thread joined, bounded) or from the finalizer of a
    coordinator the host dropped (no join: it runs on whichever thread collected
    it). Idempotent; never raises: a part that failed is counted and said once,
    after the others were stopped."""
    failed = 0
    for part in parts:
        try:
            part.close(wait=wait)
        except Exception:  # noqa: BLE001 - a release must finish whatever one part did; counted
            failed += 1
    if failed:
        try:
            log.event(_log, logging.WARNING, "release_incomplete", parts=failed)
        except Exception:  # noqa: BLE001 - counted above; at interpreter exit logging may be gone
            pass


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None: ...


_live: weakref.WeakSet[ForkAware] = weakref.WeakSet()

# Faults survived in a forked child's hooks (this one's and `gateway_shim._watch`'s):
# counted here, not said from the hook (it runs before anything else in the child).
fork_faults = 0


def count_fork_fault() -> None:
    global fork_faults
    fork_faults += 1


def track(obj: ForkAware) -> None:
    """Reset ``obj`` in every child forked while it lives (rule 12)."""
    _live.add(obj)


def _after_fork_in_child() -> None:
    # Runs in the child right after fork, in the forking thread, before any
    # other thread can exist there: nothing here may block or raise.
    for obj in list(_live):
        try:
            obj._after_fork_in_child()
        except Exception:  # noqa: BLE001 - a child must never die in kexpr's hook; counted
            count_fork_fault()


os.register_at_fork(after_in_child=_after_fork_in_child)

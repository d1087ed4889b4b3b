"""The coordinator's footprint in the host's process: its executor and the fork hook.

Holds `OwnExecutor` (the small thread pool on which an asyncio presentation
does its blocking file work, so that no thread of the host loop's *default*
executor is ever held by kexpr) and `track` (the
`os.register_at_fork` hook that lets each live coordinator reset itself in a
forked child before any other code runs there). Private to
`gateway_shim.coordinator`; its rules 11 (closed stays closed) and 12 (fork)
apply.

The pool is bounded (`MAX_WORKERS` threads, started on demand, stopped by
`close`): a presentation's file work is short (a walk, one write, one read
per re-check), so two threads serve a hundred concurrent waits; the waits
themselves hold no thread at all (they are awaitables woken from the watcher).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final, Protocol, TypeVar

MAX_WORKERS: Final = 2
T = TypeVar("T")


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


class ForkAware(Protocol):
    def _after_fork_in_child(self) -> None: ...


_live: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def track(obj: ForkAware) -> None:
    """Reset ``obj`` in every child forked while it lives (rule 12)."""
    _live.add(obj)


def _after_fork_in_child() -> None:
    # Runs in the child right after fork, in the forking thread, before any
    # other thread can exist there: nothing here may block or raise.
    for obj in list(_live):
        try:
            obj._after_fork_in_child()
        except Exception:  # noqa: BLE001 - a child must never die in kexpr's hook
            pass


os.register_at_fork(after_in_child=_after_fork_in_child)

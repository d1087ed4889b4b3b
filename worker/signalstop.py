"""A stop request that a signal handler may set: `SignalStop`.

Used by the worker's and the supervisor's SIGTERM/SIGINT handlers. Rules:

1. ``set`` takes no lock. A Python signal handler runs on the main thread
   between two bytecodes; `threading.Event.set` takes the event's lock, and when
   the same main thread is inside `threading.Event.wait` holding that lock (on
   entering the wait, or on waking from it), the handler waits for a lock its own
   thread holds: the process never stops. Seen as a supervisor that ignored
   SIGTERM for ever. ``set`` writes a flag and one byte down a pipe instead.
2. ``wait`` is ``poll`` on the pipe's read end: a handler that runs during the
   wait makes the pipe readable, so the wait returns at once; ``poll`` is retried
   after a signal with the remaining timeout (PEP 475), never cut short.
3. ``set`` from another thread wakes a waiter the same way (tests do this).
4. Both ends are close-on-exec and non-blocking: a child never inherits them, and a
   full pipe (a flood of signals) drops the byte, not the handler: the flag is
   already set. They are closed when the object is collected, never before (a
   closed number could be reused by another file, which ``set`` would then write).
"""

from __future__ import annotations

import math
import os
import select
import weakref
from typing import Final, Protocol

_DRAIN: Final = 512


class StopRequest(Protocol):
    """What a run loop reads of its stop: `SignalStop` or a `threading.Event`."""

    def is_set(self) -> bool: ...


class SignalStop:
    """The `threading.Event` subset the run loops use: ``set``, ``is_set``, ``wait``."""

    __slots__ = ("__weakref__", "_flag", "_poll", "_r", "_w")

    def __init__(self) -> None:
        self._flag = False
        self._r, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        weakref.finalize(self, _close, self._r, self._w)
        self._poll = select.poll()
        self._poll.register(self._r, select.POLLIN)

    def set(self) -> None:
        self._flag = True
        try:
            os.write(self._w, b"\0")
        except OSError:
            # Rule 4: the pipe is full (already readable) or closed; the flag is set.
            pass

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """True once set; else waits up to ``timeout`` seconds (None: until set)."""
        if self._flag:
            return True
        ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
        if self._poll.poll(ms):
            try:
                os.read(self._r, _DRAIN)
            except BlockingIOError:  # another waiter drained it first
                pass
        return self._flag


def _close(*fds: int) -> None:
    for fd in fds:
        os.close(fd)

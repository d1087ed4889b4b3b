"""Journal verification beside the SDK import (worker start-up).

A worker is ready only once its dedupe index is rebuilt from the verified journal
*and* the SDK is imported with its resources loaded (docs/performance.md, "The
figures behind the code's comments", has both times). Both are CPU-bound Python, so
one process does them one after the other. `start` forks a child *before* the SDK
import; the child verifies the journal (`kexpr.spool.journal.Journal.export_verified`)
on the second core and writes the result to a pipe; the parent imports, then
hands the result to `Journal.adopt`, which installs it only if every journal file
is still the one the child read — otherwise the parent loads by itself.

Rules:

1. The child's verdict is never trusted. A child that fails in any way (a
   finding, an unsafe file, a crash, a timeout) sends nothing and the parent runs
   the full `load` itself, which reports the exact finding.
2. The child only reads: the journal lock (created with its exact mode if
   missing, as the worker would), the segments, the quarantined files. It never
   writes a row, never touches the spool, never calls out, never logs, and leaves
   with ``os._exit`` (no atexit handlers, no buffered output of the parent's).
3. Fork happens before any thread exists (``kexpr.worker.main`` calls `start` right
   after the environment checks): a forked child of a threaded process could
   inherit a lock held by a thread that does not exist in it.
4. The child is the same program, same UID, same non-dumpable state (the flag
   survives fork; it is reset only by execve), and it exits within the time the
   verification takes. The result crosses a private pipe as `marshal` data of
   strings and integers only.
"""

from __future__ import annotations

import os
import select
import time
from typing import Final

from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot

# Far longer than any sane verification of a full 36-day journal;
# past it the parent stops waiting, kills the child and loads by itself.
RESULT_TIMEOUT_S: Final = 30.0


class Preload:
    """A child verifying the journal; `result` once, in the parent."""

    def __init__(self, pid: int, fd: int) -> None:
        self._pid = pid
        self._fd = fd
        self._done = False

    def result(self, timeout_s: float = RESULT_TIMEOUT_S) -> bytes | None:
        """The child's export, or None (failed, timed out, or already taken)."""
        if self._done:
            return None
        self._done = True
        chunks: list[bytes] = []
        end = time.monotonic() + timeout_s
        ok = False
        try:
            while True:
                left = end - time.monotonic()
                if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                    break
                chunk = os.read(self._fd, 1 << 20)
                if not chunk:
                    ok = True
                    break
                chunks.append(chunk)
        except OSError:
            ok = False
        finally:
            os.close(self._fd)
            self._reap(kill=not ok)
        data = b"".join(chunks)
        if not ok or data[:1] != b"1":
            return None
        return data[1:]

    def discard(self) -> None:
        """Stop and reap the child if its result was never taken (the worker
        did not get as far as loading: another worker, an unsafe data root)."""
        if self._done:
            return
        self._done = True
        os.close(self._fd)
        self._reap(kill=True)

    def _reap(self, *, kill: bool) -> None:
        try:
            if kill:
                os.kill(self._pid, 9)
            os.waitpid(self._pid, 0)
        except (ChildProcessError, ProcessLookupError):
            pass


def start(root: DataRoot) -> Preload | None:
    """Fork the verifying child; None if fork itself fails (load as usual)."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: rule 2
        try:
            os.close(r)
            try:
                payload = b"1" + Journal(root).export_verified()
            except BaseException:  # noqa: BLE001 -- rule 1: the parent decides
                payload = b"0"
            view = memoryview(payload)
            while view:
                view = view[os.write(w, view) :]
        finally:
            os._exit(0)
    os.close(w)
    return Preload(pid, r)

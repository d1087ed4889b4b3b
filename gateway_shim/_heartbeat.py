"""Is a worker serving this data root? The shim's read of ``worker.status.json``.

Holds `WorkerHeartbeat`, asked once per presentation right before a request
would be written. Private to `gateway_shim.coordinator`; its rule 13 applies:

- **Serving** means: the status file is there, reads safely (no symlink, owner
  and mode as the data root allows, bounded), is the worker's status schema,
  says ``state: ready``, and was written (its mtime, the kernel's clock, so a
  worker's injected clock does not matter) no more than `STALE_AFTER_S` from
  this process's wall clock, either way. The file's format, its size cap and
  the bound are `kexpr.spool.status`'s.
- Anything else is **not serving**: no file (no worker has ever served this
  data root), ``starting`` / ``stopping`` / ``stopped``, a heartbeat older
  than the bound (a worker killed or stuck), a file that cannot be read or
  parsed. The presentation then answers canonical at once, outcome
  ``worker_unavailable``, and writes no request: nothing could answer it
  within the wait, and a request left behind would only be refused later.
- **The numbers.** A ready worker rewrites its status at least once per scan
  pass (`kexpr.worker.daemon.RESCAN_INTERVAL_S`, 1 s). `STALE_AFTER_S` = 10 s,
  the bound ``kexpr status`` uses: ten periods, room for a loaded machine
  whose scan pass takes seconds. A ``stopped`` worker is seen at once (its
  last write says so); a killed one within 10 s.
- **The cache.** One ``lstat`` per presentation (microseconds); the file is
  read and parsed again only when its identity, mtime or size changed (the
  worker replaces it by rename: a new inode per write). So the first
  presentation after a worker's first ``ready`` write is served: no verdict
  outlives the file it was read from, and freshness is judged against the
  clock at every presentation.

Content-free: only the state word and the mtime are read; nothing from the
file is logged or kept but the verdict.
"""

from __future__ import annotations

import enum
import os
import threading
import time
from collections.abc import Callable
from typing import Final

from kexpr.spool.fsio import read_private_identified
from kexpr.spool.layout import DataRoot
from kexpr.spool.status import (
    MAX_STATUS_BYTES,
    STALE_AFTER_S,
    StatusRefused,
    parse_status,
)

_READ_TRIES: Final = 3


class Liveness(enum.Enum):
    """Why a worker is or is not serving (content-free)."""

    SERVING = "serving"
    ABSENT = "absent"
    NOT_READY = "not_ready"
    STALE = "stale"
    UNREADABLE = "unreadable"


_Key = tuple[int, int, int, int]


class WorkerHeartbeat:
    """The cached verdict on one data root's ``worker.status.json``."""

    def __init__(self, root: DataRoot, *, wall: Callable[[], float] = time.time) -> None:
        self._root = root
        self._wall = wall
        self._lock = threading.Lock()
        self._key: _Key | None = None
        self._read_as = Liveness.UNREADABLE

    def liveness(self) -> Liveness:
        """Never raises."""
        try:
            st = os.stat(self._root.status_file, follow_symlinks=False)
        except FileNotFoundError:
            return Liveness.ABSENT
        except (OSError, ValueError):
            return Liveness.UNREADABLE
        key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            read_as = self._read_as if self._key == key else None
        tries = 0
        while read_as is None:
            read, fid = self._read()
            if fid == (st.st_dev, st.st_ino):
                read_as = read
                with self._lock:
                    self._key, self._read_as = key, read_as
                break
            # Not the file just stat-ed: the worker replaced it in between (once
            # a second), or the read went through a pinned data root that is no
            # longer at its path (coordinator rule 10). Looked at again, twice;
            # then trusted for nothing, kept for nothing.
            tries += 1
            if tries >= _READ_TRIES:
                return Liveness.UNREADABLE
            try:
                st = os.stat(self._root.status_file, follow_symlinks=False)
            except OSError:
                return Liveness.UNREADABLE
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if read_as is not Liveness.SERVING:
            return read_as
        if abs(self._wall() - st.st_mtime) > STALE_AFTER_S:
            return Liveness.STALE
        return Liveness.SERVING

    def _read(self) -> tuple[Liveness, tuple[int, int] | None]:
        """What the file says (SERVING for ``ready``, NOT_READY or UNREADABLE)
        and the (device, inode) of the file read."""
        try:
            data, fid = read_private_identified(self._root.status_file, max_bytes=MAX_STATUS_BYTES)
        except (OSError, ValueError):  # UnsafePath is an OSError
            return Liveness.UNREADABLE, None
        return _judge(data), (fid.dev, fid.ino)

    def after_fork_in_child(self) -> None:
        # The lock may have been held at the fork; the cached verdict stays true.
        self._lock = threading.Lock()


def _judge(data: bytes) -> Liveness:
    try:
        status = parse_status(data)
    except StatusRefused:
        return Liveness.UNREADABLE
    if not status.current or status.state is None:
        return Liveness.UNREADABLE
    return Liveness.SERVING if status.ready else Liveness.NOT_READY

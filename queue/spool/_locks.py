"""The product's locks: ``flock(2)`` on checked lock files (`kexpr.spool.fsio` rules 4, 6).

Holds `ProductLock` (walk, open and check for each hold; the ops tools and
``worker.lock``), `HeldFlock` (the journal writer's one kept descriptor), their
shared ``with`` protocol, `LockTimeout` and `make_flock`. Private: import these
names from `kexpr.spool.fsio`, whose header states the rules: rule 4 (a lock is only
held if the descriptor locked is the inode at the lock path, else
`INODE_CHANGED`), rule 6 (lock files are opened without ``O_TRUNC`` and never
unlinked: filelock CVE-2025-68146), and rules 1-2 for the lock file's own open.
"""

from __future__ import annotations

import fcntl
import os
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Self

from kexpr.spool._sharing import PRIVATE, FileId, Sharing, UnsafePath, UnsafeReason
from kexpr.spool._walk import _OPEN_CREATE, _OPEN_READ, _Dir, _open_leaf


class LockTimeout(TimeoutError):
    """A lock was not acquired within its timeout (another holder has it)."""


class _LockContext:
    """``with lock:`` for the two lock classes below."""

    def acquire(self, timeout: float = -1) -> None:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class ProductLock(_LockContext):
    """An ``flock(2)`` on a product lock file, opened and checked for each hold.

    Every first acquire walks to the lock file without following a symlink and
    creates it (``O_EXCL``, the directory's file mode) or opens it read-only and
    checks it (regular, owner, mode) — never ``O_TRUNC``, so there is nothing to
    truncate through a path that changed under us (filelock CVE-2025-68146). It
    then takes ``flock(LOCK_EX)`` on that descriptor and walks again: the path
    must still name the inode it locked and the one first checked; otherwise the
    descriptor is closed (dropping the flock) and `INODE_CHANGED` raised — a lock
    on an inode that is no longer at the path excludes nobody. The last release
    closes the descriptor. The file is never unlinked. Re-entrant per object (a
    depth count); callers order their threads with their own mutex.

    This is the project's own lock rather than ``filelock``: the checks above need
    the locked descriptor, which filelock keeps private.

    ``create=False`` (the ops tools, possibly run as root): never create the
    file — a root-owned lock file would lock the worker out — and treat an
    absent one as "no writer has ever run": acquiring is then a no-op.
    """

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = path
        self._create = create
        self._absent = False
        # The inode first checked: every later acquire must find the same one
        # (rule 4, "inode identity across open and re-open").
        self._first: FileId | None = None
        self._fd: int | None = None
        self._depth = 0

    def _prepare(self) -> tuple[int, FileId] | None:
        with _Dir(self.path.parent) as d:
            try:
                if not self._create:
                    raise FileExistsError
                fd, st = _open_leaf(d, self.path.name, _OPEN_CREATE)
            except FileExistsError:
                try:
                    fd, st = _open_leaf(d, self.path.name, _OPEN_READ)
                except FileNotFoundError:
                    if self._create:
                        raise
                    return None
            return fd, FileId.of(st)

    def _recheck(self) -> FileId | None:
        again = self._prepare()
        if again is None:
            return None
        os.close(again[0])
        return again[1]

    def acquire(self, timeout: float = -1) -> None:
        if self._depth:
            self._depth += 1
            return
        prepared = self._prepare()
        self._absent = prepared is None
        if prepared is None:
            return
        fd, checked = prepared
        try:
            if self._first is None:
                self._first = checked
            elif checked != self._first:
                raise UnsafePath(UnsafeReason.INODE_CHANGED)
            _flock_fd(fd, timeout, self.path)
            if self._recheck() != checked:
                raise UnsafePath(UnsafeReason.INODE_CHANGED)
        except BaseException:
            os.close(fd)  # drops the flock, if it was taken
            raise
        self._fd, self._depth = fd, 1

    def release(self) -> None:
        if self._absent:
            return
        if self._depth == 0:
            raise RuntimeError("release of an unheld lock")
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    @property
    def is_locked(self) -> bool:
        return self._depth > 0


class HeldFlock(_LockContext):
    """The journal lock of its single writer: one checked descriptor, kept open,
    ``flock``-ed for each critical section.

    The first acquire does what `ProductLock` does before every acquire — walk
    to the lock file without following a symlink, create it ``O_EXCL`` (the
    directory's file mode) or open and check it (regular, owner, mode) — and
    keeps that descriptor. Every acquire then takes ``flock(LOCK_EX)`` on it and
    checks, with one ``lstat`` of the lock path, that the path still names this
    inode and that it is still a regular file of the right owner and mode;
    otherwise the flock is dropped and `INODE_CHANGED` (or the check's own
    reason) is raised: a lock on an inode no longer at the path excludes nobody.
    There is no open per acquire, so there is nothing to create or truncate
    through a path that changed under us (the filelock CVE class); a changed
    path is *detected*, and the worker's tree check quarantines it.

    Why not `ProductLock` for the journal: it re-walks the path twice and
    opens the file on every acquire, three or four times per artifact
    (docs/performance.md, "The figures behind the code's comments"); this costs one
    ``flock`` and one ``lstat``. Both lock the same inode with ``flock(2)``, so
    a `HeldFlock` in the worker and a `ProductLock` in an ops tool exclude each
    other. Re-entrant per object (a depth count); callers order their threads
    with their own mutex, as with `ProductLock`. The descriptor is closed when
    the object is collected, or by `close`; the file is never unlinked.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._id: FileId | None = None
        self._sharing: Sharing = PRIVATE
        self._depth = 0
        self._finalizer: weakref.finalize[[int], HeldFlock] | None = None

    def _open(self) -> int:
        with _Dir(self.path.parent) as d:
            try:
                fd, st = _open_leaf(d, self.path.name, _OPEN_CREATE)
            except FileExistsError:
                fd, st = _open_leaf(d, self.path.name, _OPEN_READ)
            sharing = d.sharing
        if self._id is not None and FileId.of(st) != self._id:
            os.close(fd)
            raise UnsafePath(UnsafeReason.INODE_CHANGED)
        self._fd, self._id, self._sharing = fd, FileId.of(st), sharing
        self._finalizer = weakref.finalize(self, os.close, fd)
        return fd

    def _check_path(self) -> None:
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError as e:
            raise UnsafePath(UnsafeReason.INODE_CHANGED) from e
        if FileId.of(st) != self._id:
            raise UnsafePath(UnsafeReason.INODE_CHANGED)
        self._sharing.check_file(st)

    def acquire(self, timeout: float = -1) -> None:
        if self._depth:
            self._depth += 1
            return
        fd = self._fd if self._fd is not None else self._open()
        _flock_fd(fd, timeout, self.path)
        try:
            self._check_path()
        except BaseException:
            fcntl.flock(fd, fcntl.LOCK_UN)
            raise
        self._depth = 1

    def release(self) -> None:
        if self._depth == 0:
            raise RuntimeError("release of an unheld lock")
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @property
    def is_locked(self) -> bool:
        return self._depth > 0

    def close(self) -> None:
        """Drop the descriptor (and with it any flock). The next acquire
        re-opens and must find the same inode."""
        if self._finalizer is not None:
            self._finalizer()
        self._fd, self._finalizer, self._depth = None, None, 0


def _flock_fd(fd: int, timeout: float, path: Path) -> None:
    """``flock(LOCK_EX)``: blocking for ``timeout < 0``, else polled until it."""
    if timeout < 0:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    end = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= end:
                raise LockTimeout(path.name) from None
            time.sleep(min(0.01, max(0.0, end - time.monotonic())))


def make_flock(path: Path, *, create: bool = True) -> ProductLock:
    """The lock of ``journal.lock`` / ``worker.lock`` (see `ProductLock`)."""
    return ProductLock(path, create=create)

"""File-system discipline for everything this product writes (SPEC §3, §4).

Rules, each learnt from a mail queue or a CVE:

1. Every open uses ``O_NOFOLLOW | O_CLOEXEC``; a symlink where we expect a file is
   an attack, never a redirection to follow (filelock CVE-2025-68146: truncation
   through a symlink before the lock). Fail closed: `UnsafePath`.
2. After open we ``fstat`` the descriptor (not the path): regular file, owned by us,
   no permission bits for "other". Checking the descriptor closes the
   check-then-use window of checking the path.
3. A file that must survive a crash is written in ``tmp/`` with ``O_EXCL``,
   fsynced, then *linked* into place (``os.link`` cannot replace an existing file,
   so losing a race is ``EEXIST``, never an overwrite) and its directory fsynced
   (Maildir/Postfix queue rules).
4. A claim is a ``rename`` between two directories of one watched tree; exactly
   one claimer wins, the loser sees ``ENOENT``.
5. Nothing here ever opens with ``O_TRUNC``.

Violations raise `UnsafePath` carrying an enum reason and never the content.
"""

from __future__ import annotations

import enum
import errno
import inspect
import os
import stat
from pathlib import Path
from typing import Final

import filelock

_OPEN_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_MODE: Final = 0o600
DIR_MODE: Final = 0o700


class UnsafeReason(enum.StrEnum):
    SYMLINK = "symlink"
    NOT_REGULAR_FILE = "not_regular_file"
    NOT_DIRECTORY = "not_directory"
    WRONG_OWNER = "wrong_owner"
    BAD_MODE = "bad_mode"
    TOO_LARGE = "too_large"
    INODE_CHANGED = "inode_changed"


class UnsafePath(Exception):
    """A path this product owns is not what it must be. Fail closed."""

    def __init__(self, reason: UnsafeReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


def _check_file_stat(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(UnsafeReason.NOT_REGULAR_FILE)
    if st.st_uid != os.geteuid():
        raise UnsafePath(UnsafeReason.WRONG_OWNER)
    if st.st_mode & 0o007:
        raise UnsafePath(UnsafeReason.BAD_MODE)


def ensure_private_dir(path: Path, *, create_parents: bool = False) -> None:
    """Create ``path`` 0700 if missing; check it is a real directory owned by us."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if create_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            pass
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(UnsafeReason.SYMLINK)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(UnsafeReason.NOT_DIRECTORY)
    if st.st_uid != os.geteuid():
        raise UnsafePath(UnsafeReason.WRONG_OWNER)
    if st.st_mode & 0o007:
        raise UnsafePath(UnsafeReason.BAD_MODE)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_private(path: Path, *, max_bytes: int) -> bytes:
    """Read a whole private file: no symlink, regular, ours, no 'other' bits, bounded."""
    try:
        fd = os.open(path, _OPEN_READ)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePath(UnsafeReason.SYMLINK) from e
        raise
    try:
        st = os.fstat(fd)
        _check_file_stat(st)
        if st.st_size > max_bytes:
            raise UnsafePath(UnsafeReason.TOO_LARGE)
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise UnsafePath(UnsafeReason.TOO_LARGE)
        return data
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` exclusively (0600), write, fsync. Never follows or truncates."""
    fd = os.open(path, _OPEN_CREATE, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp_dir: Path, final_path: Path, data: bytes, *, durable: bool = True) -> None:
    """Atomically make ``final_path`` appear with ``data`` (tmp -> fsync -> link -> dir fsync).

    Raises ``FileExistsError`` if ``final_path`` already exists: publication never
    replaces. The staging file is removed in every case (partial state undone on
    ``BaseException``, then re-raised).
    """
    staging = tmp_dir / f".{final_path.name}.{os.getpid()}.{os.urandom(6).hex()}"
    _write_new(staging, data)
    try:
        os.link(staging, final_path)
    finally:
        os.unlink(staging)
    if durable:
        fsync_dir(final_path.parent)


def create_private_file(path: Path, data: bytes) -> None:
    """Create a new private file in place (``O_EXCL``), fsync it and its directory."""
    _write_new(path, data)
    fsync_dir(path.parent)


def claim(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst``; True if we won the claim, False if someone else did."""
    try:
        os.rename(src, dst)
    except FileNotFoundError:
        return False
    return True


def unlink_quiet(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def replace_private(tmp_dir: Path, final_path: Path, data: bytes) -> None:
    """Replace a non-durable status file atomically (rename over). Only for
    ``worker.status.json``: a heartbeat, not evidence."""
    staging = tmp_dir / f".{final_path.name}.{os.getpid()}.{os.urandom(6).hex()}"
    _write_new(staging, data)
    try:
        os.rename(staging, final_path)
    except BaseException:
        unlink_quiet(staging)
        raise


def make_flock(path: Path) -> filelock.BaseFileLock:
    """A flock on ``path`` that is never unlinked and never degrades to a soft lock.

    filelock 3.20.x never unlinks a Unix lock file; 3.30+ unlinks by default
    unless ``preserve_lock_file=True`` and may fall back to a soft marker file on
    a file system without flock. Both defaults are wrong here (SPEC §3: the lock
    file is never unlinked — unlinking a flock target lets two holders coexist on
    two inodes), so they are pinned off whatever the installed version. Not
    thread-local: callers order their threads with their own mutex.
    """
    kwargs: dict[str, object] = {"mode": FILE_MODE, "thread_local": False}
    params = inspect.signature(filelock.FileLock).parameters
    if "preserve_lock_file" in params:
        kwargs["preserve_lock_file"] = True
    if "fallback_to_soft" in params:
        kwargs["fallback_to_soft"] = False
    return filelock.FileLock(str(path), **kwargs)  # type: ignore[arg-type]

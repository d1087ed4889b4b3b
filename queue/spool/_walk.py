"""Walking product paths without following a symlink (`kexpr.spool.fsio` rules 1, 2, 6).

Holds the pinned ancestors (`pin_ancestor`, `pin_moved`, `repin`), the walk
one component at a time (`_walk`, `_open_dir`), an open product directory
(`_Dir`), the checked leaf open (`_open_leaf`: ``O_NOFOLLOW``, descriptor
``fstat``-ed, ``O_EXCL`` creation ``fchmod``-ed, never ``O_TRUNC``) and the
directory checks built on them (`check_dir`, `check_tree`, `glance_dirs`).
Private: import these names from `kexpr.spool.fsio`, whose header states the rules:
rule 1 (no symlink anywhere; pins above the data root; `check_tree` walks fresh
from ``/``), rule 2 (checked after creation and on every open), rule 6 (no
``O_TRUNC``). Fail closed: `UnsafePath`.
"""

from __future__ import annotations

import collections
import errno
import os
import stat
import threading
from pathlib import Path
from typing import Final, Self

from kexpr.spool._sharing import (
    PRIVATE,
    SHARED_DIR_MODE,
    FileId,
    Sharing,
    UnsafePath,
    UnsafeReason,
    sharing_of,
)

_O_PATH: Final = getattr(os, "O_PATH", os.O_RDONLY)
# How every directory component is walked (rule 1). O_PATH needs only search
# permission, so a shared-group worker can walk a gateway-owned ancestor.
_WALK: Final = _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LEAF: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_READ: Final = os.O_RDONLY | os.O_NONBLOCK
_OPEN_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL


# ------------------------------------------------------------------- walking


# Pinned ancestors (rule 1): the operator's directory above a data root,
# resolved once by `kexpr.spool.layout.DataRoot` and registered with `pin_ancestor`.
# The first walk below it walks it from "/" and keeps that O_PATH descriptor;
# later walks start there (on a dup), so the few components above the data root
# are walked once per process instead of on every open. A bounded LRU: an
# evicted pin's descriptor is closed, in-flight walks hold their own dup.
_PIN_MAX: Final = 16
_pins: collections.OrderedDict[str, tuple[int, os.stat_result | None] | None] = (
    collections.OrderedDict()
)
_pin_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # A fork while another thread of the parent was inside a walk (the lock is
    # taken on every open under a pin) would leave the child's copy held for
    # ever, and the child's first open would hang: a fresh lock in the child,
    # where no other thread exists yet. The pins' descriptors are inherited and
    # stay valid; one being evicted at the fork is at worst left open.
    global _pin_lock
    _pin_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def pin_ancestor(path: Path) -> None:
    """Register ``path`` (absolute and already resolved) as a pinned ancestor.

    Cheap: the directory is walked (no symlink, from ``/``) and its descriptor
    kept at the first walk that passes through it. Once pinned, a change above
    it (a rename, a symlink put in its place) cannot redirect any later open:
    they all continue in the directory that was walked. Such a change is not an
    error for the walks that start from the pin; the worker's timer walk
    (`check_tree`, always fresh from ``/``) reports it and quarantines.
    """
    p = os.fspath(path)
    if not os.path.isabs(p) or p == "/" or p != os.path.normpath(p):
        return
    with _pin_lock:
        if p in _pins:
            _pins.move_to_end(p)
            return
        _pins[p] = None
        while len(_pins) > _PIN_MAX:
            _, old = _pins.popitem(last=False)
            if old is not None:
                os.close(old[0])


def pin_moved(path: Path) -> bool:
    """Is the pinned ancestor ``path`` no longer the directory at that path?

    Compares the pinned descriptor's device and inode with a fresh walk from
    ``/`` (no symlink followed). True also when the path cannot be walked any
    more. A ``path`` never pinned, or not walked yet, is not moved. For the
    shim after a failed presentation: an operator who moved
    the data root to a new volume at the same path.
    """
    p = os.fspath(path)
    with _pin_lock:
        state = _pins.get(p)
        if state is None:
            return False
        pinned = os.fstat(state[0])
    try:
        fd, _ = _walk(os.open("/", _WALK), p, None)
    except OSError:
        return True
    try:
        now = os.fstat(fd)
    finally:
        os.close(fd)
    return (now.st_dev, now.st_ino) != (pinned.st_dev, pinned.st_ino)


def repin(path: Path) -> None:
    """Forget the descriptor of the pinned ancestor ``path`` (if any): the next
    walk below it walks it again from ``/`` and pins what is there now."""
    p = os.fspath(path)
    with _pin_lock:
        state = _pins.get(p)
        if state is not None:
            _pins[p] = None
            os.close(state[0])


def _pinned_start(p: str) -> tuple[int, str, os.stat_result | None] | None:
    """A dup of the pin that ``p`` lies under, the rest of ``p``, the pin's anchor."""
    with _pin_lock:
        for base, state in _pins.items():  # noqa: B007 - `state` is read after the break
            if p.startswith(base) and (len(p) == len(base) or p[len(base)] == "/"):
                break
        else:
            return None
        if state is None:
            state = _walk(os.open("/", _WALK), base, None)
            _pins[base] = state
        return os.dup(state[0]), p[len(base) :], state[1]


def _open_dir(path: Path, *, fresh: bool = False) -> tuple[int, os.stat_result | None]:
    """A descriptor of directory ``path`` reached without following any symlink,
    and the stat of the topmost shared-group (02770) directory on the way: the
    data root of a shared-group deployment, whose owner is a party (rule 3).

    From a pinned ancestor when ``path`` lies under one, unless ``fresh``."""
    p = os.fspath(path)
    if not fresh:
        start = _pinned_start(p)
        if start is not None:
            return _walk(*start)
    return _walk(os.open("/" if os.path.isabs(p) else ".", _WALK), p, None)


def _walk(fd: int, p: str, anchor: os.stat_result | None) -> tuple[int, os.stat_result | None]:
    """Walk the components of ``p`` from ``fd`` (consumed: closed or returned)."""
    try:
        for part in p.split("/"):
            if part in ("", "."):
                continue
            try:
                nxt = os.open(part, _WALK, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ENOTDIR, errno.ELOOP):
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    raise UnsafePath(
                        UnsafeReason.SYMLINK
                        if stat.S_ISLNK(st.st_mode)
                        else UnsafeReason.NOT_DIRECTORY
                    ) from e
                raise
            os.close(fd)
            fd = nxt
            if anchor is None:
                st = os.fstat(fd)
                if stat.S_IMODE(st.st_mode) == SHARED_DIR_MODE:
                    anchor = st
        return fd, anchor
    except BaseException:
        os.close(fd)
        raise


class _Dir:
    """An open product directory: its descriptor and the sharing it declares.

    ``product=False`` is for the data root's parent, which the operator owns:
    it is walked without symlinks but its mode and owner are not ours to judge.
    """

    __slots__ = ("anchor", "fd", "sharing", "st")

    def __init__(self, path: Path, *, product: bool = True, fresh: bool = False) -> None:
        self.fd, anchor = _open_dir(path, fresh=fresh)
        self.anchor = anchor
        try:
            self.st = os.fstat(self.fd)
            self.sharing = PRIVATE
            if product:
                self.sharing = sharing_of(self.st, anchor)
                self.sharing.check_dir(self.st)
        except BaseException:
            os.close(self.fd)
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def fsync(self) -> None:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self.fd)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _open_leaf(
    d: _Dir, name: str, flags: int, *, mode: int | None = None, exclusive: bool = False
) -> tuple[int, os.stat_result]:
    """Open ``name`` inside ``d`` (``O_NOFOLLOW``), check the descriptor (rule 2).

    With ``O_CREAT`` the file is created with ``mode`` (default: the directory's
    file mode), ``fchmod``-ed to exactly that and re-checked.
    """
    if flags & os.O_TRUNC:
        raise ValueError("O_TRUNC is never used (rule 6)")
    create_mode = mode if mode is not None else d.sharing.file_mode
    try:
        fd = os.open(name, flags | _LEAF, create_mode, dir_fd=d.fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePath(UnsafeReason.SYMLINK) from e
        raise
    created = bool(flags & os.O_CREAT and flags & os.O_EXCL)
    try:
        if created:
            os.fchmod(fd, create_mode)
        st = os.fstat(fd)
        d.sharing.check_file(st, exclusive=exclusive)
        return fd, st
    except BaseException:
        os.close(fd)
        if created:
            # Ours (O_EXCL): no refused file is left behind.
            try:
                os.unlink(name, dir_fd=d.fd)
            except OSError:
                pass
        raise


# ------------------------------------------------------------ directory checks


def check_dir(path: Path) -> tuple[Sharing, FileId]:
    """Check one product directory (walk, type, owner, mode); its sharing and identity."""
    with _Dir(path) as d:
        return d.sharing, FileId.of(d.st)


def check_tree(root: Path, below: tuple[str, ...]) -> tuple[Sharing, dict[str, FileId]]:
    """Check ``root`` and each directory ``below`` it (relative paths) as
    `check_dir` does, in one walk: the root is walked fresh from ``/`` (never
    from a pinned ancestor, so a change above the root is found), each directory
    below from the root's descriptor (still one component at a time, no symlink
    followed). Every directory below must declare the root's sharing
    (`BAD_MODE` otherwise). Returns the sharing and each identity, ``"."`` for
    the root."""
    with _Dir(root, fresh=True) as r:
        ids = {".": FileId.of(r.st)}
        for rel in below:
            fd, sub_anchor = _walk(os.dup(r.fd), rel, r.anchor)
            try:
                st = os.fstat(fd)
                sharing = sharing_of(st, sub_anchor)
                sharing.check_dir(st)
            finally:
                os.close(fd)
            if sharing != r.sharing:
                raise UnsafePath(UnsafeReason.BAD_MODE)
            ids[rel] = FileId.of(st)
        return r.sharing, ids


def glance_dirs(paths: tuple[Path, ...], sharing: Sharing) -> tuple[FileId, ...]:
    """One ``lstat`` per directory, no walk: each must still be a directory (a
    symlink is `SYMLINK`) with ``sharing``'s owner and mode; their identities.

    For a frequent re-check between two `check_tree` walks (the worker's scan):
    compared with the identities of the last walk, it finds a product directory
    replaced, swapped, re-moded or turned into a symlink. What only the walk
    finds is a symlink put *above* the data root that leads back to the same
    directories — harmless to what is opened, and found at the next walk.
    """
    out = []
    for p in paths:
        st = os.lstat(p)
        sharing.check_dir(st)
        out.append(FileId.of(st))
    return tuple(out)

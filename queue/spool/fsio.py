"""File-system discipline for everything this product writes (SPEC §3, §4).

Rules, each learnt from a mail queue or a CVE. Everything that opens, creates,
renames or removes a product file goes through this module, so the rules live in
one place:

1. **No symlink anywhere.** A path is never handed to the kernel whole: it is
   walked one component at a time with ``openat(O_PATH | O_DIRECTORY |
   O_NOFOLLOW)`` and the leaf is opened with ``O_NOFOLLOW`` relative to its
   directory's descriptor. A symlink at *any* component is `UnsafeReason.SYMLINK`,
   never a redirection to follow (filelock CVE-2025-68146: truncation through a
   symlink before the lock). `spool.layout.DataRoot` resolves the ancestors
   *above* the data root once (``realpath`` of its parent) and pins that
   directory (`pin_ancestor`): the first walk through it keeps its descriptor
   and later walks start there, so nothing above the data root can redirect a
   later open; from the data root down every walk is complete. `check_tree`
   always walks fresh from ``/``, so a symlink put above the root after
   start-up is still reported. Fail closed: `UnsafePath`.
2. **Checked after creation and on every open.** After every open the
   *descriptor* (not the path) is ``fstat``-ed: regular file (a FIFO or device is
   `NOT_REGULAR_FILE`; reads open ``O_NONBLOCK`` so a planted FIFO cannot hang
   us), owner, group and mode as the containing directory's `Sharing` allows.
   Files are created ``O_EXCL`` and then ``fchmod``-ed to the exact mode (the
   umask cannot widen or narrow it) and re-checked.
3. **Two sharing modes, decided by the directory itself** (SPEC §3):

   ============  ==================  ======================  =====================
   mode          directories         files                   owners
   ============  ==================  ======================  =====================
   private       0700 (or stricter)  0600 (or stricter)      this process's UID
   shared group  exactly 02770       0660/0640/0600, group   this UID, a member of
                 (setgid: new files  = the directory's       the group (group
                 inherit the group)  group, never "other"    database), or the data
                                                             root's owner
   ============  ==================  ======================  =====================

   The shared mode is for a worker that runs under its own UID: the operator
   creates the data root ``install -d -m 2770 -o <gateway> -g <kexpr-group>``
   and every directory below it must then be 02770 with the same group. Any
   other mode (0755, 0770 without setgid, a world bit) is `BAD_MODE`. The data
   root's owner (the topmost 02770 directory on the walk) is a party even when its
   membership is only a runtime ``SupplementaryGroups=`` the group database does
   not show. The
   ``identity.key`` is created 0600 in both modes (`create_private_file`): the
   worker never needs it.
4. **Inode identity.** A file that is read and later removed is removed only if
   the path still names the inode that was read (`read_private_identified` +
   `unlink_if_same`); a lock is only held if the descriptor we locked is
   the inode at the lock path (`ProductLock`, `HeldFlock`). Otherwise `INODE_CHANGED`.
5. A file that must survive a crash is written in ``tmp/`` with ``O_EXCL``,
   fsynced, then *linked* into place (``linkat`` cannot replace an existing file,
   so losing a race is ``EEXIST``, never an overwrite) and its directory fsynced
   (Maildir/Postfix queue rules). A claim is a ``renameat`` between two
   directories of one watched tree; exactly one claimer wins, the loser sees
   ``ENOENT``.
6. Nothing here ever opens with ``O_TRUNC`` (`_open_leaf` refuses the flag), and
   a lock file is never unlinked (SPEC §3: unlinking a flock target lets two
   holders coexist on two inodes).

Violations raise `UnsafePath` carrying an enum reason and never a path or content.
"""

from __future__ import annotations

import collections
import enum
import errno
import fcntl
import functools
import grp
import os
import pwd
import stat
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Final, Self

_O_PATH: Final = getattr(os, "O_PATH", os.O_RDONLY)
# How every directory component is walked (rule 1). O_PATH needs only search
# permission, so a shared-group worker can walk a gateway-owned ancestor.
_WALK: Final = _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LEAF: Final = os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_READ: Final = os.O_RDONLY | os.O_NONBLOCK
_OPEN_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL

PRIVATE_DIR_MODE: Final = 0o700
SHARED_DIR_MODE: Final = 0o2770
PRIVATE_FILE_MODE: Final = 0o600
SHARED_FILE_MODE: Final = 0o660
# Back-compatible names: the private mode.
FILE_MODE: Final = PRIVATE_FILE_MODE
DIR_MODE: Final = PRIVATE_DIR_MODE


class UnsafeReason(enum.StrEnum):
    SYMLINK = "symlink"
    NOT_REGULAR_FILE = "not_regular_file"
    NOT_DIRECTORY = "not_directory"
    WRONG_OWNER = "wrong_owner"
    WRONG_GROUP = "wrong_group"
    BAD_MODE = "bad_mode"
    TOO_LARGE = "too_large"
    INODE_CHANGED = "inode_changed"


class UnsafePath(OSError):
    """A path this product owns is not what it must be. Fail closed.

    An `OSError` on purpose: every caller that already fails closed on an I/O
    error (the shim answers canonical, the worker refuses) does so on this too.
    Callers that want the reason catch it *before* ``OSError``.
    """

    def __init__(self, reason: UnsafeReason) -> None:
        super().__init__(reason.value)
        self.reason = reason


_audit_owner: int | None = None


def expect_owner(uid: int | None) -> None:
    """For an *auditing* process only (``kexpr journal``): judge ownership against
    ``uid`` (the data root's owner) instead of this process's UID, so that an
    operator can audit a root the worker owns. The worker and the shim never
    call this: for them, "ours" means their own UID."""
    global _audit_owner
    _audit_owner = uid


def _owner_uid() -> int:
    return os.geteuid() if _audit_owner is None else _audit_owner


@functools.lru_cache(maxsize=8)
def group_member_uids(gid: int) -> frozenset[int]:
    """UIDs of the group's members (supplementary and primary). Cached for the
    life of the process: a membership change takes effect at the next restart."""
    uids: set[int] = set()
    try:
        names = grp.getgrgid(gid).gr_mem
    except KeyError:
        names = []
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    uids.update(p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid)
    return frozenset(uids)


@dataclass(frozen=True, slots=True)
class Sharing:
    """Who may own and read what is inside a product directory (rule 3).

    ``gid is None``: private (0700/0600, owner = us). Otherwise shared with that
    group (02770/0660, owner = us or a member of the group).
    """

    gid: int | None = None
    # The data root's owner in a shared-group root (see `sharing_of`): a party
    # even when its membership is only a runtime SupplementaryGroups=. Not part
    # of the mode's identity.
    peer: int | None = field(default=None, compare=False)

    @property
    def shared(self) -> bool:
        return self.gid is not None

    @property
    def dir_mode(self) -> int:
        return SHARED_DIR_MODE if self.shared else PRIVATE_DIR_MODE

    @property
    def file_mode(self) -> int:
        return SHARED_FILE_MODE if self.shared else PRIVATE_FILE_MODE

    def _check_owner(self, st: os.stat_result) -> None:
        euid = _owner_uid()
        if self.gid is None:
            if st.st_uid != euid:
                raise UnsafePath(UnsafeReason.WRONG_OWNER)
            return
        if st.st_uid not in (euid, self.peer) and st.st_uid not in group_member_uids(self.gid):
            raise UnsafePath(UnsafeReason.WRONG_OWNER)
        if st.st_gid != self.gid:
            raise UnsafePath(UnsafeReason.WRONG_GROUP)

    def check_dir(self, st: os.stat_result) -> None:
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(UnsafeReason.SYMLINK)
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(UnsafeReason.NOT_DIRECTORY)
        self._check_owner(st)
        perms = stat.S_IMODE(st.st_mode)
        if (perms != SHARED_DIR_MODE) if self.shared else bool(perms & 0o7077):
            raise UnsafePath(UnsafeReason.BAD_MODE)

    def check_file(self, st: os.stat_result, *, exclusive: bool = False) -> None:
        """``exclusive``: the file must be private even in a shared directory
        (``identity.key``)."""
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(UnsafeReason.SYMLINK)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(UnsafeReason.NOT_REGULAR_FILE)
        self._check_owner(st)
        forbidden = 0o7077 if (exclusive or not self.shared) else 0o7007
        if stat.S_IMODE(st.st_mode) & forbidden:
            raise UnsafePath(UnsafeReason.BAD_MODE)


PRIVATE: Final = Sharing()


def sharing_of(st: os.stat_result, anchor: os.stat_result | None = None) -> Sharing:
    """The sharing mode a product directory declares by its own mode (rule 3).

    ``anchor``: the topmost 02770 directory above (or at) it, the data root; its
    owner is trusted when it shares the group (the operator made it so).
    """
    perms = stat.S_IMODE(st.st_mode)
    if not perms & 0o7077:
        return PRIVATE
    if perms == SHARED_DIR_MODE:
        peer = anchor.st_uid if anchor is not None and anchor.st_gid == st.st_gid else None
        return Sharing(st.st_gid, peer)
    raise UnsafePath(UnsafeReason.BAD_MODE)


@dataclass(frozen=True, slots=True)
class FileId:
    """(device, inode): what "the same file" means across open and re-open."""

    dev: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileId:
        return cls(st.st_dev, st.st_ino)


# ------------------------------------------------------------------- walking


# Pinned ancestors (rule 1): the operator's directory above a data root,
# resolved once by `spool.layout.DataRoot` and registered with `pin_ancestor`.
# The first walk below it walks it from "/" and keeps that O_PATH descriptor;
# later walks start there (on a dup), so the few components above the data root
# are walked once per process instead of on every open. A bounded LRU: an
# evicted pin's descriptor is closed, in-flight walks hold their own dup.
_PIN_MAX: Final = 16
_pins: collections.OrderedDict[str, tuple[int, os.stat_result | None] | None] = (
    collections.OrderedDict()
)
_pin_lock = threading.Lock()


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
    shim after a failed presentation (issue 14 item 8): an operator who moved
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
        for base, state in _pins.items():
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
                        UnsafeReason.SYMLINK if stat.S_ISLNK(st.st_mode) else UnsafeReason.NOT_DIRECTORY
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
            # Ours (O_EXCL): no refused file is left behind (issue 14 item 7).
            try:
                os.unlink(name, dir_fd=d.fd)
            except OSError:
                pass
        raise


def read_bounded(fd: int, st: os.stat_result, max_bytes: int) -> bytes:
    """The whole file behind ``fd`` (already checked by the caller), at most
    ``max_bytes``; `UnsafePath(TOO_LARGE)` beyond. Shared with the ops readers."""
    if st.st_size > max_bytes:
        raise UnsafePath(UnsafeReason.TOO_LARGE)
    chunks: list[bytes] = []
    remaining = max_bytes + 1
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise UnsafePath(UnsafeReason.TOO_LARGE)
    return data


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# ---------------------------------------------------------------- public API


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


def ensure_dir(path: Path, sharing: Sharing, *, parent_is_product: bool = True) -> FileId:
    """Create ``path`` with ``sharing``'s mode if missing; check it declares exactly ``sharing``."""
    with _Dir(path.parent, product=parent_is_product) as parent:
        try:
            os.mkdir(path.name, sharing.dir_mode, dir_fd=parent.fd)
        except FileExistsError:
            pass
        else:
            # mkdir honours the umask: set the exact mode through a descriptor.
            fd = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | _LEAF, dir_fd=parent.fd)
            try:
                os.fchmod(fd, sharing.dir_mode)
            finally:
                os.close(fd)
            try:
                parent.fsync()
            except PermissionError:
                if parent_is_product:
                    raise  # an operator-owned parent may not be readable to us
    got, fid = check_dir(path)
    if got != sharing:
        raise UnsafePath(UnsafeReason.BAD_MODE if got.shared != sharing.shared else UnsafeReason.WRONG_GROUP)
    return fid


def ensure_private_dir(path: Path, *, create_parents: bool = False) -> None:
    """Create ``path`` 0700 if missing (parents with default modes when asked);
    check it is a product directory of ours (private or shared-group)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        if create_parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        ensure_dir(path, PRIVATE, parent_is_product=False)
    check_dir(path)


def fsync_dir(path: Path) -> None:
    with _Dir(path) as d:
        d.fsync()


def read_private_identified(
    path: Path, *, max_bytes: int, exclusive: bool = False
) -> tuple[bytes, FileId]:
    """Read a whole product file (rules 1-2, bounded); also its identity."""
    with _Dir(path.parent) as d:
        fd, st = _open_leaf(d, path.name, _OPEN_READ, exclusive=exclusive)
        try:
            return read_bounded(fd, st, max_bytes), FileId.of(st)
        finally:
            os.close(fd)


def read_private(path: Path, *, max_bytes: int, exclusive: bool = False) -> bytes:
    """Read a whole product file: no symlink on the way, regular, owner/mode as
    its directory allows, bounded. ``exclusive``: 0600-or-stricter even in a
    shared-group directory (``identity.key``)."""
    return read_private_identified(path, max_bytes=max_bytes, exclusive=exclusive)[0]


def unlink_if_same(path: Path, fid: FileId) -> bool:
    """Remove ``path`` only if it still names ``fid`` (rule 4). False if gone."""
    with _Dir(path.parent) as d:
        try:
            st = os.stat(path.name, dir_fd=d.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if FileId.of(st) != fid:
            raise UnsafePath(UnsafeReason.INODE_CHANGED)
        try:
            os.unlink(path.name, dir_fd=d.fd)
        except FileNotFoundError:
            return False
        return True


def open_append(path: Path, *, create: bool) -> tuple[int, os.stat_result]:
    """Open a journal segment for appending (``O_APPEND``; ``O_EXCL`` when
    ``create``). Never ``O_TRUNC``. The caller holds the journal lock."""
    flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT | os.O_EXCL if create else 0)
    with _Dir(path.parent) as d:
        return _open_leaf(d, path.name, flags)


def open_read(path: Path, *, exclusive: bool = False) -> tuple[int, os.stat_result]:
    """Open a product file for reading (rules 1-2); the caller closes it."""
    with _Dir(path.parent) as d:
        return _open_leaf(d, path.name, _OPEN_READ, exclusive=exclusive)


def check_file(path: Path, *, exclusive: bool = False) -> FileId:
    """Open-and-check a product file without reading it (for audits)."""
    fd, st = open_read(path, exclusive=exclusive)
    os.close(fd)
    return FileId.of(st)


def publish(tmp_dir: Path, final_path: Path, data: bytes, *, durable: bool = True) -> None:
    """Atomically make ``final_path`` appear with ``data`` (tmp -> fsync -> link -> dir fsync).

    Raises ``FileExistsError`` if ``final_path`` already exists: publication never
    replaces. The staging file is removed in every case (partial state undone on
    ``BaseException``, then re-raised).

    ``durable=False`` (rule 5 applies only to files that must survive a crash):
    neither the file nor the directory is fsynced; the link is still atomic, so a
    reader sees the whole file or nothing while the machine is up. After a crash
    such a file may be empty or torn, which its reader must refuse (the spool's
    strict message parsers do). For requests and responses, which are worthless
    after their 4 s deadline anyway.
    """
    staging = f".{final_path.name}.{os.getpid()}.{os.urandom(6).hex()}"
    with _Dir(tmp_dir) as tmp, _Dir(final_path.parent) as final:
        if tmp.sharing != final.sharing:
            raise UnsafePath(UnsafeReason.BAD_MODE)
        fd, _ = _open_leaf(tmp, staging, _OPEN_CREATE, mode=final.sharing.file_mode)
        try:
            try:
                _write_all(fd, data)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.link(staging, final_path.name, src_dir_fd=tmp.fd, dst_dir_fd=final.fd, follow_symlinks=False)
        finally:
            os.unlink(staging, dir_fd=tmp.fd)
        if durable:
            final.fsync()


def create_private_file(tmp_dir: Path, path: Path, data: bytes) -> None:
    """Create ``path`` with ``data``, 0600 in either sharing mode, complete or
    not at all (rule 5): written and fsynced in ``tmp_dir``, then linked into
    place (``FileExistsError`` if someone else's is there: never replaced) and
    the directory fsynced. For ``identity.key``: created in place, a racing
    gateway could open the new, still empty file and read a short key."""
    staging = f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}"
    with _Dir(tmp_dir) as tmp, _Dir(path.parent) as final:
        fd, _ = _open_leaf(tmp, staging, _OPEN_CREATE, mode=PRIVATE_FILE_MODE, exclusive=True)
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(staging, path.name, src_dir_fd=tmp.fd, dst_dir_fd=final.fd, follow_symlinks=False)
        finally:
            os.unlink(staging, dir_fd=tmp.fd)
        final.fsync()


def claim(src: Path, dst: Path) -> bool:
    """Rename ``src`` to ``dst``; True if we won the claim, False if someone else did."""
    with _Dir(src.parent) as s, _Dir(dst.parent) as d:
        try:
            os.rename(src.name, dst.name, src_dir_fd=s.fd, dst_dir_fd=d.fd)
        except FileNotFoundError:
            return False
    return True


def unlink_quiet(path: Path) -> None:
    """Remove ``path`` if present (a symlink is removed, never followed)."""
    try:
        with _Dir(path.parent) as d:
            os.unlink(path.name, dir_fd=d.fd)
    except FileNotFoundError:
        pass


def remove_file(d: Path, name: str) -> None:
    """Remove a whole file and fsync its directory (journal retention)."""
    with _Dir(d) as dd:
        os.unlink(name, dir_fd=dd.fd)
        dd.fsync()


def link_into(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (never replaces: ``EEXIST``), fsync ``dst``'s directory."""
    with _Dir(src.parent) as s, _Dir(dst.parent) as d:
        os.link(src.name, dst.name, src_dir_fd=s.fd, dst_dir_fd=d.fd, follow_symlinks=False)
        d.fsync()


def list_dir(path: Path) -> list[str]:
    """Entry names of a product directory (walked, checked)."""
    with _Dir(path) as d:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=d.fd)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)


def replace_private(final_path: Path, data: bytes) -> None:
    """Replace a non-durable status file atomically (rename over). Only for the
    ``*.status.json`` heartbeats: not evidence, so not fsynced.

    Staged in the final file's own directory, never in ``spool/tmp``: a rename
    *out of* the watched spool tree is an unmatched ``IN_MOVED_FROM`` that
    watchdog holds for 500 ms, delaying every later event (SPEC §4 trap 1;
    measured by bench/run.py as a 500 ms stall per heartbeat).
    """
    staging = f".{final_path.name}.{os.getpid()}.{os.urandom(6).hex()}"
    with _Dir(final_path.parent) as final:
        fd, _ = _open_leaf(final, staging, _OPEN_CREATE, mode=final.sharing.file_mode)
        try:
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.rename(staging, final_path.name, src_dir_fd=final.fd, dst_dir_fd=final.fd)
        except BaseException:
            # Partial state undone on every failure path (ENOSPC mid-write
            # included: issue 14 item 7 found 6 staging files in 3.5 s).
            try:
                os.unlink(staging, dir_fd=final.fd)
            except FileNotFoundError:
                pass
            raise


# --------------------------------------------------------------------- locks


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
    opens the file on every acquire — 115–470 µs, three or four
    times per artifact (docs/performance.md, finding D); this costs one
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


"""File-system discipline for everything this product writes (design §3, §4).

Rules, each learnt from a mail queue or a CVE. Everything that opens, creates,
renames or removes a product file goes through this module, so the rules live in
one place:

1. **No symlink anywhere.** A path is never handed to the kernel whole: it is
   walked one component at a time with ``openat(O_PATH | O_DIRECTORY |
   O_NOFOLLOW)`` and the leaf is opened with ``O_NOFOLLOW`` relative to its
   directory's descriptor. A symlink at *any* component is `UnsafeReason.SYMLINK`,
   never a redirection to follow (filelock CVE-2025-68146: truncation through a
   symlink before the lock). `kexpr.spool.layout.DataRoot` resolves the ancestors
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
3. **Two sharing modes, decided by the directory itself** (design §3):

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
   (Maildir/Postfix queue rules). A *reserved* file (`Reservation`) is moved
   into place instead, with the same never-replace rule (`move_noreplace`):
   a link needs an inode slot on tmpfs, which the reservation did not take. A claim is a ``renameat`` between two
   directories of one watched tree; exactly one claimer wins, the loser sees
   ``ENOENT``.
6. Nothing here ever opens with ``O_TRUNC`` (`_open_leaf` refuses the flag), and
   a lock file is never unlinked (design §3: unlinking a flock target lets two
   holders coexist on two inodes).

Violations raise `UnsafePath` carrying an enum reason and never a path or content.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Any, Final

# The rules' code lives in three private modules, re-exported here: every
# caller imports from `kexpr.spool.fsio` (and tests patch `kexpr.spool.fsio._Dir` and
# `kexpr.spool.fsio._pins`, the same objects). Rule 3 and the owner/mode half of rule
# 2: `kexpr.spool._sharing`; rules 1, 2, 6 (walks, pins, checked opens):
# `kexpr.spool._walk`; rules 4 and 6 for locks: `kexpr.spool._locks`. Rule 4 for removals,
# rule 5 (publish, claim) and the private reads and writes: below.
from kexpr.spool._locks import HeldFlock, LockTimeout, ProductLock, make_flock
from kexpr.spool._sharing import (
    DIR_MODE,
    FILE_MODE,
    PRIVATE,
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    SHARED_DIR_MODE,
    SHARED_FILE_MODE,
    FileId,
    Sharing,
    UnsafePath,
    UnsafeReason,
    expect_owner,
    group_member_uids,
    sharing_of,
)
from kexpr.spool._walk import (
    _LEAF,
    _OPEN_CREATE,
    _OPEN_READ,
    _Dir,
    _open_leaf,
    check_dir,
    check_tree,
    glance_dirs,
    pin_ancestor,
    pin_moved,
    repin,
)

# Explicit re-exports: tests read `kexpr.spool.fsio._pins` and `kexpr.spool.fsio._PIN_MAX`.
from kexpr.spool._walk import _PIN_MAX as _PIN_MAX
from kexpr.spool._walk import _pins as _pins

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "PID_MAX_LIMIT",
    "PRIVATE",
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "RESERVATION_MARK",
    "SHARED_DIR_MODE",
    "SHARED_FILE_MODE",
    "FileId",
    "HeldFlock",
    "LockTimeout",
    "ProductLock",
    "Reservation",
    "Sharing",
    "UnsafePath",
    "UnsafeReason",
    "check_dir",
    "check_file",
    "check_tree",
    "claim",
    "create_private_file",
    "ensure_dir",
    "ensure_private_dir",
    "expect_owner",
    "fsync_dir",
    "glance_dirs",
    "group_member_uids",
    "link_into",
    "list_dir",
    "make_flock",
    "move_noreplace",
    "open_append",
    "open_read",
    "pin_ancestor",
    "pin_moved",
    "publish",
    "read_bounded",
    "read_private",
    "read_private_identified",
    "remove_file",
    "remove_reservations",
    "replace_private",
    "repin",
    "reserve",
    "sharing_of",
    "staged_final",
    "unlink_if_same",
    "unlink_quiet",
]


# ------------------------------------------------------- private reads and writes


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


def _write_and_close(fd: int, data: bytes, *, durable: bool) -> None:
    """A new file's whole content, fsync-ed when ``durable``; ``fd`` is closed
    either way (the caller removes the file if this raises)."""
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- public API


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
        raise UnsafePath(
            UnsafeReason.BAD_MODE if got.shared != sharing.shared else UnsafeReason.WRONG_GROUP
        )
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


def _staging_name(final_path: Path, mark: str) -> str:
    """A staging name in tmp/ no other process or call picks: the final name,
    ``mark``, this pid and 48 random bits."""
    return f".{final_path.name}{mark}{os.getpid()}.{os.urandom(6).hex()}"


# The largest pid Linux can give (``PID_MAX_LIMIT`` on 64-bit, the ceiling of
# /proc/sys/kernel/pid_max): a staging name's pid is never longer or larger.
PID_MAX_LIMIT: Final = 4_194_304
_STAGED: Final = re.compile(
    r"\.(?P<final>[0-9a-z._-]{1,80}?)(?:\.reserve)?\.(?P<pid>[1-9][0-9]{0,6})\.[0-9a-f]{12}"
)


def staged_final(name: str) -> str | None:
    """The final name a staging file of this module will be published, moved
    or renamed to (`_staging_name`, `replace_private`, `create_private_file`:
    ``.<final name>[.reserve].<pid>.<12 hex>``, the pid a real one: no leading
    zero, at most `PID_MAX_LIMIT`), or None if ``name`` is not one. The shape
    only: which final names the product stages where, and for how long, is its
    readers' to judge (`kexpr.ops._audit_staging`)."""
    m = _STAGED.fullmatch(name)
    if m is None or int(m["pid"]) > PID_MAX_LIMIT:
        return None
    return m["final"]


def _create_staging(tmp: _Dir, final: _Dir, staging: str) -> int:
    """Create ``staging`` in ``tmp`` with the file mode of the directory it is
    published into; the two must declare one sharing mode."""
    if tmp.sharing != final.sharing:
        raise UnsafePath(UnsafeReason.BAD_MODE)
    fd, _ = _open_leaf(tmp, staging, _OPEN_CREATE, mode=final.sharing.file_mode)
    return fd


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
    staging = _staging_name(final_path, ".")
    with _Dir(tmp_dir) as tmp, _Dir(final_path.parent) as final:
        fd = _create_staging(tmp, final, staging)
        try:
            _write_and_close(fd, data, durable=durable)
            os.link(
                staging,
                final_path.name,
                src_dir_fd=tmp.fd,
                dst_dir_fd=final.fd,
                follow_symlinks=False,
            )
        finally:
            os.unlink(staging, dir_fd=tmp.fd)
        if durable:
            final.fsync()


class Reservation:
    """What publishing one file needs, taken before the work whose result it
    will hold (so that a billed answer is never lost for want of an inode).
    `reserve` creates the staging file in ``tmp_dir`` (an inode) and
    allocates ``size`` bytes for it; `publish` then writes into it and *moves*
    it into place (`move_noreplace`: never replaces, ``FileExistsError``
    otherwise, like `publish`'s link); `release` gives it back unused. Either is
    idempotent and one of them must be called (the worker does it in a
    ``finally``). A move needs no new inode slot anywhere; a ``link(2)`` does on
    tmpfs, which counts every link against ``nr_inodes`` (a full tmpfs refuses
    ``link`` with ENOSPC and allows ``rename``): publishing the reserved file by
    link needed what was not reserved. The move can still fail if the
    destination directory must grow a block on a full disk, which the caller
    counts like any failed publication."""

    __slots__ = ("_fd", "_final", "_size", "_staging", "_tmp")

    def __init__(self, tmp_dir: Path, final_path: Path, fd: int, staging: str, size: int) -> None:
        self._tmp, self._final, self._fd, self._staging, self._size = (
            tmp_dir,
            final_path,
            fd,
            staging,
            size,
        )

    @property
    def final_path(self) -> Path:
        return self._final

    def publish(self, data: bytes, *, durable: bool = True) -> None:
        """`publish`'s contract (never replaces: ``FileExistsError``), into the
        reserved staging file. More than the reserved size is written as well
        (the allocation is an advance, not a cap)."""
        fd = self._take()
        with _Dir(self._tmp) as tmp, _Dir(self._final.parent) as final:
            try:
                if tmp.sharing != final.sharing:
                    raise UnsafePath(UnsafeReason.BAD_MODE)
                try:
                    _write_all(fd, data)
                    os.ftruncate(fd, len(data))
                    if durable:
                        os.fsync(fd)
                finally:
                    os.close(fd)
                move_noreplace(self._staging, tmp.fd, self._final.name, final.fd)
            finally:
                _unlink_staging(self._staging, tmp.fd)
            if durable:
                final.fsync()

    def release(self) -> None:
        """Give the reservation back unused (no-op once published or released)."""
        if self._fd < 0:
            return
        os.close(self._take())
        try:
            with _Dir(self._tmp) as tmp:
                _unlink_staging(self._staging, tmp.fd)
        except OSError:  # an UnsafePath too
            pass  # tmp/ itself is gone or unsafe: the tree check reports that

    def _take(self) -> int:
        fd, self._fd = self._fd, -1
        if fd < 0:
            raise ValueError("reservation already used")
        return fd


# renameat2(2)'s flag (linux/fs.h): fail with EEXIST instead of replacing.
_RENAME_NOREPLACE: Final = 1
# None: not looked up yet; False: this libc has no renameat2 (glibc < 2.28).
_renameat2: Any = None


def _libc_renameat2() -> Any:
    global _renameat2
    if _renameat2 is None:
        try:
            import ctypes

            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
            fn.argtypes += [ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError, ImportError):
            _renameat2 = False
    return _renameat2


def move_noreplace(src: str, src_dir_fd: int, dst: str, dst_dir_fd: int) -> None:
    """Move ``src`` to ``dst`` (names relative to their directories' descriptors)
    without ever replacing ``dst``: ``FileExistsError`` if it exists.

    ``renameat2(RENAME_NOREPLACE)`` (Linux 3.15; ext4, xfs, btrfs and tmpfs
    support it): one atomic step that needs no inode slot. Where the C library
    or the file system does not offer it (ENOSYS, EINVAL), the safe fallback is
    rule 5's ``link`` (it cannot replace either), leaving ``src`` for the
    caller to remove. Either way a reader sees the whole file or nothing."""
    fn = _libc_renameat2()
    if fn is not False:
        import ctypes

        if fn(src_dir_fd, os.fsencode(src), dst_dir_fd, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL):
            raise OSError(err, os.strerror(err))
    os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)


def _unlink_staging(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


# In a reservation's staging name, and in no other staging name (those are
# ``.<final name>.<pid>.<random>``, and final names are hex IDs): what lets
# `remove_reservations` tell a dead process's reservation from a live upload.
RESERVATION_MARK = ".reserve."


def remove_reservations(tmp_dir: Path) -> int:
    """Remove every reservation's staging file in ``tmp_dir``; how many. Only
    for a caller that knows no process holds one: the worker at start-up, under
    ``worker.lock`` (a SIGKILLed predecessor's reservations outlive it)."""
    removed = 0
    names = list_dir(tmp_dir)
    with _Dir(tmp_dir) as tmp:
        for name in names:
            if name.startswith(".") and RESERVATION_MARK in name:
                try:
                    os.unlink(name, dir_fd=tmp.fd)
                    removed += 1
                except FileNotFoundError:
                    pass
    return removed


def reserve(tmp_dir: Path, final_path: Path, size: int) -> Reservation:
    """Create and allocate the staging file of a later `Reservation.publish`
    to ``final_path`` (see `Reservation`). Raises what creating or allocating
    it raises (ENOSPC: no inode or no block), leaving nothing behind."""
    staging = _staging_name(final_path, RESERVATION_MARK)
    with _Dir(tmp_dir) as tmp, _Dir(final_path.parent) as final:
        fd = _create_staging(tmp, final, staging)
        try:
            os.posix_fallocate(fd, 0, size)
        except BaseException:
            os.close(fd)
            _unlink_staging(staging, tmp.fd)
            raise
    return Reservation(tmp_dir, final_path, fd, staging, size)


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
            _write_and_close(fd, data, durable=True)
            os.link(
                staging, path.name, src_dir_fd=tmp.fd, dst_dir_fd=final.fd, follow_symlinks=False
            )
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


def replace_private(
    final_path: Path, data: bytes, *, durable: bool = False, exclusive: bool = False
) -> None:
    """Replace a file atomically (rename over). By default for the
    ``*.status.json`` heartbeats: not evidence, so not fsynced.

    ``durable``: the file is fsynced before the rename and the directory after
    it (rule 5's order), so after a crash the path holds the old file or the new
    one, whole. ``exclusive``: created 0600 even in a shared-group directory
    (``identity.key`` and the sealed keys, which the gateway alone reads).
    The identity files (`gateway_shim._identity_store`) and the journal's
    record of its key (`kexpr.spool._journal_identity`) are the only durable
    product files ever replaced, and only by their records' rules (a rotation,
    a recorded fingerprint); everything else durable is published (never
    replaced) or appended.

    Staged in the final file's own directory, never in ``spool/tmp``: a rename
    *out of* the watched spool tree is an unmatched ``IN_MOVED_FROM`` that
    watchdog holds back, delaying every later event (design §4 trap 1;
    docs/performance.md, "The figures behind the code's comments").
    """
    staging = f".{final_path.name}.{os.getpid()}.{os.urandom(6).hex()}"
    with _Dir(final_path.parent) as final:
        mode = PRIVATE_FILE_MODE if exclusive else final.sharing.file_mode
        fd, _ = _open_leaf(final, staging, _OPEN_CREATE, mode=mode, exclusive=exclusive)
        try:
            _write_and_close(fd, data, durable=durable)
            os.rename(staging, final_path.name, src_dir_fd=final.fd, dst_dir_fd=final.fd)
            if durable:
                final.fsync()
        except BaseException:
            # Partial state undone on every failure path, ENOSPC mid-write
            # included (a full disk otherwise leaves a staging file per try).
            try:
                os.unlink(staging, dir_fd=final.fd)
            except FileNotFoundError:
                pass
            raise

"""Sharing and ownership rules of product files and directories (`kexpr.spool.fsio` rule 3).

Holds the refusal (`UnsafePath` with its `UnsafeReason` enum: never a path or
content), the modes, who counts as an owner (`Sharing`, `sharing_of`,
`group_member_uids`, the auditor's `expect_owner`) and `FileId`, the (device,
inode) identity of rule 4. Private: import these names from `kexpr.spool.fsio`, whose
header states the rules; rule 3 (two sharing modes, decided by the directory
itself) is implemented here, and the type/owner/mode half of rule 2
(`Sharing.check_dir`, `Sharing.check_file`).
"""

from __future__ import annotations

import enum
import functools
import grp
import os
import pwd
import stat
from dataclasses import dataclass, field
from typing import Final

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

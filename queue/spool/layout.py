"""The data root's layout (design §3).

One root per host profile. Both processes derive every path from here, so a
path is never assembled by hand elsewhere::

    identity.key          32 random bytes, gateway-owned, 0600
    identity.fingerprint  the key's fingerprint (a keyed hash, never the key),
                          written by the gateway; 0600 or 0660 by the root's mode
    identity.sealed       keys sealed by a rotation (`kexpr identity rotate`),
                          gateway-owned, 0600; kept for the journal's window
    spool/requests/       shim -> worker   (<request_id>.json)
    spool/claimed/        requests the worker has claimed (inside the watched tree)
    spool/responses/      worker -> shim   (<request_id>.json)
    spool/reports/        shim -> worker   (<attempt_id>.json)
    spool/tmp/            staging for atomic renames/links
    journal.lock          flock target, never unlinked
    worker.lock           held by the one live worker, never unlinked
    outcomes/YYYY-MM-DD.jsonl
    outcomes/YYYY-MM-DD.prior  a rotation's links: an attempt's prior artifact keys
                               (`kexpr.spool._journal_prior`), removed with its segment
    outcomes/identity.json     the key the journal is written under (its fingerprint,
                               `kexpr.spool._journal_identity`), the worker's; never removed
    quarantine/YYYY-MM-DD.N.jsonl   torn segments set aside by an operator
                                    (`kexpr journal quarantine`), read for dedupe only
    worker.status.json
    retention.json        the last wall time retention saw (`kexpr.spool.retention`)

Every directory is 0700 (private) or, when the worker runs under its own UID,
02770 with one shared group (`kexpr.spool.fsio`, rule 3): the data root's own mode
decides, and every directory below it must declare the same.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kexpr.spool.fsio import (
    FileId,
    Sharing,
    check_dir,
    check_tree,
    ensure_dir,
    ensure_private_dir,
    glance_dirs,
    pin_ancestor,
)
from kexpr.spool.lifecycle import Actor, File, Move, Where, file_route

DEFAULT_DATA_ROOT: Final = Path("var/korean-expression-v1")
# At the top of a data root while the operator asks a quarantined worker to
# re-verify and resume (`kexpr.worker.resume`); removed by the worker.
QUARANTINE_CLEAR_NAME: Final = "quarantine-clear.request"
# The data root the supervisor checked, handed to the worker it starts
# (`kexpr.ops.supervisor` rule 5): ``<st_dev>:<st_ino>`` of the root directory,
# decimal. The worker serves that directory or none (`kexpr.worker.daemon`
# invariant 10); a worker started without it (systemd, by hand) checks nothing.
ROOT_ID_VARIABLE: Final = "KEXPR_DATA_ROOT_ID"
_ROOT_ID: Final = re.compile(r"(0|[1-9][0-9]{0,19}):(0|[1-9][0-9]{0,19})")


def format_root_id(ident: FileId) -> str:
    """`ROOT_ID_VARIABLE`'s value for the root directory ``ident``."""
    return f"{ident.dev}:{ident.ino}"


def parse_root_id(value: str) -> FileId | None:
    """`format_root_id`'s inverse; None for anything else (the caller refuses)."""
    m = _ROOT_ID.fullmatch(value)
    if m is None:
        return None
    return FileId(int(m.group(1)), int(m.group(2)))


def _computed() -> Any:
    """A `DataRoot` field set in ``__post_init__``: not an argument, not shown,
    not compared (the root alone is the data root's identity)."""
    return field(init=False, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class DataRoot:
    """``root`` is made absolute and its *parent* resolved once (``realpath``)
    and pinned (`kexpr.spool.fsio.pin_ancestor`): ancestors above the data root are
    the operator's and may be symlinks; from the data root down nothing may be
    (`kexpr.spool.fsio`, rule 1)."""

    root: Path
    # Every path below the root, computed once in __post_init__ (they sit on
    # the hot path of every spool operation; a pathlib join costs a few µs).
    identity_key: Path = _computed()
    identity_record: Path = _computed()
    identity_sealed: Path = _computed()
    spool: Path = _computed()
    requests: Path = _computed()
    claimed: Path = _computed()
    responses: Path = _computed()
    reports: Path = _computed()
    tmp: Path = _computed()
    journal_lock: Path = _computed()
    worker_lock: Path = _computed()
    outcomes: Path = _computed()
    quarantine: Path = _computed()
    status_file: Path = _computed()
    # The operator's one-shot ask to leave quarantine (`kexpr.worker.resume`).
    quarantine_clear: Path = _computed()
    _tree: tuple[tuple[str, Path], ...] = _computed()

    def __post_init__(self) -> None:
        absolute = Path(os.path.abspath(self.root))
        parent = Path(os.path.realpath(absolute.parent))
        root = parent / absolute.name
        spool = root / "spool"
        paths = {
            "root": root,
            "identity_key": root / "identity.key",
            "identity_record": root / "identity.fingerprint",
            "identity_sealed": root / "identity.sealed",
            "spool": spool,
            "requests": spool / "requests",
            "claimed": spool / "claimed",
            "responses": spool / "responses",
            "reports": spool / "reports",
            "tmp": spool / "tmp",
            "journal_lock": root / "journal.lock",
            "worker_lock": root / "worker.lock",
            "outcomes": root / "outcomes",
            "quarantine": root / "quarantine",
            "status_file": root / "worker.status.json",
            "quarantine_clear": root / QUARANTINE_CLEAR_NAME,
        }
        for name, path in paths.items():
            object.__setattr__(self, name, path)
        tree = (root, *self.product_dirs())
        object.__setattr__(self, "_tree", tuple((str(d.relative_to(root)), d) for d in tree))
        pin_ancestor(parent)

    def route(self, file: File, move: Move, actor: Actor) -> tuple[Path | None, Path | None]:
        """The directories ``file`` moves between when ``actor`` makes ``move``:
        (from, to), None for "not yet in the spool" (a publish) and for "removed".
        The spool's file moves are made only through here, so the lifecycle's
        table (`kexpr.spool.lifecycle.SPOOL_FILE_MOVES`) gates the code that
        moves files: a move the table lacks, or by another actor, raises
        `kexpr.spool.lifecycle.IllegalMove` (a programming error, never data)."""
        src, dst = file_route(file, move, actor)
        return self._place(src), self._place(dst)

    def _place(self, where: Where | None) -> Path | None:
        if where is None or where is Where.REMOVED:
            return None
        place: Path = getattr(self, where.value)
        return place

    def spool_dirs(self) -> tuple[Path, ...]:
        return (self.requests, self.claimed, self.responses, self.reports, self.tmp)

    def product_dirs(self) -> tuple[Path, ...]:
        """Every directory below the root, parents first."""
        return (self.spool, *self.spool_dirs(), self.outcomes, self.quarantine)

    def ensure(self) -> None:
        """Create every directory (idempotent) in the root's sharing mode.

        A missing root is created private (0700). Raises `kexpr.spool.fsio.UnsafePath`
        (fail closed) when any existing component is a symlink, not a directory,
        not ours, or declares a different sharing mode than the root.
        """
        ensure_private_dir(self.root, create_parents=True)
        sharing, _ = check_dir(self.root)
        for d in self.product_dirs():
            ensure_dir(d, sharing)

    def identity(self) -> FileId:
        """The root directory's (device, inode), walked fresh from ``/`` with no
        symlink followed (`check_tree`); raises `OSError` (an `UnsafePath` with
        its reason, `FileNotFoundError` when missing) otherwise."""
        return check_tree(self.root, ())[1]["."]

    def sharing(self) -> Sharing:
        return check_dir(self.root)[0]

    def verify_tree(self) -> dict[str, FileId]:
        """Check the root and every product directory without creating anything.

        Returns each directory's identity, so that a caller can notice a directory
        swapped after start-up (`UnsafeReason.INODE_CHANGED`).
        """
        return self.verify_tree_sharing()[1]

    def verify_tree_sharing(self) -> tuple[Sharing, dict[str, FileId]]:
        """`verify_tree`, and the sharing the root declares (one walk for both)."""
        # One walk from "/" to the root, then each directory from the root's
        # descriptor.
        return check_tree(self.root, tuple(rel for rel, _ in self._tree[1:]))

    def glance_tree(self, sharing: Sharing) -> dict[str, FileId]:
        """`verify_tree`'s answer from one ``lstat`` per directory (no walk, see
        `kexpr.spool.fsio.glance_dirs`): for the worker's every scan, between walks."""
        ids = glance_dirs(tuple(d for _, d in self._tree), sharing)
        return {rel: i for (rel, _), i in zip(self._tree, ids, strict=True)}

"""The worker's quarantine (`kexpr.worker.daemon` invariant 6) and the one map from
an exception to what the worker does about it.

`map_exception` is the only place that decides whether an error puts the worker
in quarantine (an enum reason: the journal's `Finding`, the unsafe path's
`UnsafeReason`, ``io_error``) or is a `Fault` of one entry or one scan that
leaves every other request served. `Quarantine.failed` applies it; every path
that quarantines or fails closed goes through it.
"""

from __future__ import annotations

import errno
import logging
import sys
from typing import Final

from kexpr.spool import log
from kexpr.spool.fsio import FileId, Sharing, UnsafePath, UnsafeReason
from kexpr.spool.journal import AppendRefused, Finding, JournalUnverified
from kexpr.spool.layout import DataRoot
from kexpr.worker.status import FAULT_FOR_REFUSED_APPEND, Counters, Fault

IO_ERROR: Final = "io_error"
INODE_CHANGED: Final = "inode_changed"
# What `Quarantine.enter` may be given (anything else is logged as "other": a
# log record carries enum words only).
QUARANTINE_REASONS: Final = frozenset(
    {r.value for r in UnsafeReason} | {f.value for f in Finding} | {IO_ERROR, INODE_CHANGED}
)

# Running out of descriptors or memory (``ulimit -n``, a full file table, ENOMEM)
# is the machine's state, not an entry's: the scan stops, nothing is dropped, and
# the next scan (the rescan timer) tries again. Never an exit, never a traceback.
RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})

# What a journal operation (a load, an append under the lock) fails with; each
# is mapped by `map_exception` (`UnsafePath` is an `OSError`).
JOURNAL_ERRORS: Final = (JournalUnverified, OSError)

_log = log.logger("worker")


class Quarantined(Exception):
    """The worker is already in quarantine: nothing more to record."""


def resource(e: BaseException) -> bool:
    """Out of descriptors or memory (RESOURCE_ERRNOS, MemoryError)."""
    return isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno in RESOURCE_ERRNOS)


def map_exception(
    e: BaseException,
    *,
    otherwise: Fault | None = None,
    on_resource: Fault | None = None,
) -> tuple[str | None, Fault | None]:
    """(quarantine reason, None), (None, fault) or (None, None: nothing to add).

    A refused append left the journal verifying: a fault, the next request
    tries again. An unverified journal or an unsafe path: quarantine with its
    enum. Out of resources: ``on_resource`` when the caller backs off (a scan).
    Any other error: ``otherwise`` when the caller counts it as one entry's
    fault, else quarantine ``io_error``."""
    if isinstance(e, AppendRefused):
        return None, FAULT_FOR_REFUSED_APPEND.get(e.finding, Fault.ENTRY_ERROR)
    if isinstance(e, JournalUnverified):
        return e.finding.value, None
    if isinstance(e, UnsafePath):
        return e.reason.value, None
    if isinstance(e, Quarantined):
        return None, None
    if on_resource is not None and resource(e):
        return None, on_resource
    if otherwise is not None:
        return None, otherwise
    return IO_ERROR, None


class Quarantine:
    """Rule 6's state: whether the journal verified, why the worker is in
    quarantine (an enum value, or None) until restarted, and why new attempts
    are refused while the journal is fine (``segment_full``: spool.journal
    rule 8; ``append_undone``: the last append could not be made and was
    undone; either cleared by the next start row). Also the data root's directories
    as checked at start-up, against which every scan checks the tree."""

    def __init__(self, root: DataRoot, counters: Counters) -> None:
        self._root = root
        self._counters = counters
        self.journal_ok = False
        self.reason: str | None = None
        self.refusing: str | None = None
        self._tree: dict[str, FileId] | None = None
        self._sharing: Sharing | None = None
        # The last operator's clear (`kexpr.worker.resume`), for the status file.
        self.last_clear: dict[str, object] | None = None
        # The root directory the supervisor checked (`kexpr.worker.daemon`
        # invariant 10), None when started without one: no tree is remembered,
        # at start-up or at a clear, whose root is another directory.
        self.checked_root: FileId | None = None

    def foreign_root(self, tree: dict[str, FileId]) -> bool:
        """``tree``'s root is not the directory the supervisor checked."""
        return self.checked_root is not None and tree["."] != self.checked_root

    def resume(self, sharing: Sharing, tree: dict[str, FileId]) -> None:
        """Leave quarantine: the tree was walked afresh and the journal verified
        and reloaded (`kexpr.worker.resume` rule 1). Said by the caller."""
        self._sharing, self._tree = sharing, tree
        self.reason = None
        self.journal_ok = True

    def enter(self, reason: str) -> None:
        """Refuse every new attempt until restarted or cleared
        (`kexpr.worker.resume`). Enum only, once."""
        self.journal_ok = False
        if self.reason is None:
            self.reason = reason
            print(f"kexpr worker: quarantine: {reason}", file=sys.stderr, flush=True)
            log.event(
                _log,
                logging.WARNING,
                "worker_quarantine",
                reason=log.known(reason, QUARANTINE_REASONS),
            )

    def failed(
        self,
        e: BaseException,
        *,
        otherwise: Fault | None = None,
        on_resource: Fault | None = None,
    ) -> None:
        """Do what `map_exception` says: enter quarantine or count the fault."""
        reason, fault = map_exception(e, otherwise=otherwise, on_resource=on_resource)
        if reason is not None:
            self.enter(reason)
        elif fault is not None:
            self._counters.fault(fault)
            if fault is Fault.APPEND_UNDONE:
                # The journal could not be appended (no space, no quota, an I/O
                # error; undone): said in the status until an append succeeds
                # again (the next start row), so `kexpr status` is not healthy.
                self.refusing = Fault.APPEND_UNDONE.value
        elif isinstance(e, Quarantined):
            self.journal_ok = False

    def remember_tree(self) -> bool:
        """At start-up: the full walk, whose answer later checks compare with.
        False (and in quarantine) if the tree is not safe."""
        try:
            sharing, tree = self._root.verify_tree_sharing()
        except OSError as e:
            self.failed(e)
            return False
        if self.foreign_root(tree):
            # Swapped since the start-up check: never remembered as the root.
            self.enter(INODE_CHANGED)
            return False
        self._sharing, self._tree = sharing, tree
        return True

    def check_tree(self, *, walk: bool = True) -> None:
        """Every product directory is still the checked one (rule 6).

        ``walk=False`` (before every scan): one ``lstat`` per directory
        (`DataRoot.glance_tree`, ~10x cheaper); the full no-symlink walk
        (`DataRoot.verify_tree`) runs at start-up and on the rescan timer.
        """
        if not self.journal_ok:
            return
        try:
            if walk or self._sharing is None:
                tree = self._root.verify_tree()
            else:
                tree = self._root.glance_tree(self._sharing)
        except OSError as e:
            self.failed(e)
            return
        if self._tree is not None and tree != self._tree:
            self.enter(INODE_CHANGED)

"""The coordinator's hold on its data root: set up on first use, dropped when moved.

Holds `DataRootHold`: the spool directories, the identity (the HMAC key and
the sealed keys, `gateway_shim.identity`), the data root's (device, inode) and
the observer of ``responses/``, all set up on the first presentation that gets
past the disabled and ineligible checks and kept under one lock. Private to
`gateway_shim.coordinator`. Coordinator rules that apply: rule 2 (nothing is
created before the coordinator asks: disabled or ineligible writes zero files),
rule 5 (the key is the HMAC key of `gateway_shim.identity`, never the provider
key), rule 14 (the identity is part of the evidence: a refused identity is
said once per change and looked at again on the next presentation; a record
that changed under a running gateway, a rotation, is read again before the
next artifact key is computed), rule 10 (a moved data root:
the pin, the observer and the key are dropped and set up again on what is at
the path now; a root found there with no key and no journal is not minted in,
`gateway_shim.identity` rule 7), rule 11 (closed stays closed: nothing is started after
`close`) and rule 12 (fork and a missing watcher: the child drops its parent's
observer without stopping it; without an observer the wait degrades to its
periodic re-check, said once).

A set-up that fails says why as one `SpoolProblem` (`SetupFailed`, an ``OSError``
like every failure it wraps): the data root missing, a symlink, unsafe (with the
`UnsafeReason`), not permitted, or the identity key unusable. The coordinator
logs it once per change; the words are enums, never a path or a value.

The observer itself is shared by every coordinator of this process on the same ``responses/`` (`gateway_shim._watch`):
the hold keeps a `Lease` of it, released by `close` (or the coordinator's
finalizer: `wait=False`).
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from watchdog.observers.api import BaseObserver

from gateway_shim._identity_store import Identity, load_identity, record_changed
from gateway_shim._responses import ResponseWaiters
from gateway_shim._watch import Lease, acquire
from gateway_shim.identity import IdentityProblem, IdentityRefused
from kexpr.spool import log
from kexpr.spool.fsio import FileId, UnsafePath, UnsafeReason, check_dir, pin_moved, repin
from kexpr.spool.layout import DataRoot

# A watcher that could not be started (no inotify instance left: the per-user
# limit is 128 by default) is tried again this long after, not on every
# presentation: each try costs a failing inotify_init and a thread start.
WATCHER_RETRY_S: Final = 60.0
# The identity check after a failed presentation (rule 10) runs at most this
# often: two thousand presentations that time out together need one fresh walk,
# not two thousand (each one a walk from "/" on the executor).
RECHECK_IDENTITY_EVERY_S: Final = 1.0
_log = log.logger("shim")


class SpoolProblem(enum.StrEnum):
    """Why the coordinator cannot use its data root (said on ``kexpr.shim``)."""

    # Nothing at the data root's path, and it could not be created there
    # (a typo in the path, a parent the gateway may not write).
    DATA_ROOT_MISSING = "data_root_missing"
    # The data root, or a directory in it, is a symbolic link.
    DATA_ROOT_SYMLINK = "data_root_symlink"
    # A directory or file of the spool breaks the sharing rules (mode, owner,
    # group, type: the `UnsafeReason` says which).
    DATA_ROOT_UNSAFE = "data_root_unsafe"
    # The operating system refused (the gateway's user is not in the group...).
    DATA_ROOT_PERMISSION_DENIED = "data_root_permission_denied"
    # Any other I/O error on the data root.
    DATA_ROOT_IO_ERROR = "data_root_io_error"
    # ``identity.key`` cannot be read or made (mode, owner, size, type).
    IDENTITY_KEY_UNUSABLE = "identity_key_unusable"


class SetupFailed(OSError):
    """The set-up refused: the `SpoolProblem`, and the `UnsafeReason` if any."""

    def __init__(self, problem: SpoolProblem, unsafe: UnsafeReason | None = None) -> None:
        super().__init__(problem.value)
        self.problem = problem
        self.unsafe = unsafe


def spool_problem(error: BaseException, root: DataRoot) -> SetupFailed:
    """The `SetupFailed` an error on ``root`` stands for (a `SetupFailed` itself
    is returned as it is)."""
    if isinstance(error, SetupFailed):
        return error
    if not os.path.lexists(root.root):
        return SetupFailed(SpoolProblem.DATA_ROOT_MISSING)
    if isinstance(error, UnsafePath):
        if error.reason is UnsafeReason.SYMLINK:
            return SetupFailed(SpoolProblem.DATA_ROOT_SYMLINK, error.reason)
        return SetupFailed(SpoolProblem.DATA_ROOT_UNSAFE, error.reason)
    if isinstance(error, PermissionError):
        return SetupFailed(SpoolProblem.DATA_ROOT_PERMISSION_DENIED)
    return SetupFailed(SpoolProblem.DATA_ROOT_IO_ERROR)


class DataRootHold:
    """The set-up state of one coordinator's data root (see the module header)."""

    def __init__(
        self,
        root: DataRoot,
        waiters: ResponseWaiters,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        # The coordinator's monotonic clock: every interval here is a duration
        # (spool.lifecycle rule 6).
        self._clock = clock
        self._waiters = waiters
        self._observer: Lease | None = None
        self._setup_lock = threading.Lock()
        self.identity: Identity | None = None
        # Rule 14: the refusal last said (None: the identity was served).
        self._refused: IdentityProblem | None = None
        # `gateway_shim.identity` rule 7: an identity was served at this path,
        # so a root found there later with no key and no journal is not minted in.
        self._served = False
        # The data root's identity when the spool was set up (rule 10).
        self._root_id: FileId | None = None
        self._closed = False
        # Rule 12: False while the wait runs on its periodic re-check alone.
        self.watching = True
        self._watch_failed_at: float | None = None
        # (device, inode) of the responses/ directory the observer watches.
        self._watched: tuple[int, int] | None = None
        self._rechecked_at = -RECHECK_IDENTITY_EVERY_S

    def recheck_due(self) -> bool:
        """May a failed presentation check the root's identity now (at most
        once per `RECHECK_IDENTITY_EVERY_S`)? Claims the slot if so."""
        now = self._clock()
        if now - self._rechecked_at < RECHECK_IDENTITY_EVERY_S:
            return False
        self._rechecked_at = now
        return True

    def recheck_identity(self) -> None:
        """Rule 10: after a failed presentation, has the data root (or its
        pinned parent) been replaced at its path? Then start over: drop the
        pin, the observer and the key. Never raises."""
        try:
            parent = self.root.root.parent
            moved = pin_moved(parent)
            if not moved and self._root_id is not None:
                moved = check_dir(self.root.root)[1] != self._root_id
        except (OSError, ValueError):
            moved = True
        if not moved:
            return
        with self._setup_lock:
            try:
                repin(self.root.root.parent)
            except OSError:
                pass
            observer, self._observer = self._observer, None
            self.identity = None
            self._root_id = None
        if observer is not None:
            observer.release()

    def ensure_started(self) -> Identity:
        """Set the spool up where it is not: directories, the identity, the
        root's (device, inode), observer; the identity to present with. Raises
        `IdentityRefused` (rule 14), `SetupFailed` (naming the `SpoolProblem`) or
        another ``OSError`` / ``ValueError`` for a data root that cannot be used,
        `HoldClosed` after `close`. An observer that cannot be started is not an
        error (rule 12): the wait re-checks."""
        with self._setup_lock:
            if self._closed:
                raise HoldClosed
            identity = self.identity
            if identity is not None and record_changed(self.root, identity):
                identity = self.identity = None
            if identity is None:
                try:
                    self.root.ensure()
                except (OSError, ValueError, RuntimeError) as e:
                    raise spool_problem(e, self.root) from e
                try:
                    identity = self._load_identity()
                except (OSError, ValueError) as e:
                    unsafe = e.reason if isinstance(e, UnsafePath) else None
                    raise SetupFailed(SpoolProblem.IDENTITY_KEY_UNUSABLE, unsafe) from e
                self._root_id = check_dir(self.root.root)[1]
                self.identity = identity
            if self._observer is None and self._may_try_watcher():
                self._start_watcher()
            return identity

    def _load_identity(self) -> Identity:
        """Rule 14: the identity, a refusal said once per change (WARNING,
        the reason only) and its end once (INFO). Lock held."""
        try:
            identity = load_identity(self.root, may_mint=not self._served)
        except IdentityRefused as e:
            if e.problem is not self._refused:
                self._refused = e.problem
                log.event(_log, logging.WARNING, "identity_mismatch", reason=e.problem)
            raise
        self._served = True
        if self._refused is not None:
            self._refused = None
            log.event(_log, logging.INFO, "identity_restored")
        return identity

    def _start_watcher(self) -> bool:
        """Start the observer on ``responses/`` as it is now (lock held)."""
        try:
            lease = acquire(self.root.responses, self._waiters)
        except (OSError, RuntimeError):
            self._watcher_failed()
            return False
        self._observer = lease
        self._watched = lease.dir_id
        self._watcher_started()
        return True

    def check_watch(self) -> None:
        """Rule 12: is the watch still alive, and on the directory now at
        ``responses/``? A watch lost (its emitter or observer stopped: an
        ``IN_IGNORED``, a deleted directory; or ``responses/`` replaced, moved
        away and recreated) is said once (``watch_lost reason=...``) and
        re-established at once; if that fails, ``watching`` turns False (said
        once, `_watcher_failed`) and a new watcher is tried `WATCHER_RETRY_S`
        later. Called by the shared re-check scan; never raises."""
        lost: Lease | None = None
        with self._setup_lock:
            if self._closed or self.identity is None:
                return
            observer = self._observer
            if observer is None:
                if self._may_try_watcher():
                    self._start_watcher()
                return
            reason = _watch_lost(observer.observer, self._watched, self.root.responses)
            if reason is None:
                return
            log.event(_log, logging.WARNING, "watch_lost", reason=reason)
            lost, self._observer = observer, None
            # Given back first: the shared watch that died is then replaced for
            # every coordinator, not kept alive by this one (`gateway_shim._watch`).
            lost.release()
            if self._start_watcher():
                log.event(_log, logging.INFO, "watch_reestablished")

    def _may_try_watcher(self) -> bool:
        failed = self._watch_failed_at
        return failed is None or self._clock() - failed >= WATCHER_RETRY_S

    def _watcher_failed(self) -> None:
        self._watch_failed_at = self._clock()
        if self.watching:
            self.watching = False
            # Said once per change, content-free (rule 12; docs/cli.md "Logging").
            log.event(_log, logging.WARNING, "watcher_unavailable", fallback_recheck=True)

    def _watcher_started(self) -> None:
        self._watch_failed_at = None
        if not self.watching:
            self.watching = True
            log.event(_log, logging.INFO, "watcher_restored")

    def close(self, *, wait: bool = True) -> None:
        """Give the watch back (the last share stops it); nothing starts again
        (rule 11). Idempotent. ``wait=False``: from a finalizer, no join."""
        with self._setup_lock:
            self._closed = True
            observer, self._observer = self._observer, None
        if observer is not None:
            observer.release(wait=wait)

    def after_fork_in_child(self) -> None:
        """Rule 12, in the child right after ``os.fork``: forget the parent's
        watch without giving it back or stopping it (that would unwatch the
        parent; `gateway_shim._watch` forgets each shared observer once); the
        child starts its own on first use. The key and the root's identity
        stay valid (same files)."""
        self._setup_lock = threading.Lock()
        self._observer = None


class WatchLost(enum.Enum):
    """Why a watch was found dead (content-free)."""

    STOPPED = "stopped"  # the observer or its emitter stopped (IN_IGNORED, deletion)
    REPLACED = "replaced"  # responses/ is no longer the directory watched
    GONE = "gone"  # responses/ cannot be looked at


def _dir_id(path: Path) -> tuple[int, int]:
    st = os.stat(path, follow_symlinks=False)
    return st.st_dev, st.st_ino


def _watch_lost(
    observer: BaseObserver, watched: tuple[int, int] | None, responses: Path
) -> WatchLost | None:
    emitters = observer.emitters
    if not observer.is_alive() or not emitters or not all(e.is_alive() for e in emitters):
        return WatchLost.STOPPED
    try:
        now = _dir_id(responses)
    except OSError:
        return WatchLost.GONE
    return None if now == watched else WatchLost.REPLACED


class HoldClosed(Exception):
    """The coordinator was closed: nothing may be set up (rule 11)."""

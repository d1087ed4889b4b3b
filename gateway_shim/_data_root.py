"""The coordinator's hold on its data root: set up on first use, dropped when moved.

Holds `DataRootHold`: the spool directories, the identity key, the data root's
identity (device, inode) and the observer of ``responses/``, all set up on the
first presentation that gets past the disabled and ineligible checks and kept
under one lock. Private to `gateway_shim.coordinator`. Coordinator rules that
apply: rule 2 (nothing is created before the coordinator asks: disabled or
ineligible writes zero files), rule 5 (the key is the HMAC key of
`gateway_shim.identity`, never the provider key) and rule 10 (a moved data
root: the pin, the observer and the key are dropped and set up again on what is
at the path now).
"""

from __future__ import annotations

import threading

from watchdog.observers.api import BaseObserver

from gateway_shim._responses import ResponseWaiters, stop_watching, watch_responses
from gateway_shim.identity import load_or_create_key
from kexpr.spool.fsio import FileId, check_dir, pin_moved, repin
from kexpr.spool.layout import DataRoot


class DataRootHold:
    """The set-up state of one coordinator's data root (see the module header)."""

    def __init__(self, root: DataRoot, waiters: ResponseWaiters) -> None:
        self.root = root
        self._waiters = waiters
        self._observer: BaseObserver | None = None
        self._setup_lock = threading.Lock()
        self.key: bytes | None = None
        # The data root's identity when the spool was set up (rule 10).
        self._root_id: FileId | None = None

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
            self.key = None
            self._root_id = None
        if observer is not None:
            try:
                stop_watching(observer)
            except (OSError, RuntimeError):
                pass

    def ensure_started(self) -> None:
        """Set the spool up where it is not: directories, key, identity,
        observer. Raises `UnsafePath` / ``OSError`` / ``ValueError`` for a data
        root that cannot be used, ``RuntimeError`` when the observer's thread
        cannot be started."""
        with self._setup_lock:
            if self.key is None:
                self.root.ensure()
                self.key = load_or_create_key(self.root)
                self._root_id = check_dir(self.root.root)[1]
            if self._observer is None:
                self._observer = watch_responses(self._waiters, self.root.responses)

    def close(self) -> None:
        with self._setup_lock:
            if self._observer is not None:
                stop_watching(self._observer)
                self._observer = None

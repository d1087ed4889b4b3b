"""The data root's layout (SPEC §3).

One root per host profile. Both processes derive every path from here, so a
path is never assembled by hand elsewhere::

    identity.key          32 random bytes, gateway-owned, 0600
    spool/requests/       shim -> worker   (<request_id>.json)
    spool/claimed/        requests the worker has claimed (inside the watched tree)
    spool/responses/      worker -> shim   (<request_id>.json)
    spool/reports/        shim -> worker   (<attempt_id>.json)
    spool/tmp/            staging for atomic renames/links
    journal.lock          flock target, never unlinked
    worker.lock           held by the one live worker, never unlinked
    outcomes/YYYY-MM-DD.jsonl
    worker.status.json
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from spool.fsio import ensure_private_dir

DEFAULT_DATA_ROOT: Final = Path("var/korean-expression-v1")


@dataclass(frozen=True, slots=True)
class DataRoot:
    root: Path

    @property
    def identity_key(self) -> Path:
        return self.root / "identity.key"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def requests(self) -> Path:
        return self.spool / "requests"

    @property
    def claimed(self) -> Path:
        return self.spool / "claimed"

    @property
    def responses(self) -> Path:
        return self.spool / "responses"

    @property
    def reports(self) -> Path:
        return self.spool / "reports"

    @property
    def tmp(self) -> Path:
        return self.spool / "tmp"

    @property
    def journal_lock(self) -> Path:
        return self.root / "journal.lock"

    @property
    def worker_lock(self) -> Path:
        return self.root / "worker.lock"

    @property
    def outcomes(self) -> Path:
        return self.root / "outcomes"

    @property
    def status_file(self) -> Path:
        return self.root / "worker.status.json"

    def spool_dirs(self) -> tuple[Path, ...]:
        return (self.requests, self.claimed, self.responses, self.reports, self.tmp)

    def ensure(self) -> None:
        """Create every directory 0700 (idempotent), refusing symlinks and foreign owners.

        Raises `spool.fsio.UnsafePath` (fail closed) when an existing component is
        not a private directory owned by this user.
        """
        root = Path(os.path.abspath(self.root))
        ensure_private_dir(root, create_parents=True)
        for d in (self.spool, *self.spool_dirs(), self.outcomes):
            ensure_private_dir(d)

"""Leaving quarantine without a restart (`kexpr.worker.daemon` invariant 6), on the
operator's request: ``kexpr quarantine clear`` puts a request file at
``<data root>/quarantine-clear.request``; the worker, while in quarantine, looks
for it on its rescan timer (one ``lstat`` a second, and only then).

Rules:

1. A clear is the start-up's own checks, run again: the full no-symlink walk of
   the data root (remembered afresh, as at start-up) and a full verification of
   the journal that rebuilds the dedupe index from the verified segments and
   derives the spend count from its start rows (`kexpr.worker.spend` rule 2:
   a clear frees no budget; a worker that started in quarantine counted
   nothing until here). Only if both pass does the worker leave quarantine; a cause that is still there
   refuses the clear with its enum word, and the worker stays in quarantine.
   Nothing is repaired, truncated or skipped: what a restart would refuse, a
   clear refuses.
2. Never beside a call: while a call runs (an entry dispatched to the call pool)
   the clear is refused (``calls_in_flight``); the operator asks again.
3. A torn tail is not cleared here: the journal does not verify until the
   segment is set aside (``kexpr journal quarantine``, worker stopped).
4. The request file is removed whatever the result (it is a one-shot ask),
   and the result is in ``worker.status.json`` (``quarantine_clear``: the
   request's random nonce, ``cleared`` or ``refused``, the reason the worker was
   in quarantine, the enum word of a refusal) and one stderr line. Enum words
   and the operator's nonce only.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kexpr.spool import log
from kexpr.spool.fsio import UnsafePath, read_private_identified, unlink_if_same
from kexpr.spool.journal import JournalUnverified
from kexpr.worker.quarantine import INODE_CHANGED

if TYPE_CHECKING:
    from kexpr.worker.parts import Parts

CLEAR_SCHEMA: Final = "kexpr-quarantine-clear-v1"
MAX_REQUEST_BYTES: Final = 512
_NONCE: Final = re.compile(r"[0-9a-f]{32}")
_log = log.logger("worker")


class ClearResult(enum.StrEnum):
    CLEARED = "cleared"
    REFUSED = "refused"


class ClearRefusal(enum.StrEnum):
    """Why a clear was refused (besides the tree's `UnsafeReason` and the journal's
    `Finding`, which are said by their own words)."""

    CALLS_IN_FLIGHT = "calls_in_flight"
    MALFORMED_REQUEST = "malformed_request"
    IO_ERROR = "io_error"


@dataclass(frozen=True, slots=True)
class ClearAnswer:
    nonce: str | None
    result: ClearResult
    was: str | None
    why: str | None

    def to_json(self) -> dict[str, Any]:
        return {"nonce": self.nonce, "result": self.result, "was": self.was, "why": self.why}


def request_bytes(nonce: str) -> bytes:
    """The request ``kexpr quarantine clear`` writes (a 32-hex random nonce)."""
    if not _NONCE.fullmatch(nonce):
        raise ValueError("nonce")
    return json.dumps({"schema": CLEAR_SCHEMA, "nonce": nonce}, sort_keys=True).encode()


def _nonce(data: bytes) -> str | None:
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if (
        not isinstance(doc, dict)
        or set(doc) != {"schema", "nonce"}
        or doc["schema"] != CLEAR_SCHEMA
        or not isinstance(doc["nonce"], str)
        or not _NONCE.fullmatch(doc["nonce"])
    ):
        return None
    return str(doc["nonce"])


def clear_if_asked(p: Parts) -> ClearAnswer | None:
    """On the rescan timer, in quarantine only: the operator's clear, if asked
    (rules 1-4). None when not in quarantine or nothing was asked."""
    q = p.quarantine
    if q.reason is None:
        return None
    path = p.root.quarantine_clear
    try:
        os.lstat(path)
    except OSError:
        return None
    was = q.reason
    try:
        data, fid = read_private_identified(path, max_bytes=MAX_REQUEST_BYTES)
        unlink_if_same(path, fid)
    except OSError:
        return _said(ClearAnswer(None, ClearResult.REFUSED, was, ClearRefusal.IO_ERROR))
    nonce = _nonce(data)
    if nonce is None:
        return _said(ClearAnswer(None, ClearResult.REFUSED, was, ClearRefusal.MALFORMED_REQUEST))
    with p.attempts.lock:
        busy = bool(p.attempts.busy)
    if busy:
        return _said(ClearAnswer(nonce, ClearResult.REFUSED, was, ClearRefusal.CALLS_IN_FLIGHT))
    try:
        sharing, tree = p.root.verify_tree_sharing()
        if q.foreign_root(tree):
            # Not the directory the supervisor checked (daemon invariant 10):
            # a clear never adopts a swapped-in root, nor loads its journal.
            return _said(ClearAnswer(nonce, ClearResult.REFUSED, was, INODE_CHANGED))
        p.journal.load()
    except UnsafePath as e:
        return _said(ClearAnswer(nonce, ClearResult.REFUSED, was, e.reason.value))
    except JournalUnverified as e:
        return _said(ClearAnswer(nonce, ClearResult.REFUSED, was, e.finding.value))
    except OSError:
        return _said(ClearAnswer(nonce, ClearResult.REFUSED, was, ClearRefusal.IO_ERROR))
    # The spend count is derived again from the journal just verified: a clear
    # never hands out budget the journal has spent (worker.spend rule 2).
    p.spend.seed(p.journal.index, p.clock(), p.mono(), step=p.clockwatch.steps)
    q.resume(sharing, tree)
    return _said(ClearAnswer(nonce, ClearResult.CLEARED, was, None))


def _said(outcome: ClearAnswer) -> ClearAnswer:
    from kexpr.worker.quarantine import QUARANTINE_REASONS

    why = outcome.why
    print(
        f"kexpr worker: quarantine clear {outcome.result.value}"
        + (f": {why}" if why is not None else "")
        + f" (was {outcome.was})",
        file=sys.stderr,
        flush=True,
    )
    known = QUARANTINE_REASONS | {r.value for r in ClearRefusal}
    log.event(
        _log,
        logging.WARNING if outcome.result is ClearResult.REFUSED else logging.INFO,
        "quarantine_clear",
        result=outcome.result,
        was=log.known(outcome.was or "", QUARANTINE_REASONS),
        why=None if why is None else log.known(why, known),
    )
    return outcome

"""The rehearsal marker: how a data root says "nothing here is real evidence".

``kexpr supervise --rehearsal`` runs the real worker against the built-in model
(`kexpr.worker.rehearsal`): no key, no network. Its journal rows are ordinary
rows — the journal's 13 fields are fixed and none names a provider — so what
marks them is the data root itself: ``rehearsal.marker``, a small durable file
the rehearsal worker writes (fsynced, directory fsynced) *before* its first
journal row, under ``worker.lock``.

Rules of this module (light: no SDK, no network; the ops tools read it too):

1. A data root is a *rehearsal root* when anything at all is at
   ``rehearsal.marker`` (a file, or anything else there: fail closed). Every
   row of a rehearsal root is rehearsal evidence, which nothing counts:
   ``kexpr promotion-report`` and the live proof refuse such a root and say so.
2. A rehearsal worker starts only on a root that is already a rehearsal root or
   that holds no evidence yet (nothing in ``outcomes/`` or ``quarantine/``); it
   writes the marker before anything else. A root with real evidence (rows
   without the marker) is refused: rehearsal rows must never mix with real ones.
3. A real worker (with the provider) refuses a rehearsal root: a real call's
   rows there would be uncountable. To leave rehearsal, point the real worker at
   a fresh data root; the rehearsal root can be deleted whole.
4. The marker holds no content: a schema word and the creation time.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import os
import stat
from pathlib import Path
from typing import Final

from kexpr.spool.canonical import TS_FORMAT
from kexpr.spool.fsio import list_dir, publish
from kexpr.spool.layout import DataRoot

__all__ = [
    "DEFAULT_FIRST_TOKEN_S",
    "DEFAULT_TOKENS_PER_S",
    "FIRST_TOKEN_S_RANGE",
    "MARKER_NAME",
    "MARKER_SCHEMA",
    "TOKENS_PER_S_RANGE",
    "MarkerRefusal",
    "holds_evidence",
    "is_rehearsal_root",
    "mark_rehearsal_root",
    "marker_path",
    "rehearsal_refusal",
]

MARKER_NAME: Final = "rehearsal.marker"
# The rehearsal model's speed (`kexpr.worker.rehearsal.Pace`), here so that the
# supervisor's flags need no worker import: by default the published median for
# gpt-4.1-mini on OpenAI's API (docs/budget.md: 52-68 tokens/s in a community run,
# 77 on OpenAI's API, 108 on Azure; the first token after 0.3-0.9 s).
DEFAULT_TOKENS_PER_S: Final = 77.0
DEFAULT_FIRST_TOKEN_S: Final = 0.5
# What the flags accept (inclusive): slow enough to rehearse timeouts, fast
# enough to be instant in a test.
TOKENS_PER_S_RANGE: Final = (1.0, 100_000.0)
FIRST_TOKEN_S_RANGE: Final = (0.0, 10.0)
MARKER_SCHEMA: Final = "kexpr-rehearsal-v1"


class MarkerRefusal(enum.StrEnum):
    """Why a worker may not start on a data root (rules 2 and 3)."""

    # A rehearsal worker, a root with journal rows and no marker.
    REAL_EVIDENCE = "real_evidence"
    # A real worker, a rehearsal root.
    REHEARSAL_ROOT = "rehearsal_root"
    # A rehearsal worker, something at the marker's name that is not a regular file.
    UNSAFE_MARKER = "unsafe_marker"


def marker_path(root: DataRoot) -> Path:
    return root.root / MARKER_NAME


def is_rehearsal_root(root: DataRoot) -> bool:
    """Rule 1: is anything at ``rehearsal.marker``? (never followed)"""
    try:
        os.lstat(marker_path(root))
    except (FileNotFoundError, NotADirectoryError):
        return False  # no such root, or not a directory: nothing is marked
    except OSError:
        return True  # cannot tell: fail closed (not evidence)
    return True


def holds_evidence(root: DataRoot) -> bool:
    """Rule 2: does ``outcomes/`` or ``quarantine/`` hold anything? A directory
    that cannot be listed counts as holding evidence (fail closed)."""
    for d in (root.outcomes, root.quarantine):
        try:
            if list_dir(d):
                return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False


def rehearsal_refusal(root: DataRoot, *, rehearsal: bool) -> MarkerRefusal | None:
    """Rules 2 and 3, for a worker holding ``worker.lock`` on ``root``."""
    marked = is_rehearsal_root(root)
    if not rehearsal:
        return MarkerRefusal.REHEARSAL_ROOT if marked else None
    if marked:
        try:
            st = os.lstat(marker_path(root))
        except OSError:
            return MarkerRefusal.UNSAFE_MARKER
        return None if stat.S_ISREG(st.st_mode) else MarkerRefusal.UNSAFE_MARKER
    return MarkerRefusal.REAL_EVIDENCE if holds_evidence(root) else None


def mark_rehearsal_root(root: DataRoot, *, now: dt.datetime | None = None) -> None:
    """Write the marker durably unless it is there (rule 2): fsynced, linked
    into place, the data root fsynced. Raises OSError / UnsafePath."""
    if is_rehearsal_root(root):
        return
    stamp = (now or dt.datetime.now(dt.UTC)).strftime(TS_FORMAT)
    data = json.dumps({"schema": MARKER_SCHEMA, "created_at_utc": stamp}, sort_keys=True).encode(
        "utf-8"
    )
    publish(root.tmp, marker_path(root), data + b"\n")

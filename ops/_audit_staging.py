"""The staging files the product writes, as the readers of a live data root judge
them (``kexpr audit``, ``kexpr journal verify``; `kexpr.spool.fsio` rule 5).

A name of the staging shape (`kexpr.spool.fsio.staged_final`:
``.<final name>[.reserve].<pid>.<12 hex>``) is a staging file only

- in ``spool/tmp/``, for a file published, reserved or created from there: a
  spool message (``<32 hex>.json``; a reservation is only ever an answer's),
  the identity key and record, the rehearsal marker, the operator glossary and
  the quarantine ask;
- at the top of the data root, for a file replaced in place
  (`kexpr.spool.fsio.replace_private`): the identity files and the two
  heartbeats;

and it is judged as the file it becomes. Anywhere else, or for any other final
name, the name is one the product did not make: an unexpected file whose name
is never printed. A staging file older than `STAGING_MAX_AGE_S` is no longer
being written: it is judged whole, and is itself a finding.
"""

from __future__ import annotations

import os
import re
from typing import Final

from gateway_shim.operator_glossary import GLOSSARY_FILE_NAME
from kexpr.ops.supervisor import STATUS_NAME as SUPERVISOR_STATUS_NAME
from kexpr.spool.fsio import RESERVATION_MARK, staged_final
from kexpr.spool.layout import QUARANTINE_CLEAR_NAME
from kexpr.spool.rehearsal import MARKER_NAME as REHEARSAL_MARKER
from kexpr.spool.retention import RECORD_NAME as RETENTION_RECORD

# A staging file lives for one write (milliseconds) or, an answer's reservation,
# for one provider call (bounded by the request's deadline, seconds). Ten
# minutes is far beyond both, so a slow disk or a briefly stopped writer is not
# called stale; a file older than that (or dated that far ahead) was left by a
# killed writer or put there by someone else, and is no longer being written.
STAGING_MAX_AGE_S: Final = 600.0

_MESSAGE: Final = re.compile(r"[0-9a-f]{32}\.json")
# Published, reserved or created through ``spool/tmp/`` (`publish`, `reserve`,
# `create_private_file`), besides the spool messages.
_STAGED_IN_TMP: Final = frozenset(
    {
        "identity.key",
        "identity.fingerprint",
        REHEARSAL_MARKER,
        GLOSSARY_FILE_NAME,
        QUARANTINE_CLEAR_NAME,
    }
)
# Replaced in place at the top level (`replace_private`).
_STAGED_AT_TOP: Final = frozenset(
    {
        "identity.key",
        "identity.fingerprint",
        "identity.sealed",
        "worker.status.json",
        SUPERVISOR_STATUS_NAME,
        RETENTION_RECORD,
    }
)


def staged_as(rel: tuple[str, ...]) -> str | None:
    """The final name of the staging file at ``rel`` (a path relative to the
    data root) if the product writes a staging file of that name there, else
    None. The name and place only; its age is `is_stale`'s."""
    name = rel[-1]
    final = staged_final(name)
    if final is None:
        return None
    reserved = name.startswith(f".{final}{RESERVATION_MARK}")
    if rel[:-1] == ("spool", "tmp"):
        if _MESSAGE.fullmatch(final):
            return final
        return final if final in _STAGED_IN_TMP and not reserved else None
    if len(rel) == 1:
        return final if final in _STAGED_AT_TOP and not reserved else None
    return None


def is_stale(st: os.stat_result, now: float) -> bool:
    """Whether a staging file last written at ``st``'s mtime is no longer being
    written at ``now`` (either way of it: a date ahead is no younger)."""
    return abs(now - st.st_mtime) > STAGING_MAX_AGE_S

"""The key the journal is written under: ``outcomes/identity.json``.

An artifact key is an HMAC under the gateway's ``identity.key``
(`gateway_shim.identity`), so the journal's dedupe is only as good as the key
that names the artifacts: under another key every artifact is new and is paid
again. The files beside the key (``identity.fingerprint``, ``identity.sealed``)
can be deleted or restored with it; this record lives *in* the journal's own
directory, is written by the journal's single writer, and is never removed by
retention, so the proof of which key the rows were written under travels with
the rows (a restore of ``outcomes/`` brings it back, a loss of the files beside
the key leaves it).

1. The format, canonical JSON, exactly:
   ``{"fingerprint": "<32 hex>", "schema": "kexpr-journal-identity-v1"}``;
   the fingerprint is `gateway_shim.identity.fingerprint` of the key (a keyed
   hash of a fixed message: it names the key without revealing it).
2. Each request of this release names the fingerprint of the key its artifact
   key was computed under (``identity_fingerprint``) and the fingerprints the
   identity continues from (``earlier_fingerprints``: keys a rotation sealed,
   or a lost key the operator let go with ``kexpr identity rotate
   --old-key-lost``), `kexpr.spool.messages`. The worker judges it under the
   journal lock, before dedupe and before any row (`judge`):

   ========================================  ==========  ==================
   the record                                the verdict  then
   ========================================  ==========  ==================
   absent                                    ``ADOPT``   written, then served
   names the request's fingerprint           ``SAME``    served
   names one of its earlier fingerprints     ``MOVE``    replaced, then served
   anything else                             ``REFUSE``  canonical
                                                         ``identity_mismatch``:
                                                         no row, no call
   ========================================  ==========  ==================

   The record is written durably (the file fsynced, renamed over, the directory
   fsynced) before the start row the request may lead to, so no row is on disk
   under a key the record does not name. A request that names no fingerprint
   (a shim of an earlier release) is served as before and changes nothing.
3. The gateway refuses a key the record does not prove before it writes a
   request (`gateway_shim.identity` rule 6), and ``kexpr identity check``,
   ``kexpr status`` and ``kexpr audit`` say so; the worker's verdict is the
   same judgement made again by the one process that writes the journal.
4. A record that is not exactly its format fails closed: the worker answers
   ``journal_unavailable`` and the audit names it (`Finding.FIELD_FORMAT`).
5. Nothing here is content: a keyed hash and a schema word.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection
from pathlib import Path
from typing import Final

from kexpr.spool.canonical import canonical_json
from kexpr.spool.contract._strictjson import StrictJsonError, read_object
from kexpr.spool.fsio import read_private, replace_private
from kexpr.spool.layout import DataRoot

NAME: Final = "identity.json"
SCHEMA: Final = "kexpr-journal-identity-v1"
MAX_BYTES: Final = 256
_HEX32: Final = re.compile(r"[0-9a-f]{32}")


class InvalidRecord(ValueError):
    """The record is not exactly its format (rule 4). No content."""


class Verdict(enum.Enum):
    """The worker's judgement of a request's fingerprint (rule 2)."""

    ADOPT = "adopt"
    SAME = "same"
    MOVE = "move"
    REFUSE = "refuse"


def path(root: DataRoot) -> Path:
    return root.outcomes / NAME


def render(fingerprint: str) -> bytes:
    if not _HEX32.fullmatch(fingerprint):
        raise ValueError("fingerprint")
    return canonical_json({"fingerprint": fingerprint, "schema": SCHEMA}).encode("ascii")


def parse(data: bytes) -> str:
    """The fingerprint the record names; `InvalidRecord` for anything else."""
    try:
        obj = read_object(data, max_bytes=MAX_BYTES)
    except (StrictJsonError, TypeError) as e:
        raise InvalidRecord("malformed") from e
    fp = obj.get("fingerprint")
    if set(obj) != {"fingerprint", "schema"} or obj["schema"] != SCHEMA:
        raise InvalidRecord("fields")
    if not isinstance(fp, str) or not _HEX32.fullmatch(fp):
        raise InvalidRecord("fingerprint")
    if render(fp) != data:
        raise InvalidRecord("not canonical")
    return fp


def read(root: DataRoot) -> str | None:
    """The recorded fingerprint, None when there is no record. `InvalidRecord`
    for a record not in its format; `UnsafePath` / ``OSError`` for a file that
    is not the product's to read (`kexpr.spool.fsio` rules 1-3)."""
    try:
        data = read_private(path(root), max_bytes=MAX_BYTES)
    except FileNotFoundError:
        return None
    return parse(data)


def write(root: DataRoot, fingerprint: str) -> None:
    """Rule 2: durably replace the record (the caller holds the journal lock)."""
    replace_private(path(root), render(fingerprint), durable=True)


def judge(recorded: str | None, fingerprint: str, earlier: Collection[str]) -> Verdict:
    """Rule 2's table."""
    if recorded is None:
        return Verdict.ADOPT
    if recorded == fingerprint:
        return Verdict.SAME
    if recorded in earlier:
        return Verdict.MOVE
    return Verdict.REFUSE

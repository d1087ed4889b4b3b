"""``identity.key``, the opaque artifact key, and the identity's evidence (design §5, §8).

``artifact_key = HMAC-SHA256(identity.key, b"korean-expression-v4\\0" || fields)``
truncated to its first 128 bits (32 lower-case hex), where each field is a 4-byte
big-endian length followed by its NFC UTF-8 bytes. Half the output is the
truncation RFC 2104 recommends, and it halves the key's share of every answer
(the model echoes it: docs/budget.md). The key is a prefix of the full hexdigest,
so a key written by an earlier release (all 64 hex) names the same artifact as
its first 32 hex (the worker's dedupe identity, `kexpr.spool.journal`).
``identity.key`` is 32 random bytes, created once by the gateway (``O_EXCL``, 0600, no
symlink) and checked on every read. Raw inputs (event, schedule, session IDs)
never leave this process: only the HMAC does, and it is not reversible.

Rules of the identity (the files are `gateway_shim._identity_store`'s; this
module is pure: values in, values out):

1. **The key is part of the evidence.** The journal dedupes by artifact key, and
   an artifact key is only as stable as ``identity.key``: a new key names every
   artifact anew, and the worker would pay again for all of them. So the key's
   *fingerprint* is recorded beside the journal (``identity.fingerprint``):
   `fingerprint` is HMAC-SHA-256 of a fixed, domain-separated message under the
   key, truncated to 128 bits. It names the key without revealing it, and it can
   be compared only by someone who holds the key.
2. **Who writes it.** The gateway owns the key, so the gateway writes the record,
   when it mints the key or first finds a key with no record (the upgrade from a
   release before the record). The worker, the journal's single writer, never
   reads or writes either file.
3. **What a gateway does with what it finds** is `IDENTITY_RULES`, a table over
   (key present?, what the record says of it, does the journal hold rows?).
   Without journal rows nothing can be paid twice: a missing key is minted and a
   present one recorded. Beside rows, a missing key (`KEY_MISSING`) or a key the
   record does not name (`KEY_DIFFERS`) is refused: the presentation is canonical
   (``identity_mismatch``), no request is written and no key is minted. A record
   that names a key the rotation sealed is a rotation stopped between its steps
   (`ROTATION_UNFINISHED`): refused too, until ``kexpr identity rotate`` runs
   again and finishes it. A record or sealed-keys file that is not exactly its
   format is `RECORD_INVALID`, always (a product file that is not what it must
   be fails closed).
4. **A rotation on purpose keeps old artifacts deduped.** ``kexpr identity
   rotate`` seals the current key into ``identity.sealed`` (0600, the gateway's,
   like the key) before it replaces the key, and the record last. While a sealed
   key is kept, the shim computes each artifact's key under it too and sends
   those HMACs with the request (``prior_artifact_keys``, `kexpr.spool.messages`);
   the worker dedupes on any of them, so an artifact attempted under an old key
   is ``already_attempted`` under the new one. A sealed key is kept while the
   journal may still hold rows attempted under it (`seal_expired`), at most
   `MAX_SEALED_KEYS` at once.
5. Nothing here is content: fingerprints and HMACs, enum reasons, timestamps.
6. **The journal holds the proof.** The record beside the key can be deleted
   or restored with it, so the journal keeps its own: ``outcomes/identity.json``
   names the fingerprint of the key its rows are written under
   (`kexpr.spool._journal_identity`, written by the worker alone). Each request
   names its key's fingerprint, and the fingerprints the identity continues
   from (`Identity.earlier`: the sealed keys, and a key the operator let go
   with ``--old-key-lost``). Where the journal has its record, it decides
   (`JOURNAL_RULES`): its own key is served (the record beside the key is
   written again if it says otherwise), a key that continues from it by a
   rotation is judged by the record as in rule 3, and any other key is
   ``key_differs``, whatever the files beside the key say. Where it has none
   (a journal an earlier release wrote, until its first attempt under this
   one), rule 3's table holds, except that a key with no record beside rows is
   no longer recorded on trust: ``proof_missing``, refused, until the operator
   attests it (``kexpr identity adopt``) or lets it go (``--old-key-lost``).
   So neither deleting ``identity.fingerprint`` nor a restore that brings back
   another key re-keys an artifact.
7. **A moved root is not minted in.** A gateway that has served an identity
   on its data root and then finds a root with no key and no journal at that
   path (a directory swapped in) does not mint there (``root_replaced``): it
   has not seen that root's journal empty before, and a key made there would
   name every artifact anew. A gateway process started on such a root mints
   as before.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import hmac
import os
import re
import struct
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kexpr.spool.canonical import canonical_json, format_ts, parse_ts
from kexpr.spool.contract._strictjson import StrictJsonError, read_object
from kexpr.spool.errors import ReasonError

if TYPE_CHECKING:
    from kexpr.spool.layout import DataRoot

KEY_BYTES: Final = 32
# 128 bits of the HMAC-SHA-256 output, as lower-case hex.
ARTIFACT_KEY_HEX: Final = 32
DOMAIN: Final = b"korean-expression-v4\0"
# Rule 1: the fingerprint's message; no artifact's fields can spell it (those
# start with `DOMAIN`).
FINGERPRINT_DOMAIN: Final = b"kexpr identity fingerprint v1"
FINGERPRINT_HEX: Final = 32
RECORD_SCHEMA: Final = "kexpr-identity-v1"
SEALED_SCHEMA: Final = "kexpr-identity-sealed-v1"
# Rule 4: the sealed keys kept at once (each adds one HMAC per presentation and
# 35 bytes per request). Eight rotations inside one retention window is already
# far past any routine.
MAX_SEALED_KEYS: Final = 8
MAX_IDENTITY_FILE_BYTES: Final = 4096
_HEX32: Final = re.compile(r"[0-9a-f]{32}")
_HEX64: Final = re.compile(r"[0-9a-f]{64}")


def encode_fields(fields: Sequence[str]) -> bytes:
    out = bytearray(DOMAIN)
    for f in fields:
        b = unicodedata.normalize("NFC", f).encode("utf-8")
        out += struct.pack(">I", len(b))
        out += b
    return bytes(out)


def artifact_key(key: bytes, fields: Sequence[str]) -> str:
    if len(key) != KEY_BYTES:
        raise ValueError("identity key length")
    digest = hmac.new(key, encode_fields(fields), hashlib.sha256).hexdigest()
    return digest[:ARTIFACT_KEY_HEX]


def prior_artifact_keys(
    sealed: Iterable[bytes], key: bytes, fields: Sequence[str]
) -> tuple[str, ...]:
    """Rule 4: the artifact's key under each sealed key, oldest first, without
    the current key's own (a rotation stopped after sealing: the current key is
    sealed too) and without repeats."""
    current = artifact_key(key, fields)
    out: list[str] = []
    for old in sealed:
        prior = artifact_key(old, fields)
        if prior != current and prior not in out:
            out.append(prior)
    return tuple(out)


def fingerprint(key: bytes) -> str:
    """Rule 1: the key's name in the record (never the key)."""
    if len(key) != KEY_BYTES:
        raise ValueError("identity key length")
    return hmac.new(key, FINGERPRINT_DOMAIN, hashlib.sha256).hexdigest()[:FINGERPRINT_HEX]


def new_request_id() -> str:
    return os.urandom(16).hex()


def load_or_create_key(root: DataRoot) -> bytes:
    """The key a gateway presents with on ``root``, after rule 3 (minted or
    recorded first where it says so): `gateway_shim._identity_store.load_identity`.
    Raises `IdentityRefused`, `UnsafePath` / ``OSError``."""
    from gateway_shim._identity_store import load_identity

    return load_identity(root).key


# ------------------------------------------------------------------ rule 3


class IdentityProblem(enum.StrEnum):
    """Why a gateway refuses to present with what it found (rule 3)."""

    KEY_MISSING = "key_missing"
    KEY_DIFFERS = "key_differs"
    ROTATION_UNFINISHED = "rotation_unfinished"
    RECORD_INVALID = "record_invalid"
    # Rule 6: a key with no record beside a journal with rows and no record of
    # its own: nothing proves the rows were written under it.
    PROOF_MISSING = "proof_missing"
    # Rule 7: no key and no journal at a path where this gateway served one.
    ROOT_REPLACED = "root_replaced"


class IdentityRefused(ReasonError[IdentityProblem]):
    """The data root's identity cannot be trusted (rule 3). No content."""


class Recorded(enum.Enum):
    """What ``identity.fingerprint`` says of the key at hand."""

    ABSENT = "absent"  # no record
    MATCHES = "matches"  # the key's fingerprint
    SEALED = "sealed"  # the fingerprint of a key a rotation sealed
    OTHER = "other"  # anything else (or a record beside no key at all)


class Action(enum.Enum):
    """What a gateway may do (rule 3), when it is not a refusal."""

    SERVE = "serve"
    MINT = "mint"  # create a key (no key, no rows), then record it
    RECORD = "record"  # record the key at hand (no rows, or no record yet)


# Rule 3: (key present, what the record says of it, journal holds rows) -> what
# to do. Total over its domain; a key that is absent has no fingerprint to match,
# so the record is ABSENT or OTHER to it.
IDENTITY_RULES: Final[Mapping[tuple[bool, Recorded, bool], Action | IdentityProblem]] = {
    (False, Recorded.ABSENT, False): Action.MINT,
    (False, Recorded.ABSENT, True): IdentityProblem.KEY_MISSING,
    (False, Recorded.OTHER, False): Action.MINT,
    (False, Recorded.OTHER, True): IdentityProblem.KEY_MISSING,
    # A key with no record beside rows, and no journal record (rule 6): nothing
    # proves it (a data root a release before the record wrote is attested with
    # ``kexpr identity adopt``).
    (True, Recorded.ABSENT, False): Action.RECORD,
    (True, Recorded.ABSENT, True): IdentityProblem.PROOF_MISSING,
    (True, Recorded.MATCHES, False): Action.SERVE,
    (True, Recorded.MATCHES, True): Action.SERVE,
    (True, Recorded.SEALED, False): Action.RECORD,
    (True, Recorded.SEALED, True): IdentityProblem.ROTATION_UNFINISHED,
    (True, Recorded.OTHER, False): Action.RECORD,
    (True, Recorded.OTHER, True): IdentityProblem.KEY_DIFFERS,
}


class Journal(enum.Enum):
    """What the journal's own record (rule 6) says of the key at hand."""

    NONE = "none"  # no journal record (then rule 3's table decides)
    MATCHES = "matches"  # the key's fingerprint
    CONTINUED = "continued"  # a key the identity continues from (sealed, or let go)
    OTHER = "other"  # anything else (or a record beside no key at all)


# Rule 6: (key present, what the record beside the key says, what the journal's
# record says) -> what to do, where the journal has a record (it implies rows).
# Total over the reachable domain: an absent key is ABSENT or OTHER to the
# record beside it and OTHER to the journal's.
JOURNAL_RULES: Final[Mapping[tuple[bool, Recorded, Journal], Action | IdentityProblem]] = {
    (False, Recorded.ABSENT, Journal.OTHER): IdentityProblem.KEY_MISSING,
    (False, Recorded.OTHER, Journal.OTHER): IdentityProblem.KEY_MISSING,
    # The journal's own key: served, and the record beside it written again if
    # it says anything else.
    (True, Recorded.MATCHES, Journal.MATCHES): Action.SERVE,
    (True, Recorded.ABSENT, Journal.MATCHES): Action.RECORD,
    (True, Recorded.SEALED, Journal.MATCHES): Action.RECORD,
    (True, Recorded.OTHER, Journal.MATCHES): Action.RECORD,
    # A rotation from the journal's key: the record beside the key finishes it.
    (True, Recorded.MATCHES, Journal.CONTINUED): Action.SERVE,
    (True, Recorded.ABSENT, Journal.CONTINUED): Action.RECORD,
    (True, Recorded.SEALED, Journal.CONTINUED): IdentityProblem.ROTATION_UNFINISHED,
    (True, Recorded.OTHER, Journal.CONTINUED): IdentityProblem.KEY_DIFFERS,
    # Any other key, whatever the files beside it say.
    (True, Recorded.MATCHES, Journal.OTHER): IdentityProblem.KEY_DIFFERS,
    (True, Recorded.ABSENT, Journal.OTHER): IdentityProblem.KEY_DIFFERS,
    (True, Recorded.SEALED, Journal.OTHER): IdentityProblem.KEY_DIFFERS,
    (True, Recorded.OTHER, Journal.OTHER): IdentityProblem.KEY_DIFFERS,
}


def journal_says(key: bytes | None, journal: str | None, earlier: Iterable[str]) -> Journal:
    """What the journal's record ``journal`` (a fingerprint, or None) says of
    ``key``; ``earlier``: the fingerprints the identity continues from."""
    if journal is None:
        return Journal.NONE
    if key is None:
        return Journal.OTHER
    if hmac.compare_digest(journal, fingerprint(key)):
        return Journal.MATCHES
    return Journal.CONTINUED if journal in set(earlier) else Journal.OTHER


def recorded(key: bytes | None, record: str | None, sealed: Iterable[str]) -> Recorded:
    """What the record ``record`` (a fingerprint, or None) says of ``key``;
    ``sealed``: the sealed keys' fingerprints."""
    if record is None:
        return Recorded.ABSENT
    if key is None:
        return Recorded.OTHER
    if hmac.compare_digest(record, fingerprint(key)):
        return Recorded.MATCHES
    return Recorded.SEALED if record in set(sealed) else Recorded.OTHER


def needs_rows(key: bytes | None, state: Recorded, journal: Journal = Journal.NONE) -> bool:
    """Does the answer depend on the journal holding rows? (Then, and only
    then, the journal's directory is listed: the common case reads three small
    files.) A journal record implies rows."""
    return journal is Journal.NONE and (
        IDENTITY_RULES[(key is not None, state, False)]
        != IDENTITY_RULES[(key is not None, state, True)]
    )


def judge(
    key: bytes | None, state: Recorded, rows: bool, journal: Journal = Journal.NONE
) -> Action | IdentityProblem:
    """Rule 6 where the journal has a record, rule 3 where it has none."""
    if journal is Journal.NONE:
        return IDENTITY_RULES[(key is not None, state, rows)]
    return JOURNAL_RULES[(key is not None, state, journal)]


# ------------------------------------------------------------ the two formats


@dataclass(frozen=True, slots=True)
class SealedKey:
    """One key the identity continues from (rule 4): the key a rotation sealed,
    its fingerprint, and the UTC instant it stopped being the current key. A
    key the operator let go (``kexpr identity rotate --old-key-lost``, rule 6)
    has no key: only the fingerprint the journal named, so that the journal
    moves on to the new key; nothing can be deduped under it."""

    key: bytes | None
    fingerprint: str
    sealed_at_utc: str

    @property
    def sealed_day(self) -> dt.date:
        return parse_ts(self.sealed_at_utc).date()


def render_record(fp: str) -> bytes:
    return canonical_json({"fingerprint": fp, "schema": RECORD_SCHEMA}).encode("utf-8")


def parse_record(data: bytes) -> str:
    """The fingerprint a record names; `IdentityRefused` (``record_invalid``)
    for anything but exactly the format."""
    obj = _object(data)
    fp = obj.get("fingerprint")
    if set(obj) != {"fingerprint", "schema"} or obj["schema"] != RECORD_SCHEMA:
        raise IdentityRefused(IdentityProblem.RECORD_INVALID)
    if not isinstance(fp, str) or not _HEX32.fullmatch(fp):
        raise IdentityRefused(IdentityProblem.RECORD_INVALID)
    return fp


def render_sealed(sealed: Sequence[SealedKey]) -> bytes:
    return canonical_json(
        {
            "schema": SEALED_SCHEMA,
            "sealed": [
                {
                    "fingerprint": s.fingerprint,
                    "key": None if s.key is None else s.key.hex(),
                    "sealed_at_utc": s.sealed_at_utc,
                }
                for s in sealed
            ],
        }
    ).encode("utf-8")


def parse_sealed(data: bytes) -> tuple[SealedKey, ...]:
    """The sealed keys, oldest first; `IdentityRefused` (``record_invalid``) for
    anything but exactly the format: each fingerprint its key's (a let-go key's
    is 32 hex beside ``"key": null``), no key or fingerprint twice, at most
    `MAX_SEALED_KEYS`."""
    obj = _object(data)
    entries = obj.get("sealed")
    if set(obj) != {"schema", "sealed"} or obj["schema"] != SEALED_SCHEMA:
        raise IdentityRefused(IdentityProblem.RECORD_INVALID)
    if not isinstance(entries, list) or len(entries) > MAX_SEALED_KEYS:
        raise IdentityRefused(IdentityProblem.RECORD_INVALID)
    out: list[SealedKey] = []
    for e in entries:
        if not isinstance(e, dict) or set(e) != {"fingerprint", "key", "sealed_at_utc"}:
            raise IdentityRefused(IdentityProblem.RECORD_INVALID)
        hexkey, fp, at = e["key"], e["fingerprint"], e["sealed_at_utc"]
        key: bytes | None = None
        if hexkey is not None:
            if not (isinstance(hexkey, str) and _HEX64.fullmatch(hexkey)):
                raise IdentityRefused(IdentityProblem.RECORD_INVALID)
            key = bytes.fromhex(hexkey)
            if fp != fingerprint(key):
                raise IdentityRefused(IdentityProblem.RECORD_INVALID)
        elif not (isinstance(fp, str) and _HEX32.fullmatch(fp)):
            raise IdentityRefused(IdentityProblem.RECORD_INVALID)
        if not isinstance(at, str) or not _timestamp(at):
            raise IdentityRefused(IdentityProblem.RECORD_INVALID)
        if any(s.fingerprint == fp for s in out):
            raise IdentityRefused(IdentityProblem.RECORD_INVALID)
        out.append(SealedKey(key, fp, at))
    return tuple(out)


def sealed_now(key: bytes, now: dt.datetime) -> SealedKey:
    return SealedKey(key, fingerprint(key), format_ts(now))


def let_go_now(fp: str, now: dt.datetime) -> SealedKey:
    """Rule 6: the journal's key, let go by the operator (no key to keep)."""
    if not _HEX32.fullmatch(fp):
        raise ValueError("fingerprint")
    return SealedKey(None, fp, format_ts(now))


def seal_expired(sealed: SealedKey, oldest_segment: dt.date | None) -> bool:
    """Rule 4: may ``sealed`` go? Only once no journal segment (live or
    quarantined) of its sealing day, or the day after it, or any earlier day is
    left: every row attempted under it is then gone (a gateway still running
    across the rotation takes the new key at its next presentation; the day
    after covers a rotation at midnight). The journal's own retention decides,
    not a clock."""
    return oldest_segment is None or oldest_segment > sealed.sealed_day + dt.timedelta(days=1)


def _object(data: bytes) -> dict[str, object]:
    try:
        return read_object(data, max_bytes=MAX_IDENTITY_FILE_BYTES)
    except (StrictJsonError, TypeError) as e:
        raise IdentityRefused(IdentityProblem.RECORD_INVALID) from e


def _timestamp(s: str) -> bool:
    try:
        parse_ts(s)
    except ValueError:
        return False
    return True

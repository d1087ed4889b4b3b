"""The three spool file kinds (design §4). Redacted material only.

- request  ``requests/<request_id>.json``  shim -> worker
- response ``responses/<request_id>.json`` worker -> shim
- report   ``reports/<attempt_id>.json``   shim -> worker

Each is a strict pydantic model (extra keys forbidden, no coercion) serialized as
canonical JSON. Nothing in them can hold a canonical body, an expansion or a
customer value: the only free-text-like field is ``composition``, which is the
model's composition *as validated by the contract* (style lexemes and tokens).
Reading parses each file once: the contract's strict JSON reader (duplicate keys,
NaN, non-NFC strings refused) gives a Python object, which the model validates in
strict Python mode. The two enum-typed fields (a response's ``status``, a
request's ``mode``) take their value by lookup (``strict=False`` on those
fields only): the input is already a JSON string
there, and strict Python mode would refuse any str for an enum, where strict JSON
mode accepted exactly the enum's values. The ``outcome`` fields are ``Literal``s
of `kexpr.spool.outcomes.Outcome` members, which strict Python mode matches by
value. Every other field is strict.

Protocol versions (``spool_version``; docs/upgrade.md). The version names what
the two sides promise each other, so it changes when a promise does:

- ``kexpr-spool-v1``: the release before the attempt lifecycle. Its shim
  *deletes* an accepted response when it reads it, so a missing accepted
  response does not mean the call died; only a report proves what the host did.
- ``kexpr-spool-v2``: the shim leaves an accepted response in place; the
  worker removes it once the attempt's terminal row is durable
  (``kexpr.spool.lifecycle`` rule 3).
- ``kexpr-spool-v3`` (`SPOOL_VERSION`, what this release writes): v2's promises,
  and the request's capsule carries the 128-bit artifact key (32 hex,
  `gateway_shim.identity`). A v1/v2 request carries the whole 64-hex HMAC;
  the key's length is part of the version (`KEY_HEX_FOR_VERSION`), so a request
  whose key does not match its version is malformed. The worker serves a v1/v2
  request's capsule as it is (the old shim judges the model's echo against its
  own 64-hex key) and dedupes it by the first 32 hex, the identity both lengths
  share (`kexpr.spool.journal`).

A v3 request may also carry ``prior_artifact_keys``: the same artifact's key
under each key a rotation sealed (`gateway_shim.identity` rule 4), HMACs only,
so that the worker dedupes on any of them. The field is written only when it
holds a key (an empty list is malformed: one spelling), at most
`MAX_PRIOR_ARTIFACT_KEYS`, each 32 hex, distinct, none the capsule's own, and
never in a v1/v2 request. No version changes for it: a request without the
field is byte for byte what it was, and a worker of an earlier release refuses
one with it (unknown field: ``invalid_request``, no row, no call), so the
promise "dedupe on these too" is never broken silently: it is kept or the
request is refused.

A v3 request of this release also names, for the journal, the fingerprint of
the identity key its artifact key was computed under (``identity_fingerprint``)
and the fingerprints that identity continues from (``earlier_fingerprints``:
keys a rotation sealed, or a key the operator let go), `gateway_shim.identity`
rule 6 and `kexpr.spool._journal_identity`: the worker refuses a request whose
key its journal does not name (``identity_mismatch``: no row, no call). Keyed
hashes only, 32 hex. Each is written only when it holds a value (one
spelling); ``earlier_fingerprints`` only beside ``identity_fingerprint``, at
most `MAX_PRIOR_ARTIFACT_KEYS`, distinct, never the request's own, and neither
in a v1/v2 request. A request without them (an earlier release's shim) is
served as before and never changes the journal's record; a worker of an
earlier release refuses a request with them (``invalid_request``), so the
worker is upgraded first (docs/upgrade.md).

Every model reads all three (`KNOWN_SPOOL_VERSIONS`); the worker answers a
request in the version it was written in, so an old shim can parse its answer. A file
that names a version this release does not know (a newer one) is refused with
`UnknownSpoolVersion`, never read as ours; the worker keeps such a report for
the worker that knows it (`kexpr.worker.reports`).
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, Final, Literal, Self, TypeAlias, TypeVar, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from kexpr.spool.canonical import canonical_json
from kexpr.spool.contract import (
    ARTIFACT_KEY_HEX,
    LEGACY_ARTIFACT_KEY_HEX,
    Capsule,
    Composition,
)
from kexpr.spool.contract._strictjson import StrictJsonError, read_object
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.outcomes import ReportOutcome, ResponseOutcome

SpoolVersion: TypeAlias = Literal["kexpr-spool-v1", "kexpr-spool-v2", "kexpr-spool-v3"]
SPOOL_V1: Final = "kexpr-spool-v1"
SPOOL_V2: Final = "kexpr-spool-v2"
SPOOL_VERSION: Final = "kexpr-spool-v3"
KNOWN_SPOOL_VERSIONS: Final = frozenset(get_args(SpoolVersion))
# The artifact key's length in a request of each version.
KEY_HEX_FOR_VERSION: Final = {
    SPOOL_V1: LEGACY_ARTIFACT_KEY_HEX,
    SPOOL_V2: LEGACY_ARTIFACT_KEY_HEX,
    SPOOL_VERSION: ARTIFACT_KEY_HEX,
}
assert set(KEY_HEX_FOR_VERSION) == KNOWN_SPOOL_VERSIONS
# The most prior keys a request carries: the sealed keys a data root keeps at
# once (`gateway_shim.identity.MAX_SEALED_KEYS`).
MAX_PRIOR_ARTIFACT_KEYS: Final = 8
# A version word of this protocol's shape that this release does not know.
_VERSION_SHAPE: Final = re.compile(r"kexpr-spool-v[0-9]{1,6}")
MAX_MESSAGE_BYTES: Final = 64 * 1024

Hex32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
Timestamp = Annotated[
    str,
    StringConstraints(
        pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$"
    ),
]


class ResponseStatus(enum.StrEnum):
    ACCEPTED = "accepted"
    CANONICAL = "canonical"
    IN_FLIGHT = "in_flight"
    ALREADY_ATTEMPTED = "already_attempted"


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    def to_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json")).encode("utf-8")


# A request's optional fields and their empty value: written only when not empty.
_ABSENT_WHEN_EMPTY: Final[dict[str, object]] = {
    "prior_artifact_keys": [],
    "identity_fingerprint": None,
    "earlier_fingerprints": [],
}


class SpoolRequest(_Strict):
    spool_version: SpoolVersion
    request_id: Hex32
    submitted_at_utc: Timestamp
    deadline_at_utc: Timestamp
    mode: Annotated[SpoolMode, Field(strict=False)]
    capsule: Capsule
    # The artifact's keys under sealed identity keys (module docstring).
    prior_artifact_keys: tuple[Hex32, ...] = ()
    # The key's fingerprint, and those it continues from (module docstring).
    identity_fingerprint: Hex32 | None = None
    earlier_fingerprints: tuple[Hex32, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, value: object) -> object:
        # Written only when it holds a value: a file's explicit empty list is
        # malformed (a file's null is refused by `parse_request`: in Python,
        # None is also how a caller says "absent").
        if isinstance(value, dict):
            for name, empty in _ABSENT_WHEN_EMPTY.items():
                if empty == [] and value.get(name) == []:
                    raise ValueError(f"{name} empty")
        return value

    @field_validator("capsule", mode="before")
    @classmethod
    def _capsule(cls, value: object) -> object:
        # The contract validates its own documents (JSON arrays -> tuples, every
        # capsule rule); a CapsuleError is a ValueError, so it fails this model.
        return value if isinstance(value, Capsule) else Capsule.from_object(value)

    @field_validator("prior_artifact_keys", "earlier_fingerprints", mode="before")
    @classmethod
    def _prior_tuple(cls, value: object) -> object:
        # A JSON array (strict mode takes only a tuple); each item stays strict.
        return tuple(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _key_of_its_version(self) -> Self:
        if len(self.capsule.artifact_key) != KEY_HEX_FOR_VERSION[self.spool_version]:
            raise ValueError("artifact_key length")
        prior = self.prior_artifact_keys
        if prior and (
            self.spool_version != SPOOL_VERSION
            or len(prior) > MAX_PRIOR_ARTIFACT_KEYS
            or len(set(prior)) != len(prior)
            or self.capsule.artifact_key in prior
        ):
            raise ValueError("prior_artifact_keys")
        fp, earlier = self.identity_fingerprint, self.earlier_fingerprints
        if fp is not None and self.spool_version != SPOOL_VERSION:
            raise ValueError("identity_fingerprint")
        if earlier and (
            fp is None
            or len(earlier) > MAX_PRIOR_ARTIFACT_KEYS
            or len(set(earlier)) != len(earlier)
            or fp in earlier
        ):
            raise ValueError("earlier_fingerprints")
        return self

    def to_bytes(self) -> bytes:
        doc = self.model_dump(mode="json")
        for name, empty in _ABSENT_WHEN_EMPTY.items():
            if doc[name] == empty:
                del doc[name]  # one spelling: absent when empty
        return canonical_json(doc).encode("utf-8")

    def dedupe_keys(self) -> tuple[str, ...]:
        """Every key this artifact may have been attempted under: the capsule's,
        then the prior ones (`kexpr.worker.attempt`)."""
        return (self.capsule.artifact_key, *self.prior_artifact_keys)


class SpoolResponse(_Strict):
    spool_version: SpoolVersion
    request_id: Hex32
    attempt_id: Hex32 | None
    status: Annotated[ResponseStatus, Field(strict=False)]
    outcome: ResponseOutcome
    composition: Composition | None

    @field_validator("composition", mode="before")
    @classmethod
    def _composition(cls, value: object) -> object:
        if value is None or isinstance(value, Composition):
            return value
        if not isinstance(value, dict):
            raise ValueError("composition")
        slots = value.get("slots")
        if isinstance(slots, list):
            value = dict(value, slots=tuple(_tupled_slot(s) for s in slots))
        return Composition.model_validate(value)


class SpoolReport(_Strict):
    spool_version: SpoolVersion
    attempt_id: Hex32
    outcome: ReportOutcome


def _tupled_slot(slot: object) -> object:
    if not isinstance(slot, dict):
        return slot
    return {k: tuple(v) if isinstance(v, list) else v for k, v in slot.items()}


_Message = TypeVar("_Message", bound=_Strict)


class MessageError(ValueError):
    """A spool file that is not exactly one of our messages. No content."""


class UnknownSpoolVersion(MessageError):
    """A spool file of a protocol version this release does not know (a newer
    one): not ours to read, and not garbage either. No content."""


def _load(data: bytes) -> dict[str, object]:
    try:
        obj = read_object(data, max_bytes=MAX_MESSAGE_BYTES)
    except (StrictJsonError, TypeError) as e:
        raise MessageError("malformed") from e
    version = obj.get("spool_version")
    if (
        isinstance(version, str)
        and version not in KNOWN_SPOOL_VERSIONS
        and _VERSION_SHAPE.fullmatch(version)
    ):
        raise UnknownSpoolVersion("spool_version")
    return obj


def _parse(model: type[_Message], data: bytes) -> _Message:
    obj = _load(data)
    try:
        return model.model_validate(obj)
    except ValueError as e:
        raise MessageError("schema") from e


def parse_request(data: bytes) -> SpoolRequest:
    obj = _load(data)
    # One spelling: an optional field is absent when empty, never null or [].
    if any(name in obj and obj[name] == empty for name, empty in _ABSENT_WHEN_EMPTY.items()):
        raise MessageError("schema")
    try:
        return SpoolRequest.model_validate(obj)
    except ValueError as e:
        raise MessageError("schema") from e


def parse_response(data: bytes) -> SpoolResponse:
    resp = _parse(SpoolResponse, data)
    if (resp.status is ResponseStatus.ACCEPTED) != (resp.composition is not None):
        raise MessageError("schema")
    return resp


def parse_report(data: bytes) -> SpoolReport:
    return _parse(SpoolReport, data)

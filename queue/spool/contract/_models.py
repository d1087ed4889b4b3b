"""Capsule and response models (design §6). An invalid capsule cannot exist.

Rules for this module:

Rule 1: every model is pydantic v2 with `strict=True, frozen=True, extra="forbid"`: exact
        key sets, no coercion (a bool is not a list, a number is not a string, null is
        nothing), immutable once built.
Rule 2: `SlotPolicy` and `Capsule` validate on construction against the manifest, so a
        value of either type is always a legal capsule. Keyword construction raises
        `CapsuleError(reason)`; `from_json` / `from_object` raise `CapsuleError` too;
        pydantic's own `model_validate[_json]` raise a `ValidationError` (also a
        ValueError) that wraps it. `model_construct` and `model_copy(update=...)` skip
        validation by design: never use them on these models.
        The capsule rules, in check order (the first failing one is the reason):
          1. schema version · surface · artifact key (32 lower-case hex, or 64 from a
             shim before the 128-bit key)
          2. each slot, in slot order: known slot id · well-formed tokens · 1-3
             tokens · the ID set is exactly one manifest branch (no duplicates) ·
             predicates/actions are the branch's P_/A_ IDs in branch order · tokens
             are `tokens_for(branch)` (P and A numbered 01.. per family, interleaved
             in branch order) · limits are the manifest's
          3. at least one slot · unique slot ids · every slot belongs to the surface
        A capsule with a type error anywhere (wrong JSON type, missing or extra key)
        is `schema_mismatch`, whatever else is wrong with it.
Rule 3: the response models (`ResponseSlot`, `Composition`) only type the document. The
        contract rules against a capsule live in `_judge`, so each rule gets a precise
        reason instead of a generic validation error.
Rule 4: models hide their input in error messages (`hide_input_in_errors`): a
        validation error of a response would otherwise quote model output.
Rule 5: JSON arrays arrive as lists but strict pydantic only accepts tuples in Python
        mode; `_tupled` converts lists to tuples *only at the schema's own array
        positions*, so a list anywhere else is still a type error.
Rule 6: `slot_policy` returns one shared (frozen) `SlotPolicy` per slot id and manifest
        branch: it validates the slot id and the ID set against the manifest on every
        call, and builds (and validates) the policy once. The cache is keyed only by
        those manifest values, after they are checked, so it holds at most one entry
        per (slot id, branch) the manifest defines; never by anything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final, NoReturn, Self

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ..canonical import canonical_json
from ._strictjson import StrictJsonError, read_object
from .fit import slot_styleable
from .manifest import (
    ACTION_PREFIX,
    PREDICATE_PREFIX,
    SURFACES,
    TOKEN_RE,
    SlotManifest,
    manifest_for,
    tokens_for,
)
from .reasons import CAPSULE_REASON_FOR_READER, CapsuleReason

CONTRACT_VERSION: Final = "korean-expression-v4"

# 32 lower-case hex (128 bits of the HMAC, what this release's shim writes) or
# 64 (the whole HMAC, what a shim before it wrote: a v1/v2 spool request, served
# during an upgrade; `kexpr.spool.messages` pairs each length with its versions).
ARTIFACT_KEY_HEX: Final = 32
LEGACY_ARTIFACT_KEY_HEX: Final = 64
_ARTIFACT_KEY_RE: Final = re.compile(r"[0-9a-f]{32}(?:[0-9a-f]{32})?")
_CAPSULE_RULE: Final = "kexpr_capsule_rule"  # pydantic error type of a capsule rule
_MAX_TOKENS: Final = 3

_POLICY_ARRAYS: Final = (
    "allowed_predicate_ids",
    "allowed_action_ids",
    "required_placeholder_tokens",
)
_RESPONSE_SLOT_ARRAYS: Final = ("predicate_ids", "action_ids", "placeholder_tokens")


class CapsuleError(ValueError):
    """A capsule (or slot policy) that cannot exist. The message is the reason code only."""

    def __init__(self, reason: CapsuleReason) -> None:
        super().__init__(f"invalid capsule: {reason.value}")
        self.reason = reason


def _fail(reason: CapsuleReason) -> NoReturn:
    raise PydanticCustomError(_CAPSULE_RULE, "capsule rule: {reason}", {"reason": reason.value})


def capsule_reason(error: ValidationError) -> CapsuleReason:
    """The CapsuleReason for a failed capsule validation (Rule 2)."""
    reasons: list[CapsuleReason] = []
    for detail in error.errors(include_url=False, include_input=False):
        ctx = detail.get("ctx") or {}
        if detail["type"] == _CAPSULE_RULE:
            reasons.append(CapsuleReason(ctx["reason"]))
        elif detail["type"] == "value_error" and isinstance(ctx.get("error"), CapsuleError):
            # pydantic runs a model's custom __init__ for nested and model_validate
            # input too, so a part's CapsuleError arrives wrapped as a value_error.
            reasons.append(ctx["error"].reason)
        else:
            reasons.append(CapsuleReason.SCHEMA_MISMATCH)
    if not reasons or CapsuleReason.SCHEMA_MISMATCH in reasons:
        return CapsuleReason.SCHEMA_MISMATCH
    return reasons[0]


def _tupled(obj: object, keys: Iterable[str]) -> object:
    # Rule 5: lists become tuples only under `keys` of a dict.
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    for key in keys:
        value = out.get(key)
        if isinstance(value, list):
            out[key] = tuple(value)
    return out


def _tupled_document(obj: object, slot_arrays: tuple[str, ...]) -> object:
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    slots = out.get("slots")
    if isinstance(slots, list):
        out["slots"] = tuple(_tupled(slot, slot_arrays) for slot in slots)
    return out


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", hide_input_in_errors=True)


class _ValidatedCapsulePart(_Strict):
    # Keyword construction reports a capsule rule as CapsuleError (Rule 2).
    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:
            raise CapsuleError(capsule_reason(e)) from e


def _branch_of(row: SlotManifest, ids: tuple[str, ...]) -> tuple[str, ...] | None:
    if len(set(ids)) != len(ids):
        return None
    wanted = frozenset(ids)
    for branch in row.branches:
        if frozenset(branch) == wanted:
            return branch
    # manifest Rule 5: a one-ID branch of the row's open family (dual slots).
    return row.open_branch(ids)


class SlotPolicy(_ValidatedCapsulePart):
    """One slot of a capsule: the IDs issued to it, their tokens and its limits."""

    slot_id: str
    allowed_predicate_ids: tuple[str, ...]
    allowed_action_ids: tuple[str, ...]
    required_placeholder_tokens: tuple[str, ...]
    max_generated_chars: int
    max_style_lexemes: int

    @model_validator(mode="after")
    def _manifest_rules(self) -> Self:
        row = manifest_for(self.slot_id)
        if row is None:
            _fail(CapsuleReason.UNKNOWN_SLOT_ID)
        tokens = self.required_placeholder_tokens
        if any(TOKEN_RE.fullmatch(t) is None for t in tokens):
            _fail(CapsuleReason.MALFORMED_TOKEN)
        if not 1 <= len(tokens) <= _MAX_TOKENS:
            _fail(CapsuleReason.TOKEN_COUNT)
        branch = _branch_of(row, self.allowed_predicate_ids + self.allowed_action_ids)
        if branch is None:
            _fail(CapsuleReason.IDS_NOT_IN_MANIFEST)
        if self.allowed_predicate_ids != tuple(
            i for i in branch if i.startswith(PREDICATE_PREFIX)
        ) or self.allowed_action_ids != tuple(i for i in branch if i.startswith(ACTION_PREFIX)):
            _fail(CapsuleReason.IDS_MISPLACED)
        if tokens != tokens_for(branch):
            _fail(CapsuleReason.TOKEN_SEQUENCE)
        if (self.max_generated_chars, self.max_style_lexemes) != (
            row.max_generated_chars,
            row.max_style_lexemes,
        ):
            _fail(CapsuleReason.LIMITS_MISMATCH)
        return self

    @property
    def semantic_ids(self) -> tuple[str, ...]:
        """The slot's IDs in token order: `semantic_ids[i]` is what token i stands for."""
        predicates = iter(self.allowed_predicate_ids)
        actions = iter(self.allowed_action_ids)
        return tuple(
            next(predicates) if token.startswith("[[P:") else next(actions)
            for token in self.required_placeholder_tokens
        )


class Capsule(_ValidatedCapsulePart):
    """The redacted request: the only thing the model sees (design §6)."""

    schema_version: str
    surface: str
    artifact_key: str
    slots: tuple[SlotPolicy, ...]

    @field_validator("schema_version")
    @classmethod
    def _schema_version(cls, value: str) -> str:
        if value != CONTRACT_VERSION:
            _fail(CapsuleReason.UNSUPPORTED_SCHEMA_VERSION)
        return value

    @field_validator("surface")
    @classmethod
    def _surface(cls, value: str) -> str:
        if value not in SURFACES:
            _fail(CapsuleReason.UNKNOWN_SURFACE)
        return value

    @field_validator("artifact_key")
    @classmethod
    def _artifact_key(cls, value: str) -> str:
        if _ARTIFACT_KEY_RE.fullmatch(value) is None:
            _fail(CapsuleReason.MALFORMED_ARTIFACT_KEY)
        return value

    @model_validator(mode="after")
    def _slots(self) -> Self:
        if not self.slots:
            _fail(CapsuleReason.NO_SLOTS)
        slot_ids = [s.slot_id for s in self.slots]
        if len(set(slot_ids)) != len(slot_ids):
            _fail(CapsuleReason.DUPLICATE_SLOT_ID)
        for slot_id in slot_ids:
            row = manifest_for(slot_id)
            if row is None or row.surface != self.surface:
                _fail(CapsuleReason.SLOT_SURFACE_MISMATCH)
        # design §6.1: a slot no answer can style is never asked.
        if not all(slot_styleable(s.slot_id, s.semantic_ids) for s in self.slots):
            _fail(CapsuleReason.SLOT_UNSTYLEABLE)
        return self

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, `ensure_ascii=False`, separators `,` `:`)."""
        return canonical_json(self.model_dump(mode="json"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Capsule:
        """Parse with the responses' strict reader, then validate. Raises CapsuleError."""
        try:
            obj = read_object(text)
        except StrictJsonError as e:
            raise CapsuleError(CAPSULE_REASON_FOR_READER[e.reason]) from e
        return cls.from_object(obj)

    @classmethod
    def from_object(cls, obj: object) -> Capsule:
        """Validate an already-decoded JSON object (lists allowed). Raises CapsuleError."""
        if not isinstance(obj, dict):
            raise CapsuleError(CapsuleReason.NOT_OBJECT)
        try:
            return cls.model_validate(_tupled_document(obj, _POLICY_ARRAYS))
        except ValidationError as e:
            raise CapsuleError(capsule_reason(e)) from e


class ResponseSlot(_Strict):
    """One slot of the model's response, typed only (Rule 3)."""

    slot_id: str
    predicate_ids: tuple[str, ...]
    action_ids: tuple[str, ...]
    placeholder_tokens: tuple[str, ...]
    generated_ko: str


class Composition(_Strict):
    """The model's response document, typed only (Rule 3)."""

    schema_version: str
    surface: str
    artifact_key: str
    slots: tuple[ResponseSlot, ...]

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, `ensure_ascii=False`, separators `,` `:`)."""
        return canonical_json(self.model_dump(mode="json"))


def composition_from_object(obj: dict[str, object]) -> Composition:
    """Strict typing of a decoded response object; raises ValidationError."""
    return Composition.model_validate(_tupled_document(obj, _RESPONSE_SLOT_ARRAYS))


def slot_policy(slot_id: str, ids: Sequence[str]) -> SlotPolicy:
    """The slot policy for `slot_id` issuing `ids`, all derived from the manifest.

    `ids` must be exactly one branch of the slot's manifest row, as a set (no duplicates,
    any order); the policy lists them in canonical branch order with the manifest's
    limits. Raises CapsuleError (a ValueError) otherwise.
    """
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of semantic IDs, not a str")
    row = manifest_for(slot_id)
    if row is None:
        raise CapsuleError(CapsuleReason.UNKNOWN_SLOT_ID)
    branch = _branch_of(row, tuple(ids))
    if branch is None:
        raise CapsuleError(CapsuleReason.IDS_NOT_IN_MANIFEST)
    # Rule 6: the policy is a function of (slot id, branch) alone, both manifest values.
    key = (slot_id, branch)
    # An open family's operator branch is not cached: the cache stays bounded by
    # the manifest's own branches.
    cacheable = type(slot_id) is str and branch in row.branches
    policy = _SLOT_POLICIES.get(key) if cacheable else None
    if policy is None:
        policy = SlotPolicy(
            slot_id=slot_id,
            allowed_predicate_ids=tuple(i for i in branch if i.startswith(PREDICATE_PREFIX)),
            allowed_action_ids=tuple(i for i in branch if i.startswith(ACTION_PREFIX)),
            required_placeholder_tokens=tokens_for(branch),
            max_generated_chars=row.max_generated_chars,
            max_style_lexemes=row.max_style_lexemes,
        )
        if cacheable:
            _SLOT_POLICIES[key] = policy
    return policy


# Rule 6. Bounded by the manifest: one entry per (slot id, branch) it defines.
_SLOT_POLICIES: Final[dict[tuple[str, tuple[str, ...]], SlotPolicy]] = {}

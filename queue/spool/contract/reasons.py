"""Verdicts and reason codes: the only things the contract ever says about content.

Rules for this module (design §6):

Rule 1: a verdict carries an enum reason, never free text and never content. Nothing in
        this package formats a character of the judged document into a message that
        leaves it.
Rule 2: every `Reason` belongs to exactly one `Verdict` (`REASON_VERDICT` is total and
        checked at import). `accepted` has no reason.
Rule 3: the enum is fixed. Adding, renaming or re-homing a code is a reviewed change:
        the journal, telemetry and operators' dashboards count these strings.

Verdict tree::

    accepted                      (reason None)
    invalid_response              not a single, well-typed object of the response schema
        not_utf8 · too_large · bom · duplicate_key · non_finite_number · malformed_json
        not_object · not_nfc · forbidden_character · schema_mismatch
    validation_rejected           well typed, but breaks a contract rule
        echo:     schema_version_mismatch · surface_mismatch · artifact_key_mismatch
                  slot_mismatch · predicate_ids_mismatch · action_ids_mismatch
                  placeholder_tokens_mismatch
        style:    see `kexpr.spool.contract._grammar` (precedence documented there)
        meaning:  stacked_style · style_misfit (`kexpr.spool.contract.fit`)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final


class Verdict(enum.StrEnum):
    ACCEPTED = "accepted"
    INVALID_RESPONSE = "invalid_response"
    VALIDATION_REJECTED = "validation_rejected"


class Reason(enum.StrEnum):
    # -- invalid_response: the strict reader, in parse order (design §6) ----------------
    NOT_UTF8 = "not_utf8"
    TOO_LARGE = "too_large"
    BOM = "bom"
    DUPLICATE_KEY = "duplicate_key"
    NON_FINITE_NUMBER = "non_finite_number"
    MALFORMED_JSON = "malformed_json"
    NOT_OBJECT = "not_object"
    NOT_NFC = "not_nfc"
    FORBIDDEN_CHARACTER = "forbidden_character"
    SCHEMA_MISMATCH = "schema_mismatch"

    # -- validation_rejected: echo rules, in check order ------------------------------
    SCHEMA_VERSION_MISMATCH = "schema_version_mismatch"
    SURFACE_MISMATCH = "surface_mismatch"
    ARTIFACT_KEY_MISMATCH = "artifact_key_mismatch"
    SLOT_MISMATCH = "slot_mismatch"
    PREDICATE_IDS_MISMATCH = "predicate_ids_mismatch"
    ACTION_IDS_MISMATCH = "action_ids_mismatch"
    PLACEHOLDER_TOKENS_MISMATCH = "placeholder_tokens_mismatch"

    # -- validation_rejected: generated_ko, in precedence order (see _grammar.py) -----
    TOO_LONG = "too_long"
    DISALLOWED_WHITESPACE = "disallowed_whitespace"
    CONTROL_CHARACTER = "control_character"
    MALFORMED_TOKEN = "malformed_token"
    BRACKET = "bracket"
    QUOTE = "quote"
    URL = "url"
    LATIN = "latin"
    DIGIT = "digit"
    NUMBER_WORD = "number_word"
    LAYOUT_SYNTAX = "layout_syntax"
    ARITHMETIC_SYMBOL = "arithmetic_symbol"
    UNIT_OR_DATE = "unit_or_date"
    EMOJI = "emoji"
    EVIDENTIAL_CLAIM = "evidential_claim"
    FORBIDDEN_VOCABULARY = "forbidden_vocabulary"
    NEGATION_OR_MODALITY = "negation_or_modality"
    DISALLOWED_CHARACTER = "disallowed_character"
    UNKNOWN_WORD = "unknown_word"
    TOKEN_UNISSUED = "token_unissued"
    TOKEN_DUPLICATE = "token_duplicate"
    TOKEN_ORDER = "token_order"
    TOKEN_MISSING = "token_missing"
    GRAMMAR = "grammar"
    NO_STYLE_LEXEME = "no_style_lexeme"
    TOO_MANY_LEXEMES = "too_many_lexemes"
    # -- validation_rejected: the fit table (kexpr.spool.contract.fit) -----------------
    STACKED_STYLE = "stacked_style"
    STYLE_MISFIT = "style_misfit"


# The strict reader's refusals (the invalid_response verdict) are `Reason`'s
# first block, in parse order, ending at SCHEMA_MISMATCH: declared once there,
# everything below is derived from that block.
_MEMBERS: Final = tuple(Reason)
READER_REASONS: Final[tuple[Reason, ...]] = _MEMBERS[: _MEMBERS.index(Reason.SCHEMA_MISMATCH) + 1]
_INVALID_RESPONSE: Final = frozenset(READER_REASONS)

REASON_VERDICT: Final[Mapping[Reason, Verdict]] = MappingProxyType(
    {
        reason: (
            Verdict.INVALID_RESPONSE if reason in _INVALID_RESPONSE else Verdict.VALIDATION_REJECTED
        )
        for reason in Reason
    }
)


class CapsuleReason(enum.StrEnum):
    """Why a capsule (or one of its slot policies) cannot exist.

    The first ten mirror the strict reader's `Reason`s (`Capsule.from_json` uses the same
    reader as responses); the rest are the capsule rules of design §6 and the manifest.
    """

    # The strict reader's `READER_REASONS`, same names, values and order. Spelled
    # here as members (an enum cannot extend another, and a functional enum would
    # hide the names from the type checker); `_check_tables` holds the two equal.
    NOT_UTF8 = "not_utf8"
    TOO_LARGE = "too_large"
    BOM = "bom"
    DUPLICATE_KEY = "duplicate_key"
    NON_FINITE_NUMBER = "non_finite_number"
    MALFORMED_JSON = "malformed_json"
    NOT_OBJECT = "not_object"
    NOT_NFC = "not_nfc"
    FORBIDDEN_CHARACTER = "forbidden_character"
    SCHEMA_MISMATCH = "schema_mismatch"
    # capsule rules
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    UNKNOWN_SURFACE = "unknown_surface"
    MALFORMED_ARTIFACT_KEY = "malformed_artifact_key"
    NO_SLOTS = "no_slots"
    DUPLICATE_SLOT_ID = "duplicate_slot_id"
    UNKNOWN_SLOT_ID = "unknown_slot_id"
    SLOT_SURFACE_MISMATCH = "slot_surface_mismatch"
    MALFORMED_TOKEN = "malformed_token"
    TOKEN_COUNT = "token_count"
    TOKEN_SEQUENCE = "token_sequence"
    IDS_NOT_IN_MANIFEST = "ids_not_in_manifest"
    IDS_MISPLACED = "ids_misplaced"
    LIMITS_MISMATCH = "limits_mismatch"
    # No sentence of the slot may take a style word (the fit table, design §6.1):
    # no answer to it can be accepted, so it is never asked.
    SLOT_UNSTYLEABLE = "slot_unstyleable"


def _check_tables() -> None:
    # Rule 2, checked once at import: a half-edited enum fails loudly, not at runtime.
    if set(REASON_VERDICT) != set(Reason):
        raise AssertionError("REASON_VERDICT must map every Reason")
    mirrored = tuple((c.name, c.value) for c in CapsuleReason)[: len(READER_REASONS)]
    if mirrored != tuple((r.name, r.value) for r in READER_REASONS):
        raise AssertionError("CapsuleReason must mirror the strict reader's reasons")


_check_tables()


# The strict reader's refusals as capsule reasons (`Capsule.from_json` reads a
# capsule with the responses' reader): each to its namesake, total over the
# reader's reasons.
CAPSULE_REASON_FOR_READER: Final[Mapping[Reason, CapsuleReason]] = MappingProxyType(
    {r: CapsuleReason(r.value) for r in READER_REASONS}
)

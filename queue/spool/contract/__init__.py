"""kexpr.spool.contract — the pure Korean expression contract (design §6).

Capsule and response models, the strict JSON reader, the style grammar, the lexicon and
the forbidden vocabulary, and the per-slot semantic manifest. No I/O, no clock, no
randomness: values in, values out, so every rule is testable without a process.
"""

from __future__ import annotations

from ._grammar import check_generated, check_grammar
from ._judge import Judgement, judge
from ._models import (
    ARTIFACT_KEY_HEX,
    CONTRACT_VERSION,
    LEGACY_ARTIFACT_KEY_HEX,
    Capsule,
    CapsuleError,
    Composition,
    ResponseSlot,
    SlotPolicy,
    slot_policy,
)
from ._strictjson import MAX_NESTING, MAX_RESPONSE_BYTES
from .lexicon import SAFE_STYLE_LEXEMES
from .manifest import (
    ALL_SEMANTIC_IDS,
    MANIFEST,
    SURFACES,
    SlotManifest,
    manifest_for,
    slot_ids_for_surface,
    tokens_for,
)
from .reasons import REASON_VERDICT, CapsuleReason, Reason, Verdict

__all__ = [
    "ALL_SEMANTIC_IDS",
    "ARTIFACT_KEY_HEX",
    "CONTRACT_VERSION",
    "LEGACY_ARTIFACT_KEY_HEX",
    "MANIFEST",
    "MAX_NESTING",
    "MAX_RESPONSE_BYTES",
    "REASON_VERDICT",
    "SAFE_STYLE_LEXEMES",
    "SURFACES",
    "Capsule",
    "CapsuleError",
    "CapsuleReason",
    "Composition",
    "Judgement",
    "Reason",
    "ResponseSlot",
    "SlotManifest",
    "SlotPolicy",
    "Verdict",
    "check_generated",
    "check_grammar",
    "judge",
    "manifest_for",
    "slot_ids_for_surface",
    "slot_policy",
    "tokens_for",
]

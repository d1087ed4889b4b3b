"""Pin the public API of spool.contract (httpx's test_exported_members habit)."""

from __future__ import annotations

import inspect
from typing import get_type_hints

from kexpr.spool import contract
from kexpr.spool.contract import (
    CONTRACT_VERSION,
    MAX_RESPONSE_BYTES,
    REASON_VERDICT,
    SURFACES,
    Capsule,
    CapsuleError,
    Composition,
    Judgement,
    Reason,
    ResponseSlot,
    SlotPolicy,
    Verdict,
    check_generated,
    check_grammar,
    judge,
    slot_policy,
    tokens_for,
)


def test_exported_members() -> None:
    assert sorted(contract.__all__) == sorted(
        [
            "ALL_SEMANTIC_IDS", "ARTIFACT_KEY_HEX", "CONTRACT_VERSION", "LEGACY_ARTIFACT_KEY_HEX", "MANIFEST", "MAX_NESTING", "MAX_RESPONSE_BYTES",
            "REASON_VERDICT", "SAFE_STYLE_LEXEMES", "SURFACES", "Capsule", "CapsuleError",
            "CapsuleReason", "Composition", "Judgement", "Reason", "ResponseSlot",
            "SlotManifest", "SlotPolicy", "Verdict", "check_generated", "check_grammar", "judge",
            "manifest_for", "slot_ids_for_surface", "slot_policy", "tokens_for",
        ]
    )  # fmt: skip
    for name in contract.__all__:
        assert hasattr(contract, name)


def test_constants() -> None:
    assert CONTRACT_VERSION == "korean-expression-v4"
    assert SURFACES == (
        "daily.v1",
        "weekly.v1",
        "adaptive.dualcoachtest.card.v1",
        "adaptive.physique.card.v1",
    )
    assert MAX_RESPONSE_BYTES == 16 * 1024


def test_verdicts_and_reasons() -> None:
    assert [v.value for v in Verdict] == ["accepted", "invalid_response", "validation_rejected"]
    assert set(REASON_VERDICT) == set(Reason)
    assert Verdict.ACCEPTED not in set(REASON_VERDICT.values())
    assert all(r.value == r.name.lower() for r in Reason)
    invalid = sorted(r.value for r, v in REASON_VERDICT.items() if v is Verdict.INVALID_RESPONSE)
    assert invalid == sorted(
        [
            "not_utf8", "too_large", "bom", "duplicate_key", "non_finite_number",
            "malformed_json", "not_object", "not_nfc", "forbidden_character",
            "schema_mismatch",
        ]
    )  # fmt: skip


def test_model_fields() -> None:
    assert list(SlotPolicy.model_fields) == [
        "slot_id",
        "allowed_predicate_ids",
        "allowed_action_ids",
        "required_placeholder_tokens",
        "max_generated_chars",
        "max_style_lexemes",
    ]
    assert list(Capsule.model_fields) == ["schema_version", "surface", "artifact_key", "slots"]
    assert list(Composition.model_fields) == ["schema_version", "surface", "artifact_key", "slots"]
    assert list(ResponseSlot.model_fields) == [
        "slot_id",
        "predicate_ids",
        "action_ids",
        "placeholder_tokens",
        "generated_ko",
    ]
    for model in (SlotPolicy, Capsule, Composition, ResponseSlot):
        config = model.model_config
        assert (config.get("strict"), config.get("frozen"), config.get("extra")) == (
            True,
            True,
            "forbid",
        )
    assert issubclass(CapsuleError, ValueError)


def test_signatures() -> None:
    assert list(inspect.signature(judge).parameters) == ["capsule", "content"]
    assert list(inspect.signature(check_generated).parameters) == ["slot", "generated_ko"]
    assert list(inspect.signature(check_grammar).parameters) == ["slot", "generated_ko"]
    assert list(inspect.signature(tokens_for).parameters) == ["ids"]
    assert list(inspect.signature(slot_policy).parameters) == ["slot_id", "ids"]
    assert get_type_hints(judge)["return"] is Judgement
    assert list(inspect.signature(Judgement).parameters) == ["verdict", "reason", "composition"]
    assert Judgement.__slots__ == ("verdict", "reason", "composition")

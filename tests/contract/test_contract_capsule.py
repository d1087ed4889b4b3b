"""Capsule / SlotPolicy: an invalid capsule cannot exist. Plus the manifest, tokens_for
and slot_policy."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from contract_support import KEY, LOCKED_POLICIES, OTHER_KEY, STYLED, STYLED_SLOT, all_policies

from kexpr.spool.contract import (
    ALL_SEMANTIC_IDS,
    CONTRACT_VERSION,
    MANIFEST,
    SURFACES,
    Capsule,
    CapsuleError,
    CapsuleReason,
    SlotPolicy,
    manifest_for,
    slot_ids_for_surface,
    slot_policy,
    tokens_for,
)
from kexpr.spool.contract.reasons import (
    CAPSULE_REASON_FOR_READER,
    REASON_VERDICT,
    Reason,
    Verdict,
)

R = CapsuleReason


def _base() -> dict[str, Any]:
    """The valid capsule (the styled weekly one) as a JSON object (lists, as JSON gives
    them). Its one slot is the I2 interpretation: [[P:01]] [[A:01]]."""
    obj: dict[str, Any] = json.loads(STYLED.to_json())
    return obj


def _with(path: tuple[Any, ...], value: object) -> dict[str, Any]:
    d = _base()
    target: Any = d
    for step in path[:-1]:
        target = target[step]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return d


_DELETE = object()
S0 = ("slots", 0)


def _slot(**fields: object) -> dict[str, Any]:
    d = _base()
    d["slots"][0].update(fields)
    return d


def _policy_json(policy: SlotPolicy) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(policy.model_dump_json())
    return obj


def _daily_slot_in_weekly() -> dict[str, Any]:
    d = _base()
    d["slots"].append(_policy_json(LOCKED_POLICIES["daily"][1]))
    return d


def _locked(surface: str, *policies: SlotPolicy) -> dict[str, Any]:
    # A capsule asking for slots the fit table locks (design §6.1): every policy is
    # valid, the capsule is not.
    return _base() | {"surface": surface, "slots": [_policy_json(p) for p in policies]}


def _dual_with(slot_id: str, semantic_id: str) -> dict[str, Any]:
    review = slot_policy("adaptive.dual.review.2", ["P_DUAL_REASON_LATEST"])
    return _locked("adaptive.dualcoachtest.card.v1", slot_policy(slot_id, [semantic_id]), review)


def _beside_the_styled(locked: SlotPolicy) -> dict[str, Any]:
    d = _base()
    d["slots"].append(_policy_json(locked))
    return d


def _duplicate_slot() -> dict[str, Any]:
    d = _base()
    d["slots"].append(copy.deepcopy(d["slots"][0]))
    return d


CAPSULE_FAILURES: list[tuple[str, dict[str, Any], CapsuleReason]] = [
    # capsule fields
    ("old schema version", _with(("schema_version",), "korean-expression-v3"), R.UNSUPPORTED_SCHEMA_VERSION),
    ("unknown surface", _with(("surface",), "monthly.v1"), R.UNKNOWN_SURFACE),
    ("surface with a suffix", _with(("surface",), "weekly.v1 "), R.UNKNOWN_SURFACE),
    ("upper-case artifact key", _with(("artifact_key",), KEY.upper()), R.MALFORMED_ARTIFACT_KEY),
    ("short artifact key", _with(("artifact_key",), KEY[:-1]), R.MALFORMED_ARTIFACT_KEY),
    ("long artifact key", _with(("artifact_key",), KEY + "0"), R.MALFORMED_ARTIFACT_KEY),
    ("non-hex artifact key", _with(("artifact_key",), "g" * 64), R.MALFORMED_ARTIFACT_KEY),
    ("plan's placeholder key", _with(("artifact_key",), "opaque-hmac-hex"), R.MALFORMED_ARTIFACT_KEY),
    ("field validators report in field order", _with(("surface",), "x") | {"artifact_key": "x"}, R.UNKNOWN_SURFACE),
    ("no slots", _with(("slots",), []), R.NO_SLOTS),
    ("duplicate slot id", _duplicate_slot(), R.DUPLICATE_SLOT_ID),
    ("slot of another surface", _daily_slot_in_weekly(), R.SLOT_SURFACE_MISMATCH),
    ("dual decision slot", _dual_with("adaptive.dual.judgment", "P_DUAL_DECISION_HOLD"), R.SLOT_UNSTYLEABLE),
    ("first review line", _dual_with("adaptive.dual.review.1", "P_DUAL_REASON_EDIT"), R.SLOT_UNSTYLEABLE),
    ("operator decision slot", _dual_with("adaptive.dual.judgment", "P_DUAL_DECISION_OPERATOR"), R.SLOT_UNSTYLEABLE),
    *((f"locked slot: {name}", _locked(surface, policy), R.SLOT_UNSTYLEABLE) for name, (surface, policy) in LOCKED_POLICIES.items()),
    ("weekly I1", _locked("weekly.v1", slot_policy("weekly.interpretation", ["P_WEEKLY_TREND_UNAVAILABLE", "A_WEEKLY_RECHECK_AFTER_RECORD"])), R.SLOT_UNSTYLEABLE),
    ("weekly I4", _locked("weekly.v1", slot_policy("weekly.interpretation", ["P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT"])), R.SLOT_UNSTYLEABLE),
    ("rationale beside the styled slot", _beside_the_styled(slot_policy("weekly.rationale", ["A_WEEKLY_KEEP_BASELINE"])), R.SLOT_UNSTYLEABLE),
    ("slot surface beats unstyleable", _beside_the_styled(LOCKED_POLICIES["daily"][1]) | {"surface": "daily.v1"}, R.SLOT_SURFACE_MISMATCH),
    # slot rules
    ("unknown slot id", _with((*S0, "slot_id"), "weekly.summary"), R.UNKNOWN_SLOT_ID),
    ("review slot 0", _with((*S0, "slot_id"), "adaptive.dual.review.0"), R.UNKNOWN_SLOT_ID),
    ("review slot 10", _with((*S0, "slot_id"), "adaptive.dual.review.10"), R.UNKNOWN_SLOT_ID),
    ("review slot pattern itself", _with((*S0, "slot_id"), "adaptive.dual.review.N"), R.UNKNOWN_SLOT_ID),
    ("one-digit token", _slot(required_placeholder_tokens=["[[P:1]]", "[[A:01]]"]), R.MALFORMED_TOKEN),
    ("lower-case token", _slot(required_placeholder_tokens=["[[P:01]]", "[[a:01]]"]), R.MALFORMED_TOKEN),
    ("token 00", _slot(required_placeholder_tokens=["[[P:00]]", "[[A:01]]"]), R.MALFORMED_TOKEN),
    ("token with whitespace", _slot(required_placeholder_tokens=["[[P:01]] ", "[[A:01]]"]), R.MALFORMED_TOKEN),
    ("no tokens", _slot(required_placeholder_tokens=[]), R.TOKEN_COUNT),
    ("four tokens", _slot(required_placeholder_tokens=["[[P:01]]", "[[A:01]]", "[[P:02]]", "[[A:02]]"]), R.TOKEN_COUNT),
    ("IDs of two branches", _slot(allowed_predicate_ids=["P_WEEKLY_IN_GOAL", "P_WEEKLY_TREND_OBSERVED"]), R.IDS_NOT_IN_MANIFEST),
    ("unknown ID", _slot(allowed_predicate_ids=["P_WEEKLY_GREAT"]), R.IDS_NOT_IN_MANIFEST),
    ("partial branch", _slot(allowed_action_ids=[], required_placeholder_tokens=["[[P:01]]"]), R.IDS_NOT_IN_MANIFEST),
    ("duplicate ID", _slot(allowed_predicate_ids=["P_WEEKLY_TREND_OBSERVED", "P_WEEKLY_TREND_OBSERVED"]), R.IDS_NOT_IN_MANIFEST),
    ("ID of another slot", _slot(allowed_action_ids=["A_OPERATOR_REVIEW_DECISION"]), R.IDS_NOT_IN_MANIFEST),
    ("no IDs", _slot(allowed_predicate_ids=[], allowed_action_ids=[]), R.IDS_NOT_IN_MANIFEST),
    # A slot rule reports before the capsule's own rules, so a locked branch still
    # shows it (I3, the only branch with two predicates).
    ("predicates out of branch order", _slot(allowed_predicate_ids=["P_WEEKLY_KEEP_BASIS", "P_WEEKLY_IN_GOAL"], allowed_action_ids=[], required_placeholder_tokens=["[[P:01]]", "[[P:02]]"]), R.IDS_MISPLACED),
    ("action listed as predicate", _slot(allowed_predicate_ids=["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"], allowed_action_ids=[]), R.IDS_MISPLACED),
    ("predicate listed as action", _slot(allowed_predicate_ids=[], allowed_action_ids=["A_WEEKLY_HOLD_FOR_MISSING_GOAL", "P_WEEKLY_TREND_OBSERVED"]), R.IDS_MISPLACED),
    ("tokens reversed", _slot(required_placeholder_tokens=["[[A:01]]", "[[P:01]]"]), R.TOKEN_SEQUENCE),
    ("token numbers skip", _slot(required_placeholder_tokens=["[[P:01]]", "[[A:02]]"]), R.TOKEN_SEQUENCE),
    ("token repeated", _slot(required_placeholder_tokens=["[[P:01]]", "[[P:01]]"]), R.TOKEN_SEQUENCE),
    ("wrong family", _slot(required_placeholder_tokens=["[[P:01]]", "[[P:02]]"]), R.TOKEN_SEQUENCE),
    ("one token too few", _slot(required_placeholder_tokens=["[[P:01]]"]), R.TOKEN_SEQUENCE),
    ("limits: chars", _slot(max_generated_chars=221), R.LIMITS_MISMATCH),
    ("limits: plan example's 160", _slot(max_generated_chars=160, max_style_lexemes=12), R.LIMITS_MISMATCH),
    ("limits: lexemes", _slot(max_style_lexemes=15), R.LIMITS_MISMATCH),
    ("limits: another row's", _slot(max_generated_chars=144, max_style_lexemes=10), R.LIMITS_MISMATCH),
    # type errors: schema_mismatch whatever else is wrong
    ("bool for an int", _slot(max_generated_chars=True), R.SCHEMA_MISMATCH),
    ("string for an int", _slot(max_generated_chars="220"), R.SCHEMA_MISMATCH),
    ("float for an int", _slot(max_generated_chars=220.0), R.SCHEMA_MISMATCH),
    ("null slot id", _slot(slot_id=None), R.SCHEMA_MISMATCH),
    ("string for a list", _slot(allowed_action_ids="A"), R.SCHEMA_MISMATCH),
    ("extra capsule key", _with(("canonical_body",), "x"), R.SCHEMA_MISMATCH),
    ("extra slot key", _slot(expansion="x"), R.SCHEMA_MISMATCH),
    ("missing capsule key", _with(("artifact_key",), _DELETE), R.SCHEMA_MISMATCH),
    ("missing slot key", _with((*S0, "max_style_lexemes"), _DELETE), R.SCHEMA_MISMATCH),
    ("schema version beats a bad slot", _slot(max_style_lexemes=1) | {"schema_version": "v3"}, R.UNSUPPORTED_SCHEMA_VERSION),
    ("a slot rule beats duplicate slots", _slot(max_style_lexemes=1) | {"slots": [_slot(max_style_lexemes=1)["slots"][0]] * 2}, R.LIMITS_MISMATCH),
    ("type error beats a rule", _with(("surface",), "x") | {"slots": {}}, R.SCHEMA_MISMATCH),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "obj", "reason"), CAPSULE_FAILURES, ids=[c[0] for c in CAPSULE_FAILURES]
)
def test_capsule_cannot_exist(name: str, obj: dict[str, Any], reason: CapsuleReason) -> None:
    with pytest.raises(CapsuleError) as from_object:
        Capsule.from_object(obj)
    assert from_object.value.reason is reason
    with pytest.raises(CapsuleError) as from_json:
        Capsule.from_json(json.dumps(obj))
    assert from_json.value.reason is reason
    # The message is the reason code only: never the capsule's content.
    assert str(from_json.value) == f"invalid capsule: {reason.value}"


def test_every_rule_reason_has_a_case() -> None:
    reader = {
        R.NOT_UTF8, R.TOO_LARGE, R.BOM, R.DUPLICATE_KEY, R.NON_FINITE_NUMBER,
        R.MALFORMED_JSON, R.NOT_OBJECT, R.NOT_NFC, R.FORBIDDEN_CHARACTER,
    }  # fmt: skip
    assert {c[2] for c in CAPSULE_FAILURES} == set(CapsuleReason) - reader
    assert {c[2] for c in FROM_JSON_FAILURES} == reader


def test_keyword_construction_raises_capsule_error() -> None:
    with pytest.raises(CapsuleError) as info:
        Capsule(schema_version=CONTRACT_VERSION, surface="daily.v1", artifact_key=KEY, slots=())
    assert info.value.reason is R.NO_SLOTS
    daily_slot = LOCKED_POLICIES["daily"][1]
    with pytest.raises(CapsuleError) as info:
        Capsule(
            schema_version=CONTRACT_VERSION,
            surface="weekly.v1",
            artifact_key=KEY,
            slots=(daily_slot,),
        )
    assert info.value.reason is R.SLOT_SURFACE_MISMATCH
    with pytest.raises(CapsuleError) as info:
        Capsule(
            schema_version=CONTRACT_VERSION,
            surface="daily.v1",
            artifact_key=KEY,
            slots=(daily_slot,),
        )
    assert info.value.reason is R.SLOT_UNSTYLEABLE
    with pytest.raises(CapsuleError) as info:
        # strict: a list is not a tuple in Python mode
        Capsule(
            schema_version=CONTRACT_VERSION,
            surface="weekly.v1",
            artifact_key=KEY,
            slots=list(STYLED.slots),  # type: ignore[arg-type]
        )
    assert info.value.reason is R.SCHEMA_MISMATCH
    assert isinstance(info.value, ValueError)


def test_slot_policy_construction_raises_capsule_error() -> None:
    good = STYLED.slots[0]
    with pytest.raises(CapsuleError) as info:
        SlotPolicy(**{**good.model_dump(), "max_style_lexemes": 9})
    assert info.value.reason is R.LIMITS_MISMATCH
    with pytest.raises(CapsuleError) as info:
        SlotPolicy(**{**good.model_dump(), "slot_id": "weekly.summary"})
    assert info.value.reason is R.UNKNOWN_SLOT_ID


FROM_JSON_FAILURES: list[tuple[str, str | bytes, CapsuleReason]] = [
    ("invalid UTF-8", b"\xff" + STYLED.to_json().encode(), R.NOT_UTF8),
    ("lone surrogate", STYLED.to_json()[:-1] + ',"x":"\ud800"}', R.NOT_UTF8),
    ("too large", STYLED.to_json() + " " * 16384, R.TOO_LARGE),
    ("BOM", "\ufeff" + STYLED.to_json(), R.BOM),
    ("duplicate key", STYLED.to_json()[:-1] + ',"surface":"weekly.v1"}', R.DUPLICATE_KEY),
    ("NaN", STYLED.to_json().replace("220", "NaN"), R.NON_FINITE_NUMBER),
    ("malformed", STYLED.to_json()[:-1], R.MALFORMED_JSON),
    ("array", "[" + STYLED.to_json() + "]", R.NOT_OBJECT),
    ("not NFC", STYLED.to_json()[:-1] + ',"x":"\u1100\u1161"}', R.NOT_NFC),
    ("forbidden character", STYLED.to_json()[:-1] + ',"x":"\\u200b"}', R.FORBIDDEN_CHARACTER),
]


@pytest.mark.parametrize(
    ("name", "text", "reason"), FROM_JSON_FAILURES, ids=[c[0] for c in FROM_JSON_FAILURES]
)
def test_from_json_uses_the_strict_reader(
    name: str, text: str | bytes, reason: CapsuleReason
) -> None:
    with pytest.raises(CapsuleError) as info:
        Capsule.from_json(text)
    assert info.value.reason is reason


def test_every_reader_reason_has_its_namesake_capsule_reason() -> None:
    # The strict reader's refusals are the invalid_response reasons; the map to
    # the capsule reasons of the same name is explicit and total over them.
    reader = {r for r in Reason if REASON_VERDICT[r] is Verdict.INVALID_RESPONSE}
    assert set(CAPSULE_REASON_FOR_READER) == reader and len(reader) == 10
    for reader_reason, capsule_reason in CAPSULE_REASON_FOR_READER.items():
        assert capsule_reason.name == reader_reason.name
        assert capsule_reason.value == reader_reason.value


def test_from_object_rejects_a_non_object() -> None:
    with pytest.raises(CapsuleError) as info:
        Capsule.from_object([])
    assert info.value.reason is R.NOT_OBJECT


@pytest.mark.parametrize(
    "cap",
    [
        STYLED,
        Capsule(
            schema_version=CONTRACT_VERSION,
            surface="weekly.v1",
            artifact_key=OTHER_KEY,
            slots=(STYLED_SLOT,),
        ),
    ],
    ids=["key", "other key"],
)
def test_capsule_json_round_trip(cap: Capsule) -> None:
    text = cap.to_json()
    assert Capsule.from_json(text) == cap
    assert Capsule.from_json(text.encode()) == cap
    assert Capsule.from_json(json.dumps(json.loads(text), indent=2)) == cap
    assert text == json.dumps(
        json.loads(text), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )


def test_capsule_is_frozen() -> None:
    with pytest.raises(ValueError):
        STYLED.surface = "daily.v1"


def test_plan_capsule_example_with_manifest_limits() -> None:
    # The plan's example capsule, with the manifest's limits (design §7: 220 / 16) and a
    # real 64-hex key: its slot is exactly what slot_policy builds. Its branch (I3)
    # is locked by the fit table (design §6.1), so the capsule itself is refused;
    # the same capsule on the goal-missing branch (I2) is the styled one.
    text = (
        '{ "schema_version":"korean-expression-v4", "surface":"weekly.v1", '
        f'"artifact_key":"{KEY}", "slots":[{{ "slot_id":"weekly.interpretation", '
        '"allowed_predicate_ids":["P_WEEKLY_IN_GOAL","P_WEEKLY_KEEP_BASIS"], '
        '"allowed_action_ids":[], "required_placeholder_tokens":["[[P:01]]","[[P:02]]"], '
        '"max_generated_chars":220, "max_style_lexemes":16 }] }'
    )
    fields = json.loads(text)["slots"][0]
    slot = SlotPolicy(
        slot_id=fields["slot_id"],
        allowed_predicate_ids=tuple(fields["allowed_predicate_ids"]),
        allowed_action_ids=tuple(fields["allowed_action_ids"]),
        required_placeholder_tokens=tuple(fields["required_placeholder_tokens"]),
        max_generated_chars=fields["max_generated_chars"],
        max_style_lexemes=fields["max_style_lexemes"],
    )
    assert slot == slot_policy("weekly.interpretation", ["P_WEEKLY_KEEP_BASIS", "P_WEEKLY_IN_GOAL"])
    with pytest.raises(CapsuleError) as info:
        Capsule.from_json(text)
    assert info.value.reason is R.SLOT_UNSTYLEABLE
    styled = (
        text.replace('"P_WEEKLY_IN_GOAL","P_WEEKLY_KEEP_BASIS"', '"P_WEEKLY_TREND_OBSERVED"')
        .replace(
            '"allowed_action_ids":[]', '"allowed_action_ids":["A_WEEKLY_HOLD_FOR_MISSING_GOAL"]'
        )
        .replace('"[[P:01]]","[[P:02]]"', '"[[P:01]]","[[A:01]]"')
    )
    assert Capsule.from_json(styled) == STYLED


# -- tokens_for ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "tokens"),
    [
        ((), ()),
        (("P_DAILY_COMPLETE",), ("[[P:01]]",)),
        (("A_OPERATOR_REVIEW_DECISION",), ("[[A:01]]",)),
        (("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"), ("[[P:01]]", "[[P:02]]")),
        (("P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT"), ("[[P:01]]", "[[A:01]]")),
        (("A_X", "P_Y", "A_Z", "P_W"), ("[[A:01]]", "[[P:01]]", "[[A:02]]", "[[P:02]]")),
        (tuple(f"P_{i}" for i in range(99))[-1:], ("[[P:01]]",)),
    ],
)
def test_tokens_for(ids: tuple[str, ...], tokens: tuple[str, ...]) -> None:
    assert tokens_for(ids) == tokens
    assert tokens_for(list(ids)) == tokens


def test_tokens_for_limits() -> None:
    assert tokens_for([f"P_{i}" for i in range(99)])[-1] == "[[P:99]]"
    with pytest.raises(ValueError):
        tokens_for([f"P_{i}" for i in range(100)])
    with pytest.raises(ValueError):
        tokens_for(["X_DAILY"])
    with pytest.raises(ValueError):
        tokens_for(["p_daily"])
    with pytest.raises(TypeError):
        tokens_for("P_DAILY_COMPLETE")


# -- slot_policy -------------------------------------------------------------------------


def test_slot_policy_builds_canonical_order_and_limits() -> None:
    policy = slot_policy(
        "weekly.interpretation", ["A_WEEKLY_HOLD_FOR_MISSING_GOAL", "P_WEEKLY_TREND_OBSERVED"]
    )
    assert policy.allowed_predicate_ids == ("P_WEEKLY_TREND_OBSERVED",)
    assert policy.allowed_action_ids == ("A_WEEKLY_HOLD_FOR_MISSING_GOAL",)
    assert policy.required_placeholder_tokens == ("[[P:01]]", "[[A:01]]")
    assert (policy.max_generated_chars, policy.max_style_lexemes) == (220, 16)
    assert policy.semantic_ids == ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL")
    review = slot_policy("adaptive.dual.review.9", ("P_DUAL_REASON_EDIT",))
    assert (review.max_generated_chars, review.max_style_lexemes) == (128, 10)


@pytest.mark.parametrize(
    ("slot_id", "ids", "reason"),
    [
        ("weekly.summary", ["P_WEEKLY_IN_GOAL"], R.UNKNOWN_SLOT_ID),
        ("daily.status", ["P_DAILY_COMPLETE", "P_DAILY_PARTIAL"], R.IDS_NOT_IN_MANIFEST),
        ("daily.status", [], R.IDS_NOT_IN_MANIFEST),
        ("daily.status", ["P_DAILY_COMPLETE", "P_DAILY_COMPLETE"], R.IDS_NOT_IN_MANIFEST),
        ("weekly.interpretation", ["P_WEEKLY_IN_GOAL"], R.IDS_NOT_IN_MANIFEST),
        ("weekly.rationale", ["A_OPERATOR_REVIEW_DECISION"], R.IDS_NOT_IN_MANIFEST),
        ("adaptive.dual.judgment", ["P_DUAL_REASON_EDIT"], R.IDS_NOT_IN_MANIFEST),
    ],
)
def test_slot_policy_refuses_what_the_manifest_does_not_allow(
    slot_id: str, ids: list[str], reason: CapsuleReason
) -> None:
    with pytest.raises(ValueError) as info:
        slot_policy(slot_id, ids)
    assert isinstance(info.value, CapsuleError) and info.value.reason is reason


def test_slot_policy_refuses_a_str() -> None:
    with pytest.raises(TypeError):
        slot_policy("daily.status", "P_DAILY_COMPLETE")


# -- the manifest ------------------------------------------------------------------------


def test_manifest_is_the_plan_table() -> None:
    table = {
        pattern: (row.surface, row.branches, row.max_generated_chars, row.max_style_lexemes)
        for pattern, row in MANIFEST.items()
    }
    assert table == {
        "daily.status": ("daily.v1", (("P_DAILY_COMPLETE",), ("P_DAILY_PARTIAL",)), 96, 8),
        "weekly.interpretation": (
            "weekly.v1",
            (
                ("P_WEEKLY_TREND_UNAVAILABLE", "A_WEEKLY_RECHECK_AFTER_RECORD"),
                ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"),
                ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"),
                ("P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT"),
            ),
            220,
            16,
        ),
        "weekly.rationale": (
            "weekly.v1",
            (
                ("A_WEEKLY_KEEP_BASELINE",),
                ("A_WEEKLY_REVIEW_ADJUSTMENT",),
                ("P_WEEKLY_RECORDS_INSUFFICIENT",),
            ),
            144,
            10,
        ),
        "adaptive.dual.judgment": (
            "adaptive.dualcoachtest.card.v1",
            (("P_DUAL_DECISION_HOLD",),),
            128,
            10,
        ),
        "adaptive.dual.review.N": (
            "adaptive.dualcoachtest.card.v1",
            (
                ("P_DUAL_REASON_EDIT",),
                ("P_DUAL_REASON_LATEST",),
            ),
            128,
            10,
        ),
        "adaptive.physique.review_instruction": (
            "adaptive.physique.card.v1",
            (("A_OPERATOR_REVIEW_DECISION",),),
            128,
            10,
        ),
    }
    assert {p: row.open_id_pattern for p, row in MANIFEST.items() if row.open_id_pattern} == {
        "adaptive.dual.judgment": "P_DUAL_DECISION_[A-Z]{1,12}(?:_[A-Z]{1,12})*",
        "adaptive.dual.review.N": "P_DUAL_REASON_[A-Z]{1,12}(?:_[A-Z]{1,12})*",
    }
    with pytest.raises(TypeError):
        MANIFEST["x"] = MANIFEST["daily.status"]  # type: ignore[index]


# -- the open dual families (manifest Rule 5) ---------------------------------------------


def test_the_open_grammar_takes_every_shipped_id_and_ids_up_to_its_bounds() -> None:
    from gateway_shim.glossary import RETIRED_SHIPPED_IDS
    from kexpr.spool.contract.manifest import OPEN_ID_MAX_CHARS, OPEN_ID_MAX_WORD

    assert (OPEN_ID_MAX_CHARS, OPEN_ID_MAX_WORD) == (48, 12)
    for semantic_id in (*RETIRED_SHIPPED_IDS, *RETIRED_SHIPPED_IDS.values()):
        row = "adaptive.dual.judgment" if "DECISION" in semantic_id else "adaptive.dual.review.1"
        assert slot_policy(row, [semantic_id]).semantic_ids == (semantic_id,)
    longest = "P_DUAL_DECISION_" + "ABCDEFGHIJKL_ABCDEFGHIJKL_ABCDEF"
    assert len(longest) == OPEN_ID_MAX_CHARS
    assert slot_policy("adaptive.dual.judgment", [longest]).semantic_ids == (longest,)
    with pytest.raises(CapsuleError):
        slot_policy("adaptive.dual.judgment", [longest + "G"])


def test_open_family_ids_make_policies_and_capsules() -> None:
    judgment = slot_policy("adaptive.dual.judgment", ["P_DUAL_DECISION_OPERATOR_TEXT_B"])
    review = slot_policy("adaptive.dual.review.9", ["P_DUAL_REASON_COOLDOWN"])
    assert judgment.allowed_predicate_ids == ("P_DUAL_DECISION_OPERATOR_TEXT_B",)
    assert review.required_placeholder_tokens == ("[[P:01]]",)
    # Every dual cell is empty (design §6.1): the policies exist, a capsule asking
    # for any of them, alone or together, does not.
    for slots in ((review,), (judgment,), (judgment, review)):
        with pytest.raises(CapsuleError) as info:
            Capsule(
                schema_version=CONTRACT_VERSION,
                surface="adaptive.dualcoachtest.card.v1",
                artifact_key=KEY,
                slots=slots,
            )
        assert info.value.reason is R.SLOT_UNSTYLEABLE


@pytest.mark.parametrize(
    ("slot_id", "ids"),
    [
        ("adaptive.dual.judgment", ["P_DUAL_REASON_COOLDOWN"]),
        ("adaptive.dual.review.1", ["P_DUAL_DECISION_KEEP"]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_lower"]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_"]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_A", "P_DUAL_DECISION_B"]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_X\n"]),
        # Rule 6: generic types, never fields (what an older shim's capsule may carry).
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_KIM_MINJI_01012345678"]),
        ("adaptive.dual.review.1", ["P_DUAL_REASON_DAY2"]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_A__B"]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_A_"]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_ABCDEFGHIJKLM"]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_" + "_".join(["ABCDEFGHIJKL"] * 3)]),
        ("adaptive.dual.judgment", ["P_DUAL_DECISION_" + "A" * 4000]),
        ("weekly.rationale", ["P_DUAL_REASON_COOLDOWN"]),
    ],
)
def test_open_families_are_closed_everywhere_else(slot_id: str, ids: list[str]) -> None:
    with pytest.raises(CapsuleError) as info:
        slot_policy(slot_id, ids)
    assert info.value.reason is R.IDS_NOT_IN_MANIFEST


def test_manifest_lookups() -> None:
    assert manifest_for("adaptive.dual.review.1") is MANIFEST["adaptive.dual.review.N"]
    assert manifest_for("adaptive.dual.review.N") is None
    assert slot_ids_for_surface("weekly.v1") == ("weekly.interpretation", "weekly.rationale")
    assert slot_ids_for_surface("adaptive.dualcoachtest.card.v1") == (
        "adaptive.dual.judgment",
        *(f"adaptive.dual.review.{n}" for n in range(1, 10)),
    )
    assert {manifest_for(s).surface for s in slot_ids_for_surface("daily.v1")} == {"daily.v1"}  # type: ignore[union-attr]
    assert {row.surface for row in MANIFEST.values()} == set(SURFACES)


def test_all_semantic_ids() -> None:
    assert isinstance(ALL_SEMANTIC_IDS, frozenset)
    assert len(ALL_SEMANTIC_IDS) == 2 + 8 + 3 + 1 + 2 + 1
    assert all(i.startswith(("P_", "A_")) and i.isupper() for i in ALL_SEMANTIC_IDS)


def test_every_manifest_branch_makes_a_policy() -> None:
    policies = all_policies()
    assert len(policies) == 2 + 4 + 3 + 1 + 9 * 2 + 1
    for policy in policies:
        assert 1 <= len(policy.required_placeholder_tokens) <= 3
        assert set(policy.semantic_ids) <= ALL_SEMANTIC_IDS

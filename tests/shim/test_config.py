"""`KoreanExpressionConfig.from_extra`: exact shape or disabled with an enum diagnostic."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gateway_shim.config import (
    ConfigDiagnostic,
    KoreanExpressionConfig,
    Mode,
    exact_block,
)


def extra(block: object) -> dict[str, object]:
    return {"korean_expression_postprocessor": block}


def test_missing_is_disabled() -> None:
    for e in (None, {}, {"other": 1}):
        cfg = KoreanExpressionConfig.from_extra(e)
        assert cfg.mode is Mode.DISABLED and cfg.diagnostic is ConfigDiagnostic.ABSENT
        assert not cfg.enabled_for("daily.v1")


@pytest.mark.parametrize("mode", list(Mode))
def test_exact_block_parses(mode: Mode) -> None:
    cfg = KoreanExpressionConfig.from_extra(
        extra(exact_block(mode, daily=True, adaptive_operator=True))
    )
    assert cfg.valid and cfg.mode is mode
    assert cfg.enabled_for("daily.v1") is (mode is not Mode.DISABLED)
    assert not cfg.enabled_for("weekly.v1")
    assert cfg.enabled_for("adaptive.physique.card.v1") is (mode is not Mode.DISABLED)
    assert cfg.enabled_for("adaptive.dualcoachtest.card.v1") is (mode is not Mode.DISABLED)
    assert not cfg.enabled_for("unknown.v1")


def mutated(path: tuple[str, ...], value: Any = None, *, delete: bool = False) -> dict[str, Any]:
    """The exact shadow block with one key set to ``value`` (or deleted)."""
    block = copy.deepcopy(exact_block(Mode.SHADOW, daily=True))
    node: Any = block
    for k in path[:-1]:
        node = node[k]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return block


BAD = [
    ("not_mapping", ["x"], ConfigDiagnostic.NOT_A_MAPPING),
    ("unknown_top_key", mutated(("api_key",), "sk-x"), ConfigDiagnostic.UNKNOWN_KEY),
    (
        "base_url_key",
        mutated(("provider", "base_url"), "https://evil"),
        ConfigDiagnostic.UNKNOWN_KEY,
    ),
    ("missing_mode", mutated(("mode",), delete=True), ConfigDiagnostic.MISSING_KEY),
    ("missing_surface", mutated(("surfaces", "weekly"), delete=True), ConfigDiagnostic.MISSING_KEY),
    (
        "schema_version",
        mutated(("schema_version",), "korean-expression-v3"),
        ConfigDiagnostic.SCHEMA_VERSION,
    ),
    (
        "schema_version_padded",
        mutated(("schema_version",), " korean-expression-v4"),
        ConfigDiagnostic.SCHEMA_VERSION,
    ),
    ("mode_case", mutated(("mode",), "Shadow"), ConfigDiagnostic.MODE),
    ("mode_bool", mutated(("mode",), False), ConfigDiagnostic.MODE),
    ("surface_str", mutated(("surfaces", "daily"), "true"), ConfigDiagnostic.SURFACES),
    ("surface_int", mutated(("surfaces", "daily"), 1), ConfigDiagnostic.SURFACES),
    ("surfaces_list", mutated(("surfaces",), ["daily"]), ConfigDiagnostic.SURFACES),
    ("timeout_4", mutated(("timeout_seconds",), 4), ConfigDiagnostic.TIMEOUT),
    ("timeout_float", mutated(("timeout_seconds",), 3.0), ConfigDiagnostic.TIMEOUT),
    ("timeout_str", mutated(("timeout_seconds",), "3"), ConfigDiagnostic.TIMEOUT),
    ("timeout_bool", mutated(("timeout_seconds",), True), ConfigDiagnostic.TIMEOUT),
    (
        "provider_id",
        mutated(("provider", "provider_id"), "openrouter"),
        ConfigDiagnostic.PROVIDER_DISALLOWED,
    ),
    (
        "transport",
        mutated(("provider", "transport"), "responses"),
        ConfigDiagnostic.PROVIDER_DISALLOWED,
    ),
    (
        "endpoint_slash",
        mutated(("provider", "endpoint"), "https://api.openai.com/v1/"),
        ConfigDiagnostic.PROVIDER_DISALLOWED,
    ),
    (
        "endpoint_other",
        mutated(("provider", "endpoint"), "https://api.openai.com.evil/v1"),
        ConfigDiagnostic.PROVIDER_DISALLOWED,
    ),
    ("model", mutated(("provider", "model"), "gpt-4.1"), ConfigDiagnostic.PROVIDER_DISALLOWED),
    (
        "model_trailing_space",
        mutated(("provider", "model"), "gpt-4.1-mini "),
        ConfigDiagnostic.PROVIDER_DISALLOWED,
    ),
    (
        "provider_not_mapping",
        mutated(("provider",), "openai-direct"),
        ConfigDiagnostic.PROVIDER_DISALLOWED,
    ),
    ("non_str_key", {**exact_block(), 1: 2}, ConfigDiagnostic.UNKNOWN_KEY),  # type: ignore[misc]
]


@pytest.mark.parametrize(("name", "block", "diag"), BAD, ids=[b[0] for b in BAD])
def test_every_deviation_disables_with_its_diagnostic(
    name: str, block: object, diag: ConfigDiagnostic
) -> None:
    cfg = KoreanExpressionConfig.from_extra(extra(block))
    assert cfg.diagnostic is diag
    assert cfg.mode is Mode.DISABLED
    assert not any(
        cfg.enabled_for(s) for s in ("daily.v1", "weekly.v1", "adaptive.physique.card.v1")
    )

"""A present ``korean_expression_postprocessor`` block that is not exact
still disables the feature (the plan's rule), but says so loudly: ONE WARNING at
coordinator construction naming the field and the rule, never a value; ``kexpr
preflight`` prints the same pair. Absent and exact blocks say nothing."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway_shim.config import (
    ConfigDiagnostic,
    ConfigField,
    ConfigRule,
    KoreanExpressionConfig,
    Mode,
    exact_block,
)
from gateway_shim.coordinator import KoreanExpressionCoordinator
from kexpr.ops.preflight import preflight_text
from shim.test_config import mutated

SENTINEL = "sk-SENTINEL-never-logged-0000"


F, R, D = ConfigField, ConfigRule, ConfigDiagnostic
# (id, block, diagnostic, field, rule)
CASES: list[tuple[str, object, ConfigDiagnostic, ConfigField, ConfigRule]] = [
    ("not_mapping", [SENTINEL], D.NOT_A_MAPPING, F.BLOCK, R.MUST_BE_A_MAPPING),
    ("api_key", mutated(("api_key",), SENTINEL), D.UNKNOWN_KEY, F.BLOCK, R.NO_OTHER_KEYS),
    (
        "base_url",
        mutated(("provider", "base_url"), SENTINEL),
        D.UNKNOWN_KEY,
        F.PROVIDER,
        R.NO_OTHER_KEYS,
    ),
    (
        "surface_key",
        mutated(("surfaces", SENTINEL), True),
        D.UNKNOWN_KEY,
        F.SURFACES,
        R.NO_OTHER_KEYS,
    ),
    ("missing_mode", mutated(("mode",), delete=True), D.MISSING_KEY, F.MODE, R.KEY_REQUIRED),
    (
        "missing_weekly",
        mutated(("surfaces", "weekly"), delete=True),
        D.MISSING_KEY,
        F.SURFACES_WEEKLY,
        R.KEY_REQUIRED,
    ),
    (
        "missing_model",
        mutated(("provider", "model"), delete=True),
        D.MISSING_KEY,
        F.PROVIDER_MODEL,
        R.KEY_REQUIRED,
    ),
    (
        "schema",
        mutated(("schema_version",), SENTINEL),
        D.SCHEMA_VERSION,
        F.SCHEMA_VERSION,
        R.EXACTLY_KOREAN_EXPRESSION_V4,
    ),
    ("mode", mutated(("mode",), SENTINEL), D.MODE, F.MODE, R.DISABLED_SHADOW_OR_ENABLED),
    (
        "daily_str",
        mutated(("surfaces", "daily"), SENTINEL),
        D.SURFACES,
        F.SURFACES_DAILY,
        R.TRUE_OR_FALSE,
    ),
    (
        "adaptive_int",
        mutated(("surfaces", "adaptive_operator"), 1),
        D.SURFACES,
        F.SURFACES_ADAPTIVE_OPERATOR,
        R.TRUE_OR_FALSE,
    ),
    (
        "surfaces_list",
        mutated(("surfaces",), [SENTINEL]),
        D.SURFACES,
        F.SURFACES,
        R.MUST_BE_A_MAPPING,
    ),
    (
        "timeout_float",
        mutated(("timeout_seconds",), 3.0),
        D.TIMEOUT,
        F.TIMEOUT_SECONDS,
        R.THE_INTEGER_3,
    ),
    (
        "timeout_str",
        mutated(("timeout_seconds",), "3"),
        D.TIMEOUT,
        F.TIMEOUT_SECONDS,
        R.THE_INTEGER_3,
    ),
    (
        "provider_id",
        mutated(("provider", "provider_id"), SENTINEL),
        D.PROVIDER_DISALLOWED,
        F.PROVIDER_ID,
        R.THE_ALLOWED_PROVIDER,
    ),
    (
        "transport",
        mutated(("provider", "transport"), SENTINEL),
        D.PROVIDER_DISALLOWED,
        F.PROVIDER_TRANSPORT,
        R.THE_ALLOWED_PROVIDER,
    ),
    (
        "endpoint",
        mutated(("provider", "endpoint"), SENTINEL),
        D.PROVIDER_DISALLOWED,
        F.PROVIDER_ENDPOINT,
        R.THE_ALLOWED_PROVIDER,
    ),
    (
        "model",
        mutated(("provider", "model"), SENTINEL),
        D.PROVIDER_DISALLOWED,
        F.PROVIDER_MODEL,
        R.THE_ALLOWED_PROVIDER,
    ),
    (
        "provider_str",
        mutated(("provider",), SENTINEL),
        D.PROVIDER_DISALLOWED,
        F.PROVIDER,
        R.MUST_BE_A_MAPPING,
    ),
]


@pytest.mark.parametrize(
    ("name", "block", "diagnostic", "field", "rule"), CASES, ids=[c[0] for c in CASES]
)
def test_an_inexact_block_names_its_field_and_rule(
    name: str, block: object, diagnostic: ConfigDiagnostic, field: ConfigField, rule: ConfigRule
) -> None:
    config = KoreanExpressionConfig.from_extra({"korean_expression_postprocessor": block})
    assert (config.diagnostic, config.inexact) == (diagnostic, (field, rule))
    assert config.mode is Mode.DISABLED  # still disabled unless exact: not accepted


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name.startswith("kexpr") and r.levelno >= logging.WARNING
    ]


@pytest.mark.parametrize(
    ("name", "block", "diagnostic", "field", "rule"), CASES, ids=[c[0] for c in CASES]
)
def test_the_coordinator_warns_once_at_construction(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    name: str,
    block: object,
    diagnostic: ConfigDiagnostic,
    field: ConfigField,
    rule: ConfigRule,
) -> None:
    config = KoreanExpressionConfig.from_extra({"korean_expression_postprocessor": block})
    caplog.set_level(logging.DEBUG, logger="kexpr")
    coordinator = KoreanExpressionCoordinator(config, tmp_path / "root")
    try:
        (record,) = _warnings(caplog)
    finally:
        coordinator.close()
    assert record.name == "kexpr.shim"
    assert record.getMessage() == (
        f"config_inexact field={field.value} rule={rule.value} "
        f"diagnostic={diagnostic.value} mode=disabled"
    )
    assert SENTINEL not in record.getMessage()
    assert SENTINEL not in str(record.__dict__)


@pytest.mark.parametrize(
    "extra",
    [
        None,
        {},
        {"korean_expression_postprocessor": exact_block()},
        {"korean_expression_postprocessor": exact_block(Mode.SHADOW, daily=True)},
    ],
)
def test_an_absent_or_exact_block_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, extra: dict[str, object] | None
) -> None:
    config = KoreanExpressionConfig.from_extra(extra)
    assert config.inexact is None
    caplog.set_level(logging.DEBUG, logger="kexpr")
    KoreanExpressionCoordinator(config, tmp_path / "root").close()
    assert _warnings(caplog) == []


CONFIG = """\
{top}platforms:
  telegram:
    extra:
      physique_checkin: {{enabled: true}}
      korean_expression_postprocessor:
        schema_version: korean-expression-v4
        mode: shadow
        surfaces: {{daily: true, weekly: false, adaptive_operator: false}}
        timeout_seconds: {timeout}
        provider:
          provider_id: openai-direct
          transport: chat_completions
          endpoint: https://api.openai.com/v1
          model: gpt-4.1-mini
"""


def test_preflight_reports_the_same_field_and_rule() -> None:
    result = preflight_text(CONFIG.format(top="", timeout="3.0"))
    (problem,) = result.problems
    assert (problem.field, problem.rule) == ("timeout_seconds", "the_integer_3_not_3.0_or_a_string")
    assert problem.text() == (
        "postprocessor_invalid:timeout_seconds at "
        "platforms.telegram.extra.korean_expression_postprocessor "
        "(field timeout_seconds: the_integer_3_not_3.0_or_a_string)"
    )
    assert problem.to_json()["field"] == "timeout_seconds"
    assert preflight_text(CONFIG.format(top="", timeout="3")).passed


def test_preflight_notes_a_physique_checkin_the_host_does_not_read() -> None:
    # A top-level copy used to be reported only as `physique_checkin.enabled absent`.
    text = CONFIG.format(top="physique_checkin: {enabled: true}\n", timeout="3")
    result = preflight_text(text)
    assert result.passed  # a note, not a failure: the host's own switch is elsewhere
    assert [n.text() for n in result.notes] == ["physique_checkin_not_read at physique_checkin"]
    assert result.physique_checkin_enabled == "true"  # the copy that is read
    assert result.to_json()["notes"][0]["where"] == "physique_checkin"
    assert preflight_text(CONFIG.format(top="", timeout="3")).notes == []

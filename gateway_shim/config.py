"""``korean_expression_postprocessor`` config (design §8: a single configured
OpenAI-compatible provider).

The only accepted shape, byte for byte (values compared with ``==`` *and* exact
type; nothing trimmed, case-folded or normalized)::

    korean_expression_postprocessor:
      schema_version: korean-expression-v4
      mode: disabled | shadow | enabled
      surfaces: {daily: bool, weekly: bool, adaptive_operator: bool}
      timeout_seconds: 3
      provider:
        provider_id: openai-direct
        transport: chat_completions
        endpoint: https://api.openai.com/v1
        model: gpt-4.1-mini

Missing -> disabled (`ConfigDiagnostic.ABSENT`). Anything else that is not exactly
this -> disabled with an enum diagnostic: fail closed, never a persisted row,
never a partial enablement. There is deliberately no field for a key, a base URL
or another provider: the compiled allow-list below is the only identity.

A present block that is not exact is said loudly, never accepted: the config
carries the first field that is not exact (`ConfigField`) and the rule it breaks
(`ConfigRule`), both fixed enums (never a value: a config may hold a key where
it must not), and `inexact_warning` logs them once as a WARNING (the coordinator
calls it at construction; ``kexpr preflight`` prints the same pair). The block
is read from the adapter's extras only (``platforms.telegram.extra`` in a Hermes
``config.yaml``): a copy anywhere else is not this block.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kexpr.spool.lifecycle import SpoolMode

CONFIG_KEY: Final = "korean_expression_postprocessor"
SCHEMA_VERSION: Final = "korean-expression-v4"
TIMEOUT_SECONDS: Final = 3
ALLOWED_PROVIDER: Final[Mapping[str, str]] = {
    "provider_id": "openai-direct",
    "transport": "chat_completions",
    "endpoint": "https://api.openai.com/v1",
    "model": "gpt-4.1-mini",
}
_TOP_KEYS: Final = frozenset({"schema_version", "mode", "surfaces", "timeout_seconds", "provider"})
_SURFACE_KEYS: Final = ("daily", "weekly", "adaptive_operator")


class Mode(enum.StrEnum):
    """The config's mode: the spool's (`kexpr.spool.lifecycle.SpoolMode`, what
    a request and a journal row carry) plus ``disabled``, which never reaches
    the spool. Two enums, one name each: ``Mode`` is the operator's switch,
    ``SpoolMode`` what may reach a worker."""

    DISABLED = "disabled"
    SHADOW = SpoolMode.SHADOW.value
    ENABLED = SpoolMode.ENABLED.value


class ConfigField(enum.StrEnum):
    """Where a present block is not exact: a key path inside the block."""

    BLOCK = "korean_expression_postprocessor"
    SCHEMA_VERSION = "schema_version"
    MODE = "mode"
    SURFACES = "surfaces"
    SURFACES_DAILY = "surfaces.daily"
    SURFACES_WEEKLY = "surfaces.weekly"
    SURFACES_ADAPTIVE_OPERATOR = "surfaces.adaptive_operator"
    TIMEOUT_SECONDS = "timeout_seconds"
    PROVIDER = "provider"
    PROVIDER_ID = "provider.provider_id"
    PROVIDER_TRANSPORT = "provider.transport"
    PROVIDER_ENDPOINT = "provider.endpoint"
    PROVIDER_MODEL = "provider.model"


class ConfigRule(enum.StrEnum):
    """The rule that field breaks, in words an operator can act on."""

    MUST_BE_A_MAPPING = "must_be_a_mapping"
    NO_OTHER_KEYS = "no_keys_but_the_documented_ones"
    KEY_REQUIRED = "key_required"
    EXACTLY_KOREAN_EXPRESSION_V4 = "exactly_korean-expression-v4"
    DISABLED_SHADOW_OR_ENABLED = "one_of_disabled_shadow_enabled"
    TRUE_OR_FALSE = "a_yaml_boolean_true_or_false"
    THE_INTEGER_3 = "the_integer_3_not_3.0_or_a_string"
    THE_ALLOWED_PROVIDER = "the_one_allowed_value"


class ConfigDiagnostic(enum.StrEnum):
    OK = "ok"
    ABSENT = "absent"
    NOT_A_MAPPING = "not_a_mapping"
    UNKNOWN_KEY = "unknown_key"
    MISSING_KEY = "missing_key"
    SCHEMA_VERSION = "schema_version"
    MODE = "mode"
    SURFACES = "surfaces"
    TIMEOUT = "timeout_seconds"
    PROVIDER_DISALLOWED = "provider_disallowed"


# surface version -> the config switch that governs it
SURFACE_SWITCH: Final[Mapping[str, str]] = {
    "daily.v1": "daily",
    "weekly.v1": "weekly",
    "adaptive.dualcoachtest.card.v1": "adaptive_operator",
    "adaptive.physique.card.v1": "adaptive_operator",
}


@dataclass(frozen=True, slots=True)
class KoreanExpressionConfig:
    mode: Mode
    daily: bool
    weekly: bool
    adaptive_operator: bool
    diagnostic: ConfigDiagnostic
    # A present block that is not exact: the first field that is not, and why.
    inexact: tuple[ConfigField, ConfigRule] | None = None

    @classmethod
    def disabled(
        cls, diagnostic: ConfigDiagnostic, inexact: tuple[ConfigField, ConfigRule] | None = None
    ) -> KoreanExpressionConfig:
        return cls(Mode.DISABLED, False, False, False, diagnostic, inexact)

    @property
    def valid(self) -> bool:
        return self.diagnostic is ConfigDiagnostic.OK

    def enabled_for(self, surface: str) -> bool:
        """True only for a valid, non-disabled config whose switch is on."""
        if not self.valid or self.mode is Mode.DISABLED:
            return False
        switch = SURFACE_SWITCH.get(surface)
        return switch is not None and bool(getattr(self, switch))

    @classmethod
    def from_extra(cls, extra: Mapping[str, object] | None) -> KoreanExpressionConfig:
        if extra is None or CONFIG_KEY not in extra:
            return cls.disabled(ConfigDiagnostic.ABSENT)
        return cls.from_block(extra[CONFIG_KEY])

    @classmethod
    def from_block(cls, block: object) -> KoreanExpressionConfig:
        diag, inexact = _check(block)
        if diag is not ConfigDiagnostic.OK:
            return cls.disabled(diag, inexact)
        assert isinstance(block, Mapping)
        surfaces = block["surfaces"]
        assert isinstance(surfaces, Mapping)
        return cls(
            Mode(block["mode"]),
            surfaces["daily"],
            surfaces["weekly"],
            surfaces["adaptive_operator"],
            ConfigDiagnostic.OK,
        )


_Inexact = tuple[ConfigDiagnostic, tuple[ConfigField, ConfigRule] | None]
_OK: Final[_Inexact] = (ConfigDiagnostic.OK, None)


def _keys(
    m: Mapping[object, object], expected: frozenset[str], where: ConfigField, prefix: str = ""
) -> _Inexact | None:
    keys = set(m)
    if not all(type(k) is str for k in keys) or keys - expected:
        return ConfigDiagnostic.UNKNOWN_KEY, (where, ConfigRule.NO_OTHER_KEYS)
    missing = sorted(expected - keys)
    if missing:
        return ConfigDiagnostic.MISSING_KEY, (
            ConfigField(prefix + missing[0]),
            ConfigRule.KEY_REQUIRED,
        )
    return None


def _check(block: object) -> _Inexact:
    """`ConfigDiagnostic.OK`, or the diagnostic and the first inexact field."""
    if not isinstance(block, Mapping):
        return ConfigDiagnostic.NOT_A_MAPPING, (ConfigField.BLOCK, ConfigRule.MUST_BE_A_MAPPING)
    if (d := _keys(block, _TOP_KEYS, ConfigField.BLOCK)) is not None:
        return d
    if type(block["schema_version"]) is not str or block["schema_version"] != SCHEMA_VERSION:
        rule = ConfigRule.EXACTLY_KOREAN_EXPRESSION_V4
        return ConfigDiagnostic.SCHEMA_VERSION, (ConfigField.SCHEMA_VERSION, rule)
    if type(block["mode"]) is not str or block["mode"] not in {m.value for m in Mode}:
        return ConfigDiagnostic.MODE, (ConfigField.MODE, ConfigRule.DISABLED_SHADOW_OR_ENABLED)
    surfaces = block["surfaces"]
    if not isinstance(surfaces, Mapping):
        return ConfigDiagnostic.SURFACES, (ConfigField.SURFACES, ConfigRule.MUST_BE_A_MAPPING)
    if (
        d := _keys(surfaces, frozenset(_SURFACE_KEYS), ConfigField.SURFACES, "surfaces.")
    ) is not None:
        return d
    for k in _SURFACE_KEYS:
        if type(surfaces[k]) is not bool:
            field = ConfigField(f"surfaces.{k}")
            return ConfigDiagnostic.SURFACES, (field, ConfigRule.TRUE_OR_FALSE)
    timeout = block["timeout_seconds"]
    if type(timeout) is not int or timeout != TIMEOUT_SECONDS:
        rule = ConfigRule.THE_INTEGER_3
        return ConfigDiagnostic.TIMEOUT, (ConfigField.TIMEOUT_SECONDS, rule)
    provider = block["provider"]
    if not isinstance(provider, Mapping):
        rule = ConfigRule.MUST_BE_A_MAPPING
        return ConfigDiagnostic.PROVIDER_DISALLOWED, (ConfigField.PROVIDER, rule)
    if (
        d := _keys(provider, frozenset(ALLOWED_PROVIDER), ConfigField.PROVIDER, "provider.")
    ) is not None:
        return d
    for k, v in ALLOWED_PROVIDER.items():
        if type(provider[k]) is not str or provider[k] != v:
            field = ConfigField(f"provider.{k}")
            return ConfigDiagnostic.PROVIDER_DISALLOWED, (field, ConfigRule.THE_ALLOWED_PROVIDER)
    return _OK


def inexact_warning(config: KoreanExpressionConfig, logger: logging.Logger) -> bool:
    """Log one WARNING when a present block is not exact (the feature is then
    disabled): ``config_inexact field=<ConfigField> rule=<ConfigRule>
    diagnostic=<ConfigDiagnostic> mode=disabled``. Never a value. True if logged."""
    if config.inexact is None:
        return False
    from kexpr.spool import log

    field, rule = config.inexact
    log.event(
        logger,
        logging.WARNING,
        "config_inexact",
        field=field,
        rule=rule,
        diagnostic=config.diagnostic,
        mode=Mode.DISABLED,
    )
    return True


def exact_block(mode: Mode = Mode.DISABLED, **surfaces: bool) -> dict[str, object]:
    """The exact config block (what ``kexpr migrate-config`` writes and tests use)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": mode.value,
        "surfaces": {k: bool(surfaces.get(k, False)) for k in _SURFACE_KEYS},
        "timeout_seconds": TIMEOUT_SECONDS,
        "provider": dict(ALLOWED_PROVIDER),
    }

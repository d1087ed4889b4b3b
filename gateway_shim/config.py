"""``korean_expression_postprocessor`` config (design §8; plan "Single configured
OpenAI-compatible provider").

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
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

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
    DISABLED = "disabled"
    SHADOW = "shadow"
    ENABLED = "enabled"


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

    @classmethod
    def disabled(cls, diagnostic: ConfigDiagnostic) -> KoreanExpressionConfig:
        return cls(Mode.DISABLED, False, False, False, diagnostic)

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
        diag = _check(block)
        if diag is not ConfigDiagnostic.OK:
            return cls.disabled(diag)
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


def _keys(m: Mapping[object, object], expected: frozenset[str]) -> ConfigDiagnostic | None:
    keys = set(m)
    if not all(type(k) is str for k in keys) or keys - expected:
        return ConfigDiagnostic.UNKNOWN_KEY
    if expected - keys:
        return ConfigDiagnostic.MISSING_KEY
    return None


def _check(block: object) -> ConfigDiagnostic:
    if not isinstance(block, Mapping):
        return ConfigDiagnostic.NOT_A_MAPPING
    if (d := _keys(block, _TOP_KEYS)) is not None:
        return d
    if type(block["schema_version"]) is not str or block["schema_version"] != SCHEMA_VERSION:
        return ConfigDiagnostic.SCHEMA_VERSION
    if type(block["mode"]) is not str or block["mode"] not in {m.value for m in Mode}:
        return ConfigDiagnostic.MODE
    surfaces = block["surfaces"]
    if not isinstance(surfaces, Mapping):
        return ConfigDiagnostic.SURFACES
    if (d := _keys(surfaces, frozenset(_SURFACE_KEYS))) is not None:
        return d
    if any(type(surfaces[k]) is not bool for k in _SURFACE_KEYS):
        return ConfigDiagnostic.SURFACES
    timeout = block["timeout_seconds"]
    if type(timeout) is not int or timeout != TIMEOUT_SECONDS:
        return ConfigDiagnostic.TIMEOUT
    provider = block["provider"]
    if not isinstance(provider, Mapping):
        return ConfigDiagnostic.PROVIDER_DISALLOWED
    if (d := _keys(provider, frozenset(ALLOWED_PROVIDER))) is not None:
        return d
    for k, v in ALLOWED_PROVIDER.items():
        if type(provider[k]) is not str or provider[k] != v:
            return ConfigDiagnostic.PROVIDER_DISALLOWED
    return ConfigDiagnostic.OK


def exact_block(mode: Mode = Mode.DISABLED, **surfaces: bool) -> dict[str, object]:
    """The exact config block (what ``kexpr migrate-config`` writes and tests use)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "mode": mode.value,
        "surfaces": {k: bool(surfaces.get(k, False)) for k in _SURFACE_KEYS},
        "timeout_seconds": TIMEOUT_SECONDS,
        "provider": dict(ALLOWED_PROVIDER),
    }

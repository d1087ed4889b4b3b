"""``kexpr preflight``'s judgement of one host config: step 2 "Preflight gate" of
the ordered migration (`kexpr.ops.preflight` states the step; design §10).

Rules of `kexpr.ops.preflight` that apply here: fail closed (anything unproven is a
`ConfigProblem`), and no content in a result (key paths and enum diagnostics only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gateway_shim.config import CONFIG_KEY, ConfigDiagnostic, KoreanExpressionConfig, Mode
from kexpr.ops._config_yaml import (
    ConfigProblem,
    Diagnostic,
    YamlRefused,
    _get,
    _load_plain,
    _load_yaml,
    _path_text,
    _require_ruamel,
    _shape_problem,
    _split_path,
    _walk_maps,
)

LEGACY_KEY: Final = "coaching_feedback_enabled"
CHECKIN_KEY: Final = "physique_checkin"
DEFAULT_EXTRA_PATH: Final = "platforms.telegram.extra"


def _legacy_paths(data: Any) -> list[tuple[object, ...]]:
    """Every ``physique_checkin`` mapping (anywhere) that still has the legacy key."""
    return [
        (*path, CHECKIN_KEY)
        for path, m in _walk_maps(data)
        if isinstance(m.get(CHECKIN_KEY), Mapping) and LEGACY_KEY in m[CHECKIN_KEY]
    ]


@dataclass(slots=True)
class PreflightResult:
    config: str
    problems: list[ConfigProblem] = field(default_factory=list)
    # Not failures: what the host will not read (a `physique_checkin` elsewhere).
    notes: list[ConfigProblem] = field(default_factory=list)
    postprocessor: dict[str, Any] = field(default_factory=dict)
    physique_checkin_enabled: str = "absent"  # true | false | absent | not_a_boolean

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "verdict": "pass" if self.passed else "fail",
            "problems": [p.to_json() for p in self.problems],
            "notes": [p.to_json() for p in self.notes],
            "postprocessor": self.postprocessor,
            "physique_checkin_enabled": self.physique_checkin_enabled,
        }


def preflight_text(
    text: str, *, extra_path: str = DEFAULT_EXTRA_PATH, name: str = ""
) -> PreflightResult:
    """Judge one host config (the text of a ``config.yaml``)."""
    _require_ruamel()
    result = PreflightResult(name)
    path = _split_path(extra_path)
    try:
        data = _load_yaml(text, _load_plain)
    except YamlRefused as e:
        result.problems.append(e.problem)
        return result
    shape = _shape_problem(data)
    if shape is not None:
        result.problems.append(shape)
        return result
    if not isinstance(data, Mapping):
        result.problems.append(ConfigProblem(Diagnostic.NOT_A_MAPPING))
        return result
    for legacy in _legacy_paths(data):
        result.problems.append(
            ConfigProblem(
                Diagnostic.LEGACY_COACHING_FEEDBACK_ENABLED, _path_text((*legacy, LEGACY_KEY))
            )
        )
    for where, m in _walk_maps(data):
        if CONFIG_KEY in m and tuple(where) != path:
            result.problems.append(
                ConfigProblem(Diagnostic.POSTPROCESSOR_MISPLACED, _path_text((*where, CONFIG_KEY)))
            )
    extra, found = _get(data, path)
    if not found:
        result.problems.append(ConfigProblem(Diagnostic.EXTRA_PATH_MISSING, _path_text(path)))
        return result
    if not isinstance(extra, Mapping):
        result.problems.append(ConfigProblem(Diagnostic.EXTRA_NOT_A_MAPPING, _path_text(path)))
        return result
    # The host reads the check-in switch from the adapter's extras only; a copy
    # anywhere else (say, at the top level) is not read, and `enabled` below
    # says `absent` for it: said as a note, so the reason is visible.
    for where, m in _walk_maps(data):
        if isinstance(m.get(CHECKIN_KEY), Mapping) and tuple(where) != path:
            result.notes.append(
                ConfigProblem(
                    Diagnostic.PHYSIQUE_CHECKIN_NOT_READ, _path_text((*where, CHECKIN_KEY))
                )
            )
    checkin = extra.get(CHECKIN_KEY)
    if isinstance(checkin, Mapping) and "enabled" in checkin:
        enabled = checkin["enabled"]
        result.physique_checkin_enabled = (
            ("true" if enabled else "false") if type(enabled) is bool else "not_a_boolean"
        )
    # The shim's own strict parser: exactly what the host will decide.
    config = KoreanExpressionConfig.from_extra(extra)
    if config.diagnostic is ConfigDiagnostic.ABSENT:
        result.postprocessor = {"block": "absent", "mode": Mode.DISABLED.value}
    elif config.valid:
        result.postprocessor = {
            "block": "exact",
            "mode": config.mode.value,
            "surfaces": {
                "daily": config.daily,
                "weekly": config.weekly,
                "adaptive_operator": config.adaptive_operator,
            },
        }
    else:
        result.postprocessor = {"block": "invalid", "mode": Mode.DISABLED.value}
        field_, rule = config.inexact or ("", "")
        result.problems.append(
            ConfigProblem(
                Diagnostic.POSTPROCESSOR_INVALID,
                _path_text((*path, CONFIG_KEY)),
                config.diagnostic.value,
                field=str(field_),
                rule=str(rule),
            )
        )
    return result

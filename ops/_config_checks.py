"""``kexpr preflight``'s judgement of one host config: step 2 "Preflight gate" of
the ordered migration (`kexpr.ops.preflight` states the step; design §10).

Rules of `kexpr.ops.preflight` that apply here: fail closed (anything unproven is a
`ConfigProblem`), and no content in a result (key paths and enum diagnostics only).

The verdict is taken on the data the host reads (`_load_host`: PyYAML's
``safe_load``, YAML 1.1), so ``daily: yes`` passes here exactly when the gateway
runs daily; the file must also load under YAML 1.2 (`_load_plain`), and each value
of the adapter extras the two readings disagree on is a `YAML11_BOOLEAN` note.
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
    _load_host,
    _load_plain,
    _load_yaml,
    _path_text,
    _require_host_loader,
    _require_ruamel,
    _shape_problem,
    _split_path,
    _walk_maps,
)

LEGACY_KEY: Final = "coaching_feedback_enabled"
CHECKIN_KEY: Final = "physique_checkin"
DEFAULT_EXTRA_PATH: Final = "platforms.telegram.extra"
# What preflight's verdict is taken on (printed and in --json): the host's loader.
HOST_LOADER: Final = "pyyaml-safe_load-yaml-1.1"


def _yaml11_booleans(
    strict: Any, host: Any, path: tuple[object, ...]
) -> list[tuple[tuple[object, ...], bool]]:
    """Each value that YAML 1.2 reads as a string and the host as a boolean, with
    the host's value (a boolean, never the text). Both trees passed `_shape_problem`;
    a node reached twice through an alias is walked once."""
    out: list[tuple[tuple[object, ...], bool]] = []
    seen: set[int] = set()
    stack: list[tuple[Any, Any, tuple[object, ...]]] = [(strict, host, path)]
    while stack:
        s, h, p = stack.pop()
        if type(h) is bool and type(s) is str:
            out.append((p, h))
            continue
        if id(s) in seen:
            continue
        if isinstance(s, Mapping) and isinstance(h, Mapping):
            seen.add(id(s))
            stack.extend((v, h[k], (*p, k)) for k, v in s.items() if k in h)
        elif isinstance(s, list) and isinstance(h, list):
            seen.add(id(s))
            stack.extend((v, w, (*p, i)) for i, (v, w) in enumerate(zip(s, h, strict=False)))
    return sorted(out, key=lambda item: [str(x) for x in item[0]])


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
    """Judge one host config (the text of a ``config.yaml``) as the host loads it."""
    _require_ruamel()
    _require_host_loader()
    result = PreflightResult(name)
    path = _split_path(extra_path)
    data: Any = None
    strict: Any = None
    for loader in (_load_plain, _load_host):  # YAML 1.2 first: it refuses a repeated key
        try:
            data = _load_yaml(text, loader)
        except YamlRefused as e:
            result.problems.append(e.problem)
            return result
        shape = _shape_problem(data)
        if shape is not None:
            result.problems.append(shape)
            return result
        if loader is _load_plain:
            strict = data
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
    strict_extra, _ = _get(strict, path)
    for where, value in _yaml11_booleans(strict_extra, extra, path):
        result.notes.append(
            ConfigProblem(
                Diagnostic.YAML11_BOOLEAN, _path_text(where), "true" if value else "false"
            )
        )
    checkin = extra.get(CHECKIN_KEY)
    if isinstance(checkin, Mapping) and "enabled" in checkin:
        enabled = checkin["enabled"]
        result.physique_checkin_enabled = (
            ("true" if enabled else "false") if type(enabled) is bool else "not_a_boolean"
        )
    # The shim's own strict parser on the host's data: exactly what the host will decide.
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

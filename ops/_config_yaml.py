"""Reading a host ``config.yaml`` for ``kexpr preflight`` and ``kexpr migrate-config``:
the size and shape bounds, the YAML loaders, key paths fit to print, and the
diagnostic vocabulary both commands report in.

Rules of `kexpr.ops.preflight` that apply here:

- **Fail closed.** A YAML error, a warning, a config over `MAX_CONFIG_BYTES`, or
  data over `MAX_YAML_NODES` / `MAX_YAML_DEPTH` (or with a recursive alias) is a
  `ConfigProblem` with an enum diagnostic, never a partial judgement.
- **No content in output.** Host configs hold tokens and keys: a `ConfigProblem` names
  a key path (`_path_text`: printable keys only) or a line number, never a value.
- **Judged as the host loads it.** Hermes reads ``config.yaml`` with PyYAML's
  ``safe_load`` (YAML 1.1: ``yes``/``no``/``on``/``off`` in any of their three
  spellings are booleans, ``y``/``n`` are strings), and the gateway decides from
  that data. So preflight's verdict is taken on the same data (`_load_host`), and
  where ruamel's YAML 1.2 reading of the adapter extras differs from it (a
  ``yes`` that YAML 1.2 reads as a string), a note says what the host reads.
- The file must also load with ruamel's YAML 1.2 safe loader (duplicate keys and
  Python tags are errors): an ambiguous file is a release failure even where the
  host would pick one reading (PyYAML keeps a repeated key's last value).

ruamel.yaml is the ``[ops]`` extra: imported only by these two commands, so the
gateway-side install stays light.
"""

from __future__ import annotations

import enum
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024
# A config's data is judged only if, with every alias expanded
# where it is used (merge keys included), it has at most this many nodes and
# this depth; a recursive alias is refused. The check itself visits each node
# once (a "billion laughs" file is refused in microseconds, not walked).
MAX_YAML_NODES: Final = 100_000
MAX_YAML_DEPTH: Final = 64
_PRINTABLE_KEY: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class Diagnostic(enum.StrEnum):
    """Why a config fails preflight or cannot be migrated. Enum only."""

    LEGACY_COACHING_FEEDBACK_ENABLED = "legacy_coaching_feedback_enabled"
    YAML_ERROR = "yaml_error"
    NOT_A_MAPPING = "not_a_mapping"
    EXTRA_PATH_MISSING = "extra_path_missing"
    EXTRA_NOT_A_MAPPING = "extra_not_a_mapping"
    POSTPROCESSOR_INVALID = "postprocessor_invalid"
    POSTPROCESSOR_MISPLACED = "postprocessor_misplaced"
    # a note, not a failure: a `physique_checkin` the host does not read
    PHYSIQUE_CHECKIN_NOT_READ = "physique_checkin_not_read"
    # a note, not a failure: a value YAML 1.2 reads as a string and the host's
    # YAML 1.1 loader as a boolean (`yes`, `off` ...); the verdict takes the host's
    YAML11_BOOLEAN = "yaml11_boolean"
    # migrate-config only
    NOT_LINE_EDITABLE = "not_line_editable"
    LEGACY_KEY_SOLE_ENTRY = "legacy_key_sole_entry"
    MIGRATION_UNVERIFIED = "migration_unverified"
    CONFIG_IS_SYMLINK = "config_is_symlink"
    CONFIG_CHANGED = "config_changed"


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    diagnostic: Diagnostic
    where: str = ""  # a key path or "line N"; never a value
    detail: str = ""  # a sub-enum (e.g. the shim's ConfigDiagnostic)
    # postprocessor_invalid: the field inside the block and the rule it breaks
    # (the shim's ConfigField / ConfigRule, what its WARNING says); enums only.
    field: str = ""
    rule: str = ""

    def text(self) -> str:
        out = self.diagnostic.value + (f":{self.detail}" if self.detail else "")
        out += f" at {self.where}" if self.where else ""
        return out + (f" (field {self.field}: {self.rule})" if self.field else "")

    def to_json(self) -> dict[str, str]:
        out = {"diagnostic": self.diagnostic.value, "where": self.where, "detail": self.detail}
        if self.field:
            out |= {"field": self.field, "rule": self.rule}
        return out


class UsageError(Exception):
    """The input cannot be examined at all (missing file, no ruamel): exit 2.
    ``error``: for an unusable config file, the ``--json`` form of the refusal
    (`kexpr.ops.inputs`: input, path, problem)."""

    def __init__(self, message: str, error: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.error = error


def _require_ruamel() -> None:
    try:
        import ruamel.yaml  # noqa: F401
    except ImportError as e:
        raise UsageError("requires the [ops] extra: pip install 'kexpr[ops]' (ruamel.yaml)") from e


def _require_host_loader() -> None:
    try:
        import yaml  # noqa: F401
    except ImportError as e:
        raise UsageError("requires the [ops] extra: pip install 'kexpr[ops]' (PyYAML)") from e


def _path_text(path: Sequence[object]) -> str:
    return ".".join(str(p) if _PRINTABLE_KEY.fullmatch(str(p)) else "?" for p in path) or "."


def _split_path(extra_path: str) -> tuple[str, ...]:
    parts = tuple(extra_path.split("."))
    if not all(parts):
        raise UsageError("--extra-path must be dotted keys, e.g. platforms.telegram.extra")
    return parts


def _load_plain(text: str) -> Any:
    """YAML 1.2 safe load; warnings are errors too (fail closed)."""
    from ruamel.yaml import YAML

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return YAML(typ="safe", pure=True).load(text)


def _load_host(text: str) -> Any:
    """What the host reads: PyYAML's ``safe_load`` (YAML 1.1 booleans)."""
    import yaml

    return yaml.safe_load(text)


def _load_rt(text: str) -> Any:
    from ruamel.yaml import YAML

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return YAML(typ="rt").load(text)


def _yaml_problem(e: BaseException) -> ConfigProblem:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    line = getattr(mark, "line", None)
    return ConfigProblem(Diagnostic.YAML_ERROR, f"line {line + 1}" if isinstance(line, int) else "")


class YamlRefused(Exception):
    """A config that does not load (a YAML error, a warning, nesting too deep
    for the loader): its `ConfigProblem`, never its content."""

    def __init__(self, problem: ConfigProblem) -> None:
        super().__init__(problem.text())
        self.problem = problem


def _load_yaml(text: str, loader: Callable[[str], Any]) -> Any:
    """``loader(text)`` (`_load_plain`, `_load_rt` or `_load_host`), or `YamlRefused`."""
    from ruamel.yaml.error import YAMLError

    errors: tuple[type[BaseException], ...] = (YAMLError, Warning)
    if loader is _load_host:
        import yaml

        errors = (yaml.YAMLError, Warning)
    try:
        return loader(text)
    except errors as e:
        raise YamlRefused(_yaml_problem(e)) from e
    except RecursionError as e:
        raise YamlRefused(ConfigProblem(Diagnostic.YAML_ERROR, detail="too_deep")) from e


def _shape_problem(data: Any) -> ConfigProblem | None:
    """`MAX_YAML_NODES` / `MAX_YAML_DEPTH` / no recursive alias, so that an
    alias bomb is refused, never walked. Iterative, each node visited once; a node's expanded size is
    memoized, so shared (aliased) nodes are counted per use without being
    walked again."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(data, 1, False)]
    while stack:
        node, depth, leaving = stack.pop()
        if not isinstance(node, Mapping | list):
            continue
        key = id(node)
        children = list(node.values()) if isinstance(node, Mapping) else list(node)
        if leaving:
            on_path.discard(key)
            size = 1 + sum(sizes.get(id(c), 1) for c in children)
            if size > MAX_YAML_NODES:
                return ConfigProblem(Diagnostic.YAML_ERROR, detail="too_many_nodes")
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in on_path:
            return ConfigProblem(Diagnostic.YAML_ERROR, detail="recursive_alias")
        if depth > MAX_YAML_DEPTH:
            return ConfigProblem(Diagnostic.YAML_ERROR, detail="too_deep")
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children)
    return None


def _walk_maps(
    node: Any, path: tuple[object, ...] = ()
) -> Iterator[tuple[tuple[object, ...], Mapping[Any, Any]]]:
    """Every mapping and its path; a node reached again through an alias is
    not walked again (an alias bomb is never expanded). The data passed `_shape_problem`."""
    seen: set[int] = set()
    stack: list[tuple[Any, tuple[object, ...]]] = [(node, path)]
    while stack:
        n, p = stack.pop()
        if not isinstance(n, Mapping | list) or id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Mapping):
            yield p, n
            items = list(n.items())
        else:
            items = list(enumerate(n))
        stack.extend(((v, (*p, k)) for k, v in reversed(items)))


def _get(data: Any, path: Sequence[str]) -> tuple[Any, bool]:
    node = data
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None, False
        node = node[part]
    return node, True


def _read_config(path: Path) -> bytes:
    """The config file's bytes (`kexpr.ops.inputs` rules: a regular, non-empty, UTF-8
    file within `MAX_CONFIG_BYTES`), or `UsageError` carrying the one line's tail."""
    from kexpr.ops.inputs import WORDS, InputRefused, read_file, shown

    try:
        return read_file(path, max_bytes=MAX_CONFIG_BYTES)
    except InputRefused as e:
        raise UsageError(
            f"config {shown(path)}: {WORDS[e.problem]} ({e.problem.value})",
            {"input": "config", "path": str(path), "problem": e.problem.value},
        ) from e


def _decode(path: Path, data: bytes) -> str:
    from kexpr.ops.inputs import WORDS, Problem, shown

    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        problem = Problem.NOT_TEXT
        raise UsageError(
            f"config {shown(path)}: {WORDS[problem]} ({problem.value})",
            {"input": "config", "path": str(path), "problem": problem.value},
        ) from e

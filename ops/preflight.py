"""``kexpr preflight`` and ``kexpr migrate-config``: the plan's ordered migration
of host ``config.yaml`` files (plan "Legacy configuration migration and
rollback-safe deployment"; SPEC §10).

The order the plan requires, and what each command contributes:

1. **Config first.** ``migrate-config`` removes only ``coaching_feedback_enabled``
   from every ``physique_checkin`` mapping and adds the exact *disabled*
   ``korean_expression_postprocessor`` block under the adapter extras
   (``platforms.telegram.extra`` unless ``--extra-path`` says otherwise). Old host
   code reads an absent legacy boolean as false, so this disables only the
   obsolete generated feedback, never the check-in itself
   (``physique_checkin.enabled`` is untouched and reported).
2. **Preflight gate.** ``preflight`` fails a release while any loaded
   ``physique_checkin`` still carries ``coaching_feedback_enabled`` (true *or*
   false) with the enum diagnostic ``legacy_coaching_feedback_enabled`` — never
   a silent fallback — and validates any postprocessor block with the shim's own
   strict parser (`gateway_shim.config.KoreanExpressionConfig.from_extra`: exact
   shape, allow-list, ``timeout_seconds: 3``, no unknown key such as ``api_key``
   or ``base_url``). Absent or exact (disabled, or intentionally shadow/enabled)
   passes; a YAML error fails.

Rules:

- **Fail closed.** Anything this module cannot prove (a YAML error, a flow-style
  mapping it would have to rewrite, a result that does not re-parse to exactly
  the intended data) is a refusal with an enum diagnostic; nothing is written.
- **Layout is preserved byte for byte.** ruamel.yaml's round-trip *loader* gives
  the line and column of every key (comments and layout are its business); the
  edit itself is textual: delete the legacy key's own line, insert the block's
  lines after the ``extra:`` line, in the file's indentation and line endings.
  (ruamel's round-trip *dumper* re-indents a whole file and moves comments —
  measured on the profile fixtures — so it is not used to write.) Then the new
  text is loaded again and must equal the old data minus the legacy keys plus
  the block, and must pass preflight.
- **Dry run by default**; ``--write`` keeps a byte-identical backup
  (``CONFIG.kexpr-backup-<UTC>``, same mode, ``O_EXCL``) and replaces the file
  atomically (same directory, fsync, rename, directory fsync), refusing a symlink
  or a file that changed since it was read.
- **No content in output.** Host configs hold tokens and keys. Output names
  key paths, line numbers and enum diagnostics only; ``--diff`` prints a
  zero-context diff, i.e. only the removed legacy lines and the added block.
- YAML is read with ruamel's YAML 1.2 safe loader (duplicate keys and Python
  tags are errors). It is stricter than a YAML 1.1 host loader (``yes`` is not a
  boolean here), so a config that passes here is read identically by the host.

ruamel.yaml is the ``[ops]`` extra: imported only by these two commands, so the
gateway-side install stays light.
"""

from __future__ import annotations

import copy
import datetime as dt
import difflib
import enum
import json
import os
import re
import stat
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gateway_shim.config import (
    CONFIG_KEY,
    ConfigDiagnostic,
    KoreanExpressionConfig,
    Mode,
    exact_block,
)

LEGACY_KEY: Final = "coaching_feedback_enabled"
CHECKIN_KEY: Final = "physique_checkin"
DEFAULT_EXTRA_PATH: Final = "platforms.telegram.extra"
MAX_CONFIG_BYTES: Final = 4 * 1024 * 1024
# Issue 14 item 6: a config's data is judged only if, with every alias expanded
# where it is used (merge keys included), it has at most this many nodes and
# this depth; a recursive alias is refused. The check itself visits each node
# once (a "billion laughs" file is refused in microseconds, not walked).
MAX_YAML_NODES: Final = 100_000
MAX_YAML_DEPTH: Final = 64
BLOCK_COMMENT: Final = "# Korean expression postprocessor: exact block, disabled until promoted (kexpr)"
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
    # migrate-config only
    NOT_LINE_EDITABLE = "not_line_editable"
    LEGACY_KEY_SOLE_ENTRY = "legacy_key_sole_entry"
    MIGRATION_UNVERIFIED = "migration_unverified"
    CONFIG_IS_SYMLINK = "config_is_symlink"
    CONFIG_CHANGED = "config_changed"


@dataclass(frozen=True, slots=True)
class Problem:
    diagnostic: Diagnostic
    where: str = ""  # a key path or "line N"; never a value
    detail: str = ""  # a sub-enum (e.g. the shim's ConfigDiagnostic)

    def text(self) -> str:
        out = self.diagnostic.value + (f":{self.detail}" if self.detail else "")
        return out + (f" at {self.where}" if self.where else "")

    def to_json(self) -> dict[str, str]:
        return {"diagnostic": self.diagnostic.value, "where": self.where, "detail": self.detail}


class UsageError(Exception):
    """The input cannot be examined at all (missing file, no ruamel): exit 2."""


def _require_ruamel() -> None:
    try:
        import ruamel.yaml  # noqa: F401
    except ImportError as e:
        raise UsageError("requires the [ops] extra: pip install 'kexpr[ops]' (ruamel.yaml)") from e


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


def _load_rt(text: str) -> Any:
    from ruamel.yaml import YAML

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return YAML(typ="rt").load(text)


def _yaml_problem(e: BaseException) -> Problem:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    line = getattr(mark, "line", None)
    return Problem(Diagnostic.YAML_ERROR, f"line {line + 1}" if isinstance(line, int) else "")


def _shape_problem(data: Any) -> Problem | None:
    """`MAX_YAML_NODES` / `MAX_YAML_DEPTH` / no recursive alias (issue 14
    item 6). Iterative, each node visited once; a node's expanded size is
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
                return Problem(Diagnostic.YAML_ERROR, detail="too_many_nodes")
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in on_path:
            return Problem(Diagnostic.YAML_ERROR, detail="recursive_alias")
        if depth > MAX_YAML_DEPTH:
            return Problem(Diagnostic.YAML_ERROR, detail="too_deep")
        on_path.add(key)
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children)
    return None


def _walk_maps(node: Any, path: tuple[object, ...] = ()) -> Iterator[tuple[tuple[object, ...], Mapping[Any, Any]]]:
    """Every mapping and its path; a node reached again through an alias is
    not walked again (issue 14 item 6). The data passed `_shape_problem`."""
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


def _legacy_paths(data: Any) -> list[tuple[object, ...]]:
    """Every ``physique_checkin`` mapping (anywhere) that still has the legacy key."""
    return [
        (*path, CHECKIN_KEY)
        for path, m in _walk_maps(data)
        if isinstance(m.get(CHECKIN_KEY), Mapping) and LEGACY_KEY in m[CHECKIN_KEY]
    ]


def _get(data: Any, path: Sequence[str]) -> tuple[Any, bool]:
    node = data
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None, False
        node = node[part]
    return node, True


# ------------------------------------------------------------------ preflight


@dataclass(slots=True)
class PreflightResult:
    config: str
    problems: list[Problem] = field(default_factory=list)
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
            "postprocessor": self.postprocessor,
            "physique_checkin_enabled": self.physique_checkin_enabled,
        }


def preflight_text(text: str, *, extra_path: str = DEFAULT_EXTRA_PATH, name: str = "") -> PreflightResult:
    """Judge one host config (the text of a ``config.yaml``)."""
    _require_ruamel()
    from ruamel.yaml.error import YAMLError

    result = PreflightResult(name)
    path = _split_path(extra_path)
    try:
        data = _load_plain(text)
    except (YAMLError, Warning) as e:
        result.problems.append(_yaml_problem(e))
        return result
    except RecursionError:
        result.problems.append(Problem(Diagnostic.YAML_ERROR, detail="too_deep"))
        return result
    shape = _shape_problem(data)
    if shape is not None:
        result.problems.append(shape)
        return result
    if not isinstance(data, Mapping):
        result.problems.append(Problem(Diagnostic.NOT_A_MAPPING))
        return result
    for legacy in _legacy_paths(data):
        result.problems.append(Problem(Diagnostic.LEGACY_COACHING_FEEDBACK_ENABLED, _path_text((*legacy, LEGACY_KEY))))
    for where, m in _walk_maps(data):
        if CONFIG_KEY in m and tuple(where) != path:
            result.problems.append(Problem(Diagnostic.POSTPROCESSOR_MISPLACED, _path_text((*where, CONFIG_KEY))))
    extra, found = _get(data, path)
    if not found:
        result.problems.append(Problem(Diagnostic.EXTRA_PATH_MISSING, _path_text(path)))
        return result
    if not isinstance(extra, Mapping):
        result.problems.append(Problem(Diagnostic.EXTRA_NOT_A_MAPPING, _path_text(path)))
        return result
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
        result.problems.append(
            Problem(Diagnostic.POSTPROCESSOR_INVALID, _path_text((*path, CONFIG_KEY)), config.diagnostic.value)
        )
    return result


# ------------------------------------------------------------------ migration


@dataclass(frozen=True, slots=True)
class Change:
    action: str  # "remove" | "add"
    line: int  # 1-based, in the file the change applies to (old for remove, new for add)
    where: str
    lines: int = 1


@dataclass(slots=True)
class MigrationPlan:
    config: str
    changes: list[Change] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    new_text: str | None = None
    after: PreflightResult | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def needed(self) -> bool:
        return bool(self.changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "verdict": "refused" if not self.ok else ("planned" if self.needed else "nothing_to_do"),
            "changes": [
                {"action": c.action, "line": c.line, "where": c.where, "lines": c.lines} for c in self.changes
            ],
            "problems": [p.to_json() for p in self.problems],
            "after": None if self.after is None else self.after.to_json(),
        }


def _block_lines(indent: str, step: str) -> list[str]:
    """The exact disabled block (`gateway_shim.config.exact_block`), as YAML lines."""

    def scalar(v: object) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)

    lines = [f"{indent}{BLOCK_COMMENT}", f"{indent}{CONFIG_KEY}:"]
    for k, v in exact_block(Mode.DISABLED).items():
        if isinstance(v, Mapping):
            lines.append(f"{indent}{step}{k}:")
            lines += [f"{indent}{step}{step}{k2}: {scalar(v2)}" for k2, v2 in v.items()]
        else:
            lines.append(f"{indent}{step}{k}: {scalar(v)}")
    return lines


def _is_block_map(node: Any) -> bool:
    from ruamel.yaml.comments import CommentedMap

    return isinstance(node, CommentedMap) and not node.fa.flow_style()


def plan_migration(text: str, *, extra_path: str = DEFAULT_EXTRA_PATH, name: str = "") -> MigrationPlan:
    """What ``migrate-config`` would do to ``text``; `MigrationPlan.new_text` is
    the verified result (None when there is nothing to do or it refuses)."""
    _require_ruamel()
    from ruamel.yaml.error import YAMLError

    plan = MigrationPlan(name)
    path = _split_path(extra_path)
    before = preflight_text(text, extra_path=extra_path, name=name)
    blocking = [
        p for p in before.problems if p.diagnostic is not Diagnostic.LEGACY_COACHING_FEEDBACK_ENABLED
    ]
    if blocking:
        # A YAML error, a missing extra mapping or an invalid/misplaced block is
        # the operator's to fix by hand: never overwritten by a tool.
        plan.problems = blocking
        return plan
    try:
        rt = _load_rt(text)
        plain = _load_plain(text)
    except (YAMLError, Warning) as e:
        plan.problems.append(_yaml_problem(e))
        return plan
    except RecursionError:
        plan.problems.append(Problem(Diagnostic.YAML_ERROR, detail="too_deep"))
        return plan

    lines = text.splitlines(keepends=True)
    newline = "\r\n" if "\r\n" in text else "\n"
    remove: set[int] = set()
    expected = copy.deepcopy(plain)
    for legacy in _legacy_paths(rt):
        checkin = _node_at(rt, legacy)
        where = _path_text((*legacy, LEGACY_KEY))
        if not _is_block_map(checkin):
            plan.problems.append(Problem(Diagnostic.NOT_LINE_EDITABLE, where))
            continue
        if len(checkin) == 1:
            plan.problems.append(Problem(Diagnostic.LEGACY_KEY_SOLE_ENTRY, where))
            continue
        try:
            key_line, _ = checkin.lc.key(LEGACY_KEY)
            value_line, _ = checkin.lc.value(LEGACY_KEY)
        except KeyError:
            # Not a line of this mapping: it arrives through a ``<<`` merge.
            plan.problems.append(Problem(Diagnostic.NOT_LINE_EDITABLE, where))
            continue
        value = checkin[LEGACY_KEY]
        if key_line != value_line or isinstance(value, Mapping | list):
            plan.problems.append(Problem(Diagnostic.NOT_LINE_EDITABLE, where))
            continue
        remove.add(key_line)
        plan.changes.append(Change("remove", key_line + 1, where))
        del _node_at(expected, legacy)[LEGACY_KEY]

    insert_after: int | None = None
    block: list[str] = []
    if before.postprocessor.get("block") == "absent":
        parent = _node_at(rt, path[:-1])
        extra = _node_at(rt, path)
        if not (_is_block_map(parent) and _is_block_map(extra) and len(extra) > 0):
            plan.problems.append(Problem(Diagnostic.NOT_LINE_EDITABLE, _path_text(path)))
        else:
            try:
                extra_line, extra_col = parent.lc.key(path[-1])
                first_line, first_col = extra.lc.key(next(iter(extra)))
            except KeyError:  # a merged-in key: no line of its own
                extra_line = first_line = -1
                extra_col = first_col = 0
            if first_line < 0 or first_line <= extra_line or first_col <= extra_col or extra_line in remove:
                plan.problems.append(Problem(Diagnostic.NOT_LINE_EDITABLE, _path_text(path)))
            else:
                insert_after = extra_line
                block = _block_lines(" " * first_col, " " * (first_col - extra_col))
                _node_at(expected, path)[CONFIG_KEY] = exact_block(Mode.DISABLED)
    if plan.problems or (not remove and insert_after is None):
        return plan

    out: list[str] = []
    added_at = 0
    for i, line in enumerate(lines):
        if i not in remove:
            out.append(line)
        if i == insert_after:
            if not out[-1].endswith(("\n", "\r")):
                out[-1] += newline
            added_at = len(out) + 1
            out += [b + newline for b in block]
    if insert_after is not None:
        plan.changes.append(Change("add", added_at, _path_text((*path, CONFIG_KEY)), len(block)))
    new_text = "".join(out)

    # Verify (fail closed): the new text is exactly the intended data and passes.
    try:
        if _load_plain(new_text) != expected:
            raise ValueError("data")
        _load_rt(new_text)
    except (YAMLError, Warning, ValueError, RecursionError):
        plan.problems.append(Problem(Diagnostic.MIGRATION_UNVERIFIED))
        return plan
    after = preflight_text(new_text, extra_path=extra_path, name=name)
    plan.after = after
    if not after.passed or after.physique_checkin_enabled != before.physique_checkin_enabled:
        plan.problems.append(Problem(Diagnostic.MIGRATION_UNVERIFIED))
        return plan
    plan.new_text = new_text
    return plan


def _node_at(data: Any, path: Sequence[object]) -> Any:
    node = data
    for part in path:
        node = node[part]
    return node


def zero_context_diff(old: str, new: str, name: str) -> str:
    """Only the changed lines: the legacy key lines out, the block in."""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"{name} (before)", f"{name} (after)", n=0
        )
    )


def write_migration(path: Path, original: bytes, new_text: str, *, now: dt.datetime | None = None) -> Path:
    """Back up ``original`` and atomically replace ``path`` with ``new_text``.

    Refuses (`MigrationRefused`) a symlink, a non-regular file, or a file whose
    bytes changed since ``original`` was read. Partial state (the staging file)
    is removed on any exception, then re-raised.
    """
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        raise MigrationRefused(Diagnostic.CONFIG_IS_SYMLINK)
    if _read_config(path) != original:
        raise MigrationRefused(Diagnostic.CONFIG_CHANGED)
    mode = stat.S_IMODE(st.st_mode)
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    backup = path.with_name(f"{path.name}.kexpr-backup-{stamp}")
    _create_exclusive(backup, original, mode, st)
    staging = path.with_name(f".{path.name}.kexpr-migrate-{os.getpid()}-{os.urandom(4).hex()}")
    _create_exclusive(staging, new_text.encode("utf-8"), mode, st)
    try:
        os.replace(staging, path)
    except BaseException:
        try:
            os.unlink(staging)
        except FileNotFoundError:
            pass
        raise
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return backup


class MigrationRefused(Exception):
    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.value)
        self.diagnostic = diagnostic


def _create_exclusive(path: Path, data: bytes, mode: int, like: os.stat_result) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)  # the umask must not narrow or widen the host's mode
        if os.geteuid() == 0:
            os.fchown(fd, like.st_uid, like.st_gid)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def _read_config(path: Path) -> bytes:
    from ops.readers import ReadRefused, read_nofollow

    try:
        return read_nofollow(path, max_bytes=MAX_CONFIG_BYTES)
    except ReadRefused as e:
        raise UsageError(f"{path}: cannot read config ({e.problem.value})") from e


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8") from e


# ------------------------------------------------------------------ commands


def preflight_cli(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="kexpr preflight",
        description="fail a release while a host config still has coaching_feedback_enabled, "
        "or has a korean_expression_postprocessor block that is not exact "
        "(exit 0 pass, 1 fail, 2 unusable input)",
    )
    p.add_argument("configs", nargs="+", type=Path, metavar="CONFIG.yaml")
    p.add_argument("--extra-path", default=DEFAULT_EXTRA_PATH, help=f"adapter extras (default {DEFAULT_EXTRA_PATH})")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        results = [
            preflight_text(_decode(c, _read_config(c)), extra_path=a.extra_path, name=str(c)) for c in a.configs
        ]
    except UsageError as e:
        print(f"kexpr preflight: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps({"schema": "kexpr-preflight-v1", "results": [r.to_json() for r in results]}, sort_keys=True))
    else:
        for r in results:
            pp = r.postprocessor
            state = f"postprocessor {pp.get('block', '?')} (mode {pp.get('mode', '?')})" if pp else ""
            surfaces = pp.get("surfaces")
            if surfaces:
                on = [k for k, v in surfaces.items() if v]
                state += (" surfaces " + ",".join(on)) if on else " no surface on"
            print(f"{r.config}: {'PASS' if r.passed else 'FAIL'}  {state}  physique_checkin.enabled {r.physique_checkin_enabled}")
            for prob in r.problems:
                print(f"  FAIL {prob.text()}")
    return 0 if all(r.passed for r in results) else 1


def migrate_cli(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="kexpr migrate-config",
        description="remove coaching_feedback_enabled and add the exact disabled block, "
        "preserving comments and layout (dry run unless --write; exit 0 ok, 1 refused, 2 unusable input)",
    )
    p.add_argument("config", type=Path, metavar="CONFIG.yaml")
    p.add_argument("--extra-path", default=DEFAULT_EXTRA_PATH, help=f"adapter extras (default {DEFAULT_EXTRA_PATH})")
    p.add_argument("--write", action="store_true", help="apply (keeps CONFIG.kexpr-backup-<UTC>)")
    p.add_argument("--diff", action="store_true", help="print the zero-context diff (changed lines only)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        original = _read_config(a.config)
        text = _decode(a.config, original)
        plan = plan_migration(text, extra_path=a.extra_path, name=str(a.config))
    except UsageError as e:
        print(f"kexpr migrate-config: {e}", file=sys.stderr)
        return 2
    backup: Path | None = None
    if plan.ok and plan.new_text is not None and a.write:
        try:
            backup = write_migration(a.config, original, plan.new_text)
        except MigrationRefused as e:
            plan.problems.append(Problem(e.diagnostic))
    if a.json:
        out = plan.to_json()
        out["written"] = backup is not None
        if backup is not None:
            out["verdict"] = "migrated"
        out["backup"] = None if backup is None else str(backup)
        print(json.dumps(out, sort_keys=True))
    else:
        _print_plan(plan, backup, a.write)
        if a.diff and plan.new_text is not None:
            sys.stdout.write(zero_context_diff(text, plan.new_text, a.config.name))
    return 0 if plan.ok else 1


def _print_plan(plan: MigrationPlan, backup: Path | None, write: bool) -> None:
    if not plan.ok:
        print(f"{plan.config}: REFUSED (nothing written)")
        for prob in plan.problems:
            print(f"  {prob.text()}")
        return
    if not plan.needed:
        print(f"{plan.config}: nothing to do (no legacy key; block present or exact)")
        return
    head = "migrated" if backup is not None else ("would migrate (dry run: nothing written; --write to apply)" if not write else "not written")
    print(f"{plan.config}: {head}")
    for c in plan.changes:
        sign, what = ("-", "remove") if c.action == "remove" else ("+", "add")
        extra = f" (exact block, mode disabled; {c.lines} lines)" if c.action == "add" else ""
        print(f"  {sign} line {c.line}: {what} {c.where}{extra}")
    if plan.after is not None:
        print(f"  after: preflight {'pass' if plan.after.passed else 'FAIL'}, physique_checkin.enabled {plan.after.physique_checkin_enabled}")
    if backup is not None:
        print(f"  backup: {backup}")

"""``kexpr migrate-config``'s comment-preserving migration of one host config: step 1
"Config first" of the ordered migration (`kexpr.ops.preflight` states the step;
design §10).

Rules of `kexpr.ops.preflight` that apply here:

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
"""

from __future__ import annotations

import copy
import datetime as dt
import difflib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gateway_shim.config import CONFIG_KEY, Mode, exact_block
from kexpr.ops._config_checks import (
    DEFAULT_EXTRA_PATH,
    LEGACY_KEY,
    PreflightResult,
    _legacy_paths,
    preflight_text,
)
from kexpr.ops._config_yaml import (
    ConfigProblem,
    Diagnostic,
    YamlRefused,
    _load_plain,
    _load_rt,
    _load_yaml,
    _path_text,
    _read_config,
    _require_ruamel,
    _split_path,
)

BLOCK_COMMENT: Final = (
    "# Korean expression postprocessor: exact block, disabled until promoted (kexpr)"
)


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
    problems: list[ConfigProblem] = field(default_factory=list)
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
            "verdict": "refused"
            if not self.ok
            else ("planned" if self.needed else "nothing_to_do"),
            "changes": [
                {"action": c.action, "line": c.line, "where": c.where, "lines": c.lines}
                for c in self.changes
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


def plan_migration(
    text: str, *, extra_path: str = DEFAULT_EXTRA_PATH, name: str = ""
) -> MigrationPlan:
    """What ``migrate-config`` would do to ``text``; `MigrationPlan.new_text` is
    the verified result (None when there is nothing to do or it refuses)."""
    _require_ruamel()
    from ruamel.yaml.error import YAMLError

    plan = MigrationPlan(name)
    path = _split_path(extra_path)
    before = preflight_text(text, extra_path=extra_path, name=name)
    blocking = [
        p
        for p in before.problems
        if p.diagnostic is not Diagnostic.LEGACY_COACHING_FEEDBACK_ENABLED
    ]
    if blocking:
        # A YAML error, a missing extra mapping or an invalid/misplaced block is
        # the operator's to fix by hand: never overwritten by a tool.
        plan.problems = blocking
        return plan
    try:
        rt = _load_yaml(text, _load_rt)
        plain = _load_yaml(text, _load_plain)
    except YamlRefused as e:
        plan.problems.append(e.problem)
        return plan

    lines = text.splitlines(keepends=True)
    newline = "\r\n" if "\r\n" in text else "\n"
    remove: set[int] = set()
    expected = copy.deepcopy(plain)
    for legacy in _legacy_paths(rt):
        checkin = _node_at(rt, legacy)
        where = _path_text((*legacy, LEGACY_KEY))
        if not _is_block_map(checkin):
            plan.problems.append(ConfigProblem(Diagnostic.NOT_LINE_EDITABLE, where))
            continue
        if len(checkin) == 1:
            plan.problems.append(ConfigProblem(Diagnostic.LEGACY_KEY_SOLE_ENTRY, where))
            continue
        try:
            key_line, _ = checkin.lc.key(LEGACY_KEY)
            value_line, _ = checkin.lc.value(LEGACY_KEY)
        except KeyError:
            # Not a line of this mapping: it arrives through a ``<<`` merge.
            plan.problems.append(ConfigProblem(Diagnostic.NOT_LINE_EDITABLE, where))
            continue
        value = checkin[LEGACY_KEY]
        if key_line != value_line or isinstance(value, Mapping | list):
            plan.problems.append(ConfigProblem(Diagnostic.NOT_LINE_EDITABLE, where))
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
            plan.problems.append(ConfigProblem(Diagnostic.NOT_LINE_EDITABLE, _path_text(path)))
        else:
            try:
                extra_line, extra_col = parent.lc.key(path[-1])
                first_line, first_col = extra.lc.key(next(iter(extra)))
            except KeyError:  # a merged-in key: no line of its own
                extra_line = first_line = -1
                extra_col = first_col = 0
            if (
                first_line < 0
                or first_line <= extra_line
                or first_col <= extra_col
                or extra_line in remove
            ):
                plan.problems.append(ConfigProblem(Diagnostic.NOT_LINE_EDITABLE, _path_text(path)))
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
        plan.problems.append(ConfigProblem(Diagnostic.MIGRATION_UNVERIFIED))
        return plan
    after = preflight_text(new_text, extra_path=extra_path, name=name)
    plan.after = after
    if not after.passed or after.physique_checkin_enabled != before.physique_checkin_enabled:
        plan.problems.append(ConfigProblem(Diagnostic.MIGRATION_UNVERIFIED))
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
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            f"{name} (before)",
            f"{name} (after)",
            n=0,
        )
    )


def write_migration(
    path: Path, original: bytes, new_text: str, *, now: dt.datetime | None = None
) -> Path:
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

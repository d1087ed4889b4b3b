"""``kexpr preflight`` and ``kexpr migrate-config``: the plan's ordered migration
of host ``config.yaml`` files (plan "Legacy configuration migration and
rollback-safe deployment"; design §10).

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
   or ``base_url``) on the data the host's loader reads (PyYAML ``safe_load``,
   YAML 1.1: ``daily: yes`` is ``true`` there, and so here). Absent or exact
   (disabled, or intentionally shadow/enabled) passes; a YAML error fails.

Rules (each module says which apply to it):

- **Fail closed.** Anything this module cannot prove (a YAML error, a flow-style
  mapping it would have to rewrite, a result that does not re-parse to exactly
  the intended data) is a refusal with an enum diagnostic; nothing is written.
- **No content in output.** Host configs hold tokens and keys. Output names
  key paths, line numbers and enum diagnostics only; ``--diff`` prints a
  zero-context diff, i.e. only the removed legacy lines and the added block.

Where the code lives (names stay importable from here):

- `kexpr.ops._config_yaml`: reading a config — size and shape bounds, YAML loaders,
  printable key paths, the `Diagnostic` vocabulary.
- `kexpr.ops._config_checks`: `preflight_text`, the judgement of one config.
- `kexpr.ops._config_migration`: `plan_migration` (the line edit and its verification)
  and `write_migration` (backup and atomic replace).
- here: the two commands.

ruamel.yaml is the ``[ops]`` extra: imported only by these two commands, so the
gateway-side install stays light.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kexpr.ops._config_checks import (
    CHECKIN_KEY,
    DEFAULT_EXTRA_PATH,
    HOST_LOADER,
    LEGACY_KEY,
    PreflightResult,
    preflight_text,
)
from kexpr.ops._config_migration import (
    BLOCK_COMMENT,
    Change,
    MigrationPlan,
    MigrationRefused,
    plan_migration,
    write_migration,
    zero_context_diff,
)
from kexpr.ops._config_yaml import (
    MAX_CONFIG_BYTES,
    MAX_YAML_DEPTH,
    MAX_YAML_NODES,
    ConfigProblem,
    Diagnostic,
    UsageError,
    _decode,
    _read_config,
)

__all__ = [
    "BLOCK_COMMENT",
    "CHECKIN_KEY",
    "DEFAULT_EXTRA_PATH",
    "HOST_LOADER",
    "LEGACY_KEY",
    "MAX_CONFIG_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "Change",
    "Diagnostic",
    "MigrationPlan",
    "MigrationRefused",
    "PreflightResult",
    "ConfigProblem",
    "UsageError",
    "migrate_cli",
    "plan_migration",
    "preflight_cli",
    "preflight_text",
    "write_migration",
    "zero_context_diff",
]

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
    p.add_argument(
        "--extra-path",
        default=DEFAULT_EXTRA_PATH,
        help=f"adapter extras (default {DEFAULT_EXTRA_PATH})",
    )
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        results = [
            preflight_text(_decode(c, _read_config(c)), extra_path=a.extra_path, name=str(c))
            for c in a.configs
        ]
    except UsageError as e:
        print(f"kexpr preflight: {e}", file=sys.stderr)
        if a.json and e.error is not None:
            print(json.dumps({"error": e.error}, sort_keys=True))
        return 2
    if a.json:
        print(
            json.dumps(
                {
                    "schema": "kexpr-preflight-v1",
                    "loader": HOST_LOADER,
                    "results": [r.to_json() for r in results],
                },
                sort_keys=True,
            )
        )
    else:
        print(
            "read as the host reads it: PyYAML safe_load, YAML 1.1 "
            "(yes/no/on/off are booleans there)"
        )
        for r in results:
            pp = r.postprocessor
            state = (
                f"postprocessor {pp.get('block', '?')} (mode {pp.get('mode', '?')})" if pp else ""
            )
            surfaces = pp.get("surfaces")
            if surfaces:
                on = [k for k, v in surfaces.items() if v]
                state += (" surfaces " + ",".join(on)) if on else " no surface on"
            print(
                f"{r.config}: {'PASS' if r.passed else 'FAIL'}  {state}  physique_checkin.enabled {r.physique_checkin_enabled}"
            )
            for prob in r.problems:
                print(f"  FAIL {prob.text()}")
            for note in r.notes:
                if note.diagnostic is Diagnostic.YAML11_BOOLEAN:
                    print(
                        f"  NOTE {note.text()} (the host reads this value as {note.detail}; "
                        f"write {note.detail} to say so in YAML 1.2 too)"
                    )
                else:
                    print(f"  NOTE {note.text()} (only {a.extra_path}.{CHECKIN_KEY} is read)")
    return 0 if all(r.passed for r in results) else 1


def migrate_cli(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="kexpr migrate-config",
        description="remove coaching_feedback_enabled and add the exact disabled block, "
        "preserving comments and layout (dry run unless --write; exit 0 ok, 1 refused, 2 unusable input)",
    )
    p.add_argument("config", type=Path, metavar="CONFIG.yaml")
    p.add_argument(
        "--extra-path",
        default=DEFAULT_EXTRA_PATH,
        help=f"adapter extras (default {DEFAULT_EXTRA_PATH})",
    )
    p.add_argument("--write", action="store_true", help="apply (keeps CONFIG.kexpr-backup-<UTC>)")
    p.add_argument(
        "--diff", action="store_true", help="print the zero-context diff (changed lines only)"
    )
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        original = _read_config(a.config)
        text = _decode(a.config, original)
        plan = plan_migration(text, extra_path=a.extra_path, name=str(a.config))
    except UsageError as e:
        print(f"kexpr migrate-config: {e}", file=sys.stderr)
        if a.json and e.error is not None:
            print(json.dumps({"error": e.error}, sort_keys=True))
        return 2
    backup: Path | None = None
    if plan.ok and plan.new_text is not None and a.write:
        try:
            backup = write_migration(a.config, original, plan.new_text)
        except MigrationRefused as e:
            plan.problems.append(ConfigProblem(e.diagnostic))
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
    head = (
        "migrated"
        if backup is not None
        else (
            "would migrate (dry run: nothing written; --write to apply)"
            if not write
            else "not written"
        )
    )
    print(f"{plan.config}: {head}")
    for c in plan.changes:
        sign, what = ("-", "remove") if c.action == "remove" else ("+", "add")
        extra = f" (exact block, mode disabled; {c.lines} lines)" if c.action == "add" else ""
        print(f"  {sign} line {c.line}: {what} {c.where}{extra}")
    if plan.after is not None:
        print(
            f"  after: preflight {'pass' if plan.after.passed else 'FAIL'}, physique_checkin.enabled {plan.after.physique_checkin_enabled}"
        )
    if backup is not None:
        print(f"  backup: {backup}")

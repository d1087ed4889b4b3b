"""The ``kexpr`` command line.

Each command lives in its own module and is imported only when run, so that
``kexpr contract check`` on a gateway host never imports the worker or its SDK.
To add a command, add one row to `COMMANDS`: ``name -> (module, function, help)``;
the function takes the remaining argv and returns the exit code.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final

COMMANDS: Final[Mapping[str, tuple[str, str, str]]] = {
    "run": ("ops.demo", "cli", "the main job: supervised worker + sample presentations, as a table"),
    "supervise": ("ops.supervisor", "cli", "run the worker under supervision (explicit minimal env)"),
    "worker": ("worker.main", "main", "run the worker in the foreground (started by `supervise`)"),
    "surfaces": ("ops.surfaces_cli", "cli", "surfaces check: run host messages through the adapters (verdicts only)"),
    "contract": ("ops.contract_cli", "cli", "contract check: judge recorded responses against a capsule"),
    "status": ("ops.status_cli", "cli", "worker state, heartbeat and counters (human or --json; no content)"),
    "audit": ("ops.audit", "cli", "credential isolation, permissions, journal chain, spool redaction scan"),
    "preflight": ("ops.preflight", "preflight_cli", "check host config.yaml files before a release (legacy key, exact block)"),
    "migrate-config": ("ops.preflight", "migrate_cli", "remove the legacy key and add the exact disabled block (dry run unless --write)"),
    "promotion-report": ("ops.promotion", "cli", "shadow evidence per surface and promotion gates, from the journal"),
    "glossary": ("ops.glossary_cli", "cli", "glossary check | install: the operator's dual decision/reason texts (digest; no text)"),
    "journal": ("ops.journal_cli", "cli", "journal verify | stats | prune | quarantine (enums and counts; no content)"),
}


def usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: kexpr <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, _, help_) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    entry = COMMANDS.get(args[0])
    if entry is None:
        print(usage(), file=sys.stderr)
        return 2
    module, function, _ = entry
    fn: Callable[[list[str]], int] = getattr(importlib.import_module(module), function)
    return fn(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())

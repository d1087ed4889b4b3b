"""The ``kexpr`` command line.

Each command lives in its own module and is imported only when run, so that
``kexpr contract check`` on a gateway host never imports the worker or its SDK.
To add a command, add one row to `COMMANDS`: ``name -> (module, function, help)``;
the function takes the remaining argv and returns the exit code.

Conventions (docs/cli.md holds the exit-code table every command follows):

- ``kexpr --version``; ``kexpr -v <command>`` shows the ``kexpr.*`` log records
  (content-free, enum fields only) on stderr, ``-vv`` at debug level.
- An unknown command says so on stderr and exits 2 (usage), as argparse does for
  a bad option of a known one; ``--help`` of every command exits 0.
- A command listed in `REQUIRES` whose packages are not installed here (the
  gateway-side base install has no ``openai``/``httpx``) prints one line naming
  the extra and exits 2, before anything is started: ``kexpr supervise`` must not
  restart a worker that cannot import its SDK until the crash-loop limit.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from kexpr.spool import log

EXIT_USAGE: Final = 2
_log = log.logger("cli")

COMMANDS: Final[Mapping[str, tuple[str, str, str]]] = {
    "run": (
        "kexpr.ops.demo",
        "cli",
        "the main job: supervised worker + sample presentations, as a table",
    ),
    "supervise": (
        "kexpr.ops.supervisor",
        "cli",
        "run the worker under supervision (explicit minimal env)",
    ),
    "worker": (
        "kexpr.worker.main",
        "main",
        "run the worker in the foreground (started by `supervise`)",
    ),
    "surfaces": (
        "kexpr.ops.surfaces_cli",
        "cli",
        "surfaces check: run host messages through the adapters (verdicts only)",
    ),
    "contract": (
        "kexpr.ops.contract_cli",
        "cli",
        "contract check: judge recorded responses against a capsule",
    ),
    "status": (
        "kexpr.ops.status_cli",
        "cli",
        "worker state, heartbeat and counters (human or --json; no content)",
    ),
    "audit": (
        "kexpr.ops.audit",
        "cli",
        "credential isolation, permissions, journal chain, spool redaction scan",
    ),
    "preflight": (
        "kexpr.ops.preflight",
        "preflight_cli",
        "check host config.yaml files before a release (legacy key, exact block)",
    ),
    "migrate-config": (
        "kexpr.ops.preflight",
        "migrate_cli",
        "remove the legacy key and add the exact disabled block (dry run unless --write)",
    ),
    "promotion-report": (
        "kexpr.ops.promotion",
        "cli",
        "shadow evidence per surface and promotion gates, from the journal",
    ),
    "glossary": (
        "kexpr.ops.glossary_cli",
        "cli",
        "glossary check | install: the operator's dual decision/reason texts (digest; no text)",
    ),
    "identity": (
        "kexpr.ops.identity_cli",
        "cli",
        "identity check | rotate: the data root's identity key (fingerprints; never the key)",
    ),
    "journal": (
        "kexpr.ops.journal_cli",
        "cli",
        "journal verify | stats | prune | quarantine (enums and counts; no content)",
    ),
    "quarantine": (
        "kexpr.ops.quarantine_cli",
        "cli",
        "quarantine clear: a quarantined worker re-verifies and serves again, without a restart",
    ),
    "systemd-units": (
        "kexpr.ops.systemd_units",
        "cli",
        "write the systemd unit files for one instance from the installed package",
    ),
}


# Commands that need an extra beyond the gateway-side base install:
# name -> (extra, import names it brings).
REQUIRES: Final[Mapping[str, tuple[str, tuple[str, ...]]]] = {
    "run": ("worker", ("openai", "httpx")),
    "supervise": ("worker", ("openai", "httpx")),
    "worker": ("worker", ("openai", "httpx")),
}


def usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = ["usage: kexpr [--version] [-v] <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "`kexpr <command> --help` for a command's options; exit codes: docs/cli.md"]
    return "\n".join(lines)


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version("kexpr")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def missing_packages(names: Sequence[str]) -> list[str]:
    """The import names of ``names`` that cannot be imported here, found without
    importing them (the worker imports its SDK only after its environment check)."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    verbosity = 0
    while args and args[0] in ("-v", "-vv", "--verbose"):
        verbosity += 2 if args.pop(0) == "-vv" else 1
    if not args:
        print(usage(), file=sys.stderr)
        return EXIT_USAGE
    if args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if args[0] in ("-V", "--version"):
        print(f"kexpr {version()}")
        return 0
    entry = COMMANDS.get(args[0])
    if entry is None:
        shown = args[0] if args[0].isascii() and args[0].isprintable() else "?"
        print(f"kexpr: unknown command {shown[:40]!r} (`kexpr --help` lists them)", file=sys.stderr)
        return EXIT_USAGE
    wants_help = any(a in ("-h", "--help") for a in args[1:])
    if args[0] in REQUIRES and not wants_help:
        extra, names = REQUIRES[args[0]]
        missing = missing_packages(names)
        if missing:
            print(
                f"kexpr {args[0]}: needs the {extra} extra ({', '.join(missing)} missing here): "
                f"install `kexpr[{extra}]`",
                file=sys.stderr,
            )
            return EXIT_USAGE
    log.configure(verbosity)
    module, function, _ = entry
    fn: Callable[[list[str]], int] = getattr(importlib.import_module(module), function)
    command = log.known(args[0], COMMANDS)
    log.event(_log, logging.DEBUG, "command_started", command=command)
    try:
        code = fn(args[1:])
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        code = 1 if e.code is not None and not isinstance(e.code, int) else (e.code or 0)
    log.event(_log, logging.DEBUG, "command_finished", command=command, exit=code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

"""``kexpr glossary``: the operator's dual decision/reason glossary.

``kexpr glossary check FILE``  validate a file (``-`` for stdin); prints the ID
                               counts and the digest ``kexpr status`` will show.
``kexpr glossary install FILE [--data-root DIR] [--replace]``
                               validate, then publish it atomically as
                               ``<data root>/operator-glossary.json`` with the
                               data root's file mode (0600 / 0660).

The format and the rules are `gateway_shim.operator_glossary`'s. Output is
counts, a digest and enum problems only: never a text or an ID (IDs are
public enum names, but a typo'd one is the operator's to read in their own
file). Exit 0 valid / installed, 1 invalid, 2 unusable input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gateway_shim.operator_glossary import (
    GLOSSARY_FILE_NAME,
    MAX_FILE_BYTES,
    DualGlossary,
    GlossaryError,
    parse_operator_glossary,
)
from kexpr.ops.readers import ReadRefused, read_nofollow
from kexpr.spool.fsio import UnsafePath, publish, unlink_quiet
from kexpr.spool.layout import DEFAULT_DATA_ROOT, DataRoot


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    return read_nofollow(path, max_bytes=MAX_FILE_BYTES)


def _summary(glossary: DualGlossary) -> dict[str, object]:
    return {
        "valid": True,
        "problem": None,
        "decisions": len(glossary.decisions),
        "reasons": len(glossary.reasons),
        "digest": glossary.digest(),
    }


def cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="kexpr glossary", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="validate a glossary file")
    check.add_argument("file")
    install = sub.add_parser("install", help="validate and publish into the data root")
    install.add_argument("file")
    install.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    install.add_argument("--replace", action="store_true", help="replace an installed file")
    a = p.parse_args(argv)
    try:
        data = _read(a.file)
    except ReadRefused as e:
        print(json.dumps({"valid": False, "problem": f"file_{e.problem.value}"}))
        return 2
    try:
        glossary = parse_operator_glossary(data)
    except GlossaryError as e:
        print(json.dumps({"valid": False, "problem": e.problem.value}))
        return 1
    summary = _summary(glossary)
    if a.command == "install":
        root = DataRoot(a.data_root)
        target = root.root / GLOSSARY_FILE_NAME
        try:
            if a.replace:
                unlink_quiet(target)
            publish(root.tmp, target, data)
        except FileExistsError:
            print(json.dumps({**summary, "installed": False, "problem": "already_installed"}))
            return 1
        except (UnsafePath, OSError):
            print(json.dumps({**summary, "installed": False, "problem": "data_root_unusable"}))
            return 2
        summary["installed"] = True
    print(json.dumps(summary, sort_keys=True))
    return 0

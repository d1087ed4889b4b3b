"""`kexpr contract check` — judge raw model responses offline (design §10).

    kexpr contract check --capsule C.json --response R.txt
    kexpr contract check --jsonl CASES.jsonl

Rules for this command:

Rule 1: it prints verdicts, never content: stdout carries only canonical JSON objects
        `{"verdict": ..., "reason": ...}`; stderr carries only usage errors, file-level
        errors (the path and why, `kexpr.ops.inputs`) and enum reasons.
Rule 2: exit codes. Single mode: 0 accepted, 1 rejected (invalid_response or
        validation_rejected), 2 unusable input (bad arguments, unreadable file,
        invalid capsule). JSONL mode: 0 when every line was judged (whatever the
        verdicts), 2 when any line could not be judged or the file is unreadable,
        empty or binary (NUL bytes).
Rule 3: JSONL mode prints exactly one object per input line, in input order. A line
        that is not `{"capsule": {...}, "response": "<raw content>"}` (exactly these two
        keys, no duplicate keys, UTF-8 JSON) prints `{"verdict": null, "reason":
        "invalid_line"}`; a line whose capsule cannot exist prints `{"verdict": null,
        "reason": "invalid_capsule"}`. Empty lines are lines. A final LF does not start
        a new line.
Rule 4: the response is the raw model content: the single-mode file is read as bytes and
        judged as bytes (so BOM, encoding and size are judged, not "fixed" by a reader).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn, TextIO

from kexpr.ops._strict_json import NotStrictJson, jsonl_lines, loads_strict
from kexpr.spool.contract import Capsule, CapsuleError, Verdict, judge

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

PROG: Final = "kexpr contract check"
EXIT_ACCEPTED: Final = 0
EXIT_REJECTED: Final = 1
EXIT_UNUSABLE: Final = 2

INVALID_LINE: Final = "invalid_line"
INVALID_CAPSULE: Final = "invalid_capsule"


class _ParserExit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse that writes to the given streams and returns instead of sys.exit."""

    def __init__(self, *, stdout: TextIO, stderr: TextIO, prog: str, description: str) -> None:
        super().__init__(prog=prog, description=description)
        self._stdout = stdout
        self._stderr = stderr

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        if message:
            (self._stdout if file is None or file is sys.stdout else self._stderr).write(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._stderr.write(message)
        raise _ParserExit(status)


def _build_parser(stdout: TextIO, stderr: TextIO) -> _Parser:
    parser = _Parser(
        stdout=stdout,
        stderr=stderr,
        prog=PROG,
        description="Judge raw model responses against redacted capsules. "
        "Prints verdicts only, never content.",
    )
    parser.add_argument("--capsule", type=Path, help="capsule JSON file (single mode)")
    parser.add_argument("--response", type=Path, help="raw model content file (single mode)")
    parser.add_argument(
        "--jsonl",
        type=Path,
        help='one {"capsule": {...}, "response": "..."} object per line',
    )
    return parser


def _emit(stdout: TextIO, verdict: str | None, reason: str | None) -> None:
    stdout.write(
        json.dumps(
            {"verdict": verdict, "reason": reason},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        + "\n"
    )


# Every input is a regular file read with a cap (no unbounded read). The response
# cap is far above the contract's own limit, so an oversized response is still
# *judged* (rule 4: size is judged, not "fixed" by a reader).
MAX_CAPSULE_FILE_BYTES: Final = 1024 * 1024
MAX_RESPONSE_FILE_BYTES: Final = 16 * 1024 * 1024
MAX_JSONL_FILE_BYTES: Final = 256 * 1024 * 1024


def _read_bytes(
    path: Path, what: str, stderr: TextIO, max_bytes: int, *, raw: bool = False
) -> bytes | None:
    """The whole regular file, at most ``max_bytes``, or None after the one line of
    `kexpr.ops.inputs` (a FIFO or device is refused without blocking). ``raw``: the
    response, judged as bytes (Rule 4): empty or not UTF-8 is the judge's to reject."""
    from kexpr.ops.inputs import InputRefused, read_file, refuse

    try:
        return read_file(
            path, max_bytes=max_bytes, text=not raw, lines=what == "--jsonl", allow_empty=raw
        )
    except InputRefused as e:
        refuse(PROG, what, path, e.problem, stderr=stderr)
        return None


def _single(capsule_path: Path, response_path: Path, stdout: TextIO, stderr: TextIO) -> int:
    capsule_bytes = _read_bytes(capsule_path, "--capsule", stderr, MAX_CAPSULE_FILE_BYTES)
    if capsule_bytes is None:
        return EXIT_UNUSABLE
    try:
        capsule = Capsule.from_json(capsule_bytes)
    except CapsuleError as e:
        stderr.write(
            f"{PROG}: --capsule {_shown(capsule_path)}: invalid capsule ({e.reason.value})\n"
        )
        return EXIT_UNUSABLE
    content = _read_bytes(response_path, "--response", stderr, MAX_RESPONSE_FILE_BYTES, raw=True)
    if content is None:
        return EXIT_UNUSABLE
    judgement = judge(capsule, content)
    verdict = judgement.to_dict()
    _emit(stdout, verdict["verdict"], verdict["reason"])
    return EXIT_ACCEPTED if judgement.verdict is Verdict.ACCEPTED else EXIT_REJECTED


def _shown(path: Path) -> str:
    from kexpr.ops.inputs import shown

    return shown(path)


def _parse_line(raw: bytes) -> tuple[object, str] | None:
    """The line's (capsule object, response) or None for an invalid line."""
    try:
        line = loads_strict(raw)
    except NotStrictJson:
        return None
    if not isinstance(line, dict) or set(line) != {"capsule", "response"}:
        return None
    capsule, response = line["capsule"], line["response"]
    if not isinstance(capsule, dict) or not isinstance(response, str):
        return None
    return capsule, response


def _jsonl(path: Path, stdout: TextIO, stderr: TextIO) -> int:
    data = _read_bytes(path, "--jsonl", stderr, MAX_JSONL_FILE_BYTES)
    if data is None:
        return EXIT_UNUSABLE
    lines = jsonl_lines(data)
    status = EXIT_ACCEPTED
    for number, raw in enumerate(lines, start=1):
        parsed = _parse_line(raw.removesuffix(b"\r"))
        if parsed is None:
            stderr.write(f"{PROG}: line {number}: {INVALID_LINE}\n")
            _emit(stdout, None, INVALID_LINE)
            status = EXIT_UNUSABLE
            continue
        capsule_obj, response = parsed
        try:
            capsule = Capsule.from_object(capsule_obj)
        except CapsuleError as e:
            stderr.write(f"{PROG}: line {number}: {INVALID_CAPSULE} ({e.reason.value})\n")
            _emit(stdout, None, INVALID_CAPSULE)
            status = EXIT_UNUSABLE
            continue
        verdict = judge(capsule, response).to_dict()
        _emit(stdout, verdict["verdict"], verdict["reason"])
    return status


def run_contract_check(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    """Entry point for `kexpr contract check`; returns the exit code (Rule 2)."""
    parser = _build_parser(stdout, stderr)
    try:
        args = parser.parse_args(list(argv))
        single = args.capsule is not None or args.response is not None
        if args.jsonl is not None and single:
            parser.error("--jsonl cannot be combined with --capsule/--response")
        if args.jsonl is None and (args.capsule is None or args.response is None):
            parser.error("give --capsule and --response, or --jsonl")
    except _ParserExit as e:
        return e.status if e.status == 0 else EXIT_UNUSABLE
    if args.jsonl is not None:
        return _jsonl(args.jsonl, stdout, stderr)
    return _single(args.capsule, args.response, stdout, stderr)


def cli(argv: Sequence[str]) -> int:
    """`kexpr contract <argv>` (the `kexpr.ops.cli` COMMANDS row): only `check` exists."""
    args = list(argv)
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(
            "usage: kexpr contract check [-h] ...\n\nsubcommands:\n"
            "  check  judge recorded model responses against a capsule "
            "(`kexpr contract check --help`)\n"
        )
        return 0
    if not args or args[0] != "check":
        sys.stderr.write(
            f"usage: {PROG} [-h] [--capsule CAPSULE] [--response RESPONSE] [--jsonl JSONL]\n"
            "kexpr contract: the only subcommand is `check`\n"
        )
        return EXIT_UNUSABLE
    return run_contract_check(args[1:], sys.stdout, sys.stderr)


if __name__ == "__main__":  # pragma: no cover - `python -m kexpr.ops.contract_cli check ...`
    raise SystemExit(cli(sys.argv[1:]))

"""`kexpr surfaces check` — run real host messages through the surface adapters.

The operator's tool for checking, before a surface is enabled, that the adapters
accept what the host really renders (docs/host-formats.md). Nothing is sent
anywhere and nothing is written: it parses, and reports what a presentation would
issue.

    kexpr surfaces check --jsonl PATH        (PATH or "-": one JSON request per line)
    kexpr surfaces check --surface S FILE [--json] [--explicit-field F]...
                         [--callback-data D] [--origin fresh|recovery]
    either form: [--glossary FILE]  the operator glossary to check dual cards with
                 (the one `kexpr glossary install` would install; default: the
                 shipped public texts only)

Rules for this command:

Rule 1 — the batch interface is fixed (other tools depend on it). A request line is
         exactly one of
           {"surface": "daily.v1", "body": str}
           {"surface": "weekly.v1", "body": str, "explicit_fields": [str, ...]}
             ("explicit_fields" may be omitted: none)
           {"surface": "adaptive.dualcoachtest.card.v1" | "adaptive.physique.card.v1",
            "payload": {...}, "callback_data": str, "origin": "fresh" | "recovery"}
         and its answer, one JSON object per input line, in input order, is
           {"eligible": true,  "reason": null,  "slots": [SLOT, ...], "roundtrip": bool,
            "nothing_to_style": bool, "nothing_to_style_reason": str | null}
           {"eligible": false, "reason": ENUM,  "slots": [],          "roundtrip": null,
            "nothing_to_style": null, "nothing_to_style_reason": null}
         with SLOT = {"slot_id", "predicate_ids", "action_ids"} (the IDs a presentation
         would issue for that slot, in issued order). An eligible body with no slot
         is the host's format with nothing to ask (`nothing_to_style`: true, and
         `NOTHING_TO_STYLE_REASON`, one fixed line): a presentation returns it
         canonical with the outcome `nothing_to_style`, no request. It stays
         eligible, and its roundtrip is judged as any other. A line that is not such a
         request answers `{"eligible": false, "reason": "invalid_request", ...}`.
         In the batch form every answer also carries `"line": N`, its input line
         number (1-based), so a consumer need not count lines.
Rule 1b — a batch line may also be a recorded example (tests/surfaces/goldens):
           {"request": REQUEST, "expected": "eligible" | "ineligible", "example": str}
         ("example", a label, and "expected" may be omitted). REQUEST is judged as
         above; with "expected" the answer adds `"expected"` and `"as_expected": bool`,
         and the line counts for Rule 2 as eligible when the verdict is the expected
         one. The label is never printed.
Rule 2 — exit 0 if every line is eligible, 1 if any is not, 2 if the input is
         unusable (unreadable or empty file, bad arguments, or any invalid_request
         line; `kexpr.ops.inputs` says why in one line). An
         eligible line whose `roundtrip` is false counts as not eligible here: the
         adapter would present something other than what the host rendered.
Rule 3 — `roundtrip` is true when the adapter's canonical presentation equals the
         host text byte for byte; for the physique card, the host text plus the
         code-owned review block and nothing else.
Rule 4 — it prints verdicts, enum reasons and semantic IDs, never the message text:
         the input may hold customer data.
Rule 5 — input is bounded: a regular file (a FIFO or device is refused) or standard
         input, at most `MAX_INPUT_BYTES`, not empty; lines are strict UTF-8 JSON
         objects with no duplicate keys.
Rule 7 — the human (single-message, no ``--json``) form also prints what the answer
         costs: each issued ID's o200k_base tokens and the bound of the capsule's
         minimal answer against the answer budget (both from
         `kexpr.spool.contract.budget`, no tokenizer), also for a message refused as
         ``answer_budget``. The JSON answers stay Rule 1's.
Rule 6 — the single-message form reads a daily/weekly body from a text file, and a
         text editor ends a saved file with one LF that the host's message never has
         (its messages end without a newline): exactly one final LF is dropped there.
         The batch form takes the body as given.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TextIO

from kexpr.ops._strict_json import NotStrictJson, jsonl_lines, loads_strict

if TYPE_CHECKING:
    from gateway_shim.operator_glossary import DualGlossary

PROG: Final = "kexpr surfaces check"
EXIT_ELIGIBLE: Final = 0
EXIT_INELIGIBLE: Final = 1
EXIT_UNUSABLE: Final = 2
MAX_INPUT_BYTES: Final = 16 * 1024 * 1024
INVALID_REQUEST: Final = "invalid_request"
# Why an eligible body, or a whole surface, has nothing to style (design §6.2);
# `kexpr promotion-report`, `kexpr status` and `kexpr run` say the same.
NOTHING_TO_STYLE_REASON: Final = (
    "no style word reads at least as well as the host's text before any of its"
    " sentences (docs/design.md §6.2)"
)
ADAPTER_ERROR: Final = "adapter_error"

DAILY: Final = "daily.v1"
WEEKLY: Final = "weekly.v1"
DUAL: Final = "adaptive.dualcoachtest.card.v1"
PHYSIQUE: Final = "adaptive.physique.card.v1"
SURFACES: Final = (DAILY, WEEKLY, DUAL, PHYSIQUE)
ORIGINS: Final = ("fresh", "recovery")

_KEYS: Final[Mapping[str, tuple[frozenset[str], frozenset[str]]]] = {
    # surface -> (required keys, optional keys)
    DAILY: (frozenset({"surface", "body"}), frozenset()),
    WEEKLY: (frozenset({"surface", "body"}), frozenset({"explicit_fields"})),
    DUAL: (frozenset({"surface", "payload", "callback_data", "origin"}), frozenset()),
    PHYSIQUE: (frozenset({"surface", "payload", "callback_data", "origin"}), frozenset()),
}


class InvalidRequest(Exception):
    """The request is not of the batch interface (Rule 1); no content in it."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    eligible: bool
    reason: str | None
    slots: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]
    roundtrip: bool | None
    # Rule 7: the bound of the capsule's minimal answer (not in the JSON answer).
    answer_tokens: int | None = None
    # Per slot, per sentence (token order): the style runs the fit table allows
    # before it (design §6.1), and how many compositions the slot accepts.
    words: tuple[tuple[tuple[str, ...], ...], ...] = ()
    compositions: tuple[int, ...] = ()

    @property
    def nothing_to_style(self) -> bool | None:
        """Eligible, but no slot to ask (Rule 1); None when not eligible."""
        return None if not self.eligible else not self.slots

    def to_json_object(self) -> dict[str, object]:
        return {
            "eligible": self.eligible,
            "reason": self.reason,
            "slots": [
                {
                    "slot_id": s,
                    "predicate_ids": list(p),
                    "action_ids": list(a),
                    "words": [list(w) for w in words],
                    "compositions": n,
                }
                for (s, p, a), words, n in zip(
                    self.slots, self.words, self.compositions, strict=True
                )
            ],
            "roundtrip": self.roundtrip,
            "nothing_to_style": self.nothing_to_style,
            "nothing_to_style_reason": NOTHING_TO_STYLE_REASON if self.nothing_to_style else None,
        }


def _ineligible(reason: str, answer_tokens: int | None = None) -> CheckResult:
    return CheckResult(
        eligible=False, reason=reason, slots=(), roundtrip=None, answer_tokens=answer_tokens
    )


def _validate(request: object) -> Mapping[str, object]:
    if not isinstance(request, dict):
        raise InvalidRequest
    surface = request.get("surface")
    if not isinstance(surface, str) or surface not in _KEYS:
        raise InvalidRequest
    required, optional = _KEYS[surface]
    keys = set(request)
    if not required <= keys or not keys <= required | optional:
        raise InvalidRequest
    if "body" in request and not isinstance(request["body"], str):
        raise InvalidRequest
    if "explicit_fields" in request:
        fields = request["explicit_fields"]
        if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
            raise InvalidRequest
    if "payload" in request:
        if not isinstance(request["payload"], dict):
            raise InvalidRequest
        if not isinstance(request["callback_data"], str):
            raise InvalidRequest
        if request["origin"] not in ORIGINS:
            raise InvalidRequest
    return request


def check_request(request: object, glossary: DualGlossary | None = None) -> CheckResult:
    """Judge one request (Rule 1). Raises `InvalidRequest` for a malformed one.

    ``glossary``: the dual decision/reason texts to check with (None: shipped)."""
    req = _validate(request)
    # Imported here: `kexpr surfaces --help` needs none of it.
    from gateway_shim.surfaces import CanonicalSurface, Ineligible

    surface = req["surface"]
    parsed: CanonicalSurface
    bound: int | None = None
    try:
        if surface == DAILY:
            from gateway_shim.surfaces.daily import parse_daily

            body = req["body"]
            assert isinstance(body, str)
            parsed = parse_daily(body)
            roundtrip = parsed.canonical().body == body
        elif surface == WEEKLY:
            from gateway_shim.surfaces.weekly import parse_weekly

            body = req["body"]
            fields = req.get("explicit_fields", [])
            assert isinstance(body, str) and isinstance(fields, list)
            parsed = parse_weekly(body, explicit_fields=tuple(fields))
            roundtrip = parsed.canonical().body == body
        else:
            from gateway_shim.surfaces.adaptive import parse_adaptive, presented_host_text
            from gateway_shim.surfaces.card import CardOrigin

            payload = req["payload"]
            callback_data = req["callback_data"]
            assert isinstance(payload, dict) and isinstance(callback_data, str)
            parsed = parse_adaptive(
                payload,
                callback_data=callback_data,
                origin=CardOrigin(req["origin"]),
                surface=str(surface),
                glossary=glossary,
            )
            roundtrip = presented_host_text(parsed) == payload.get("text")
        # A body the shim would not send because its answer cannot arrive in time.
        bound = parsed.answer_token_bound()
        parsed.require_answer_budget()
    except Ineligible as e:
        return _ineligible(e.reason.value, bound)
    from kexpr.spool.contract.fit import compositions, slot_cells

    policies = tuple(slot.policy() for slot in parsed.slots)
    slots = tuple(
        (p.slot_id, tuple(p.allowed_predicate_ids), tuple(p.allowed_action_ids)) for p in policies
    )
    words = tuple(
        tuple(
            tuple(s.text.rstrip() for s in sorted(c)) for c in slot_cells(p.slot_id, p.semantic_ids)
        )
        for p in policies
    )
    counts = tuple(len(compositions(p.slot_id, p.semantic_ids)) for p in policies)
    return CheckResult(
        eligible=True,
        reason=None,
        slots=slots,
        roundtrip=roundtrip,
        answer_tokens=bound,
        words=words,
        compositions=counts,
    )


# --- input --------------------------------------------------------------------------


def parse_json(raw: bytes) -> object:
    """Strict JSON (Rule 5); raises `InvalidRequest`."""
    try:
        return loads_strict(raw)
    except NotStrictJson as e:
        raise InvalidRequest from e


def read_input(path: str, stdin: TextIO, stderr: TextIO, *, what: str = "--jsonl") -> bytes | None:
    """The whole input (Rule 5), or None after a one-line message on stderr."""
    from kexpr.ops.inputs import InputRefused, read_file, refuse

    if path == "-":
        data = stdin.buffer.read(MAX_INPUT_BYTES + 1)
        if len(data) > MAX_INPUT_BYTES:
            stderr.write(f"{PROG}: standard input is larger than {MAX_INPUT_BYTES} bytes\n")
            return None
        if not data:
            stderr.write(f"{PROG}: standard input is empty (no request to check)\n")
            return None
        return data
    try:
        return read_file(path, max_bytes=MAX_INPUT_BYTES, lines=what == "--jsonl")
    except InputRefused as e:
        refuse(PROG, what, path, e.problem, stderr=stderr)
        return None


# --- output -------------------------------------------------------------------------


def _json_line(result: CheckResult) -> str:
    return json.dumps(result.to_json_object(), ensure_ascii=False, separators=(",", ":"))


def _answer_line(result: CheckResult) -> str:
    """Rule 7: the minimal answer's bound against the budget."""
    from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS

    if result.answer_tokens is None:
        return "  answer: no bound"
    verdict = "fits" if result.answer_tokens <= ANSWER_BUDGET_TOKENS else "does NOT fit"
    return (
        f"  answer: at most {result.answer_tokens} tokens (o200k_base) of the"
        f" {ANSWER_BUDGET_TOKENS}-token budget: {verdict}"
    )


def _human(surface: str, result: CheckResult) -> str:
    if not result.eligible:
        line = f"{surface}: ineligible ({result.reason}) — the host's canonical text is used, no request"
        return line if result.answer_tokens is None else f"{line}\n{_answer_line(result)}"
    from kexpr.spool.contract.budget import id_token_bound

    lines = [f"{surface}: eligible"]
    if result.nothing_to_style:
        lines[0] += (
            f", nothing to style: {NOTHING_TO_STYLE_REASON} — the host's canonical text"
            " is used, no request"
        )
    for (slot_id, predicates, actions), words, n in zip(
        result.slots, result.words, result.compositions, strict=True
    ):
        priced = [f"{i} ({id_token_bound(i)} tokens)" for i in predicates + actions]
        lines.append(f"  slot {slot_id}: {' '.join(priced)}")
        runs = ["|".join(repr(w) for w in sentence) or "-" for sentence in words]
        plural = "composition" if n == 1 else "compositions"
        lines.append(f"    words before each sentence: {'; '.join(runs)} ({n} {plural})")
    lines.append(f"  roundtrip: {'yes' if result.roundtrip else 'NO'}")
    lines.append(_answer_line(result))
    return "\n".join(lines)


def _judge(
    request: object, where: str, stderr: TextIO, glossary: DualGlossary | None
) -> tuple[CheckResult, int]:
    """One result and its exit contribution; never raises for bad input."""
    try:
        result = check_request(request, glossary)
    except InvalidRequest:
        stderr.write(f"{PROG}: {where}: {INVALID_REQUEST}\n")
        return _ineligible(INVALID_REQUEST), EXIT_UNUSABLE
    except Exception as e:  # noqa: BLE001 — an adapter bug must not hide the other lines
        stderr.write(f"{PROG}: {where}: {ADAPTER_ERROR} ({type(e).__name__})\n")
        return _ineligible(ADAPTER_ERROR), EXIT_INELIGIBLE
    if not result.eligible or result.roundtrip is not True:
        return result, EXIT_INELIGIBLE
    return result, EXIT_ELIGIBLE


def _unwrap(request: object) -> tuple[object, str | None]:
    """Rule 1b: the request of a recorded example and its expected verdict."""
    if not isinstance(request, dict) or "request" not in request:
        return request, None
    if not set(request) <= {"request", "expected", "example"}:
        raise InvalidRequest
    expected = request.get("expected")
    if expected is not None and expected not in ("eligible", "ineligible"):
        raise InvalidRequest
    if "example" in request and not isinstance(request["example"], str):
        raise InvalidRequest
    return request["request"], expected


def _batch(
    path: str, glossary: DualGlossary | None, stdin: TextIO, stdout: TextIO, stderr: TextIO
) -> int:
    data = read_input(path, stdin, stderr)
    if data is None:
        return EXIT_UNUSABLE
    lines = jsonl_lines(data)
    status = EXIT_ELIGIBLE
    for number, raw in enumerate(lines, start=1):
        expected: str | None = None
        try:
            request, expected = _unwrap(parse_json(raw))
        except InvalidRequest:
            stderr.write(f"{PROG}: line {number}: {INVALID_REQUEST}\n")
            result, code = _ineligible(INVALID_REQUEST), EXIT_UNUSABLE
        else:
            result, code = _judge(request, f"line {number}", stderr, glossary)
        answer: dict[str, object] = {"line": number, **result.to_json_object()}
        if expected is not None and code != EXIT_UNUSABLE:
            met = (code == EXIT_ELIGIBLE) == (expected == "eligible")
            answer |= {"expected": expected, "as_expected": met}
            code = EXIT_ELIGIBLE if met else EXIT_INELIGIBLE
        stdout.write(json.dumps(answer, ensure_ascii=False, separators=(",", ":")) + "\n")
        status = max(status, code)
    return status


def _single(
    args: argparse.Namespace,
    glossary: DualGlossary | None,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    data = read_input(args.file, stdin, stderr, what="FILE")
    if data is None:
        return EXIT_UNUSABLE
    request: dict[str, object] = {"surface": args.surface}
    if args.surface in (DAILY, WEEKLY):
        try:
            request["body"] = data.decode("utf-8", "strict").removesuffix("\n")  # Rule 6
        except UnicodeDecodeError:
            stderr.write(f"{PROG}: {args.file!r} is not UTF-8\n")
            return EXIT_UNUSABLE
        if args.surface == WEEKLY:
            request["explicit_fields"] = list(args.explicit_field)
    else:
        if args.callback_data is None:
            stderr.write(f"{PROG}: an adaptive card needs --callback-data\n")
            return EXIT_UNUSABLE
        try:
            payload = parse_json(data)
        except InvalidRequest:
            payload = None
        if not isinstance(payload, dict):
            stderr.write(f"{PROG}: FILE {args.file}: not a JSON payload object\n")
            return EXIT_UNUSABLE
        request["payload"] = payload
        request["callback_data"] = args.callback_data
        request["origin"] = args.origin
    result, code = _judge(request, args.file, stderr, glossary)
    stdout.write((_json_line(result) if args.json else _human(args.surface, result)) + "\n")
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run host messages through the surface adapters (no request, no file "
        "written). Prints verdicts, enum reasons and semantic IDs, never the text. "
        "Exit 0 all eligible, 1 any ineligible, 2 unusable input.",
    )
    parser.add_argument("--jsonl", metavar="PATH", help='one JSON request per line ("-" = stdin)')
    parser.add_argument("--surface", choices=SURFACES, help="single-message form: the surface")
    parser.add_argument(
        "file", nargs="?", help="single-message form: the body (daily/weekly) or payload JSON"
    )
    parser.add_argument("--json", action="store_true", help="single form: print the JSON answer")
    parser.add_argument(
        "--explicit-field",
        action="append",
        default=[],
        metavar="NAME",
        help="weekly: a field present in the host's summary (repeatable)",
    )
    parser.add_argument(
        "--callback-data", metavar="DATA", help="adaptive: the pressed button's data"
    )
    parser.add_argument(
        "--origin", choices=ORIGINS, default="fresh", help="adaptive (default fresh)"
    )
    parser.add_argument(
        "--glossary", metavar="FILE", help="dual cards: the operator glossary to check with"
    )
    return parser


def run_check(argv: Sequence[str], stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as e:
        return EXIT_ELIGIBLE if e.code == 0 else EXIT_UNUSABLE
    if args.jsonl is not None and (args.surface is not None or args.file is not None):
        stderr.write(f"{PROG}: --jsonl cannot be combined with --surface or FILE\n")
        return EXIT_UNUSABLE
    if args.jsonl is None and (args.surface is None or args.file is None):
        stderr.write(f"{PROG}: give --jsonl PATH, or --surface S FILE\n")
        return EXIT_UNUSABLE
    glossary = None
    if args.glossary is not None:
        from gateway_shim.operator_glossary import (
            MAX_FILE_BYTES,
            GlossaryError,
            parse_operator_glossary,
        )
        from kexpr.ops.inputs import InputRefused, read_file, refuse, shown

        try:
            glossary = parse_operator_glossary(read_file(args.glossary, max_bytes=MAX_FILE_BYTES))
        except InputRefused as e:
            return refuse(PROG, "--glossary", args.glossary, e.problem, stderr=stderr)
        except GlossaryError as e:
            stderr.write(
                f"{PROG}: --glossary {shown(args.glossary)}: not a valid operator glossary "
                f"({e.problem.value}; `kexpr glossary check` says the same)\n"
            )
            return EXIT_UNUSABLE
    if args.jsonl is not None:
        return _batch(args.jsonl, glossary, stdin, stdout, stderr)
    return _single(args, glossary, stdin, stdout, stderr)


def cli(argv: Sequence[str]) -> int:
    """`kexpr surfaces <argv>` (the `kexpr.ops.cli` COMMANDS row): only `check` exists."""
    args = list(argv)
    if args in (["-h"], ["--help"]):
        print("usage: kexpr surfaces check [-h] (--jsonl PATH | --surface S FILE)\n")
        print("subcommands:\n  check  run host messages through the surface adapters")
        return EXIT_ELIGIBLE
    if not args or args[0] != "check":
        sys.stderr.write("usage: kexpr surfaces check [-h] (--jsonl PATH | --surface S FILE)\n")
        return EXIT_UNUSABLE
    return run_check(args[1:], sys.stdin, sys.stdout, sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(cli(sys.argv[1:]))

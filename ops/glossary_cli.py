"""``kexpr glossary``: the operator's dual decision/reason glossary.

``kexpr glossary check FILE``  validate a file (``-`` for stdin); prints the ID
                               counts (the totals in force, and the shipped and
                               the file's own apart) and the digest ``kexpr
                               status`` will show.
``kexpr glossary install FILE [--data-root DIR] [--replace]``
                               validate, then publish it atomically as
                               ``<data root>/operator-glossary.json`` with the
                               data root's file mode (0600 / 0660).

The format and the rules are `gateway_shim.operator_glossary`'s. Output is
counts, a digest, enum problems and, for a valid file, each ID with what it
costs: never a text. An ID is an enum name the operator chose (never customer
content); the model echoes every ID a card uses in its answer, and each token is
time the host waits (docs/budget.md), so the operator sees the price:
``id_tokens`` (each ID's o200k_base tokens, `kexpr.spool.contract.budget.
id_token_bound`: the budget module's own figures, no tokenizer here) and
``dual_cards`` (for 0, 1, ... review reasons, the minimal answer's bound of the
costliest card the glossary can make, and whether it fits the answer budget;
a card that does not fit is shown canonical, with no call; ``"nothing_to_style":
true``, ``"bound": null``: no slot of such a card leaves the model a choice of
words (the fit table, design §6.1), so it is never asked and its IDs cost
nothing: with the table as it is, every dual card) and
``style_words`` (per dual slot and per ID, the words the model may write before
it: the fit table, design §6.1; an operator ID takes its family's cell).


IDs travel to the model, texts never do: an ID is a generic type, never a field
(`gateway_shim._dual_glossary` rule 3: no digit, upper-case words, no word
longer than a shipped ID's longest, at most 48 characters). A file that breaks
a rule is refused with one line naming it (``id_digit``, ``id_too_long`` ...),
and so is one whose IDs would make a card of its decision and up to two review
reasons ineligible (``id_over_budget``: the grammar's length is chosen so that
they always fit; checked here against the budget itself). Cards of three or more
reasons may still not fit (``dual_cards`` shows which): as with the shipped IDs.

``install`` writes what the gateway can read (`kexpr.ops._gateway_view`): the
file is owned by the data root's gateway user (``identity.key``'s owner, else the
root's), in the root's file mode (0600 private, 0660 shared group). Run as that
user, or as root (the file is then written as the gateway's user); anyone else
installs only where the shim would accept their file (a shared-group member). The
installed file is read back as the gateway would read it; if it could not, it is
removed and the install refused (``gateway_cannot_read``).

Exit 0 valid / installed, 1 invalid, 2 unusable input (a file that is
missing, not a regular file, empty or not UTF-8, a data root that is not one or
that this user cannot install into for its gateway: the JSON line on stdout, and
one line on stderr).
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import pwd
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from gateway_shim.operator_glossary import (
    GLOSSARY_FILE_NAME,
    MAX_FILE_BYTES,
    SHIPPED_DUAL_GLOSSARY,
    DualGlossary,
    GlossaryError,
    GlossaryProblem,
    parse_operator_glossary,
)
from kexpr.ops._gateway_view import GatewayUser, gateway_user, read_as_gateway
from kexpr.ops.inputs import InputRefused, Problem, data_root_problem, read_file, refuse, shown
from kexpr.spool.fsio import UnsafePath, publish, unlink_quiet
from kexpr.spool.layout import DEFAULT_DATA_ROOT, DataRoot

PROG = "kexpr glossary"
# A card of the decision and this many review reasons always fits, whatever IDs
# of the grammar it carries (`kexpr.spool.contract.manifest` Rule 6).
GUARANTEED_REASONS: Final = 2

# One line per refusal, naming the rule (the enum) in words; never a text or an ID.
WORDS: Final[Mapping[GlossaryProblem, str]] = {
    GlossaryProblem.MISSING: "no such file",
    GlossaryProblem.UNSAFE_FILE: "not a regular file of the data root's owner and mode",
    GlossaryProblem.UNREADABLE: "could not be read",
    GlossaryProblem.TOO_LARGE: "larger than a glossary may be",
    GlossaryProblem.NOT_UTF8: "not UTF-8",
    GlossaryProblem.NOT_JSON: "not JSON",
    GlossaryProblem.DUPLICATE_KEY: "a key appears twice",
    GlossaryProblem.NOT_OBJECT: "not a JSON object where one is needed",
    GlossaryProblem.WRONG_KEYS: "not exactly version, decisions and reasons",
    GlossaryProblem.WRONG_VERSION: "not this glossary version",
    GlossaryProblem.TOO_MANY_ENTRIES: "more than 64 IDs in a family",
    GlossaryProblem.ID_MALFORMED: "an ID without its family's prefix",
    GlossaryProblem.ID_TOO_LONG: "an ID longer than 48 characters",
    GlossaryProblem.ID_DIGIT: "an ID with a digit (IDs are types, never values)",
    GlossaryProblem.ID_NOT_UPPER_WORDS: "an ID not made of upper-case words joined by _",
    GlossaryProblem.ID_WORD_TOO_LONG: "an ID word longer than 12 letters",
    GlossaryProblem.ID_OVER_BUDGET: "IDs that make a card of up to two reasons ineligible",
    GlossaryProblem.ID_DUPLICATE: "an ID defined twice or a reserved ID",
    GlossaryProblem.TEXT_NOT_STRING: "a text that is not a string",
    GlossaryProblem.TEXT_NOT_NFC: "a text not in NFC",
    GlossaryProblem.TEXT_FORBIDDEN_CHARACTER: "a text with a character other than Hangul words",
    GlossaryProblem.TEXT_TOO_LONG: "a text longer than 120 characters",
    GlossaryProblem.TEXT_FINAL_PERIOD: "a decision with, or a reason without, its final period",
    GlossaryProblem.TEXT_ONLY_STYLE_WORDS: "a text of style words only",
    GlossaryProblem.TEXT_DUPLICATE: "a text defined twice",
    GlossaryProblem.UNSTYLED_UNKNOWN: "an unstyled entry that is not a reason ID in force, or twice",
}


class InstallProblem(enum.StrEnum):
    """Why ``install`` could not write what the gateway reads (enum only)."""

    ALREADY_INSTALLED = "already_installed"
    WRONG_OWNER = "wrong_owner"
    GATEWAY_CANNOT_READ = "gateway_cannot_read"
    DATA_ROOT_UNUSABLE = "data_root_unusable"


INSTALL_WORDS: Final[Mapping[InstallProblem, str]] = {
    InstallProblem.ALREADY_INSTALLED: "a glossary is installed already (--replace replaces it)",
    InstallProblem.WRONG_OWNER: (
        "the data root belongs to another user: run as its gateway's user or as root"
    ),
    InstallProblem.GATEWAY_CANNOT_READ: (
        "the gateway's user could not read the file as installed (removed)"
    ),
    InstallProblem.DATA_ROOT_UNUSABLE: "the file could not be written there",
}


def _read(path: str) -> bytes:
    """The file (or stdin), refused by `kexpr.ops.inputs`'s rules: a glossary is a
    non-empty UTF-8 text file."""
    if path == "-":
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        if not data:
            raise InputRefused(Problem.EMPTY)
        return data
    return read_file(path, max_bytes=MAX_FILE_BYTES)


def _summary(glossary: DualGlossary) -> dict[str, object]:
    # The file's entries apart from the shipped ones (an operator ID never
    # shadows a shipped one: `parse_operator_glossary` refuses it), and the totals
    # the shim will use.
    shipped = SHIPPED_DUAL_GLOSSARY
    return {
        "valid": True,
        "problem": None,
        "decisions": len(glossary.decisions),
        "reasons": len(glossary.reasons),
        "shipped_decisions": len(shipped.decisions),
        "shipped_reasons": len(shipped.reasons),
        "operator_decisions": len(glossary.decisions) - len(shipped.decisions),
        "operator_reasons": len(glossary.reasons) - len(shipped.reasons),
        "digest": glossary.digest(),
        **prices(glossary),
    }


def prices(glossary: DualGlossary) -> dict[str, object]:
    """What each ID costs and which dual cards the glossary's IDs let fit."""
    from gateway_shim.surfaces.dual import MAX_REVIEW_REASONS, review_slot_id
    from kexpr.spool.contract import slot_policy
    from kexpr.spool.contract.budget import (
        ANSWER_BUDGET_TOKENS,
        id_token_bound,
        slots_token_bound,
    )
    from kexpr.spool.contract.fit import slot_styleable

    def cost(semantic_id: str) -> int:
        bound = id_token_bound(semantic_id)
        return -1 if bound is None else bound

    id_tokens = {i: cost(i) for i in glossary.ids()}
    decision = max(sorted(glossary.decisions), key=cost)
    reasons = sorted(glossary.reasons, key=lambda i: (-cost(i), i))
    cards: list[dict[str, object]] = []
    for n in range(MAX_REVIEW_REASONS + 1):
        # The costliest card of n reasons: the costliest IDs (the dearest repeated
        # when the glossary has fewer than n). Only the slots the fit table lets be
        # styled are asked (design §6.1; as it is, every line of a dual card is
        # locked); a card with none is sent nowhere ("nothing_to_style"). A locked
        # line costs nothing, so the dearest IDs go on the lines that are asked.
        chosen = [reasons[k] if k < len(reasons) else reasons[0] for k in range(n)]
        lines = [review_slot_id(k + 1) for k in range(n)]
        asked = [s for s in lines if slot_styleable(s, (reasons[0],))]
        on_line = dict(zip(asked + [s for s in lines if s not in asked], chosen, strict=True))
        candidates = (
            slot_policy("adaptive.dual.judgment", (decision,)),
            *(slot_policy(s, (on_line[s],)) for s in lines),
        )
        slots = tuple(p for p in candidates if slot_styleable(p.slot_id, p.semantic_ids))
        if not slots:
            cards.append({"reasons": n, "nothing_to_style": True, "bound": None, "fits": True})
            continue
        bound = slots_token_bound("adaptive.dualcoachtest.card.v1", slots)
        fits = bound is not None and bound <= ANSWER_BUDGET_TOKENS
        cards.append({"reasons": n, "nothing_to_style": False, "bound": bound, "fits": fits})
        if not fits:
            break
    return {
        "id_tokens": id_tokens,
        "dual_cards": cards,
        "answer_budget_tokens": ANSWER_BUDGET_TOKENS,
        "style_words": style_words(glossary),
    }


def style_words(glossary: DualGlossary) -> dict[str, dict[str, list[str]]]:
    """Per dual slot, per ID of the glossary, the words the model may write before
    it (the fit table, design §6.1; an operator ID takes its family's cell)."""
    from gateway_shim.surfaces.dual import review_slot_id
    from kexpr.spool.contract.fit import cell, position_of

    def words(slot_id: str, semantic_id: str) -> list[str]:
        if semantic_id in glossary.unstyled:  # narrowed by the operator to none
            return []
        return [s.text.rstrip() for s in sorted(cell(semantic_id, position_of(slot_id, 0)))]

    return {
        "adaptive.dual.judgment": {
            i: words("adaptive.dual.judgment", i) for i in sorted(glossary.decisions)
        },
        "adaptive.dual.review.1": {
            i: words(review_slot_id(1), i) for i in sorted(glossary.reasons)
        },
        "adaptive.dual.review.N (N > 1)": {
            i: words(review_slot_id(2), i) for i in sorted(glossary.reasons)
        },
    }


def budget_problem(cards: list[dict[str, object]]) -> GlossaryProblem | None:
    """``id_over_budget`` when a costliest card of the decision and up to
    `GUARANTEED_REASONS` reasons does not fit (``prices``' ``dual_cards``)."""
    shown_cards = {card["reasons"]: card["fits"] for card in cards}
    if not all(shown_cards.get(n) is True for n in range(GUARANTEED_REASONS + 1)):
        return GlossaryProblem.ID_OVER_BUDGET
    return None


def _refused(command: str, path: str, problem: GlossaryProblem) -> int:
    print(json.dumps({"valid": False, "problem": problem.value}))
    print(
        f"{PROG} {command}: FILE {shown(path)}: {WORDS[problem]} ({problem.value})", file=sys.stderr
    )
    return 1


def _install_refused(
    data_root: Path, problem: InstallProblem, summary: Mapping[str, object], code: int = 2
) -> int:
    print(json.dumps({**summary, "installed": False, "problem": problem.value}, sort_keys=True))
    print(
        f"{PROG} install: --data-root {shown(data_root)}: {INSTALL_WORDS[problem]}"
        f" ({problem.value})",
        file=sys.stderr,
    )
    return code


def _as_user(user: GatewayUser, work: Callable[[], None]) -> str | None:
    """Run ``work`` in a child that has dropped to the gateway's user (this
    process is root): what it creates is the gateway's, exactly as the gateway
    would create it. None when it ran; else ``exists`` or ``unusable``."""
    try:
        entry: pwd.struct_passwd | None = pwd.getpwuid(user.uid)
    except KeyError:
        entry = None
    gid = entry.pw_gid if entry is not None else (user.group if user.group is not None else 0)
    groups = os.getgrouplist(entry.pw_name, gid) if entry is not None else [gid]
    if user.group is not None and user.group not in groups:
        groups.append(user.group)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one word on the pipe, never back into the CLI
        word = b"unusable"
        try:
            os.close(r)
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(user.uid)
            work()
            word = b"ok"
        except FileExistsError:
            word = b"exists"
        except BaseException:  # noqa: BLE001 - the child says one word and exits
            word = b"unusable"
        finally:
            try:
                os.write(w, word)
            finally:
                os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read(16)
    os.waitpid(pid, 0)
    return None if said == b"ok" else said.decode("ascii", "replace") or "unusable"


def _install(a: argparse.Namespace, data: bytes, summary: dict[str, object], digest: str) -> int:
    root = DataRoot(a.data_root)
    target = root.root / GLOSSARY_FILE_NAME
    try:
        user = gateway_user(root)
        # Walk the root once as its gateway would: the pinned parent is then
        # open here, for the child below too (it may not search the ancestors).
        read_as_gateway(root, user)
    except GlossaryError:
        pass  # an installed file that is invalid: replaced below, or refused
    except OSError:
        return _install_refused(a.data_root, InstallProblem.DATA_ROOT_UNUSABLE, summary)

    def work() -> None:
        if a.replace:
            unlink_quiet(target)
        publish(root.tmp, target, data)

    euid = os.geteuid()
    if euid == 0 and user.uid != 0:
        said = _as_user(user, work)
        if said == "exists":
            return _install_refused(a.data_root, InstallProblem.ALREADY_INSTALLED, summary, code=1)
        if said is not None:
            return _install_refused(a.data_root, InstallProblem.DATA_ROOT_UNUSABLE, summary)
    else:
        try:
            work()
        except FileExistsError:
            return _install_refused(a.data_root, InstallProblem.ALREADY_INSTALLED, summary, code=1)
        except UnsafePath:
            return _install_refused(a.data_root, InstallProblem.WRONG_OWNER, summary)
        except OSError:
            return _install_refused(a.data_root, InstallProblem.DATA_ROOT_UNUSABLE, summary)
    # Read back as the gateway would: what it cannot read is not left behind.
    try:
        readable = read_as_gateway(root, user).digest() == digest
    except (GlossaryError, OSError):
        readable = False
    if not readable:
        try:
            unlink_quiet(target)
        except OSError:
            pass
        return _install_refused(a.data_root, InstallProblem.GATEWAY_CANNOT_READ, summary)
    summary["installed"] = True
    print(json.dumps(summary, sort_keys=True))
    return 0


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
    except InputRefused as e:
        print(json.dumps({"valid": False, "problem": f"file_{e.problem.value}"}))
        return refuse(f"{PROG} {a.command}", "FILE", a.file, e.problem)
    if a.command == "install" and (problem := data_root_problem(a.data_root)) is not None:
        print(json.dumps({"valid": None, "installed": False, "problem": "data_root_unusable"}))
        return refuse(f"{PROG} install", "--data-root", a.data_root, problem)
    try:
        glossary = parse_operator_glossary(data)
    except GlossaryError as e:
        return _refused(a.command, a.file, e.problem)
    summary = _summary(glossary)
    cards = summary["dual_cards"]
    assert isinstance(cards, list)
    if (over := budget_problem(cards)) is not None:
        return _refused(a.command, a.file, over)
    if a.command == "install":
        return _install(a, data, summary, glossary.digest())
    print(json.dumps(summary, sort_keys=True))
    return 0

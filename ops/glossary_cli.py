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
a card that does not fit is shown canonical, with no call; ``"styled": false``:
no slot of such a card may take a style word, so it is never asked) and
``style_words`` (per dual slot and per ID, the words the model may write before
it: the fit table, design §6.1; an operator ID takes its family's cell).
Exit 0 valid / installed, 1 invalid, 2 unusable input (a file that is
missing, not a regular file, empty or not UTF-8, a data root that is not one:
the JSON line on stdout, and `kexpr.ops.inputs`'s one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gateway_shim.operator_glossary import (
    GLOSSARY_FILE_NAME,
    MAX_FILE_BYTES,
    SHIPPED_DUAL_GLOSSARY,
    DualGlossary,
    GlossaryError,
    parse_operator_glossary,
)
from kexpr.ops.inputs import InputRefused, Problem, data_root_problem, read_file, refuse
from kexpr.spool.fsio import publish, unlink_quiet
from kexpr.spool.layout import DEFAULT_DATA_ROOT, DataRoot

PROG = "kexpr glossary"


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
        # styled are asked (design §6.1: the decision and the first review line are
        # locked); a card with none is sent nowhere ("styled": false). A locked
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
            cards.append({"reasons": n, "styled": False, "bound": None, "fits": True})
            continue
        bound = slots_token_bound("adaptive.dualcoachtest.card.v1", slots)
        fits = bound is not None and bound <= ANSWER_BUDGET_TOKENS
        cards.append({"reasons": n, "styled": True, "bound": bound, "fits": fits})
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
        except OSError:
            print(json.dumps({**summary, "installed": False, "problem": "data_root_unusable"}))
            return 2
        summary["installed"] = True
    print(json.dumps(summary, sort_keys=True))
    return 0

"""The dual card's decision/reason glossary: shipped public texts + the operator's file.

Why (docs/host-formats-adaptive.md): the dualcoachtest card's
decision text (after ``현재 판단: ``) and its ``검토 필요`` reason lines are rendered
by the host's private profile package. Only one decision and two reasons are
public; kexpr ships those (`gateway_shim.glossary`). The operator adds the rest,
without editing installed code, in one JSON file in the data root::

    <data root>/operator-glossary.json      (0600, or 0660 in a shared-group root)
    {
      "version": "kexpr-dual-glossary-v1",
      "decisions": {"P_DUAL_DECISION_<NAME>": "<decision text as the card shows it>"},
      "reasons":   {"P_DUAL_REASON_<NAME>":   "<reason line as the card shows it>."},
      "unstyled":  ["P_DUAL_REASON_<NAME>"]          (optional)
    }

This module reads and parses that file; the glossary it yields, ``DualGlossary``,
and what every ID and text may be (Rules 2 and 3) are `gateway_shim._dual_glossary`'s
(re-exported here).

Rules (each failure is a `GlossaryError` with a `GlossaryProblem` enum, never content):

1. Texts are written exactly as the host renders them: a decision without a final
   period, a reason line with exactly one final ``.``. The stored expansion is the
   text without that period (the slot's rendering rule adds it back,
   `gateway_shim.surfaces._slots.ProseSlot.final_period`).
2. Every text: `gateway_shim._dual_glossary` Rule 2 (``audit_text``).
3. IDs: `gateway_shim._dual_glossary` Rule 3 (``id_problem``). At most 64 of
   each family in the file (the shipped texts come on top). IDs and
   texts are unique across the shipped entries and the file (a shipped ID or text
   may not be redefined); duplicate JSON keys are an error.
3a. A file valid for an earlier release stays valid, meaning the same: the shipped
   IDs are short since the model echoes each one (docs/budget.md), and the long
   names earlier releases shipped (`gateway_shim.glossary.RETIRED_SHIPPED_IDS`)
   stay reserved (no file could define them, none can). A file that uses a
   current shipped ID for a text of its own (written when that name was free)
   keeps it; that shipped text takes its retired ID in this glossary (it costs
   more tokens: ``kexpr glossary check`` shows each ID's cost).
4. The shim reads the data root's file with ``O_NOFOLLOW``, regular, owner/mode
   as the data root's other files (`kexpr.spool.fsio.read_private`), at most 64 KiB
   (`glossary_for_data_root`). A missing file means "shipped texts only"; any
   other problem makes the dual surface canonical
   (``IneligibleReason.GLOSSARY_INVALID``), with no request and zero files.
   `load_operator_glossary` reads a file anywhere (no-follow, regular, bounded;
   no owner rule): an operator's draft or a tool's argument.
4a. Style words (the contract's fit table, design §6.1): an operator ID takes its
   family's cell (a reason line after the first may take ``그리고``; a decision takes
   nothing) and may only NARROW it: ``unstyled`` lists reason IDs in force (the
   file's or the shipped ones) that take no word at all, for a text a conjunction
   would not read well before (one that opens with ``단``, say). Such a line is
   locked like the card's other bytes, never a slot. Nothing widens a cell: that is
   a code review of `kexpr.spool.contract.fit`. An ``unstyled`` entry that is not a
   reason ID in force, or appears twice, is ``unstyled_unknown``. A file without
   the key means the same as before it existed.
5. The worker never reads the texts: the IDs the shim issues travel in each
   capsule slot's allowed IDs; the worker's static instruction names the shipped
   IDs and the two open families (`kexpr.worker.instruction`).
6. ``kexpr glossary check FILE`` validates a file and prints its digest;
   ``kexpr glossary install FILE`` validates and publishes it into the data root;
   ``kexpr status`` shows the digest in force (`DualGlossary.digest`).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from gateway_shim._dual_glossary import (
    GLOSSARY_VERSION,
    MAX_ENTRIES_PER_FAMILY,
    SHIPPED_DUAL_GLOSSARY,
    DualGlossary,
    GlossaryError,
    GlossaryProblem,
    audit_text,
    id_problem,
)
from gateway_shim.glossary import RETIRED_SHIPPED_IDS
from kexpr.spool.fsio import UnsafePath, read_bounded, read_private

__all__ = [
    "GLOSSARY_FILE_NAME",
    "GLOSSARY_VERSION",
    "SHIPPED_DUAL_GLOSSARY",
    "DualGlossary",
    "GlossaryError",
    "GlossaryProblem",
    "audit_text",
    "glossary_for_data_root",
    "id_problem",
    "load_operator_glossary",
    "parse_operator_glossary",
]

GLOSSARY_FILE_NAME: Final = "operator-glossary.json"
MAX_FILE_BYTES: Final = 64 * 1024


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise GlossaryError(GlossaryProblem.DUPLICATE_KEY)
    return dict(pairs)


def _family(value: object, *, reasons: bool) -> dict[str, str]:
    if not isinstance(value, dict):
        raise GlossaryError(GlossaryProblem.NOT_OBJECT)
    if len(value) > MAX_ENTRIES_PER_FAMILY:
        raise GlossaryError(GlossaryProblem.TOO_MANY_ENTRIES)
    out: dict[str, str] = {}
    for semantic_id, text in value.items():
        if not isinstance(text, str):
            raise GlossaryError(GlossaryProblem.TEXT_NOT_STRING)
        if reasons:
            # Rule 1: a reason line ends in exactly one ".", a decision has none.
            if not text.endswith("."):
                raise GlossaryError(GlossaryProblem.TEXT_FINAL_PERIOD)
            text = text[:-1]
        elif text.endswith("."):
            raise GlossaryError(GlossaryProblem.TEXT_FINAL_PERIOD)
        out[semantic_id] = text
    return out


def parse_operator_glossary(data: bytes) -> DualGlossary:
    """The shipped entries plus the file's; raises `GlossaryError`."""
    if len(data) > MAX_FILE_BYTES:
        raise GlossaryError(GlossaryProblem.TOO_LARGE)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GlossaryError(GlossaryProblem.NOT_UTF8) from e
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as e:
        if isinstance(e, GlossaryError):
            raise
        raise GlossaryError(GlossaryProblem.NOT_JSON) from e
    if not isinstance(document, dict):
        raise GlossaryError(GlossaryProblem.NOT_OBJECT)
    if (
        not {"version", "decisions", "reasons"}
        <= set(document)
        <= {
            "version",
            "decisions",
            "reasons",
            "unstyled",
        }
    ):
        raise GlossaryError(GlossaryProblem.WRONG_KEYS)
    if document["version"] != GLOSSARY_VERSION:
        raise GlossaryError(GlossaryProblem.WRONG_VERSION)
    decisions = _family(document["decisions"], reasons=False)
    reasons = _family(document["reasons"], reasons=True)
    shipped = SHIPPED_DUAL_GLOSSARY
    taken = {*decisions, *reasons}
    # Rule 3: a shipped ID may not be redefined, nor one an earlier release shipped.
    # Rule 3a: a current shipped ID the file already uses for its own text is the
    # file's; the shipped text takes back its retired ID.
    if any(i in RETIRED_SHIPPED_IDS for i in taken):
        raise GlossaryError(GlossaryProblem.ID_DUPLICATE)
    return DualGlossary(
        decisions={**_yield_taken(shipped.decisions, taken), **decisions},
        reasons={**_yield_taken(shipped.reasons, taken), **reasons},
        operator=True,
        unstyled=_unstyled(document.get("unstyled", [])),
    )


def _unstyled(value: object) -> frozenset[str]:
    """Rule 4a: a list of distinct strings (which must be reason IDs in force:
    `DualGlossary` checks that against the entries)."""
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise GlossaryError(GlossaryProblem.UNSTYLED_UNKNOWN)
    if len(set(value)) != len(value):
        raise GlossaryError(GlossaryProblem.UNSTYLED_UNKNOWN)
    return frozenset(value)


_RETIRED_ID_OF: Final = {new: old for old, new in RETIRED_SHIPPED_IDS.items()}


def _yield_taken(shipped: Mapping[str, str], taken: set[str]) -> dict[str, str]:
    """``shipped`` with each ID the operator's file uses renamed to its retired ID
    (Rule 3a). A shipped ID with no retired name is never yielded (it stays
    ``ID_DUPLICATE``: no earlier file could have used it)."""
    out: dict[str, str] = {}
    for semantic_id, text in shipped.items():
        if semantic_id in taken:
            retired = _RETIRED_ID_OF.get(semantic_id)
            if retired is None:
                raise GlossaryError(GlossaryProblem.ID_DUPLICATE)
            semantic_id = retired
        out[semantic_id] = text
    return out


def load_operator_glossary(path: Path | str) -> DualGlossary:
    """Read and validate a glossary file anywhere (an operator's draft, a
    ``surfaces check`` argument): ``O_NOFOLLOW``, a regular file, at most 64 KiB.
    Raises `GlossaryError` (``MISSING`` for an absent file). The shim itself reads
    the data root's file with `glossary_for_data_root`, which also checks the
    owner and mode."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError as e:
        raise GlossaryError(GlossaryProblem.MISSING) from e
    except OSError as e:
        problem = (
            GlossaryProblem.UNSAFE_FILE if e.errno == errno.ELOOP else GlossaryProblem.UNREADABLE
        )
        raise GlossaryError(problem) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GlossaryError(GlossaryProblem.UNSAFE_FILE)
        data = read_bounded(fd, st, MAX_FILE_BYTES)
    except UnsafePath as e:
        raise GlossaryError(GlossaryProblem.TOO_LARGE) from e
    except OSError as e:
        raise GlossaryError(GlossaryProblem.UNREADABLE) from e
    finally:
        os.close(fd)
    return parse_operator_glossary(data)


def glossary_for_data_root(root: Path | str) -> DualGlossary:
    """The glossary in force for a data root: ``<root>/operator-glossary.json``
    (rule 4: no-follow, owner and mode as the root's other files, bounded) plus
    the shipped texts, or the shipped texts alone when there is no file. Raises
    `GlossaryError` for a file that is there but not valid (the dual surface is
    then canonical)."""
    try:
        data = read_private(Path(root) / GLOSSARY_FILE_NAME, max_bytes=MAX_FILE_BYTES)
    except FileNotFoundError:
        return SHIPPED_DUAL_GLOSSARY
    except UnsafePath as e:
        raise GlossaryError(GlossaryProblem.UNSAFE_FILE) from e
    except OSError as e:
        raise GlossaryError(GlossaryProblem.UNREADABLE) from e
    return parse_operator_glossary(data)

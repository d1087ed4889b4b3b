"""``kexpr identity``: the data root's identity key, checked and rotated.

``kexpr identity check [--data-root DIR]``
    what a gateway would do with the data root's ``identity.key``, its record
    (``identity.fingerprint``), the sealed keys (``identity.sealed``) and the
    journal's own record of its key (``outcomes/identity.json``), by the rules
    of `gateway_shim.identity` (rules 3 and 6). One JSON line: the state, the
    recorded fingerprint, the journal's, how many keys are sealed. Exit 0 when
    a gateway would present (``matches``, or a fresh root: ``no_key_yet``,
    ``not_recorded``), 1 when it refuses (``key_missing``, ``key_differs``,
    ``rotation_unfinished``, ``record_invalid``, ``proof_missing``), 2 for an
    unusable data root or files this user cannot read (``unchecked``: run it as
    the gateway's user or root).
``kexpr identity adopt [--data-root DIR]``
    only for ``proof_missing`` (a key with no record beside a journal with rows
    and no journal record: a data root a release before the record wrote, or
    one whose ``identity.fingerprint`` was lost before this release's first
    attempt): the operator attests that the key present is the one the rows
    were written under, and it is recorded. Exit 0 adopted, 1 refused (any
    other state: the JSON line names why), 2 an unusable data root.
``kexpr identity rotate [--data-root DIR] [--old-key-lost]``
    seal the current key and make a new one (`gateway_shim._identity_store.rotate`):
    every artifact attempted under the old key stays deduped while the journal
    holds rows of it. Run it as the gateway's user (the owner of
    ``identity.key``). Run again after a crash, it finishes the rotation it
    finds. ``--old-key-lost``: the key is gone, or the one present is not the
    recorded one, and will not come back; a new key is made and recorded, and
    artifacts attempted under the lost key may be attempted once more (said on
    stderr). Exit 0 rotated, 1 refused (the JSON line names why), 2 an unusable
    data root.

`identity_report` is also what ``kexpr status`` and ``kexpr audit`` show: the
files are read no-follow and bounded as every ops reader does
(`kexpr.ops.readers`); their modes and owners are the audit's to judge. Output
is states, fingerprints (keyed hashes of the key, never the key) and counts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import enum
import json
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway_shim.identity import (
    KEY_BYTES,
    MAX_IDENTITY_FILE_BYTES,
    Action,
    IdentityProblem,
    IdentityRefused,
    SealedKey,
    journal_says,
    judge,
    needs_rows,
    parse_record,
    parse_sealed,
    recorded,
)
from kexpr.ops.inputs import data_root_problem, refuse
from kexpr.ops.readers import ReadProblem, ReadRefused, read_nofollow
from kexpr.spool import _journal_identity as journal_identity
from kexpr.spool.layout import DEFAULT_DATA_ROOT, DataRoot

PROG = "kexpr identity"


class IdentityState(enum.StrEnum):
    """What a gateway would do with the data root's identity (`identity_report`)."""

    MATCHES = "matches"
    # No key and no journal rows: the gateway mints one at its first presentation.
    NO_KEY_YET = "no_key_yet"
    # A key the record does not name yet, where nothing can be paid twice (or a
    # data root from before the record): recorded at the next presentation.
    NOT_RECORDED = "not_recorded"
    KEY_MISSING = IdentityProblem.KEY_MISSING.value
    KEY_DIFFERS = IdentityProblem.KEY_DIFFERS.value
    ROTATION_UNFINISHED = IdentityProblem.ROTATION_UNFINISHED.value
    RECORD_INVALID = IdentityProblem.RECORD_INVALID.value
    PROOF_MISSING = IdentityProblem.PROOF_MISSING.value
    # This user cannot read the files (the key is the gateway's, 0600).
    UNCHECKED = "unchecked"


# Every refusal the files can show (`IdentityProblem.ROOT_REPLACED` is a
# running gateway's memory of its root, never the files').
FINDINGS = frozenset(
    IdentityState(p.value) for p in IdentityProblem if p is not IdentityProblem.ROOT_REPLACED
)


@dataclass(frozen=True, slots=True)
class IdentityReport:
    state: IdentityState
    # The recorded fingerprint, when a valid record was read.
    fingerprint: str | None = None
    # The fingerprint the journal's own record names (rule 6), when it has one.
    journal_fingerprint: str | None = None
    sealed: int | None = None
    # With UNCHECKED: which read failed and why (enum words).
    problem: str | None = None

    @property
    def finding(self) -> bool:
        return self.state in FINDINGS

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "fingerprint": self.fingerprint,
            "journal_fingerprint": self.journal_fingerprint,
            "sealed": self.sealed,
            "problem": self.problem,
        }


class _Unchecked(Exception):
    def __init__(self, what: str, problem: ReadProblem) -> None:
        super().__init__(what)
        self.detail = f"{what}_{problem.value}"


def _read(path: Path, what: str, max_bytes: int) -> bytes | None:
    try:
        return read_nofollow(path, max_bytes=max_bytes)
    except ReadRefused as e:
        if e.problem is ReadProblem.MISSING:
            return None
        raise _Unchecked(what, e.problem) from e


def has_rows(root: DataRoot) -> bool:
    """`gateway_shim._identity_store.journal_has_rows` as an ops reader sees it:
    anything in ``outcomes/`` or ``quarantine/`` but an empty regular file."""
    for d in (root.outcomes, root.quarantine):
        try:
            with os.scandir(d) as it:
                for entry in it:
                    st = entry.stat(follow_symlinks=False)
                    if not stat.S_ISREG(st.st_mode) or st.st_size > 0:
                        return True
        except FileNotFoundError:
            continue
        except OSError:
            return True  # cannot tell: counted, as the gateway counts it
    return False


def identity_report(root: DataRoot) -> IdentityReport:
    """What a gateway would do with ``root``'s identity files (module docstring)."""
    try:
        key = _read(root.identity_key, "key", KEY_BYTES + 1)
        record_data = _read(root.identity_record, "record", MAX_IDENTITY_FILE_BYTES)
        sealed_data = _read(root.identity_sealed, "sealed", MAX_IDENTITY_FILE_BYTES)
        journal_data = _read(journal_identity.path(root), "journal", journal_identity.MAX_BYTES)
    except _Unchecked as e:
        return IdentityReport(IdentityState.UNCHECKED, problem=e.detail)
    if key is not None and len(key) != KEY_BYTES:
        return IdentityReport(IdentityState.UNCHECKED, problem="key_length")
    try:
        record = None if record_data is None else parse_record(record_data)
        sealed: tuple[SealedKey, ...] = () if sealed_data is None else parse_sealed(sealed_data)
        journal = None if journal_data is None else journal_identity.parse(journal_data)
    except (IdentityRefused, journal_identity.InvalidRecord):
        return IdentityReport(IdentityState.RECORD_INVALID)
    earlier = [s.fingerprint for s in sealed]
    state, said = recorded(key, record, earlier), journal_says(key, journal, earlier)
    action = judge(key, state, needs_rows(key, state, said) and has_rows(root), said)
    shown = {
        Action.SERVE: IdentityState.MATCHES,
        Action.MINT: IdentityState.NO_KEY_YET,
        Action.RECORD: IdentityState.NOT_RECORDED,
    }
    return IdentityReport(
        shown[action] if isinstance(action, Action) else IdentityState(action.value),
        fingerprint=record,
        journal_fingerprint=journal,
        sealed=len(sealed),
    )


def render_line(report: IdentityReport) -> str:
    """The ``kexpr status`` line (after ``identity``)."""
    words = {
        IdentityState.MATCHES: "the key is the recorded one",
        IdentityState.NO_KEY_YET: "no key yet (the gateway makes one at its first presentation)",
        IdentityState.NOT_RECORDED: "key not recorded yet (the gateway records it at its next presentation)",
        IdentityState.KEY_MISSING: "identity.key is MISSING beside a journal with rows: presentations refused",
        IdentityState.KEY_DIFFERS: "identity.key is NOT the recorded key: presentations refused",
        IdentityState.ROTATION_UNFINISHED: "a rotation stopped between its steps: run `kexpr identity rotate` again",
        IdentityState.RECORD_INVALID: "identity.fingerprint, identity.sealed or outcomes/identity.json is not its format: presentations refused",
        IdentityState.PROOF_MISSING: "nothing proves identity.key wrote the journal's rows (no record beside it, none in the journal): presentations refused; `kexpr identity adopt` if it did",
        IdentityState.UNCHECKED: "not checked: this user cannot read the key (run as the gateway's user or root)",
    }
    parts = [report.state.value, words[report.state]]
    if report.fingerprint is not None:
        parts.append(f"fingerprint {report.fingerprint[:8]}")
    if report.sealed:
        parts.append(f"sealed keys {report.sealed}")
    if report.problem is not None:
        parts.append(f"({report.problem})")
    return "  ".join(parts)


def _rotate(root: DataRoot, old_key_lost: bool, now: Callable[[], dt.datetime]) -> int:
    from gateway_shim._identity_store import RotationRefused, rotate

    try:
        done = rotate(root, now(), old_key_lost=old_key_lost)
    except RotationRefused as e:
        print(json.dumps({"rotated": False, "problem": e.problem.value}, sort_keys=True))
        print(
            f"{PROG} rotate: refused: {e.problem.value}: {_WHY[e.problem.value]}", file=sys.stderr
        )
        return 1
    except OSError:
        print(json.dumps({"rotated": False, "problem": "data_root_unusable"}, sort_keys=True))
        print(
            f"{PROG} rotate: the data root's identity files could not be written", file=sys.stderr
        )
        return 2
    print(
        json.dumps(
            {
                "rotated": True,
                "problem": None,
                "fingerprint": done.fingerprint,
                "sealed": done.sealed,
                "pruned": done.pruned,
                "finished_earlier_rotation": done.finished,
            },
            sort_keys=True,
        )
    )
    if old_key_lost:
        print(
            f"{PROG} rotate: a new key without the old one: artifacts attempted under"
            " the lost key may be attempted once more",
            file=sys.stderr,
        )
    return 0


def _adopt(root: DataRoot) -> int:
    from gateway_shim._identity_store import RotationRefused, adopt

    try:
        fp = adopt(root)
    except RotationRefused as e:
        print(json.dumps({"adopted": False, "problem": e.problem.value}, sort_keys=True))
        print(f"{PROG} adopt: refused: {e.problem.value}: {_WHY[e.problem.value]}", file=sys.stderr)
        return 1
    except OSError:
        print(json.dumps({"adopted": False, "problem": "data_root_unusable"}, sort_keys=True))
        print(f"{PROG} adopt: the data root's identity files could not be written", file=sys.stderr)
        return 2
    print(json.dumps({"adopted": True, "problem": None, "fingerprint": fp}, sort_keys=True))
    print(
        f"{PROG} adopt: identity.key is recorded as the key the journal was written under;"
        " if it was not, artifacts attempted under the other key may be attempted once more",
        file=sys.stderr,
    )
    return 0


_WHY = {
    "key_missing": "identity.key is missing beside a journal with rows (restore it, or"
    " --old-key-lost if it is gone for good)",
    "key_differs": "identity.key is not the recorded key (restore the recorded one, or"
    " --old-key-lost if it is gone for good)",
    "record_invalid": "identity.fingerprint, identity.sealed or outcomes/identity.json is not its format",
    "proof_missing": "nothing proves the key wrote the journal's rows (`kexpr identity adopt`"
    " if it did, or --old-key-lost)",
    "nothing_to_adopt": "adopt is only for proof_missing (`kexpr identity check` says the state)",
    "no_key": "there is no key to rotate (the gateway makes one at its first presentation)",
    "too_many_sealed": "8 sealed keys are still kept; rotate again once the journal no"
    " longer holds rows of the oldest",
    "key_not_lost": "the key is the recorded one: rotate without --old-key-lost",
    "not_key_owner": "run it as the gateway's user (the owner of identity.key)",
}


def cli(argv: list[str], *, now: Callable[[], dt.datetime] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="what a gateway would do with the identity")
    check.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    adopt = sub.add_parser("adopt", help="attest an unproven key (proof_missing only)")
    adopt.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    rot = sub.add_parser("rotate", help="seal the current key and make a new one")
    rot.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    rot.add_argument(
        "--old-key-lost",
        action="store_true",
        help="the key is gone for good: a new one, accepting repeats of what the old one saw",
    )
    a = p.parse_args(argv)
    if (problem := data_root_problem(a.data_root)) is not None:
        return refuse(f"{PROG} {a.command}", "--data-root", a.data_root, problem)
    root = DataRoot(a.data_root)
    if a.command == "rotate":
        return _rotate(root, a.old_key_lost, now or (lambda: dt.datetime.now(dt.UTC)))
    if a.command == "adopt":
        return _adopt(root)
    report = identity_report(root)
    print(json.dumps(report.to_json(), sort_keys=True))
    if report.state is IdentityState.UNCHECKED:
        return 2
    return 1 if report.finding else 0

"""The data-root check of ``kexpr audit``: modes, owners, symlinks, names and the
journal chain (design §10; the sharing rules of `kexpr.spool.fsio`, rule 3).

- ``--data-root D``: the sharing rules of `kexpr.spool.fsio` (rule 3), checked for every
  entry whoever runs the audit: no symlink anywhere; only directories and regular
  files; *private* (root 0700: dirs without group/other bits, files 0600 or
  stricter) or *shared group* (root 02770: dirs exactly 02770, files
  0660/0640/0600, group = the root's group); nothing ever accessible to "other";
  owners are the root's owner, the owner of ``identity.key`` (the gateway), the
  audited processes' users, or (shared) members of the root's group;
  ``identity.key`` and ``identity.sealed`` private to their owner; journal files
  writable by their owner only (shared group: by the root's group too, the 0660
  the worker creates them with; never by "other"); the journal verified by its
  own rules as the root's owner (`kexpr.ops.readers.verify_journal`); the
  identity as a gateway would judge it (`kexpr.ops.identity_cli.identity_report`:
  a key missing or not the recorded one beside a journal with rows is the finding
  ``identity_mismatch``, its detail the reason; files this user cannot read are
  said in ``info.identity`` as ``unchecked``); a staging-style name accepted only
  where the product writes that staging file, and only while young
  (`kexpr.ops._audit_staging`; an old one is ``stale_staging_file``); and a
  redaction scan of every spool and status file, of the staging files of
  those, and of every file whose name the product does not give there: no
  digit outside an ID, timestamp, token or version, and no Hangul word outside
  the style lexicon (`kexpr.ops._audit_redaction`).

Rule of `kexpr.ops.audit` that applies here: a path is printed only as product-generated
names (`display_path`); any other component could carry content.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway_shim.operator_glossary import GLOSSARY_FILE_NAME
from kexpr.ops._audit_findings import AuditFinding, Check, CheckResult, Unusable
from kexpr.ops._audit_redaction import _scan_file
from kexpr.ops._audit_staging import is_stale, staged_as
from kexpr.ops.identity_cli import identity_report
from kexpr.ops.inputs import Problem, data_root_problem
from kexpr.ops.readers import ReadRefused, verify_journal
from kexpr.ops.supervisor import STATUS_NAME as SUPERVISOR_STATUS_NAME
from kexpr.spool._journal_identity import NAME as JOURNAL_IDENTITY_NAME
from kexpr.spool.fsio import group_member_uids
from kexpr.spool.layout import QUARANTINE_CLEAR_NAME, DataRoot
from kexpr.spool.rehearsal import MARKER_NAME as REHEARSAL_MARKER
from kexpr.spool.retention import RECORD_NAME as RETENTION_RECORD

_HEX32_JSON: Final = re.compile(r"[0-9a-f]{32}\.json")
_TOP_LEVEL: Final = frozenset(
    {
        "identity.key",
        "identity.fingerprint",
        "identity.sealed",
        "spool",
        "journal.lock",
        "worker.lock",
        "outcomes",
        "quarantine",
        "worker.status.json",
        SUPERVISOR_STATUS_NAME,
        # Retention's record of the last wall time seen (kexpr.spool.retention).
        RETENTION_RECORD,
        # The operator's dual glossary (gateway_shim.operator_glossary), optional.
        GLOSSARY_FILE_NAME,
        # A rehearsal root's marker (kexpr.spool.rehearsal).
        REHEARSAL_MARKER,
        # `kexpr quarantine clear`'s one-shot ask (kexpr.worker.resume).
        QUARANTINE_CLEAR_NAME,
    }
)
_SPOOL_DIRS: Final = frozenset({"requests", "claimed", "responses", "reports", "tmp"})
# A segment, and its rotation links (`kexpr.spool._journal_prior`).
_SEGMENT: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\.(?:jsonl|prior)")
_QUARANTINED: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\.[1-9][0-9]{0,5}\.jsonl")
# Private to the gateway in either sharing mode (`kexpr.spool.fsio` rule 3).
_PRIVATE_NAMES: Final = frozenset({"identity.key", "identity.sealed"})
# Scanned for redaction, besides every spool message.
_STATUS_NAMES: Final = frozenset({"worker.status.json", SUPERVISOR_STATUS_NAME})
SHARED_DIR_MODE: Final = 0o2770
SHARED_FILE_MODES: Final = frozenset({0o660, 0o640, 0o600})


def display_path(rel: tuple[str, ...]) -> str:
    """A relative path fit to print: each component a name the product gives an
    entry at that place (`_expected_name`); from the first that is not, every
    component is ``<unrecognized>`` (a name the product did not make could
    carry content, and so could anything below it)."""
    shown: list[str] = []
    for i, part in enumerate(rel):
        known = len(shown) == i and _expected_name(rel[: i + 1])
        shown.append(part if known else "<unrecognized>")
        if not known:
            shown.extend("<unrecognized>" for _ in rel[i + 1 :])
            break
    return "/".join(shown) or "."


def _final_name(rel: tuple[str, ...]) -> str:
    """What the entry at ``rel`` is or, being written, will be: a staging file
    the product writes there (`kexpr.ops._audit_staging`) is judged as the file
    it becomes."""
    return staged_as(rel) or rel[-1]


def _expected_name(rel: tuple[str, ...]) -> bool:
    """Whether the product gives an entry at ``rel`` this name (a staging file
    by its name and place, whatever its age)."""
    if len(rel) == 1:
        return rel[0] in _TOP_LEVEL or staged_as(rel) is not None
    if rel[0] == "spool":
        if len(rel) == 2:
            return rel[1] in _SPOOL_DIRS
        if len(rel) == 3 and rel[1] in _SPOOL_DIRS:
            if rel[1] == "tmp":
                return staged_as(rel) is not None
            return bool(_HEX32_JSON.fullmatch(rel[2]))
        return False
    if rel[0] == "outcomes":
        return len(rel) == 2 and (
            bool(_SEGMENT.fullmatch(rel[1])) or rel[1] == JOURNAL_IDENTITY_NAME
        )
    if rel[0] == "quarantine":
        return len(rel) == 2 and bool(_QUARANTINED.fullmatch(rel[1]))
    return False


def _judged(rel: tuple[str, ...]) -> bool:
    """Whether the redaction scan reads the entry at ``rel``: every file in the
    spool but the staging files of what is not a message (an identity key), the
    status files and the staging files of those, and every file whose name the
    product does not give there (what it is, not what it is called, decides)."""
    if not _expected_name(rel):
        return True
    final = _final_name(rel)
    if rel[0] == "spool":
        return staged_as(rel) is None or bool(_HEX32_JSON.fullmatch(final))
    return len(rel) == 1 and final in _STATUS_NAMES


def _walk(top: Path) -> Iterator[tuple[tuple[str, ...], os.stat_result]]:
    """Every entry under ``top`` (lstat; symlinks are reported, never followed).

    The root may be live: between listing a folder and examining an entry, the
    worker or a gateway may move or remove it (a request claimed, a response
    taken). An entry gone meanwhile was consumed, not unreadable, and is skipped,
    as `_scan_file` skips a file consumed before it is read. Any other error
    propagates (the check is then unusable)."""
    stack: list[tuple[str, ...]] = [()]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(top.joinpath(*rel)) as it:
                entries = sorted(it, key=lambda e: e.name)
        except FileNotFoundError:
            if not rel:
                raise
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            sub = (*rel, entry.name)
            yield sub, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(sub)


def audit_data_root(path: Path, extra_owners: Iterable[int] = ()) -> CheckResult:
    result = CheckResult(Check.DATA_ROOT, str(path))
    root = DataRoot(path)
    problem = data_root_problem(root.root)
    if problem is Problem.SYMLINK:
        result.add(AuditFinding.SYMLINK, ".")
        return result
    if problem is not None:
        # `kexpr.ops.inputs`: missing, not a directory, empty (no worker ran there).
        result.unusable = (
            Unusable.DATA_ROOT_MISSING
            if problem is Problem.MISSING
            else Unusable.DATA_ROOT_UNREADABLE
        )
        result.problem = problem.value
        return result
    try:
        top = os.lstat(root.root)
    except OSError:
        result.unusable = Unusable.DATA_ROOT_MISSING
        result.problem = Problem.MISSING.value
        return result
    perms = stat.S_IMODE(top.st_mode)
    shared = perms == SHARED_DIR_MODE
    result.info["sharing"] = "shared_group" if shared else "private"
    owners = {top.st_uid, *extra_owners}
    if shared:
        owners |= group_member_uids(top.st_gid)
    try:
        key_st = os.lstat(root.identity_key)
        if stat.S_ISREG(key_st.st_mode):
            owners.add(key_st.st_uid)  # the gateway: it creates identity.key (design §3)
    except FileNotFoundError:
        pass
    rules = _Rules(owners=owners, gid=top.st_gid, shared=shared)
    rules.check(result, (), top)
    now = time.time()
    try:
        entries = list(_walk(root.root))
    except OSError:
        result.unusable = Unusable.DATA_ROOT_UNREADABLE
        return result
    for rel, st in entries:
        rules.check(result, rel, st)
        if not stat.S_ISREG(st.st_mode):
            continue
        # Only a young staging file is being written; an old one is judged whole.
        staging = staged_as(rel) is not None
        stale = staging and is_stale(st, now)
        if stale:
            result.add(AuditFinding.STALE_STAGING_FILE, display_path(rel))
        if _judged(rel):
            _scan_file(
                result,
                root.root,
                rel,
                display_path(rel),
                being_written=staging and not stale,
            )
    result.info["owners"] = sorted(owners)
    try:
        journal = verify_journal(root)
    except ReadRefused:
        result.unusable = Unusable.DATA_ROOT_UNREADABLE
        return result
    if journal.unusable is not None:
        result.unusable = Unusable.JOURNAL_UNCHECKED
    for finding, where in journal.findings:
        result.add(
            AuditFinding.JOURNAL_UNVERIFIED,
            f"{_enum_text(finding)} in {display_path(tuple(where.split('/')))}",
        )
    identity = identity_report(root)
    result.info["identity"] = identity.state.value
    if identity.finding:
        result.add(AuditFinding.IDENTITY_MISMATCH, identity.state.value)
    result.info["journal_segments"] = journal.segments
    result.info["journal_attempts"] = len(journal.records)
    result.info["journal_open_attempts"] = sum(1 for r in journal.records if r.outcome is None)
    if journal.quarantined:
        result.info["journal_quarantined"] = len(journal.quarantined)
    return result


def _enum_text(value: str) -> str:
    return value if re.fullmatch(r"[a-z_]{1,40}", value) else "unknown"


@dataclass(frozen=True, slots=True)
class _Rules:
    """`kexpr.spool.fsio` rule 3, as a report instead of an exception."""

    owners: set[int]
    gid: int
    shared: bool

    def check(self, result: CheckResult, rel: tuple[str, ...], st: os.stat_result) -> None:
        shown = display_path(rel)
        mode = st.st_mode
        perms = stat.S_IMODE(mode)
        if stat.S_ISLNK(mode):
            result.add(AuditFinding.SYMLINK, shown)
            return
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            result.add(AuditFinding.UNEXPECTED_FILE_TYPE, shown)
            return
        if rel and not _expected_name(rel):
            result.add(AuditFinding.UNEXPECTED_FILE, shown)
        if perms & 0o007:
            result.add(AuditFinding.WORLD_ACCESSIBLE, shown)
        if stat.S_ISDIR(mode):
            bad = perms != SHARED_DIR_MODE if self.shared else bool(perms & 0o7077)
        else:
            bad = perms not in SHARED_FILE_MODES if self.shared else bool(perms & 0o7077)
            if perms & (stat.S_ISUID | stat.S_ISGID):
                result.add(AuditFinding.SETID_BIT, shown)
        if bad and not perms & 0o007:
            result.add(AuditFinding.BAD_MODE, shown)
        if perms & 0o070 and st.st_gid != self.gid:
            result.add(AuditFinding.GROUP_MISMATCH, shown)
        if st.st_uid not in self.owners:
            result.add(AuditFinding.WRONG_OWNER, shown)
        if rel and _expected_name(rel) and _final_name(rel) in _PRIVATE_NAMES and perms & 0o077:
            result.add(AuditFinding.IDENTITY_KEY_SHARED, shown)
        # Journal files are their owner's to write. In the shared-group layout the
        # worker itself creates them 0660 in the root's group (the gateway's and
        # the worker's users are its members, and the hash chain, not the mode,
        # is what proves a row): a group write bit is the layout there, not a
        # finding. Elsewhere any write bit but the owner's is.
        writers = 0o002 if self.shared else 0o022
        if (
            len(rel) == 2
            and rel[0] in ("outcomes", "quarantine")
            and stat.S_ISREG(mode)
            and perms & writers
        ):
            result.add(AuditFinding.JOURNAL_WRITABLE_BY_OTHERS, shown)

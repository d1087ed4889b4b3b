"""Read-only, no-follow readers for the ops tools (``status``, ``audit``,
``promotion-report``).

The product's own readers (`kexpr.spool.fsio.read_private`, `kexpr.spool.journal.Journal`)
require the file to be owned by the reading process, which is right for the
worker and the shim and wrong for an operator or an auditor who inspects a data
root owned by the worker's user. These readers keep every other rule:

1. ``O_NOFOLLOW`` on the final component, then ``fstat`` on the descriptor: a
   symlink or a non-regular file is refused (`ReadProblem`), never followed.
2. Bounded: a file larger than the caller's limit is refused before it is read.
3. Nothing is ever written or created.
4. Ownership and modes are *reported* by the audit, not enforced here.

The journal is different: it is verified by the journal's own code
(`kexpr.spool.journal.audit_journal`, the rules the worker itself applies), run with
the credentials of the data root's owner — the identity those rules are written
for (`verify_journal`). Its rows are metadata only (design §5 rule 6).

Problems are enum values; no content is ever part of an exception.
"""

from __future__ import annotations

import enum
import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kexpr.spool.errors import ReasonError
from kexpr.spool.fsio import UnsafePath, read_bounded
from kexpr.spool.layout import DataRoot
from kexpr.spool.status import MAX_STATUS_BYTES, StatusRefused, WorkerStatus, parse_status


class ReadProblem(enum.StrEnum):
    MISSING = "missing"
    SYMLINK = "symlink"
    NOT_REGULAR_FILE = "not_regular_file"
    TOO_LARGE = "too_large"
    PERMISSION_DENIED = "permission_denied"
    IO_ERROR = "io_error"


class ReadRefused(ReasonError[ReadProblem]):
    """A file these readers refuse (rules 1-2); the enum only, never content."""


def read_nofollow(path: os.PathLike[str] | str, *, max_bytes: int) -> bytes:
    """The whole file, or `ReadRefused` (rules 1-2)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise ReadRefused(_problem(e)) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadRefused(ReadProblem.NOT_REGULAR_FILE)
        try:
            return read_bounded(fd, st, max_bytes)
        except UnsafePath as e:  # an OSError: must be caught before the one below
            raise ReadRefused(ReadProblem.TOO_LARGE) from e
    except OSError as e:
        raise ReadRefused(ReadProblem.IO_ERROR) from e
    finally:
        os.close(fd)


def read_worker_status(root: DataRoot) -> WorkerStatus:
    """The worker's status file read no-follow and bounded, parsed by its one
    parser (`kexpr.spool.status`); a document that does not parse is
    ``io_error``, as any other unusable read."""
    data = read_nofollow(root.status_file, max_bytes=MAX_STATUS_BYTES)
    try:
        return parse_status(data)
    except StatusRefused as e:
        raise ReadRefused(ReadProblem.IO_ERROR) from e


def _problem(e: OSError) -> ReadProblem:
    if e.errno == errno.ENOENT:
        return ReadProblem.MISSING
    if e.errno == errno.ELOOP:
        return ReadProblem.SYMLINK
    if e.errno in (errno.EACCES, errno.EPERM):
        return ReadProblem.PERMISSION_DENIED
    return ReadProblem.IO_ERROR


@dataclass(frozen=True, slots=True)
class JournalRecord:
    """One attempt as the journal records it: metadata only (design §5)."""

    surface: str
    mode: str
    started_at_utc: str
    outcome: str | None  # None while the attempt is open


@dataclass(frozen=True, slots=True)
class JournalCheck:
    """The journal verified by its own rules, or why it could not be.

    ``findings``: ``(finding enum, product-relative place)`` pairs, e.g.
    ``("torn_tail", "outcomes/2026-11-30.jsonl")``. ``unusable``: the check could
    not run at all (``as_owner_denied``: not root and not the owner).
    """

    findings: tuple[tuple[str, str], ...]
    records: tuple[JournalRecord, ...]
    segments: int
    quarantined: tuple[str, ...]  # the UTC day of each quarantined file
    sealed: int
    unusable: str | None = None

    @property
    def ok(self) -> bool:
        return self.unusable is None and not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": [list(f) for f in self.findings],
            "records": [[r.surface, r.mode, r.started_at_utc, r.outcome] for r in self.records],
            "segments": self.segments,
            "quarantined": list(self.quarantined),
            "sealed": self.sealed,
            "unusable": self.unusable,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> JournalCheck:
        return cls(
            findings=tuple((str(a), str(b)) for a, b in obj["findings"]),
            records=tuple(
                JournalRecord(str(s), str(m), str(t), None if o is None else str(o))
                for s, m, t, o in obj["records"]
            ),
            segments=int(obj["segments"]),
            quarantined=tuple(str(d) for d in obj["quarantined"]),
            sealed=int(obj["sealed"]),
            unusable=obj["unusable"],
        )


def _verify_here(root: DataRoot) -> JournalCheck:
    from kexpr.spool.journal import audit_journal

    audit = audit_journal(root)
    return JournalCheck(
        findings=tuple((f.finding, f.where) for f in audit.findings),
        records=tuple(
            JournalRecord(
                r.surface,
                r.mode.value,
                r.started_at_utc,
                None if r.outcome is None else r.outcome.value,
            )
            for r in sorted(audit.index.by_attempt.values(), key=lambda r: r.started_at_utc)
        ),
        segments=len(audit.segments),
        quarantined=tuple(name[:10] for name in audit.quarantined),
        sealed=len(audit.index.sealed),
    )


def verify_journal(root: DataRoot) -> JournalCheck:
    """`kexpr.spool.journal.audit_journal` as the data root's owner.

    As that owner: called directly. As root for another owner: in a forked child
    that takes the owner's uid, primary group and supplementary groups first
    (leaving uid 0 drops every capability), so that exactly the worker's
    ownership rules apply; the child returns metadata as JSON over a pipe.
    Otherwise the check is unusable (``as_owner_denied``). Raises `ReadRefused`
    when the data root itself cannot be examined.
    """
    try:
        st = os.lstat(root.root)
    except OSError as e:
        raise ReadRefused(_problem(e)) from e
    if stat.S_ISLNK(st.st_mode):
        raise ReadRefused(ReadProblem.SYMLINK)
    if not stat.S_ISDIR(st.st_mode):
        raise ReadRefused(ReadProblem.NOT_REGULAR_FILE)
    me = os.geteuid()
    if me == st.st_uid:
        return _verify_here(root)
    if me != 0:
        return JournalCheck((), (), 0, (), 0, unusable="as_owner_denied")
    return _verify_forked(root, st.st_uid, st.st_gid)


def _verify_forked(root: DataRoot, uid: int, gid: int) -> JournalCheck:
    import json
    import pwd

    try:
        pw = pwd.getpwuid(uid)
        groups = os.getgrouplist(pw.pw_name, pw.pw_gid)
        primary = pw.pw_gid
    except KeyError:
        groups, primary = [gid], gid
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        payload = b""
        try:
            os.close(r)
            os.setgroups(groups)
            os.setresgid(primary, primary, primary)
            os.setresuid(uid, uid, uid)
            payload = json.dumps(_verify_here(root).to_json()).encode("utf-8")
        except BaseException:  # noqa: BLE001 - the child must reach os._exit, whatever happened
            payload = b""
        finally:
            view = memoryview(payload)
            while view:
                view = view[os.write(w, view) :]
            os._exit(0)
    os.close(w)
    chunks = []
    try:
        while chunk := os.read(r, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(child, 0)
    try:
        return JournalCheck.from_json(json.loads(b"".join(chunks)))
    except (ValueError, KeyError, TypeError):
        return JournalCheck((), (), 0, (), 0, unusable="as_owner_failed")

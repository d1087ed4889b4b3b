"""The journal's operator side: the whole-root audit for `kexpr journal verify`
(every finding, one per file, instead of stopping at the first) and the
torn-tail command `kexpr journal quarantine` (docs/journal.md).

Both work on a `Journal` they are handed (`kexpr.spool.journal` calls them),
so this module never imports the journal at run time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from kexpr.spool import _journal_identity
from kexpr.spool._journal_files import seal
from kexpr.spool._journal_rows import Finding, Index, JournalUnverified
from kexpr.spool._journal_verify import verify_segment_bytes
from kexpr.spool.fsio import FileId, UnsafePath, fsync_dir, link_into, unlink_if_same

if TYPE_CHECKING:
    from kexpr.spool.journal import Journal

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class JournalFinding:
    """One finding of `audit_journal`: an enum and where (a relative product
    path such as ``outcomes/2026-11-30.jsonl``; never content)."""

    finding: str
    where: str


@dataclass(slots=True)
class JournalAudit:
    findings: list[JournalFinding] = field(default_factory=list)
    index: Index = field(default_factory=Index)
    segments: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def found(self, e: JournalUnverified, where: str) -> None:
        self.findings.append(JournalFinding(e.finding.value, where))


def audit(j: Journal) -> JournalAudit:
    """Verify every segment and quarantined file of ``j``, collecting *every*
    finding (one per file) instead of stopping at the first.

    Read-only: takes ``journal.lock`` (so that a row being appended is never
    mistaken for a torn tail) and never writes a row.
    """
    out = JournalAudit()
    root = j._root
    try:
        with j.locked():
            for q in _listed(out, "quarantine", j.quarantined):
                out.quarantined.append(q.name)
                try:
                    data, _ = j._read_file(root.quarantine / q.name, q.segment)
                    seal(data, q, out.index)
                except JournalUnverified as e:
                    out.found(e, f"quarantine/{q.name}")
            for segment in _listed(out, "outcomes", j.segments):
                out.segments.append(segment)
                scratch = Index(
                    by_artifact=dict(out.index.by_artifact),
                    by_attempt=dict(out.index.by_attempt),
                    sealed=dict(out.index.sealed),
                    sealed_open=out.index.sealed_open,
                )
                try:
                    data, _ = j._read_segment(segment)
                    verify_segment_bytes(data, segment, scratch)
                except JournalUnverified as e:
                    out.found(e, f"outcomes/{segment}.jsonl")
                    continue
                out.index = scratch
            # The journal's record of its key (kexpr.spool._journal_identity rule 4).
            where = f"outcomes/{_journal_identity.NAME}"
            try:
                _journal_identity.read(root)
            except _journal_identity.InvalidRecord:
                out.findings.append(JournalFinding(Finding.FIELD_FORMAT.value, where))
            except UnsafePath as e:
                out.findings.append(JournalFinding(e.reason.value, where))
            except OSError:
                out.findings.append(JournalFinding(Finding.UNSAFE_FILE.value, where))
    except JournalUnverified as e:
        out.found(e, "journal.lock")
    except UnsafePath as e:
        out.findings.append(JournalFinding(e.reason.value, "journal.lock"))
    except OSError:
        out.findings.append(JournalFinding(Finding.UNSAFE_FILE.value, "journal.lock"))
    return out


def _listed(out: JournalAudit, where: str, listing: Callable[[], list[_T]]) -> list[_T]:
    """``listing()``, or nothing with its finding noted at ``where``."""
    try:
        return listing()
    except JournalUnverified as e:
        out.found(e, where)
        return []


def quarantine_torn(j: Journal, segment: str, *, apply: bool) -> str:
    """Set aside a segment whose only defect is a torn last line.

    Returns the quarantine file name it was (or would be) linked to. Raises
    `JournalUnverified` with the finding that makes it ineligible. The caller
    holds ``worker.lock`` (the worker is stopped). Never rewrites a byte.
    """
    with j.locked():
        if segment not in j.segments():
            raise JournalUnverified(Finding.UNEXPECTED_FILE, segment)
        index, _ = j._load_unlocked(skip=segment)
        data, st = j._read_segment(segment)
        if data.endswith(b"\n") or not data:
            raise JournalUnverified(Finding.TORN_TAIL, segment)  # not torn: nothing to do
        cut = data.rfind(b"\n") + 1
        verify_segment_bytes(data[:cut], segment, index)
        taken = {q.name for q in j.quarantined()}
        n = 1
        while f"{segment}.{n}.jsonl" in taken:
            n += 1
        name = f"{segment}.{n}.jsonl"
        if not apply:
            return name
        src = j._segment_path(segment)
        try:
            link_into(src, j._root.quarantine / name)
            unlink_if_same(src, FileId.of(st))
            fsync_dir(j._root.outcomes)
        except OSError as e:  # an UnsafePath too
            raise JournalUnverified(Finding.UNSAFE_FILE, segment) from e
        j.index, j._tails = j._load_unlocked()
        return name

"""The journal's files on disk (`kexpr.spool.journal` rules 2, 7 and "Torn
tail"): listing the segments and quarantined files (names of real UTC days,
nothing else allowed), reading one through `kexpr.spool.fsio` (bounded), and
sealing a quarantined file's artifact keys into the dedupe index.

Every refusal is a `JournalUnverified` finding (fail closed), never content.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kexpr.spool._journal_identity import NAME as JOURNAL_IDENTITY_NAME
from kexpr.spool._journal_rows import (
    _PRIOR_NAME,
    _QUARANTINE_NAME,
    _SEGMENT_NAME,
    _TORN_KEY,
    MAX_SEGMENT_BYTES,
    Finding,
    Index,
    JournalUnverified,
    dedupe_key,
    segment_date,
)
from kexpr.spool._journal_verify import verify_segment_bytes
from kexpr.spool.fsio import UnsafePath, list_dir, open_read
from kexpr.spool.layout import DataRoot


@dataclass(frozen=True, slots=True)
class QuarantinedFile:
    name: str  # YYYY-MM-DD.N.jsonl
    segment: str


def _real_day(segment: str) -> bool:
    try:
        segment_date(segment)
    except ValueError:
        return False
    return True


# The one name in ``outcomes/`` that is not a day's.
_OUTCOMES_FIXED: Final = frozenset({JOURNAL_IDENTITY_NAME})


def _names(d: Path) -> list[str]:
    try:
        return list_dir(d)
    except FileNotFoundError:
        return []
    except UnsafePath as e:
        raise JournalUnverified(Finding.UNSAFE_FILE, "") from e


def _dated(
    d: Path,
    pattern: re.Pattern[str],
    beside: re.Pattern[str] | None = None,
    fixed: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """(name, its day) of every entry of ``d`` ``pattern`` matches; a name
    neither it nor ``beside`` matches (nor one of the ``fixed`` names), or whose
    day is not a real one, is `Finding.UNEXPECTED_FILE`."""
    out: list[tuple[str, str]] = []
    for n in _names(d):
        if n in fixed:
            continue
        m = pattern.fullmatch(n)
        other = None if m is not None or beside is None else beside.fullmatch(n)
        if other is not None and _real_day(other.group(1)):
            continue
        if m is None or not _real_day(m.group(1)):
            raise JournalUnverified(Finding.UNEXPECTED_FILE, "")
        out.append((n, m.group(1)))
    return out


def segment_names(root: DataRoot) -> list[str]:
    """The days of ``outcomes/YYYY-MM-DD.jsonl``, sorted; any other name but a
    segment's links (``YYYY-MM-DD.prior``, `kexpr.spool._journal_prior`) and the
    journal's identity record (``identity.json``, `kexpr.spool._journal_identity`)
    is `Finding.UNEXPECTED_FILE`."""
    listed = _dated(root.outcomes, _SEGMENT_NAME, _PRIOR_NAME, _OUTCOMES_FIXED)
    return sorted(day for _, day in listed)


def quarantined_files(root: DataRoot) -> list[QuarantinedFile]:
    """``quarantine/YYYY-MM-DD.N.jsonl``, by day then N; any other name is
    `Finding.UNEXPECTED_FILE`."""
    out = [QuarantinedFile(n, day) for n, day in _dated(root.quarantine, _QUARANTINE_NAME)]
    return sorted(out, key=lambda q: (q.segment, int(q.name.split(".")[1])))


def read_journal_file(path: Path, segment: str) -> tuple[bytes, os.stat_result]:
    """Read a segment through `kexpr.spool.fsio` (no symlink on the way, regular,
    owner/mode, bounded). Any refusal is `Finding.UNSAFE_FILE`."""
    try:
        fd, st = open_read(path)
    except OSError as e:  # an UnsafePath too
        raise JournalUnverified(Finding.UNSAFE_FILE, segment) from e
    try:
        if st.st_size > MAX_SEGMENT_BYTES:
            raise JournalUnverified(Finding.UNSAFE_FILE, segment)
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def seal(data: bytes, q: QuarantinedFile, index: Index) -> None:
    """Fold a quarantined file into ``index`` as sealed artifact keys (dedupe only).

    Its complete lines must verify exactly like a segment's (they did when it was
    quarantined: anything else now is tampering); the torn rest is searched for
    the one field it may have got as far as (``artifact_key`` sorts first).
    """
    cut = data.rfind(b"\n") + 1
    prefix, tail = data[:cut], data[cut:]
    scratch = Index(
        by_artifact=dict(index.by_artifact),
        by_attempt=dict(index.by_attempt),
        sealed=dict(index.sealed),
    )
    verify_segment_bytes(prefix, q.segment, scratch)
    for aid, rec in scratch.by_attempt.items():
        if aid in index.by_attempt:
            continue
        index.sealed[dedupe_key(rec.artifact_key)] = q.segment
        if rec.outcome is None:
            index.sealed_open += 1
    m = _TORN_KEY.match(tail)
    if m is not None:
        ident = dedupe_key(m.group(1).decode("ascii"))
        if ident in index.by_artifact:
            raise JournalUnverified(Finding.DUPLICATE_ARTIFACT, q.segment)
        index.sealed.setdefault(ident, q.segment)

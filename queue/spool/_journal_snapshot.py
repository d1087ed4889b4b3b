"""The journal verified in another process (worker start-up, `kexpr.worker.preload`).

The worker forks a child that verifies the journal while the parent imports the
SDK (docs/performance.md). The child's verdict is never trusted as such: the
parent installs it only if every journal file is still exactly one the child
read (a `Print` each), and otherwise loads by itself.
"""

from __future__ import annotations

import marshal
import os
from typing import TYPE_CHECKING, Final

from kexpr.spool._journal_prior import prior_days
from kexpr.spool._journal_rows import Index, JournalUnverified, _count_open, _Tail, dedupe_key
from kexpr.spool._journal_verify import _MODE_BY_VALUE, _OUTCOME_OR_OPEN, _record
from kexpr.spool.fsio import open_read

if TYPE_CHECKING:
    from kexpr.spool.journal import Journal

# A journal file as read: (kind "s"egment | "q"uarantined, name, device, inode,
# size, ctime ns). Equal prints mean the same bytes unless someone forged a ctime,
# which needs CAP_SYS_TIME or the raw device.
Print = tuple[str, str, int, int, int, int]
_EXPORT_VERSION: Final = "kexpr-journal-export-v1"


def file_print(kind: str, name: str, st: os.stat_result) -> Print:
    return (kind, name, st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)


def prints_now(j: Journal) -> list[Print]:
    """`Print` of every journal file now (opened and checked, not read)."""
    out: list[Print] = []
    for kind, d, names in (
        ("q", j._root.quarantine, [q.name for q in j.quarantined()]),
        ("s", j._root.outcomes, [f"{s}.jsonl" for s in j.segments()]),
    ):
        for name in names:
            fd, st = open_read(d / name)
            os.close(fd)
            out.append(file_print(kind, name if kind == "q" else name[: -len(".jsonl")], st))
    return out


def export_verified(j: Journal) -> bytes:
    """Verify everything exactly as `load` does and return the result for
    `adopt` in another process: the index, the tails and a print of every
    file read (name, device, inode, size, ctime). Raises what `load` raises.

    The worker forks a child for this at start-up, so that the verification
    runs on the second core while the parent imports the SDK (docs/
    performance.md). The child's verdict is never trusted: a child that
    fails sends nothing, and the parent loads by itself.
    """
    prints: list[Print] = []
    with j.locked():
        index, tails = j._load_unlocked(prints=prints)
    records = tuple(
        (
            r.attempt_id,
            r.artifact_key,
            r.surface,
            r.mode.value,
            r.started_at_utc,
            r.deadline_at_utc,
            r.segment,
            None if r.outcome is None else r.outcome.value,
        )
        for r in index.by_attempt.values()
    )
    return marshal.dumps(
        (
            _EXPORT_VERSION,
            records,
            tuple(index.sealed.items()),
            index.sealed_open,
            tuple((seg, t.sequence, t.digest, t.size, t.ino) for seg, t in tails.items()),
            tuple(prints),
        )
    )


def adopt(j: Journal, blob: bytes) -> bool:
    """Install what `export_verified` produced elsewhere, under the journal
    lock, only if every journal file is still exactly one it read (same
    names, device, inode, size and ctime: an append, a rewrite in place, a
    new, removed or swapped file all change a print). False, with nothing
    installed, on any difference or any doubt about ``blob``: the caller
    then calls `load`."""
    with j.locked():
        try:
            version, records, sealed, sealed_open, tails, prints = marshal.loads(blob)
            if version != _EXPORT_VERSION or list(prints) != prints_now(j):
                return False
            # A rotation's links are not in the export: `load` reads them.
            if prior_days(j._root):
                return False
            index = Index(sealed=dict(sealed), sealed_open=sealed_open)
            # Dict lookups, not Enum(value) calls: 36,000 records here.
            # A value no enum has is a KeyError: refused like any doubt.
            by_attempt, by_artifact, record = index.by_attempt, index.by_artifact, _record
            modes, outcomes = _MODE_BY_VALUE, _OUTCOME_OR_OPEN
            for aid, akey, surface, mode, started, deadline, segment, outcome in records:
                rec = record(
                    aid, akey, surface, modes[mode], started, deadline, segment, outcomes[outcome]
                )
                by_attempt[aid] = by_artifact[dedupe_key(akey)] = rec
            new_tails = {
                seg: _Tail(seq, digest, size, ino) for seg, seq, digest, size, ino in tails
            }
            _count_open(index, new_tails)
        except (ValueError, TypeError, KeyError, EOFError, OSError, JournalUnverified):
            return False
        j.index, j._tails = index, new_tails
        return True

"""The links of a rotation (`gateway_shim.identity` rule 4): a request under the
new key names the artifact's keys under sealed keys (``prior_artifact_keys``,
`kexpr.spool.messages`), and the attempt it starts must be found under each of
them too, so that a request written under an old key (queued before the
rotation, or from a gateway that has not yet taken the new key) is not a second
call. A row has exactly its 13 fields (`kexpr.spool.journal` rule 1), so the
links live beside the segment of their start row, in ``outcomes/YYYY-MM-DD.prior``:

1. One line per attempt, canonical JSON ``{"attempt_id", "prior_artifact_keys"}``:
   HMACs only (32 hex, 1..`MAX_PRIOR_ARTIFACT_KEYS`, distinct), never content.
2. Written and fsynced under the journal lock *before* the start row (a new file:
   its directory fsynced too), so no start row is ever on disk without its
   links. A line whose attempt has no start row (the row's append failed, or a
   crash between the two) links nothing: the index is derived from the rows,
   and a link only names where an existing attempt is also found.
3. A last line without its LF was never acknowledged (no row, no call followed
   it): reading ignores it, and the next append cuts it off first (as
   `kexpr.spool.journal` rule 4a undoes its own unacknowledged bytes). Any
   other line that is not exactly the format fails the journal closed.
4. Rows win over links (`kexpr.spool._journal_rows.Index.link`): a link never
   hides an attempt journaled under its own key, and a prior key the index
   already knows is not linked. Links can only make the worker answer without a
   call; they never make one.
5. Retention removes the file with its segment.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kexpr.spool._journal_files import read_journal_file
from kexpr.spool._journal_rows import (
    _PRIOR_NAME,
    Finding,
    JournalUnverified,
    segment_date,
)
from kexpr.spool.canonical import canonical_json
from kexpr.spool.fsio import UnsafePath, fsync_dir, list_dir, open_append, open_read
from kexpr.spool.layout import DataRoot

# `kexpr.spool.messages.MAX_PRIOR_ARTIFACT_KEYS` (kept here: the journal does not
# import the message contract).
MAX_LINKED_KEYS: Final = 8
_HEX32: Final = re.compile(r"[0-9a-f]{32}")
_FIELDS: Final = frozenset({"attempt_id", "prior_artifact_keys"})


def prior_path(root: DataRoot, day: str) -> Path:
    return root.outcomes / f"{day}.prior"


def prior_days(root: DataRoot) -> list[str]:
    """The days of ``outcomes/YYYY-MM-DD.prior`` files, sorted."""
    try:
        names = list_dir(root.outcomes)
    except FileNotFoundError:
        return []
    except UnsafePath as e:
        raise JournalUnverified(Finding.UNSAFE_FILE, "") from e
    days = []
    for n in names:
        m = _PRIOR_NAME.fullmatch(n)
        if m is not None:
            segment_date(m.group(1))  # listing already refused an unreal day
            days.append(m.group(1))
    return sorted(days)


def render_link(attempt_id: str, prior: Sequence[str]) -> bytes:
    if not _valid(attempt_id, list(prior)):
        raise ValueError("prior link")
    doc = {"attempt_id": attempt_id, "prior_artifact_keys": list(prior)}
    return (canonical_json(doc) + "\n").encode("ascii")


def _valid(attempt_id: object, prior: object) -> bool:
    return (
        isinstance(attempt_id, str)
        and _HEX32.fullmatch(attempt_id) is not None
        and isinstance(prior, list)
        and 1 <= len(prior) <= MAX_LINKED_KEYS
        and len(set(prior)) == len(prior)
        and all(isinstance(k, str) and _HEX32.fullmatch(k) for k in prior)
    )


def read_links(root: DataRoot, day: str) -> list[tuple[str, tuple[str, ...]]]:
    """The links of ``day`` (rule 1, 3); `JournalUnverified` for anything else."""
    data, _ = read_journal_file(prior_path(root, day), day)
    out: list[tuple[str, tuple[str, ...]]] = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        try:
            text = line.decode("ascii")
            obj = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise JournalUnverified(Finding.MALFORMED_ROW, day) from e
        if not isinstance(obj, dict) or set(obj) != _FIELDS:
            raise JournalUnverified(Finding.FIELD_SET, day)
        if canonical_json(obj) != text:
            raise JournalUnverified(Finding.NON_CANONICAL_ROW, day)
        aid, prior = obj["attempt_id"], obj["prior_artifact_keys"]
        if not _valid(aid, prior):
            raise JournalUnverified(Finding.FIELD_FORMAT, day)
        out.append((aid, tuple(prior)))
    return out


def append_link(root: DataRoot, day: str, attempt_id: str, prior: Sequence[str]) -> None:
    """Rule 2: append and fsync one line (caller holds the journal lock).
    `JournalUnverified` when the file is not ours to append to; ``OSError``
    when the write or its fsync failed (nothing acknowledged: rule 3)."""
    line = render_link(attempt_id, prior)
    path = prior_path(root, day)
    created = not _exists(path)
    try:
        fd, st = open_append(path, create=created)
    except UnsafePath as e:
        raise JournalUnverified(Finding.APPEND_CONFLICT, day) from e
    try:
        if st.st_size and not _ends_in_lf(path, st.st_size):
            os.ftruncate(fd, _last_lf(path) + 1)  # rule 3: a torn line of ours
        written = os.write(fd, line)
        if written != len(line):
            raise OSError("short write")
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(root.outcomes)


def _exists(path: Path) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def _ends_in_lf(path: Path, size: int) -> bool:
    fd, _ = open_read(path)
    try:
        return os.pread(fd, 1, size - 1) == b"\n"
    finally:
        os.close(fd)


def _last_lf(path: Path) -> int:
    data, _ = read_journal_file(path, "")
    return data.rfind(b"\n")

"""Hand-built journal segments, written from the plan's text (not by our writer)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path

from kexpr.spool.journal import AttemptRecord, Journal, SpoolMode, format_ts
from kexpr.spool.layout import DataRoot


def start_attempt(
    j: Journal, akey: str, aid: str, at: dt.datetime, mode: SpoolMode = SpoolMode.SHADOW
) -> AttemptRecord:
    """Append one ``daily.v1`` start row through the writer, its deadline 4 s after ``at``."""
    with j.locked():
        return j.append_start(
            artifact_key=akey,
            surface="daily.v1",
            mode=mode,
            attempt_id=aid,
            started_at=at,
            deadline_at_utc=format_ts(at + dt.timedelta(seconds=4)),
        )


def write_segment(root: DataRoot, name: str, data: bytes, mode: int = 0o600) -> Path:
    path = root.outcomes / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    os.write(fd, data)
    os.close(fd)
    os.chmod(path, mode)
    return path


def hand_rows(
    akey: str,
    aid: str,
    day: str,
    outcomes: list[str],
    mode: str = "shadow",
    *,
    surface: str = "daily.v1",
) -> bytes:
    """Rows written by hand from the plan's text (not by our writer)."""
    out, prev = [], "0" * 64
    start = f"{day}T10:00:00.000000Z"
    for seq, outcome in enumerate(["attempt_started", *outcomes], start=1):
        row: dict[str, object] = {
            "schema_version": "korean-expression-journal-v1",
            "sequence": seq,
            "artifact_key": akey,
            "surface": surface,
            "mode": mode,
            "attempt_id": aid,
            "state": "attempt_started" if seq == 1 else "finalized",
            "outcome": outcome,
            "started_at_utc": start,
            "deadline_at_utc": f"{day}T10:00:04.000000Z",
            "finalized_at_utc": None if seq == 1 else f"{day}T10:00:01.250000Z",
            "previous_row_digest": prev,
        }
        text = json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        row["row_digest"] = prev = hashlib.sha256(text.encode("utf-8")).hexdigest()
        out.append(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(out) + "\n").encode("utf-8")

"""The spool's two shared spellings, stated once: canonical JSON (journal rows,
spool messages, capsules and compositions; design §5, §6) and the UTC
timestamp every row, message and marker carries.

Pure: no I/O, no clock. `kexpr.spool.journal` re-exports all of it, so callers
outside the spool keep importing ``canonical_json``/``format_ts``/``parse_ts``
from there.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Final

# Exact RFC3339 UTC with microseconds: ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.
TS_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
# Its pattern: the hour (``YYYY-MM-DDTHH``, a real date and hour: checked by
# strptime) and the rest (minutes and seconds 00-59, six digits, ``Z``). The
# journal's fast path builds its row patterns from these two parts.
TS_HOUR: Final = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}"
TS_REST: Final = r":[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"
_TS: Final = re.compile(TS_HOUR + TS_REST)


def canonical_json(value: object) -> str:
    """The one canonical JSON spelling: sorted keys, UTF-8 (``ensure_ascii=False``),
    no spaces (separators ``(",", ":")``)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def format_ts(t: dt.datetime) -> str:
    """``t`` as `TS_FORMAT`; ValueError unless it is UTC."""
    if t.tzinfo is None or t.utcoffset() != dt.timedelta(0):
        raise ValueError("timestamp must be UTC")
    return t.strftime(TS_FORMAT)


def parse_ts(s: str) -> dt.datetime:
    """The exact format *and* a real instant (``2026-02-30T…`` is refused)."""
    if not _TS.fullmatch(s):
        raise ValueError("timestamp format")
    return dt.datetime.strptime(s, TS_FORMAT).replace(tzinfo=dt.UTC)


__all__ = ["TS_FORMAT", "TS_HOUR", "TS_REST", "canonical_json", "format_ts", "parse_ts"]

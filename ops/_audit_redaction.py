"""The spool redaction scan of ``kexpr audit``'s data-root check (design §10): every
spool and status file must parse as what its folder holds, and hold no digit
outside an ID, timestamp, token or version and no Hangul word outside the style
lexicon.

Rule of `kexpr.ops.audit` that applies here: a finding names the file by its
product-generated relative path (the caller's `display_path`), never its content.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from kexpr.ops._audit_findings import AuditFinding, CheckResult
from kexpr.ops.readers import ReadProblem, ReadRefused, read_nofollow

MAX_SPOOL_FILE_BYTES: Final = 64 * 1024

# The only shapes in which a digit may appear in a spool or status string.
_DIGIT_SHAPES: Final = (
    re.compile(r"[0-9a-f]{32}|[0-9a-f]{64}"),  # request/attempt IDs, artifact keys
    re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"),  # timestamps
    re.compile(r"[a-z][a-z._-]*-v[0-9]{1,2}"),  # schema versions (korean-expression-v4)
    re.compile(r"[a-z][a-z_]*(\.[a-z][a-z_]*)*\.v[0-9]{1,2}"),  # surfaces (daily.v1)
    re.compile(r"[a-z][a-z_]*(\.[a-z][a-z_]*)+\.[1-9]"),  # adaptive.dual.review.N
)
_TOKEN: Final = re.compile(r"\[\[[PA]:[0-9]{2}\]\]")
_HANGUL: Final = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_KEY_SHAPE: Final = re.compile(r"[a-z][a-z_]{0,40}")
_MESSAGE_DIRS: Final = frozenset(
    {("spool", "requests"), ("spool", "claimed"), ("spool", "responses"), ("spool", "reports")}
)


def _scan_file(result: CheckResult, root: Path, rel: tuple[str, ...], shown: str) -> None:
    from kexpr.spool.contract.lexicon import SAFE_STYLE_LEXEMES

    try:
        data = read_nofollow(root.joinpath(*rel), max_bytes=MAX_SPOOL_FILE_BYTES)
    except ReadRefused as e:
        if e.problem is not ReadProblem.MISSING:  # consumed meanwhile: not a finding
            result.add(AuditFinding.SPOOL_MALFORMED, shown)
        return
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        obj = None
        if rel[:2] != ("spool", "tmp"):  # a staging file may be half-written
            result.add(AuditFinding.SPOOL_MALFORMED, shown)
        # Still scan the raw text: a half-written file can leak as well as a whole one.
        _scan_string(result, shown, data.decode("utf-8", "replace"), frozenset(SAFE_STYLE_LEXEMES))
        return
    if rel[:2] in _MESSAGE_DIRS and not _parses_as(rel[1], data):
        result.add(AuditFinding.SPOOL_MALFORMED, shown)
    lexicon = frozenset(SAFE_STYLE_LEXEMES)
    for s in _strings(obj):
        _scan_string(result, shown, s, lexicon)


def _parses_as(folder: str, data: bytes) -> bool:
    from kexpr.spool.messages import MessageError, parse_report, parse_request, parse_response

    parser = {
        "requests": parse_request,
        "claimed": parse_request,
        "responses": parse_response,
        "reports": parse_report,
    }[folder]
    try:
        parser(data)
    except (MessageError, ValueError):
        return False
    return True


def _strings(obj: object) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if not _KEY_SHAPE.fullmatch(str(k)):
                yield str(k)
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _scan_string(result: CheckResult, shown: str, s: str, lexicon: frozenset[str]) -> None:
    stripped = _TOKEN.sub(" ", s)
    has_digit = any(unicodedata.category(c) == "Nd" for c in stripped)
    if has_digit and not any(p.fullmatch(s) for p in _DIGIT_SHAPES):
        result.add(AuditFinding.SPOOL_DIGITS, shown)
    if _HANGUL.search(stripped):
        words = re.split(r"[\s,.]+", stripped)
        if any(_HANGUL.search(w) and w not in lexicon for w in words):
            result.add(AuditFinding.SPOOL_UNEXPECTED_HANGUL, shown)

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


def _scan_file(
    result: CheckResult, root: Path, rel: tuple[str, ...], shown: str, *, being_written: bool
) -> None:
    """Judge one file. ``being_written``: a young staging file
    (`kexpr.ops._audit_staging`), which a reader can meet at any point of its
    writing: not JSON yet is not a finding, and what was written of it is judged
    (`_written_strings`). Any other file is judged whole."""
    from kexpr.spool.contract.lexicon import SAFE_STYLE_LEXEMES

    try:
        data = read_nofollow(root.joinpath(*rel), max_bytes=MAX_SPOOL_FILE_BYTES)
    except ReadRefused as e:
        if e.problem is not ReadProblem.MISSING:  # consumed meanwhile: not a finding
            result.add(AuditFinding.SPOOL_MALFORMED, shown)
        return
    if being_written:
        # A reservation (`kexpr.spool.fsio.reserve`) is allocated before it is
        # written: until its writer truncates it, what follows the text is zeros.
        data = data.rstrip(b"\0")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        if not being_written:
            result.add(AuditFinding.SPOOL_MALFORMED, shown)
        # Still scan it: a half-written file can leak as well as a whole one.
        for s in _written_strings(data.decode("utf-8", "replace"), cut=being_written):
            _scan_string(result, shown, s, frozenset(SAFE_STYLE_LEXEMES))
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


_LITERAL: Final = re.compile(r'"((?:[^"\\]|\\.)*)"')
_STRUCTURE: Final = re.compile(r"[\s,:\[\]{}]+")
_JSON_SCALAR: Final = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|true|false|null")


def _written_strings(text: str, *, cut: bool) -> Iterator[str]:
    """What is judged of a file that is not (or not yet) JSON, as a whole file's
    strings are: every complete string literal, decoded; every word outside the
    literals but JSON's own numbers and keywords (a file that is not JSON at all
    is all such words); and what was written of an unterminated last literal.
    ``cut`` (a file being written): without that literal's last word (a writer
    may be in the middle of it: a cut timestamp or lexeme is not a finding, a
    whole word before it is judged). Otherwise nobody is writing it, and the
    last word is judged too."""

    def outside(part: str) -> Iterator[str]:
        for word in _STRUCTURE.split(part):
            if word and not _JSON_SCALAR.fullmatch(word):
                yield word

    end = 0
    for m in _LITERAL.finditer(text):
        yield from outside(text[end : m.start()])
        end = m.end()
        try:
            yield json.loads(m.group(0))
        except ValueError:
            yield m.group(1)  # not a valid literal: its raw text is judged
    tail = text[end:]
    opened = tail.find('"')
    if opened < 0:
        yield from outside(tail)
        return
    yield from outside(tail[:opened])
    words = tail[opened + 1 :].split()
    yield " ".join(words[:-1] if cut else words)


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

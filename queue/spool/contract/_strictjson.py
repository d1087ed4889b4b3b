"""The strict JSON reader shared by responses and capsules (design §6, parse order).

Rules for this module:

Rule 1: hard limits come before parsing (httpx's MAX_URL_LENGTH habit): encoding, size
        and BOM are checked on the raw bytes before `json.loads` sees anything.
Rule 2: the parse order is fixed and each step has its own reason:
          1. str → strict UTF-8 encode (lone surrogates fail); bytes → strict decode
                                                                      → not_utf8
          2. more than `MAX_RESPONSE_BYTES` bytes                      → too_large
          3. a leading UTF-8 BOM                                       → bom
          4. brackets nested deeper than `MAX_NESTING`, counted outside strings
             (a hard limit, before parsing; see Rule 5)                → malformed_json
          5. one `json` decode pass (one shared `JSONDecoder`, which is what
             `json.loads` runs); the first problem in document order wins:
             a key repeated in one object, compared *decoded* (so "\\u0073urface"
             repeats "surface"), at every depth                        → duplicate_key
             NaN / Infinity / -Infinity, or a float literal that overflows to ±inf
                                                                      → non_finite_number
             anything else json refuses (raw control characters inside strings,
             trailing data; nesting beyond the interpreter's recursion limit is a
             backstop only, step 4 stops it first)                   → malformed_json
          6. the top level is not an object                            → not_object
          7. every string, keys included, is NFC                       → not_nfc
          8. every string, keys included, is free of control/format/surrogate/private/
             unassigned characters (Unicode category C*: Cc Cf Cs Co Cn — Cf holds ZWJ,
             ZWNJ, ZWSP, word joiner, bidi controls, BOM, soft hyphen), line/paragraph
             separators (Zl, Zp) and Hangul fillers (U+115F U+1160 U+3164 U+FFA0)
                                                                      → forbidden_character
        Steps 7 and 8 run on *decoded* strings, so an escaped "\\u0007" is caught.
        Step 7 runs over all strings before step 8 (so the reason does not depend on
        which string comes first in the document).
Rule 3: JSON's structural whitespace (space, LF, CR, tab) and key order carry no meaning
        and are accepted: models in JSON mode pretty-print.
Rule 4: errors carry a reason and nothing else — never the document (json's own
        JSONDecodeError holds the whole document in `.doc`, so it is not chained).
Rule 5: the same content gets the same reason wherever it is judged. Deep nesting
        used to be caught only as a RecursionError, whose depth depends on how deep
        the *caller's* stack already is (worker thread, shim, CLI): a document nested
        ~700 deep was schema_mismatch from a shallow stack and malformed_json from a
        deep one. Step 4 makes that a fixed limit. Every document
        of this contract nests at most 5 deep (spool request → capsule → slots → slot
        → ids), so `MAX_NESTING` leaves room and stays far below any recursion limit.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from typing import Final

from ..errors import ReasonError
from .reasons import Reason

MAX_RESPONSE_BYTES: Final = 16 * 1024
MAX_NESTING: Final = 64  # Rule 5

# A JSON string (an unterminated one runs to the end) and the structural brackets.
_JSON_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)', re.DOTALL)
_BRACKET: Final = re.compile(r"[\[\]{}]")

_UTF8_BOM: Final = b"\xef\xbb\xbf"
HANGUL_FILLERS: Final[frozenset[str]] = frozenset("\u115f\u1160\u3164\uffa0")

# Python refuses int(str) beyond 4300 digits (CVE-2020-10735). Such a literal is valid
# JSON, so it parses to this marker, which no schema field accepts (schema_mismatch).
_MAX_INT_LITERAL_CHARS: Final = 4000


class _OversizedInt:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<oversized int literal>"


_OVERSIZED_INT: Final = _OversizedInt()


class StrictJsonError(ReasonError[Reason]):
    """Internal: the reader refused the document. Carries only a reason code.

    Deliberately not a ValueError: json.loads must not be able to mistake it for one of
    its own errors while it propagates out of a hook.
    """


def _object_pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # a key repeated (compared decoded, as json hands them)
        raise StrictJsonError(Reason.DUPLICATE_KEY)
    return obj


def _reject_constant(_name: str) -> object:
    # Called by json for exactly NaN, Infinity and -Infinity.
    raise StrictJsonError(Reason.NON_FINITE_NUMBER)


def _parse_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # e.g. 1e999
        raise StrictJsonError(Reason.NON_FINITE_NUMBER)
    return value


def _parse_int(literal: str) -> object:
    if len(literal) > _MAX_INT_LITERAL_CHARS:
        return _OVERSIZED_INT
    return int(literal)


def _nesting_exceeds(text: str, limit: int) -> bool:
    """Step 4: whether brackets outside strings nest deeper than ``limit``."""
    # Fast path, exact: the depth outside strings never exceeds the number of opening
    # brackets anywhere in the text, so a text with at most `limit` of them cannot
    # nest deeper. Every contract document takes this path.
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for bracket in _BRACKET.findall(_JSON_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def is_forbidden_char(ch: str) -> bool:
    """Rule 2 step 8 for one character."""
    category = unicodedata.category(ch)
    return category[0] == "C" or category in ("Zl", "Zp") or ch in HANGUL_FILLERS


def _strings(root: object) -> list[str]:
    """Every string of a decoded document, keys included (in no particular order)."""
    # Iterative walk: json.loads may return nesting close to the recursion limit.
    out: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, dict):
            out.extend(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


# One decoder for every call: json.loads(text, **hooks) would build a new decoder and
# scanner each time (the stdlib shares its default decoder between threads the same
# way). json.loads' own BOM test is step 3, already done on the raw bytes.
_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_object_pairs,
    parse_constant=_reject_constant,
    parse_float=_parse_float,
    parse_int=_parse_int,
)
_is_nfc: Final = functools.partial(unicodedata.is_normalized, "NFC")


def read_object(content: str | bytes, *, max_bytes: int = MAX_RESPONSE_BYTES) -> dict[str, object]:
    """Steps 1-8 of Rule 2: the decoded top-level object, or StrictJsonError."""
    if isinstance(content, str):
        try:
            raw = content.encode("utf-8", "strict")
        except UnicodeEncodeError:
            raise StrictJsonError(Reason.NOT_UTF8) from None
        text = content
    elif isinstance(content, (bytes, bytearray, memoryview)):
        raw = bytes(content)
        try:
            text = raw.decode("utf-8", "strict")
        except UnicodeDecodeError:
            raise StrictJsonError(Reason.NOT_UTF8) from None
    else:
        raise TypeError("content must be str or bytes")

    if len(raw) > max_bytes:
        raise StrictJsonError(Reason.TOO_LARGE)
    if raw.startswith(_UTF8_BOM):
        raise StrictJsonError(Reason.BOM)
    if _nesting_exceeds(text, MAX_NESTING):
        raise StrictJsonError(Reason.MALFORMED_JSON)

    try:
        document = _DECODER.decode(text)
    except StrictJsonError:
        raise
    except (ValueError, RecursionError):
        # JSONDecodeError is a ValueError; `from None` drops its `.doc` (Rule 4).
        raise StrictJsonError(Reason.MALFORMED_JSON) from None

    if not isinstance(document, dict):
        raise StrictJsonError(Reason.NOT_OBJECT)

    strings = _strings(document)
    if not all(map(_is_nfc, strings)):
        raise StrictJsonError(Reason.NOT_NFC)
    # Step 8 is a per-character property, so it holds for every string iff it holds for
    # their concatenation. Fast path, exact: str.isprintable() is False for every
    # character of Unicode category C* or Z* except the ASCII space (Python documents
    # this; the same UCD as unicodedata), so printable text can only fail step 8 by
    # a Hangul filler (category Lo). Anything else takes the per-character check.
    joined = "".join(strings)
    if joined.isprintable():
        if any(filler in joined for filler in HANGUL_FILLERS):
            raise StrictJsonError(Reason.FORBIDDEN_CHARACTER)
    elif any(is_forbidden_char(ch) for ch in joined):
        raise StrictJsonError(Reason.FORBIDDEN_CHARACTER)
    return document

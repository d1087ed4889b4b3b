"""Characters as Telegram counts them and breaks lines at them. Pure.

Rule 5 of the surface model (`gateway_shim.surfaces._model`) — Telegram counts
UTF-16 code units, not code points: an astral character (most emoji) is two units.
Every length and offset of the model is in UTF-16 units, and no body longer than
``TELEGRAM_MAX_UTF16`` is canonical or rendered.

``has_category`` finds the characters that break a line or control a client
(``LINE_BREAK_OR_CONTROL``): none stands inside a line of a rendered slot (the
model's Rule 4) or of a body (`gateway_shim.surfaces._text`).
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = [
    "LINE_BREAK_OR_CONTROL",
    "TELEGRAM_MAX_UTF16",
    "has_category",
    "utf16_len",
    "utf16_slice",
]

TELEGRAM_MAX_UTF16: Final = 4096

# Cc covers LF, CR, tab, NEL (U+0085) and the other C0/C1 controls; Zl/Zp are
# U+2028/U+2029, which Telegram clients and str.splitlines also treat as line breaks.
LINE_BREAK_OR_CONTROL: Final = frozenset({"Cc", "Zl", "Zp"})


def utf16_len(s: str) -> int:
    """Length of ``s`` in UTF-16 code units, the unit Telegram counts.

    ``surrogatepass`` so that a lone surrogate counts as the one unit it is
    instead of raising; the adapters reject such text separately.
    """
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def utf16_slice(encoded: bytes, start: int, end: int) -> str:
    """Decode the code units ``[start, end)`` of a UTF-16-LE encoded body."""
    return encoded[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")


def has_category(text: str, categories: frozenset[str]) -> bool:
    """Whether a character of ``text`` is of one of ``categories``: Unicode general
    categories C* or Z* other than Zs (``LINE_BREAK_OR_CONTROL``, say)."""
    # Fast path, exact: str.isprintable() is False for every character of category
    # C* or Z* but the ASCII space (Python documents this), so printable text has
    # none of them. Other text is checked per character.
    if text.isprintable():
        return False
    return any(unicodedata.category(c) in categories for c in text)

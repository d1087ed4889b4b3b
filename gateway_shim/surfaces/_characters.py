"""Characters as Telegram counts them and breaks lines at them. Pure.

Rule 5 of the surface model (`gateway_shim.surfaces._model`) — Telegram counts
UTF-16 code units, not code points: an astral character (most emoji) is two units.
Every length and offset of the model is in UTF-16 units, and no body longer than
``TELEGRAM_MAX_UTF16`` is canonical or rendered.
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["TELEGRAM_MAX_UTF16", "has_line_break_or_control", "utf16_len", "utf16_slice"]

TELEGRAM_MAX_UTF16: Final = 4096


def utf16_len(s: str) -> int:
    """Length of ``s`` in UTF-16 code units, the unit Telegram counts.

    ``surrogatepass`` so that a lone surrogate counts as the one unit it is
    instead of raising; the adapters reject such text separately.
    """
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def utf16_slice(encoded: bytes, start: int, end: int) -> str:
    """Decode the code units ``[start, end)`` of a UTF-16-LE encoded body."""
    return encoded[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")


def has_line_break_or_control(s: str) -> bool:
    # Cc covers LF, CR, tab, NEL (U+0085); Zl/Zp are U+2028/U+2029, which Telegram
    # clients and str.splitlines also treat as line breaks. Fast path, exact:
    # str.isprintable() is False for every character of category C* or Z* but the
    # ASCII space (Python documents this), so printable text has none of them.
    if s.isprintable():
        return False
    return any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in s)

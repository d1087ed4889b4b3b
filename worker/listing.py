"""Listing a spool directory (walked and checked by `kexpr.spool.fsio`)."""

from __future__ import annotations

from pathlib import Path

from kexpr.spool.fsio import list_dir


def json_names(d: Path) -> list[str]:
    """Spool entries (raises `kexpr.spool.fsio.UnsafePath`)."""
    try:
        names = list_dir(d)
    except FileNotFoundError:
        return []
    return [n for n in names if n.endswith(".json") and not n.startswith(".")]


def is_hex32(s: str) -> bool:
    return len(s) == 32 and all(c in "0123456789abcdef" for c in s)

"""Strict JSON for the operator tools' line-oriented inputs (`kexpr contract check
--jsonl`, `kexpr surfaces check --jsonl`): strict UTF-8, no duplicate key at any
depth, no NaN/Infinity, no recursion blow-up. One reader, so the two tools agree
on what a well-formed line is. (The model's response has its own, stricter reader:
`kexpr.spool.contract`'s `read_object`.)"""

from __future__ import annotations

import json


class NotStrictJson(ValueError):
    """The bytes are not one strict JSON value; carries no content."""


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj: dict[str, object] = {}
    for key, value in pairs:
        if key in obj:
            raise NotStrictJson("duplicate_key")
        obj[key] = value
    return obj


def _reject_constant(_: str) -> object:
    raise NotStrictJson("not_json")  # NaN / Infinity are not JSON


def loads_strict(raw: bytes) -> object:
    """The JSON value in ``raw``; raises `NotStrictJson`."""
    try:
        return json.loads(
            raw.decode("utf-8", "strict"),
            object_pairs_hook=_no_duplicates,
            parse_constant=_reject_constant,
        )
    except NotStrictJson:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise NotStrictJson("not_json") from e


def jsonl_lines(data: bytes) -> list[bytes]:
    """The lines of a JSON-lines input, split at LF: a final LF ends the last
    line; it does not start a new one."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines

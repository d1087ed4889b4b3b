"""Content-free log records on the ``kexpr.*`` loggers (docs/cli.md, "Logging").

Rules, the same as telemetry's:

1. A record is an event name (a fixed identifier) and fields whose values are
   enum members, integers, floats, booleans, None, a `known` product constant,
   or an `OperatorPath` (a path the operator configured, never one derived from
   data). Never a body, a value, a name, a date, a raw ID, a key, a prompt or a
   response.
   `event` enforces it when it formats: an event name that is not an identifier,
   or a value of any other type, is written as ``<refused>`` — fail closed, the
   record is still emitted so the refusal is visible.
2. Silent by default. The top logger ``kexpr`` carries a `logging.NullHandler`
   (the logging HOWTO's rule for libraries), so a host that imports
   ``gateway_shim`` hears nothing until it configures ``kexpr`` itself.
3. Only the command line attaches a handler (`configure`, for ``kexpr -v``).
"""

from __future__ import annotations

import enum
import logging
import re
import sys
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

TOP: Final = "kexpr"
REFUSED: Final = "<refused>"
_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")

_top = logging.getLogger(TOP)
if not any(isinstance(h, logging.NullHandler) for h in _top.handlers):
    _top.addHandler(logging.NullHandler())


@dataclass(frozen=True, slots=True)
class Known:
    """A product constant (a surface name, a command name) checked against the
    collection it must come from; anything else is shown as ``other``."""

    value: str


def known(value: str, allowed: Collection[str]) -> Known:
    return Known(value if value in allowed else "other")


@dataclass(frozen=True, slots=True)
class OperatorPath:
    """A path from the operator's own configuration (the data root a host gave
    its coordinator): configuration, not data, so a record may name it. Shown
    percent-encoded (`urllib.parse.quote`, ``/`` kept): one token without a
    space, control or non-ASCII character, so the record stays one line of
    ``k=v`` pairs, and an ordinary path reads as it was configured."""

    value: str


Field = enum.Enum | Known | OperatorPath | int | float | bool | None


def logger(name: str) -> logging.Logger:
    """``kexpr.<name>``."""
    return logging.getLogger(f"{TOP}.{name}")


def _shown(value: object) -> str:
    if value is None or isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, enum.Enum):
        inner = value.value
        return (
            str(inner)
            if isinstance(inner, str | int) and not isinstance(inner, bool)
            else value.name.lower()
        )
    if isinstance(value, Known):
        return value.value
    if isinstance(value, OperatorPath):
        return quote(value.value, safe="/")
    if isinstance(value, int | float):
        return repr(value)
    return REFUSED


def event(log: logging.Logger, level: int, name: str, /, **fields: Field) -> None:
    """One record: ``name k=v k=v`` (rule 1)."""
    if not log.isEnabledFor(level):
        return
    shown = {k: _shown(v) if _NAME.fullmatch(k) else REFUSED for k, v in fields.items()}
    text = " ".join(
        [name if _NAME.fullmatch(name) else REFUSED, *(f"{k}={v}" for k, v in shown.items())]
    )
    log.log(
        level,
        "%s",
        text,
        extra={"kexpr_event": name if _NAME.fullmatch(name) else REFUSED, "kexpr_fields": shown},
    )


def configure(verbosity: int) -> None:
    """The CLI's ``-v`` (info) / ``-vv`` (debug): one stderr handler on ``kexpr``.
    Zero leaves the logger silent (rule 2)."""
    if verbosity <= 0:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    _top.addHandler(handler)
    _top.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)


def verbosity() -> int:
    """The level `configure` set, as a count of ``-v`` (for a child's command line)."""
    level = _top.level
    if level == logging.NOTSET or level > logging.INFO:
        return 0
    return 2 if level <= logging.DEBUG else 1

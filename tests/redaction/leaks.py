"""The leak scanner of the redaction proofs.

Rule: no customer value, nor any substring of ≥ 3 characters of one that does not
also occur in the product's own static text, may appear in anything the product
writes, sends or logs.

- ``static_text()`` is the product's own text: every module-level string constant,
  string collection, string mapping and enum of the gateway, spool and worker
  packages (glossary, IDs, keys, lexicon, fixed body strings, the system
  instruction, every enum value), the JSON field names of every message model, and
  a few fixed wire words. Docstrings and dunders are not included. The end-to-end
  test adds what a probe presentation without customer text showed (status-file
  keys, library log templates).
- ``find_leak(value, text, static)`` returns the shortest non-static substring
  (≥ 3 chars) of ``value`` found in ``text``, or None. It is exact and cheap: it
  checks only each start's shortest non-static piece (``minimal_pieces``), because
  every longer non-static substring contains one of those.
- ``json_strings(blob)`` turns a JSON document into the text to scan: every key and
  every string value, decoded (so an escaped ``\\uXXXX`` leak is still found), with
  JSON nested inside a string (the wire capsule) opened too. Values of the product's
  own identifier fields (artifact key, request/attempt IDs, digests, timestamps) are
  checked against their exact format instead of being scanned, because random hex
  or a clock reading may contain any three characters by chance. JSON *numbers* are
  not scanned either (a pid or a counter may hold any three digits): where a number
  could carry data the end-to-end test pins it positively instead — the capsule's
  limits must be the manifest's, the wire request's parameters are fixed, journal
  rows have exactly their 13 fields and verify (``Journal.load``); what remains are
  the status files' pids and counters, and the worker's margin histograms, whose
  shape the end-to-end test pins too (`_check_status_figures`: fixed keys, this
  version's bucket edges, counts that add up).
"""

from __future__ import annotations

import enum
import functools
import importlib
import json
import pkgutil
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from pydantic import BaseModel

MIN_LEN: Final = 3

HEX32: Final = re.compile(r"[0-9a-f]{32}")
HEX64: Final = re.compile(r"[0-9a-f]{64}")
TIMESTAMP: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")

# Product identifier fields: never scanned, always format-checked (module docstring).
ID_FIELDS: Final[Mapping[str, re.Pattern[str]]] = {
    "artifact_key": HEX32,  # the 128-bit key this release writes
    "row_digest": HEX64,
    "previous_row_digest": HEX64,
    "request_id": HEX32,
    "attempt_id": HEX32,
    "submitted_at_utc": TIMESTAMP,
    "deadline_at_utc": TIMESTAMP,
    "started_at_utc": TIMESTAMP,
    "finalized_at_utc": TIMESTAMP,
    "heartbeat_at_utc": TIMESTAMP,
    # identity.fingerprint: a keyed hash of the identity key (gateway_shim.identity).
    "fingerprint": HEX32,
    # A request's fingerprints of its identity key and of those it continues
    # from, and its artifact's keys under sealed keys (kexpr.spool.messages).
    "identity_fingerprint": HEX32,
    "earlier_fingerprints": HEX32,
    "prior_artifact_keys": HEX32,
}

# Fixed words of the wire request and the status file that live in dict literals,
# not module constants (each is also pinned by a whitelist assertion in the test).
_WIRE_WORDS: Final = (
    "messages", "role", "system", "user", "content", "model", "temperature", "max_tokens",
    "response_format", "type", "json_object", "store", "stream", "gpt-4.1-mini",
    "https://api.openai.com/v1", "api.openai.com", "openai-direct", "chat_completions",
    "kexpr-worker-status-v1", "schema", "pid", "state", "journal", "verified", "unverified",
    "quarantine", "unsafe", "credential", "present", "absent", "counters", "ready",
    "starting", "stopping", "by_outcome",
    # The status file's margin and last-minute figures: the keys
    # inside them are module constants (surfaces, figures, provider failures).
    "last_minute", "calls_by_surface", "histogram_edges",
)  # fmt: skip

_PACKAGES: Final = ("kexpr.spool", "gateway_shim", "kexpr.worker", "kexpr.ops")


class IdFieldError(AssertionError):
    """A product identifier field that does not have its exact format."""


def _strings_of(value: object) -> Iterator[str]:
    if isinstance(value, enum.Enum):
        yield value.name
        if isinstance(value.value, str):
            yield value.value
    elif isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings_of(k)
            yield from _strings_of(v)
    elif isinstance(value, (tuple, list, frozenset, set)):
        for item in value:
            yield from _strings_of(item)
    elif isinstance(value, type) and issubclass(value, enum.Enum):
        for member in value:
            yield from _strings_of(member)
    elif isinstance(value, type) and issubclass(value, BaseModel):
        yield from value.model_fields


def _modules() -> Iterator[Any]:
    for name in _PACKAGES:
        package = importlib.import_module(name)
        yield package
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if info.name.endswith("__main__"):
                continue
            yield importlib.import_module(info.name)


def static_strings() -> list[str]:
    out: list[str] = list(_WIRE_WORDS)
    for module in _modules():
        for attr, value in vars(module).items():
            if attr.startswith("__"):
                continue
            owner = getattr(value, "__module__", module.__name__)
            if isinstance(value, type) and not str(owner).startswith(_PACKAGES):
                continue  # a class imported from elsewhere (pydantic, enum, ...)
            out.extend(_strings_of(value))
    return out


def static_text(extra: Iterable[str] = ()) -> str:
    """The product's static text as one searchable string (items NUL-separated)."""
    return "\0".join([*static_strings(), *extra])


def minimal_pieces(value: str, static: str) -> tuple[str, ...]:
    """For each start in ``value``, its shortest substring of ≥ MIN_LEN characters that
    is not in ``static`` (if any). Every non-static substring contains one of them, so
    ``value`` leaks into a text iff one of these pieces occurs in it."""
    grams = _grams(static)
    pieces: list[str] = []
    for i in range(len(value) - MIN_LEN + 1):
        if value[i : i + MIN_LEN] not in grams:  # fast path: a set lookup
            pieces.append(value[i : i + MIN_LEN])
            continue
        for j in range(i + MIN_LEN + 1, len(value) + 1):
            if value[i:j] not in static:
                pieces.append(value[i:j])
                break  # a longer piece from i contains this one
    return tuple(pieces)


@functools.lru_cache(maxsize=4)
def _grams(static: str) -> frozenset[str]:
    return frozenset(static[i : i + MIN_LEN] for i in range(len(static) - MIN_LEN + 1))


def find_leak(value: str, text: str, static: str) -> str | None:
    """The shortest substring of ``value`` (≥ MIN_LEN) not in ``static`` and in ``text``."""
    found = [piece for piece in minimal_pieces(value, static) if piece in text]
    return min(found, key=len) if found else None


def json_strings(value: Any, *, key: str | None = None) -> Iterator[str]:
    """Keys and string values of a decoded JSON document (see module docstring)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from json_strings(v, key=k)
    elif isinstance(value, list):
        for item in value:
            yield from json_strings(item, key=key)
    elif isinstance(value, str):
        pattern = ID_FIELDS.get(key or "")
        if pattern is not None:
            if pattern.fullmatch(value) is None:
                raise IdFieldError(key)
            return
        if value[:1] in "{[":
            try:
                inner = json.loads(value)
            except ValueError:
                pass
            else:  # JSON inside a string (the wire capsule): scan it decoded
                yield from json_strings(inner)
                return
        yield value


def scan_text_of(blob: bytes | str) -> str:
    """What to scan in one blob: decoded JSON strings when it is JSON (or JSON lines),
    else the text itself."""
    text = blob.decode("utf-8", "replace") if isinstance(blob, bytes) else blob
    try:
        return "\n".join(json_strings(json.loads(text)))
    except ValueError:
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and all(line.lstrip().startswith("{") for line in lines):
        try:
            return "\n".join(s for line in lines for s in json_strings(json.loads(line)))
        except ValueError:
            pass
    return text

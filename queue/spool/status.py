"""``worker.status.json``: the worker's heartbeat file, its one format.

Written by `kexpr.worker.status.StatusFile` (by rename, at least once per scan
pass) and read by the shim (`gateway_shim._heartbeat`), ``kexpr status``,
``kexpr promotion-report``, ``kexpr quarantine clear`` and `wait_ready`. Every
reader parses it here; each keeps its own way of opening the file (the shim's
owner-checked read, the ops tools' no-follow read) and its own verdict.

1. **Bounded.** A document over `MAX_STATUS_BYTES` is refused before it is
   parsed (`StatusProblem.TOO_LARGE`); the readers also bound their reads by it.
2. **Strict JSON object.** UTF-8 JSON whose top level is an object, or
   `StatusRefused` with an enum reason (``not_json``, ``not_object``); no
   content is ever part of the refusal.
3. **Typed where every reader agrees.** `WorkerStatus` holds the schema's
   verdict (``current``: the schema is `STATUS_SCHEMA`), the state word (a
   string or None), the pid (a non-negative int or None) and the two
   timestamps (the journal's exact format and a real instant, else None). The
   rest stays in ``document`` for the readers that validate figures field by
   field (`kexpr.ops.status_cli`); fields are only ever added, so a reader of
   an older file keeps working.
4. **One staleness bound.** `STALE_AFTER_S` (10 s: ten scan passes) is the
   shim's bound and ``kexpr status``'s default.

Light: stdlib and `kexpr.spool.canonical`/`errors` only, since the shim imports it.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kexpr.spool.canonical import parse_ts
from kexpr.spool.errors import ReasonError

__all__ = [
    "MAX_STATUS_BYTES",
    "READY",
    "STALE_AFTER_S",
    "STATUS_SCHEMA",
    "WORKER_STATES",
    "StatusProblem",
    "StatusRefused",
    "WorkerStatus",
    "parse_status",
]

STATUS_SCHEMA: Final = "kexpr-worker-status-v1"
STALE_AFTER_S: Final = 10.0
MAX_STATUS_BYTES: Final = 64 * 1024
READY: Final = "ready"
# The run loop's states, in the order a worker goes through them.
WORKER_STATES: Final = frozenset({"starting", READY, "stopping", "stopped"})


class StatusProblem(enum.StrEnum):
    """Why a status document was not parsed (content-free)."""

    TOO_LARGE = "too_large"
    NOT_JSON = "not_json"
    NOT_OBJECT = "not_object"


class StatusRefused(ReasonError[StatusProblem]):
    pass


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """One parsed ``worker.status.json`` (rule 3)."""

    current: bool
    state: str | None
    pid: int | None
    started_at_utc: str | None
    heartbeat_at_utc: str | None
    document: Mapping[str, Any]

    @property
    def ready(self) -> bool:
        """The worker's own word that it serves (its schema and ``ready``)."""
        return self.current and self.state == READY

    def heartbeat_age_s(self, now: dt.datetime) -> float | None:
        """Seconds from the written heartbeat to ``now``; None without one."""
        return _age(self.heartbeat_at_utc, now)

    def started_age_s(self, now: dt.datetime) -> float | None:
        return _age(self.started_at_utc, now)


def parse_status(data: bytes) -> WorkerStatus:
    """The document, or `StatusRefused` (rules 1-3)."""
    if len(data) > MAX_STATUS_BYTES:
        raise StatusRefused(StatusProblem.TOO_LARGE)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise StatusRefused(StatusProblem.NOT_JSON) from e
    if not isinstance(doc, dict):
        raise StatusRefused(StatusProblem.NOT_OBJECT)
    state = doc.get("state")
    pid = doc.get("pid")
    return WorkerStatus(
        current=doc.get("schema") == STATUS_SCHEMA,
        state=state if isinstance(state, str) else None,
        pid=pid if type(pid) is int and pid >= 0 else None,
        started_at_utc=_ts(doc.get("started_at_utc")),
        heartbeat_at_utc=_ts(doc.get("heartbeat_at_utc")),
        document=doc,
    )


def _ts(v: object) -> str | None:
    if not isinstance(v, str):
        return None
    try:
        parse_ts(v)
    except ValueError:
        return None
    return v


def _age(ts: str | None, now: dt.datetime) -> float | None:
    return None if ts is None else (now - parse_ts(ts)).total_seconds()

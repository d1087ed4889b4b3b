"""Reading the state ``kexpr status`` reports on (`kexpr.ops.status_cli`): the
data root, ``worker.status.json`` (its one parser, `kexpr.ops.readers.read_worker_status`)
and ``supervisor.status.json`` read no-follow and bounded, each validated
(`kexpr.ops._status_figures`); whether their pids are alive; the journal's file
system; the glossary and the identity as the gateway would find them. `collect`
puts it together with its verdict (`kexpr.ops._status_verdicts`) into one
`StatusReport`, whose `StatusReport.to_json` is the ``--json`` document."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kexpr.ops._status_figures import (
    ENUMISH,
    Price,
    ProcessStatus,
    admission_figures,
    as_enum,
    as_int,
    call_figures,
    cost_figures,
    enum_counts,
    spend_figures,
    style_figures,
    token_figures,
)
from kexpr.ops._status_verdicts import UP, HealthVerdict, health_verdict
from kexpr.ops.identity_cli import IdentityReport, identity_report
from kexpr.ops.readers import ReadProblem, ReadRefused, read_nofollow, read_worker_status
from kexpr.ops.supervisor import ChildState, supervisor_status_path
from kexpr.spool.canonical import parse_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import Outcome
from kexpr.spool.status import MAX_STATUS_BYTES, STALE_AFTER_S, WORKER_STATES, WorkerStatus
from kexpr.worker.status import ROLLING

SUPERVISOR_STATES: Final = frozenset(s.value for s in ChildState)
# Counters an earlier release's worker wrote for an admission this release
# retired (the learned speed refusal, docs/upgrade.md): read past, never shown.
RETIRED_COUNTERS: Final = frozenset({Outcome.PROVIDER_TOO_SLOW.value})


@dataclass(frozen=True, slots=True)
class StatusReport:
    """What ``kexpr status`` found; `to_json` is its ``--json`` document."""

    verdict: HealthVerdict
    worker: ProcessStatus | None
    supervisor: ProcessStatus | None
    problem: str | None = None
    # The dual glossary in force (`glossary_status`): "shipped <sha256>",
    # "operator <sha256>", "invalid <problem>" or "unreadable <reason>" (as the
    # gateway's user reads it). Digests and enums, no text.
    glossary: str | None = None
    # What a gateway would do with the data root's identity (`identity_report`).
    identity: IdentityReport | None = None

    def to_json(self) -> dict[str, Any]:
        def proc(p: ProcessStatus | None) -> dict[str, Any] | None:
            if p is None:
                return None
            return {
                "state": p.state,
                "pid": p.pid,
                "alive": p.alive,
                "heartbeat_age_s": None
                if p.heartbeat_age_s is None
                else round(p.heartbeat_age_s, 3),
                **p.fields,
            }

        return {
            "schema": "kexpr-status-v1",
            "verdict": self.verdict.value,
            "problem": self.problem,
            "worker": proc(self.worker),
            "supervisor": proc(self.supervisor),
            "glossary": self.glossary,
            "identity": None if self.identity is None else self.identity.to_json(),
            "left_to_style": left_to_style(),
        }


def left_to_style() -> dict[str, list[dict[str, Any]]]:
    """Per surface, what the product can still style: each slot and manifest
    branch (semantic IDs, no text) the fit table leaves a choice
    (`kexpr.spool.contract.fit.slot_styleable`), with its count of compositions;
    [] for a surface with nothing to style (`surface_styleable`, design §6.2).
    From the code alone: the same on every data root."""
    from kexpr.spool.contract import MANIFEST
    from kexpr.spool.contract.fit import compositions, slot_styleable, surface_styleable

    surfaces = dict.fromkeys(row.surface for row in MANIFEST.values())
    out: dict[str, list[dict[str, Any]]] = {}
    for surface in surfaces:
        out[surface] = [
            {
                "slot_id": slot_id,
                "ids": list(branch),
                "compositions": len(compositions(slot_id, branch)),
            }
            for row in MANIFEST.values()
            if row.surface == surface and surface_styleable(surface)
            for slot_id in row.slot_ids
            for branch in row.branches
            if slot_styleable(slot_id, branch)
        ]
    return out


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else (e.g. the worker's own user)
    return True


def _age(v: object, now: dt.datetime) -> float | None:
    if not isinstance(v, str):
        return None
    try:
        return (now - parse_ts(v)).total_seconds()
    except ValueError:
        return None


def _load(path: Path) -> dict[str, Any]:
    """The supervisor's status file as a JSON object (the worker's has its own
    parser, `kexpr.ops.readers.read_worker_status`)."""
    data = read_nofollow(path, max_bytes=MAX_STATUS_BYTES)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ReadRefused(ReadProblem.IO_ERROR) from e
    if not isinstance(obj, dict):
        raise ReadRefused(ReadProblem.IO_ERROR)
    return obj


def _last_minute(v: object) -> dict[str, int]:
    if not isinstance(v, Mapping):
        return {}
    return {name: n for name in ROLLING if (n := as_int(v.get(name))) is not None}


def _process(
    obj: Mapping[str, Any],
    states: frozenset[str],
    now: dt.datetime,
    alive: Callable[[int], bool],
    fields: dict[str, Any],
) -> ProcessStatus:
    """What every status file says alike: its state, its pid (and whether that
    process is alive) and the age of its heartbeat."""
    pid = as_int(obj.get("pid"))
    return ProcessStatus(
        state=as_enum(obj.get("state"), states),
        pid=pid,
        alive=None if pid is None else alive(pid),
        heartbeat_age_s=_age(obj.get("heartbeat_at_utc"), now),
        fields=fields,
    )


def _worker(status: WorkerStatus, now: dt.datetime, alive: Callable[[int], bool]) -> ProcessStatus:
    obj = status.document
    counters_in = obj.get("counters")
    counters: dict[str, Any] = {}
    if isinstance(counters_in, Mapping):
        for k, v in sorted(counters_in.items()):
            if k == "by_outcome" and isinstance(v, Mapping):
                counters[k] = enum_counts(v)
            elif as_int(v) is not None and ENUMISH.fullmatch(str(k)) and k not in RETIRED_COUNTERS:
                counters[str(k)] = v
    return _process(
        obj,
        WORKER_STATES,
        now,
        alive,
        {
            "journal": as_enum(obj.get("journal"), frozenset({"verified", "unverified"})),
            "quarantine": None if obj.get("quarantine") is None else as_enum(obj.get("quarantine")),
            "unsafe": enum_counts(obj.get("unsafe")),
            # Entry and scan faults (worker.daemon.Fault), enum keys only.
            "faults": enum_counts(obj.get("faults")),
            # Why new attempts are refused while the journal is fine (e.g.
            # ``segment_full``), or None.
            "refusing": None if obj.get("refusing") is None else as_enum(obj.get("refusing")),
            "credential": as_enum(
                obj.get("credential"), frozenset({"present", "absent", "rehearsal"})
            ),
            # A rehearsal worker (the built-in model, no key): nothing it journals counts.
            "rehearsal": obj.get("rehearsal") is True,
            # spool.lifecycle rule 7: retention is off for this worker's life.
            "clock_step_observed": obj.get("clock_step_observed") is True,
            # spool.journal rule 7a: why retention removes nothing now; absent
            # (an older worker) or null: nothing said.
            "retention_held": None
            if obj.get("retention_held") is None
            else as_enum(obj.get("retention_held")),
            "counters": counters,
            # The ROLLING counters over the last 60 s (worker.status.RollingCount).
            "last_minute": _last_minute(obj.get("last_minute")),
            "calls_by_surface": call_figures(obj),
            "admission": admission_figures(obj),
            "spend": spend_figures(obj),
            # The worker runs as root (said at its start too; not a verdict).
            "running_as_root": obj.get("running_as_root") is True,
            # What the model writes, content-free: style words per slot.
            "style_words_by_slot": style_figures(obj),
            "tokens_by_surface": token_figures(obj),
            "started_age_s": status.started_age_s(now),
        },
    )


def _supervisor(
    obj: Mapping[str, Any], now: dt.datetime, alive: Callable[[int], bool]
) -> ProcessStatus:
    last_exit = obj.get("last_exit")
    return _process(
        obj,
        SUPERVISOR_STATES,
        now,
        alive,
        {
            "restarts": as_int(obj.get("restarts")),
            "last_exit": last_exit if type(last_exit) is int else None,
            "worker_pid": as_int(obj.get("worker_pid")),
        },
    )


def collect(
    root: DataRoot,
    *,
    stale_after_s: float = STALE_AFTER_S,
    now: dt.datetime | None = None,
    alive: Callable[[int], bool] = pid_alive,
    price: Price | None = None,
) -> StatusReport:
    report = _collect(root, stale_after_s=stale_after_s, now=now, alive=alive)
    w = report.worker
    if w is not None:
        w.fields["cost"] = cost_figures(
            w.fields["tokens_by_surface"], w.fields.pop("started_age_s"), price
        )
    return report


def _collect(
    root: DataRoot,
    *,
    stale_after_s: float,
    now: dt.datetime | None,
    alive: Callable[[int], bool],
) -> StatusReport:
    now = now or dt.datetime.now(dt.UTC)
    from kexpr.ops.inputs import data_root_problem

    problem = data_root_problem(root.root)
    if problem is not None:
        return StatusReport(
            HealthVerdict.STATUS_UNREADABLE, None, None, f"data_root_{problem.value}"
        )
    supervisor: ProcessStatus | None = None
    try:
        supervisor = _supervisor(_load(supervisor_status_path(root)), now, alive)
    except ReadRefused as e:
        if e.problem is not ReadProblem.MISSING:
            return StatusReport(
                HealthVerdict.STATUS_UNREADABLE, None, None, f"supervisor_{e.problem.value}"
            )
    try:
        worker = _worker(read_worker_status(root), now, alive)
    except ReadRefused as e:
        if e.problem is not ReadProblem.MISSING:
            return StatusReport(
                HealthVerdict.STATUS_UNREADABLE, None, supervisor, f"worker_{e.problem.value}"
            )
        worker = None
    glossary = glossary_status(root)
    identity = identity_report(root)
    verdict = health_verdict(worker, supervisor, stale_after_s)
    reason: str | None = None
    if verdict is HealthVerdict.HEALTHY:
        verdict, reason = _serving_problem(root, worker, glossary)
    elif verdict is HealthVerdict.NO_CREDENTIAL:
        reason = "credential_absent"
    elif verdict is HealthVerdict.JOURNAL_UNWRITABLE:
        reason = "journal_append_undone"
    # The worker is up and serving: the gateway's refusal is the news (it makes
    # every presentation canonical; ranked with a quarantine).
    if identity.finding and verdict in UP:
        verdict, reason = HealthVerdict.IDENTITY_MISMATCH, None
    return StatusReport(verdict, worker, supervisor, reason, glossary=glossary, identity=identity)


def journal_space_problem(root: DataRoot) -> str | None:
    """``read_only`` / ``no_space`` when no journal row could be appended on the
    journal's file system now (less room than two rows: a start row and its
    terminal row), else None. A file system that cannot be asked: None (the
    worker's own refused append says it, `HealthVerdict.JOURNAL_UNWRITABLE`)."""
    from kexpr.spool.journal import MAX_ROW_BYTES

    try:
        fs = os.statvfs(root.outcomes)
    except OSError:
        return None
    if fs.f_flag & os.ST_RDONLY:
        return "read_only"
    if fs.f_bavail * fs.f_frsize < 2 * MAX_ROW_BYTES:
        return "no_space"
    return None


def _serving_problem(
    root: DataRoot, worker: ProcessStatus | None, glossary: str
) -> tuple[HealthVerdict, str | None]:
    """A worker otherwise healthy: is the journal's file system writable, and can
    the gateway use the glossary?"""
    if worker is not None and (space := journal_space_problem(root)) is not None:
        return HealthVerdict.JOURNAL_UNWRITABLE, f"journal_{space}"
    if glossary.startswith(("invalid ", "unreadable ")):
        return HealthVerdict.GLOSSARY_UNUSABLE, "glossary_" + glossary.split(" ", 1)[1]
    return HealthVerdict.HEALTHY, None


def glossary_status(root: DataRoot) -> str:
    """The dual glossary in force for ``root``, as the shim would load it: read
    by the shim's own rules (no-follow, regular, owner and mode as the data
    root's other files, bounded), with ownership judged for the data root's
    gateway user, whoever runs ``status`` (`kexpr.ops._gateway_view`). A file
    the gateway's user could not read is ``unreadable <reason>`` (the reason of
    `kexpr.spool.fsio.UnsafeReason`, or ``io_error``); one it reads but refuses
    is ``invalid <problem>``."""
    from gateway_shim.operator_glossary import GlossaryError, GlossaryProblem
    from kexpr.ops._gateway_view import gateway_user, read_as_gateway
    from kexpr.spool.fsio import UnsafePath

    try:
        user = gateway_user(root)
    except UnsafePath as e:
        return f"unreadable {e.reason.value}"
    except OSError:
        return "unreadable io_error"
    try:
        glossary = read_as_gateway(root, user)
    except GlossaryError as e:
        if e.problem in (GlossaryProblem.UNSAFE_FILE, GlossaryProblem.UNREADABLE):
            cause = e.__cause__
            reason = cause.reason.value if isinstance(cause, UnsafePath) else "io_error"
            return f"unreadable {reason}"
        return f"invalid {e.problem.value}"
    return f"{'operator' if glossary.operator else 'shipped'} {glossary.digest()}"

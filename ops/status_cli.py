"""``kexpr status``: is the worker up, and what has it done? (design §10)

Reads ``worker.status.json`` (the worker's heartbeat and counters) and, when
present, ``supervisor.status.json`` (`kexpr.ops.supervisor`). Both are content-free by
construction; this command still prints only what it has validated: a state
from a fixed set, integers, and timestamps in the journal's exact format.
Anything else in those files is shown as ``unknown`` — a planted string is
never echoed.

HealthVerdict (exit code):

- ``healthy`` (0): state ``ready``, heartbeat fresher than ``--stale-after``, and
  the recorded pid alive.
- ``no_status`` / ``starting`` / ``stopping`` / ``stopped`` / ``stale_heartbeat`` /
  ``worker_not_running`` / ``crash_loop`` / ``fatal`` / ``quarantined`` (the worker
  is up but refuses every new attempt: journal unverified) / ``refusing`` (up,
  journal verified, new attempts refused for the reason shown, e.g.
  ``segment_full``) / ``no_credential`` (a real worker, not a rehearsal, that
  has no key: every request is ``credential_unavailable``) /
  ``journal_unwritable`` (the journal cannot be appended: the worker's last
  append was refused and undone, ``append_undone``; or the journal's file system
  is read-only or out of space, ``read_only`` / ``no_space``) /
  ``glossary_unusable`` (the gateway cannot use the operator glossary: a file
  its user could not read, ``unreadable <reason>``, or one that is not valid,
  ``invalid <problem>``: every dual card is then canonical) / ``expiring`` (up, but in the last minute at least
  `EXPIRING_MIN` requests expired before the worker reached them or were reached
  with too little time left to answer, and they were more than half of the
  requests it claimed: the host is getting canonical answers
  because the worker does not keep up) / ``spend_capped`` (up, but the start
  rows of the rolling hour or of the UTC day have reached the worker's spend
  cap: new artifacts are answered canonical ``spend_cap_reached`` with no call)
  / ``unusual_rate`` (up, but the last hour's start rows are far above the
  profile's history, `kexpr.worker.spend.unusual_rate`: at least ten times the
  median of its active hours and at least 30 — a host presenting new artifacts
  in a loop)
  / ``identity_mismatch`` (the worker is
  up, but the data root's ``identity.key`` is missing or is not the recorded
  key beside a journal with rows: every presentation is refused canonical,
  `kexpr.ops.identity_cli`)
  / ``speed_refusals`` (up, but in the last
  ten minutes at least `REFUSED_MIN` requests of one surface were refused for the
  provider's speed, and they were more than `REFUSED_SHARE` of that surface's
  requests that reached the admission: those messages are not styled) (1).
- ``status_unreadable`` (2): a symlink, a non-regular or oversized file, or
  malformed JSON where the status should be; or the data root is unusable
  (``data_root_<problem>``, `kexpr.ops.inputs`: missing, not a directory, a
  symlink, an empty directory), said in one line naming the path.

Besides the verdict it shows: the last minute's claimed
requests, calls and expired requests (``expired`` is the rate per minute), and per
surface the calls, their failures, the p95 call time against the 3 s budget and
the call-time and completion-token histograms (`kexpr.worker.histograms`). Those
figures are validated like everything else: public surface names and failure
words as keys, integers as counts, and histograms only when the file's bucket
edges are exactly this version's; anything else is dropped, never echoed.
And (`admission_figures`) the provider's speed as the worker estimated it from its
own calls, the provider cool-down's state, and per surface the requests refused
before a start row for either (`kexpr.worker.speed`, `kexpr.worker.cooldown`).
And (`spend_figures`) the spend bound: both caps, the start rows of the rolling
hour and of the UTC day, the requests refused at a cap and the profile's hourly
median (`kexpr.worker.spend`).

The worker rewrites its status on every pass of its scan loop (at least once a
second, `kexpr.worker.daemon.RESCAN_INTERVAL_S`), so a heartbeat older than the
default 10 s means the loop is stuck or the process is gone.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kexpr.ops.identity_cli import IdentityReport, identity_report, render_line
from kexpr.ops.readers import ReadProblem, ReadRefused, read_nofollow, read_worker_status
from kexpr.ops.supervisor import ChildState, supervisor_status_path
from kexpr.spool.canonical import parse_ts
from kexpr.spool.contract import SURFACES
from kexpr.spool.contract.budget import ANSWER_BUDGET_TOKENS
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import PROVIDER_FAILURES
from kexpr.spool.ranges import within
from kexpr.spool.status import MAX_STATUS_BYTES as MAX_STATUS_BYTES
from kexpr.spool.status import STALE_AFTER_S as STALE_AFTER_S
from kexpr.spool.status import WORKER_STATES as WORKER_STATES
from kexpr.spool.status import WorkerStatus
from kexpr.worker.histograms import (
    CALL_BUDGET_S,
    FIGURES,
    P95,
    edges_json,
    margin,
    upper_edge,
)
from kexpr.worker.speed import Evidence
from kexpr.worker.spend import CAP_RANGE, rate_threshold, unusual_rate
from kexpr.worker.status import RECENT_ADMISSION, REFUSALS, ROLLING

SUPERVISOR_STATES: Final = frozenset(s.value for s in ChildState)
_ENUMISH: Final = re.compile(r"[a-z][a-z_]{0,40}")
_FAILURE_WORDS: Final = frozenset(o.value for o in PROVIDER_FAILURES)
# `HealthVerdict.EXPIRING`: at least this many requests expired in the last minute, and
# more than half of those claimed. A floor, so that one or two stale requests (a
# restart's leftovers, a host that paused) do not flip the verdict; a burst in
# which most requests expire does (a measured burst of 1,000 artifacts from 20
# gateway processes: 204 start rows, 55 of them after the deadline).
EXPIRING_MIN: Final = 5
# `HealthVerdict.SPEED_REFUSALS`: a surface whose requests are refused for the
# provider's speed (``provider_too_slow``) more than one time in five over the last
# ten minutes, at least 5 of them. The speed model refuses only on evidence that an
# answer cannot arrive (`kexpr.worker.speed`), so such a share is a provider too
# slow for that shape, and the operator enabled styling that does nothing for it:
# worth saying, never silent. A share, not a count, so a busy worker's few edge
# refusals are not a finding; a floor, so one or two refusals are not either.
REFUSED_SHARE: Final = 0.2
REFUSED_MIN: Final = 5


class HealthVerdict(enum.StrEnum):
    HEALTHY = "healthy"
    NO_STATUS = "no_status"
    STARTING = "starting"
    STOPPING = "stopping"
    STOPPED = "stopped"
    STALE_HEARTBEAT = "stale_heartbeat"
    WORKER_NOT_RUNNING = "worker_not_running"
    CRASH_LOOP = "crash_loop"
    FATAL = "fatal"
    # Up, but refusing every new attempt (journal unverified / quarantine):
    # each request is answered canonical until an operator acts (worker.daemon).
    QUARANTINED = "quarantined"
    # Up, journal verified, but refusing new attempts for a stated reason
    # (``segment_full``: today's journal segment is full; spool.journal rule 8).
    REFUSING = "refusing"
    # Up, but the gateway refuses to present: its identity key is missing or is
    # not the recorded one beside a journal with rows (gateway_shim.identity).
    IDENTITY_MISMATCH = "identity_mismatch"
    # Up, but a real worker without its key: every request credential_unavailable.
    NO_CREDENTIAL = "no_credential"
    # Up, but the journal cannot be appended (refused append; read-only or full).
    JOURNAL_UNWRITABLE = "journal_unwritable"
    # Up, but most requests of the last minute expired before the worker reached
    # them (at least EXPIRING_MIN): the host gets canonical answers for them.
    EXPIRING = "expiring"
    # Up, but a spend cap is reached: new artifacts get no call until the
    # rolling hour or the UTC day has room again (kexpr.worker.spend).
    SPEND_CAPPED = "spend_capped"
    # Up, but the last hour's start rows are far above the profile's history
    # (kexpr.worker.spend rule 6): a host presenting new artifacts in a loop.
    UNUSUAL_RATE = "unusual_rate"
    # Up, but the gateway cannot use the operator glossary (dual cards canonical).
    GLOSSARY_UNUSABLE = "glossary_unusable"
    # Up, but one surface's requests were mostly refused for the provider's
    # speed over the last ten minutes (at least REFUSED_MIN, above REFUSED_SHARE).
    SPEED_REFUSALS = "speed_refusals"
    STATUS_UNREADABLE = "status_unreadable"


EXIT: Final[Mapping[HealthVerdict, int]] = {
    v: (0 if v is HealthVerdict.HEALTHY else 2 if v is HealthVerdict.STATUS_UNREADABLE else 1)
    for v in HealthVerdict
}


@dataclass(frozen=True, slots=True)
class ProcessStatus:
    """One validated status file. Every field is an enum, an int or None."""

    state: str  # one of the known states, or "unknown"
    pid: int | None
    alive: bool | None
    heartbeat_age_s: float | None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StatusReport:
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
        }


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else (e.g. the worker's own user)
    return True


def _int(v: object) -> int | None:
    return v if type(v) is int and v >= 0 else None


def _enum(v: object, allowed: frozenset[str] | None = None) -> str:
    if isinstance(v, str) and _ENUMISH.fullmatch(v) and (allowed is None or v in allowed):
        return v
    return "unknown"


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


def _counts(v: object, n: int) -> list[int] | None:
    if isinstance(v, list) and len(v) == n and all(_int(c) is not None for c in v):
        return list(v)
    return None


def call_figures(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A worker status file's per-surface call figures, validated (module
    docstring), with the margin read off each call-time histogram: the p95 call
    time's bucket upper edge (None beyond the 4 s deadline or without calls) and
    whether it is within `CALL_BUDGET_S`. A surface whose record is malformed or
    inconsistent (counts that do not add up to its calls) is left out: fail
    closed, its figures are unknown rather than wrong. `kexpr.ops.promotion`
    reads the same."""
    raw = obj.get("calls_by_surface")
    if obj.get("histogram_edges") != edges_json() or not isinstance(raw, Mapping):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for surface in SURFACES:
        rec = raw.get(surface)
        if not isinstance(rec, Mapping):
            continue
        calls, absent = _int(rec.get("calls")), _int(rec.get("tokens_absent"))
        seconds = _counts(rec.get("call_seconds"), len(FIGURES["call_seconds"]) + 1)
        tokens = _counts(rec.get("completion_tokens"), len(FIGURES["completion_tokens"]) + 1)
        failures_in = rec.get("failures")
        if (
            calls is None
            or absent is None
            or seconds is None
            or tokens is None
            or not isinstance(failures_in, Mapping)
            or sum(seconds) != calls
            or sum(tokens) + absent != calls
        ):
            continue
        failures = {
            k: v
            for k, v in sorted(failures_in.items())
            if k in _FAILURE_WORDS and _int(v) is not None
        }
        if sum(failures.values()) > calls:
            continue
        m, p95 = margin(seconds)
        tok = upper_edge(tokens, FIGURES["completion_tokens"], P95)
        out[surface] = {
            "calls": calls,
            "failures": failures,
            "tokens_absent": absent,
            "call_seconds": seconds,
            "completion_tokens": tokens,
            "margin": m.value,
            "p95_call_s": p95,
            "p95_completion_tokens": None if tok is None or math.isinf(tok) else int(tok),
        }
    return out


def _number(v: object, hi: float) -> float | None:
    """A finite number in [0, hi] (bool is not a number here), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if within(f, (0.0, hi)) else None


def admission_figures(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A worker status file's ``admission`` record, validated: the provider's
    estimated speed (`kexpr.worker.speed`), the cool-down (`kexpr.worker.cooldown`)
    and, per public surface, the requests refused for either before a start row.
    Numbers in their ranges and fixed words only; anything else is dropped (an
    absent or malformed part is ``{}``), never echoed. `kexpr.ops.promotion`
    reads the same."""
    raw = obj.get("admission")
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, Any] = {}
    speed = raw.get("speed")
    if isinstance(speed, Mapping) and speed.get("state") in ("cold", "learned"):
        first = _number(speed.get("first_token_s"), 60.0)
        rate = _number(speed.get("tokens_per_s"), 100_000.0)
        overall = _number(speed.get("overall_tokens_per_s"), 100_000.0)
        samples = _int(speed.get("samples"))
        ratio = speed.get("length_ratio")
        known = ratio is None or _number(ratio, 10.0) is not None
        if None not in (first, rate, overall, samples) and known and rate and overall:
            out["speed"] = {
                "state": speed["state"],
                "first_token_s": first,
                "tokens_per_s": rate,
                "overall_tokens_per_s": overall,
                "samples": samples,
                "length_ratio": None if ratio is None else float(ratio),
            }
            # Added later: absent from an older worker's file (then not shown).
            for name in ("timeouts", "regime_calls", "change_pending"):
                if (n := _int(speed.get(name))) is not None:
                    out["speed"][name] = n
            if (fastest := _number(speed.get("tokens_per_s_fastest"), 100_000.0)) is not None:
                out["speed"]["tokens_per_s_fastest"] = fastest
            if (bounds := _refused_bounds(speed.get("refused_bounds"))) is not None:
                out["speed"]["refused_bounds"] = bounds
    cool = raw.get("cooldown")
    if isinstance(cool, Mapping) and cool.get("state") in ("closed", "open", "probing"):
        figures = {
            "failures_in_a_row": _int(cool.get("failures_in_a_row")),
            "threshold": _int(cool.get("threshold")),
            "cool_down_s": _number(cool.get("cool_down_s"), 86400.0),
            "seconds_left": _number(cool.get("seconds_left"), 86400.0),
            "cool_downs": _int(cool.get("cool_downs")),
            "probes": _int(cool.get("probes")),
        }
        if all(v is not None for v in figures.values()):
            out["cooldown"] = {"state": cool["state"], **figures}
    refused = raw.get("refused_by_surface")
    if isinstance(refused, Mapping):
        out["refused_by_surface"] = _surface_counts(refused, REFUSALS)
    last = raw.get("too_slow_last")
    if isinstance(last, Mapping):
        out["too_slow_last"] = {
            surface: v
            for surface in SURFACES
            if (v := _too_slow_verdict(last.get(surface))) is not None
        }
    recent = raw.get("last_ten_minutes")
    if isinstance(recent, Mapping):
        out["last_ten_minutes"] = _surface_counts(recent, RECENT_ADMISSION)
    return out


def _surface_counts(raw: Mapping[Any, Any], names: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Per public surface, the counts ``names`` of its record, in that order; a
    surface whose record is not a mapping or lacks one of them is left out."""
    out: dict[str, dict[str, int]] = {}
    for surface in SURFACES:
        rec = raw.get(surface)
        if isinstance(rec, Mapping):
            counts = {name: _int(rec.get(name)) for name in names}
            if all(c is not None for c in counts.values()):
                out[surface] = {name: c for name, c in counts.items() if c is not None}
    return out


_EVIDENCE_WORDS: Final = frozenset(e.value for e in Evidence)


def _too_slow_verdict(v: object) -> dict[str, Any] | None:
    """One surface's last speed refusal (`kexpr.worker.speed.Verdict` and its
    bound), validated; None when anything in it is not what the worker writes."""
    if not isinstance(v, Mapping) or v.get("evidence") not in _EVIDENCE_WORDS:
        return None
    bound, fits, misses = _int(v.get("bound")), _int(v.get("fits")), _int(v.get("misses"))
    limit = _number(v.get("limit_s"), 60.0)
    estimate = v.get("estimate_s")
    known = estimate is None or _number(estimate, 3600.0) is not None
    if None in (bound, fits, misses, limit) or not known:
        return None
    return {
        "bound": bound,
        "evidence": v["evidence"],
        "fits": fits,
        "misses": misses,
        "estimate_s": None if estimate is None else float(estimate),
        "limit_s": limit,
    }


def _refused_bounds(v: object) -> list[tuple[int, int]] | None:
    """The speed estimate's ``refused_bounds``: ascending, disjoint inclusive
    ranges of bounds within the answer budget; None when absent or malformed."""
    if not isinstance(v, list) or len(v) > ANSWER_BUDGET_TOKENS:
        return None
    out: list[tuple[int, int]] = []
    for r in v:
        if not isinstance(r, list) or len(r) != 2:
            return None
        lo, hi = _int(r[0]), _int(r[1])
        if lo is None or hi is None or not 1 <= lo <= hi <= ANSWER_BUDGET_TOKENS:
            return None
        if out and lo <= out[-1][1]:
            return None
        out.append((lo, hi))
    return out


def spend_figures(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A worker status file's ``spend`` record, validated: the two caps within
    `CAP_RANGE`, the counts as integers, the hourly median a number; anything
    missing or malformed makes it ``{}`` (unknown, never guessed or echoed).
    ``capped``: a window holds its cap; ``unusual``: the last hour is far above
    the history (`kexpr.worker.spend` rule 6), with the threshold it met."""
    raw = obj.get("spend")
    if not isinstance(raw, Mapping):
        return {}
    lo, hi = CAP_RANGE
    caps = {k: _int(raw.get(k)) for k in ("per_hour", "per_day")}
    counts = {k: _int(raw.get(k)) for k in ("last_hour", "today", "refused", "history_hours")}
    # A median of the journal's own hours: bounded by what a day's segment holds.
    median = _number(raw.get("hourly_median"), 1e9)
    if median is None or any(c is None or not lo <= c <= hi for c in caps.values()):
        return {}
    if any(c is None for c in counts.values()):
        return {}
    out: dict[str, Any] = {**caps, **counts, "hourly_median": median}
    out["capped"] = out["last_hour"] >= out["per_hour"] or out["today"] >= out["per_day"]
    out["rate_threshold"] = rate_threshold(median)
    out["unusual"] = unusual_rate(out["last_hour"], median)
    return out


def style_figures(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The status file's ``style_words_by_slot``, validated: slot ids the
    manifest names, words of the lexicon, integer counts; anything else dropped."""
    from kexpr.spool.contract.lexicon import SAFE_STYLE_LEXEMES
    from kexpr.spool.contract.manifest import manifest_for

    raw = obj.get("style_words_by_slot")
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for slot, rec in sorted(raw.items()):
        if not isinstance(slot, str) or manifest_for(slot) is None or not isinstance(rec, Mapping):
            continue
        answers, words = _int(rec.get("answers")), rec.get("words")
        if answers is None or not isinstance(words, Mapping):
            continue
        counts = {
            w: n for w in SAFE_STYLE_LEXEMES if (n := _int(words.get(w))) is not None and n > 0
        }
        out[slot] = {
            "answers": answers,
            "words": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        }
    return out


def token_figures(obj: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """The status file's ``tokens_by_surface``, validated (public surfaces, counts)."""
    raw = obj.get("tokens_by_surface")
    if not isinstance(raw, Mapping):
        return {}
    return _surface_counts(raw, ("prompt", "completion", "calls_with_usage"))


@dataclass(frozen=True, slots=True)
class Price:
    """The operator's price per million tokens, input and output (no default: a
    built-in price would pretend to be current)."""

    per_mtok_in: float
    per_mtok_out: float


def cost_figures(
    tokens: Mapping[str, Mapping[str, int]], uptime_s: float | None, price: Price | None
) -> dict[str, Any]:
    """Tokens since start, and with a price the cost so far and per day at the
    rate since start (None before a minute of uptime)."""
    prompt = sum(v["prompt"] for v in tokens.values())
    completion = sum(v["completion"] for v in tokens.values())
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "calls_with_usage": sum(v["calls_with_usage"] for v in tokens.values()),
        "since_start_s": None if uptime_s is None else round(uptime_s, 1),
        "price_per_mtok_in": None,
        "price_per_mtok_out": None,
        "cost_so_far": None,
        "cost_per_day": None,
    }
    if price is None:
        return out
    so_far = (prompt * price.per_mtok_in + completion * price.per_mtok_out) / 1_000_000
    out |= {
        "price_per_mtok_in": price.per_mtok_in,
        "price_per_mtok_out": price.per_mtok_out,
        "cost_so_far": round(so_far, 6),
    }
    if uptime_s is not None and uptime_s >= 60:
        out["cost_per_day"] = round(so_far * 86400 / uptime_s, 6)
    return out


def _enum_counts(v: object) -> dict[str, Any]:
    """A mapping's enum keys (sorted) and their integer counts; {} for anything else."""
    if not isinstance(v, Mapping):
        return {}
    return {_enum(k): n for k, n in sorted(v.items()) if _int(n) is not None}


def _last_minute(v: object) -> dict[str, int]:
    if not isinstance(v, Mapping):
        return {}
    return {name: n for name in ROLLING if (n := _int(v.get(name))) is not None}


def _process(
    obj: Mapping[str, Any],
    states: frozenset[str],
    now: dt.datetime,
    alive: Callable[[int], bool],
    fields: dict[str, Any],
) -> ProcessStatus:
    """What every status file says alike: its state, its pid (and whether that
    process is alive) and the age of its heartbeat."""
    pid = _int(obj.get("pid"))
    return ProcessStatus(
        state=_enum(obj.get("state"), states),
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
                counters[k] = _enum_counts(v)
            elif _int(v) is not None and _ENUMISH.fullmatch(str(k)):
                counters[str(k)] = v
    return _process(
        obj,
        WORKER_STATES,
        now,
        alive,
        {
            "journal": _enum(obj.get("journal"), frozenset({"verified", "unverified"})),
            "quarantine": None if obj.get("quarantine") is None else _enum(obj.get("quarantine")),
            "unsafe": _enum_counts(obj.get("unsafe")),
            # Entry and scan faults (worker.daemon.Fault), enum keys only.
            "faults": _enum_counts(obj.get("faults")),
            # Why new attempts are refused while the journal is fine (e.g.
            # ``segment_full``), or None.
            "refusing": None if obj.get("refusing") is None else _enum(obj.get("refusing")),
            "credential": _enum(
                obj.get("credential"), frozenset({"present", "absent", "rehearsal"})
            ),
            # A rehearsal worker (the built-in model, no key): nothing it journals counts.
            "rehearsal": obj.get("rehearsal") is True,
            # spool.lifecycle rule 7: retention is off for this worker's life.
            "clock_step_observed": obj.get("clock_step_observed") is True,
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
            "restarts": _int(obj.get("restarts")),
            "last_exit": last_exit if type(last_exit) is int else None,
            "worker_pid": _int(obj.get("worker_pid")),
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
    verdict = _verdict(worker, supervisor, stale_after_s)
    reason: str | None = None
    if verdict is HealthVerdict.HEALTHY:
        verdict, reason = _serving_problem(root, worker, glossary)
    elif verdict is HealthVerdict.NO_CREDENTIAL:
        reason = "credential_absent"
    elif verdict is HealthVerdict.JOURNAL_UNWRITABLE:
        reason = "journal_append_undone"
    # The worker is up and serving: the gateway's refusal is the news (it makes
    # every presentation canonical; ranked with a quarantine).
    if identity.finding and verdict in _UP:
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


_UP: Final = frozenset(
    {
        HealthVerdict.QUARANTINED,
        HealthVerdict.JOURNAL_UNWRITABLE,
        HealthVerdict.REFUSING,
        HealthVerdict.NO_CREDENTIAL,
        HealthVerdict.SPEND_CAPPED,
        HealthVerdict.EXPIRING,
        HealthVerdict.UNUSUAL_RATE,
        HealthVerdict.SPEED_REFUSALS,
        HealthVerdict.GLOSSARY_UNUSABLE,
        HealthVerdict.HEALTHY,
    }
)


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


def _verdict(
    worker: ProcessStatus | None, supervisor: ProcessStatus | None, stale_after_s: float
) -> HealthVerdict:
    # A supervisor that gave up explains everything else.
    if supervisor is not None and supervisor.state == "crash_loop":
        return HealthVerdict.CRASH_LOOP
    if supervisor is not None and supervisor.state == "fatal":
        return HealthVerdict.FATAL
    if worker is None:
        return HealthVerdict.NO_STATUS
    if worker.state == "stopped":
        return HealthVerdict.STOPPED
    if worker.alive is False or worker.pid is None:
        return HealthVerdict.WORKER_NOT_RUNNING
    if worker.heartbeat_age_s is None or worker.heartbeat_age_s > stale_after_s:
        return HealthVerdict.STALE_HEARTBEAT
    if worker.state == "starting":
        return HealthVerdict.STARTING
    if worker.state == "stopping":
        return HealthVerdict.STOPPING
    if worker.state != "ready":
        return HealthVerdict.STATUS_UNREADABLE
    if worker.fields["journal"] != "verified" or worker.fields["quarantine"] is not None:
        return HealthVerdict.QUARANTINED
    if worker.fields["refusing"] == "append_undone":
        return HealthVerdict.JOURNAL_UNWRITABLE
    if worker.fields["refusing"] is not None:
        return HealthVerdict.REFUSING
    if worker.fields["credential"] == "absent" and not worker.fields["rehearsal"]:
        return HealthVerdict.NO_CREDENTIAL
    spend = worker.fields["spend"]
    if spend.get("capped"):
        return HealthVerdict.SPEND_CAPPED
    recent = worker.fields["last_minute"]
    # Expired before the worker reached them, or reached too late to answer:
    # either way the host got canonical because the worker did not keep up.
    expired = recent.get("expired_requests", 0) + recent.get("no_time_to_answer", 0)
    if expired >= EXPIRING_MIN and 2 * expired > recent.get("claimed", 0):
        return HealthVerdict.EXPIRING
    if spend.get("unusual"):
        return HealthVerdict.UNUSUAL_RATE
    if speed_refusals(worker.fields["admission"]):
        return HealthVerdict.SPEED_REFUSALS
    return HealthVerdict.HEALTHY


def refused_share(refused: int, calls: int) -> float | None:
    """The share of a surface's requests that reached the admission (refused or
    called) that were refused; None without any."""
    return None if refused + calls == 0 else refused / (refused + calls)


def speed_refusals(admission: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """The surfaces whose speed refusals of the last ten minutes make the
    `HealthVerdict.SPEED_REFUSALS` finding: surface -> (refused, calls)."""
    out: dict[str, tuple[int, int]] = {}
    for surface, rec in (admission.get("last_ten_minutes") or {}).items():
        refused, calls = rec["provider_too_slow"], rec["calls"]
        share = refused_share(refused, calls)
        if refused >= REFUSED_MIN and share is not None and share > REFUSED_SHARE:
            out[surface] = (refused, calls)
    return out


def render(report: StatusReport) -> str:
    lines: list[str] = []

    def age(p: ProcessStatus) -> str:
        return (
            "no heartbeat"
            if p.heartbeat_age_s is None
            else f"heartbeat {p.heartbeat_age_s:.1f} s ago"
        )

    def pid(p: ProcessStatus) -> str:
        if p.pid is None:
            return "pid ?"
        return f"pid {p.pid} ({'alive' if p.alive else 'gone'})"

    w = report.worker
    if w is None:
        lines.append("worker      no status file")
    else:
        f = w.fields
        lines.append(
            f"worker      {w.state}  {pid(w)}  {age(w)}  journal {f['journal']}  credential {f['credential']}"
        )
        if f["rehearsal"]:
            lines.append(
                "rehearsal   built-in model, no key, no network: its evidence is never counted"
            )
        if f["clock_step_observed"]:
            lines.append("clock       wall-clock step observed: retention off until restart")
        if f["quarantine"] is not None or f["unsafe"]:
            unsafe = "  ".join(f"{k} {v}" for k, v in f["unsafe"].items()) or "none"
            lines.append(f"quarantine  {f['quarantine'] or '-'}  unsafe paths: {unsafe}")
        if f["refusing"] is not None:
            lines.append(f"refusing    new attempts: {f['refusing']}")
        if f["faults"]:
            lines.append("faults      " + "  ".join(f"{k} {v}" for k, v in f["faults"].items()))
        counters = {k: v for k, v in f["counters"].items() if k != "by_outcome"}
        if counters:
            lines.append("counters    " + "  ".join(f"{k} {v}" for k, v in counters.items()))
        outcomes = f["counters"].get("by_outcome") or {}
        lines.append(
            "outcomes    "
            + ("  ".join(f"{k} {v}" for k, v in outcomes.items()) if outcomes else "none yet")
        )
        recent = f["last_minute"]
        if recent:
            lines.append(
                f"last 60 s   claimed {recent.get('claimed', '?')}  calls {recent.get('calls', '?')}"
                f"  expired {recent.get('expired_requests', '?')}"
                f"  too late {recent.get('no_time_to_answer', '?')} per minute"
            )
        lines += _render_calls(f["calls_by_surface"])
        lines += render_admission(f["admission"])
        lines += render_spend(f["spend"])
        lines += render_style(f["style_words_by_slot"])
        lines += _render_cost(f["cost"])
        if f["running_as_root"]:
            lines.append(
                "root        WARNING the worker runs as root (uid 0): run it as its own user"
                " (docs/systemd.md)"
            )
    s = report.supervisor
    if s is not None:
        f = s.fields
        last = "-" if f["last_exit"] is None else str(f["last_exit"])
        lines.append(
            f"supervisor  {s.state}  {pid(s)}  {age(s)}  restarts {f['restarts']}  last worker exit {last}"
        )
    if report.glossary is not None:
        lines.append(f"glossary    {report.glossary}")
    if report.identity is not None:
        lines.append(f"identity    {render_line(report.identity)}")
    verdict = report.verdict.value + (f" ({report.problem})" if report.problem else "")
    lines.append(f"verdict     {verdict}")
    return "\n".join(lines)


def render_style(figures: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Per slot: its accepted answers and the style words they used, most used
    first (`style_figures`). `kexpr run` prints the same lines."""
    if not figures:
        return ["style       no accepted answer yet"]
    width = max(len(slot) for slot in figures)
    lines = []
    for i, (slot, v) in enumerate(figures.items()):
        words = "  ".join(f"{w} {n}" for w, n in v["words"].items()) or "no style word"
        head = "style       " if i == 0 else "            "
        lines.append(f"{head}{slot:<{width}}  {v['answers']} answers: {words}")
    return lines


def _render_cost(cost: Mapping[str, Any]) -> list[str]:
    since = cost["since_start_s"]
    span = "?" if since is None else f"{since / 3600:.1f} h"
    lines = [
        f"tokens      since start ({span}): in {cost['prompt_tokens']:,}"
        f"  out {cost['completion_tokens']:,}  ({cost['calls_with_usage']} calls with usage)"
    ]
    if cost["price_per_mtok_in"] is None:
        lines.append(
            "cost        give --price-per-mtok-in and --price-per-mtok-out"
            " (your price per 1M tokens) for an estimate"
        )
        return lines
    per_day = cost["cost_per_day"]
    day = "under a minute of data" if per_day is None else f"about {per_day:.4f} per day"
    lines.append(
        f"cost        at {cost['price_per_mtok_in']:g} in / {cost['price_per_mtok_out']:g} out"
        f" per 1M tokens: {cost['cost_so_far']:.4f} since start, {day} at this rate"
    )
    return lines


def _edge(v: float) -> str:
    return f"{v:g}"


def _render_calls(figures: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Per surface: calls, timeouts, p95 call time against the budget, p95
    completion tokens; then each non-empty histogram bucket as ``<=edge count``."""
    measured = {s: v for s, v in figures.items() if v["calls"]}
    if not measured:
        return ["margin      no calls measured yet"] if figures else []
    lines = [
        f"margin      {'surface':<32}{'calls':>7}{'timeout':>8}{'p95 s':>8}{'p95 tok':>8}"
        f"  vs {CALL_BUDGET_S:g} s budget"
    ]
    for surface, v in measured.items():
        p95 = ">4" if v["p95_call_s"] is None else f"<={_edge(v['p95_call_s'])}"
        tok = v["p95_completion_tokens"]
        tok_s = "-" if tok is None else f"<={tok}"
        lines.append(
            f"            {surface:<32}{v['calls']:>7}{v['failures'].get('timeout', 0):>8}"
            f"{p95:>8}{tok_s:>8}  {v['margin']}"
        )
    for surface, v in measured.items():
        for name, edges in FIGURES.items():
            counts = v[name]
            cells = [
                f"{'<=' + _edge(edges[i]) if i < len(edges) else '>' + _edge(edges[-1])} {c}"
                for i, c in enumerate(counts)
                if c
            ]
            if name == "completion_tokens" and v["tokens_absent"]:
                cells.append(f"absent {v['tokens_absent']}")
            lines.append(f"  {name:<18}{surface:<32}" + ("  ".join(cells) or "none"))
    return lines


def _ratio(r: float | None) -> str:
    return "bound + 5 tokens (not measured yet)" if r is None else f"{r:.2f} x"


def render_admission(figures: Mapping[str, Any]) -> list[str]:
    """The provider's estimated speed, the cool-down, and the per-surface
    refusals for either (`admission_figures`)."""
    lines: list[str] = []
    speed = figures.get("speed")
    if speed is not None:
        how = (
            "cold start: the fastest published rate"
            if speed["state"] == "cold"
            else f"from the last {speed['samples']} calls"
        )
        fastest = speed.get("tokens_per_s_fastest")
        rate = f"{speed['tokens_per_s']:.0f}" + ("" if fastest is None else f"-{fastest:.0f}")
        lines.append(
            f"speed       first token {speed['first_token_s']:.2f} s"
            f"  {rate} tokens/s"
            f" (overall {speed['overall_tokens_per_s']:.0f} after 0.3 s)"
            f"  answers {_ratio(speed['length_ratio'])} of their bound  ({how})"
        )
        if "regime_calls" in speed:
            pending = speed.get("change_pending", 0)
            lines.append(
                f"            {speed['regime_calls']} calls at this speed,"
                f" {speed.get('timeouts', 0)} timeouts in the window"
                + (f", a change pending ({pending} calls)" if pending else "")
            )
    cool = figures.get("cooldown")
    if cool is not None:
        state = cool["state"]
        if state == "open":
            state = f"cooling down, {cool['seconds_left']:.0f} s left (no calls)"
        elif state == "probing":
            state = "probing (one call out)"
        lines.append(
            f"provider    {state}  failures in a row {cool['failures_in_a_row']}"
            f"/{cool['threshold']}  cool-downs {cool['cool_downs']}  probes {cool['probes']}"
        )
    if speed is not None and speed.get("refused_bounds") is not None:
        bounds = speed["refused_bounds"]
        said = ", ".join(f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in bounds)
        lines.append(
            "            refused now (capsule bounds, whole deadline left): " + (said or "none")
        )
    refused = {
        s: v for s, v in (figures.get("refused_by_surface") or {}).items() if any(v.values())
    }
    recent = figures.get("last_ten_minutes") or {}
    last = figures.get("too_slow_last") or {}
    if refused:
        lines.append(
            f"refused     {'surface':<32}{'too slow':>9}{'cooling':>9}"
            f"  {'last 10 min':<14}  (no row, no call)"
        )
        for surface, v in refused.items():
            r = recent.get(surface)
            share = None if r is None else refused_share(r["provider_too_slow"], r["calls"])
            ten = (
                "-"
                if r is None
                else f"{r['provider_too_slow']}/{r['provider_too_slow'] + r['calls']}"
            )
            ten += "" if share is None else f" {100 * share:.0f}%"
            lines.append(
                f"            {surface:<32}{v['provider_too_slow']:>9}"
                f"{v['provider_cooling_down']:>9}  {ten:<14}"
            )
            if surface in last:
                lines.append(f"              last too slow: {_verdict_words(last[surface])}")
    for surface, (n, calls) in speed_refusals(figures).items():
        lines.append(
            f"finding     {surface}: {n} of {n + calls} requests in the last 10 min refused for"
            f" the provider's speed (more than {REFUSED_SHARE:.0%}): those messages are not"
            " styled (docs/budget.md §7)"
        )
    return lines


def render_spend(figures: Mapping[str, Any]) -> list[str]:
    """The spend bound (`spend_figures`): each window against its cap, the
    refusals, and the last hour against the profile's history."""
    if not figures:
        return []
    capped = "  (cap reached: no calls)" if figures["capped"] else ""
    history = (
        f"median {figures['hourly_median']:g} per active hour over {figures['history_hours']} h"
        if figures["history_hours"]
        else "no history yet"
    )
    unusual = "  (far above: unusual_rate)" if figures["unusual"] else ""
    return [
        f"spend       last hour {figures['last_hour']}/{figures['per_hour']}"
        f"  today (UTC) {figures['today']}/{figures['per_day']}"
        f"  refused {figures['refused']}{capped}",
        f"history     {history}; far above from {figures['rate_threshold']} an hour{unusual}",
    ]


def _verdict_words(v: Mapping[str, Any]) -> str:
    """One speed refusal's estimate, in words (validated numbers only)."""
    estimate = "-" if v["estimate_s"] is None else f"{v['estimate_s']:.2f} s"
    return (
        f"bound {v['bound']}, estimated {estimate} against {v['limit_s']:.2f} s"
        f" ({v['evidence']}: {v['fits']} calls say it fits, {v['misses']} that it does not)"
    )


def cli(argv: list[str]) -> int:
    import argparse

    from kexpr.spool.layout import DEFAULT_DATA_ROOT
    from kexpr.spool.ranges import float_range

    p = argparse.ArgumentParser(
        prog="kexpr status", description="worker state and counters (no content)"
    )
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    p.add_argument(
        "--stale-after",
        type=float_range(0.0, 86400.0, lo_open=True),
        default=STALE_AFTER_S,
        help=f"seconds after which a heartbeat is stale (default {STALE_AFTER_S:g})",
    )
    price_arg = float_range(0.0, 1_000_000.0)
    p.add_argument(
        "--price-per-mtok-in",
        type=price_arg,
        default=None,
        help="your price per 1M input (prompt) tokens: with --price-per-mtok-out, a cost estimate",
    )
    p.add_argument(
        "--price-per-mtok-out",
        type=price_arg,
        default=None,
        help="your price per 1M output (completion) tokens",
    )
    a = p.parse_args(argv)
    if (a.price_per_mtok_in is None) != (a.price_per_mtok_out is None):
        p.error("give both --price-per-mtok-in and --price-per-mtok-out, or neither")
    price = (
        None if a.price_per_mtok_in is None else Price(a.price_per_mtok_in, a.price_per_mtok_out)
    )
    report = collect(DataRoot(a.data_root), stale_after_s=a.stale_after, price=price)
    if report.problem is not None and report.problem.startswith("data_root_"):
        from kexpr.ops.inputs import Problem, line

        problem = Problem(report.problem.removeprefix("data_root_"))
        print(line("kexpr status", "--data-root", a.data_root, problem), file=sys.stderr)
        if a.json:
            print(json.dumps(report.to_json(), sort_keys=True))
        return EXIT[report.verdict]
    if a.json:
        print(json.dumps(report.to_json(), sort_keys=True))
    else:
        print(render(report))
    sys.stdout.flush()
    return EXIT[report.verdict]

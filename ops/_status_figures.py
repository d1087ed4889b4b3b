"""The figures of the worker's status file, validated before ``kexpr status``
(`kexpr.ops.status_cli`) or ``kexpr promotion-report`` shows any of them.

1. Every value kept is an enum word of a fixed set or of the enum shape
   (`as_enum`; anything else is shown as ``unknown``), a non-negative integer
   (`as_int`) or a finite number in its range; nothing else is ever echoed.
2. Keys are public surface names, failure words, slot ids the manifest names
   and words of the lexicon. Histograms are kept only when the file's bucket
   edges are exactly this version's (`kexpr.worker.histograms`).
3. A record that is malformed or inconsistent is dropped (``{}``, or the
   surface left out): its figures are unknown rather than wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kexpr.spool.contract import SURFACES
from kexpr.spool.outcomes import PROVIDER_FAILURES
from kexpr.spool.ranges import within
from kexpr.worker.histograms import FIGURES, P95, edges_json, margin, upper_edge
from kexpr.worker.spend import CAP_RANGE, rate_threshold, unusual_rate
from kexpr.worker.status import REFUSALS

ENUMISH: Final = re.compile(r"[a-z][a-z_]{0,40}")
_FAILURE_WORDS: Final = frozenset(o.value for o in PROVIDER_FAILURES)


@dataclass(frozen=True, slots=True)
class ProcessStatus:
    """One validated status file. Every field is an enum, an int or None."""

    state: str  # one of the known states, or "unknown"
    pid: int | None
    alive: bool | None
    heartbeat_age_s: float | None
    fields: dict[str, Any] = field(default_factory=dict)


def as_int(v: object) -> int | None:
    """``v`` when it is a non-negative ``int`` (not a bool), else None."""
    return v if type(v) is int and v >= 0 else None


def as_enum(v: object, allowed: frozenset[str] | None = None) -> str:
    """``v`` when it is a word of the enum shape (and of ``allowed``), else ``unknown``."""
    if isinstance(v, str) and ENUMISH.fullmatch(v) and (allowed is None or v in allowed):
        return v
    return "unknown"


def enum_counts(v: object) -> dict[str, Any]:
    """A mapping's enum keys (sorted) and their integer counts; {} for anything else."""
    if not isinstance(v, Mapping):
        return {}
    return {as_enum(k): n for k, n in sorted(v.items()) if as_int(n) is not None}


def _counts(v: object, n: int) -> list[int] | None:
    if isinstance(v, list) and len(v) == n and all(as_int(c) is not None for c in v):
        return list(v)
    return None


def call_figures(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A worker status file's per-surface call figures, validated (module
    header), with the margin read off each call-time histogram: the p95 call
    time's bucket upper edge (None beyond the 4 s deadline or without calls) and
    whether it is within `kexpr.worker.histograms.CALL_BUDGET_S`. A surface whose record is malformed or
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
        calls, absent = as_int(rec.get("calls")), as_int(rec.get("tokens_absent"))
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
            if k in _FAILURE_WORDS and as_int(v) is not None
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
    """A worker status file's ``admission`` record, validated: the cool-down
    (`kexpr.worker.cooldown`) and, per public surface, the requests it refused
    before a start row. Numbers in their ranges and fixed words only; anything
    else is dropped (an absent or malformed part is ``{}``), never echoed. The
    retired speed figures an earlier release wrote beside them (``speed``,
    ``too_slow_last``, ``last_ten_minutes``, ``provider_too_slow`` counts) are
    not read (docs/upgrade.md). `kexpr.ops.promotion` reads the same."""
    raw = obj.get("admission")
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, Any] = {}
    cool = raw.get("cooldown")
    if isinstance(cool, Mapping) and cool.get("state") in ("closed", "open", "probing"):
        figures = {
            "failures_in_a_row": as_int(cool.get("failures_in_a_row")),
            "threshold": as_int(cool.get("threshold")),
            "cool_down_s": _number(cool.get("cool_down_s"), 86400.0),
            "seconds_left": _number(cool.get("seconds_left"), 86400.0),
            "cool_downs": as_int(cool.get("cool_downs")),
            "probes": as_int(cool.get("probes")),
        }
        if all(v is not None for v in figures.values()):
            out["cooldown"] = {"state": cool["state"], **figures}
    refused = raw.get("refused_by_surface")
    if isinstance(refused, Mapping):
        out["refused_by_surface"] = _surface_counts(refused, REFUSALS)
    return out


def _surface_counts(raw: Mapping[Any, Any], names: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Per public surface, the counts ``names`` of its record, in that order; a
    surface whose record is not a mapping or lacks one of them is left out."""
    out: dict[str, dict[str, int]] = {}
    for surface in SURFACES:
        rec = raw.get(surface)
        if isinstance(rec, Mapping):
            counts = {name: as_int(rec.get(name)) for name in names}
            if all(c is not None for c in counts.values()):
                out[surface] = {name: c for name, c in counts.items() if c is not None}
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
    caps = {k: as_int(raw.get(k)) for k in ("per_hour", "per_day")}
    counts = {k: as_int(raw.get(k)) for k in ("last_hour", "today", "refused", "history_hours")}
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
        answers, words = as_int(rec.get("answers")), rec.get("words")
        if answers is None or not isinstance(words, Mapping):
            continue
        counts = {
            w: n for w in SAFE_STYLE_LEXEMES if (n := as_int(words.get(w))) is not None and n > 0
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

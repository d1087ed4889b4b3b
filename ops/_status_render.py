"""The table ``kexpr status`` prints (`render`): one line per subject, the
verdict last, of validated values only (`kexpr.ops._status_figures`). The
``--json`` form is `kexpr.ops._status_read.StatusReport.to_json`. `kexpr run`
and ``kexpr promotion-report`` print some of the same lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kexpr.ops._status_figures import ProcessStatus
from kexpr.ops._status_read import StatusReport, left_to_style
from kexpr.ops.identity_cli import render_line
from kexpr.worker.histograms import CALL_BUDGET_S, FIGURES


def render(report: StatusReport) -> str:
    """The report as ``kexpr status`` prints it without ``--json``."""
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
        if f["retention_held"] is not None:
            lines.append(f"retention   held: {f['retention_held']} (no segment is removed)")
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
    lines += render_left(left_to_style())
    verdict = report.verdict.value + (f" ({report.problem})" if report.problem else "")
    lines.append(f"verdict     {verdict}")
    return "\n".join(lines)


def render_left(left: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Per surface, what is left to style (`left_to_style`): its asked slots by
    semantic ID, or "nothing to style"."""
    width = max(len(s) for s in left)
    lines = []
    for i, (surface, slots) in enumerate(left.items()):
        head = "left        " if i == 0 else "            "
        said = "; ".join(
            f"{s['slot_id']} ({' '.join(s['ids'])}): {s['compositions']} compositions"
            for s in slots
        )
        lines.append(f"{head}{surface:<{width}}  {said or 'nothing to style'}")
    return lines


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


def render_admission(figures: Mapping[str, Any]) -> list[str]:
    """The provider cool-down and the per-surface requests it refused
    (`admission_figures`)."""
    lines: list[str] = []
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
    refused = {
        s: v for s, v in (figures.get("refused_by_surface") or {}).items() if any(v.values())
    }
    if refused:
        lines.append(f"refused     {'surface':<32}{'cooling':>9}  (no row, no call)")
        for surface, v in refused.items():
            lines.append(f"            {surface:<32}{v['provider_cooling_down']:>9}")
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

"""``kexpr promotion-report``: shadow evidence per surface and the promotion gates
(plan "Verification … controlled live shadow"; design §10).

From the outcome journal only — metadata rows, verified by the journal's own rules
(`kexpr.ops.readers.verify_journal`) — never from logs, telemetry or the spool.

The plan's gates, as data (`FLAGS`, `REQUIRED_SELECTED`, `WINDOW_DAYS`):

- Configuration starts disabled; each surface runs in ``shadow`` on the test
  profile. A surface's gate **holds** when, within the window (14 days), it has
  at least 10 shadow observations, every one ``shadow_selected``: "10/10 selected
  observations with zero failures". Any other terminal outcome in the window
  (credential, provider, timeout, invalid response, validation, expired claim)
  is a failure and the gate does not hold; an attempt still open is not yet an
  observation and holds the gate back (fail closed: its outcome is unknown).
- Flags are enabled one at a time in `FLAGS` order: ``daily`` → ``weekly`` →
  ``adaptive_operator``. The shared ``adaptive_operator`` flag covers both card
  schemas, so its gate holds only when *both* adaptive surfaces' gates hold
  ("both adaptive versions must pass independently").
- A surface with nothing to style (`kexpr.spool.contract.fit.surface_styleable`:
  no shape of it has a slot the fit table leaves a choice) has its own gate,
  ``nothing_to_style``: not promotable, whatever its rows say. No style word reads
  at least as well as the host's own text before any of its sentences (design
  §6.2), so the plan's gate 2 ("a real model authors … in every requested
  surface") cannot be met on it with the reviewed lexicon. It is neither a failure
  nor held; a flag covering such a surface is not promotable either, and the order
  passes over it (it stays as it is: enabling it would style nothing).
- A rehearsal data root (``rehearsal.marker``, `kexpr.spool.rehearsal`) is no
  evidence: the built-in model answered, not the provider. Exit 2, no gates,
  and one line that says so (``{"rehearsal": true}`` with ``--json``).
- A journal that does not verify is no evidence: exit 2, no gates. A segment
  quarantined inside the window (`kexpr journal quarantine`) hides outcomes that
  can no longer be known: every gate is ``journal_incomplete``.

The margin, per surface, shown beside the gates and never
changing them (the plan's gate is the one above):

- **Timeout share**, from the journal: ``timeout`` terminal rows / terminal
  attempts of the surface in the window, shadow and enabled alike (the call is
  the same in both modes). The journal is the durable, verified, windowed record,
  the gate's own evidence.
- **p95 call time** against the 3 s budget (and p95 completion tokens), from the
  worker's status file (``worker.status.json``, `kexpr.worker.histograms`), read
  and validated as ``kexpr status`` reads it (`kexpr.ops._status_figures.call_figures`).
  Not from the journal: a row has no call time — ``started_at_utc`` is written
  before the call, and an accepted attempt's terminal row is written when the
  host's report arrives, so row timestamps measure the host, not the model. Not
  from the live proof summary either: that is one run's file in the operator's
  directory, not this data root's evidence. The status histograms are the
  worker's own monotonic measurement of exactly the call, but they count only
  since that worker process started (``worker_started_at_utc`` says when) and
  are not windowed; the report says so. Without a readable status file the
  call-time figures are ``no_status``.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kexpr.ops.readers import (
    JournalCheck,
    JournalRecord,
    ReadProblem,
    ReadRefused,
    read_worker_status,
    verify_journal,
)
from kexpr.ops.surfaces_cli import NOTHING_TO_STYLE_REASON
from kexpr.spool.canonical import format_ts
from kexpr.spool.contract.fit import surface_styleable
from kexpr.spool.layout import DataRoot
from kexpr.spool.rehearsal import MARKER_NAME, is_rehearsal_root
from kexpr.worker.histograms import CALL_BUDGET_S

WINDOW_DAYS: Final = 14
# Refusals (no row, no call) are the main reason a surface is not styled when
# there are at least `REFUSED_MIN` of them, more than `REFUSED_SHARE` of the
# surface's requests that reached the cool-down, and more than its failed calls.
REFUSED_SHARE: Final = 0.2
REFUSED_MIN: Final = 5
REQUIRED_SELECTED: Final = 10
SURFACES: Final[tuple[str, ...]] = (
    "daily.v1",
    "weekly.v1",
    "adaptive.dualcoachtest.card.v1",
    "adaptive.physique.card.v1",
)
# Promotion order and what each config switch covers (gateway_shim.config.SURFACE_SWITCH).
FLAGS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("daily", ("daily.v1",)),
    ("weekly", ("weekly.v1",)),
    ("adaptive_operator", ("adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1")),
)
# How the report says `Gate.NOTHING_TO_STYLE`, and why (design §6.2).
NOTHING_TO_STYLE_WORDS: Final = "nothing to style: not promotable"
GATE_2_UNMET: Final = (
    'the plan\'s gate 2 ("a real model authors … in every requested surface") cannot be'
    " met on these surfaces with the reviewed lexicon (docs/design.md §6.2)"
)
SELECTED: Final = "shadow_selected"
TIMEOUT: Final = "timeout"
# Where the call-time figures came from (`CallFigures.source`).
STATUS_READ: Final = "read"
STATUS_MISSING: Final = "no_status"
STATUS_UNREADABLE: Final = "status_unreadable"


class Gate(enum.StrEnum):
    """A gate's state. Declaration order is severity order (worst first):
    ``nothing_to_style`` first, because no evidence can ever change it."""

    NOTHING_TO_STYLE = "nothing_to_style"
    JOURNAL_INCOMPLETE = "journal_incomplete"
    FAILURES_PRESENT = "failures_present"
    PENDING_ATTEMPTS = "pending_attempts"
    INSUFFICIENT_OBSERVATIONS = "insufficient_observations"
    HELD = "held"


@dataclass(frozen=True, slots=True)
class SurfaceEvidence:
    surface: str
    observations: int  # terminal shadow attempts in the window
    selected: int
    failures: Mapping[str, int]
    pending: int
    enabled_attempts: int  # enabled-mode attempts in the window (not shadow evidence)
    gate: Gate
    # The margin (module docstring): from the journal, in the window, either mode ...
    terminal_attempts: int = 0
    timeouts: int = 0
    # ... and from the worker's status file since it started (None: not known).
    calls_measured: int | None = None
    p95_call_s: float | None = None
    p95_completion_tokens: int | None = None
    call_margin: str = STATUS_MISSING  # a histograms.Margin value, or the status problem
    # Refused before a start row while the provider cooled down (no row, no call:
    # not in the journal, so not a failure of the gate), from the status file
    # since the worker started (`kexpr.ops._status_figures.admission_figures`).
    refused_cooling_down: int | None = None

    @property
    def promotable(self) -> bool:
        """False when the surface has nothing to style (module docstring)."""
        return self.gate is not Gate.NOTHING_TO_STYLE

    @property
    def refused_share(self) -> float | None:
        """The refused share of the surface's requests that reached the worker's
        admission (refused or called), since the worker started."""
        refused, calls = self.refused_cooling_down, self.calls_measured
        if refused is None or calls is None or refused + calls == 0:
            return None
        return refused / (refused + calls)

    @property
    def refusals_main_reason(self) -> bool:
        """Whether refusals are the main reason the surface is not styled: at
        least `REFUSED_MIN` of them, more than `REFUSED_SHARE` of its requests,
        and more than its calls that failed (`kexpr.ops._status_verdicts`'s level)."""
        share, refused = self.refused_share, self.refused_cooling_down
        if share is None or refused is None or refused < REFUSED_MIN:
            return False
        return share > REFUSED_SHARE and refused > sum(self.call_failures.values())

    # The surface's calls that failed, by provider failure word (status file).
    call_failures: Mapping[str, int] = field(default_factory=dict)

    @property
    def timeout_share(self) -> float | None:
        return None if not self.terminal_attempts else self.timeouts / self.terminal_attempts

    def margin_json(self) -> dict[str, Any]:
        share = self.timeout_share
        return {
            "terminal_attempts": self.terminal_attempts,
            "timeouts": self.timeouts,
            "timeout_share": None if share is None else round(share, 4),
            "calls_measured": self.calls_measured,
            "p95_call_s": self.p95_call_s,
            "p95_completion_tokens": self.p95_completion_tokens,
            "call_budget_s": CALL_BUDGET_S,
            "call_margin": self.call_margin,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "surface": self.surface,
            "observations": self.observations,
            "selected": self.selected,
            "failures": dict(sorted(self.failures.items())),
            "failure_count": sum(self.failures.values()),
            "pending": self.pending,
            "enabled_attempts": self.enabled_attempts,
            "gate": self.gate.value,
            "promotable": self.promotable,
            "reason": None if self.promotable else NOTHING_TO_STYLE_REASON,
            "margin": self.margin_json(),
            "refused": {
                "provider_cooling_down": self.refused_cooling_down,
                "share": None if (share := self.refused_share) is None else round(share, 4),
                "main_reason_not_styled": self.refusals_main_reason,
            },
        }


@dataclass(frozen=True, slots=True)
class CallFigures:
    """The worker status file's per-surface call figures, as validated by
    `kexpr.ops._status_figures.call_figures`, and where they came from."""

    source: str  # STATUS_READ, STATUS_MISSING or STATUS_UNREADABLE
    worker_started_at_utc: str | None = None
    surfaces: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # `kexpr.ops._status_figures.admission_figures`: the cool-down and the
    # per-surface refusals ({} when unknown).
    admission: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": "worker.status.json",
            "source": self.source,
            "worker_started_at_utc": self.worker_started_at_utc,
        }


@dataclass(frozen=True, slots=True)
class FlagGate:
    flag: str
    surfaces: tuple[str, ...]
    gate: Gate

    @property
    def promotable(self) -> bool:
        """False when a surface it covers has nothing to style (module docstring)."""
        return self.gate is not Gate.NOTHING_TO_STYLE

    def to_json(self) -> dict[str, Any]:
        return {
            "flag": self.flag,
            "surfaces": list(self.surfaces),
            "gate": self.gate.value,
            "promotable": self.promotable,
        }


@dataclass(frozen=True, slots=True)
class PromotionReport:
    window_start_utc: str
    window_end_utc: str
    days: int
    surfaces: tuple[SurfaceEvidence, ...]
    flags: tuple[FlagGate, ...]
    journal: Mapping[str, int] = field(default_factory=dict)
    call_figures: CallFigures = field(default_factory=lambda: CallFigures(STATUS_MISSING))

    def flag(self, name: str) -> FlagGate:
        return next(f for f in self.flags if f.flag == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "kexpr-promotion-report-v1",
            "window": {
                "start_utc": self.window_start_utc,
                "end_utc": self.window_end_utc,
                "days": self.days,
            },
            "required_selected": REQUIRED_SELECTED,
            "surfaces": [s.to_json() for s in self.surfaces],
            "flags": [f.to_json() for f in self.flags],
            "order": [name for name, _ in FLAGS],
            "nothing_to_style": {
                "surfaces": [s.surface for s in self.surfaces if not s.promotable],
                "reason": NOTHING_TO_STYLE_REASON,
                "gate_2": GATE_2_UNMET,
            },
            "journal": dict(self.journal),
            "call_figures": self.call_figures.to_json(),
        }


def evaluate(
    records: Sequence[JournalRecord],
    *,
    now: dt.datetime,
    days: int = WINDOW_DAYS,
    quarantined_days: Sequence[str] = (),
    call_figures: CallFigures | None = None,
) -> PromotionReport:
    """The report for ``records`` (pure: no I/O, the clock is a parameter; the
    status file's figures, when known, are one too)."""
    figures = call_figures or CallFigures(STATUS_MISSING)
    start = now - dt.timedelta(days=days)
    start_s, end_s = format_ts(start), format_ts(now)
    incomplete = any(start_s[:10] <= d <= end_s[:10] for d in quarantined_days)
    evidence = []
    for surface in SURFACES:
        window = [
            r for r in records if r.surface == surface and start_s <= r.started_at_utc <= end_s
        ]
        shadow = [r for r in window if r.mode == "shadow"]
        done = [r for r in shadow if r.outcome is not None]
        selected = sum(1 for r in done if r.outcome == SELECTED)
        failures = Counter(r.outcome for r in done if r.outcome != SELECTED)
        pending = len(shadow) - len(done)
        terminal = [r for r in window if r.outcome is not None]
        measured = figures.surfaces.get(surface)
        if not surface_styleable(surface):
            gate = Gate.NOTHING_TO_STYLE
        elif incomplete:
            gate = Gate.JOURNAL_INCOMPLETE
        elif failures:
            gate = Gate.FAILURES_PRESENT
        elif pending:
            gate = Gate.PENDING_ATTEMPTS
        elif selected < REQUIRED_SELECTED:
            gate = Gate.INSUFFICIENT_OBSERVATIONS
        else:
            gate = Gate.HELD
        evidence.append(
            SurfaceEvidence(
                surface=surface,
                observations=len(done),
                selected=selected,
                failures={str(k): v for k, v in failures.items()},
                pending=pending,
                enabled_attempts=sum(1 for r in window if r.mode == "enabled"),
                gate=gate,
                terminal_attempts=len(terminal),
                timeouts=sum(1 for r in terminal if r.outcome == TIMEOUT),
                calls_measured=None if measured is None else measured["calls"],
                p95_call_s=None if measured is None else measured["p95_call_s"],
                p95_completion_tokens=None
                if measured is None
                else measured["p95_completion_tokens"],
                call_margin=figures.source if measured is None else measured["margin"],
                refused_cooling_down=_refused(figures, surface, "provider_cooling_down"),
                call_failures={} if measured is None else dict(measured["failures"]),
            )
        )
    by_surface = {e.surface: e.gate for e in evidence}
    order = list(Gate)
    flags = tuple(
        FlagGate(name, covered, min((by_surface[s] for s in covered), key=order.index))
        for name, covered in FLAGS
    )
    return PromotionReport(start_s, end_s, days, tuple(evidence), flags, call_figures=figures)


def _refused(figures: CallFigures, surface: str, word: str) -> int | None:
    per = figures.admission.get("refused_by_surface")
    if per is None or surface not in per:
        return None
    n: int = per[surface][word]
    return n


def read_call_figures(root: DataRoot) -> CallFigures:
    """The status file's figures, read no-follow and bounded and validated exactly
    as ``kexpr status`` does; a missing or unreadable file is said as such."""
    from kexpr.ops._status_figures import admission_figures, call_figures

    try:
        status = read_worker_status(root)
    except ReadRefused as e:
        return CallFigures(
            STATUS_MISSING if e.problem is ReadProblem.MISSING else STATUS_UNREADABLE
        )
    return CallFigures(
        STATUS_READ,
        status.started_at_utc,
        call_figures(status.document),
        admission_figures(status.document),
    )


def report_for(
    root: DataRoot, *, days: int = WINDOW_DAYS, now: Callable[[], dt.datetime] | None = None
) -> tuple[PromotionReport | None, JournalCheck]:
    check = verify_journal(root)
    if not check.ok:
        return None, check
    t = now() if now is not None else dt.datetime.now(dt.UTC)
    report = evaluate(
        check.records,
        now=t,
        days=days,
        quarantined_days=check.quarantined,
        call_figures=read_call_figures(root),
    )
    journal = {
        "segments": check.segments,
        "quarantined": len(check.quarantined),
        "attempts": len(check.records),
    }
    return PromotionReport(
        report.window_start_utc,
        report.window_end_utc,
        report.days,
        report.surfaces,
        report.flags,
        journal,
        report.call_figures,
    ), check


def render(report: PromotionReport) -> str:
    head = (
        f"kexpr promotion-report  window {report.days} days  "
        f"{report.window_start_utc} .. {report.window_end_utc}  "
        f"journal verified ({report.journal.get('segments', 0)} segments, "
        f"{report.journal.get('attempts', 0)} attempts)"
    )
    lines = [
        head,
        "",
        f"{'surface':<32}{'shadow':>7}{'selected':>10}{'failures':>10}{'pending':>9}{'enabled':>9}  gate",
    ]
    for s in report.surfaces:
        lines.append(
            f"{s.surface:<32}{s.observations:>7}{s.selected:>10}{sum(s.failures.values()):>10}"
            f"{s.pending:>9}{s.enabled_attempts:>9}  {gate_words(s.gate)}"
        )
    for s in report.surfaces:
        if s.failures:
            lines.append(
                f"  failures {s.surface}: "
                + "  ".join(f"{k} {v}" for k, v in sorted(s.failures.items()))
            )
    figures = report.call_figures
    since = figures.worker_started_at_utc or "?"
    lines += [
        "",
        f"margin: timeouts from the journal (window, either mode); call time from "
        f"worker.status.json ({figures.source}, since worker start {since})",
        f"margin  {'surface':<32}{'terminal':>9}{'timeouts':>9}{'share':>8}{'calls':>7}{'p95 s':>8}"
        f"{'p95 tok':>8}  vs {CALL_BUDGET_S:g} s budget",
    ]
    for s in report.surfaces:
        share = s.timeout_share
        share_s = "-" if share is None else f"{100 * share:.1f}%"
        calls = "-" if s.calls_measured is None else str(s.calls_measured)
        if s.p95_call_s is not None:
            p95 = f"<={s.p95_call_s:g}"
        else:
            p95 = ">4" if s.call_margin == "over_budget" else "-"
        tok = "-" if s.p95_completion_tokens is None else f"<={s.p95_completion_tokens}"
        lines.append(
            f"margin  {s.surface:<32}{s.terminal_attempts:>9}{s.timeouts:>9}{share_s:>8}{calls:>7}"
            f"{p95:>8}{tok:>8}  {s.call_margin}"
        )
    lines += _render_refusals(report)
    lines += ["", f"{'flag':<20}gate"]
    for f in report.flags:
        note = "  (both adaptive surfaces)" if len(f.surfaces) > 1 else ""
        lines.append(f"{f.flag:<20}{gate_words(f.gate)}{note}")
    lines += [
        "",
        f"gate: >= {REQUIRED_SELECTED} shadow observations in the window, all shadow_selected, none pending",
        "order: daily -> weekly -> adaptive_operator, one flag at a time; enable a flag only when its gate",
        "holds and every earlier promotable flag is already enabled; a flag with nothing to style is",
        "not promotable and is passed over (it stays as it is). This report enables nothing.",
    ]
    none = [s.surface for s in report.surfaces if not s.promotable]
    if none:
        lines += [
            "",
            f"{NOTHING_TO_STYLE_WORDS}: {', '.join(none)}",
            f"  {NOTHING_TO_STYLE_REASON};",
            f"  {GATE_2_UNMET}.",
        ]
    return "\n".join(lines)


def gate_words(gate: Gate) -> str:
    """A gate as the human report says it: `NOTHING_TO_STYLE_WORDS` for a surface
    or flag with nothing to style, its value otherwise."""
    return NOTHING_TO_STYLE_WORDS if gate is Gate.NOTHING_TO_STYLE else gate.value


def _render_refusals(report: PromotionReport) -> list[str]:
    """Refusals apart from failures (no row, no call: not in the gate)."""
    lines = [
        "",
        "refused before a start row while the provider cooled down (no row, no call;"
        " not failures, not in the gate), from worker.status.json since worker start:",
        f"refused {'surface':<32}{'cooling':>9}{'share':>8}",
    ]
    for s in report.surfaces:
        cool = "-" if s.refused_cooling_down is None else str(s.refused_cooling_down)
        share = "-" if (r := s.refused_share) is None else f"{100 * r:.0f}%"
        main = "  refusals are the main reason it is not styled" if s.refusals_main_reason else ""
        lines.append(f"refused {s.surface:<32}{cool:>9}{share:>8}{main}")
    return lines


def cli(argv: list[str]) -> int:
    import argparse

    from kexpr.spool.layout import DEFAULT_DATA_ROOT

    p = argparse.ArgumentParser(
        prog="kexpr promotion-report",
        description="shadow evidence per surface and the promotion gates, from the journal only "
        "(exit 0 report, 1 a --require'd gate does not hold, 2 journal unusable or a "
        "rehearsal data root)",
    )
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    from kexpr.spool.ranges import int_range

    p.add_argument(
        "--days",
        type=int_range(1, 3660),
        default=WINDOW_DAYS,
        help=f"window in days, 1-3660 (default {WINDOW_DAYS})",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--require",
        action="append",
        default=[],
        choices=[name for name, _ in FLAGS],
        help="exit 1 unless this flag's gate holds (repeatable)",
    )
    a = p.parse_args(argv)
    if a.days < 1:
        p.error("--days must be >= 1")
    from kexpr.ops.inputs import Problem, data_root_problem, refuse, shown

    prog = "kexpr promotion-report"
    if (problem := data_root_problem(a.data_root)) is not None:
        return refuse(prog, "--data-root", a.data_root, problem, json_out=a.json)
    try:
        report, check = report_for(DataRoot(a.data_root), days=a.days)
    except ReadRefused as e:  # it changed under us: said the same way
        known = {p.value for p in Problem}
        problem = Problem(e.problem.value) if e.problem.value in known else Problem.IO_ERROR
        return refuse(prog, "--data-root", a.data_root, problem, json_out=a.json)
    if report is None:
        reason = check.unusable or ",".join(sorted({f for f, _ in check.findings}))
        if a.json:
            print(
                json.dumps(
                    {"schema": "kexpr-promotion-report-v1", "journal_unverified": reason},
                    sort_keys=True,
                )
            )
        else:
            print(
                f"{prog}: --data-root {shown(a.data_root)}: journal unverified ({reason}): "
                "no evidence",
                file=sys.stderr,
            )
        return 2
    if is_rehearsal_root(DataRoot(a.data_root)):
        # A rehearsal's rows are no evidence (kexpr.spool.rehearsal rule 1): never counted.
        if a.json:
            print(json.dumps({"schema": "kexpr-promotion-report-v1", "rehearsal": True}))
        else:
            print(
                f"kexpr promotion-report: {a.data_root} is a rehearsal data root "
                f"({MARKER_NAME}): rehearsal evidence is never counted",
                file=sys.stderr,
            )
        return 2
    print(json.dumps(report.to_json(), sort_keys=True) if a.json else render(report))
    held = all(report.flag(name).gate is Gate.HELD for name in a.require)
    return 0 if held else 1

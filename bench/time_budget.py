"""The bench's time-budget phase: does the answer arrive in time?

A real gpt-4.1-mini writes its answer token by token; the plan fixes the call
(``timeout=3.0``, a 4 s deadline, ``max_tokens=384``) and an answer that echoes the
32-hex key and every ID and token. This phase runs the real supervised worker
against the loopback fake whose model writes at published gpt-4.1-mini speeds
(`fakeapi.generation`: ``first_token + completion_tokens / rate``, tokens counted
with o200k_base), and presents real host bodies through the real shim in shadow
mode:

- the weekly report whose goal range is missing (HOST-FORMATS W5, interpretation
  branch I2): the one message the fit table styles (design §6.1), so the one shape
  asked and called;
- daily (HOST-FORMATS D4), weekly (W3), the physique card (the reference host's
  sample: no physique body is public), and dual cards with 1..9 review reasons in
  A1's format (the two shipped reasons, then an operator glossary's, installed with
  ``kexpr glossary install`` as an operator would): each ``nothing_to_style`` now,
  presented once to show it makes no request;
- at 55, 77 and 110 tokens/s, first token 0.3 s and 0.5 s (the middle of the
  published 0.3-0.9 s; and 0.7 s and 0.9 s, compact, in the full run), the answer
  compact or pretty-printed (2-space JSON); 55 tokens/s after 0.9 s is the slowest
  speed the product serves (docs/budget.md);
- the worker calls every eligible capsule whose minimal answer the request's time
  left can hold at the fastest published rate (`kexpr.spool.contract.budget`):
  there is no learned refusal, so nothing needs a warm-up;
- the fake's model answers in the instruction's brief style (`fakeapi.brief_style`:
  one lexeme before every token), so its answers are a few tokens longer than the
  minimal answer the shim's budget counts.

Per (surface, reasons, first token, rate, layout): eligible or not (a capsule whose
minimal answer is over the budget is ``answer_over_budget`` at the shim: no request),
the share answered in time (``shadow_selected``), how many were called (a request
at the fake), the p50/p95 presentation time
(``present_*`` call to candidate, what the host waits on: spool, worker, call,
validation) and the completion tokens the model wrote. Also the token table of the
minimal answers (recomputed with the real encoding), and the speed and
stopped-worker targets, each
printed as met or not (never asserted).

Figures only, never asserted: this machine is shared and noisy. ``python
bench/time_budget.py [--quick]`` runs this phase alone; ``bench/run.py`` runs it
as its last phase.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the fake API is a test fixture

import announce  # noqa: E402  (bench/: the phase lines on stderr)
from fakeapi import FakeModel, FakeOpenAI, Layout, brief_style, compose_reply  # noqa: E402
from fakeapi.generation import count_tokens, render_answer  # noqa: E402
from figures import UNCAPPED, pct  # noqa: E402  (bench/)
from kit.supervisor import supervised  # noqa: E402  (tests/)

from gateway_shim import (  # noqa: E402
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    CardOrigin,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    card_payload,
    exact_block,
)
from gateway_shim.operator_glossary import DualGlossary, parse_operator_glossary  # noqa: E402
from gateway_shim.surfaces import CanonicalSurface, Ineligible  # noqa: E402
from gateway_shim.surfaces.adaptive import parse_adaptive  # noqa: E402
from gateway_shim.surfaces.daily import parse_daily  # noqa: E402
from gateway_shim.surfaces.dual import format_dual_body  # noqa: E402
from gateway_shim.surfaces.weekly import parse_weekly  # noqa: E402
from kexpr.spool.contract import Capsule  # noqa: E402
from kexpr.spool.contract.budget import (  # noqa: E402
    ANSWER_BUDGET_TOKENS,
    MAX_COMPLETION_TOKENS,
    minimal_answer,
)
from kexpr.spool.layout import DataRoot  # noqa: E402

HOST_EXAMPLES = REPO / "tests" / "surfaces" / "goldens" / "host-examples.jsonl"
KEY = "sk-bench-time-budget"
RATES = (55.0, 77.0, 110.0)
LAYOUTS: tuple[Layout, ...] = ("compact", "pretty")
# Presentations in flight at once: below the worker's call pool (POOL_SIZE = 8), so
# no request waits for a pool thread and its deadline measures the call alone.
IN_FLIGHT = 6

# --------------------------------------------------------------------- host bodies


def _host_example(name: str) -> dict[str, Any]:
    for line in HOST_EXAMPLES.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row["example"] == f"HOST-FORMATS.md {name}":
                request: dict[str, Any] = row["request"]
                return request
    raise SystemExit(f"host example {name} not found in {HOST_EXAMPLES}")


DAILY = _host_example("D4")
WEEKLY = _host_example("W3")
# W5: the goal range missing (interpretation branch I2), the one message the fit
# table styles (design §6.1): its interpretation slot is the one slot ever asked.
STYLED = _host_example("W5")
A1 = _host_example("A1")

# The operator's glossary for dual cards with more than the two shipped reasons
# (made-up texts in the operator format, gateway_shim.operator_glossary): the IDs
# are as long as typical operator names (8-14 characters after the prefix; the
# shipped ones have 17 and 23), and an ID's length is what the answer pays for.
OPERATOR_GLOSSARY: dict[str, Any] = {
    "version": "kexpr-dual-glossary-v1",
    "decisions": {},
    "reasons": {
        "P_DUAL_REASON_TREND_SHORT": "체중 추세를 판단할 기간이 짧습니다.",
        "P_DUAL_REASON_INTAKE_GAP": "섭취 기록과 계획의 차이가 큽니다.",
        "P_DUAL_REASON_COOLDOWN": "직전 조정 이후 대기 기간입니다.",
        "P_DUAL_REASON_SLEEP_SHORT": "수면 기록이 평소보다 부족합니다.",
        "P_DUAL_REASON_TRAINING_SHIFT": "운동 강도가 최근 크게 바뀌었습니다.",
        "P_DUAL_REASON_WEIGHT_MISSING": "체중 측정이 빠진 날이 많습니다.",
        "P_DUAL_REASON_COACH_REVIEW": "담당 코치의 직접 확인이 필요합니다.",
    },
}
GLOSSARY: DualGlossary = parse_operator_glossary(json.dumps(OPERATOR_GLOSSARY).encode())

# A1's card, field by field (HOST-FORMATS A1), so that its review block can hold
# any number of reasons; with A1's own two reasons it is A1's text byte for byte.
_A1_REASONS = (
    "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다.",
    "최신 확정 기록을 기준으로 다시 계산해야 합니다.",
)
REASON_LINES: tuple[str, ...] = _A1_REASONS + tuple(OPERATOR_GLOSSARY["reasons"].values())
# A1's five buttons' sessions (its state, "proposed", has five buttons).
_SESSIONS: tuple[str, ...] = (
    "1a2b3c4d5e6f708192a3b4c5",
    "2a3b4c5d6e7f8091a2b3c4d5",
    "3a4b5c6d7e8f90a1b2c3d4e5",
    "4a5b6c7d8e9fa0b1c2d3e4f5",
    "5a6b7c8d9eafb0c1d2e3f405",
)


def _card(body: str) -> dict[str, object]:
    return card_payload(
        body=body,
        customer_key="client_001",
        customer_label="가상 테스트 고객",
        kst_day="2026-07-28",
        revision=1,
        state="proposed",
        proposal_digest="c" * 64,
        sessions=_SESSIONS,
    )


def dual_payload(reasons: int) -> dict[str, object]:
    return _card(
        format_dual_body(
            goal="린매스업",
            head=("가상 테스트 고객 · 2026-07-28",),
            decision="순응도 근거 충돌로 조정 보류",
            recommendations=("칼로리와 매크로를 변경하지 않음",),
            reasons=REASON_LINES[:reasons],
        )
    )


assert dual_payload(2) == A1["payload"], "the dual card builder drifted from HOST-FORMATS A1"

# No physique body is public: the reference host's sample (tests/reference_host/samples.py).
PHYSIQUE_PAYLOAD = _card(
    "김민지 · 2025-11-30 · D+12\n결정: 탄수화물 20g 감량\n"
    "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n목표: 하루 2,300kcal\n\n"
    "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
)


def _callback(tag: str) -> str:
    """A fresh pressed button per artifact (the session is part of the artifact key)."""
    return f"an1:{hashlib.sha256(tag.encode()).hexdigest()[:24]}:create"


STYLED_LABEL = "weekly, goal missing"


@dataclass(frozen=True)
class Case:
    """One surface shape: how to parse it (eligibility, capsule) and present it."""

    label: str
    surface: str
    reasons: int | None
    parse: Callable[[], CanonicalSurface]
    present: Callable[[KoreanExpressionCoordinator, str], PresentationCandidate]


def _adaptive_case(
    label: str, surface: str, payload: dict[str, object], reasons: int | None
) -> Case:
    def parse() -> CanonicalSurface:
        return parse_adaptive(
            payload,
            callback_data=_callback("parse"),
            origin=CardOrigin.FRESH,
            surface=surface,
            glossary=GLOSSARY if surface == DUAL_SURFACE else None,
        )

    def present(coord: KoreanExpressionCoordinator, tag: str) -> PresentationCandidate:
        return coord.present_adaptive(payload, callback_data=_callback(tag), surface=surface)

    return Case(label, surface, reasons, parse, present)


def cases() -> list[Case]:
    daily = Case(
        "daily",
        "daily.v1",
        None,
        lambda: parse_daily(DAILY["body"]),
        lambda coord, tag: coord.present_daily(DAILY["body"], finalized_event_id=tag),
    )
    weekly = Case(
        "weekly",
        "weekly.v1",
        None,
        lambda: parse_weekly(WEEKLY["body"], explicit_fields=WEEKLY["explicit_fields"]),
        lambda coord, tag: coord.present_weekly(
            WEEKLY["body"],
            explicit_fields=WEEKLY["explicit_fields"],
            schedule_key=tag,
            kind="weekly",
            kst_day="2026-07-28",
        ),
    )
    styled = Case(
        STYLED_LABEL,
        "weekly.v1",
        None,
        lambda: parse_weekly(STYLED["body"], explicit_fields=STYLED["explicit_fields"]),
        lambda coord, tag: coord.present_weekly(
            STYLED["body"],
            explicit_fields=STYLED["explicit_fields"],
            schedule_key=tag,
            kind="weekly",
            kst_day="2026-07-28",
        ),
    )
    physique = _adaptive_case("physique card", PHYSIQUE_SURFACE, PHYSIQUE_PAYLOAD, None)
    duals = [
        _adaptive_case(
            f"dual card, {n} reason{'s' if n > 1 else ''}", DUAL_SURFACE, dual_payload(n), n
        )
        for n in range(1, len(REASON_LINES) + 1)
    ]
    return [daily, weekly, styled, physique, *duals]


# ------------------------------------------------------------------- token table


def eligibility(case: Case) -> str:
    """``eligible``, the shim's ineligible reason (the parse, then the budget), or
    ``nothing_to_style`` when the fit table locked every slot (the shim asks nothing)."""
    try:
        surface = case.parse()
        surface.require_answer_budget()
    except Ineligible as exc:
        return str(exc.reason.value)
    return "eligible" if surface.slots else "nothing_to_style"


def token_row(case: Case, keys: int) -> dict[str, Any]:
    """The minimal answer's o200k_base tokens, compact and pretty, over ``keys``
    random artifact keys (an HMAC key is uniform hex), and the shim's bound."""
    surface = case.parse()
    slots = tuple(s.policy() for s in surface.slots)
    if not slots:  # nothing to ask: no capsule, no answer
        none = dict.fromkeys(("compact_min", "compact_max", "pretty_min", "pretty_max", "bound"))
        return {"case": case.label, **none, "eligible": eligibility(case)}
    compact: list[int] = []
    pretty: list[int] = []
    for _ in range(keys):
        capsule = Capsule(
            schema_version="korean-expression-v4",
            surface=case.surface,
            artifact_key=secrets.token_hex(16),  # the 128-bit key: 32 hex
            slots=slots,
        )
        text = minimal_answer(capsule)
        compact.append(count_tokens(text))
        pretty.append(count_tokens(render_answer(json.loads(text), "pretty")))
    return {
        "case": case.label,
        "compact_min": min(compact),
        "compact_max": max(compact),
        "pretty_min": min(pretty),
        "pretty_max": max(pretty),
        "bound": surface.answer_token_bound(),
        "eligible": eligibility(case),
    }


# --------------------------------------------------------------------- processes


def supervised_worker(root: Path, fake: FakeOpenAI) -> AbstractContextManager[object]:
    """``kexpr supervise`` as bench/run.py starts it (the key, the proxy and the CA)."""
    return supervised(root, fake=fake, key=KEY, args=UNCAPPED, stop_timeout=30)


def install_glossary(root: Path, work: Path) -> None:
    """As an operator does: ``kexpr glossary install FILE --data-root D``."""
    draft = work / "operator-glossary.draft.json"
    draft.write_text(json.dumps(OPERATOR_GLOSSARY, ensure_ascii=False), encoding="utf-8")
    cmd = [sys.executable, "-m", "kexpr.ops.cli", "glossary", "install", str(draft)]
    subprocess.run([*cmd, "--data-root", str(root)], check=True, stdout=subprocess.DEVNULL)


# ------------------------------------------------------------------ measurement


@dataclass(frozen=True)
class Speed:
    first_token_s: float
    tokens_per_s: float
    layout: Layout


def speeds(quick: bool) -> list[Speed]:
    """Fastest first within a layout."""
    if quick:
        return [
            Speed(0.3, 110.0, "compact"),
            Speed(0.5, 77.0, "compact"),
            Speed(0.9, 55.0, "compact"),
        ]
    compact = [(0.3, 110.0), (0.5, 110.0), (0.9, 110.0), (0.3, 77.0), (0.5, 77.0)]
    compact += [(0.7, 77.0), (0.9, 77.0), (0.3, 55.0), (0.5, 55.0), (0.9, 55.0)]
    out = [Speed(f, r, "compact") for f, r in compact]
    return out + [Speed(0.3, 110.0, "pretty"), Speed(0.3, 77.0, "pretty")]


def present_all(
    root: Path, jobs: list[tuple[Case, str]]
) -> list[tuple[Case, str, str | None, float]]:
    """Every job through the real shim (shadow mode), IN_FLIGHT at a time, in
    submission order: (case, outcome, artifact key, presentation seconds)."""
    cfg = KoreanExpressionConfig.from_block(
        exact_block(Mode.SHADOW, daily=True, weekly=True, adaptive_operator=True)
    )
    local = threading.local()
    made: list[KoreanExpressionCoordinator] = []
    lock = threading.Lock()

    def coordinator() -> KoreanExpressionCoordinator:
        coord: KoreanExpressionCoordinator | None = getattr(local, "coord", None)
        if coord is None:
            coord = KoreanExpressionCoordinator(cfg, root)
            local.coord = coord
            with lock:
                made.append(coord)
        return coord

    def one(case: Case, tag: str) -> tuple[Case, str, str | None, float]:
        t0 = time.perf_counter()
        cand = case.present(coordinator(), tag)
        return case, cand.outcome.value, cand.artifact_key, time.perf_counter() - t0

    try:
        with cf.ThreadPoolExecutor(max_workers=IN_FLIGHT) as pool:
            return list(pool.map(lambda job: one(*job), jobs))
    finally:
        for coord in made:
            coord.close()


def measure(
    root: Path,
    fake: FakeOpenAI,
    chosen: list[Case],
    speed: Speed,
    n: int,
    run_tag: str,
) -> list[dict[str, Any]]:
    """``n`` fresh artifacts per eligible case at ``speed``, IN_FLIGHT at a time."""
    fake.model = FakeModel(
        first_token_s=speed.first_token_s, tokens_per_s=speed.tokens_per_s, layout=speed.layout
    )
    jobs = [(c, f"tb-{run_tag}-{c.label}-{i}") for i in range(n) for c in chosen]
    results: dict[str, list[tuple[str, str | None, float]]] = {c.label: [] for c in chosen}
    for case, outcome, akey, seconds in present_all(root, jobs):
        results[case.label].append((outcome, akey, seconds))
    tokens = {a.artifact_key: a.completion_tokens for a in fake.model_answers}
    rows = []
    for case in chosen:
        got = results[case.label]
        outcomes = Counter(o for o, _, _ in got)
        took = [s for _, _, s in got]
        written = [tokens[k] for _, k, _ in got if k in tokens]
        called = {r.artifact_key for r in fake.requests if r.artifact_key}
        rows.append(
            {
                "case": case.label,
                "first_token_s": speed.first_token_s,
                "tokens_per_s": speed.tokens_per_s,
                "layout": speed.layout,
                "n": len(got),
                "called": sum(1 for _, k, _ in got if k in called),
                "in_time": outcomes[Outcome.SHADOW_SELECTED.value] / len(got),
                "outcomes": dict(outcomes),
                "p50_s": pct(took, 50),
                "p95_s": pct(took, 95),
                "tokens_p50": pct([float(t) for t in written], 50) if written else None,
            }
        )
    return rows


def run(work: Path, quick: bool) -> dict[str, Any]:
    """The phase: the token table, then every speed against the real worker."""
    announce.phase("time budget", f"token table, then a supervised worker against the fake model at {len(speeds(quick))} speeds, real host bodies in shadow mode", "40 s" if quick else "3.5 min")  # fmt: skip
    load_start = os.getloadavg()
    all_cases = cases()
    table = [token_row(c, 20 if quick else 200) for c in all_cases]
    status = {row["case"]: row["eligible"] for row in table}
    eligible = [c for c in all_cases if status[c.label] == "eligible"]
    ineligible = [c for c in all_cases if status[c.label] != "eligible"]
    n = 2 if quick else 6
    rows: list[dict[str, Any]] = []
    with FakeOpenAI(work / "tb-fake") as fake:
        fake.behaviour = compose_reply(brief_style)
        root = work / "tb-spool" / "korean-expression-v1"
        root.parent.mkdir(mode=0o700)
        DataRoot(root).ensure()
        install_glossary(root, work)
        t0 = time.monotonic()
        with supervised_worker(root, fake):
            # Over-budget shapes: presented once each, at the slowest speed, to show
            # they end ineligible with no request.
            before = len(fake.requests)
            shut = measure(root, fake, ineligible, Speed(0.3, RATES[0], "compact"), 1, "over")
            over_requests = len(fake.requests) - before
            for i, speed in enumerate(speeds(quick)):
                rows += measure(root, fake, eligible, speed, n, f"s{i}")
        elapsed = time.monotonic() - t0
        per_artifact = Counter(r.artifact_key for r in fake.requests if r.artifact_key)
        most = max(per_artifact.values(), default=0)
    return {
        "budget_tokens": ANSWER_BUDGET_TOKENS,
        "max_tokens": MAX_COMPLETION_TOKENS,
        "tokens": table,
        "over_budget": [{"case": r["case"], "outcomes": r["outcomes"]} for r in shut],
        "over_budget_requests": over_requests,
        "rows": rows,
        "max_requests_per_artifact": most,
        "phase_s": elapsed,
        "loadavg_start": load_start,
        "loadavg": os.getloadavg(),
        "nproc": os.cpu_count(),
    }


def _row(
    result: dict[str, Any], first: float, rate: float, layout: str = "compact"
) -> dict[str, Any]:
    return {
        r["case"]: r
        for r in result["rows"]
        if (r["first_token_s"], r["tokens_per_s"], r["layout"]) == (first, rate, layout)
    }


def targets(result: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    """The speed targets and the stopped-worker target: (target, met (None: not
    run here), what was measured). Every eligible shape is called at every speed
    (no learned refusal); at the slowest served speed every one arrives."""
    out: list[tuple[str, bool | None, str]] = []

    def called(rows: dict[str, Any]) -> str:
        return ", ".join(f"{c} {r['called']}/{r['n']}" for c, r in rows.items())

    for first, rate in ((0.3, 110.0), (0.5, 77.0), (0.9, 55.0)):
        rows = _row(result, first, rate)
        if not rows:
            out.append((f"{rate:.0f} t/s after {first} s", None, "not run"))
            continue
        shares = ", ".join(f"{c} {r['in_time']:.0%}" for c, r in rows.items())
        out.append(
            (
                f"{rate:.0f} t/s after {first} s, compact: everything eligible called and arrives",
                all(r["called"] == r["n"] and r["in_time"] >= 0.99 for r in rows.values()),
                f"arrived {shares}; called {called(rows)}",
            )
        )
    out.append(("27.6: a stopped worker costs a presentation < 50 ms p99", None, "not this phase"))
    return out


# ----------------------------------------------------------------------- printing


def render(result: dict[str, Any]) -> str:
    out = [
        f"time budget: answer budget {result['budget_tokens']} tokens (max_tokens {result['max_tokens']});"
        " minimal compact answer, o200k_base, over random keys:",
        f"  {'case':<22} {'compact':>9} {'pretty':>9} {'bound':>5}  shim",
    ]
    for r in result["tokens"]:
        compact = "-" if r["bound"] is None else f"{r['compact_min']}-{r['compact_max']}"
        pretty = "-" if r["bound"] is None else f"{r['pretty_min']}-{r['pretty_max']}"
        bound = "-" if r["bound"] is None else r["bound"]
        out.append(f"  {r['case']:<22} {compact:>9} {pretty:>9} {bound:>5}  {r['eligible']}")
    shut = ", ".join(f"{r['case']}: {'/'.join(r['outcomes'])}" for r in result["over_budget"])
    out.append(
        f"  not asked (over budget or nothing to style), presented once each: {shut or '-'};"
        f" requests {result['over_budget_requests']}"
    )
    out.append(
        f"  {'case':<22} {'first':>5} {'tok/s':>5} {'layout':<7} {'in time':>7}"
        f" {'called':>6} {'p50 s':>6} {'p95 s':>6} {'tokens':>6}  outcomes"
    )
    for r in result["rows"]:
        tokens = "-" if r["tokens_p50"] is None else f"{r['tokens_p50']:.0f}"
        outcomes = " ".join(f"{k} {v}" for k, v in sorted(r["outcomes"].items()))
        out.append(
            f"  {r['case']:<22} {r['first_token_s']:>5.1f} {r['tokens_per_s']:>5.0f} {r['layout']:<7}"
            f" {r['in_time']:>7.0%} {r['called']:>6}"
            f" {r['p50_s']:>6.2f} {r['p95_s']:>6.2f} {tokens:>6}  {outcomes}"
        )
    out.append("  targets (figures, never asserted):")
    for target, met, measured in targets(result):
        word = "n/a" if met is None else ("met" if met else "NOT met")
        out.append(f"    [{word}] {target}: {measured}")
    start = " ".join(f"{x:.2f}" for x in result["loadavg_start"])
    load = " ".join(f"{x:.2f}" for x in result["loadavg"])
    out.append(
        f"  phase {result['phase_s']:.0f} s, load average {start} at start, {load} at end,"
        f" on {result['nproc']} cores;"
        f" max requests per artifact {result['max_requests_per_artifact']}"
    )
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(prog="bench/time_budget.py")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="kexpr-bench-tb-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        result = run(work, a.quick)
    announce.done()
    print(render(result))
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

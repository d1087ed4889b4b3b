"""The main job (``make run`` / ``kexpr run``).

Three processes, as in production:

- this launcher (ops) starts ``kexpr supervise`` with an explicit environment that
  carries ``OPENAI_API_KEY`` if the operator set one, and nothing else secret;
- the supervisor starts the worker (the only process holding the key);
- a *gateway* process (``python -m ops.demo``) started with an explicit
  environment WITHOUT the key imports `gateway_shim`, presents sample artifacts
  of all four surfaces (daily complete/partial, weekly, a dualcoachtest card
  with two review reasons, a physique card) on the embedded default (shadow
  mode, every surface on), and prints a table.

Without a key every row is canonical with ``credential_unavailable``; with a key
the worker makes the real call (shadow mode: canonical is what gets published).
A legend explains the outcome column. Without a key the gateway process then
replays hand-written example answers through the shim (`ops.replay`, labelled
"example, replayed", never presented as live): each surface's canonical body and
its styled body, the slot text marked.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from gateway_shim import KoreanExpressionCoordinator, PresentationCandidate

GATEWAY_ENV: Final = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
READY_TIMEOUT_S: Final = 20.0


def cli(argv: list[str]) -> int:
    import argparse

    from spool.layout import DEFAULT_DATA_ROOT

    p = argparse.ArgumentParser(prog="kexpr run")
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    p.add_argument("--https-proxy", help="egress proxy for the worker (operator-configured)")
    p.add_argument("--ssl-cert-file", help="CA bundle for the worker (operator-configured)")
    a = p.parse_args(argv)
    return run_main_job(a.data_root, https_proxy=a.https_proxy, ssl_cert_file=a.ssl_cert_file)


def run_main_job(
    data_root: Path, *, https_proxy: str | None = None, ssl_cert_file: str | None = None
) -> int:
    from spool.layout import DataRoot

    from worker.daemon import wait_ready

    root = DataRoot(data_root.resolve())
    root.ensure()
    try:
        root.status_file.unlink()
    except FileNotFoundError:
        pass
    sup_cmd = [sys.executable, "-m", "ops.cli", "supervise", "--data-root", str(root.root)]
    if https_proxy:
        sup_cmd += ["--https-proxy", https_proxy]
    if ssl_cert_file:
        sup_cmd += ["--ssl-cert-file", ssl_cert_file]
    sup_env = dict(GATEWAY_ENV)
    if "OPENAI_API_KEY" in os.environ:
        sup_env["OPENAI_API_KEY"] = os.environ["OPENAI_API_KEY"]
    sup = subprocess.Popen(sup_cmd, env=sup_env, stdin=subprocess.DEVNULL)
    try:
        if not wait_ready(root, READY_TIMEOUT_S):
            print("kexpr run: worker did not become ready", file=sys.stderr)
            return 1
        gw = subprocess.run(
            [sys.executable, "-m", "ops.demo", "--data-root", str(root.root)],
            env=dict(GATEWAY_ENV),
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return gw.returncode
    finally:
        sup.send_signal(signal.SIGTERM)
        try:
            sup.wait(15)
        except subprocess.TimeoutExpired:
            sup.kill()
            sup.wait()


@dataclass(frozen=True)
class Sample:
    """One synthetic artifact of the demo: how to present it, where its slot is."""

    surface: str
    label: str
    present: Callable[[KoreanExpressionCoordinator], PresentationCandidate]
    excerpt: Callable[[str], str]


def _line_after(heading: str) -> Callable[[str], str]:
    def excerpt(body: str) -> str:
        lines = body.split("\n")
        return lines[lines.index(heading) + 1] if heading in lines else lines[-1]

    return excerpt


def _line_starting(prefix: str) -> Callable[[str], str]:
    return lambda body: next(line for line in body.split("\n") if line.startswith(prefix))


def _samples() -> list[Sample]:
    """The four surfaces, with synthetic data: daily (complete and partial),
    weekly, a dualcoachtest card with two review reasons, a physique card.
    Artifact inputs carry a fresh run token so each run is a new artifact."""
    from gateway_shim import (
        AdaptiveBinding,
        DailyFacts,
        DualDecision,
        DualFacts,
        DualReason,
        WeeklyFacts,
        WeeklyInterpretation,
        WeeklyRationale,
        card_payload,
        format_daily,
        format_dual_card,
        format_physique_card,
        format_weekly,
    )

    run = secrets.token_hex(4)
    complete = format_daily(
        title="오늘의 체크인 기록 · 데모 고객",
        facts=[
            ("체중", "72.4kg"),
            ("식단", "3끼 기록"),
            ("단백질", "140g"),
            ("수분", "2.0L"),
            ("운동", "상체 45분"),
            ("수면", "7시간"),
            ("컨디션", "보통"),
        ],
        actions=["저녁 식사 사진 올리기", "취침 전 체중 기록하기"],
    )
    partial = format_daily(
        title="오늘의 체크인 기록 · 데모 고객",
        facts=[
            ("체중", "72.1kg"),
            ("식단", "미기록"),
            ("단백질", "120g"),
            ("수분", "미기록"),
            ("운동", "하체 50분"),
            ("수면", "6시간"),
            ("컨디션", "피곤함"),
        ],
        actions=["남은 식사 기록하기"],
    )
    interpretation, rationale = WeeklyInterpretation.IN_GOAL, WeeklyRationale.KEEP_BASELINE
    weekly_facts = WeeklyFacts(interpretation=interpretation, rationale=rationale)
    weekly = format_weekly(
        title="주간 리포트 · 데모 고객",
        facts=[
            ("기간", "11월 24일 ~ 11월 30일"),
            ("평균 체중", "72.4kg"),
            ("체중 변화", "+0.3kg"),
            ("목표 범위", "주당 +0.2~0.4kg"),
            ("주간 변화율", "+0.4%"),
            ("기록률", "6/7일"),
            ("판단", "현재 계획 유지"),
        ],
        interpretation=interpretation,
        rationale=rationale,
        actions=["매일 아침 체중 기록하기"],
    )
    dual_facts = DualFacts(
        decision=DualDecision.ADJUST_PLAN,
        reasons=(DualReason.RECORDS_INSUFFICIENT, DualReason.INTAKE_BELOW_PLAN),
    )
    buttons = [[("승인", f"demo:{run}:approve"), ("보류", f"demo:{run}:hold")]]

    def adaptive(surface: str, text: str, n: int) -> tuple[dict[str, object], AdaptiveBinding]:
        session_id, proposal = f"demo-{run}-session-{n}", f"demo-{run}-proposal-{n}"
        payload = card_payload(
            surface=surface,
            text=text,
            buttons=buttons,
            session_id=session_id,
            proposal_digest=proposal,
            revision=1,
            card_kind="proposal_review",
        )
        binding = AdaptiveBinding(
            callback_action="demo_review",
            session_id=session_id,
            proposal_digest=proposal,
            revision=1,
            card_kind="proposal_review",
        )
        return payload, binding

    dual_payload, dual_binding = adaptive(
        "adaptive.dualcoachtest.card.v1",
        format_dual_card(
            title="데모 고객",
            customer="데모 고객",
            date="11월 30일",
            facts=("최근 7일 평균 체중 72.4kg",),
            goal="린매스업",
            decision=dual_facts.decision,
            recommendations=("하루 탄수화물 20g 줄이기",),
            reasons=dual_facts.reasons,
            details=("평균 섭취 2,150kcal",),
        ),
        1,
    )
    physique_payload, physique_binding = adaptive(
        "adaptive.physique.card.v1",
        format_physique_card(
            title="데모 고객",
            customer="데모 고객",
            day="11월 30일",
            day_count=12,
            decision="탄수화물 20g 감량",
            basis="최근 7일 평균 체중 증가가 목표보다 빠름",
            target="하루 2,300kcal",
        ),
        2,
    )
    daily_excerpt = lambda body: body.split("\n\n")[2]
    return [
        Sample(
            "daily.v1",
            "daily complete",
            lambda c: c.present_daily(
                complete, facts=DailyFacts(complete=True), finalized_event_id=f"demo-{run}-1"
            ),
            daily_excerpt,
        ),
        Sample(
            "daily.v1",
            "daily partial",
            lambda c: c.present_daily(
                partial, facts=DailyFacts(complete=False), finalized_event_id=f"demo-{run}-2"
            ),
            daily_excerpt,
        ),
        Sample(
            "weekly.v1",
            "weekly in goal",
            lambda c: c.present_weekly(
                weekly,
                facts=weekly_facts,
                schedule_key=f"demo-{run}-weekly",
                kind="weekly_report",
                kst_day="2025-11-30",
            ),
            _line_after("주간 해석"),
        ),
        Sample(
            "adaptive.dualcoachtest.card.v1",
            "dual card, 2 reasons",
            lambda c: c.present_adaptive(dual_payload, binding=dual_binding, facts=dual_facts),
            _line_starting("현재 판단: "),
        ),
        Sample(
            "adaptive.physique.card.v1",
            "physique card",
            lambda c: c.present_adaptive(physique_payload, binding=physique_binding),
            _line_after("검토 안내"),
        ),
    ]


def display_width(text: str) -> int:
    """Terminal columns: Hangul and other East Asian wide characters take two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def print_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    cells = [tuple(str(c) for c in r) for r in [headers, *rows]]
    widths = [max(display_width(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(r: tuple[str, ...]) -> str:
        return "  ".join(c + " " * (w - display_width(c)) for c, w in zip(r, widths, strict=True)).rstrip()

    print(fmt(cells[0]))
    print(fmt(tuple("-" * w for w in widths)))
    for r in cells[1:]:
        print(fmt(r))


def gateway_main(data_root: Path) -> int:
    """The gateway side of the demo. Runs in a process started without the key."""
    from gateway_shim import KoreanExpressionConfig, KoreanExpressionCoordinator, Mode, exact_block

    config = KoreanExpressionConfig.from_block(
        exact_block(Mode.SHADOW, daily=True, weekly=True, adaptive_operator=True)
    )
    coord = KoreanExpressionCoordinator(config, data_root)
    rows = []
    try:
        for sample in _samples():
            cand = sample.present(coord)
            excerpt = sample.excerpt(cand.body)
            excerpt = excerpt if len(excerpt) <= 40 else excerpt[:39] + "…"
            rows.append(
                (cand.surface_version, sample.label, cand.outcome.value, cand.status.value, excerpt)
            )
    finally:
        coord.close()
    headers = ("surface", "sample", "outcome", "status", "body excerpt (first slot)")
    print_table(headers, rows)
    print_legend(row[2] for row in rows)
    if any(row[2] == "credential_unavailable" for row in rows):
        # No live call was made: show what the product does with example answers.
        from ops.replay import print_replayed, replay

        first = {s.surface: s for s in reversed(_samples())}  # one sample per surface
        print_replayed(replay((s.surface, s.label, s.present) for s in reversed(first.values())))
    return 0


# What the outcome column means (every CandidateOutcome; docs/design.md §4, §8).
OUTCOME_LEGEND: Final = {
    "shadow_selected": "the model's expression was valid and rendered; shadow mode publishes the canonical body",
    "accepted": "enabled mode: the styled body is published, then the host reports the result",
    "credential_unavailable": "the worker has no OPENAI_API_KEY: no request was made, canonical body",
    "disabled": "the config block or this surface is off: canonical, nothing written",
    "ineligible": "this body has no slot kexpr may style (or is not the host's format): canonical, no call",
    "timeout": "no valid answer within 4 s: canonical",
    "provider_error": "the provider call failed (never retried): canonical",
    "invalid_response": "the model's answer was not one well-typed document: canonical",
    "validation_rejected": "the answer broke a contract rule, or a locked byte would change: canonical",
    "in_flight": "the same artifact is being answered elsewhere: publish nothing now",
    "already_attempted": "this artifact had its one attempt already: canonical",
    "claim_expired_canonical": "the attempt expired (e.g. a worker restart): canonical",
    "journal_unavailable": "the worker's journal is quarantined: canonical, no call",
    "spool_unavailable": "the data root could not be used: canonical",
    "invalid_request": "the worker refused the request file: canonical",
}


def print_legend(outcomes: Iterable[str]) -> None:
    """One line per outcome shown, and how to make the live call when it was not made."""
    shown = list(dict.fromkeys(outcomes))
    print()
    print("outcome:")
    for outcome in shown:
        print(f"  {outcome:<24} {OUTCOME_LEGEND.get(outcome, '')}".rstrip())
    if "credential_unavailable" in shown:
        print()
        print("live call: `OPENAI_API_KEY=sk-... make run` (only the worker receives the key; shadow mode)")


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="python -m ops.demo")
    p.add_argument("--data-root", type=Path, required=True)
    raise SystemExit(gateway_main(p.parse_args().data_root))

"""The controlled shadow proof (plan "Verification … controlled live shadow"; design §10).

One harness, two uses:

- **live** (`test_live_shadow.py`, marker ``live_korean_expression``, only with
  ``RUN_KOREAN_EXPRESSION_LIVE=1``): the real supervised worker calls the real
  API with the operator's key;
- **rehearsal** (`test_shadow_rehearsal.py`, in ``make test``): the same code
  against the loopback HTTPS fake behind a real CONNECT proxy, so the harness
  itself is known to work before anyone spends a real call on it.

What one run does:

1. Starts ``kexpr supervise`` with an explicit environment holding the key (the
   worker is the only process that receives it) — under a non-root group when
   run as root, so that ``kexpr audit`` can read the worker's dumpability.
2. Starts a *gateway* process (`shadow_gateway.py`) with a clean environment —
   no key — that presents ``count`` distinct synthetic artifacts per surface
   with something to style (`PROOF_CASES`) through the real shim in ``shadow``
   mode. A surface with nothing to style (`NOTHING_TO_STYLE`: no shape of it has a
   slot the fit table leaves a choice, design §6.2) is never called: the summary
   says "nothing to style: not promotable" with the reason, neither a failure
   nor a pass. Each surface is one row of `CASES`:
   how to render its i-th synthetic canonical input and present it. Every host
   sender / editor / reservation / mark-pending entry point (`HostSpy`) raises
   if called; the gateway captures every log record and telemetry event.
3. While both are alive: ``kexpr audit`` on the gateway, the worker and the data
   root. The worker check needs root (the worker is non-dumpable, so only
   CAP_SYS_PTRACE reads its environment); as another user the audit covers the
   gateway (same user: its environment is readable) and the data root, and the
   summary says so (``audit_worker_checked``).
4. Reads the journal (verified), and passes only with ``count`` ``shadow_selected``
   per surface, zero other outcomes (journal and candidates alike), zero host
   calls, zero content in any captured field, and one call per artifact at the
   fake (rehearsal) — then writes ``proof-summary.json`` (counts, enums and
   booleans only).
5. Copies the worker's margin figures into the summary (issue 19 item 6): per
   surface the call-time and ``usage.completion_tokens`` histograms (fixed bucket
   edges, counts only; `kexpr.worker.histograms`), the p95 call time against the
   3 s budget and the p95 tokens, read from the stopped worker's last
   ``worker.status.json`` through ``kexpr status``'s own validation
   (`kexpr.ops.status_cli.call_figures`). The proof also requires that the worker
   measured exactly one call per artifact, so the rehearsal tests that writer.

The synthetic inputs carry customer-looking strings (`CUSTOMER_VALUES`) so that
"zero content" is a real test: none of them may appear in a log record, a
telemetry event, the worker's output, a spool file or (rehearsal) on the wire.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gateway_shim import (
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    CandidateStatus,
    DailyFacts,
    KoreanExpressionCoordinator,
    PresentationCandidate,
    WeeklyInterpretation,
    WeeklyJudgment,
    card_payload,
    format_daily,
    format_dual_body,
    format_weekly,
)
from gateway_shim.surfaces.card import expected_buttons
from kexpr.ops.promotion import NOTHING_TO_STYLE_WORDS
from kexpr.ops.surfaces_cli import NOTHING_TO_STYLE_REASON
from kexpr.spool.contract.fit import surface_styleable

HERE: Final = Path(__file__).resolve().parent
COUNT: Final = 12  # distinct synthetic capsules per surface with something to style
CLEAN_ENV: Final = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
NOGROUP: Final = 65534
PROOF_WINDOW: Final = dt.timedelta(hours=24)  # plan: within one 24-hour window

# Synthetic customer material: must never be captured anywhere.
CUSTOMER_VALUES: Final = (
    "김하늘",
    "이서준",
    "73.1kg",
    "2,240kcal",
    "142g",
    "12월 1일",
    "evt-live-",
    "sched-live-",
    "client-live-",
)
# The host's public dual texts (TH ADAPTIVE @4305027f): the shipped glossary.
DUAL_DECISION: Final = "순응도 근거 충돌로 조정 보류"
DUAL_REASONS: Final = (
    "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다.",
    "최신 확정 기록을 기준으로 다시 계산해야 합니다.",
)
# Every reason vector of the shipped glossary that is asked: both, both reversed.
# The fit table locks the decision and the first review line, so a card of no or
# one reason has nothing to style (`nothing_to_style`, no request): it is no call
# of a proof that every artifact is one call, shadow_selected.
_REASON_SETS: Final = (DUAL_REASONS, DUAL_REASONS[::-1])


class HostCallForbidden(AssertionError):
    """A host entry point was called during a shadow proof."""


@dataclass
class HostSpy:
    """Every host entry point that could send, edit, reserve or persist. In a
    shadow run none may be reached: each one counts and raises."""

    calls: list[str] = field(default_factory=list)

    def _forbid(self, name: str) -> None:
        self.calls.append(name)
        raise HostCallForbidden(name)

    def send_message(self, *a: object, **k: object) -> None:
        self._forbid("send_message")

    def edit_message(self, *a: object, **k: object) -> None:
        self._forbid("edit_message")

    def reserve_customer_task_delivery(self, *a: object, **k: object) -> None:
        self._forbid("reserve_customer_task_delivery")

    def validate_and_mark_presented_card(self, *a: object, **k: object) -> None:
        self._forbid("validate_and_mark_presented_card")

    def mark_published(self, *a: object, **k: object) -> None:
        self._forbid("mark_published")


def host_step(spy: HostSpy, surface: str, cand: PresentationCandidate) -> None:
    """What a host does with a candidate once the expression path is done. Only a
    SELECTED candidate would reach the host's send/persist authorities; shadow
    must never produce one, and if it did the spy raises."""
    if cand.status is not CandidateStatus.SELECTED:
        return
    if surface == "daily.v1":
        spy.edit_message(cand.body)
    elif surface == "weekly.v1":
        spy.reserve_customer_task_delivery(cand.body)
        spy.send_message(cand.body)
    else:
        spy.validate_and_mark_presented_card(cand)
        spy.edit_message(cand.body)
        spy.mark_published(cand)


# ------------------------------------------------------------------ the table


def _daily(coord: KoreanExpressionCoordinator, i: int, run: str) -> PresentationCandidate:
    # Host-shaped (docs/host-formats.md): complete and partial bodies alternate.
    complete = i % 2 == 0
    body = format_daily(
        weight="73.1kg",
        intake="2,240kcal" if complete else "기록 없음",
        macros="탄수화물 280g · 단백질 142g · 지방 70g",
        training=f"{CUSTOMER_VALUES[i % 2]} 님 하체 {40 + i}분",
        sleep="7시간 · 수면 질 4/5",
        condition="3/5",
        digestion="정상",
        water="2.3L",
    )
    return coord.present_daily(
        body, facts=DailyFacts(complete=complete), finalized_event_id=f"evt-live-{run}-{i}"
    )


def _weekly(coord: KoreanExpressionCoordinator, i: int, run: str) -> PresentationCandidate:
    # Host-shaped (docs/host-formats.md): the goal range missing (branch I2), the
    # one message with a slot to ask (design §6.2); its three judgments and the
    # values vary, each artifact its own schedule key.
    judgment = list(WeeklyJudgment)[i % 3]
    body = format_weekly(
        recent="73.10kg",
        prior="72.80kg",
        change=f"+0.{i % 5}1%",
        rate="85.71%" if i % 2 else None,
        goal_range="기록 없음",
        interpretation=WeeklyInterpretation.GOAL_MISSING,
        judgment=judgment,
        actions=[
            f"{CUSTOMER_VALUES[i % 2]} 님 평균 섭취 2,240kcal 유지",
            "매일 아침 체중 기록하기",
        ],
    )
    return coord.present_weekly(
        body,
        explicit_fields=("average_weight_kg", "prior_average_weight_kg", "actions"),
        schedule_key=f"sched-live-{run}-{i}",
        kind="weekly_report",
        kst_day="2025-12-01",
    )


def _hex(seed: str, n: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


def _adaptive(
    coord: KoreanExpressionCoordinator, surface: str, body: str, i: int, run: str
) -> PresentationCandidate:
    """The host's real payload (synthetic values) and the pressed button's callback."""
    state = "proposed" if i % 2 == 0 else "held"
    n = len(expected_buttons(state))
    payload = card_payload(
        body=body,
        customer_key=f"client-live-{i}",
        customer_label=CUSTOMER_VALUES[i % 2],
        kst_day="2025-12-01",
        revision=i + 1,
        state=state,
        proposal_digest=_hex(f"prop-{run}-{surface}-{i}", 64),
        sessions=[_hex(f"button-{run}-{surface}-{i}-{k}", 24) for k in range(n)],
    )
    callback = f"an1:{_hex(f'sess-{run}-{surface}-{i}', 24)}:create"
    return coord.present_adaptive(payload, callback_data=callback, surface=surface)


def _dual(coord: KoreanExpressionCoordinator, i: int, run: str) -> PresentationCandidate:
    body = format_dual_body(
        goal="린매스업",
        head=(
            f"{CUSTOMER_VALUES[i % 2]} · 2025-12-01",
            "최근 7일 평균 체중 73.1kg · 평균 섭취 2,240kcal",
        ),
        decision=DUAL_DECISION,
        recommendations=("하루 탄수화물 20g 줄이기",),
        reasons=_REASON_SETS[i % len(_REASON_SETS)],
    )
    return _adaptive(coord, DUAL_SURFACE, body, i, run)


def _physique(coord: KoreanExpressionCoordinator, i: int, run: str) -> PresentationCandidate:
    body = (
        f"{CUSTOMER_VALUES[i % 2]} · 12월 1일 · D+{10 + i}\n결정: 탄수화물 20g 감량\n"
        "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n목표: 하루 2,240kcal\n\n"
        "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
    )
    return _adaptive(coord, PHYSIQUE_SURFACE, body, i, run)


@dataclass(frozen=True)
class SurfaceCase:
    """One row: a surface, its config switch, and how to present its i-th
    synthetic artifact (distinct artifact key, varied typed IDs where the surface
    has a choice)."""

    surface: str
    switch: str
    present: Callable[[KoreanExpressionCoordinator, int, str], PresentationCandidate]


CASES: Final[tuple[SurfaceCase, ...]] = (
    SurfaceCase("daily.v1", "daily", _daily),
    SurfaceCase("weekly.v1", "weekly", _weekly),
    SurfaceCase("adaptive.dualcoachtest.card.v1", "adaptive_operator", _dual),
    SurfaceCase("adaptive.physique.card.v1", "adaptive_operator", _physique),
)

# Only a surface with something to style is called; the others are said, never
# counted (kexpr promotion-report says the same).
PROOF_CASES: Final[tuple[SurfaceCase, ...]] = tuple(
    c for c in CASES if surface_styleable(c.surface)
)
NOTHING_TO_STYLE: Final[tuple[str, ...]] = tuple(
    c.surface for c in CASES if not surface_styleable(c.surface)
)


# ------------------------------------------------------------------ content checks

_ENUMISH: Final = re.compile(r"[a-z0-9_.\-]{1,64}")
_HANGUL: Final = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")


def content_free(
    texts: Iterable[str], *, secrets: Iterable[str] = (), hangul_ok: bool = False
) -> bool:
    """No customer value, no secret, and (unless allowed) no Hangul at all."""
    needles = [*CUSTOMER_VALUES, *(s for s in secrets if s)]
    for text in texts:
        if any(n in text for n in needles):
            return False
        if not hangul_ok and _HANGUL.search(text):
            return False
    return True


def telemetry_content_free(events: Iterable[Mapping[str, object]]) -> bool:
    fields = {"event", "contract_version", "surface", "mode", "outcome", "latency_bucket"}
    return all(
        set(e) == fields and all(isinstance(v, str) and _ENUMISH.fullmatch(v) for v in e.values())
        for e in events
    )


# ------------------------------------------------------------------ the run


@dataclass
class ProofRun:
    summary: dict[str, Any]
    gateway_results: dict[str, Any]
    journal_rows: list[dict[str, Any]]

    @property
    def passed(self) -> bool:
        return bool(self.summary["passed"])


def _journal_rows(root: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for seg in sorted((root / "outcomes").glob("*.jsonl")):
        rows += [json.loads(line) for line in seg.read_text("utf-8").splitlines()]
    return rows


def _kexpr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", *args],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run_proof(
    data_root: Path,
    out_dir: Path,
    *,
    key: str,
    mode: str,
    https_proxy: str | None = None,
    ssl_cert_file: str | None = None,
    cases: Iterable[SurfaceCase] = PROOF_CASES,
    count: int = COUNT,
    wire: Callable[[], list[bytes]] | None = None,
) -> ProofRun:
    """Run the proof end to end and write ``out_dir/proof-summary.json``.

    ``wire``: (rehearsal) the request bodies the fake API received, for the
    one-call-per-artifact and no-content checks. The live API offers no such view;
    there the journal is the record of calls.
    """
    cases = tuple(cases)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC)
    sup_env = {**CLEAN_ENV, "OPENAI_API_KEY": key}
    cmd = [sys.executable, "-m", "kexpr.ops.cli", "supervise", "--data-root", str(data_root)]
    if https_proxy:
        cmd += ["--https-proxy", https_proxy]
    if ssl_cert_file:
        cmd += ["--ssl-cert-file", ssl_cert_file]
    as_root = os.geteuid() == 0
    worker_log = out_dir / "worker.log"
    with worker_log.open("wb") as log:
        sup = subprocess.Popen(
            cmd,
            env=sup_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            group=NOGROUP if as_root else None,
        )
    gateway: subprocess.Popen[str] | None = None
    audit: dict[str, Any] | str = "not_run"
    try:
        from kexpr.spool.layout import DataRoot
        from kexpr.worker.daemon import wait_ready

        if not wait_ready(DataRoot(data_root), 60.0):
            raise AssertionError("worker did not become ready")
        worker_pid = int(json.loads((data_root / "worker.status.json").read_bytes())["pid"])
        results_path = out_dir / "gateway-results.json"
        gateway = subprocess.Popen(
            [
                sys.executable,
                str(HERE / "shadow_gateway.py"),
                "--data-root",
                str(data_root),
                "--out",
                str(results_path),
                "--count",
                str(count),
                "--surfaces",
                ",".join(c.surface for c in cases),
            ],
            env=dict(CLEAN_ENV),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert gateway.stdout is not None and gateway.stdin is not None
        line = gateway.stdout.readline()
        if line.strip() != "READY":
            raise AssertionError("gateway process failed before presenting")
        # Both processes alive: the key is in the worker only.
        worker_args = ["--worker-pid", str(worker_pid)] if as_root else []
        out = _kexpr(
            "audit",
            "--json",
            "--gateway-pid",
            str(gateway.pid),
            *worker_args,
            "--data-root",
            str(data_root),
        )
        audit = json.loads(out.stdout)
        gateway.stdin.close()
        gateway.wait(30)
        results = json.loads(results_path.read_text("utf-8"))
        expected_rows = 2 * count * len(cases)
        end = time.monotonic() + 30
        while len(_journal_rows(data_root)) < expected_rows and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        if gateway is not None and gateway.poll() is None:
            gateway.kill()
            gateway.wait()
        if gateway is not None and gateway.stdout is not None:
            gateway.stdout.close()
        sup.send_signal(signal.SIGTERM)
        try:
            sup.wait(30)
        except subprocess.TimeoutExpired:
            sup.kill()
            sup.wait()
    finished = dt.datetime.now(dt.UTC)
    rows = _journal_rows(data_root)
    from kexpr.ops.readers import verify_journal
    from kexpr.spool.layout import DataRoot as _DataRoot

    verified = verify_journal(_DataRoot(data_root)).ok
    from kexpr.ops.status_cli import call_figures

    try:
        # The stopped worker's last status: written after its calls ended.
        status: Mapping[str, Any] = json.loads((data_root / "worker.status.json").read_bytes())
    except (OSError, ValueError):
        status = {}
    summary = summarize(
        cases,
        count,
        results,
        rows,
        audit,
        worker_log=worker_log.read_text("utf-8", "replace"),
        key=key,
        mode=mode,
        started=started,
        finished=finished,
        journal_verified=verified,
        wire=wire() if wire is not None else None,
        figures=call_figures(status) if isinstance(status, dict) else {},
        rehearsal=rehearsal_evidence(data_root, status),
    )
    (out_dir / "proof-summary.json").write_text(
        json.dumps(summary, indent=2, sort_keys=True) + "\n"
    )
    return ProofRun(summary, results, rows)


def rehearsal_evidence(data_root: Path, status: Mapping[str, Any]) -> bool:
    """Was this run's evidence a rehearsal's (the built-in model, not the API)? A
    rehearsal root (``rehearsal.marker``) or a worker that said so. Never counted:
    the proof fails, and says so in one line."""
    from kexpr.spool.layout import DataRoot
    from kexpr.spool.rehearsal import is_rehearsal_root

    found = is_rehearsal_root(DataRoot(data_root)) or status.get("rehearsal") is True
    if found:
        print(
            "live proof: rehearsal data root: rehearsal evidence is never counted",
            file=sys.stderr,
        )
    return found


def _audit_reasons(audit: Mapping[str, Any]) -> list[str]:
    reasons = []
    for c in audit.get("checks", []):
        if c.get("unusable"):
            reasons.append(f"{c.get('check')}: unusable {c['unusable']}")
        reasons += [f"{c.get('check')}: {f.get('finding')}" for f in c.get("findings", [])]
    return sorted(reasons)


def summarize(
    cases: tuple[SurfaceCase, ...],
    count: int,
    results: Mapping[str, Any],
    rows: list[dict[str, Any]],
    audit: Mapping[str, Any] | str,
    *,
    worker_log: str,
    key: str,
    mode: str,
    started: dt.datetime,
    finished: dt.datetime,
    journal_verified: bool,
    wire: list[bytes] | None,
    figures: Mapping[str, Mapping[str, Any]] | None = None,
    rehearsal: bool = False,
) -> dict[str, Any]:
    """The proof summary: counts, enums and booleans only (the margin's bucket
    edges and p95 upper edges are the product's constants)."""
    from kexpr.worker.histograms import CALL_BUDGET_S, edges_json

    figures = figures or {}
    surfaces: dict[str, Any] = {}
    for case in cases:
        cands = [c for c in results["candidates"] if c["surface"] == case.surface]
        terminal = [
            r["outcome"] for r in rows if r["surface"] == case.surface and r["state"] == "finalized"
        ]
        starts = [
            r for r in rows if r["surface"] == case.surface and r["state"] == "attempt_started"
        ]
        others: dict[str, int] = {}
        for o in [*terminal, *(c["outcome"] for c in cands)]:
            if o != "shadow_selected":
                others[o] = others.get(o, 0) + 1
        surfaces[case.surface] = {
            "capsules": len({c["artifact_key"] for c in cands if c["artifact_key"]}),
            "attempts": len(starts),
            "shadow_selected": sum(1 for o in terminal if o == "shadow_selected"),
            "candidates_shadow_selected": sum(
                1 for c in cands if c["outcome"] == "shadow_selected"
            ),
            "other_outcomes": dict(sorted(others.items())),
            "modes": sorted({r["mode"] for r in starts}),
            "margin": _margin(figures.get(case.surface)),
        }
    logs = [f"{r['logger']} {r['message']}" for r in results["log_records"]]
    summary: dict[str, Any] = {
        "schema": "kexpr-shadow-proof-v1",
        "mode": mode,
        "started_at_utc": started.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "finished_at_utc": finished.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "within_24h": finished - started < PROOF_WINDOW,
        "call_budget_s": CALL_BUDGET_S,
        "histogram_edges": edges_json(),
        "capsules_per_surface": count,
        "surfaces": surfaces,
        # Never presented, never a failure, never passed (design §6.2).
        "nothing_to_style": {
            surface: {"gate": NOTHING_TO_STYLE_WORDS, "reason": NOTHING_TO_STYLE_REASON}
            for surface in NOTHING_TO_STYLE
        },
        "host_calls": len(results["host_calls"]),
        "telemetry_events": len(results["telemetry"]),
        "telemetry_content_free": telemetry_content_free(results["telemetry"]),
        "log_records": len(logs),
        "gateway_logs_content_free": content_free(logs, secrets=[key]),
        "worker_log_content_free": content_free([worker_log], secrets=[key]),
        "gateway_environment_had_key": results["gateway_environment_had_key"],
        "gateway_imported_openai": results["gateway_imported_openai"],
        "journal_verified": journal_verified,
        # A rehearsal's evidence (kexpr.spool.rehearsal) never counts.
        "rehearsal_root": rehearsal,
        "audit": audit if isinstance(audit, str) else audit.get("verdict"),
        "audit_worker_checked": not isinstance(audit, str)
        and any(c.get("check") == "worker_process" for c in audit.get("checks", [])),
        # Why the audit was not clean, as its enums (never a detail): a failed proof
        # says which check and which reason.
        "audit_reasons": [] if isinstance(audit, str) else _audit_reasons(audit),
    }
    if wire is not None:
        keys = [_artifact_key(b) for b in wire]
        summary["wire_requests"] = len(wire)
        summary["wire_max_requests_per_artifact"] = max((keys.count(k) for k in keys), default=0)
        summary["wire_content_free"] = content_free(
            [b.decode("utf-8", "replace") for b in wire], hangul_ok=True
        )
    checks = [
        summary["rehearsal_root"] is False,
        summary["within_24h"],
        summary["journal_verified"],
        summary["host_calls"] == 0,
        summary["telemetry_events"] == count * len(cases),
        summary["telemetry_content_free"],
        summary["gateway_logs_content_free"],
        summary["worker_log_content_free"],
        summary["gateway_environment_had_key"] is False,
        summary["gateway_imported_openai"] is False,
        summary["audit"] == "clean",
        *(
            s["capsules"] == count
            and s["attempts"] == count
            and s["shadow_selected"] == count
            and s["candidates_shadow_selected"] == count
            and not s["other_outcomes"]
            and s["modes"] == ["shadow"]
            # The worker measured every call: the histograms are the proof's own.
            and s["margin"]["calls_measured"] == count
            for s in surfaces.values()
        ),
    ]
    if wire is not None:
        checks += [
            summary["wire_requests"] == count * len(cases),
            summary["wire_max_requests_per_artifact"] == 1,
            summary["wire_content_free"],
        ]
    summary["passed"] = all(checks)
    return summary


def _margin(figures: Mapping[str, Any] | None) -> dict[str, Any]:
    """One surface's margin in the summary; all None when the worker's status had
    no valid figures for it (then ``calls_measured`` fails the proof)."""
    keys = (
        "calls_measured",
        "failures",
        "tokens_absent",
        "call_seconds",
        "completion_tokens",
        "p95_call_s",
        "p95_completion_tokens",
        "call_margin",
    )
    if figures is None:
        return dict.fromkeys(keys)
    return {
        "calls_measured": figures["calls"],
        "failures": dict(figures["failures"]),
        "tokens_absent": figures["tokens_absent"],
        "call_seconds": list(figures["call_seconds"]),
        "completion_tokens": list(figures["completion_tokens"]),
        "p95_call_s": figures["p95_call_s"],
        "p95_completion_tokens": figures["p95_completion_tokens"],
        "call_margin": figures["margin"],
    }


def _artifact_key(body: bytes) -> str:
    try:
        messages = json.loads(body)["messages"]
        capsule = json.loads(next(m["content"] for m in reversed(messages) if m["role"] == "user"))
        return str(capsule["artifact_key"])
    except (ValueError, KeyError, StopIteration, TypeError):
        return ""

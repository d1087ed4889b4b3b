"""The main job (``make run`` / ``kexpr run``).

Three processes, as in production:

- this launcher (ops) starts ``kexpr supervise`` with an explicit environment that
  carries ``OPENAI_API_KEY`` if the operator set one, and nothing else secret;
- the supervisor starts the worker (the only process holding the key);
- a *gateway* process (``python -m kexpr.ops.demo``) started with an explicit
  environment WITHOUT the key imports `gateway_shim`, presents sample artifacts
  of all four surfaces (daily complete/partial, a weekly report whose goal range
  is missing, a dualcoachtest card with two review reasons, a physique card) in
  enabled mode, every surface on (the terminal is its publication: each selected
  body is printed, then reported ``selected``), and prints a table. Only the
  weekly report has a slot to ask (the fit table, design §6.2): the others are
  the host's text with the outcome ``nothing_to_style``, no request.

Who answers:

- with ``OPENAI_API_KEY``: the real model (one call per sample);
- without a key (the default on a fresh machine): a *rehearsal* — the real
  worker against the built-in model (``kexpr supervise --rehearsal``; no key,
  no network), on its own data root ``<data-root>-rehearsal``, which the
  rehearsal marks (``rehearsal.marker``: nothing it journals is ever counted);
  at the budget's fastest published pace (110 tokens/s after 0.3 s) so that
  every sample's answer arrives; ``--tokens-per-second``/``--first-token-seconds``
  choose another;
- with ``--no-rehearsal`` and no key: nobody; every row is canonical with
  ``credential_unavailable``, and the gateway process then replays hand-written
  example answers through the shim (`kexpr.ops.replay`, labelled "example,
  replayed", never presented as live).

When a model answered, the table shows the selected text of the first slot with
the slot text between ⟦ and ⟧, its lines joined by `LINE_JOIN` (the weekly
interpretation is two lines, and its style word stands before the second) (`kexpr.ops.replay.MARK_OPEN`/``MARK_CLOSE``;
every byte outside them is the host's, locked; the samples never contain those
two characters). The samples are the demo's own synthetic bodies, nothing else.
A legend explains the outcome column; its numbers (the call's timeout, the
request's whole wait) come from the config block and `kexpr.spool.lifecycle`,
never from a literal.
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

from kexpr.spool.contract.budget import FASTEST_TOKENS_PER_S, FIRST_TOKEN_S
from kexpr.spool.lifecycle import MAX_WAIT

if TYPE_CHECKING:
    from gateway_shim import KoreanExpressionCoordinator, PresentationCandidate
    from kexpr.spool.layout import DataRoot

GATEWAY_ENV: Final = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
READY_TIMEOUT_S: Final = 20.0
REPORTS_TIMEOUT_S: Final = 5.0
# `kexpr run` rehearses at the budget's fastest published pace
# (kexpr.spool.contract.budget), so that every sample's answer arrives and its words
# show; `kexpr supervise --rehearsal` defaults to the median (kexpr.spool.rehearsal).
REHEARSAL_TOKENS_PER_S: Final = float(FASTEST_TOKENS_PER_S)
REHEARSAL_FIRST_TOKEN_S: Final = FIRST_TOKEN_S
REHEARSAL_SUFFIX: Final = "-rehearsal"
# Between the lines of a slot of several lines, in the table's one-line excerpt.
LINE_JOIN: Final = " / "


def cli(argv: list[str]) -> int:
    import argparse

    from kexpr.ops.argtypes import add_worker_options
    from kexpr.spool.ranges import float_range
    from kexpr.spool.rehearsal import FIRST_TOKEN_S_RANGE, TOKENS_PER_S_RANGE

    p = argparse.ArgumentParser(prog="kexpr run")
    add_worker_options(p)
    p.add_argument(
        "--no-rehearsal",
        action="store_true",
        help="without a key, make no call at all (credential_unavailable) and replay examples",
    )
    p.add_argument(
        "--tokens-per-second",
        type=float_range(*TOKENS_PER_S_RANGE),
        default=REHEARSAL_TOKENS_PER_S,
        help=f"the rehearsal model's rate (default {REHEARSAL_TOKENS_PER_S:g})",
    )
    p.add_argument(
        "--first-token-seconds",
        type=float_range(*FIRST_TOKEN_S_RANGE),
        default=REHEARSAL_FIRST_TOKEN_S,
        help=f"the rehearsal model's first-token delay (default {REHEARSAL_FIRST_TOKEN_S:g})",
    )
    a = p.parse_args(argv)
    from kexpr.ops.inputs import refuse_unusable_cert_file

    if (code := refuse_unusable_cert_file("kexpr run", a.ssl_cert_file)) is not None:
        return code
    rehearse = (
        "OPENAI_API_KEY" not in os.environ
        and not a.no_rehearsal
        and not a.https_proxy
        and not a.ssl_cert_file
    )
    return run_main_job(
        a.data_root,
        https_proxy=a.https_proxy,
        ssl_cert_file=a.ssl_cert_file,
        rehearsal=(a.tokens_per_second, a.first_token_seconds) if rehearse else None,
        spend=(a.max_calls_per_hour, a.max_calls_per_day),
    )


def rehearsal_root(data_root: Path) -> Path:
    """Where ``kexpr run`` rehearses: beside the data root, never in it (a root
    with real rows is refused by a rehearsal, and a rehearsal root by a real worker)."""
    return data_root.parent / (data_root.name + REHEARSAL_SUFFIX)


def run_main_job(
    data_root: Path,
    *,
    https_proxy: str | None = None,
    ssl_cert_file: str | None = None,
    rehearsal: tuple[float, float] | None = None,
    spend: tuple[int, int] | None = None,
) -> int:
    """``rehearsal``: (tokens per second, first-token seconds) of the built-in
    model, on `rehearsal_root`; None: the worker as configured (the key if set).
    ``spend``: the worker's (per hour, per day) caps; None: its defaults."""
    from kexpr.spool.layout import DataRoot
    from kexpr.worker.daemon import wait_ready

    if rehearsal is not None:
        # The given root is not used, but an unsafe one is still refused as such.
        if os.path.lexists(data_root):
            from kexpr.spool.fsio import check_tree

            try:
                check_tree(DataRoot(data_root).root, ())
            except OSError as e:
                return _refuse_unsafe_root(e)
        data_root = rehearsal_root(data_root)
    # The worker's path rules, as `kexpr supervise` applies them: the path as
    # given (never resolve()-d), no symlink at any component.
    root = DataRoot(data_root)
    try:
        root.ensure()
    except OSError as e:
        return _refuse_unsafe_root(e)
    try:
        root.status_file.unlink()
    except FileNotFoundError:
        pass
    sup_cmd = [sys.executable, "-m", "kexpr.ops.cli", "supervise", "--data-root", str(root.root)]
    if https_proxy:
        sup_cmd += ["--https-proxy", https_proxy]
    if ssl_cert_file:
        sup_cmd += ["--ssl-cert-file", ssl_cert_file]
    if spend is not None:
        sup_cmd += ["--max-calls-per-hour", str(spend[0]), "--max-calls-per-day", str(spend[1])]
    sup_env = dict(GATEWAY_ENV)
    gw_cmd = [sys.executable, "-m", "kexpr.ops.demo", "--data-root", str(root.root)]
    if rehearsal is not None:
        # The key is never passed to a rehearsal (the supervisor would refuse it).
        rate, first = rehearsal
        sup_cmd += [
            "--rehearsal",
            "--tokens-per-second",
            repr(rate),
            "--first-token-seconds",
            repr(first),
        ]
        gw_cmd += ["--rehearsal", f"{rate:g} tokens/s after {first:g} s"]
        print(
            f"kexpr run: rehearsal (no OPENAI_API_KEY): the real worker and the built-in "
            f"model at {rate:g} tokens/s after {first:g} s, no network; data root "
            f"{root.root} (marked rehearsal: never counted as evidence)",
            flush=True,
        )
    elif "OPENAI_API_KEY" in os.environ:
        sup_env["OPENAI_API_KEY"] = os.environ["OPENAI_API_KEY"]
    sup = subprocess.Popen(sup_cmd, env=sup_env, stdin=subprocess.DEVNULL)
    try:
        if not wait_ready(root, READY_TIMEOUT_S):
            print("kexpr run: worker did not become ready", file=sys.stderr)
            return 1
        gw = subprocess.run(gw_cmd, env=dict(GATEWAY_ENV), stdin=subprocess.DEVNULL, check=False)
        _await_reports(root)
        return gw.returncode
    finally:
        sup.send_signal(signal.SIGTERM)
        try:
            sup.wait(15)
        except subprocess.TimeoutExpired:
            sup.kill()
            sup.wait()
        print_style_words(root)


def print_style_words(root: DataRoot) -> None:
    """What the model wrote, content-free: the `kexpr status` style lines, from the
    status file the worker wrote as it stopped (words of the lexicon only)."""
    from kexpr.ops._status_read import collect
    from kexpr.ops._status_render import render_style

    report = collect(root)
    if report.worker is None:
        return
    print("\nstyle words the accepted answers used, per slot (as `kexpr status` shows them):")
    for line in render_style(report.worker.fields["style_words_by_slot"]):
        print(line)
    sys.stdout.flush()


def _refuse_unsafe_root(e: OSError) -> int:
    """The one line and exit code of a data root the worker's path rules refuse:
    the `UnsafePath` reason, or the OS error's class (never its message)."""
    from kexpr.spool.fsio import UnsafePath
    from kexpr.worker.exitcodes import ExitCode

    reason = e.reason.value if isinstance(e, UnsafePath) else type(e).__name__
    print(f"kexpr run: unsafe_data_root: {reason}", file=sys.stderr)
    return int(ExitCode.UNSAFE_DATA_ROOT)


def _await_reports(root: DataRoot, timeout_s: float = REPORTS_TIMEOUT_S) -> None:
    """Let the worker journal the gateway's ``selected`` reports before it is
    stopped (an attempt left open would be terminalized by the next run)."""
    import time

    from kexpr.ops.readers import ReadRefused, verify_journal

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            check = verify_journal(root)
        except ReadRefused:
            return
        if not check.ok or all(r.outcome is not None for r in check.records):
            return
        time.sleep(0.05)


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


@dataclass(frozen=True)
class HostBodies:
    """The demo's daily and weekly bodies, exactly as the real host renders them
    (docs/host-formats.md): fixed title, labels, status and actions; synthetic data."""

    daily_complete: str
    daily_partial: str
    weekly: str


def host_bodies() -> HostBodies:
    from gateway_shim import WeeklyInterpretation, WeeklyJudgment, format_daily, format_weekly

    return HostBodies(
        daily_complete=format_daily(
            weight="72.4kg",
            intake="2,150kcal",
            macros="탄수화물 260g · 단백질 140g · 지방 70g",
            training="상체 45분 · RPE 7",
            sleep="7시간 · 수면 질 4/5",
            condition="3/5",
            digestion="정상",
            water="2L",
        ),
        daily_partial=format_daily(
            weight="72.1kg",
            intake="기록 없음",
            macros="탄수화물·단백질·지방: 기록 없음",
            training="하체 50분",
            sleep="6시간",
            condition="2/5",
            digestion="기록 없음",
        ),
        # The goal range missing (branch I2): the one message with a slot to ask.
        weekly=format_weekly(
            recent="72.40kg",
            prior="72.10kg",
            change="+0.42%",
            rate="85.71%",
            goal_range="기록 없음",
            interpretation=WeeklyInterpretation.GOAL_MISSING,
            judgment=WeeklyJudgment.RECORDS,
        ),
    )


def _samples() -> list[Sample]:
    """The four surfaces, with synthetic data: daily (complete and partial),
    weekly with the goal range missing, a dualcoachtest card with two review reasons, a physique card.
    Artifact inputs carry a fresh run token so each run is a new artifact."""
    from gateway_shim import (
        DUAL_SURFACE,
        PHYSIQUE_SURFACE,
        DailyFacts,
        card_payload,
        format_dual_body,
    )
    from gateway_shim.surfaces.card import expected_buttons

    run = secrets.token_hex(4)
    bodies = host_bodies()

    def daily(label: str, body: str, *, is_complete: bool, n: int) -> Sample:
        return Sample(
            "daily.v1",
            label,
            lambda c: c.present_daily(
                body, facts=DailyFacts(complete=is_complete), finalized_event_id=f"demo-{run}-{n}"
            ),
            lambda text: text.split("\n\n")[2],
        )

    # The adaptive cards in the host's real payload shape (docs/host-formats-adaptive.md):
    # header and progress lines, the state's buttons, the session in the pressed
    # button's callback data. The dual decision and reasons are the host's public
    # texts; the other lines are synthetic.
    def adaptive(
        surface: str, label: str, body: str, n: int, excerpt: Callable[[str], str]
    ) -> Sample:
        sessions = [secrets.token_hex(12) for _ in expected_buttons("proposed")]
        payload = card_payload(
            body=body,
            customer_key=f"demo-{run}-{n}",
            customer_label="데모 고객",
            kst_day="2025-11-30",
            revision=1,
            state="proposed",
            proposal_digest=secrets.token_hex(32),
            sessions=sessions,
        )
        callback = f"an1:{secrets.token_hex(12)}:create"
        return Sample(
            surface,
            label,
            lambda c: c.present_adaptive(payload, callback_data=callback, surface=surface),
            excerpt,
        )

    return [
        daily("daily complete", bodies.daily_complete, is_complete=True, n=1),
        daily("daily partial", bodies.daily_partial, is_complete=False, n=2),
        Sample(
            "weekly.v1",
            "weekly, goal missing",
            lambda c: c.present_weekly(
                bodies.weekly,
                explicit_fields=("average_weight_kg", "prior_average_weight_kg"),
                schedule_key=f"demo-{run}-weekly",
                kind="weekly_report",
                kst_day="2025-11-30",
            ),
            lambda body: body.split("\n\n")[2].split("\n")[0],
        ),
        adaptive(
            DUAL_SURFACE,
            "dual card, 2 reasons",
            format_dual_body(
                goal="린매스업",
                head=("데모 고객 · 2025-11-30", "최근 7일 평균 체중 72.4kg"),
                decision="순응도 근거 충돌로 조정 보류",
                recommendations=("칼로리와 매크로를 변경하지 않음",),
                reasons=(
                    "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다.",
                    "최신 확정 기록을 기준으로 다시 계산해야 합니다.",
                ),
            ),
            1,
            _line_starting("현재 판단: "),
        ),
        adaptive(
            PHYSIQUE_SURFACE,
            "physique card",
            "데모 고객 · 2025-11-30 · D+12\n결정: 탄수화물 20g 감량\n"
            "근거: 최근 7일 평균 체중 증가가 목표보다 빠름\n목표: 하루 2,300kcal\n\n"
            "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음",
            2,
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
        return "  ".join(
            c + " " * (w - display_width(c)) for c, w in zip(r, widths, strict=True)
        ).rstrip()

    print(fmt(cells[0]))
    print(fmt(tuple("-" * w for w in widths)))
    for r in cells[1:]:
        print(fmt(r))


def first_slot_marked(cand: PresentationCandidate) -> str:
    """The selected body's first slot text between the marks, its lines joined
    by `LINE_JOIN`."""
    from kexpr.ops.replay import MARK_CLOSE, MARK_OPEN

    units = cand.body.encode("utf-16-le")
    position = 0
    for start, end in (*cand.locked_spans_utf16, (len(units) // 2, len(units) // 2)):
        if start > position:
            text = units[2 * position : 2 * start].decode("utf-16-le")
            return MARK_OPEN + LINE_JOIN.join(text.split("\n")) + MARK_CLOSE
        position = end
    return MARK_OPEN + MARK_CLOSE


def gateway_main(data_root: Path, *, rehearsal: str | None = None) -> int:
    """The gateway side of the demo. Runs in a process started without the key.
    ``rehearsal``: the built-in model's pace, for the legend (None: not a rehearsal)."""
    from gateway_shim import (
        CandidateStatus,
        KoreanExpressionConfig,
        KoreanExpressionCoordinator,
        Mode,
        Outcome,
        exact_block,
    )

    block = exact_block(Mode.ENABLED, daily=True, weekly=True, adaptive_operator=True)
    config = KoreanExpressionConfig.from_block(block)
    coord = KoreanExpressionCoordinator(config, data_root)
    rows = []
    selected: list[PresentationCandidate] = []
    try:
        for sample in _samples():
            cand = sample.present(coord)
            if cand.status is CandidateStatus.SELECTED:
                excerpt = first_slot_marked(cand)
                selected.append(cand)
            else:
                excerpt = sample.excerpt(cand.body)
                excerpt = excerpt if len(excerpt) <= 40 else excerpt[:39] + "…"
            rows.append(
                (cand.surface_version, sample.label, cand.outcome.value, cand.status.value, excerpt)
            )
        headers = ("surface", "sample", "outcome", "status", "body excerpt (first slot)")
        print_table(headers, rows)
        # Printed: the terminal is this demo's publication, so each is reported.
        for cand in selected:
            coord.report(cand, Outcome.SELECTED)
    finally:
        coord.close()
    timeout = block["timeout_seconds"]
    assert isinstance(timeout, int)
    print_legend((row[2] for row in rows), timeout_s=timeout, rehearsal=rehearsal)
    if any(row[2] == "credential_unavailable" for row in rows):
        # No live call was made: show what the product does with example answers.
        from kexpr.ops.replay import print_replayed, replay

        first = {s.surface: s for s in reversed(_samples())}  # one sample per surface
        print_replayed(replay((s.surface, s.label, s.present) for s in reversed(first.values())))
    return 0


def outcome_legend(*, timeout_s: float, wait_s: float) -> dict[str, str]:
    """What the outcome column means (every CandidateOutcome, `kexpr.spool.outcomes`;
    docs/design.md §4, §8). ``timeout_s``: the config block's ``timeout_seconds``
    (the call's budget); ``wait_s``: the request's whole wait (`MAX_WAIT`)."""
    return {
        "shadow_selected": "the model's expression was valid and rendered; shadow mode publishes the canonical body",
        "accepted": "enabled mode: the styled body is published, then the host reports the result",
        "credential_unavailable": "the worker has no OPENAI_API_KEY: no request was made, canonical body",
        "disabled": "the config block or this surface is off: canonical, nothing written",
        "ineligible": "this body has no slot kexpr may style (or is not the host's format): canonical, no call",
        "nothing_to_style": "no style word reads at least as well as the host's own text here: the host's text, no request",
        "timeout": f"no valid answer within the call's {timeout_s:g} s (timeout_seconds; "
        f"the request waits {wait_s:g} s in all): canonical",
        "provider_error": "the provider call failed (never retried): canonical",
        "invalid_response": "the model's answer was not one well-typed document: canonical",
        "validation_rejected": "the answer broke a contract rule, or a locked byte would change: canonical",
        "in_flight": "the same artifact is being answered elsewhere: publish nothing now",
        "already_attempted": "this artifact had its one attempt already: canonical",
        "claim_expired_canonical": "the attempt expired (e.g. a worker restart): canonical",
        "journal_unavailable": "the worker's journal is quarantined: canonical, no call",
        "spool_unavailable": "the data root could not be used: canonical",
        "closed": "the coordinator was closed (the host's shutdown): canonical, nothing started",
        "worker_unavailable": "no worker is serving the data root (its heartbeat): canonical at once, no request",
        "identity_mismatch": "identity.key is missing or not the recorded key beside a journal with rows: canonical at once, no request, no new key",
        "invalid_request": "the worker refused the request file: canonical",
        "clock_skew": "the request's timestamps were outside the clock-skew bound: canonical, no call",
        "no_time_to_answer": f"too little of the request's {wait_s:g} s was left for even the "
        "shortest answer: canonical, no call",
        "answer_unpublishable": "the data root had no room for the answer: canonical, no call",
        "provider_too_slow": "an older worker's word (it refused a call for the provider's measured speed): canonical, no call",
        "provider_cooling_down": "the provider failed several calls in a row; the worker pauses calls: canonical, no call",
        "spend_cap_reached": "the worker's cap on paid calls this hour or this UTC day is reached: canonical, no call",
    }


def _config_timeout() -> int:
    from gateway_shim import exact_block

    timeout = exact_block()["timeout_seconds"]
    assert isinstance(timeout, int)
    return timeout


OUTCOME_LEGEND: Final = outcome_legend(timeout_s=_config_timeout(), wait_s=MAX_WAIT.total_seconds())


def print_legend(
    outcomes: Iterable[str], *, timeout_s: float | None = None, rehearsal: str | None = None
) -> None:
    """One line per outcome shown, what marks the model's words, who answered,
    and how to make the live call when it was not made."""
    from kexpr.ops.replay import MARK_CLOSE, MARK_OPEN

    legend = (
        OUTCOME_LEGEND
        if timeout_s is None
        else outcome_legend(timeout_s=timeout_s, wait_s=MAX_WAIT.total_seconds())
    )
    shown = list(dict.fromkeys(outcomes))
    print()
    print("outcome:")
    for outcome in shown:
        print(f"  {outcome:<24} {legend.get(outcome, '')}".rstrip())
    if "accepted" in shown:
        print()
        print(
            f"{MARK_OPEN}…{MARK_CLOSE} marks the slot text: the model's composition (its style "
            "words around the host's own sentences; a slot's lines joined by"
            f" '{LINE_JOIN.strip()}'); every other byte is the host's, locked"
        )
    if rehearsal is not None:
        print(
            f"rehearsal: the built-in model answered ({rehearsal}; no key, no network): "
            "`kexpr supervise --rehearsal`; nothing it journals is counted as evidence"
        )
    if "credential_unavailable" in shown or rehearsal is not None:
        print()
        print("live call: `OPENAI_API_KEY=sk-... make run` (only the worker receives the key)")


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="python -m kexpr.ops.demo")
    p.add_argument("--data-root", type=Path, required=True)
    p.add_argument("--rehearsal", help="the rehearsal model's pace, for the legend")
    args = p.parse_args()
    raise SystemExit(gateway_main(args.data_root, rehearsal=args.rehearsal))

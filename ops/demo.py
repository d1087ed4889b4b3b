"""The main job (``make run`` / ``kexpr run``).

Three processes, as in production:

- this launcher (ops) starts ``kexpr supervise`` with an explicit environment that
  carries ``OPENAI_API_KEY`` if the operator set one, and nothing else secret;
- the supervisor starts the worker (the only process holding the key);
- a *gateway* process (``python -m ops.demo``) started with an explicit
  environment WITHOUT the key imports `gateway_shim`, presents sample artifacts
  on the embedded default (shadow mode, every surface on), and prints a table.

Without a key every row is canonical with ``credential_unavailable``; with a key
the worker makes the real call (shadow mode: canonical is what gets published).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

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


def _samples() -> list[tuple[str, str, object, str]]:
    """(label, canonical body, typed facts, finalized event id). Synthetic data."""
    from gateway_shim.surfaces.daily import DailyFacts, format_daily

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
    return [
        ("daily complete", complete, DailyFacts(complete=True), f"demo-{run}-1"),
        ("daily partial", partial, DailyFacts(complete=False), f"demo-{run}-2"),
    ]


def gateway_main(data_root: Path) -> int:
    """The gateway side of the demo. Runs in a process started without the key."""
    from gateway_shim import KoreanExpressionConfig, KoreanExpressionCoordinator, Mode, exact_block
    from gateway_shim.surfaces.daily import DailyFacts

    config = KoreanExpressionConfig.from_block(
        exact_block(Mode.SHADOW, daily=True, weekly=True, adaptive_operator=True)
    )
    coord = KoreanExpressionCoordinator(config, data_root)
    rows = []
    try:
        for label, body, facts, event_id in _samples():
            assert isinstance(facts, DailyFacts)
            cand = coord.present_daily(body, facts=facts, finalized_event_id=event_id)
            status_line = body.split("\n\n")[2]
            excerpt = status_line if len(status_line) <= 40 else status_line[:39] + "…"
            rows.append((cand.surface_version, label, cand.outcome.value, cand.status.value, excerpt))
    finally:
        coord.close()
    headers = ("surface", "sample", "outcome", "status", "body excerpt (status paragraph)")
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = "  ".join("{:<" + str(w) + "}" for w in widths)
    print(line.format(*headers))
    print(line.format(*("-" * w for w in widths)))
    for r in rows:
        print(line.format(*r))
    return 0


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(prog="python -m ops.demo")
    p.add_argument("--data-root", type=Path, required=True)
    raise SystemExit(gateway_main(p.parse_args().data_root))

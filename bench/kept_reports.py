"""Kept files at rest: the idle worker's CPU with 10,000 kept
reports in reports/ (a newer protocol version's: kept by design, never judged).

The real supervised worker (no key: an idle worker makes no call anyway) on a
fresh data root; the reports are planted, the worker is given a few ticks to read
them once, then its CPU (utime + stime from /proc) is measured over a window.
Target: < 1 % of a core (it was 29-34 % before each kept file was read once per
change). A figure, never asserted: this machine is shared.

``python bench/kept_reports.py [--quick]``; the LAST line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def main() -> int:
    p = argparse.ArgumentParser(prog="bench/kept_reports.py")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--files", type=int, default=10_000)
    a = p.parse_args()
    window_s = 10.0 if a.quick else 30.0
    with tempfile.TemporaryDirectory(prefix="kexpr-kept-") as tmp:
        os.chmod(tmp, 0o700)
        root = DataRoot(Path(tmp) / "data" / "korean-expression-v1")
        root.root.parent.mkdir(mode=0o700)
        root.ensure()
        for _ in range(a.files):
            aid = secrets.token_hex(16)
            body = {"attempt_id": aid, "outcome": "selected", "spool_version": "kexpr-spool-v9"}
            publish(root.tmp, root.reports / f"{aid}.json", json.dumps(body).encode())
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        cmd = [sys.executable, "-m", "kexpr.ops.cli", "supervise", "--data-root", str(root.root)]
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
        try:
            if not wait_ready(root, 60):
                raise SystemExit("worker did not become ready")
            pid = json.loads(root.status_file.read_bytes())["pid"]
            time.sleep(5.0)  # the first ticks read every kept file once; then idle
            c0, t0 = cpu_s(pid), time.monotonic()
            time.sleep(window_s)
            c1, t1 = cpu_s(pid), time.monotonic()
            status = json.loads(root.status_file.read_bytes())
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        left = len(list(root.reports.iterdir()))
    figures = {
        "kept_files": a.files,
        "kept_left": left,
        "window_s": window_s,
        "idle_cpu_percent_of_a_core": 100 * (c1 - c0) / (t1 - t0),
        "unknown_spool_version_faults": status["faults"].get("unknown_spool_version", 0),
    }
    print(
        f"idle worker, {a.files} kept reports: {figures['idle_cpu_percent_of_a_core']:.2f} % of a"
        f" core over {window_s:.0f} s (kept {left}, counted"
        f" {figures['unknown_spool_version_faults']})"
    )
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

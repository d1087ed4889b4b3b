"""``kexpr supervise``: run the worker as a child with an explicit minimal environment.

The worker's environment is *built*, never inherited (SPEC §9, §10): a process's
``/proc/PID/environ`` is its environment at ``execve``, so isolation means starting
each process with an explicit ``env=``. The worker gets:

- ``PATH``, ``LANG`` (fixed values),
- ``OPENAI_API_KEY`` — the only secret, and only if the supervisor has it,
- ``HTTPS_PROXY`` / ``SSL_CERT_FILE`` — only when the operator passes
  ``--https-proxy`` / ``--ssl-cert-file`` explicitly.

Nothing else: in particular no ``OPENAI_BASE_URL``/``OPENAI_ORG_ID``/``OPENAI_LOG``/
``OPENAI_CUSTOM_HEADERS``/``SSLKEYLOGFILE``, which the SDK or ssl would act on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from worker.exitcodes import ExitCode

KEY_VARIABLE: Final = "OPENAI_API_KEY"
BASE_ENV: Final[Mapping[str, str]] = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
BACKOFF_START_S: Final = 0.5
BACKOFF_MAX_S: Final = 30.0
HEALTHY_AFTER_S: Final = 60.0
STOP_GRACE_S: Final = 10.0
# Exit codes that a restart cannot fix: supervising stops with them.
FATAL_EXITS: Final = frozenset({int(ExitCode.HAZARDOUS_ENVIRONMENT), int(ExitCode.UNSAFE_DATA_ROOT)})


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    data_root: Path
    https_proxy: str | None = None
    ssl_cert_file: str | None = None


def worker_environment(spec: WorkerSpec, source: Mapping[str, str]) -> dict[str, str]:
    """The worker's whole environment, from an allow-list (SPEC §9)."""
    env = dict(BASE_ENV)
    key = source.get(KEY_VARIABLE)
    if key is not None:
        env[KEY_VARIABLE] = key
    if spec.https_proxy:
        env["HTTPS_PROXY"] = spec.https_proxy
    if spec.ssl_cert_file:
        env["SSL_CERT_FILE"] = spec.ssl_cert_file
    return env


def worker_command(spec: WorkerSpec) -> list[str]:
    return [sys.executable, "-m", "worker", "--data-root", str(spec.data_root.resolve())]


class Supervisor:
    def __init__(self, spec: WorkerSpec, source_env: Mapping[str, str]) -> None:
        self.spec = spec
        self._env = worker_environment(spec, source_env)
        self.stop = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            worker_command(self.spec),
            env=self._env,
            cwd="/",
            stdin=subprocess.DEVNULL,
            close_fds=True,
        )

    def run(self) -> int:
        backoff = BACKOFF_START_S
        code = 0
        while not self.stop.is_set():
            started = time.monotonic()
            self.child = self._start()
            while self.child.poll() is None:
                if self.stop.wait(0.2):
                    return self._terminate_child()
            code = self.child.returncode
            if code in FATAL_EXITS:
                print(f"kexpr supervise: worker exit {code}: not restarting", file=sys.stderr)
                return code
            if time.monotonic() - started > HEALTHY_AFTER_S:
                backoff = BACKOFF_START_S
            if self.stop.wait(backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            self.restarts += 1
        return code

    def _terminate_child(self) -> int:
        child = self.child
        if child is None or child.poll() is not None:
            return 0
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        return 0


def cli(argv: list[str]) -> int:
    import argparse

    from spool.layout import DEFAULT_DATA_ROOT

    p = argparse.ArgumentParser(prog="kexpr supervise")
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    p.add_argument("--https-proxy", help="egress proxy for the worker (operator-configured)")
    p.add_argument("--ssl-cert-file", help="CA bundle for the worker (operator-configured)")
    a = p.parse_args(argv)
    return supervise(WorkerSpec(a.data_root, a.https_proxy, a.ssl_cert_file))


def supervise(spec: WorkerSpec) -> int:
    sup = Supervisor(spec, os.environ)

    def on_signal(signum: int, frame: object) -> None:
        sup.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return sup.run()

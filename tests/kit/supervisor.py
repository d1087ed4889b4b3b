"""``kexpr supervise`` started as an operator starts it, for the tests and the
benches that need a real supervised worker: an explicit environment (PATH, LANG
and the key, nothing inherited), the egress proxy and its CA as operator flags,
and a wait until the worker says it is ready. Stopped with SIGTERM, killed only
if it has not exited after ``timeout`` seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

TEST_KEY = "sk-test-kexpr-0000"


class ExitedChild:
    """A worker (`kexpr.ops.supervisor.Child`) that has already exited with
    ``code``, for a `Supervisor` given ``spawn=``: never signalled, never killed."""

    _pids = iter(range(40000, 50000))

    def __init__(self, code: int) -> None:
        self.code = code
        self.pid = next(self._pids)

    def poll(self) -> int:
        return self.code

    def send_signal(self, sig: int) -> None:
        raise AssertionError("an exited child is never signalled")

    def wait(self, timeout: float | None = None) -> int:
        return self.code

    def kill(self) -> None:
        raise AssertionError("an exited child is never killed")


class Egress(Protocol):
    """Where the worker's calls go: the fake API's CONNECT proxy and its CA."""

    @property
    def proxy_url(self) -> str: ...
    @property
    def ca_file(self) -> Path: ...


@dataclass(frozen=True, slots=True)
class Proxy:
    """An `Egress` from its two values (a fake API run in its own process)."""

    proxy_url: str
    ca_file: Path


def operator_env(key: str | None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this PATH and LANG=C.UTF-8) and the key, when there is one."""
    env = dict(base or {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
    if key is not None:
        env["OPENAI_API_KEY"] = key
    return env


def start_supervisor(
    data_root: Path,
    *,
    fake: Egress | None = None,
    key: str | None = TEST_KEY,
    args: Sequence[str] = (),
    cli_args: Sequence[str] = (),
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    wait: bool = True,
    **popen: Any,
) -> subprocess.Popen[Any]:
    """``python -m kexpr.ops.cli [cli_args] supervise --data-root D [egress] [args]``
    (``cli_args``: the CLI's own options, ``-vv``; ``args``: supervise's). ``popen``:
    more of Popen's arguments (stdout, stderr, text, group); stdin is /dev/null.
    ``wait``: until the worker is ready (30 s), stopped and AssertionError if not."""
    cmd = [python, "-m", "kexpr.ops.cli", *cli_args, "supervise", "--data-root", str(data_root)]
    if fake is not None:
        cmd += ["--https-proxy", fake.proxy_url, "--ssl-cert-file", str(fake.ca_file)]
    cmd += args
    proc = subprocess.Popen(cmd, env=operator_env(key, env), stdin=subprocess.DEVNULL, **popen)
    if wait and not wait_ready(DataRoot(data_root), 30.0):
        stop_supervisor(proc)
        raise AssertionError("worker did not become ready")
    return proc


def stop_supervisor(proc: subprocess.Popen[Any], timeout: float = 20.0) -> int:
    """SIGTERM (the supervisor stops its worker), then its exit status; killed if it
    has not exited after ``timeout`` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


@contextmanager
def supervised(
    data_root: Path, *, stop_timeout: float = 20.0, **start: Any
) -> Iterator[subprocess.Popen[Any]]:
    """`start_supervisor` (its keywords) on a data root it sets up first, stopped on
    leaving the block."""
    DataRoot(data_root).ensure()
    proc = start_supervisor(data_root, **start)
    try:
        yield proc
    finally:
        stop_supervisor(proc, stop_timeout)

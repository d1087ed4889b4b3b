"""Entry point of the worker process (``kexpr worker`` / ``python -m worker``)."""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from spool.layout import DEFAULT_DATA_ROOT, DataRoot
from worker.environment import hazardous_environment
from worker.exitcodes import ExitCode

# worker.daemon (and with it the openai SDK) is imported only after the
# environment check: the SDK reads OPENAI_LOG at import time (SPEC §9).

PR_SET_DUMPABLE = 4


def _make_undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): same-UID processes cannot read our memory or
    /proc/PID/environ, which holds the key (SPEC §10). Linux only; best effort."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kexpr worker")
    parser.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    args = parser.parse_args(argv)
    _make_undumpable()
    hazards = hazardous_environment(os.environ)
    if hazards:
        # Enum names only; never values.
        print(
            "kexpr worker: refusing to start: hazardous environment: "
            + ",".join(sorted(h.value for h in hazards)),
            file=sys.stderr,
        )
        return int(ExitCode.HAZARDOUS_ENVIRONMENT)
    from worker.daemon import Worker

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    code = Worker(DataRoot(args.data_root)).run(stop)
    if code is not ExitCode.OK:
        print(f"kexpr worker: exit {code.name.lower()}", file=sys.stderr)
    return int(code)

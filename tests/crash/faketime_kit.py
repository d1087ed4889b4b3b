"""A real worker process under libfaketime, for the tests whose subject is a wall
clock that moves while the worker runs (or is wrong when it starts).

The worker's wall clock is read from a stamp file at every call
(``FAKETIME_TIMESTAMP_FILE``, ``FAKETIME_NO_CACHE=1``): the test sets an offset such
as ``+2d`` or ``-1h`` there (`set_offset`), and ``+0`` to put the clock right again. Its
monotonic clock is never faked (``FAKETIME_DONT_FAKE_MONOTONIC=1``), as on a host
whose wall clock is stepped. The worker is started directly (``kexpr worker``), not
by ``kexpr supervise``, which builds its worker's environment and so would drop
``LD_PRELOAD``. The tests skip where libfaketime is not installed (apt: faketime).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from kit.supervisor import TEST_KEY, Egress

LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu/faketime",
    "/usr/lib/aarch64-linux-gnu/faketime",
    "/usr/lib/faketime",
)
WORKER_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


# The multi-threaded build first: the worker reads its clock from several threads,
# and libfaketime.so.1 does not serialise them, so with the stamp file re-read at
# every call a read beside another thread's re-read can return the real time
# (measured here, libfaketime 0.9.10: 16 to 67 of ~120,000 reads by 8 threads under
# ``+2d``; with libfaketimeMT.so.1, none of ~470,000).
LIB_NAMES = ("libfaketimeMT.so.1", "libfaketime.so.1")


def libfaketime() -> str | None:
    """The path of libfaketime (its multi-threaded build where there is one), or
    None where it is not installed."""
    for d in LIB_DIRS:
        for name in LIB_NAMES:
            p = Path(d) / name
            if p.exists():
                return str(p)
    return None


def set_offset(stamp: Path, offset: str) -> None:
    """The faked clock's offset from the real one (``+2d``, ``-1h``, ``+0``), replaced
    whole (a rename over the stamp file): libfaketime never reads it half-written."""
    staging = stamp.with_name(f".{stamp.name}.new")
    staging.write_text(f"{offset}\n")
    os.replace(staging, stamp)


def faked_worker(
    data_root: Path, egress: Egress, lib: str, stamp: Path, args: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """A worker process whose wall clock is libfaketime's, read from ``stamp`` at every
    call (its monotonic clock untouched), calling the fake API through the proxy.
    ``args``: more of ``kexpr worker``'s options (the spend caps)."""
    env = {
        **WORKER_ENV,
        "OPENAI_API_KEY": TEST_KEY,
        "HTTPS_PROXY": egress.proxy_url,
        "SSL_CERT_FILE": str(egress.ca_file),
        "LD_PRELOAD": lib,
        "FAKETIME_TIMESTAMP_FILE": str(stamp),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kexpr.ops.cli",
            "worker",
            "--data-root",
            str(data_root),
            *args,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
    )


def stop_worker(worker: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited after ``timeout`` seconds."""
    worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(timeout)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()

"""The worker's exit codes (sysexits.h values). A light module: the supervisor
and the entry point read them without importing the SDK."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    # EX_UNAVAILABLE: httpx/httpcore outside the tested ranges (worker.dependencies)
    UNSUPPORTED_DEPENDENCY = 69
    NOT_UNDUMPABLE = 71  # EX_OSERR: prctl(PR_SET_DUMPABLE, 0) failed or did not hold
    ANOTHER_WORKER = 73  # EX_CANTCREAT: the worker lock is held by a live worker
    UNSAFE_DATA_ROOT = 74  # EX_IOERR: the data root is not a private directory of ours
    HAZARDOUS_ENVIRONMENT = 78  # EX_CONFIG: OPENAI_* other than the key, or SSLKEYLOGFILE

"""Entry point of the worker process (``kexpr worker`` / ``python -m kexpr.worker``).

Start-up order, each step a precondition of the next (design §9, §10):

1. Make the process non-dumpable and *verify* it (``PR_GET_DUMPABLE == 0``). The
   environment holds the key; a dumpable process lets every same-UID process read
   ``/proc/PID/environ`` and ``/proc/PID/mem``. Fail closed: if the kernel refuses,
   the worker exits `ExitCode.NOT_UNDUMPABLE` before anything reads the key.
   Then ask the kernel for SIGTERM when the parent (the supervisor) dies
   (``PR_SET_PDEATHSIG``, `die_with_parent`): a SIGKILLed supervisor must not
   leave an orphan worker holding ``worker.lock`` — the next supervisor's worker
   would refuse to start (exit 73) for as long as the orphan lived. The
   orphan stops gracefully, like any SIGTERM. A parent that died before the
   request (the process was already re-parented) means exit at once.
2. Refuse a hazardous environment (any ``OPENAI_*`` but the key, ``SSLKEYLOGFILE``)
   before the SDK is imported: the SDK reads ``OPENAI_LOG`` at import time.
   A rehearsal (``--rehearsal``, `kexpr.worker.rehearsal`) also refuses
   ``OPENAI_API_KEY`` itself and every proxy or CA variable: it reads no key. Then
   refuse httpx/httpcore outside the tested ranges (`kexpr.worker.dependencies`:
   one line, exit 69, never restarted), before either is imported: a rehearsal
   too (its model, `kexpr.worker.rehearsal`, imports both: its ``--tokens-per-second``
   / ``--first-token-seconds`` are read only after the check).
3. Fork the journal verifier (`kexpr.worker.preload`: the child verifies on the other
   core while this process imports the SDK; its result is re-checked, never
   trusted blindly).
4. Only then import the daemon (and with it ``openai``) and run until SIGTERM.
   SIGTERM (or SIGINT) is a graceful stop: no new claims; a call in flight
   finishes or hits its 4 s deadline; the terminal row is written
   (worker.daemon). SIGHUP, SIGUSR1 and SIGUSR2 are ignored (`IGNORED_SIGNALS`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kexpr.spool import log
from kexpr.spool.layout import DEFAULT_DATA_ROOT, DataRoot
from kexpr.spool.ranges import int_range
from kexpr.worker.dependencies import SUPPORTED, requirement, unsupported
from kexpr.worker.environment import hazardous_environment, rehearsal_hazards
from kexpr.worker.exitcodes import ExitCode
from kexpr.worker.preload import start as start_preload
from kexpr.worker.signalstop import SignalStop
from kexpr.worker.spend import CAP_RANGE, DEFAULT_PER_DAY, DEFAULT_PER_HOUR, SpendCaps

if TYPE_CHECKING:
    from kexpr.worker.rehearsal import Pace

# worker.daemon (and with it the openai SDK) is imported only after the
# environment check: the SDK reads OPENAI_LOG at import time (design §9).

PR_SET_PDEATHSIG: Final = 1
PR_GET_DUMPABLE: Final = 3
PR_SET_DUMPABLE: Final = 4
# As early as this process can observe it (``python -m kexpr.worker`` imports this
# module first): the parent that started us, for `die_with_parent`'s race check.
_PARENT_AT_START: Final = os.getppid()

Prctl = Callable[[int, int, int, int, int], int]

# Only SIGTERM and SIGINT stop the worker (gracefully). These
# have no meaning for it and are ignored: their default action is to terminate,
# and a stray ``kill -USR1`` or a closed terminal (SIGHUP) must not cost the
# presentations in flight their answers. The worker reads no configuration
# after start-up, so SIGHUP has nothing to reload; the status file is written on
# every rescan tick anyway (docs/systemd.md, "Signals").
IGNORED_SIGNALS: Final = (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def _libc_prctl() -> Prctl | None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn: Prctl = libc.prctl
    except (OSError, AttributeError, ImportError, MemoryError):
        return None
    return fn


def make_undumpable(prctl: Prctl | None = None) -> bool:
    """prctl(PR_SET_DUMPABLE, 0), then read it back. True only if it holds.

    Non-dumpable: ``/proc/PID/*`` becomes root-owned and ptrace-mode access from
    any process without CAP_SYS_PTRACE fails, so neither the gateway nor any other
    same-UID process can read the key from our environment or memory, and no core
    dump is written (design §10; proc(5), "PR_SET_DUMPABLE" in prctl(2)).
    """
    fn = _libc_prctl() if prctl is None else prctl
    if fn is None:
        return False
    if fn(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return False
    return fn(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


def die_with_parent(prctl: Prctl | None = None, *, parent: int = _PARENT_AT_START) -> bool:
    """prctl(PR_SET_PDEATHSIG, SIGTERM); False if the parent is already gone.

    The re-parenting check closes the window between our start and the prctl;
    the window before this module is imported is closed only if the supervisor
    sets the same prctl between fork and exec. Without prctl (not Linux) this is
    a no-op that returns True: the supervisor's stop path still applies.
    """
    fn = _libc_prctl() if prctl is None else prctl
    if fn is not None:
        fn(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    return os.getppid() == parent


def _pace(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Pace:
    """The rehearsal model's speed from the flags (the published median by default)."""
    from kexpr.worker.rehearsal import Pace

    given = {
        "tokens_per_s": args.tokens_per_second,
        "first_token_s": args.first_token_seconds,
    }
    try:
        return Pace(**{k: v for k, v in given.items() if v is not None})
    except ValueError:
        parser.error("--tokens-per-second or --first-token-seconds out of range")


def _refuse_dependency(what: str) -> int:
    """The one line of an unsupported dependency, and its exit code."""
    ranges = ", ".join(requirement(name) for name in SUPPORTED)
    print(
        f"kexpr worker: refusing to start: unsupported_dependency: {what} (supported: {ranges})",
        file=sys.stderr,
        flush=True,
    )
    return int(ExitCode.UNSUPPORTED_DEPENDENCY)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kexpr worker")
    parser.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="kexpr.* log records on stderr (content-free; -vv: debug)",
    )
    # A rehearsal (kexpr.worker.rehearsal): the built-in model, no key, no network.
    # Explicit only: nothing else selects it.
    parser.add_argument(
        "--rehearsal",
        action="store_true",
        help="the built-in model instead of the provider: no key, no network (docs/cli.md)",
    )
    parser.add_argument(
        "--tokens-per-second", type=float, default=None, help="--rehearsal: output rate"
    )
    parser.add_argument(
        "--first-token-seconds", type=float, default=None, help="--rehearsal: first-token delay"
    )
    # The spend bound (kexpr.worker.spend): attempts started, each at most one
    # paid call, per rolling hour and per UTC day.
    cap = int_range(*CAP_RANGE)
    parser.add_argument(
        "--max-calls-per-hour",
        type=cap,
        default=DEFAULT_PER_HOUR,
        help=f"paid calls in any rolling hour (default {DEFAULT_PER_HOUR}; docs/cli.md)",
    )
    parser.add_argument(
        "--max-calls-per-day",
        type=cap,
        default=DEFAULT_PER_DAY,
        help=f"paid calls in one UTC day (default {DEFAULT_PER_DAY}; docs/cli.md)",
    )
    args = parser.parse_args(argv)
    spend = SpendCaps(per_hour=args.max_calls_per_hour, per_day=args.max_calls_per_day)
    if not args.rehearsal and (
        args.tokens_per_second is not None or args.first_token_seconds is not None
    ):
        parser.error("--tokens-per-second and --first-token-seconds need --rehearsal")
    log.configure(args.verbose)
    if not make_undumpable():
        # Fail closed before anything uses the key (enum diagnostic only).
        print("kexpr worker: refusing to start: not_undumpable", file=sys.stderr)
        return int(ExitCode.NOT_UNDUMPABLE)
    if not die_with_parent():
        print("kexpr worker: refusing to start: orphaned", file=sys.stderr)
        return int(ExitCode.OK)
    hazards = hazardous_environment(os.environ)
    if hazards:
        # Enum names only; never values.
        print(
            "kexpr worker: refusing to start: hazardous environment: "
            + ",".join(sorted(h.value for h in hazards)),
            file=sys.stderr,
        )
        return int(ExitCode.HAZARDOUS_ENVIRONMENT)
    if args.rehearsal and (found := rehearsal_hazards(os.environ)):
        print(
            "kexpr worker: refusing to start: " + ",".join(h.value for h in found),
            file=sys.stderr,
        )
        return int(ExitCode.HAZARDOUS_ENVIRONMENT)
    # httpx/httpcore outside the ranges the bounded transport was tested on: one
    # line and a code no supervisor restarts (worker.dependencies), never a
    # traceback at import and a restart loop.
    wrong = unsupported()
    if wrong:
        return _refuse_dependency(", ".join(wrong))
    # The rehearsal model imports httpx and the transport: only now, after the
    # check, and refused the same way if that import fails (never a traceback
    # and a restart loop where the real worker says one line and exits 69).
    try:
        pace = _pace(parser, args) if args.rehearsal else None
    except (ImportError, AttributeError):
        return _refuse_dependency("import failed")
    # Before the SDK import and before any thread: the journal is verified in a
    # forked child on the other core meanwhile (worker.preload; never trusted
    # blindly: the parent re-checks every file, else loads by itself).
    preload = start_preload(DataRoot(args.data_root))
    try:
        from kexpr.worker._transport import TransportUnsupported
        from kexpr.worker.daemon import Worker
    except (ImportError, AttributeError):
        # In range, yet what the transport reaches is not there (a patched or
        # broken install): the same refusal. Only the class name is shown.
        if preload is not None:
            preload.discard()
        return _refuse_dependency("import failed")

    # A handler takes no lock (worker.signalstop rule 1).
    stop = SignalStop()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for signum in IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    try:
        if args.rehearsal:
            from kexpr.worker.provider import build_rehearsal_client
            from kexpr.worker.rehearsal import RehearsalTransport

            assert pace is not None
            worker = Worker(
                DataRoot(args.data_root),
                preload=preload,
                rehearsal=True,
                client_factory=lambda: build_rehearsal_client(RehearsalTransport(pace)),
                spend=spend,
            )
        else:
            worker = Worker(DataRoot(args.data_root), preload=preload, spend=spend)
        code = worker.run(stop)
    except TransportUnsupported:
        return _refuse_dependency("httpx transport layout")
    if code is not ExitCode.OK:
        print(f"kexpr worker: exit {code.name.lower()}", file=sys.stderr)
    return int(code)

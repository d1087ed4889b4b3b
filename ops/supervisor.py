"""``kexpr supervise``: run the worker as a child with an explicit minimal environment.

The worker's environment is *built*, never inherited (design §9, §10): a process's
``/proc/PID/environ`` is its environment at ``execve``, so isolation means starting
each process with an explicit ``env=``. The worker gets:

- ``PATH``, ``LANG`` (fixed values),
- ``OPENAI_API_KEY`` — the only secret, and only if the supervisor has it,
- ``HTTPS_PROXY`` / ``SSL_CERT_FILE`` — only when the operator passes
  ``--https-proxy`` / ``--ssl-cert-file`` explicitly,
- ``KEXPR_DATA_ROOT_ID`` — the device and inode of the data root the
  supervisor checked before this start (rule 5), never taken from its own
  environment.

Nothing else: in particular no ``OPENAI_BASE_URL``/``OPENAI_ORG_ID``/``OPENAI_LOG``/
``OPENAI_CUSTOM_HEADERS``/``SSLKEYLOGFILE``, which the SDK or ssl would act on.

Restart rules (the decision is `RestartTracker.on_exit`, pure and clock-injected;
the loop in `Supervisor.run` only carries it out):

1. A fatal exit (`FATAL_EXITS`: hazardous environment, unsafe data root, not
   undumpable, unsupported dependency) is not restarted: a restart cannot fix it.
2. Any other exit is restarted after an exponential backoff (0.5 s doubling to
   30 s), reset after a run that stayed up `healthy_after_s`.
3. Crash loop: more than ``max_restarts`` exits within ``window_s`` stops
   supervising with the enum diagnostic ``crash_loop`` and `CRASH_LOOP_EXIT`,
   instead of burning the provider budget or the disk (systemd's
   ``StartLimitBurst``/``StartLimitIntervalSec`` do the same for the unit).
4. Graceful stop (SIGTERM/SIGINT to the supervisor): SIGTERM to the worker, which
   stops claiming and lets a call in flight finish or reach its 4 s deadline;
   SIGKILL only after `STOP_GRACE_S`, which is longer than that deadline. The
   handler only sets a `kexpr.worker.signalstop.SignalStop`, which takes no lock
   (a `threading.Event` can hang the process that waits on it).
5. The data root: the supervisor applies the worker's own
   path rules before *every* start. The path is `kexpr.spool.layout.DataRoot`'s,
   computed once (the ancestors above the root resolved as the worker does,
   the root itself never) and walked fresh from ``/`` by descriptor with no
   symlink at any component (`kexpr.spool.fsio.check_tree`); the worker gets exactly
   that path, never a re-resolved one. A symlink, a non-directory, a bad mode or
   owner, or — at a restart — a root that is missing or is not the directory
   the previous worker ran in (device, inode) is refused: the supervisor exits
   `ExitCode.UNSAFE_DATA_ROOT` (74) with the enum diagnostic
   ``unsafe_data_root``, never a crash loop. A missing root at the first start
   is created by the supervisor with the worker's own first step
   (`kexpr.spool.layout.DataRoot.ensure`, private, as the same user), so that
   its identity is known before any worker runs: learnt later, it could be a
   directory swapped in after the worker made the root. The worker is handed
   that identity (``KEXPR_DATA_ROOT_ID=<dev>:<ino>``) and refuses to start
   (74, ``inode_changed``; zero claims, zero rows) in any other directory, so a
   root swapped between this check and the worker's open is never served
   (`kexpr.worker.daemon` invariant 10).

6. Resource limits: the worker starts with ``RLIMIT_AS`` (address
   space) and ``RLIMIT_NPROC`` (tasks) lowered, soft = hard, so it cannot raise
   them back — the equivalent of the systemd unit's ``MemoryMax=`` and
   ``TasksMax=`` (docs/systemd.md gives the sizes and why). `worker_rlimits`
   computes them in the supervisor, never above its own limits; the child sets
   them between fork and exec. ``RLIMIT_AS`` is `WORKER_ADDRESS_SPACE_BYTES`:
   address space, not memory — glibc reserves 64 MiB of it per thread arena and
   8 MiB per thread stack, so it is set well above the resident need and stops a
   runaway, where the unit's ``MemoryMax=`` is the tight bound. ``RLIMIT_NPROC``
   counts every task of the *user*, not of the worker: it is the user's tasks
   at the start plus `WORKER_TASKS_HEADROOM`, and the kernel does not apply it
   to root. Past either, a thread start or an allocation fails inside the
   worker instead of the machine running out.

7. Rehearsal (``--rehearsal``; `kexpr.worker.rehearsal`, `kexpr.spool.rehearsal`):
   the worker runs against the built-in model, with no key and no network. The
   flag is the only way in. The supervisor refuses to start one with
   ``OPENAI_API_KEY`` in its own environment (exit 78, ``rehearsal_key_present``:
   an operator who holds a key and asks for a rehearsal is told, not guessed
   for), never passes the key on, and takes no ``--https-proxy`` or
   ``--ssl-cert-file`` with it; the worker checks the same again, refuses a
   data root with real evidence and marks its own before the first row.
   ``supervisor.status.json`` says ``"rehearsal": true``.

8. The spend bound (`kexpr.worker.spend`): the worker's caps on paid calls
   (``--max-calls-per-hour``, ``--max-calls-per-day``) are always passed on
   explicitly, defaults included, so its command line shows the bound in force.

``supervisor.status.json`` (beside ``worker.status.json``) records the
supervisor's state, restarts and last exit code for ``kexpr status``: enums and
integers only, never content. It is a heartbeat, not evidence: a failed write is
ignored, and nothing is created in the data root that the worker would not.
"""

from __future__ import annotations

import collections
import datetime as dt
import enum
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from kexpr.spool import log
from kexpr.spool.canonical import format_ts
from kexpr.spool.fsio import FileId
from kexpr.spool.layout import ROOT_ID_VARIABLE, DataRoot, format_root_id
from kexpr.worker.exitcodes import ExitCode
from kexpr.worker.signalstop import SignalStop
from kexpr.worker.spend import SpendCaps

KEY_VARIABLE: Final = "OPENAI_API_KEY"
BASE_ENV: Final[Mapping[str, str]] = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
# An in-flight call ends by its request's deadline (<= 4 s after submission,
# design §4); the worker then drains and writes its last status. 10 s covers that
# with slack; only then is the worker killed.
STOP_GRACE_S: Final = 10.0
# Rule 6. Measured: the worker at 16 concurrent presentations holds 64 MB
# resident in 1.2 GB of address space (16 threads on 2 cores: glibc arenas and
# stacks); 4 GiB leaves room for more cores' arenas and still stops a runaway.
WORKER_ADDRESS_SPACE_BYTES: Final = 4 * 1024**3
# The worker runs 8 pool threads and at most 8 busy plus 8 kept provider-call
# threads (worker/provider.py) besides its own few: the unit's TasksMax=64. The
# per-user limit adds twice that to what the user already runs.
WORKER_TASKS_HEADROOM: Final = 128
# Exit codes that a restart cannot fix: supervising stops with them.
# ANOTHER_WORKER (73) is deliberately *not* fatal: after a supervisor was killed,
# its orphaned worker drains (<= the 4 s deadline, then exits on PR_SET_PDEATHSIG)
# while still holding worker.lock; backoff outlasts that. A real second
# supervisor on the same data root ends in `crash_loop` instead.
FATAL_EXITS: Final = frozenset(
    {
        int(ExitCode.HAZARDOUS_ENVIRONMENT),
        int(ExitCode.UNSAFE_DATA_ROOT),
        int(ExitCode.NOT_UNDUMPABLE),
        int(ExitCode.UNSUPPORTED_DEPENDENCY),
    }
)
# EX_SOFTWARE: the worker keeps dying; an operator has to look (kexpr status).
CRASH_LOOP_EXIT: Final = 70
STATUS_SCHEMA: Final = "kexpr-supervisor-status-v1"
_log = log.logger("supervisor")
# `_diagnose`'s enum words (also printed on stderr).
DIAGNOSTICS: Final = frozenset({"fatal_exit", "crash_loop", "stop_timeout"})
STATUS_NAME: Final = "supervisor.status.json"
HEARTBEAT_S: Final = 5.0
_POLL_S: Final = 0.2


def supervisor_status_path(root: DataRoot) -> Path:
    """Where the supervisor's heartbeat lives (next to ``worker.status.json``)."""
    return root.root / STATUS_NAME


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    backoff_start_s: float = 0.5
    backoff_max_s: float = 30.0
    healthy_after_s: float = 60.0
    max_restarts: int = 5
    window_s: float = 300.0

    def __post_init__(self) -> None:
        if (
            not (0 < self.backoff_start_s <= self.backoff_max_s)
            or self.max_restarts < 0
            or self.window_s <= 0
        ):
            raise ValueError("restart_policy")


class Action(enum.StrEnum):
    RESTART = "restart"
    STOP_FATAL = "fatal"
    STOP_CRASH_LOOP = "crash_loop"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    delay_s: float = 0.0


class RestartTracker:
    """What to do after the worker exited (rules 1-3). No processes, no clock."""

    def __init__(self, policy: RestartPolicy) -> None:
        self.policy = policy
        self._exits: collections.deque[float] = collections.deque()
        self._backoff = policy.backoff_start_s

    def on_exit(self, code: int, ran_s: float, now: float) -> Decision:
        if code in FATAL_EXITS:
            return Decision(Action.STOP_FATAL)
        p = self.policy
        self._exits.append(now)
        while self._exits and now - self._exits[0] > p.window_s:
            self._exits.popleft()
        if len(self._exits) > p.max_restarts:
            return Decision(Action.STOP_CRASH_LOOP)
        if ran_s >= p.healthy_after_s:
            self._backoff = p.backoff_start_s
        delay = self._backoff
        self._backoff = min(self._backoff * 2, p.backoff_max_s)
        return Decision(Action.RESTART, delay)


class ChildState(enum.StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    STOPPING = "stopping"
    STOPPED = "stopped"
    CRASH_LOOP = "crash_loop"
    FATAL = "fatal"


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    data_root: Path
    https_proxy: str | None = None
    ssl_cert_file: str | None = None
    # Rule 7: a rehearsal (the built-in model, no key, no network) at this speed.
    rehearsal: bool = False
    tokens_per_s: float | None = None
    first_token_s: float | None = None
    # The worker's spend bound (`kexpr.worker.spend`), always passed on.
    spend: SpendCaps = field(default_factory=SpendCaps)

    def __post_init__(self) -> None:
        if self.rehearsal and (self.https_proxy or self.ssl_cert_file):
            raise ValueError("a rehearsal has no network: no proxy, no CA bundle")
        if not self.rehearsal and (self.tokens_per_s is not None or self.first_token_s is not None):
            raise ValueError("a speed is a rehearsal's")


def worker_environment(
    spec: WorkerSpec, source: Mapping[str, str], root_id: FileId | None = None
) -> dict[str, str]:
    """The worker's whole environment, from an allow-list (design §9). A
    rehearsal's never carries the key (rule 7). ``root_id``: the data root the
    supervisor checked (rule 5), as `ROOT_ID_VARIABLE`: the one value this
    product puts there itself, never one taken from ``source``."""
    env = dict(BASE_ENV)
    if root_id is not None:
        env[ROOT_ID_VARIABLE] = format_root_id(root_id)
    key = None if spec.rehearsal else source.get(KEY_VARIABLE)
    if key is not None:
        env[KEY_VARIABLE] = key
    if spec.https_proxy:
        env["HTTPS_PROXY"] = spec.https_proxy
    if spec.ssl_cert_file:
        env["SSL_CERT_FILE"] = spec.ssl_cert_file
    return env


def worker_command(spec: WorkerSpec, root: Path | None = None) -> list[str]:
    """The worker's command line, with the data root the supervisor checked
    (rule 5: `DataRoot`'s path, never ``resolve()``-d). `kexpr -v supervise`
    shows the worker's records too (content-free, spool.log)."""
    checked = root if root is not None else DataRoot(spec.data_root).root
    verbose = ["-" + "v" * log.verbosity()] if log.verbosity() else []
    rehearsal: list[str] = []
    if spec.rehearsal:
        rehearsal.append("--rehearsal")
        if spec.tokens_per_s is not None:
            rehearsal += ["--tokens-per-second", repr(spec.tokens_per_s)]
        if spec.first_token_s is not None:
            rehearsal += ["--first-token-seconds", repr(spec.first_token_s)]
    return [
        sys.executable,
        "-m",
        "kexpr.worker",
        *verbose,
        "--data-root",
        str(checked),
        "--max-calls-per-hour",
        str(spec.spend.per_hour),
        "--max-calls-per-day",
        str(spec.spend.per_day),
        *rehearsal,
    ]


class Child(Protocol):
    pid: int

    def poll(self) -> int | None: ...
    def send_signal(self, sig: int) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


def _user_tasks(uid: int) -> int | None:
    """How many tasks (threads) the real user ``uid`` runs now, from /proc;
    None when /proc cannot be read."""
    total = 0
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return total


def worker_rlimits() -> list[tuple[int, int]]:
    """Rule 6: ``(resource, limit)`` for the worker, each at most the
    supervisor's own soft limit. ``RLIMIT_NPROC`` is left as it is when /proc
    cannot be read (the unit's ``TasksMax=`` does not depend on it)."""
    import resource

    wanted = [(resource.RLIMIT_AS, WORKER_ADDRESS_SPACE_BYTES)]
    tasks = _user_tasks(os.getuid())
    if tasks is not None:
        wanted.append((resource.RLIMIT_NPROC, tasks + WORKER_TASKS_HEADROOM))
    limits: list[tuple[int, int]] = []
    for res, limit in wanted:
        soft, _hard = resource.getrlimit(res)
        limits.append((res, limit if soft == resource.RLIM_INFINITY else min(limit, soft)))
    return limits


def _child_preexec() -> Callable[[], None]:
    """What the child does between fork and exec: die with its parent, then
    take its resource limits (rule 6). Everything is resolved in the parent."""
    import resource

    die = _die_with_parent_preexec()
    limits = worker_rlimits()
    setrlimit = resource.setrlimit

    def preexec() -> None:
        if die is not None:
            die()
        for res, limit in limits:
            setrlimit(res, (limit, limit))

    return preexec


def _die_with_parent_preexec() -> Callable[[], None] | None:
    """``prctl(PR_SET_PDEATHSIG, SIGTERM)`` between fork and exec.

    The worker asks for the same itself (`kexpr.worker.main.die_with_parent`), but only
    once its module is imported; set here, a supervisor killed during the
    worker's interpreter start-up cannot leave an orphan holding ``worker.lock``.
    Resolved in the parent (no import after fork); None where prctl is missing.
    The supervisor spawns from its main thread, whose exit is what the kernel
    watches.
    """
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG

    return preexec


def _utc_now() -> str:
    return format_ts(dt.datetime.now(dt.UTC))


class Supervisor:
    def __init__(
        self,
        spec: WorkerSpec,
        source_env: Mapping[str, str],
        *,
        policy: RestartPolicy | None = None,
        spawn: Callable[[], Child] | None = None,
        clock: Callable[[], float] = time.monotonic,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.spec = spec
        # Without the root's identity: it is added at each start (rule 5).
        self._env = worker_environment(spec, source_env)
        self._spawn = spawn or self._start
        self._clock = clock
        self._grace = stop_grace_s
        self.tracker = RestartTracker(policy or RestartPolicy())
        # Set by the SIGTERM/SIGINT handler: no lock taken (worker.signalstop rule 1).
        self.stop = SignalStop()
        self.child: Child | None = None
        self.restarts = 0
        self.last_exit: int | None = None
        self.state = ChildState.STARTING
        self._root = DataRoot(spec.data_root)
        # Rule 5: the identity of the data root the workers run in, once known.
        self._root_id: FileId | None = None
        self._beat = 0.0
        self._status_ok = False

    def check_data_root(self, *, restart: bool) -> str | None:
        """Rule 5: None if a worker may start on the data root, else the
        refusal's enum. Also records the root's identity, before the first
        worker starts: a root missing then is created here, by the worker's own
        first step (`DataRoot.ensure`, as the same user), not left to the
        worker, after which a swap could be taken for the root it made."""
        from kexpr.spool.fsio import UnsafePath, check_tree

        try:
            try:
                _, ids = check_tree(self._root.root, ())
            except FileNotFoundError:
                if restart or self._root_id is not None:
                    return "data_root_missing"
                self._root.ensure()
                _, ids = check_tree(self._root.root, ())
        except UnsafePath as e:
            return e.reason.value
        except FileNotFoundError:
            return "data_root_missing"
        except OSError:
            return "io_error"
        ident = ids["."]
        if self._root_id is not None and ident != self._root_id:
            return "inode_changed"
        self._root_id = ident
        return None

    def _start(self) -> Child:
        # Rule 5: the worker is told which directory was checked, and serves
        # that one or none (the path alone could name a directory swapped in
        # since the check).
        assert self._root_id is not None
        return subprocess.Popen(
            worker_command(self.spec, self._root.root),
            env={**self._env, ROOT_ID_VARIABLE: format_root_id(self._root_id)},
            cwd="/",
            stdin=subprocess.DEVNULL,
            close_fds=True,
            # The supervisor is single-threaded (signal handlers only set an Event).
            preexec_fn=_child_preexec(),  # noqa: PLW1509
        )

    def run(self) -> int:
        self._set(ChildState.STARTING)
        first = True
        while not self.stop.is_set():
            refused = self.check_data_root(restart=not first)
            if refused is not None:
                # Rule 5: a restart cannot make this root safe.
                self._diagnose(f"unsafe_data_root: {refused}", None)
                self.last_exit = int(ExitCode.UNSAFE_DATA_ROOT)
                self._set(ChildState.FATAL)
                return int(ExitCode.UNSAFE_DATA_ROOT)
            first = False
            started = self._clock()
            child = self.child = self._spawn()
            self._set(ChildState.RUNNING)
            while child.poll() is None:
                if self.stop.wait(_POLL_S):
                    return self._terminate_child()
                # Beat every HEARTBEAT_S, and retry at once after a write that failed.
                if not self._status_ok or self._clock() - self._beat >= HEARTBEAT_S:
                    self._set(ChildState.RUNNING)
            code = child.poll()
            assert code is not None
            self.last_exit = code
            now = self._clock()
            decision = self.tracker.on_exit(code, now - started, now)
            if decision.action is Action.STOP_FATAL:
                self._diagnose("fatal_exit", code)
                self._set(ChildState.FATAL)
                return code
            if decision.action is Action.STOP_CRASH_LOOP:
                self._diagnose("crash_loop", code)
                self._set(ChildState.CRASH_LOOP)
                return CRASH_LOOP_EXIT
            self._set(ChildState.BACKOFF)
            if self.stop.wait(decision.delay_s):
                break
            self.restarts += 1
        self._set(ChildState.STOPPED)
        return 0

    def _terminate_child(self) -> int:
        """Rule 4: SIGTERM, wait past the call deadline, only then SIGKILL."""
        self._set(ChildState.STOPPING)
        child = self.child
        code = 0
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                code = child.wait(self._grace)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                self._diagnose("stop_timeout", None)
                code = 1
        self.last_exit = code if child is not None else None
        self._set(ChildState.STOPPED)
        return 0 if code == 0 else 1

    def _diagnose(self, diagnostic: str, code: int | None) -> None:
        log.event(
            _log,
            logging.WARNING,
            "supervisor_diagnostic",
            diagnostic=log.known(diagnostic, DIAGNOSTICS),
            worker_exit=code,
        )
        suffix = "" if code is None else f" (worker exit {code})"
        print(f"kexpr supervise: {diagnostic}{suffix}", file=sys.stderr)

    def _set(self, state: ChildState) -> None:
        if state is not self.state or state is ChildState.STARTING:
            log.event(
                _log,
                logging.INFO,
                "supervisor_state",
                state=state,
                restarts=self.restarts,
                last_exit=self.last_exit,
                worker_pid=self.child.pid
                if self.child is not None and state is ChildState.RUNNING
                else None,
            )
        self.state = state
        self._beat = self._clock()
        child = self.child
        status = {
            "schema": STATUS_SCHEMA,
            "pid": os.getpid(),
            "state": state.value,
            "heartbeat_at_utc": _utc_now(),
            "worker_pid": child.pid if child is not None and state is ChildState.RUNNING else None,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "rehearsal": self.spec.rehearsal,
            "policy": {
                "max_restarts": self.tracker.policy.max_restarts,
                "window_s": self.tracker.policy.window_s,
            },
        }
        from kexpr.spool.fsio import replace_private

        try:
            # Never creates the data root: until the worker has made it, this
            # raises FileNotFoundError and the beat is simply skipped.
            replace_private(
                supervisor_status_path(self._root),
                json.dumps(status, sort_keys=True).encode("utf-8"),
            )
            self._status_ok = True
        except OSError:
            self._status_ok = False


def cli(argv: list[str]) -> int:
    import argparse

    from kexpr.ops.argtypes import add_worker_options
    from kexpr.spool.ranges import float_range, int_range

    defaults = RestartPolicy()
    p = argparse.ArgumentParser(prog="kexpr supervise")
    add_worker_options(p)
    p.add_argument(
        "--max-restarts",
        type=int_range(0, 10_000),
        default=defaults.max_restarts,
        help=f"crash loop: stop after more than this many restarts within --restart-window (default {defaults.max_restarts})",
    )
    p.add_argument(
        "--restart-window",
        type=float_range(0.0, 7 * 86400.0, lo_open=True),
        default=defaults.window_s,
        help=f"crash-loop window in seconds (default {defaults.window_s:g})",
    )
    from kexpr.spool.rehearsal import (
        DEFAULT_FIRST_TOKEN_S,
        DEFAULT_TOKENS_PER_S,
        FIRST_TOKEN_S_RANGE,
        TOKENS_PER_S_RANGE,
    )

    p.add_argument(
        "--rehearsal",
        action="store_true",
        help="rehearse without a key: the real worker against the built-in model, no network "
        "(the data root is marked; promotion-report never counts it; docs/cli.md)",
    )
    p.add_argument(
        "--tokens-per-second",
        type=float_range(*TOKENS_PER_S_RANGE),
        help=f"--rehearsal: the model's output rate (default {DEFAULT_TOKENS_PER_S:g}, "
        "the published median)",
    )
    p.add_argument(
        "--first-token-seconds",
        type=float_range(*FIRST_TOKEN_S_RANGE),
        help=f"--rehearsal: the delay before the first token (default {DEFAULT_FIRST_TOKEN_S:g})",
    )
    a = p.parse_args(argv)
    from kexpr.ops.inputs import refuse_unusable_cert_file

    if (code := refuse_unusable_cert_file("kexpr supervise", a.ssl_cert_file)) is not None:
        return code
    try:
        policy = RestartPolicy(max_restarts=a.max_restarts, window_s=a.restart_window)
    except ValueError:
        p.error("--max-restarts must be >= 0 and --restart-window > 0")
    try:
        spec = WorkerSpec(
            a.data_root,
            a.https_proxy,
            a.ssl_cert_file,
            rehearsal=a.rehearsal,
            tokens_per_s=a.tokens_per_second,
            first_token_s=a.first_token_seconds,
            spend=SpendCaps(per_hour=a.max_calls_per_hour, per_day=a.max_calls_per_day),
        )
    except ValueError:
        p.error(
            "--rehearsal takes no --https-proxy or --ssl-cert-file; "
            "--tokens-per-second and --first-token-seconds need --rehearsal"
        )
    if a.rehearsal and KEY_VARIABLE in os.environ:
        # Rule 7: never a rehearsal with a key at hand (the value is not read).
        print("kexpr supervise: refusing to start: rehearsal_key_present", file=sys.stderr)
        return int(ExitCode.HAZARDOUS_ENVIRONMENT)
    return supervise(spec, policy)


# The worker's own list (kexpr.worker.main.IGNORED_SIGNALS, equal by a test), not
# imported: that module pulls the provider SDK, which ops must not need.
SUPERVISOR_IGNORED_SIGNALS: Final = (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def supervise(spec: WorkerSpec, policy: RestartPolicy | None = None) -> int:
    sup = Supervisor(spec, os.environ, policy=policy)

    def on_signal(signum: int, frame: object) -> None:
        sup.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # For the supervisor as for the worker: SIGHUP, SIGUSR1 and
    # SIGUSR2 mean nothing here, and their default action (terminate) would take
    # the worker down with the supervisor (PR_SET_PDEATHSIG). Ignored, so only
    # SIGTERM and SIGINT stop supervision, gracefully.
    for signum in SUPERVISOR_IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    return sup.run()

"""Crash campaign, counted at the network (issue 4). Test code only.

``python tests/crash/campaign.py --rounds N [--seed S] [--workdir D]``

Real processes, as in production: the loopback HTTPS fake in its own process
(`fake_server.py`, every request logged on arrival to ``requests.jsonl``), a real
``kexpr supervise`` with its worker (the only holder of the key, reaching the
fake through the CONNECT proxy and a test CA), and gateway processes that import
`gateway_shim` (`shim_driver.py`, no key). Each round presents styled weekly artifacts,
waits for a chosen phase of one of them and SIGKILLs the worker, the supervisor
or a shim there, restarts what died, lets everything settle, and checks:

1. no artifact ever got a second request at the fake (``requests.jsonl``);
2. every artifact the fake saw has its ``attempt_started`` row (fsynced before
   the call);
3. nothing unvalidated or late was ever returned as publishable: a ``selected``
   body only in enabled mode, only ``accepted``, only the exact expected render,
   only for an artifact whose one answer was a valid composition, within the
   4 s wait; shadow mode is always canonical; a body is the canonical body or
   the expected selected one, nothing else; the journal shows
   ``selected``/``shadow_selected`` only for such artifacts;
4. ``kexpr journal verify`` passes (exit 0);
5. after every worker (re)start, no attempt whose deadline passed before that
   start is still open unless it is *answered* (its accepted response file is in
   ``responses/``: it awaits its report until deadline + COMMIT_GRACE,
   spool.lifecycle rule 3); at the end, after one more restart past every
   deadline, every open attempt is answered (the grace expiry itself is proved
   in process: tests/worker_tests/test_daemon.py);
6. a SIGKILLed supervisor's worker exits on its own (PR_SET_PDEATHSIG);
7. ``in_flight`` is never answered to the request that started the attempt
   (spool.lifecycle rule 4): an artifact gets at most (presentations - 1)
   ``in_flight`` answers. Phase ``mid_call_restart`` SIGKILLs the worker during
   a slow call and lets the supervisor restart it at once, ready before the
   deadline: its presentation must be canonical *with* publication permitted.
8. no answer reservation is left behind (issue 19: the worker reserves the
   answer's staging file in ``tmp/`` before the start row and holds it through
   the call): once a round has settled, ``tmp/`` holds none, whoever was killed
   (a SIGKILLed worker's are removed by the next one at start-up). Phase
   ``after_reserve`` kills while the target's reservation exists.

The last line of stdout is one JSON object with the counts. Exit 0 iff every
invariant held in every round.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

from behaviour import ACCEPTING, Reply, reply_for
from shim_driver import artifact_fields

from gateway_shim.identity import artifact_key, load_or_create_key
from kexpr.spool.fsio import RESERVATION_MARK
from kexpr.spool.layout import DataRoot

PY = sys.executable
KEY = "sk-crash-campaign-0000"
WAIT_S = 4.0
# Correctness bound for "in time" (the shim's own 4 s check plus the render):
# generous, because two cores are shared with other test runs.
IN_TIME_S = WAIT_S + 0.75
PHASES = (
    "before_claim",
    "after_claim",
    "after_reserve",
    "after_start_row",
    "mid_call",
    "after_response",
    "before_report",
    "after_report",
)
VICTIM_PHASES = {
    # mid_call_restart: SIGKILL during the call, restart ready before the deadline.
    "worker": (*PHASES, "mid_call_restart"),
    "supervisor": PHASES,
    "shim": PHASES[1:],
}
VICTIMS = (("worker", 35), ("supervisor", 20), ("shim", 30), ("none", 15))
PR_SET_CHILD_SUBREAPER = 36
# Bystander artifacts settle fast; the slow answers (3.5-5 s) are kept for the
# rounds that aim at a kill mid-call, so that a round costs ~2 s.
FAST = frozenset(
    {Reply.ACCEPT_NOW, Reply.ACCEPT_DELAYED, Reply.INVALID, Reply.ERROR500, Reply.TRUNCATED}
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Violation(Exception):
    pass


# ------------------------------------------------------------------ tails


class LineTail:
    """Incrementally parsed JSON lines of one growing file (or a directory of
    daily segments): what was appended since the last call, never re-read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._off: dict[Path, int] = {}
        self._rest: dict[Path, bytes] = {}

    def _files(self) -> list[Path]:
        if self.path.is_dir():
            return sorted(self.path.glob("*.jsonl"))
        return [self.path] if self.path.exists() else []

    def read(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for f in self._files():
            with open(f, "rb") as fh:
                fh.seek(self._off.get(f, 0))
                data = fh.read()
            self._off[f] = self._off.get(f, 0) + len(data)
            data = self._rest.pop(f, b"") + data
            *lines, rest = data.split(b"\n")
            if rest:
                self._rest[f] = rest
            out += [json.loads(x) for x in lines if x]
        return out


class World:
    """What the harness has observed so far (monotone)."""

    def __init__(self, root: DataRoot, fake_dir: Path) -> None:
        self.root = root
        self._journal = LineTail(root.outcomes)
        self._fake = LineTail(fake_dir / "requests.jsonl")
        self.fake_counts: Counter[str] = Counter()
        self.starts: dict[str, dict[str, Any]] = {}  # artifact -> start row
        self.terminals: dict[str, dict[str, Any]] = {}  # attempt -> terminal row
        self.lock = threading.Lock()

    def refresh(self) -> None:
        with self.lock:
            for row in self._fake.read():
                if row.get("artifact_key"):
                    self.fake_counts[row["artifact_key"]] += 1
            for row in self._journal.read():
                if row["state"] == "attempt_started":
                    self.starts[row["artifact_key"]] = row
                else:
                    self.terminals[row["attempt_id"]] = row

    def open_attempts(self) -> list[dict[str, Any]]:
        return [r for r in self.starts.values() if r["attempt_id"] not in self.terminals]


# --------------------------------------------------------------- processes


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def _alive(pid: int) -> bool:
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return st.rsplit(")", 1)[1].split()[0] != "Z"


class Driver:
    """One shim process and what it printed."""

    def __init__(self, root: DataRoot, name: str) -> None:
        self.name = name
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        self.proc = subprocess.Popen(
            [PY, str(HERE / "shim_driver.py"), "--data-root", str(root.root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self.lines: list[dict[str, Any]] = []
        self.sent: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        with self._cond:
            if not self._cond.wait_for(lambda: any(x["kind"] == "ready" for x in self.lines), 30):
                raise Violation("shim_not_ready")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                obj = json.loads(raw)
            except ValueError:
                continue  # a line cut by SIGKILL
            obj["t"] = time.monotonic()
            with self._cond:
                self.lines.append(obj)
                self._cond.notify_all()

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.sent[cmd["id"]] = cmd
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def snapshot(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self.lines)

    def pending(self) -> int:
        lines = self.snapshot()
        presented = {x["id"]: x for x in lines if x["kind"] == "presented"}
        reported = {x["id"] for x in lines if x["kind"] == "reported"}
        n = 0
        for cid in self.sent:
            p = presented.get(cid)
            if p is None or (p["outcome"] == "accepted" and cid not in reported):
                n += 1
        return n

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)

    def close(self) -> None:
        if self.alive():
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)


class Stack:
    def __init__(self, work: Path) -> None:
        data = work / "data"
        data.mkdir(mode=0o700)
        self.root = DataRoot(data / "korean-expression-v1")
        self.root.ensure()
        self.fake_dir = work / "fake"
        self.fake: subprocess.Popen[bytes] | None = None
        self.sup: subprocess.Popen[bytes] | None = None
        self.sup_worker_kills = 0
        self.proxy = ""
        self.ca = ""
        self.worker_started_at = ""

    def start_fake(self) -> None:
        env = dict(os.environ)
        self.fake = subprocess.Popen(
            [PY, str(HERE / "fake_server.py"), "--dir", str(self.fake_dir)], env=env
        )
        info = self.fake_dir / "fake.json"
        end = time.monotonic() + 30
        while not info.exists():
            if time.monotonic() > end or self.fake.poll() is not None:
                raise Violation("fake_not_ready")
            time.sleep(0.05)
        obj = json.loads(info.read_text())
        self.proxy, self.ca = obj["proxy_url"], obj["ca_file"]

    def start_supervisor(self) -> int:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "OPENAI_API_KEY": KEY,
        }
        cmd = [PY, "-m", "kexpr.ops.cli", "supervise", "--data-root", str(self.root.root)]
        cmd += ["--https-proxy", self.proxy, "--ssl-cert-file", self.ca]
        # Thousands of fresh artifacts per campaign: past the default spend
        # bound, which the campaign is not about (docs/cli.md "The spend bound").
        cmd += ["--max-calls-per-hour", "100000", "--max-calls-per-day", "100000"]
        self.sup = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
        self.sup_worker_kills = 0
        return self.wait_ready()

    def worker_pid(self) -> int | None:
        if self.sup is None:
            return None
        kids = _children(self.sup.pid)
        return kids[0] if kids else None

    def wait_ready(self, timeout: float = 60.0) -> int:
        """The supervisor's current child has written ``ready``."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            assert self.sup is not None
            if self.sup.poll() is not None:
                raise Violation(f"supervisor_exited_{self.sup.returncode}")
            pid = self.worker_pid()
            if pid is not None:
                try:
                    status = json.loads(self.root.status_file.read_bytes())
                except (OSError, ValueError):
                    status = {}
                if status.get("pid") == pid and status.get("state") == "ready":
                    self.worker_started_at = status["started_at_utc"]
                    if status.get("journal") != "verified":
                        raise Violation(f"worker_quarantined_{status.get('quarantine')}")
                    return pid
            time.sleep(0.02)
        raise Violation("worker_not_ready")

    def stop_supervisor(self) -> None:
        if self.sup is not None and self.sup.poll() is None:
            self.sup.send_signal(signal.SIGTERM)
            try:
                self.sup.wait(30)
            except subprocess.TimeoutExpired:
                self.sup.kill()
                self.sup.wait()
        self.sup = None

    def close(self) -> None:
        self.stop_supervisor()
        if self.fake is not None and self.fake.poll() is None:
            self.fake.send_signal(signal.SIGTERM)
            try:
                self.fake.wait(10)
            except subprocess.TimeoutExpired:
                self.fake.kill()
                self.fake.wait()


# ----------------------------------------------------------------- campaign


class Campaign:
    def __init__(self, work: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        self.stack = Stack(work)
        self.key = load_or_create_key(self.stack.root)
        self.world = World(self.stack.root, self.stack.fake_dir)
        self.drivers: list[Driver] = []
        self.all_lines_seen = 0
        self.cmd_id = 0
        self.events: list[tuple[str, str]] = []  # (event, artifact)
        self.kills: dict[str, Counter[str]] = defaultdict(Counter)
        self.counts: Counter[str] = Counter()
        self.violations: list[str] = []
        self.orphan_exit_max = 0.0
        self.checked_lines: set[tuple[str, int]] = set()
        self.dead_drivers: list[Driver] = []
        # aimed phase -> observed phase at the kill (the kill lands a few ms late).
        self.aimed: Counter[str] = Counter()
        self.timing: dict[str, float] = defaultdict(float)
        self.stop_requested = False
        self._killed_worker: int | None = None
        self.sent: Counter[str] = Counter()  # artifact -> presentations commanded
        self.in_flight_flagged: set[str] = set()
        self._orphan: int | None = None
        # Artifacts whose worker was killed mid-call and restarted before the deadline.
        self.fast_targets: set[str] = set()

    # -- helpers ------------------------------------------------------------------

    def akey(self, event: str) -> str:
        return artifact_key(self.key, artifact_fields(event))

    def new_event(self, rnd: int, want: frozenset[Reply] | None) -> tuple[str, str]:
        for salt in range(10_000):
            event = f"evt-{rnd}-{salt}-{self.rng.randrange(1 << 30):08x}"
            akey = self.akey(event)
            if want is None or reply_for(akey) in want:
                self.events.append((event, akey))
                return event, akey
        raise AssertionError("no event of the wanted class")

    def command(self, driver: Driver, event: str, mode: str, commit_delay: float = 0.0) -> None:
        self.cmd_id += 1
        self.sent[self.akey(event)] += 1
        host = self.rng.choices(["selected", "commit_failed", "publication_failed"], [8, 1, 1])[0]
        driver.send(
            {
                "id": self.cmd_id,
                "event": event,
                "mode": mode,
                "commit_delay": commit_delay,
                "host": host,
            }
        )

    def violate(self, what: str) -> None:
        log(f"VIOLATION: {what}")
        self.violations.append(what)

    # -- phases -------------------------------------------------------------------

    def reached(self, akey: str) -> list[str]:
        """Phases the target artifact has reached, in order (a monotone view)."""
        self.world.refresh()
        out: list[str] = []
        rids: set[str] = set()
        for d, phase in (
            (self.stack.root.requests, "before_claim"),
            (self.stack.root.claimed, "after_claim"),
        ):
            try:
                names = os.listdir(d)
            except OSError:
                names = []
            for n in names:
                try:
                    req = json.loads((d / n).read_bytes())
                except (OSError, ValueError):
                    continue
                if req.get("capsule", {}).get("artifact_key") == akey:
                    out.append(phase)
                    rids.add(n)
        if rids and any(
            n.startswith(tuple(f".{r}{RESERVATION_MARK}" for r in rids)) for n in self.tmp_names()
        ):
            out.append("after_reserve")
        if akey in self.world.starts:
            out.append("after_start_row")
        if self.world.fake_counts.get(akey):
            out.append("mid_call")
        lines = [
            x
            for d in self.drivers
            for x in d.snapshot()
            if x.get("artifact_key") == akey or x["kind"] == "reported"
        ]
        presented = [x for x in lines if x["kind"] == "presented" and x.get("artifact_key") == akey]
        start = self.world.starts.get(akey)
        if presented or (start is not None and start["attempt_id"] in self.world.terminals):
            out.append("after_response")
        if any(x["outcome"] == "accepted" for x in presented):
            out.append("before_report")
        aids = {x["attempt_id"] for x in presented if x.get("attempt_id")}
        if any(x["kind"] == "reported" and x.get("attempt_id") in aids for x in lines):
            out.append("after_report")
        return out

    def tmp_names(self) -> list[str]:
        try:
            return os.listdir(self.stack.root.tmp)
        except OSError:
            return []

    def furthest(self, akey: str) -> str:
        got = self.reached(akey)
        return max(got, key=PHASES.index) if got else "before_claim"

    def wait_phase(self, akey: str, phase: str, timeout: float = 6.0) -> None:
        want = PHASES.index(phase)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = self.reached(akey)
            if got and max(PHASES.index(p) for p in got) >= want:
                return
            time.sleep(0.003)

    # -- a round ------------------------------------------------------------------

    def ensure_drivers(self) -> None:
        self.drivers = [d for d in self.drivers if d.alive()]
        while len(self.drivers) < 2:
            self.drivers.append(
                Driver(
                    self.stack.root,
                    f"shim{len(self.dead_drivers)}-{len(self.drivers)}-{self.cmd_id}",
                )
            )

    def round(self, rnd: int) -> None:
        rng = self.rng
        victim = rng.choices([v for v, _ in VICTIMS], [w for _, w in VICTIMS])[0]
        phase = rng.choice(VICTIM_PHASES.get(victim, PHASES))
        fast_restart = phase == "mid_call_restart"
        if fast_restart:
            phase = "mid_call"
            if self.stack.sup_worker_kills:
                # A fresh supervisor: its first restart waits only the 0.5 s backoff.
                self.stack.stop_supervisor()
                self.stack.start_supervisor()
                self.after_worker_start()
        self.ensure_drivers()
        want: frozenset[Reply] | None = None
        mode = rng.choice(["shadow", "enabled"])
        delay = rng.uniform(0, 0.15)
        if fast_restart:
            want = frozenset({Reply.ACCEPT_NEAR_DEADLINE, Reply.SLOW})
        elif phase == "mid_call":
            want = frozenset({Reply.ACCEPT_DELAYED, Reply.ACCEPT_NEAR_DEADLINE, Reply.SLOW})
        elif phase in ("before_report", "after_report"):
            want = frozenset({Reply.ACCEPT_DELAYED, Reply.ACCEPT_NOW})
            mode, delay = "enabled", rng.uniform(0.2, 0.4)
        elif rng.random() < 0.8:
            want = FAST
        event, target = self.new_event(rnd, want)
        d0, d1 = self.drivers
        owner = rng.choice([d0, d1])
        other = d1 if owner is d0 else d0

        worker_before = self.stack.worker_pid()
        t_cmd = time.monotonic()
        if victim in ("worker", "supervisor") and phase == "before_claim":
            observed = "before_claim"  # killed before the request exists: it waits unclaimed
            self.kill(victim)
            self.command(owner, event, mode, delay)
        else:
            self.command(owner, event, mode, delay)
            if rng.random() < 0.25:  # the same artifact from another gateway at once
                self.command(other, event, rng.choice(["shadow", "enabled"]))
                self.counts["concurrent_duplicates"] += 1
            for _ in range(rng.randrange(0, 3)):
                e, _ = self.new_event(rnd, FAST)
                self.command(
                    rng.choice([d0, d1]), e, rng.choice(["shadow", "enabled"]), rng.uniform(0, 0.2)
                )
            if self.events and rng.random() < 0.3:  # an old artifact again
                e, _ = rng.choice(self.events)
                self.command(rng.choice([d0, d1]), e, rng.choice(["shadow", "enabled"]))
                self.counts["re_presentations"] += 1
            if victim == "none":
                observed = ""
            else:
                self.wait_phase(target, phase)
                killed_driver = owner if victim == "shim" else None
                self.kill(victim, killed_driver)
                observed = self.furthest(target)
        if victim != "none":
            key = "mid_call_restart" if fast_restart else phase
            self.kills[victim][observed] += 1
            self.aimed[f"{key}->{observed}"] += 1
        t1 = time.monotonic()
        self.recover(victim, worker_before, fast=fast_restart)
        t2 = time.monotonic()
        if fast_restart and observed == "mid_call" and t2 - t_cmd < WAIT_S:
            self.counts["mid_call_restart_ready_before_deadline"] += 1
            self.fast_targets.add(target)
        self.settle()
        t3 = time.monotonic()
        self.check(rnd)
        self.timing["recover"] += t2 - t1
        self.timing["settle"] += t3 - t2
        self.timing["check"] += time.monotonic() - t3

    def kill(self, victim: str, driver: Driver | None = None) -> None:
        st = self.stack
        if victim == "worker":
            pid = st.worker_pid()
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                st.sup_worker_kills += 1
            self._killed_worker = pid
        elif victim == "supervisor":
            self._orphan = st.worker_pid()
            assert st.sup is not None
            st.sup.send_signal(signal.SIGKILL)
            st.sup.wait()
        elif victim == "shim":
            assert driver is not None
            driver.kill()
            self.dead_drivers.append(driver)

    def recover(self, victim: str, worker_before: int | None, *, fast: bool = False) -> None:
        st = self.stack
        if victim == "worker":
            killed = self._killed_worker
            if st.sup_worker_kills >= 2 and not fast:
                # Keep the supervisor's backoff short: replace it (its worker, if
                # already restarted, stops gracefully on SIGTERM).
                st.stop_supervisor()
                st.start_supervisor()
            else:
                end = time.monotonic() + 60
                while st.worker_pid() in (None, killed) and time.monotonic() < end:
                    time.sleep(0.02)
                st.wait_ready()
            self.after_worker_start()
        elif victim == "supervisor":
            orphan = self._orphan
            t0 = time.monotonic()
            if orphan is not None:
                # We are the subreaper: the orphan is our child now; it must stop on
                # its own (PR_SET_PDEATHSIG -> SIGTERM -> graceful stop).
                while _alive(orphan) and time.monotonic() - t0 < 20:
                    try:
                        os.waitpid(orphan, os.WNOHANG)
                    except ChildProcessError:
                        pass
                    time.sleep(0.02)
                if _alive(orphan):
                    self.violate("orphan_worker_survived")
                    os.kill(orphan, signal.SIGKILL)
                try:
                    os.waitpid(orphan, 0)
                except ChildProcessError:
                    pass
                self.orphan_exit_max = max(self.orphan_exit_max, time.monotonic() - t0)
            st.start_supervisor()
            self.after_worker_start()
        elif victim == "shim":
            self.ensure_drivers()

    def after_worker_start(self) -> None:
        """Invariant 5: the restarted worker left nothing overdue open."""
        self.counts["worker_starts"] += 1
        self.world.refresh()
        started = self.stack.worker_started_at
        answered = self.answered_attempts()
        for row in self.world.open_attempts():
            if row["deadline_at_utc"] <= started and row["attempt_id"] not in answered:
                self.violate("overdue_open_after_restart")

    def answered_attempts(self) -> set[str]:
        """Attempts whose accepted response file is in responses/ (lifecycle rule 3)."""
        out: set[str] = set()
        d = self.stack.root.responses
        for n in os.listdir(d):
            try:
                resp = json.loads((d / n).read_bytes())
            except (OSError, ValueError):
                continue
            if resp.get("status") == "accepted" and resp.get("attempt_id"):
                out.add(resp["attempt_id"])
        return out

    def settle(self, timeout: float = 25.0) -> None:
        end = time.monotonic() + timeout
        r = self.stack.root
        while time.monotonic() < end:
            busy = sum(d.pending() for d in self.drivers if d.alive())
            spool = sum(len(os.listdir(p)) for p in (r.requests, r.claimed, r.reports))
            if not busy and not spool:
                return
            time.sleep(0.02)
        self.violate("did_not_settle")

    # -- invariants ----------------------------------------------------------------

    def check(self, rnd: int) -> None:
        w = self.world
        w.refresh()
        for akey, n in w.fake_counts.items():
            if n > 1:
                self.violate("second_request_for_an_artifact")
            if akey not in w.starts:
                self.violate("request_without_start_row")
        for d in self.drivers + self.dead_drivers:
            for x in d.snapshot():
                if x["kind"] != "presented" or (d.name, x["id"]) in self.checked_lines:
                    continue
                self.checked_lines.add((d.name, x["id"]))
                self.check_candidate(x)
        for row in w.terminals.values():
            if (
                row["outcome"] in ("selected", "shadow_selected")
                and reply_for(row["artifact_key"]) not in ACCEPTING
            ):
                self.violate("selected_without_valid_answer")
        self.check_in_flight()
        if any(RESERVATION_MARK in n for n in self.tmp_names()):
            self.violate("reservation_left_behind")
        out = subprocess.run(
            [
                PY,
                "-m",
                "kexpr.ops.cli",
                "journal",
                "verify",
                "--data-root",
                str(self.stack.root.root),
                "--json",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            self.counts["verify_failures"] += 1
            self.violate(f"journal_verify_failed:{out.stdout.strip()}")

    def check_in_flight(self) -> None:
        """Invariant 7: the starter never gets in_flight, so an artifact has at
        most one fewer in_flight answer than presentations."""
        n: Counter[str] = Counter()
        for d in self.drivers + self.dead_drivers:
            for x in d.snapshot():
                if (
                    x["kind"] == "presented"
                    and x["outcome"] == "in_flight"
                    and x.get("artifact_key")
                ):
                    n[x["artifact_key"]] += 1
        for akey, k in n.items():
            if k > self.sent[akey] - 1 and akey not in self.in_flight_flagged:
                self.in_flight_flagged.add(akey)
                self.violate("in_flight_to_the_starter")

    def check_candidate(self, x: dict[str, Any]) -> None:
        self.counts[f"candidates_{x['outcome']}"] += 1
        akey = x.get("artifact_key")
        if akey in self.fast_targets:
            self.counts[f"mid_call_restart_candidates_{x['outcome']}"] += 1
            # A second gateway's request for the same artifact, answered while the
            # old worker's call was still running, is rightly in_flight (not
            # publishable); the starter never is, which invariant 7 counts
            # (check_in_flight). Every other answer must be publishable.
            if not x["permitted"] and x["outcome"] != "in_flight":
                self.violate("mid_call_restart_not_publishable")
        if x["body"] == "other":
            self.violate("unexpected_body")
        if x["status"] == "selected":
            self.counts["selected_published"] += 1
            ok = (
                x["mode"] == "enabled"
                and x["outcome"] == "accepted"
                and x["body"] == "selected"
                and akey is not None
                and reply_for(akey) in ACCEPTING
                and x["elapsed"] <= IN_TIME_S
                and self.world.fake_counts.get(akey) == 1
            )
            if not ok:
                self.violate("unvalidated_or_late_text_publishable")
        elif x["body"] != "canonical":
            self.violate("canonical_status_with_other_body")
        if x["mode"] == "shadow" and x["status"] != "canonical":
            self.violate("shadow_not_canonical")
        if not x["permitted"] and x["outcome"] != "in_flight":
            self.violate("unexpected_not_permitted")

    # -- the whole run -------------------------------------------------------------

    def run(self, rounds: int, max_seconds: float | None = None) -> dict[str, Any]:
        """``max_seconds``/SIGTERM/SIGINT: no new round after that; the end-of-run
        checks still run and the counts say how many rounds were done."""
        t0 = time.monotonic()
        st = self.stack
        st.start_fake()
        st.start_supervisor()
        self.after_worker_start()
        done = 0
        for rnd in range(1, rounds + 1):
            if self.stop_requested or (
                max_seconds is not None and time.monotonic() - t0 > max_seconds
            ):
                log(f"stopping early after {done} rounds")
                break
            try:
                self.round(rnd)
            except Violation as e:
                self.violate(str(e))
                break
            done = rnd
            if rnd % 10 == 0 or rnd == rounds:
                log(
                    f"round {rnd}/{rounds}: artifacts={len(self.world.fake_counts)} "
                    f"violations={len(self.violations)} elapsed={time.monotonic() - t0:.0f}s"
                )
        # The end: every attempt eventually becomes terminal. Stop everything, let
        # every deadline pass, start the worker once more, stop it.
        for d in self.drivers:
            d.close()
        st.stop_supervisor()
        self.world.refresh()
        latest = max((r["deadline_at_utc"] for r in self.world.starts.values()), default="")
        while latest and dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") <= latest:
            time.sleep(0.1)
        try:
            st.start_supervisor()
            self.after_worker_start()
        except Violation as e:
            self.violate(str(e))
        st.stop_supervisor()
        out = subprocess.run(
            [
                PY,
                "-m",
                "kexpr.ops.cli",
                "journal",
                "verify",
                "--data-root",
                str(st.root.root),
                "--json",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        final = json.loads(out.stdout) if out.stdout.strip() else {}
        if out.returncode != 0:
            self.counts["verify_failures"] += 1
            self.violate("final_verify_failed")
        self.world.refresh()
        answered = self.answered_attempts()
        unanswered_open = [r for r in self.world.open_attempts() if r["attempt_id"] not in answered]
        if final.get("open_attempts") is None or unanswered_open:
            self.violate("open_attempts_at_end")
        self.check_candidates_final()
        w = self.world
        w.refresh()
        outcomes = Counter(r["outcome"] for r in w.terminals.values())
        return {
            "rounds": done,
            "rounds_requested": rounds,
            "kills": {v: dict(sorted(c.items())) for v, c in sorted(self.kills.items())},
            "kills_total": sum(sum(c.values()) for c in self.kills.values()),
            "aimed_to_observed": dict(sorted(self.aimed.items())),
            "seconds": {k: round(v, 1) for k, v in sorted(self.timing.items())},
            "artifacts_presented": len(self.events),
            "artifacts_requested": len(w.fake_counts),
            "requests_total": sum(w.fake_counts.values()),
            "max_requests_per_artifact": max(w.fake_counts.values(), default=0),
            "attempts": len(w.starts),
            "open_attempts_at_end": len(unanswered_open),
            "answered_open_at_end": final.get("open_attempts", 0) - len(unanswered_open),
            "mid_call_restart_ready_before_deadline": self.counts[
                "mid_call_restart_ready_before_deadline"
            ],
            "mid_call_restart_candidates": {
                k.removeprefix("mid_call_restart_candidates_"): v
                for k, v in sorted(self.counts.items())
                if k.startswith("mid_call_restart_candidates_")
            },
            "terminal_outcomes": dict(sorted(outcomes.items())),
            "selected_published": self.counts["selected_published"],
            "concurrent_duplicates": self.counts["concurrent_duplicates"],
            "re_presentations": self.counts["re_presentations"],
            "worker_starts": self.counts["worker_starts"],
            "orphan_exit_max_s": round(self.orphan_exit_max, 2),
            "verify_failures": self.counts["verify_failures"],
            "violations": len(self.violations),
            "violation_kinds": dict(Counter(v.split(":")[0] for v in self.violations)),
            "elapsed_s": round(time.monotonic() - t0, 1),
        }

    def check_candidates_final(self) -> None:
        for d in self.drivers + self.dead_drivers:
            for x in d.snapshot():
                if x["kind"] == "presented" and (d.name, x["id"]) not in self.checked_lines:
                    self.checked_lines.add((d.name, x["id"]))
                    self.check_candidate(x)

    def close(self) -> None:
        for d in self.drivers + self.dead_drivers:
            if d.alive():
                d.kill()
        self.stack.close()


def main() -> int:
    p = argparse.ArgumentParser(prog="campaign.py")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--max-seconds", type=float, default=None, help="start no round after this")
    a = p.parse_args()
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "big")
    # Orphans (a SIGKILLed supervisor's worker) are re-parented to us, so that we
    # can see them exit and reap them.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="kexpr-crash-"))
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    log(f"crash campaign: rounds={a.rounds} seed={seed} workdir={work}")
    c = Campaign(work, seed)

    def on_signal(signum: int, frame: object) -> None:
        c.stop_requested = True  # finish the round, run the end-of-run checks, print

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        counts = c.run(a.rounds, a.max_seconds)
    finally:
        c.close()
    counts["seed"] = seed
    ok = not c.violations
    if ok and a.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(counts, sort_keys=True), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

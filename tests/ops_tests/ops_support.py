"""Helpers for the ops tests: run ``kexpr`` as a process, start a supervised worker
with a chosen group, build journals with controlled timestamps."""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kit.poll import until
from kit.supervisor import TEST_KEY, Egress, stop_supervisor
from kit.supervisor import start_supervisor as start

from kexpr.spool.journal import Event, Journal, Outcome, Phase, SpoolMode, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import wait_ready

CLEAN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
# A non-root group for processes whose dumpability the audit must be able to read
# (proc(5): root:root vs the process's own ids; uid 0 + gid 0 cannot be told apart).
NOGROUP = 65534


def kexpr(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", *map(str, args)],
        env=CLEAN_ENV if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Supervised:
    root: DataRoot
    proc: subprocess.Popen[str]
    stderr: str = ""

    def worker_pid(self) -> int:
        return int(json.loads(self.root.status_file.read_bytes())["pid"])

    def stop(self, timeout: float = 20) -> int:
        stop_supervisor(self.proc, timeout)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.stderr = self.proc.stderr.read()
            self.proc.stderr.close()
        return self.proc.returncode


def start_supervisor(
    data_root: Path,
    *,
    key: str | None = TEST_KEY,
    extra_args: Sequence[str] = (),
    fake: Egress | None = None,
    group: int | None = None,
    wait: bool = True,
) -> Supervised:
    """``kexpr supervise`` as an operator runs it, optionally under another group."""
    proc = start(
        data_root,
        fake=fake,
        key=key,
        args=extra_args,
        env=CLEAN_ENV,
        wait=False,
        stderr=subprocess.PIPE,
        text=True,
        group=group,
    )
    sup = Supervised(DataRoot(data_root), proc)
    if wait and not wait_ready(sup.root, 30.0):
        sup.stop()
        raise AssertionError("worker did not become ready")
    return sup


def wait_for(pred: object, timeout: float = 20.0, step: float = 0.05) -> bool:
    """`kit.poll.until`, a status or journal file read mid-replace counting as "not yet"."""
    assert callable(pred)
    return until(pred, timeout, step, tolerate=(OSError, ValueError, KeyError))


@dataclass(frozen=True)
class Row:
    """One attempt to write into a journal: surface, mode, start time, outcome
    (None = left open)."""

    surface: str
    mode: str
    started: dt.datetime
    outcome: str | None


def build_journal(root: Path, rows: Iterable[Row]) -> DataRoot:
    """A real journal (the product's own writer), with chosen timestamps."""
    dr = DataRoot(root)
    dr.ensure()
    j = Journal(dr)
    j.load()
    with j.locked():
        for row in rows:
            rec = j.append_start(
                artifact_key=secrets.token_hex(32),
                surface=row.surface,
                mode=SpoolMode(row.mode),
                attempt_id=secrets.token_hex(16),
                started_at=row.started,
                deadline_at_utc=format_ts(row.started + dt.timedelta(seconds=4)),
            )
            if row.outcome is None:
                continue
            outcome = Outcome(row.outcome)
            finished = row.started + dt.timedelta(seconds=1)
            if outcome in (
                Outcome.SHADOW_SELECTED,
                Outcome.SELECTED,
                Outcome.COMMIT_FAILED,
                Outcome.PUBLICATION_FAILED,
            ):
                j.append_terminal(rec, Phase.AWAITING_REPORT, Event.REPORT, outcome, finished)
            elif outcome is Outcome.CLAIM_EXPIRED_CANONICAL:
                j.append_terminal(rec, Phase.OPEN, Event.EXPIRE, outcome, finished)
            else:
                j.append_terminal(rec, Phase.OPEN, Event.CALL_FAILED, outcome, finished)
    return dr


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False

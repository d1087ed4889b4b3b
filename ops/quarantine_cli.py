"""``kexpr quarantine clear --data-root D``: ask a worker in quarantine to run its
start-up checks again and, if they pass, to serve again without a restart
(`kexpr.worker.resume` holds the rules; docs/cli.md "Leaving quarantine").

Before it asks, it reads ``worker.status.json``: no worker (no status file, or
one older than ``--stale-after``) and a worker not in quarantine are said and
nothing is written. Then it writes the one-shot request
``<data root>/quarantine-clear.request`` (a random nonce) in the data root's
file mode and waits for the worker's answer in its status file (the worker looks
once a second): ``cleared``, or ``refused`` with the enum word of the cause that
is still there.

Run it as the worker's user (the owner of ``worker.status.json``): the worker
reads only files of its own user or, in a shared-group root, of the group's.

Exit codes (docs/cli.md): 0 cleared (or nothing to clear), 1 refused, no answer,
or no worker, 2 usage or no data root to read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Final

from kexpr.ops.inputs import data_root_problem, refuse
from kexpr.ops.readers import ReadRefused, read_worker_status
from kexpr.spool.fsio import publish
from kexpr.spool.layout import DEFAULT_DATA_ROOT, DataRoot
from kexpr.spool.status import READY, STALE_AFTER_S, WorkerStatus
from kexpr.worker.resume import request_bytes

PROG: Final = "kexpr quarantine clear"
POLL_S: Final = 0.2
_ENUMISH: Final = re.compile(r"[a-z][a-z_]{0,40}")


def _status(root: DataRoot) -> WorkerStatus | None:
    try:
        return read_worker_status(root)
    except ReadRefused:
        return None


def _age_s(status: WorkerStatus) -> float | None:
    return status.heartbeat_age_s(dt.datetime.fromtimestamp(time.time(), dt.UTC))


def _word(value: object) -> str | None:
    """An enum word from the status file, else None: a planted string is never echoed."""
    return value if isinstance(value, str) and _ENUMISH.fullmatch(value) else None


def _say(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, sort_keys=True))
        return
    text = result["result"]
    if result.get("why"):
        text += f": {result['why']}"
    if result.get("was"):
        text += f" (was {result['was']})"
    print(f"quarantine clear: {text}")


def cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="kexpr quarantine",
        description="clear: ask a quarantined worker to re-run its start-up checks and serve "
        "again if they pass (exit 0 cleared or nothing to clear, 1 refused or no answer, "
        "2 unusable input)",
    )
    sub = p.add_subparsers(dest="command", required=True)
    clear = sub.add_parser("clear", help="re-verify and leave quarantine, without a restart")
    clear.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    clear.add_argument(
        "--wait", type=float, default=10.0, help="seconds to wait for the answer (default 10)"
    )
    clear.add_argument(
        "--stale-after",
        type=float,
        default=STALE_AFTER_S,
        help="a heartbeat older than this: no worker",
    )
    clear.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if (problem := data_root_problem(a.data_root)) is not None:
        return refuse(PROG, "--data-root", a.data_root, problem, json_out=a.json)
    root = DataRoot(a.data_root)
    status = _status(root)
    age = None if status is None else _age_s(status)
    if status is None or age is None or age > a.stale_after or status.state != READY:
        _say({"result": "no_worker", "was": None, "why": None}, a.json)
        return 1
    was = _word(status.document.get("quarantine"))
    if was is None:
        _say({"result": "not_quarantined", "was": None, "why": None}, a.json)
        return 0
    owner = os.lstat(root.status_file).st_uid
    if os.geteuid() != owner:
        print(
            f"{PROG}: run it as the worker's user (uid {owner}), e.g. "
            f"sudo -u '#{owner}' kexpr quarantine clear --data-root …",
            file=sys.stderr,
        )
        return 2
    nonce = secrets.token_hex(16)
    try:
        try:
            publish(root.tmp, root.quarantine_clear, request_bytes(nonce))
        except FileExistsError:  # an earlier ask nobody answered: this one replaces it
            os.unlink(root.quarantine_clear)
            publish(root.tmp, root.quarantine_clear, request_bytes(nonce))
    except OSError as e:
        why = getattr(e, "reason", None)
        _say({"result": "not_asked", "was": was, "why": str(why or "io_error")}, a.json)
        return 1
    deadline = time.monotonic() + a.wait
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        status = _status(root)
        answer = None if status is None else status.document.get("quarantine_clear")
        if isinstance(answer, dict) and answer.get("nonce") == nonce:
            result = {
                "result": "cleared" if answer.get("result") == "cleared" else "refused",
                "was": was,
                "why": _word(answer.get("why")),
            }
            _say(result, a.json)
            return 0 if result["result"] == "cleared" else 1
    _say({"result": "no_answer", "was": was, "why": None}, a.json)
    return 1

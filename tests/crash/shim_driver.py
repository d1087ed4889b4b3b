"""The crash campaign's gateway: a shim process (test code only).

``python tests/crash/shim_driver.py --data-root D`` imports `gateway_shim` exactly
as a host would (started without the provider key), prints ``{"kind":"ready"}``,
then reads one JSON command per line on stdin::

    {"id": 7, "event": "evt-…", "mode": "shadow"|"enabled",
     "commit_delay": 0.2, "host": "selected"|"commit_failed"|"publication_failed"}

and runs each in its own thread (so commands race like concurrent host tasks):
the styled weekly body presented as artifact ``event`` (`kit.bodies.present_styled`:
the one message the fit table styles) → one line ``{"kind":"presented", …}`` with the candidate's
enums, whether its body is the canonical body, the expected selected body or
*anything else*, and the seconds it took; for an enabled-mode ``accepted``
candidate it then "commits" for ``commit_delay`` seconds, reports, and prints
``{"kind":"reported", …}``. Lines are flushed one by one so a SIGKILL loses at
most the line being written. EOF on stdin: wait for running commands, exit 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

# Run as a script: the test kit's folder (tests/) on the path, as pytest has it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kit.bodies import STYLED_BODY, STYLED_SELECTED, STYLED_SURFACE, present_styled

from gateway_shim import (
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)

BODY = STYLED_BODY
# The fake's valid composition is `fakeapi.default_style`: 다만 before the hold.
SELECTED = STYLED_SELECTED


def artifact_fields(event: str) -> tuple[str, ...]:
    """The artifact key's inputs of the styled weekly presented as ``event``: its
    surface, schedule key, kind and KST day (`kit.bodies.present_styled`)."""
    return (STYLED_SURFACE, event, "weekly_report", "2025-11-30")


_out = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    line = json.dumps(obj, sort_keys=True)
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-root", required=True, type=Path)
    a = p.parse_args()
    coords = {
        m: KoreanExpressionCoordinator(
            KoreanExpressionConfig.from_block(exact_block(m, weekly=True)), a.data_root
        )
        for m in (Mode.SHADOW, Mode.ENABLED)
    }

    def run(cmd: dict[str, Any]) -> None:
        coord = coords[Mode(cmd["mode"])]
        t0 = time.monotonic()
        cand = present_styled(coord, cmd["event"])
        elapsed = time.monotonic() - t0
        kind = (
            "canonical" if cand.body == BODY else "selected" if cand.body == SELECTED else "other"
        )
        emit(
            {
                "kind": "presented",
                "id": cmd["id"],
                "event": cmd["event"],
                "mode": cmd["mode"],
                "outcome": cand.outcome.value,
                "status": cand.status.value,
                "permitted": cand.publication_permitted,
                "body": kind,
                "attempt_id": cand.attempt_id,
                "artifact_key": cand.artifact_key,
                "elapsed": round(elapsed, 4),
            }
        )
        if cand.outcome is Outcome.ACCEPTED:
            time.sleep(float(cmd.get("commit_delay", 0.0)))  # the host's durable write / edit
            coord.report(cand, cmd.get("host", "selected"))
            emit(
                {
                    "kind": "reported",
                    "id": cmd["id"],
                    "event": cmd["event"],
                    "attempt_id": cand.attempt_id,
                }
            )

    threads: list[threading.Thread] = []
    emit({"kind": "ready"})
    for raw in sys.stdin:
        if raw.strip():
            t = threading.Thread(target=run, args=(json.loads(raw),))
            t.start()
            threads.append(t)
    for t in threads:
        t.join()
    for c in coords.values():
        c.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

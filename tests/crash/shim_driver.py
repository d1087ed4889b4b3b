"""The crash campaign's gateway: a shim process (test code only).

``python tests/crash/shim_driver.py --data-root D`` imports `gateway_shim` exactly
as a host would (started without the provider key), prints ``{"kind":"ready"}``,
then reads one JSON command per line on stdin::

    {"id": 7, "event": "evt-…", "mode": "shadow"|"enabled",
     "commit_delay": 0.2, "host": "selected"|"commit_failed"|"publication_failed"}

and runs each in its own thread (so commands race like concurrent host tasks):
``present_daily`` → one line ``{"kind":"presented", …}`` with the candidate's
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

from gateway_shim import (
    DailyFacts,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
    format_daily,
)

STATUS = "저장된 오늘 기록을 확인했습니다."
BODY = format_daily(
    weight="72.4kg",
    intake="2,150kcal",
    macros="탄수화물 260g · 단백질 138g · 지방 70g",
    training="스쿼트 5세트",
    sleep="6.7시간 · 수면 질 4/5",
    condition="3/5",
    digestion="정상",
    water="2.1L",
)
# The fake's valid composition is `fakeapi.default_style`: "그리고 [[P:01]]."
SELECTED = BODY.replace(STATUS, "그리고 " + STATUS)

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
            KoreanExpressionConfig.from_block(exact_block(m, daily=True)), a.data_root
        )
        for m in (Mode.SHADOW, Mode.ENABLED)
    }

    def run(cmd: dict[str, Any]) -> None:
        coord = coords[Mode(cmd["mode"])]
        t0 = time.monotonic()
        cand = coord.present_daily(
            BODY, facts=DailyFacts(complete=True), finalized_event_id=cmd["event"]
        )
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

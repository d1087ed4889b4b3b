"""The gateway side of the shadow proof, as its own process (started by
`shadow_harness.run_proof` with a clean environment: no key).

Presents ``--count`` synthetic artifacts per surface through the real shim in
shadow mode, hands every candidate to the host step (whose entry points all
raise), captures every log record and telemetry event, writes the results, says
``READY`` and waits for stdin to close (so that ``kexpr audit`` can inspect this
process while it is alive)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from shadow_harness import CASES, HostCallForbidden, HostSpy, host_step

from gateway_shim import KoreanExpressionConfig, KoreanExpressionCoordinator, Mode, exact_block


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(
            {"logger": record.name, "level": record.levelname, "message": record.getMessage()}
        )


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-root", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--surfaces", required=True)
    a = p.parse_args()
    capture = _Capture()
    logging.getLogger().addHandler(capture)
    logging.getLogger().setLevel(logging.DEBUG)
    telemetry: list[dict[str, str]] = []
    wanted = a.surfaces.split(",")
    cases = [c for c in CASES if c.surface in wanted]
    config = KoreanExpressionConfig.from_block(
        exact_block(Mode.SHADOW, **{c.switch: True for c in cases})
    )
    assert config.valid
    coord = KoreanExpressionCoordinator(
        config, a.data_root, telemetry=lambda e: telemetry.append(dict(e))
    )
    spy = HostSpy()
    run = os.urandom(4).hex()
    candidates = []
    try:
        for case in cases:
            for i in range(a.count):
                cand = case.present(coord, i, run)
                try:
                    host_step(spy, case.surface, cand)
                except HostCallForbidden:
                    pass  # counted in spy.calls
                candidates.append(
                    {
                        "surface": case.surface,
                        "outcome": cand.outcome.value,
                        "status": cand.status.value,
                        "publication_permitted": cand.publication_permitted,
                        "artifact_key": cand.artifact_key,
                    }
                )
    finally:
        coord.close()
    end = time.monotonic() + 5  # telemetry is delivered on a daemon thread
    while len(telemetry) < len(candidates) and time.monotonic() < end:
        time.sleep(0.02)
    a.out.write_text(
        json.dumps(
            {
                "candidates": candidates,
                "host_calls": spy.calls,
                "telemetry": telemetry,
                "log_records": capture.records,
                "gateway_environment_had_key": "OPENAI_API_KEY" in os.environ,
                "gateway_imported_openai": "openai" in sys.modules,
            },
            ensure_ascii=False,
        ),
        "utf-8",
    )
    print("READY", flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

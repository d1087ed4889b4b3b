"""``python -m fakeapi --dir D [--mode accept|invalid|slow|error500] [--port P]``

Writes ``D/ca.pem``, appends one JSON line per fake-API request to
``D/requests.jsonl`` (``{"artifact_key", "t" (time.time()), "method", "path"}``),
then atomically writes ``D/fake.json`` (``{"proxy_url", "pid", "port", "ca_file",
"requests_log", "mode"}``) once the proxy accepts connections. Serves until
SIGTERM/SIGINT, then exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from pathlib import Path
from types import FrameType

from .modes import MODES, behaviour_for_mode
from .server import FakeOpenAI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fakeapi")
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--mode", choices=MODES, default="accept")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    directory: Path = args.dir
    directory.mkdir(parents=True, exist_ok=True)

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    log = directory / "requests.jsonl"
    log.touch()
    with FakeOpenAI(
        directory, behaviour=behaviour_for_mode(args.mode), port=args.port, request_log=log
    ) as fake:
        info = {
            "proxy_url": fake.proxy_url,
            "pid": os.getpid(),
            "port": fake.port,
            "ca_file": str(fake.ca_file),
            "requests_log": str(log),
            "mode": args.mode,
        }
        tmp = directory / f".fake.json.{os.getpid()}"
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, directory / "fake.json")
        while not stop.wait(1.0):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

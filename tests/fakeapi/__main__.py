"""``python -m fakeapi --dir D [--mode accept|invalid|slow|error500] [--port P]
[--rate TOKENS_PER_S [--first-token S]] [--layout compact|pretty]``

Writes ``D/ca.pem``, appends one JSON line per fake-API request to
``D/requests.jsonl`` (``{"artifact_key", "t" (time.time()), "method", "path"}``)
on its arrival, one per model answer to ``D/answers.jsonl`` when the model starts
writing it (``{"artifact_key", "completion_tokens", "prompt_tokens",
"finish_reason", "seconds", "t"}``: the reply is due ``seconds`` after ``t``), then atomically writes ``D/fake.json`` (``{"proxy_url", "pid",
"port", "ca_file", "requests_log", "answers_log", "mode", "model"}``) once the
proxy accepts connections. Serves until SIGTERM/SIGINT, then exits 0.

``--rate``: the model writes at this many tokens per second after ``--first-token``
seconds (default 0.3, the fastest published first token); without ``--rate`` it
answers at once (`fakeapi.generation` Rule 2). ``--layout``: the answer's JSON
layout (default compact).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from pathlib import Path
from types import FrameType

from kexpr.worker.signalstop import SignalStop

from .generation import FakeModel
from .modes import MODES, behaviour_for_mode
from .server import FakeOpenAI

DEFAULT_FIRST_TOKEN_S = 0.3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fakeapi")
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--mode", choices=MODES, default="accept")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rate", type=float, default=None, metavar="TOKENS_PER_S")
    parser.add_argument("--first-token", type=float, default=None, metavar="S")
    parser.add_argument("--layout", choices=("compact", "pretty"), default="compact")
    args = parser.parse_args(argv)
    if args.first_token is not None and args.rate is None:
        parser.error("--first-token needs --rate")
    first_token = DEFAULT_FIRST_TOKEN_S if args.first_token is None else args.first_token
    try:
        model = (
            FakeModel(layout=args.layout)
            if args.rate is None
            else FakeModel(first_token_s=first_token, tokens_per_s=args.rate, layout=args.layout)
        )
    except ValueError as exc:
        parser.error(str(exc))
    directory: Path = args.dir
    directory.mkdir(parents=True, exist_ok=True)

    stop = SignalStop()  # set by the handler: no lock (kexpr.worker.signalstop)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    log = directory / "requests.jsonl"
    log.touch()
    answers = directory / "answers.jsonl"
    answers.touch()
    with FakeOpenAI(
        directory,
        behaviour=behaviour_for_mode(args.mode),
        port=args.port,
        request_log=log,
        model=model,
        answer_log=answers,
    ) as fake:
        info = {
            "proxy_url": fake.proxy_url,
            "pid": os.getpid(),
            "port": fake.port,
            "ca_file": str(fake.ca_file),
            "requests_log": str(log),
            "answers_log": str(answers),
            "mode": args.mode,
            "model": {
                "first_token_s": model.first_token_s,
                "tokens_per_s": model.tokens_per_s,
                "layout": model.layout,
            },
        }
        tmp = directory / f".fake.json.{os.getpid()}"
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, directory / "fake.json")
        while not stop.wait(1.0):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The crash campaign's fake API, in its own process (test code only).

``python tests/crash/fake_server.py --dir D`` — the loopback HTTPS fake behind a
real CONNECT proxy (`fakeapi.FakeOpenAI`), answering per artifact as
`behaviour.reply_for` says. Appends one line per request to ``D/requests.jsonl``
*on arrival* (before answering), then writes ``D/fake.json`` once listening.
Serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from types import FrameType

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from behaviour import Reply, delay_for, reply_for
from fakeapi import (
    FakeOpenAI,
    FakeReply,
    RecordedRequest,
    chat_completion,
    compose,
    default_style,
    error_reply,
    invalid_style,
)

from kexpr.worker.signalstop import SignalStop


def answer(req: RecordedRequest) -> FakeReply:
    capsule = req.capsule
    akey = req.artifact_key
    if capsule is None or akey is None:
        return error_reply(400, "no capsule", type_="invalid_request_error")
    reply = reply_for(akey)
    delay = delay_for(akey)
    if reply is Reply.ERROR500:
        return error_reply(500, "fake error")
    if reply is Reply.INVALID:
        content = json.dumps(compose(capsule, invalid_style(capsule)), ensure_ascii=False)
        return FakeReply(body=chat_completion(content), delay_s=delay)
    content = json.dumps(compose(capsule, default_style(capsule)), ensure_ascii=False)
    if reply is Reply.TRUNCATED:
        return FakeReply(body=chat_completion(content[:40], finish_reason="length"))
    return FakeReply(body=chat_completion(content), delay_s=delay)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True, type=Path)
    a = p.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    stop = SignalStop()  # set by the handler: no lock (kexpr.worker.signalstop)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log = a.dir / "requests.jsonl"
    log.touch()
    with FakeOpenAI(a.dir, behaviour=answer, request_log=log) as fake:
        info = {"proxy_url": fake.proxy_url, "ca_file": str(fake.ca_file), "pid": os.getpid()}
        tmp = a.dir / f".fake.json.{os.getpid()}"
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, a.dir / "fake.json")
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

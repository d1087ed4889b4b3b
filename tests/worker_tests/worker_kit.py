"""The worker test kit: a controllable clock, a scripted provider fed through an
``httpx.MockTransport``, an in-process worker on them, and the spool helpers the
worker tests share (submit a request, read a response or the journal)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import httpx
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT

from kexpr.spool.canonical import canonical_json
from kexpr.spool.contract import Capsule, SlotPolicy
from kexpr.spool.contract.answers import answer_json
from kexpr.spool.fsio import publish
from kexpr.spool.journal import Journal, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import (
    SPOOL_VERSION,
    SpoolRequest,
    parse_response,
)
from kexpr.worker.daemon import Worker
from kexpr.worker.provider import build_client

T0 = dt.datetime(2026, 11, 30, 9, 0, 0, tzinfo=dt.UTC)
# A composition of the one styled slot (the weekly goal-missing interpretation).
STYLED_GENERATED = "[[P:01]]. 다만 [[A:01]]."

# The composition the scripted provider writes by default for the styled weekly
# slot (`kit.spool.STYLED_SLOT`): the fit table's first, 다만 before the hold.
STYLED_GENERATED = "[[P:01]]. 다만 [[A:01]]."


class Clock:
    """The worker's wall clock and monotonic clock, advanced together; `step`
    moves the wall clock alone (a clock step, spool.lifecycle rule 7)."""

    def __init__(self) -> None:
        self.now = T0
        self.mono = 1000.0

    def __call__(self) -> dt.datetime:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)
        self.mono += seconds

    def step(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def completion(content: str, finish_reason: str = "stop") -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4.1-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
    }


def composition_for(capsule: dict[str, object], generated: str) -> str:
    return answer_json(capsule, lambda _: generated, compact=False)


class Provider:
    """A MockTransport handler that counts requests per artifact."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []
        self.reply: Callable[[dict[str, object]], httpx.Response] = lambda capsule: httpx.Response(
            200, json=completion(composition_for(capsule, STYLED_GENERATED))
        )
        self.on_call: Callable[[], None] = lambda: None

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        capsule = json.loads(body["messages"][-1]["content"])
        self.calls.append(capsule)
        self.on_call()
        return self.reply(capsule)


def make_worker(
    root: DataRoot, provider: Provider, clock: Clock, env: dict[str, str], **kw: object
) -> Worker:
    client = build_client(http_client=httpx.Client(transport=httpx.MockTransport(provider.handler)))
    kw.setdefault("monotonic", clock.monotonic)
    w = Worker(root, environ=env, client_factory=lambda: client, clock=clock, **kw)  # type: ignore[arg-type]
    w.prepare()
    assert w.journal_ok
    return w


def submit(
    root: DataRoot,
    clock: Clock,
    akey: str = "a" * 32,
    rid: str | None = None,
    mode: str = "shadow",
    *,
    age_s: float = 0.0,
    into: Path | None = None,
    surface: str = STYLED_SURFACE,
    slot: SlotPolicy = STYLED_SLOT,
) -> str:
    """A request for the styled weekly message (`kit.spool.STYLED_SLOT`) written
    ``age_s`` seconds ago (the shim's 4 s deadline) into ``into``: by default
    claimed/, as the worker finds it after its claim rename; ``root.requests`` for a
    test that claims it through the worker. ``surface``/``slot``: another capsule,
    swapped in as bytes, as an older shim would write it, for a slot today's models
    refuse to build (`slot_unstyleable`)."""
    rid = rid or format(len(list(root.claimed.iterdir())) + hash(clock.now) % 10**8, "032x")[-32:]
    submitted = clock.now - dt.timedelta(seconds=age_s)
    capsule = Capsule(
        schema_version="korean-expression-v4",
        surface=STYLED_SURFACE,
        artifact_key=akey,
        slots=(STYLED_SLOT,),
    )
    req = SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=rid,
        submitted_at_utc=format_ts(submitted),
        deadline_at_utc=format_ts(submitted + dt.timedelta(seconds=4)),
        mode=mode,  # type: ignore[arg-type]
        capsule=capsule,
    )
    data = req.to_bytes()
    if (surface, slot) != (STYLED_SURFACE, STYLED_SLOT):
        styled = capsule.model_dump(mode="json")
        swapped = {**styled, "surface": surface, "slots": [slot.model_dump(mode="json")]}
        old, new = canonical_json(styled).encode(), canonical_json(swapped).encode()
        assert data.count(old) == 1
        data = data.replace(old, new)
    publish(root.tmp, (into or root.claimed) / f"{rid}.json", data)
    return rid


def response(root: DataRoot, rid: str):
    return parse_response((root.responses / f"{rid}.json").read_bytes())


def outcomes(root: DataRoot) -> list[str | None]:
    j = Journal(root)
    idx = j.load()
    return [r.outcome.value if r.outcome else None for r in idx.by_attempt.values()]


def rid(n: int) -> str:
    return f"{n:032x}"


def status(root: DataRoot) -> dict[str, object]:
    return json.loads(root.status_file.read_bytes())


def raw_segment(root: DataRoot, day: str = "2026-11-30") -> bytes:
    return (root.outcomes / f"{day}.jsonl").read_bytes()

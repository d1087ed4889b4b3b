"""Reply model and reply builders for the loopback fake of the OpenAI API.

Test code only: nothing here is imported by product code.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kexpr.spool.contract.answers import answer_document
from kexpr.spool.contract.fit import compositions

from .generation import count_tokens

__all__ = [
    "Behaviour",
    "FakeReply",
    "RecordedRequest",
    "accept_behaviour",
    "brief_style",
    "capsule_of",
    "chat_completion",
    "compose",
    "compose_reply",
    "default_style",
    "error_reply",
    "invalid_style",
]

JsonBody = bytes | str | dict[str, Any] | list[Any]


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request received *inside* the TLS tunnel (i.e. by the fake API).

    ``headers`` has lower-case names; repeated headers are joined with ", ".
    ``json`` is the parsed body, or ``None`` when the body is not JSON.
    ``received_at`` is ``time.monotonic()`` when the whole body had arrived.
    ``connection_id`` numbers the TLS tunnels (1, 2, ...): two requests with the
    same id travelled over one kept-alive connection.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any | None
    received_at: float
    connection_id: int = 0

    @property
    def capsule(self) -> dict[str, Any] | None:
        return capsule_of(self)

    @property
    def artifact_key(self) -> str | None:
        capsule = capsule_of(self)
        if capsule is None:
            return None
        key = capsule.get("artifact_key")
        return key if isinstance(key, str) else None


@dataclass(frozen=True)
class FakeReply:
    """What the fake answers to one request.

    ``body``: bytes are sent as is, str as UTF-8, dict/list as JSON (UTF-8,
    ``ensure_ascii=False``). The default is the JSON object ``{}``.
    ``delay_s``: wait before sending anything (interruptible by shutdown; other
    connections are not blocked).
    ``drip_bytes_per_s``: send the headers at once, then the body at this rate.
    ``close_without_reply``: close the connection (no TLS close_notify, no HTTP
    response) instead of replying; applied after ``delay_s``.
    ``headers``: extra response headers (e.g. ``{"retry-after": "1"}``).
    ``answer``: a model answer (a JSON document, or a str written verbatim). When
    set, the fake's model writes it (`fakeapi.generation`): ``body`` becomes the
    chat completion of the answer in the model's layout, cut at the request's
    ``max_tokens``, with honest ``usage``, sent after ``delay_s`` plus the time
    the model takes to write it. ``None``: ``body`` is sent as built.
    """

    status: int = 200
    body: JsonBody = field(default_factory=dict)
    content_type: str = "application/json"
    delay_s: float = 0.0
    drip_bytes_per_s: float | None = None
    close_without_reply: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    answer: str | dict[str, Any] | list[Any] | None = None

    def body_bytes(self) -> bytes:
        body = self.body
        if isinstance(body, bytes):
            return body
        if isinstance(body, str):
            return body.encode("utf-8")
        return json.dumps(body, ensure_ascii=False).encode("utf-8")


Behaviour = Callable[[RecordedRequest], FakeReply]


def capsule_of(req: RecordedRequest) -> dict[str, Any] | None:
    """The capsule sent by the worker: the JSON ``content`` of the last message
    whose role is ``user``. ``None`` if the request does not carry one."""
    payload = req.json
    if not isinstance(payload, dict):
        return None
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if not isinstance(content, str):
                return None
            try:
                capsule = json.loads(content)
            except ValueError:
                return None
            return capsule if isinstance(capsule, dict) else None
    return None


def chat_completion(
    content: str | None,
    *,
    finish_reason: str = "stop",
    refusal: str | None = None,
    n_choices: int = 1,
    model: str = "gpt-4.1-mini",
    prompt_tokens: int = 0,
    completion_tokens: int | None = None,
) -> dict[str, Any]:
    """A realistic (non-streaming) ``chat.completion`` object. ``usage`` counts
    ``content`` with the real encoding unless ``completion_tokens`` is given
    (`fakeapi.generation` Rule 3); ``prompt_tokens`` is the caller's (the fake's
    model counts the request's messages)."""
    if completion_tokens is None:
        completion_tokens = count_tokens(content or "") * n_choices
    return {
        "id": f"chatcmpl-fake{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": i,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": refusal,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": finish_reason,
            }
            for i in range(n_choices)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_fake0000",
    }


def error_reply(
    status: int,
    message: str = "fake error",
    *,
    type_: str = "server_error",
    code: str | None = None,
) -> FakeReply:
    """An OpenAI-shaped JSON error reply."""
    return FakeReply(
        status=status,
        body={"error": {"message": message, "type": type_, "param": None, "code": code}},
    )


_WORD = re.compile("[\uac00-\ud7a3]+")


def _slot_compositions(slot: Mapping[str, Any]) -> tuple[str, ...]:
    """Every composition the product's fit table accepts for ``slot`` (a capsule's
    slot as JSON), most words first; () for a slot the table cannot style."""
    predicates = iter(slot.get("allowed_predicate_ids", []))
    actions = iter(slot.get("allowed_action_ids", []))
    try:
        ids = [
            next(predicates) if str(t).startswith("[[P:") else next(actions)
            for t in slot.get("required_placeholder_tokens", [])
        ]
        found = compositions(str(slot.get("slot_id")), ids)
    except (StopIteration, ValueError, TypeError):
        return ()
    return tuple(sorted(found, key=lambda c: (-len(_WORD.findall(c)), c)))


def default_style(capsule: Mapping[str, Any]) -> dict[str, str]:
    """A valid ``generated_ko`` per slot: the fit table's composition with the
    most words, the first in sorted order (`kexpr.spool.contract.fit.compositions`):
    the goal-missing weekly interpretation (the one slot the table styles) →
    ``"[[P:01]]. 다만 [[A:01]]."``; ``""`` (never valid) for a slot the table cannot
    style."""
    out: dict[str, str] = {}
    for slot in _slots(capsule):
        found = _slot_compositions(slot)
        out[str(slot.get("slot_id"))] = found[0] if found else ""
    return out


def brief_style(capsule: Mapping[str, Any]) -> dict[str, str]:
    """The instruction's brief style as a compliant model writes it: the fit
    table's composition with the fewest words (one), the last in sorted order:
    the goal-missing weekly interpretation → ``"[[P:01]]. 다만, [[A:01]]."``; ``""``
    for a slot the table cannot style."""
    out: dict[str, str] = {}
    for slot in _slots(capsule):
        found = _slot_compositions(slot)
        out[str(slot.get("slot_id"))] = found[-1] if found else ""
    return out


def invalid_style(capsule: Mapping[str, Any]) -> dict[str, str]:
    """A well-typed but rule-breaking ``generated_ko`` per slot (``오늘은`` is not a
    safe style lexeme): ``"오늘은 [[P:01]]."``."""
    out: dict[str, str] = {}
    for slot in _slots(capsule):
        tokens = [str(t) for t in slot.get("required_placeholder_tokens", [])]
        out[str(slot.get("slot_id"))] = "오늘은 " + " ".join(f"{t}." for t in tokens)
    return out


def compose(capsule: Mapping[str, Any], generated: Mapping[str, str]) -> dict[str, Any]:
    """The response composition for ``capsule`` with ``generated[slot_id]`` as
    each slot's ``generated_ko``: the product's echo builder
    (`kexpr.spool.contract.answers`), so the fake answers as the model is asked to."""
    return answer_document(capsule, generated)


def compose_reply(
    fn: Callable[[dict[str, Any]], Mapping[str, str]],
    *,
    delay_s: float = 0.0,
) -> Behaviour:
    """A behaviour that answers every capsule request with the model answer
    ``compose(capsule, fn(capsule))``: the fake's model writes it (its layout, its
    speed, the request's ``max_tokens``) after ``delay_s``. A request without a
    capsule gets a 400 JSON error."""

    def behaviour(req: RecordedRequest) -> FakeReply:
        capsule = capsule_of(req)
        if capsule is None:
            return error_reply(400, "no capsule in request", type_="invalid_request_error")
        return FakeReply(answer=compose(capsule, fn(capsule)), delay_s=delay_s)

    return behaviour


def accept_behaviour(req: RecordedRequest) -> FakeReply:
    """The default behaviour: a valid composition in ``default_style``."""
    return compose_reply(default_style)(req)


def _slots(capsule: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    slots = capsule.get("slots")
    if not isinstance(slots, list):
        return []
    return [s for s in slots if isinstance(s, Mapping)]

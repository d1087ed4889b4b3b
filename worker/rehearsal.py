"""The rehearsal model: the real worker, a built-in model, no key, no network.

``kexpr supervise --rehearsal`` (and ``kexpr worker --rehearsal``) lets an operator
drive a patched host end to end before any money is spent. Everything above the
wire is production's — the one call (`kexpr.worker.provider.call_with_deadline`,
the SDK's client with ``max_retries=0``, the same request), the journal, the
contract's validation, the spool's publication — because the model is reached
through the SDK's own transport hook: an ``httpx`` transport given to the client
(`kexpr.worker.provider.build_rehearsal_client`). Nothing here opens a socket.

Rules of this module:

1. Explicit only. The rehearsal exists only behind the ``--rehearsal`` flag; no
   environment variable, file or default selects it, and production's
   `kexpr.worker.provider.build_client` never reaches it. A rehearsal worker
   reads no key and refuses to start with ``OPENAI_API_KEY`` in its environment
   or any proxy or CA variable (`kexpr.worker.environment.rehearsal_hazards`):
   a rehearsal is never one setting away from a real call. The client it builds
   reads no environment at all (``trust_env=False``) and carries a placeholder
   in place of a key (`kexpr.worker.provider.REHEARSAL_API_KEY`).
2. Marked. The worker writes ``rehearsal.marker`` into the data root before its
   first journal row and refuses a root that holds real evidence
   (`kexpr.spool.rehearsal`); its status file says ``"rehearsal": true``.
3. Valid answers. `compose` answers every capsule with a composition that the
   contract's `judge` accepts: every ID and token echoed in order, and in each
   slot one of the compositions the fit table accepts there
   (`kexpr.spool.contract.fit.compositions`, design §6.1), chosen by a hash of the
   artifact key and the slot (varied across artifacts, stable for one): what an
   operator sees in a rehearsal is what a customer may see. An answer the
   contract would reject is never sent: the minimal answer
   (`kexpr.spool.contract.budget`) is sent instead.
4. Realistic time. An answer arrives after ``first_token_s + tokens /
   tokens_per_s`` (`Pace`), the default the published median for gpt-4.1-mini on
   OpenAI's API, 77 tokens/s after about 0.5 s (docs/budget.md). ``tokens`` is the
   budget module's upper bound of the answer (`text_token_bound`): no tokenizer,
   and never fewer tokens than the real encoding would count, so a rehearsal is
   never more optimistic than the real model at that rate. The wait honours the
   SDK's per-phase read timeout (3 s) and the call's total deadline, as a real
   non-streaming answer does: an answer that would arrive later is a read
   timeout, and the call is ``timeout`` as in production.
5. Content-free like the rest of the worker: nothing here logs; the answer is
   built from the capsule's IDs and tokens and the lexicon, nothing else.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import httpx

from kexpr.spool.contract import (
    Capsule,
    CapsuleError,
    SlotPolicy,
    Verdict,
    judge,
)
from kexpr.spool.contract.answers import answer_json
from kexpr.spool.contract.budget import minimal_answer, text_token_bound
from kexpr.spool.contract.fit import compositions
from kexpr.spool.ranges import within
from kexpr.spool.rehearsal import (
    DEFAULT_FIRST_TOKEN_S,
    DEFAULT_TOKENS_PER_S,
    FIRST_TOKEN_S_RANGE,
    TOKENS_PER_S_RANGE,
)
from kexpr.worker._transport import current_call

__all__ = [
    "DEFAULT_FIRST_TOKEN_S",
    "DEFAULT_TOKENS_PER_S",
    "FIRST_TOKEN_S_RANGE",
    "TOKENS_PER_S_RANGE",
    "Pace",
    "RehearsalTransport",
    "compose",
]

# The wait's slice: how soon a cut call's thread notices the cut.
_SLICE_S: Final = 0.05
_PATH: Final = "/v1/chat/completions"
_HOST: Final = "api.openai.com"


@dataclass(frozen=True, slots=True)
class Pace:
    """Rule 4: how fast the rehearsal model writes."""

    tokens_per_s: float = DEFAULT_TOKENS_PER_S
    first_token_s: float = DEFAULT_FIRST_TOKEN_S

    def __post_init__(self) -> None:
        if not within(self.tokens_per_s, TOKENS_PER_S_RANGE):
            raise ValueError("tokens_per_s")
        if not within(self.first_token_s, FIRST_TOKEN_S_RANGE):
            raise ValueError("first_token_s")

    def seconds(self, tokens: int) -> float:
        return self.first_token_s + tokens / self.tokens_per_s


def _generated(slot: SlotPolicy, seed: bytes) -> str:
    """One slot's ``generated_ko`` (rule 3): one of the compositions the fit table
    accepts for the slot, picked by ``seed``."""
    choices = compositions(slot.slot_id, slot.semantic_ids)
    return choices[int.from_bytes(seed[:8], "big") % len(choices)] if choices else ""


def compose(capsule: Capsule) -> str:
    """Rule 3: the rehearsal model's answer to ``capsule``, compact JSON in the
    instruction's key order, accepted by `judge` (else the minimal answer)."""
    generated = {
        slot.slot_id: _generated(
            slot, hashlib.sha256(f"{capsule.artifact_key}/{slot.slot_id}".encode()).digest()
        )
        for slot in capsule.slots
    }
    answer = answer_json(capsule, generated)
    if judge(capsule, answer).verdict is Verdict.ACCEPTED:
        return answer
    return minimal_answer(capsule)


def _capsule_of(body: object) -> Capsule | None:
    """The capsule in a request body: the last user message's content (the
    worker sends it in ``extra_body``, merged into ``messages`` on the wire)."""
    if not isinstance(body, dict):
        return None
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if not isinstance(content, str):
                return None
            try:
                return Capsule.from_json(content)
            except CapsuleError:
                return None
    return None


def _error(status: int, kind: str) -> httpx.Response:
    return httpx.Response(
        status,
        json={"error": {"message": kind, "type": kind, "param": None, "code": None}},
    )


def _completion(content: str, *, tokens: int, finish_reason: str) -> dict[str, object]:
    return {
        "id": "chatcmpl-rehearsal-" + hashlib.sha256(content.encode()).hexdigest()[:24],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "rehearsal",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        # Rule 4: the budget's upper bound, not a tokenizer's count.
        "usage": {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens},
        "system_fingerprint": "rehearsal",
    }


class RehearsalTransport(httpx.BaseTransport):
    """The rehearsal model behind the SDK's client (an ``httpx`` transport).

    ``monotonic`` and ``sleep`` are injected by the unit tests (no timed test);
    the worker uses the real ones.
    """

    def __init__(
        self,
        pace: Pace,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.pace = pace
        self._mono = monotonic
        self._sleep = sleep

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or request.url.host != _HOST or request.url.path != _PATH:
            return _error(404, "not_found")
        try:
            body: object = json.loads(request.read())
        except ValueError:
            return _error(400, "invalid_request_error")
        capsule = _capsule_of(body)
        if capsule is None:
            return _error(400, "invalid_request_error")
        answer = compose(capsule)
        tokens = text_token_bound(answer)
        assert tokens is not None  # the lexicon, IDs and tokens are all in the alphabet
        limit = body.get("max_tokens") if isinstance(body, dict) else None
        finish = "length" if type(limit) is int and tokens > limit else "stop"
        self._wait(request, self.pace.seconds(tokens))
        return httpx.Response(200, json=_completion(answer, tokens=tokens, finish_reason=finish))

    def _wait(self, request: httpx.Request, seconds: float) -> None:
        """Rule 4: wait ``seconds`` for the answer, within the SDK's read timeout
        and the call's deadline; past either, raise the read timeout."""
        timeouts = request.extensions.get("timeout")
        read = timeouts.get("read") if isinstance(timeouts, Mapping) else None
        call = current_call()
        allowed = seconds if read is None else min(seconds, float(read))
        deadline = self._mono() + allowed
        while (now := self._mono()) < deadline:
            if call is not None and (call.was_cut or call.remaining() <= 0):
                raise httpx.ReadTimeout("call deadline", request=request)
            self._sleep(min(_SLICE_S, deadline - now))
        if allowed < seconds:
            raise httpx.ReadTimeout("answer not written in time", request=request)

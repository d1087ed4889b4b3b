"""How the fake's model writes an answer: token by token, like gpt-4.1-mini.

Test code only. With a fake that answered at once, nothing in the suite or
the bench could show that a real answer takes time in proportion to its length, and
that the plan's budget (``timeout=3.0``, ``max_tokens=384``, an answer that echoes the
64-hex key and every ID and token) is tight. This module holds what a model answer
costs; the server (`fakeapi.server`) applies it to every reply that carries a model
answer (`FakeReply.answer`). A reply with an explicit ``body`` is sent as built: a
test that builds its own bytes owns their timing.

Rule 1: tokens are counted, never estimated: o200k_base (gpt-4.1-mini's encoding),
        from the ``quicktok-v1`` wheel that ships it offline (the test extra).
Rule 2: an answer arrives after ``first_token_s + completion_tokens / tokens_per_s``,
        where ``completion_tokens`` counts the exact content returned (after any cut,
        Rule 4). ``tokens_per_s=None`` is the instant model of the suite's older
        tests (no delay at all, first token included).
Rule 3: ``usage`` is honest: ``completion_tokens`` is Rule 1's count of the content,
        ``prompt_tokens`` the request's messages counted the way OpenAI's cookbook
        counts chat input for this encoding family ("How to count tokens with
        tiktoken": 3 tokens per message, the role's and the content's tokens, 1 more
        for a ``name``, 3 that prime the reply), ``total_tokens`` their sum.
Rule 4: ``max_tokens`` is enforced like the real API: an answer longer than the
        request's ``max_tokens`` (or ``max_completion_tokens``) is cut after that many
        tokens and ends with ``finish_reason="length"``; a cut inside a UTF-8
        character decodes with U+FFFD (tiktoken's and quicktok's ``errors="replace"``).
Rule 5: the layout is the model's, per fake instance: ``compact`` (no whitespace
        outside strings, what the instruction asks for) or ``pretty`` (2-space
        indented JSON, what JSON mode often returns). Hangul is written as is, never
        ``\\uXXXX``-escaped (a model writes the characters).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, Literal

import quicktok

__all__ = [
    "ENCODING",
    "INSTANT",
    "PUBLISHED_TOKENS_PER_S",
    "FakeModel",
    "Generation",
    "Layout",
    "count_tokens",
    "encoding",
    "generate",
    "prompt_tokens",
    "render_answer",
]

ENCODING: Final = "o200k_base"
Layout = Literal["compact", "pretty"]

# Published gpt-4.1-mini output speeds: 52-68 tokens/s in a community run
# (community.openai.com), 77 on OpenAI's API and 108 on Azure (artificialanalysis.ai),
# 110 the budget's rounded-up fastest (kexpr.spool.contract.budget). First token
# 0.3-0.9 s for an ~850-token prompt.
PUBLISHED_TOKENS_PER_S: Final = (55.0, 77.0, 110.0)

# Rule 3 (OpenAI cookbook, gpt-4o / gpt-4.1 family).
_TOKENS_PER_MESSAGE: Final = 3
_TOKENS_PER_NAME: Final = 1
_REPLY_PRIMING: Final = 3


@cache
def encoding() -> Any:
    """The o200k_base tokenizer (loaded once per process: ~0.6 s here, so the server
    loads it at start, never on a request's clock)."""
    return quicktok.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    """Rule 1: the o200k_base token count of ``text`` (no special tokens)."""
    return len(encoding().encode(text))


def prompt_tokens(messages: object) -> int:
    """Rule 3: the prompt tokens of a request's ``messages`` (0 if it has none)."""
    if not isinstance(messages, list):
        return 0
    total = 0
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        total += _TOKENS_PER_MESSAGE
        for key, value in message.items():
            if isinstance(value, str):
                total += count_tokens(value)
            if key == "name":
                total += _TOKENS_PER_NAME
    return total + _REPLY_PRIMING


@dataclass(frozen=True, slots=True)
class FakeModel:
    """How the fake's model writes (Rules 2 and 5): its first-token delay, its output
    rate (``None``: instant) and its JSON layout."""

    first_token_s: float = 0.0
    tokens_per_s: float | None = None
    layout: Layout = "compact"

    def __post_init__(self) -> None:
        if self.first_token_s < 0:
            raise ValueError("first_token_s must be >= 0")
        if self.tokens_per_s is not None and not self.tokens_per_s > 0:
            raise ValueError("tokens_per_s must be > 0 (or None: instant)")
        if self.layout not in ("compact", "pretty"):
            raise ValueError(f"layout must be 'compact' or 'pretty', not {self.layout!r}")

    def seconds(self, completion_tokens: int) -> float:
        """Rule 2: how long an answer of ``completion_tokens`` tokens takes to arrive."""
        if self.tokens_per_s is None:
            return 0.0
        return self.first_token_s + completion_tokens / self.tokens_per_s


INSTANT: Final = FakeModel()


@dataclass(frozen=True, slots=True)
class Generation:
    """One answer as the model returns it: the content, why it ended, its usage and
    how long it took to write (Rules 2-4)."""

    content: str
    finish_reason: Literal["stop", "length"]
    prompt_tokens: int
    completion_tokens: int
    seconds: float


def render_answer(answer: str | Mapping[str, Any] | Sequence[Any], layout: Layout) -> str:
    """Rule 5: the text the model writes for ``answer`` (a str is written verbatim)."""
    if isinstance(answer, str):
        return answer
    if layout == "pretty":
        return json.dumps(answer, ensure_ascii=False, indent=2)
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"))


def generate(
    model: FakeModel, request: object, answer: str | Mapping[str, Any] | Sequence[Any]
) -> Generation:
    """What ``model`` returns for ``answer`` to ``request`` (the parsed request body)."""
    text = render_answer(answer, model.layout)
    ids = encoding().encode(text)
    payload = request if isinstance(request, Mapping) else {}
    limit = _max_tokens(payload)
    finish: Literal["stop", "length"] = "stop"
    if limit is not None and len(ids) > limit:
        ids = ids[:limit]
        text = encoding().decode(ids)
        finish = "length"
    return Generation(
        content=text,
        finish_reason=finish,
        prompt_tokens=prompt_tokens(payload.get("messages")),
        completion_tokens=len(ids),
        seconds=model.seconds(len(ids)),
    )


def _max_tokens(payload: Mapping[str, Any]) -> int | None:
    """Rule 4: the request's completion limit (``max_completion_tokens`` is the
    newer name; the plan sends ``max_tokens``)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = payload.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None

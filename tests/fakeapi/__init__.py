"""Loopback fake of the OpenAI API behind a real HTTPS (CONNECT) proxy.

Test code only. Import with ``tests/`` on ``sys.path`` (pytest ``pythonpath``)::

    from fakeapi import FakeOpenAI, FakeReply, chat_completion, compose_reply

``FakeOpenAI(..., model=FakeModel(first_token_s=0.3, tokens_per_s=77.0))`` makes
its model write answers at that speed (`fakeapi.generation`).
"""

from .generation import (
    INSTANT,
    PUBLISHED_TOKENS_PER_S,
    FakeModel,
    Generation,
    Layout,
    count_tokens,
    generate,
    prompt_tokens,
    render_answer,
)
from .modes import MODES, behaviour_for_mode
from .replies import (
    Behaviour,
    FakeReply,
    RecordedRequest,
    accept_behaviour,
    brief_style,
    capsule_of,
    chat_completion,
    compose,
    compose_reply,
    default_style,
    error_reply,
    invalid_style,
)
from .server import API_HOST, CHAT_PATH, FakeOpenAI, ModelAnswer

__all__ = [
    "API_HOST",
    "CHAT_PATH",
    "INSTANT",
    "MODES",
    "PUBLISHED_TOKENS_PER_S",
    "ModelAnswer",
    "Behaviour",
    "FakeModel",
    "FakeOpenAI",
    "FakeReply",
    "Generation",
    "Layout",
    "RecordedRequest",
    "accept_behaviour",
    "behaviour_for_mode",
    "brief_style",
    "capsule_of",
    "chat_completion",
    "compose",
    "compose_reply",
    "count_tokens",
    "default_style",
    "error_reply",
    "generate",
    "invalid_style",
    "prompt_tokens",
    "render_answer",
]

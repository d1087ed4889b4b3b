"""Loopback fake of the OpenAI API behind a real HTTPS (CONNECT) proxy.

Test code only. Import with ``tests/`` on ``sys.path`` (pytest ``pythonpath``)::

    from fakeapi import FakeOpenAI, FakeReply, chat_completion, compose_reply
"""

from .modes import MODES, behaviour_for_mode
from .replies import (
    Behaviour,
    FakeReply,
    RecordedRequest,
    accept_behaviour,
    capsule_of,
    chat_completion,
    compose,
    compose_reply,
    default_style,
    error_reply,
    invalid_style,
)
from .server import API_HOST, CHAT_PATH, FakeOpenAI

__all__ = [
    "API_HOST",
    "CHAT_PATH",
    "MODES",
    "Behaviour",
    "FakeOpenAI",
    "FakeReply",
    "RecordedRequest",
    "accept_behaviour",
    "behaviour_for_mode",
    "capsule_of",
    "chat_completion",
    "compose",
    "compose_reply",
    "default_style",
    "error_reply",
    "invalid_style",
]

"""Named behaviours, shared by the CLI (``python -m fakeapi --mode M``) and tests."""

from __future__ import annotations

from .replies import (
    Behaviour,
    FakeReply,
    RecordedRequest,
    compose_reply,
    default_style,
    error_reply,
    invalid_style,
)

__all__ = ["MODES", "SLOW_DELAY_S", "behaviour_for_mode"]

SLOW_DELAY_S = 6.0
MODES = ("accept", "invalid", "slow", "error500")


def _error500(req: RecordedRequest) -> FakeReply:
    return error_reply(500, "The server had an error while processing your request.")


def behaviour_for_mode(mode: str) -> Behaviour:
    """accept: valid ``default_style`` composition; invalid: ``"오늘은 [[P:01]]."``
    style violation; slow: 6 s delay then accept; error500: HTTP 500 JSON error."""
    if mode == "accept":
        return compose_reply(default_style)
    if mode == "invalid":
        return compose_reply(invalid_style)
    if mode == "slow":
        return compose_reply(default_style, delay_s=SLOW_DELAY_S)
    if mode == "error500":
        return _error500
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")

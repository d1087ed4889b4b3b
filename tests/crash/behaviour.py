"""What the crash campaign's fake answers, per artifact (test code only).

The class is a pure function of the artifact key, so the harness knows, for any
artifact, what the one wire request (if any) was answered with, and can prove
that only an in-time, valid answer was ever returned as publishable.
"""

from __future__ import annotations

import enum
import hashlib


class Reply(enum.StrEnum):
    ACCEPT_DELAYED = "accept_delayed"  # valid composition after 0.05-1.5 s (a mid-call window)
    ACCEPT_NOW = "accept_now"  # valid composition at once
    ACCEPT_NEAR_DEADLINE = "accept_near_deadline"  # valid, 3.5-3.99 s: in time or late
    SLOW = "slow"  # valid, but after 5 s: always late, must be discarded
    INVALID = "invalid"  # well-typed, breaks the style grammar
    ERROR500 = "error500"
    TRUNCATED = "truncated"  # finish_reason "length"


ACCEPTING = frozenset({Reply.ACCEPT_DELAYED, Reply.ACCEPT_NOW, Reply.ACCEPT_NEAR_DEADLINE})
# Answers that can never be returned as publishable text.
NEVER_PUBLISHABLE = frozenset({Reply.SLOW, Reply.INVALID, Reply.ERROR500, Reply.TRUNCATED})

_TABLE = (
    (40, Reply.ACCEPT_DELAYED),
    (55, Reply.ACCEPT_NOW),
    (62, Reply.ACCEPT_NEAR_DEADLINE),
    (70, Reply.SLOW),
    (80, Reply.INVALID),
    (90, Reply.ERROR500),
    (100, Reply.TRUNCATED),
)


def _h(artifact_key: str) -> int:
    return int.from_bytes(hashlib.sha256(artifact_key.encode("ascii")).digest()[:8], "big")


def reply_for(artifact_key: str) -> Reply:
    bucket = _h(artifact_key) % 100
    for limit, reply in _TABLE:
        if bucket < limit:
            return reply
    raise AssertionError("unreachable")


def delay_for(artifact_key: str) -> float:
    r = reply_for(artifact_key)
    frac = (_h(artifact_key) >> 20) % 1000 / 1000
    if r is Reply.ACCEPT_DELAYED:
        return 0.05 + 1.45 * frac
    if r is Reply.ACCEPT_NEAR_DEADLINE:
        return 3.5 + 0.49 * frac
    if r is Reply.SLOW:
        return 5.0
    return 0.0

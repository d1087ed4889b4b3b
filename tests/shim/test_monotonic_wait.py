"""Every duration of the shim's wait is on its injected monotonic clock; the wall
clock only stamps the request (coordinator rule 4, spool.lifecycle rule 6).

The clocks move apart here on purpose: a wall clock stepped back or forward an
hour changes nothing but the request's stamps, and a monotonic clock past the
deadline ends the wait ``timeout`` whatever the wall clock says.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable

import pytest
from kit.bodies import STYLED_BODY, STYLED_SELECTED, apresent_styled, present_styled

from gateway_shim import (
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    exact_block,
)
from kexpr.spool.journal import format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import MAX_WAIT
from shim.test_coordinator import ScriptedWorker, accepted
from shim.test_deadline_and_liveness import T0, request_files

HOUR = dt.timedelta(hours=1)
# The styled weekly's interpretation slot, as the fit table allows it (design §6.1).
STYLED = "[[P:01]]. 다만 [[A:01]]."


class SplitClocks:
    """A wall and a monotonic clock that each move only when told to."""

    def __init__(self, mono: Callable[[], float] | None = None) -> None:
        self.wall_offset = dt.timedelta()
        self.mono_offset = 0.0
        self._mono = mono

    def wall(self) -> dt.datetime:
        return T0 + self.wall_offset

    def mono(self) -> float:
        base = self._mono() if self._mono is not None else 1000.0
        return base + self.mono_offset


def make(root: DataRoot, clocks: SplitClocks) -> KoreanExpressionCoordinator:
    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    return KoreanExpressionCoordinator(config, root.root, clock=clocks.wall, monotonic=clocks.mono)


def present(coord: KoreanExpressionCoordinator, asyncio_host: bool) -> PresentationCandidate:
    if asyncio_host:
        return asyncio.run(apresent_styled(coord, "e"))
    return present_styled(coord, "e")


HOSTS = pytest.mark.parametrize("asyncio_host", [False, True], ids=["present", "apresent"])


@HOSTS
def test_a_monotonic_clock_past_the_deadline_ends_the_wait_timeout(
    root: DataRoot, asyncio_host: bool
) -> None:
    """The answer arrives while the monotonic clock has jumped past the deadline and
    the wall clock has stepped back an hour (it would say: early): ``timeout``, the
    canonical body, at once."""
    clocks = SplitClocks()
    answer = accepted(STYLED)

    def after_the_deadline(req: dict[str, object]) -> dict[str, object] | bytes | None:
        clocks.mono_offset = MAX_WAIT.total_seconds() + 0.5
        clocks.wall_offset = -HOUR
        return answer(req)

    coord = make(root, clocks)
    started = time.monotonic()
    with ScriptedWorker(root, after_the_deadline) as w:
        cand = present(coord, asyncio_host)
    coord.close()
    assert (cand.outcome, cand.body) == (Outcome.TIMEOUT, STYLED_BODY)
    assert time.monotonic() - started < MAX_WAIT.total_seconds()
    [req] = w.requests
    assert req["submitted_at_utc"] == format_ts(T0)  # stamped at the call
    assert req["deadline_at_utc"] == format_ts(T0 + MAX_WAIT)


@HOSTS
def test_a_wall_clock_stepped_forward_does_not_make_an_answer_late(
    root: DataRoot, asyncio_host: bool
) -> None:
    """One monotonic second after the call, with the wall clock an hour ahead (it
    would say: long past the deadline): the answer is served."""
    clocks = SplitClocks()
    answer = accepted(STYLED)

    def within_the_wait(req: dict[str, object]) -> dict[str, object] | bytes | None:
        clocks.mono_offset = 1.0
        clocks.wall_offset = HOUR
        return answer(req)

    coord = make(root, clocks)
    with ScriptedWorker(root, within_the_wait):
        cand = present(coord, asyncio_host)
    coord.close()
    assert (cand.outcome, cand.body) == (Outcome.ACCEPTED, STYLED_SELECTED)


@HOSTS
def test_a_wall_clock_stepped_back_an_hour_still_ends_the_wait_at_its_deadline(
    root: DataRoot, asyncio_host: bool
) -> None:
    """No answer, the wall clock stepped back an hour as the request is written:
    the wait ends ``timeout`` once ``MAX_WAIT`` has passed on the monotonic clock,
    not an hour later."""
    clocks = SplitClocks(mono=time.monotonic)

    def never(req: dict[str, object]) -> None:
        clocks.wall_offset = -HOUR

    coord = make(root, clocks)
    started = time.monotonic()
    with ScriptedWorker(root, never) as w:
        cand = present(coord, asyncio_host)
    elapsed = time.monotonic() - started
    coord.close()
    assert (cand.outcome, cand.body) == (Outcome.TIMEOUT, STYLED_BODY)
    assert len(w.requests) == 1 and request_files(root) == []
    assert MAX_WAIT.total_seconds() - 0.05 <= elapsed < MAX_WAIT.total_seconds() + 1.5

"""The provider cool-down's states (`kexpr.worker.cooldown`), on an
injected monotonic clock."""

from __future__ import annotations

from kexpr.spool.outcomes import Outcome
from kexpr.worker.cooldown import (
    COOL_DOWN_S,
    FAILURES_IN_A_ROW,
    PROBE_HOLD_S,
    CoolDown,
    CoolDownState,
    Pass,
)


def opened(now: float = 0.0) -> CoolDown:
    c = CoolDown()
    for i in range(FAILURES_IN_A_ROW):
        assert c.admit(now) is Pass.CALL
        c.observe(now, f"a{i}", Outcome.TIMEOUT)
    return c


def test_the_named_constants() -> None:
    assert (FAILURES_IN_A_ROW, COOL_DOWN_S) == (5, 30.0)
    assert PROBE_HOLD_S == 5.0


def test_it_opens_after_n_failures_in_a_row_only() -> None:
    c = CoolDown()
    for i in range(FAILURES_IN_A_ROW - 1):
        c.observe(0.0, f"a{i}", Outcome.PROVIDER_ERROR)
    assert c.state(0.0) is CoolDownState.CLOSED and not c.cooling(0.0)
    # A call that returned content (even content the contract rejects) resets the run.
    c.observe(0.0, "ok", Outcome.INVALID_RESPONSE)
    c.observe(0.0, "ok2", None)
    for i in range(FAILURES_IN_A_ROW - 1):
        c.observe(0.0, f"b{i}", Outcome.TIMEOUT)
    assert c.state(0.0) is CoolDownState.CLOSED
    c.observe(0.0, "last", Outcome.TIMEOUT)
    assert c.state(0.0) is CoolDownState.OPEN and c.cooling(0.0)
    assert c.to_json(0.0)["seconds_left"] == COOL_DOWN_S


def test_no_call_during_the_cool_down_then_one_probe() -> None:
    c = opened()
    assert c.cooling(COOL_DOWN_S - 0.001) and c.admit(COOL_DOWN_S - 0.001) is Pass.REFUSE
    assert not c.cooling(COOL_DOWN_S)
    assert c.admit(COOL_DOWN_S) is Pass.PROBE
    c.bind_probe("probe")
    # While the probe is out, every other request is refused.
    assert c.cooling(COOL_DOWN_S + 1) and c.admit(COOL_DOWN_S + 1) is Pass.REFUSE
    assert c.state(COOL_DOWN_S + 1) is CoolDownState.PROBING
    # A call admitted before the cool-down that ends now decides nothing.
    c.observe(COOL_DOWN_S + 1, "a0", None)
    assert c.state(COOL_DOWN_S + 1) is CoolDownState.PROBING
    c.observe(COOL_DOWN_S + 2, "probe", None)
    assert c.state(COOL_DOWN_S + 2) is CoolDownState.CLOSED
    assert c.admit(COOL_DOWN_S + 2) is Pass.CALL
    assert c.to_json(COOL_DOWN_S + 2)["probes"] == 1


def test_a_failed_probe_starts_the_cool_down_again() -> None:
    c = opened()
    assert c.admit(COOL_DOWN_S) is Pass.PROBE
    c.bind_probe("probe")
    c.observe(COOL_DOWN_S + 3, "probe", Outcome.TIMEOUT)
    assert c.state(COOL_DOWN_S + 3) is CoolDownState.OPEN
    assert c.cooling(2 * COOL_DOWN_S + 2.99)
    assert c.admit(2 * COOL_DOWN_S + 3) is Pass.PROBE
    assert c.to_json(2 * COOL_DOWN_S + 3)["cool_downs"] == 2


def test_a_probe_that_made_no_call_is_given_back() -> None:
    c = opened()
    assert c.admit(COOL_DOWN_S) is Pass.PROBE
    c.bind_probe("probe")
    c.give_back(COOL_DOWN_S + 0.1, "other")  # not the probe: nothing changes
    assert c.cooling(COOL_DOWN_S + 0.1)
    c.give_back(COOL_DOWN_S + 0.1, "probe")
    assert c.admit(COOL_DOWN_S + 0.1) is Pass.PROBE


def test_a_lost_probe_is_given_back_after_its_hold() -> None:
    """A probe whose handling never reported (it raised before its row) cannot
    leave the worker refusing for ever."""
    c = opened()
    assert c.admit(COOL_DOWN_S) is Pass.PROBE  # no bind_probe: its row was never written
    assert c.cooling(COOL_DOWN_S + PROBE_HOLD_S - 0.01)
    assert c.admit(COOL_DOWN_S + PROBE_HOLD_S) is Pass.PROBE

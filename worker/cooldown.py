"""The provider cool-down: no call while the provider keeps failing (admission).

An artifact has one call, ever; a call to a provider that is down is spent on a
3 s wait in front of the host's customer, billed or not, and ends canonical
anyway. When the worker has seen `FAILURES_IN_A_ROW` calls in a row time out or
fail, it stops calling for `COOL_DOWN_S`: every request is answered canonical at
once (``provider_cooling_down``: no start row, no call, counted per surface).
Then ONE request is let through as a probe; its call's success ends the
cool-down, its failure starts it again.

Rules of this module:

Rule 1: the states are data (`CoolDownState`) and change only here: ``closed`` (calls
        go through), ``open`` (cooling down until ``until``), ``probing`` (one
        call is out as the probe; every other request is refused as in ``open``).
Rule 2: what counts is the outcome of a call that left the process
        (``ProviderResult.sent``): ``timeout`` and ``provider_error`` are the
        provider failing; a call that returned content (even content the contract
        rejects: the provider answered) resets the run. ``credential_unavailable``
        and a call that was never sent say nothing about the provider.
Rule 3: the probe is the request admitted first once the cool-down is over.
        Its result decides; if it never produces one (not sent, or its handling
        failed), the probe is given back after `PROBE_HOLD_S`, so the worker
        can never be stuck refusing: the next request probes again.
Rule 4: numbers and enum words only; no clock of its own (the caller passes
        the monotonic ``now``), so a test steps it.
"""

from __future__ import annotations

import enum
import math
import threading
from typing import Final

from kexpr.spool.lifecycle import MAX_WAIT
from kexpr.spool.outcomes import Outcome, ProviderFailure

# Rule 2: five calls in a row. One or two timeouts are what a slow answer at the
# edge of the budget does now and then; five in a row at the plan's load (a few
# presentations a minute) is an outage or a provider far slower than published,
# and each further call would be another 3 s wait. (Circuit breakers commonly
# open after 5 consecutive failures.)
FAILURES_IN_A_ROW: Final = 5
# Rule 1: thirty seconds without calls. Long enough that a burst of presentations
# during an outage is answered at once instead of each waiting 3 s, short enough
# that a recovered provider is tried again within half a minute.
COOL_DOWN_S: Final = 30.0
# Rule 3: the probe's call is bounded by the request's deadline (MAX_WAIT, 4 s);
# one second more and it is surely over.
PROBE_HOLD_S: Final = MAX_WAIT.total_seconds() + 1.0

_FAILING: Final = frozenset({Outcome.TIMEOUT, Outcome.PROVIDER_ERROR})


class CoolDownState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    PROBING = "probing"


class Pass(enum.Enum):
    """What `CoolDown.admit` decided for one request."""

    CALL = "call"  # closed: an ordinary call
    PROBE = "probe"  # this request's call is the probe (Rule 3)
    REFUSE = "refuse"  # cooling down: canonical, no row, no call


class CoolDown:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = CoolDownState.CLOSED
        self._run = 0  # failures in a row (Rule 2)
        self._until = 0.0  # OPEN: the end of the cool-down; PROBING: of the probe's hold
        self._probe: str | None = None  # PROBING: the probe's attempt, once its row exists
        self.cool_downs = 0  # how many times it opened
        self.probes = 0  # how many probes were let through

    def state(self, now: float) -> CoolDownState:
        with self._lock:
            return self._current(now)

    def _current(self, now: float) -> CoolDownState:
        if self._state is not CoolDownState.CLOSED and now >= self._until:
            # OPEN is over, or a probe was lost (Rule 3): the next request probes.
            self._state, self._until, self._probe = CoolDownState.OPEN, now, None
        return self._state

    def cooling(self, now: float) -> bool:
        """Whether a request is refused now: the cool-down runs, or the probe is out."""
        with self._lock:
            state = self._current(now)
            return state is CoolDownState.PROBING or (
                state is CoolDownState.OPEN and now < self._until
            )

    def admit(self, now: float) -> Pass:
        with self._lock:
            state = self._current(now)
            if state is CoolDownState.CLOSED:
                return Pass.CALL
            if state is CoolDownState.OPEN and now >= self._until:
                self._state, self._until = CoolDownState.PROBING, now + PROBE_HOLD_S
                self.probes += 1
                return Pass.PROBE
            return Pass.REFUSE

    def bind_probe(self, attempt_id: str) -> None:
        """The probe's start row is written: its attempt's result decides (Rule 3)."""
        with self._lock:
            if self._state is CoolDownState.PROBING:
                self._probe = attempt_id

    def observe(self, now: float, attempt_id: str, outcome: ProviderFailure | None) -> None:
        """One sent call's result (Rule 2): ``outcome`` None when content came back."""
        with self._lock:
            failing = outcome in _FAILING
            probe = self._probe is not None and attempt_id == self._probe
            if probe:
                self._probe = None
            if probe and self._state is CoolDownState.PROBING:
                if failing:
                    self._open(now)
                else:
                    self._state, self._run = CoolDownState.CLOSED, 0
                return
            if self._state is not CoolDownState.CLOSED:
                return  # a call admitted before the cool-down began: the probe decides
            if not failing:
                self._run = 0
                return
            self._run += 1
            if self._run >= FAILURES_IN_A_ROW:
                self._open(now)

    def give_back(self, now: float, attempt_id: str) -> None:
        """An attempt made no call: if it was the probe, the next request probes
        at once (Rule 3)."""
        with self._lock:
            if self._state is CoolDownState.PROBING and attempt_id == self._probe:
                self._state, self._until, self._probe = CoolDownState.OPEN, now, None

    def _open(self, now: float) -> None:
        self._state, self._until, self._run = CoolDownState.OPEN, now + COOL_DOWN_S, 0
        self.cool_downs += 1

    def to_json(self, now: float) -> dict[str, object]:
        with self._lock:
            state = self._current(now)
            left = max(self._until - now, 0.0) if state is CoolDownState.OPEN else 0.0
            return {
                "state": state.value,
                "failures_in_a_row": self._run,
                "threshold": FAILURES_IN_A_ROW,
                "cool_down_s": COOL_DOWN_S,
                # Rounded UP: 0 only once the cool-down is over (a status that
                # said 0 with 40 ms left sent a reader's request into a refusal).
                "seconds_left": math.ceil(left * 10) / 10,
                "cool_downs": self.cool_downs,
                "probes": self.probes,
            }

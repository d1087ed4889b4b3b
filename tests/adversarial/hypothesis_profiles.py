"""Hypothesis profiles for the generative, fuzz and redaction tests.

Two profiles, chosen by ``KEXPR_HYPOTHESIS_PROFILE``:

- ``kexpr-test`` (default, ``make test``): small and bounded, a few hundred examples
  per property so the whole suite stays fast.
- ``fuzz`` (``make fuzz``): at least 10**5 examples per pure property; the end-to-end
  redaction property, which drives real processes, gets a larger but bounded count.

``KEXPR_HYPOTHESIS_EXAMPLES=N`` overrides the pure properties' count of either profile
(a quick local soak without editing anything).

The profile is *not* loaded globally: tests opt in with ``@PROPERTY`` (or
``@REDACTION``), so other suites keep Hypothesis' own defaults whatever is set here.

``STATS`` counts, per property, the examples the contract accepted and rejected; the
package's conftest prints it at the end of the run (the issue's closing counts).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import Any, Final

import pytest
from hypothesis import HealthCheck, settings

PROFILE_ENV: Final = "KEXPR_HYPOTHESIS_PROFILE"
PROFILE_NAME: Final = os.environ.get(PROFILE_ENV, "kexpr-test")

_PROPERTY_EXAMPLES: Final = {"kexpr-test": 200, "fuzz": 100_000}
_REDACTION_EXAMPLES: Final = {"kexpr-test": 40, "fuzz": 500}  # per surface

if PROFILE_NAME not in _PROPERTY_EXAMPLES:
    raise RuntimeError(f"{PROFILE_ENV} must be one of {sorted(_PROPERTY_EXAMPLES)}")

_COMMON: Final[dict[str, Any]] = {
    "deadline": None,
    "suppress_health_check": (HealthCheck.too_slow, HealthCheck.data_too_large),
    "print_blob": True,
}

_property_examples = (
    int(os.environ.get("KEXPR_HYPOTHESIS_EXAMPLES", "0")) or _PROPERTY_EXAMPLES[PROFILE_NAME]
)
settings.register_profile("kexpr-property", max_examples=_property_examples, **_COMMON)
settings.register_profile(
    "kexpr-redaction",
    max_examples=_REDACTION_EXAMPLES[PROFILE_NAME],
    # Module-scoped fixtures hold real processes; examples share them on purpose.
    **_COMMON,
)

PROPERTY: Final = settings(settings.get_profile("kexpr-property"))
REDACTION: Final = settings(settings.get_profile("kexpr-redaction"))


class _Stats:
    """Thread-safe tallies: ``STATS.add("test name", "accepted")``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, Counter[str]] = {}

    def add(self, test: str, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts.setdefault(test, Counter())[kind] += n

    def total(self, kind: str) -> int:
        with self._lock:
            return sum(c[kind] for c in self.counts.values())


STATS: Final = _Stats()


class StatsReporter:
    """pytest plugin printing ``STATS`` once, whichever of our conftests loads it."""

    NAME: Final = "kexpr-generative-stats"

    @classmethod
    def register(cls, config: pytest.Config) -> None:
        if not config.pluginmanager.has_plugin(cls.NAME):
            config.pluginmanager.register(cls(), cls.NAME)

    # Under pytest-xdist (`make test`) the properties run on worker processes: each
    # worker hands its tallies to the controller, which prints their sum.
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        out = getattr(session.config, "workeroutput", None)
        if out is not None:  # a worker
            out[self.NAME] = {test: dict(c) for test, c in STATS.counts.items()}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        tallies: dict[str, dict[str, int]] = getattr(node, "workeroutput", {}).get(self.NAME, {})
        for test, counts in tallies.items():
            for kind, n in counts.items():
                STATS.add(test, kind, n)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not STATS.counts:
            return
        tr = terminalreporter
        tr.section(f"kexpr generative tallies (profile {PROFILE_NAME})")
        for test, counts in sorted(STATS.counts.items()):
            tr.line(f"{test}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
        tr.line(
            f"total: accepted={STATS.total('accepted')} rejected={STATS.total('rejected')}"
            f" redaction_examples={STATS.total('redaction_examples')}"
        )

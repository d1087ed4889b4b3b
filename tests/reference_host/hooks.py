"""Coordinators with test hooks.

Tests only. The plan's race test needs a barrier "after candidate creation and
before acquiring the service locks"; `WatchedCoordinator` runs ``hook(candidate)`` right
after ``apresent_adaptive`` made its candidate, inside the handler, on its event loop.
`NoPresentation` fails the test if the host presents through it at all (a restart
or a recovery must send what was pinned, not present again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from gateway_shim import KoreanExpressionCoordinator, PresentationCandidate


class WatchedCoordinator(KoreanExpressionCoordinator):
    hook: Callable[[PresentationCandidate], None] | None = None

    async def apresent_adaptive(self, *args: Any, **kwargs: Any) -> PresentationCandidate:
        cand = await super().apresent_adaptive(*args, **kwargs)
        if self.hook is not None:
            self.hook(cand)
        return cand


class NoPresentation(KoreanExpressionCoordinator):
    """Every entry point fails the test: nothing may present through it."""

    def _refuse(self) -> NoReturn:
        raise AssertionError("the host presented where it must not")

    def present_daily(self, *args: Any, **kwargs: Any) -> PresentationCandidate:
        self._refuse()

    async def apresent_daily(self, *args: Any, **kwargs: Any) -> PresentationCandidate:
        self._refuse()

    def present_weekly(self, *args: Any, **kwargs: Any) -> PresentationCandidate:
        self._refuse()

    async def apresent_weekly(self, *args: Any, **kwargs: Any) -> PresentationCandidate:
        self._refuse()

    def present_adaptive(self, *args: Any, **kwargs: Any) -> PresentationCandidate:
        self._refuse()

    async def apresent_adaptive(self, *args: Any, **kwargs: Any) -> PresentationCandidate:
        self._refuse()

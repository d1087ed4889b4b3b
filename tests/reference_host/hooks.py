"""A coordinator with a hook between candidate creation and the host's locks.

Tests only: the plan's race test needs a barrier "after candidate creation and
before acquiring the service locks"; `WatchedCoordinator` runs ``hook(candidate)`` right
after ``apresent_adaptive`` made its candidate, inside the handler, on its event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway_shim import KoreanExpressionCoordinator, PresentationCandidate


class WatchedCoordinator(KoreanExpressionCoordinator):
    hook: Callable[[PresentationCandidate], None] | None = None

    async def apresent_adaptive(self, *args: Any, **kwargs: Any) -> PresentationCandidate:
        cand = await super().apresent_adaptive(*args, **kwargs)
        if self.hook is not None:
            self.hook(cand)
        return cand

"""Reference daily host: first save and replay (plan "Daily cutover").

Tests only. The first save of a finalized check-in renders canonical,
optionally obtains a candidate, and performs ONE edit; ``selected`` is
reported only after that edit. Replay (``_render_physique_feedback_replay``
in the plan) is canonical-only: it never presents, so it can never open a
claim, call the provider or recreate an old selected expression.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway_shim import DailyFacts, KoreanExpressionCoordinator, Outcome


@dataclass(frozen=True, slots=True)
class FinalizedCheckin:
    body: str  # the canonical daily body the host rendered (host_render.render_daily)
    finalized_event_id: str
    facts: DailyFacts | None = None  # the host's typed completeness, if it passes one


Editor = Callable[[str], None]


class DailyHost:
    def __init__(self, coordinator: KoreanExpressionCoordinator, editor: Editor) -> None:
        self.coordinator = coordinator
        self.editor = editor

    def first_save(self, checkin: FinalizedCheckin) -> str | None:
        """The README's daily call site: present, edit once, then report."""
        cand = self.coordinator.present_daily(
            checkin.body, facts=checkin.facts, finalized_event_id=checkin.finalized_event_id
        )
        if not cand.publication_permitted:
            return None  # in flight elsewhere: publish nothing now (no edit, no report)
        body = cand.body
        try:
            self.editor(body)
        except BaseException:
            if cand.outcome is Outcome.ACCEPTED:
                self.coordinator.report(cand, Outcome.PUBLICATION_FAILED)
            raise
        if cand.outcome is Outcome.ACCEPTED:
            self.coordinator.report(cand, Outcome.SELECTED)
        return body

    def replay(self, checkin: FinalizedCheckin) -> str:
        # Canonical-only by construction: no coordinator call on this path.
        self.editor(checkin.body)
        return checkin.body

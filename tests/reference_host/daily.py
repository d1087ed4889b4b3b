"""Reference daily host: the Save edit and the replay (plan "Daily cutover"), with the
seam Hermes has at the pin (T:`_render_physique_callback_prompt` at 4305027f).

Tests only, and our own code (docs/hermes-integration.md, "Daily").

At the pin the host edits the Save message and swallows every failure of the edit
(``except Exception: return``: the check-in is already saved and versioned, and the
user keeps the Start/Resume card). That reason stands, so the handler still never
raises for a failed edit; what changes is that the edit's result is OBSERVED, because
it decides the one report an enabled-mode selected candidate needs: ``selected``
after an edit that succeeded, ``publication_failed`` after one that failed.

The first save renders canonical from the finalized artifact (the snapshot and its
``finalized_event_id``, from one session load), obtains a candidate and performs ONE
edit. Replay (T:`_render_physique_feedback_replay`) is canonical-only: it never
presents, so it can never open a claim, call the provider or recreate an old
selected expression.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway_shim import DailyFacts, KoreanExpressionCoordinator, Outcome
from reference_host.bot import RecordingQuery


@dataclass(frozen=True, slots=True)
class FinalizedCheckin:
    """The plan's ``FinalizedCoachingArtifact``: what one session load returns."""

    body: str  # what _nutrition_daily_text(snapshot) renders (host_render.render_daily)
    finalized_event_id: str
    facts: DailyFacts | None = None  # the host's typed completeness, if it passes one


Sender = Callable[[str], None]


class DailyHost:
    def __init__(self, coordinator: KoreanExpressionCoordinator) -> None:
        self.coordinator = coordinator

    async def first_save(self, query: RecordingQuery, artifact: FinalizedCheckin) -> None:
        """The Save edit (reply notice ``체크인을 저장했습니다.``)."""
        canonical, markup = artifact.body, None
        cand = await self.coordinator.apresent_daily(
            canonical, finalized_event_id=artifact.finalized_event_id, facts=artifact.facts
        )
        if not cand.publication_permitted:
            return  # in flight elsewhere: publish nothing now (no edit, no report)
        try:
            await query.edit_message_text(text=cand.body, reply_markup=markup)
        except Exception:
            edited = False  # still swallowed (the check-in is saved), but observed
        else:
            edited = True
        if cand.outcome is Outcome.ACCEPTED:  # enabled mode, selected body
            outcome = Outcome.SELECTED if edited else Outcome.PUBLICATION_FAILED
            self.coordinator.report(cand, outcome)

    def replay(self, send: Sender, artifact: FinalizedCheckin) -> str:
        # Canonical-only by construction: no coordinator call on this path.
        send(artifact.body)
        return artifact.body

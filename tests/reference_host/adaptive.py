"""Reference adaptive host: an operator service with a pending-card store and
the gateway's fresh-card callback handler.

Tests only. It does what the plan's section "Adaptive validation and
persistence are one locked service operation" requires of the real host:

``AdaptiveOperatorService.validate_and_mark_presented_card`` acquires the
service's two locks once (``_authority_session_lock`` then
``_publication_ledger_lock``) and, while both are held:

1. reloads the session and rechecks the callback action, its expiry and the
   fresh card state;
2. rebuilds the binding from the RELOADED session (owner/config/epoch pins,
   proposal digest, revision, callback action, origin) and calls the shim's
   pure ``revalidate`` — which re-parses the canonical payload, recomputes the
   binding digest and re-runs slot/render validation;
3. persists exactly the returned payload with ``_mark_publish_pending_unlocked``.

A pending row is immutable: the same payload again is the same row (no new
row); a different payload for the same card is a ``PublicationConflict``, never
an overwrite. Recovery republishes the stored payload and never presents.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gateway_shim import (
    AdaptiveBinding,
    CandidateOutcome,
    DualFacts,
    KoreanExpressionCoordinator,
    PresentationCandidate,
    revalidate,
)


class StaleAuthority(Exception):
    """Step 1 failed: the callback is no longer the session's fresh action."""


class PublicationConflict(Exception):
    """A different payload is already pending for this card: never overwritten."""


@dataclass(frozen=True, slots=True)
class Callback:
    """What the operator pressed (Telegram callback data, parsed)."""

    action: str
    session_id: str
    epoch: int


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    owner: str
    config_version: str
    epoch: int
    proposal_digest: str
    revision: int
    card_kind: str
    expired: bool = False


@dataclass(frozen=True, slots=True)
class PendingRow:
    session_id: str
    revision: int
    card_kind: str
    payload: Mapping[str, object]


@dataclass
class AdaptiveOperatorService:
    sessions: dict[str, Session] = field(default_factory=dict)
    pending_rows: list[PendingRow] = field(default_factory=list)
    published: list[tuple[str, int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._authority_session_lock = threading.Lock()
        self._publication_ledger_lock = threading.Lock()

    # -- session state -----------------------------------------------------------

    def load_session(self, session_id: str) -> Session:
        with self._authority_session_lock:
            return self.sessions[session_id]

    def change_session(self, session_id: str, **changes: Any) -> None:
        """An authority change (owner/config/epoch/revision), under the lock."""
        with self._authority_session_lock:
            self.sessions[session_id] = replace(self.sessions[session_id], **changes)

    @staticmethod
    def binding_for(
        session: Session, callback: Callback, origin_message_id: str
    ) -> AdaptiveBinding:
        return AdaptiveBinding(
            callback_action=callback.action,
            session_id=session.session_id,
            proposal_digest=session.proposal_digest,
            revision=session.revision,
            card_kind=session.card_kind,
            origin_message_id=origin_message_id,
            authority_pins=(
                f"owner={session.owner}",
                f"config={session.config_version}",
                f"epoch={session.epoch}",
            ),
        )

    # -- the one locked operation ------------------------------------------------

    def validate_and_mark_presented_card(
        self,
        callback: Callback,
        *,
        canonical_payload: Mapping[str, object],
        candidate: PresentationCandidate,
        facts: DualFacts | None = None,
        origin_message_id: str = "",
    ) -> Mapping[str, object]:
        with self._authority_session_lock, self._publication_ledger_lock:
            session = self.sessions[callback.session_id]  # 1. reload
            if callback.action != "adaptive_review" or session.expired:
                raise StaleAuthority("callback")
            binding = self.binding_for(session, callback, origin_message_id)
            payload = revalidate(candidate, canonical_payload, binding, facts)  # 2 + 3
            return self._mark_publish_pending_unlocked(session, payload)  # 4

    def _mark_publish_pending_unlocked(
        self, session: Session, payload: Mapping[str, object]
    ) -> Mapping[str, object]:
        key = (session.session_id, session.revision, session.card_kind)
        for row in self.pending_rows:
            if (row.session_id, row.revision, row.card_kind) == key:
                if row.payload == payload:
                    return row.payload  # the same commit again: the same row
                raise PublicationConflict("pending card differs")
        row = PendingRow(*key, payload=copy.deepcopy(dict(payload)))
        self.pending_rows.append(row)
        return row.payload

    def mark_published(self, session_id: str, revision: int, card_kind: str) -> None:
        with self._publication_ledger_lock:
            self.published.append((session_id, revision, card_kind))

    def recover_pending_cards(self) -> list[PendingRow]:
        with self._publication_ledger_lock:
            return [
                row
                for row in self.pending_rows
                if (row.session_id, row.revision, row.card_kind) not in self.published
            ]


CardRenderer = Callable[[Session], tuple[dict[str, object], DualFacts | None]]
Editor = Callable[[Mapping[str, object]], None]


class AdaptiveGatewayHost:
    """The gateway's fresh-card callback handler and its recovery path."""

    def __init__(
        self,
        service: AdaptiveOperatorService,
        coordinator: KoreanExpressionCoordinator,
        render_card: CardRenderer,
        editor: Editor,
    ) -> None:
        self.service = service
        self.coordinator = coordinator
        self.render_card = render_card
        self.editor = editor

    def present(
        self, callback: Callback, *, origin_message_id: str = ""
    ) -> tuple[PresentationCandidate, dict[str, object], DualFacts | None]:
        """Candidate creation: canonical card → presentation (outside the locks)."""
        session = self.service.load_session(callback.session_id)
        payload, facts = self.render_card(session)
        binding = self.service.binding_for(session, callback, origin_message_id)
        cand = self.coordinator.present_adaptive(payload, binding=binding, facts=facts)
        return cand, payload, facts

    def commit(
        self,
        callback: Callback,
        cand: PresentationCandidate,
        payload: Mapping[str, object],
        facts: DualFacts | None,
        *,
        origin_message_id: str = "",
    ) -> Mapping[str, object]:
        """The locked operation, then (only then) the Telegram edit."""
        try:
            persisted = self.service.validate_and_mark_presented_card(
                callback,
                canonical_payload=payload,
                candidate=cand,
                facts=facts,
                origin_message_id=origin_message_id,
            )
        except BaseException:
            # No pending row and no edit; the attempt is terminal, never retried.
            if cand.outcome is CandidateOutcome.ACCEPTED:
                self.coordinator.report(cand, "commit_failed")
            raise
        if cand.outcome is CandidateOutcome.ACCEPTED:
            self.coordinator.report(cand, "selected")  # after the durable write
        self.editor(persisted)
        session = self.service.load_session(callback.session_id)
        self.service.mark_published(session.session_id, session.revision, session.card_kind)
        return persisted

    def handle_review_callback(
        self, callback: Callback, *, origin_message_id: str = ""
    ) -> Mapping[str, object] | None:
        cand, payload, facts = self.present(callback, origin_message_id=origin_message_id)
        if not cand.publication_permitted:
            return None  # in flight elsewhere: no edit
        return self.commit(callback, cand, payload, facts, origin_message_id=origin_message_id)

    def recover_pending_cards(self) -> int:
        """Republish every unpublished pending card exactly; never presents."""
        rows = self.service.recover_pending_cards()
        for row in rows:
            self.editor(row.payload)
            self.service.mark_published(row.session_id, row.revision, row.card_kind)
        return len(rows)

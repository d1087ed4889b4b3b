"""Reference adaptive host: an operator service with a pending-card store and
the gateway's fresh-card callback handler.

Tests only. It does what the plan's section "Adaptive validation and
persistence are one locked service operation" requires of the real host:

``AdaptiveOperatorService.validate_and_mark_presented_card`` acquires the
service's two locks once (``_authority_session_lock`` then
``_publication_ledger_lock``) and, while both are held:

1. reloads the session and rechecks the pressed callback (``an1:<session>:<action>``,
   the host's callback format), its expiry and the fresh card state;
2. rebuilds the authority pins from the RELOADED session (owner/config/epoch)
   and calls the shim's pure ``revalidate`` with the pressed ``callback_data``,
   the deployed profile's surface and the dual glossary in force — which
   re-parses the canonical payload, recomputes the binding digest and re-runs
   slot/render validation;
3. persists exactly the returned payload with ``_mark_publish_pending_unlocked``.

A pending row is immutable: the same payload again is the same row (no new
row); a different payload for the same card is a ``PublicationConflict``, never
an overwrite. Recovery republishes the stored payload and never presents. A
payload kexpr found ineligible (a menu, a view, ...) is persisted or edited as
the host always did, without ``revalidate``: kexpr has nothing to say about it.

Payloads have the host's real shape (`gateway_shim.surfaces.card`): the
session is only in the buttons' ``callback_data``, the card kind is the
deployed profile's surface.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gateway_shim import (
    CardOrigin,
    DualGlossary,
    GlossaryError,
    KoreanExpressionCoordinator,
    Outcome,
    PresentationCandidate,
    revalidate,
)

# The actions whose callback produces a fresh card at the pin (N:handle_callback,
# N:_render_latest_card).
CARD_ACTIONS = frozenset(
    {"create", "hold", "release", "approve", "activate", "delivery_enable", "delivery_revoke"}
)


class StaleAuthority(Exception):
    """Step 1 failed: the callback is no longer the session's fresh action."""


class PublicationConflict(Exception):
    """A different payload is already pending for this card: never overwritten."""


@dataclass(frozen=True, slots=True)
class Callback:
    """What the operator pressed: the button's ``callback_data`` and the epoch the
    host's session store had when the button was issued."""

    callback_data: str
    epoch: int

    @property
    def session_id(self) -> str:
        return self.callback_data.split(":")[1]

    @property
    def action(self) -> str:
        return self.callback_data.split(":")[2]


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str  # 24 lowercase hex, as in the host's callback data
    owner: str
    config_version: str
    epoch: int
    customer_key: str
    customer_label: str
    kst_day: str
    proposal_digest: str  # 64 lowercase hex
    revision: int
    state: str
    expired: bool = False


@dataclass(frozen=True, slots=True)
class PendingRow:
    session_id: str
    revision: int
    surface: str
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
    def authority_pins(session: Session) -> tuple[str, ...]:
        return (
            f"owner={session.owner}",
            f"config={session.config_version}",
            f"epoch={session.epoch}",
            f"proposal={session.proposal_digest}:{session.revision}",
        )

    # -- the one locked operation ------------------------------------------------

    def validate_and_mark_presented_card(
        self,
        callback: Callback,
        *,
        canonical_payload: Mapping[str, object],
        candidate: PresentationCandidate,
        surface: str,
        glossary: DualGlossary | None = None,
    ) -> Mapping[str, object]:
        with self._authority_session_lock, self._publication_ledger_lock:
            session = self.sessions[callback.session_id]  # 1. reload
            if callback.action not in CARD_ACTIONS or session.expired:
                raise StaleAuthority("callback")
            payload = revalidate(  # 2 + 3
                candidate,
                canonical_payload,
                callback_data=callback.callback_data,
                origin=CardOrigin.FRESH,
                surface=surface,
                authority_pins=self.authority_pins(session),
                glossary=glossary,
            )
            return self._mark_publish_pending_unlocked(session, surface, payload)  # 4

    def mark_publish_pending_canonical(
        self, session: Session, surface: str, payload: Mapping[str, object]
    ) -> Mapping[str, object]:
        """The host's own path for a payload kexpr did not present (ineligible)."""
        with self._authority_session_lock, self._publication_ledger_lock:
            return self._mark_publish_pending_unlocked(session, surface, payload)

    def _mark_publish_pending_unlocked(
        self, session: Session, surface: str, payload: Mapping[str, object]
    ) -> Mapping[str, object]:
        key = (session.session_id, session.revision, surface)
        for row in self.pending_rows:
            if (row.session_id, row.revision, row.surface) == key:
                if row.payload == payload:
                    return row.payload  # the same commit again: the same row
                raise PublicationConflict("pending card differs")
        row = PendingRow(*key, payload=copy.deepcopy(dict(payload)))
        self.pending_rows.append(row)
        return row.payload

    def mark_published(self, session_id: str, revision: int, surface: str) -> None:
        with self._publication_ledger_lock:
            self.published.append((session_id, revision, surface))

    def recover_pending_cards(self) -> list[PendingRow]:
        with self._publication_ledger_lock:
            return [
                row
                for row in self.pending_rows
                if (row.session_id, row.revision, row.surface) not in self.published
            ]


CardRenderer = Callable[[Session], dict[str, object]]
Editor = Callable[[Mapping[str, object]], None]


class AdaptiveGatewayHost:
    """The gateway's fresh-card callback handler and its recovery path, for one
    deployed profile (``surface``: its card surface)."""

    def __init__(
        self,
        service: AdaptiveOperatorService,
        coordinator: KoreanExpressionCoordinator,
        render_card: CardRenderer,
        editor: Editor,
        *,
        surface: str,
    ) -> None:
        self.service = service
        self.coordinator = coordinator
        self.render_card = render_card
        self.editor = editor
        self.surface = surface

    def present(self, callback: Callback) -> tuple[PresentationCandidate, dict[str, object]]:
        """Candidate creation: canonical card → presentation (outside the locks)."""
        session = self.service.load_session(callback.session_id)
        payload = self.render_card(session)
        cand = self.coordinator.present_adaptive(
            payload,
            callback_data=callback.callback_data,
            surface=self.surface,
            authority_pins=self.service.authority_pins(session),
        )
        return cand, payload

    def _glossary(self) -> DualGlossary | None:
        try:
            return self.coordinator.dual_glossary()
        except GlossaryError:
            return None  # the candidate was canonical already; revalidate proves it

    def commit(
        self,
        callback: Callback,
        cand: PresentationCandidate,
        payload: Mapping[str, object],
    ) -> Mapping[str, object]:
        """The locked operation, then (only then) the Telegram edit."""
        session = self.service.load_session(callback.session_id)
        if cand.outcome is Outcome.INELIGIBLE:
            persisted = self.service.mark_publish_pending_canonical(session, self.surface, payload)
        else:
            try:
                persisted = self.service.validate_and_mark_presented_card(
                    callback,
                    canonical_payload=payload,
                    candidate=cand,
                    surface=self.surface,
                    glossary=self._glossary(),
                )
            except BaseException:
                # No pending row and no edit; the attempt is terminal, never retried.
                if cand.outcome is Outcome.ACCEPTED:
                    self.coordinator.report(cand, Outcome.COMMIT_FAILED)
                raise
            if cand.outcome is Outcome.ACCEPTED:
                self.coordinator.report(cand, Outcome.SELECTED)  # after the durable write
        self.editor(persisted)
        session = self.service.load_session(callback.session_id)
        self.service.mark_published(session.session_id, session.revision, self.surface)
        return persisted

    def handle_review_callback(self, callback: Callback) -> Mapping[str, object] | None:
        cand, payload = self.present(callback)
        if not cand.publication_permitted:
            return None  # in flight elsewhere: no edit
        return self.commit(callback, cand, payload)

    def recover_pending_cards(self) -> int:
        """Republish every unpublished pending card exactly; never presents."""
        rows = self.service.recover_pending_cards()
        for row in rows:
            self.editor(row.payload)
            self.service.mark_published(row.session_id, row.revision, row.surface)
        return len(rows)

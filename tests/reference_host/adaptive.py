"""Reference adaptive host: the operator service and the review-callback handler with
the seams Hermes has at the pin (``Carrie111998/Hermes`` at 4305027f:
``AdaptiveOperatorService`` in ``gateway/platforms/nutrition_coaching.py``,
``TelegramAdapter._handle_adaptive_review_callback`` in ``gateway/platforms/telegram.py``),
plus the method the plan adds. docs/hermes-integration.md walks them seam by seam.

Tests only, and our own code: it reproduces the host's behaviour, not its source.

The seams, as the host has them:

1. ``_authority_session_lock()`` is a context manager and re-entrant: the profile's
   authority lock (cross-process, on the profile root, when the service has one) and
   then the service's ``RLock``. The handler holds it around ``mark_publish_pending``,
   which takes it again; a plain ``Lock`` there deadlocks the event loop.
2. ``_publication_ledger_lock()`` is a no-op when the service has a ``profile_root``
   (the authority lock already serialises every process of the profile) and otherwise
   an exclusive ``fcntl`` lock on ``<session ledger>.lock``. It is NOT re-entrant: a
   second acquisition in one process opens a second descriptor and waits for itself.
   So only the method that writes takes it, once, inside the authority lock.
3. ``mark_publish_pending(session_id, *, card_payload, origin_message_id="")`` takes
   both locks itself; its body is ``_mark_publish_pending_unlocked`` (the plan
   extracts it). A pending row is immutable: the same payload again is the same row,
   a different one is a `PublicationConflict`, never an overwrite. A supplied origin
   message that is not the session's is a conflict too.
4. The plan's ``validate_and_mark_presented_card(callback_data, *, canonical_payload,
   candidate, origin_message_id="")`` takes both locks once and, while they are held,
   reloads the session and rechecks the pressed callback (action, expiry), calls the
   shim's pure ``revalidate`` with the deployed surface, the RELOADED authority pins
   and the glossary in force, and persists exactly the returned payload with
   ``_mark_publish_pending_unlocked``.
5. ``handle_callback`` is synchronous and the host calls it on the event loop; the
   handler awaits ``query.answer`` on its own stale path while it holds the authority
   lock. An ``RLock`` held across an ``await`` excludes other threads, not other
   coroutines of the same loop: the handler therefore never awaits kexpr under it
   (``apresent_adaptive`` runs before the lock), and nothing between reload and write
   awaits.

Payloads have the host's real shape (`gateway_shim.surfaces.card`): the session is
only in the buttons' ``callback_data``; the card kind is the deployed profile's.
"""

from __future__ import annotations

import copy
import fcntl
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gateway_shim import (
    CardOrigin,
    DualGlossary,
    KoreanExpressionCoordinator,
    Outcome,
    PresentationCandidate,
    revalidate,
)
from reference_host.bot import RecordingQuery

# The actions whose callback produces a fresh card at the pin (N:handle_callback,
# N:_render_latest_card).
CARD_ACTIONS = frozenset(
    {"create", "hold", "release", "approve", "activate", "delivery_enable", "delivery_revoke"}
)


class StaleAuthority(Exception):
    """Step 1 failed: the callback is no longer the session's fresh action."""


class PublicationConflict(Exception):
    """A different payload (or origin) is already pending for this card."""


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
    originating_message_id: str = "501"  # the card message the session was issued on
    expired: bool = False


@dataclass(frozen=True, slots=True)
class PendingRow:
    session_id: str
    payload: Mapping[str, object]


def session_id_of(callback_data: str) -> str:
    """``an1:<session>:<action>`` (or a bare session id) -> the session id."""
    parts = callback_data.split(":")
    return parts[1] if len(parts) == 3 and parts[0] == "an1" else callback_data


def action_of(callback_data: str) -> str:
    return callback_data.split(":")[2]


class ProfileAuthorityLock:
    """Stand-in for the profile package's ``profile_authority_lock(profile_root)``
    (private to the host's profile): an exclusive ``flock`` on a file of the profile
    root, held by the outermost acquisition of a thread and re-entrant within it
    (the host's handler nests it, so the real one must be too). One per root per
    process: `for_root`."""

    _by_root: dict[Path, ProfileAuthorityLock] = {}
    _registry = threading.Lock()

    def __init__(self, root: Path) -> None:
        self.path = root / "profile-authority.lock"
        self._threads = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @classmethod
    def for_root(cls, root: Path) -> ProfileAuthorityLock:
        with cls._registry:
            return cls._by_root.setdefault(root.resolve(), cls(root))

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._threads:
            if self._depth == 0:
                fd = os.open(
                    self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._fd = fd
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                    os.close(self._fd)
                    self._fd = None


CardRenderer = Callable[[Session], dict[str, object]]


@dataclass
class AdaptiveOperatorService:
    """The host's operator service for one deployed profile: sessions, the pending-card
    store, the two locks, and the plan's locked operation."""

    sessions: dict[str, Session]
    render_card: CardRenderer
    surface: str  # the deployed profile's card surface
    glossary: Callable[[], DualGlossary | None] = lambda: None  # the dual glossary in force
    profile_root: Path | None = None
    session_path: Path | None = None
    pending_rows: list[PendingRow] = field(default_factory=list)
    published: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.session_path is None and self.profile_root is not None:
            self.session_path = self.profile_root / "adaptive-operator-sessions.jsonl"
        self._session_lock = threading.RLock()

    # -- the two locks (seams 1 and 2) ------------------------------------------------

    @contextmanager
    def _authority_session_lock(self) -> Iterator[None]:
        with self._profile_lock():
            with self._session_lock:
                yield

    @contextmanager
    def _profile_lock(self) -> Iterator[None]:
        if self.profile_root is None:
            yield
            return
        with ProfileAuthorityLock.for_root(self.profile_root).held():
            yield

    @contextmanager
    def _publication_ledger_lock(self) -> Iterator[None]:
        """Serialise publication across processes sharing one session ledger."""
        if self.profile_root is not None or self.session_path is None:
            yield
            return
        lock_path = self.session_path.with_name(self.session_path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    # -- session state -------------------------------------------------------------------

    def load_session(self, callback_data: str) -> Session:
        with self._authority_session_lock():
            return self.sessions[session_id_of(callback_data)]

    def change_session(self, session_id: str, **changes: Any) -> None:
        """An authority change (owner/config/epoch/revision), under the lock."""
        with self._authority_session_lock():
            self.sessions[session_id] = replace(self.sessions[session_id], **changes)

    def session_is_current(self, callback_data: str) -> bool:
        """The host's own recheck before it persists (the pin's handler has one)."""
        with self._authority_session_lock():
            session = self.sessions.get(session_id_of(callback_data))
            return session is not None and not session.expired

    @staticmethod
    def authority_pins(session: Session) -> tuple[str, ...]:
        return (
            f"owner={session.owner}",
            f"config={session.config_version}",
            f"epoch={session.epoch}",
            f"proposal={session.proposal_digest}:{session.revision}",
        )

    def authority_pins_for(self, callback_data: str) -> tuple[str, ...]:
        return self.authority_pins(self.load_session(callback_data))

    def handle_callback(self, callback_data: str, *, message_id: str) -> dict[str, object]:
        """The pressed button's payload (synchronous; the host calls it on the loop)."""
        session = self.load_session(callback_data)
        return self.render_card(session)

    # -- publication (seams 3 and 4) -----------------------------------------------------

    def mark_publish_pending(
        self,
        session_id: object,
        *,
        card_payload: Mapping[str, object],
        origin_message_id: object = "",
    ) -> Mapping[str, object]:
        """The host's own path: persist an already-rendered card (a menu, an
        ineligible card). Takes both locks itself."""
        with self._authority_session_lock(), self._publication_ledger_lock():
            session = self.sessions[session_id_of(str(session_id))]
            return self._mark_publish_pending_unlocked(session, card_payload, origin_message_id)

    def validate_and_mark_presented_card(
        self,
        callback_data: object,
        *,
        canonical_payload: Mapping[str, object],
        candidate: PresentationCandidate,
        origin_message_id: object = "",
    ) -> Mapping[str, object]:
        with self._authority_session_lock(), self._publication_ledger_lock():
            data = str(callback_data)
            session = self.sessions[session_id_of(data)]  # 1. reload and recheck
            if action_of(data) not in CARD_ACTIONS or session.expired:
                raise StaleAuthority("callback")
            payload = revalidate(  # 2 + 3: binding digest, slot and render validation
                candidate,
                canonical_payload,
                callback_data=data,
                origin=CardOrigin.FRESH,
                surface=self.surface,
                authority_pins=self.authority_pins(session),
                glossary=self.glossary(),
            )
            return self._mark_publish_pending_unlocked(session, payload, origin_message_id)  # 4

    def _mark_publish_pending_unlocked(
        self, session: Session, payload: Mapping[str, object], origin_message_id: object
    ) -> Mapping[str, object]:
        origin = str(origin_message_id or "").strip()
        if origin and origin != session.originating_message_id:
            raise PublicationConflict("origin")
        for row in self.pending_rows:
            if row.session_id == session.session_id:
                if row.payload == payload:
                    return row.payload  # the same commit again: the same row
                raise PublicationConflict("pending card differs")
        row = PendingRow(session.session_id, payload=copy.deepcopy(dict(payload)))
        self.pending_rows.append(row)
        return row.payload

    def mark_published(self, session_id: object, *, published_message_id: object) -> None:
        with self._authority_session_lock(), self._publication_ledger_lock():
            self.published.append((session_id_of(str(session_id)), str(published_message_id)))

    def recover_pending_cards(self) -> list[PendingRow]:
        with self._authority_session_lock(), self._publication_ledger_lock():
            done = {sid for sid, _ in self.published}
            return [row for row in self.pending_rows if row.session_id not in done]


class AdaptiveGatewayHost:
    """The review-callback handler and its recovery path (T:`_handle_adaptive_review_callback`)."""

    def __init__(
        self, service: AdaptiveOperatorService, coordinator: KoreanExpressionCoordinator
    ) -> None:
        self.service = service
        self.coordinator = coordinator

    def _report(self, cand: PresentationCandidate | None, outcome: Outcome) -> None:
        """Only an enabled-mode selected candidate (``accepted``) takes a report."""
        if cand is not None and cand.outcome is Outcome.ACCEPTED:
            self.coordinator.report(cand, outcome)

    async def handle_review_callback(self, query: RecordingQuery) -> None:
        service, data = self.service, query.data
        origin = query.message.message_id
        payload = service.handle_callback(data, message_id=origin)  # synchronous, on the loop
        status = payload.get("status")
        cand: PresentationCandidate | None = None
        if status == "card":  # kexpr's wait comes before any host lock is taken
            cand = await self.coordinator.apresent_adaptive(
                payload,
                callback_data=data,
                surface=service.surface,
                authority_pins=service.authority_pins_for(data),
            )
            if not cand.publication_permitted:  # in flight elsewhere: no row, no edit
                await query.answer(text="검토 카드를 처리하는 중입니다.")
                return
        if status in {"menu", "card"}:
            try:
                with service._authority_session_lock():
                    if not service.session_is_current(data):  # the host's own recheck
                        self._report(cand, Outcome.COMMIT_FAILED)
                        await query.answer(text="검토 카드 권한이 변경되었습니다.")
                        return
                    if cand is not None and cand.outcome is not Outcome.INELIGIBLE:
                        payload = dict(
                            service.validate_and_mark_presented_card(
                                data,
                                canonical_payload=payload,
                                candidate=cand,
                                origin_message_id=origin,
                            )
                        )
                    else:  # a menu, or a card kexpr does not read: the host's own path
                        service.mark_publish_pending(
                            data,
                            card_payload=payload,
                            origin_message_id=origin,
                        )
            except Exception:
                self._report(cand, Outcome.COMMIT_FAILED)  # no pending row, no edit
                await query.answer(text="검토 카드를 저장할 수 없습니다.")
                return
            self._report(cand, Outcome.SELECTED)  # after the durable write
        try:
            published = await query.edit_message_text(text=str(payload["text"]))
            if status in {"menu", "card"}:
                service.mark_published(data, published_message_id=published.message_id)
        except Exception:
            await query.answer(text="검토 카드 게시를 완료하지 못했습니다.")
            return
        await query.answer()

    def recover_pending_cards(self, edit: Callable[[Mapping[str, object]], object]) -> int:
        """Republish every unpublished pending card exactly; never presents."""
        rows = self.service.recover_pending_cards()
        for row in rows:
            edit(row.payload)
            self.service.mark_published(row.session_id, published_message_id="recovered")
        return len(rows)

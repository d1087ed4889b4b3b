"""The host's adaptive operator card payload and its eligibility.

The host (Hermes gateway, pinned at ``Carrie111998/Hermes@4305027f``;
docs/host-formats-adaptive.md) publishes, for a fresh card, exactly::

    {
      "status":          "card",
      "customer_key":    str (non-empty),
      "proposal_digest": 64 lowercase hex,
      "revision":        int >= 1 (not a bool),
      "text":            HEADER "\\n" PROGRESS "\\n\\n" BODY,
      "envelope": {"marker": "테스트 전용", "customer_label": str, "kst_day": "YYYY-MM-DD",
                   "revision": int (= revision), "state": str},
      "buttons":  [{"label": str, "callback_data": "an1:<24 hex>:<action>"}, ...]
    }

The HEADER and PROGRESS lines and the buttons of each state are laid out as
`gateway_shim.surfaces._card_layout` says (re-exported here). The payload has no
surface, session or card kind: the surface is the deployed profile's
(dualcoachtest or physique-coach), and the session id is in the ``callback_data``
of the button the operator pressed (``parse_callback``).

Rule 1 — only a ``status == "card"`` payload from a fresh callback is eligible.
Recovery republishes a persisted payload unchanged (never expressed), and every
other payload the host publishes (menu, view, selected, operator input,
terminal delivery, duplicate, rejected, anything else) is ``Ineligible`` with
its own reason: canonical, no request, zero files. Checked in this order: the
origin · the status · the payload keys and types · the envelope · the buttons ·
the pressed callback · the header and progress lines.

Rule 2 — the text is the only part of a payload a presentation may change. The
status, customer key, proposal digest, revision, envelope and buttons are
locked: a host persists the payload with only ``text`` replaced
(``gateway_shim.revalidate``). The header and progress lines are locked too.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gateway_shim.surfaces._card_layout import (
    CALLBACK_RE,
    ENVELOPE_MARKER,
    PROGRESS_LINES,
    SCHEDULE_CONFIRM_BUTTON,
    STATE_BUTTONS,
    expected_buttons,
    header_line,
    parse_callback,
    progress_line,
)
from gateway_shim.surfaces._model import Ineligible, IneligibleReason
from gateway_shim.surfaces._text import is_line_text

__all__ = [
    "ADAPTIVE_SURFACES",
    "CALLBACK_RE",
    "DUAL_SURFACE",
    "ENVELOPE_MARKER",
    "FRESH_CARD_STATUS",
    "PHYSIQUE_SURFACE",
    "PROGRESS_LINES",
    "SCHEDULE_CONFIRM_BUTTON",
    "STATE_BUTTONS",
    "AdaptiveCard",
    "Button",
    "CardEnvelope",
    "CardOrigin",
    "card_payload",
    "expected_buttons",
    "fresh_card",
    "header_line",
    "parse_callback",
    "progress_line",
]

DUAL_SURFACE: Final = "adaptive.dualcoachtest.card.v1"
PHYSIQUE_SURFACE: Final = "adaptive.physique.card.v1"
ADAPTIVE_SURFACES: Final[tuple[str, ...]] = (DUAL_SURFACE, PHYSIQUE_SURFACE)
FRESH_CARD_STATUS: Final = "card"
MAX_LABEL_CHARS: Final = 64

_DIGEST_RE: Final = re.compile(r"[0-9a-f]{64}")
_DAY_RE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

_PAYLOAD_KEYS: Final = frozenset(
    {"status", "customer_key", "proposal_digest", "revision", "text", "envelope", "buttons"}
)
_ENVELOPE_KEYS: Final = frozenset({"marker", "customer_label", "kst_day", "revision", "state"})
_BUTTON_KEYS: Final = frozenset({"label", "callback_data"})

# Statuses the gateway publishes besides "card" (docs/host-formats-adaptive.md §5).
_STATUS_REASONS: Final[Mapping[str, IneligibleReason]] = {
    "menu": IneligibleReason.STATUS_MENU,
    "view": IneligibleReason.STATUS_VIEW,
    "selected": IneligibleReason.STATUS_SELECTED,
    "operator_input_required": IneligibleReason.STATUS_OPERATOR_INPUT,
    "duplicate": IneligibleReason.STATUS_DUPLICATE,
    "rejected": IneligibleReason.STATUS_REJECTED,
}
# N:terminal_delivery_card: event types / statuses of a terminal delivery.
_TERMINAL_STATUSES: Final = frozenset(
    {
        "sent_audited",
        "success",
        "already_attempted",
        "delivery_unknown",
        "unknown",
        "audit_pending",
        "delivered_audit_pending",
    }
)


class CardOrigin(enum.Enum):
    """Why the host is presenting this payload.

    ``FRESH``: the operator's callback just produced it (the only origin that may
    be expressed). ``RECOVERY``: the host is republishing a persisted
    ``card_payload`` (``recover_pending_cards``), which is never re-presented.
    """

    FRESH = "fresh"
    RECOVERY = "recovery"


@dataclass(frozen=True, slots=True)
class Button:
    label: str
    callback_data: str


@dataclass(frozen=True, slots=True)
class CardEnvelope:
    marker: str
    customer_label: str
    kst_day: str
    revision: int
    state: str


@dataclass(frozen=True, slots=True)
class AdaptiveCard:
    """An eligible fresh card: the payload's fields, the session of the pressed
    button, and the card text split into its locked envelope lines and body."""

    customer_key: str
    proposal_digest: str
    revision: int
    text: str
    envelope: CardEnvelope
    buttons: tuple[Button, ...]
    session_id: str
    action: str
    # HEADER "\n" PROGRESS "\n\n": the locked prefix of ``text``.
    envelope_text: str
    body: str


def card_payload(
    *,
    body: str,
    customer_key: str,
    customer_label: str,
    kst_day: str,
    revision: int,
    state: str,
    proposal_digest: str,
    sessions: Sequence[str],
    schedule_confirm: bool = False,
) -> dict[str, object]:
    """Build a payload as the host does (the reference host; tests and samples).

    ``sessions``: one 24-hex session per button, in button order. Raises
    ``ValueError`` when the arguments cannot make a payload ``fresh_card`` reads.
    """
    buttons = expected_buttons(state, schedule_confirm=schedule_confirm)
    if len(sessions) != len(buttons):
        raise ValueError("one session per button")
    payload: dict[str, object] = {
        "status": FRESH_CARD_STATUS,
        "customer_key": customer_key,
        "proposal_digest": proposal_digest,
        "revision": revision,
        "text": header_line(customer_label, kst_day, revision, state)
        + "\n"
        + progress_line(state)
        + "\n\n"
        + body,
        "envelope": {
            "marker": ENVELOPE_MARKER,
            "customer_label": customer_label,
            "kst_day": kst_day,
            "revision": revision,
            "state": state,
        },
        "buttons": [
            {"label": label, "callback_data": f"an1:{session}:{action}"}
            for (label, action), session in zip(buttons, sessions, strict=True)
        ],
    }
    try:
        fresh_card(payload, callback_data=f"an1:{sessions[0]}:create", origin=CardOrigin.FRESH)
    except Ineligible as e:
        raise ValueError(e.reason.value) from e
    return payload


def _status_reason(payload: Mapping[str, object]) -> IneligibleReason | None:
    status = payload.get("status")
    if not isinstance(status, str):
        return IneligibleReason.PAYLOAD_MALFORMED
    if "terminal_state" in payload or "event_type" in payload or status in _TERMINAL_STATUSES:
        return IneligibleReason.STATUS_TERMINAL
    if status == FRESH_CARD_STATUS:
        return None
    return _STATUS_REASONS.get(status, IneligibleReason.STATUS_NOT_CARD)


def _exact(value: object, keys: frozenset[str]) -> Mapping[str, object] | None:
    if not isinstance(value, Mapping) or set(value) != keys:
        return None
    return value


def _is_int_at_least_one(value: object) -> bool:
    return type(value) is int and value >= 1


def _read_envelope(value: object, revision: int) -> CardEnvelope:
    envelope = _exact(value, _ENVELOPE_KEYS)
    if envelope is None:
        raise Ineligible(IneligibleReason.ENVELOPE_MALFORMED)
    marker, label, day = envelope["marker"], envelope["customer_label"], envelope["kst_day"]
    env_revision, state = envelope["revision"], envelope["state"]
    if (
        marker != ENVELOPE_MARKER
        or not is_line_text(label)
        or not is_line_text(state)
        or not isinstance(day, str)
        or _DAY_RE.fullmatch(day) is None
        or not _is_int_at_least_one(env_revision)
        or env_revision != revision
    ):
        raise Ineligible(IneligibleReason.ENVELOPE_MALFORMED)
    try:
        dt.date.fromisoformat(day)
    except ValueError as e:
        raise Ineligible(IneligibleReason.ENVELOPE_MALFORMED) from e
    assert isinstance(label, str) and isinstance(state, str) and type(env_revision) is int
    return CardEnvelope(
        marker=ENVELOPE_MARKER,
        customer_label=label,
        kst_day=day,
        revision=env_revision,
        state=state,
    )


def _read_buttons(value: object, state: str) -> tuple[Button, ...]:
    if not isinstance(value, (list, tuple)):
        raise Ineligible(IneligibleReason.BUTTONS_MALFORMED)
    buttons: list[Button] = []
    actions: list[tuple[str, str]] = []
    for raw in value:
        button = _exact(raw, _BUTTON_KEYS)
        if button is None:
            raise Ineligible(IneligibleReason.BUTTONS_MALFORMED)
        label, data = button["label"], button["callback_data"]
        if (
            not is_line_text(label)
            or not isinstance(label, str)
            or label != label.strip()
            or len(label) > MAX_LABEL_CHARS
            or not isinstance(data, str)
            or CALLBACK_RE.fullmatch(data) is None
        ):
            raise Ineligible(IneligibleReason.BUTTONS_MALFORMED)
        buttons.append(Button(label=label, callback_data=data))
        actions.append((label, data.rsplit(":", 1)[1]))
    shown = tuple(actions)
    if shown not in (
        expected_buttons(state),
        expected_buttons(state, schedule_confirm=True),
    ):
        raise Ineligible(IneligibleReason.BUTTONS_MISMATCH)
    return tuple(buttons)


def fresh_card(payload: object, *, callback_data: object, origin: CardOrigin) -> AdaptiveCard:
    """Rule 1: ``payload`` as an eligible fresh card, or ``Ineligible``."""
    if not isinstance(origin, CardOrigin):
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    if origin is not CardOrigin.FRESH:
        raise Ineligible(IneligibleReason.RECOVERY_PAYLOAD)
    if not isinstance(payload, Mapping):
        raise Ineligible(IneligibleReason.PAYLOAD_MALFORMED)
    reason = _status_reason(payload)
    if reason is not None:
        raise Ineligible(reason)
    top = _exact(payload, _PAYLOAD_KEYS)
    if top is None:
        raise Ineligible(IneligibleReason.PAYLOAD_MALFORMED)
    customer_key, digest = top["customer_key"], top["proposal_digest"]
    revision, text = top["revision"], top["text"]
    if (
        not isinstance(customer_key, str)
        or not customer_key
        or not isinstance(digest, str)
        or _DIGEST_RE.fullmatch(digest) is None
        or not _is_int_at_least_one(revision)
        or not isinstance(text, str)
    ):
        raise Ineligible(IneligibleReason.PAYLOAD_MALFORMED)
    assert type(revision) is int
    envelope = _read_envelope(top["envelope"], revision)
    buttons = _read_buttons(top["buttons"], envelope.state)
    session_id, action = parse_callback(callback_data)

    header = header_line(envelope.customer_label, envelope.kst_day, revision, envelope.state)
    first, sep, rest = text.partition("\n")
    if first != header or not sep:
        raise Ineligible(IneligibleReason.HEADER_MISMATCH)
    progress, sep, body = rest.partition("\n")
    if progress != progress_line(envelope.state) or not sep:
        raise Ineligible(IneligibleReason.PROGRESS_MISMATCH)
    # Exactly one blank line, then a non-empty body (the host strips the body).
    if not body.startswith("\n") or body[1:2] in ("", "\n"):
        raise Ineligible(IneligibleReason.BODY_SEPARATOR_MISSING)
    envelope_text = header + "\n" + progress + "\n\n"
    return AdaptiveCard(
        customer_key=customer_key,
        proposal_digest=digest,
        revision=revision,
        text=text,
        envelope=envelope,
        buttons=buttons,
        session_id=session_id,
        action=action,
        envelope_text=envelope_text,
        body=text[len(envelope_text) :],
    )

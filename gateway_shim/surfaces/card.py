"""The enveloped adaptive card payload and its eligibility (SPEC §7; plan "Adaptive
schemas and publication boundary").

This product's v1 payload, as the host's adaptive operator service persists it
in ``card_payload`` (exactly these keys, exact JSON types; a bool is not an int)::

    {
      "status":   "card" | "menu" | "view" | "operator_input" | ... (a str),
      "text":     str,                       # the card text (a surface grammar)
      "buttons":  [[{"text": str, "callback_data": str}, ...], ...],  # rows
      "envelope": {
        "schema_version":  "adaptive.dualcoachtest.card.v1"
                         | "adaptive.physique.card.v1",
        "session_id":      str,
        "proposal_digest": str,
        "revision":        int >= 0,
        "card_kind":       str
      }
    }

Rules of this module:

Rule 1 — only a *fresh* ``status == "card"`` payload of a known schema, bound to
the host's own session/proposal/revision/card kind, is eligible. ``menu``,
``view``, operator input, terminal delivery, published, recovery, malformed and
unknown-future-schema payloads are ``Ineligible``: canonical, no request, zero
files. Checked in this order: the binding's origin (recovery) · the payload's
shape · its schema · its status · the envelope against the binding.

Rule 2 — the text is the only part of a payload a presentation may change. The
status, buttons and envelope are locked: a host persists the canonical payload
with only ``text`` replaced (``gateway_shim.revalidate`` returns exactly that).

Rule 3 — the envelope separator and title prefix are fixed constants of each
card's v1 grammar: the first line of ``text`` is the title (the card's title
prefix, then locked host text) and the second line is ``ENVELOPE_SEPARATOR_LINE``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gateway_shim.surfaces._model import Ineligible, IneligibleReason

__all__ = [
    "ADAPTIVE_SURFACES",
    "DUAL_SURFACE",
    "ENVELOPE_SEPARATOR_LINE",
    "FRESH_CARD_STATUS",
    "PHYSIQUE_SURFACE",
    "AdaptiveBinding",
    "AdaptiveCard",
    "Button",
    "CardEnvelope",
    "CardOrigin",
    "adaptive_surface_of",
    "card_payload",
    "fresh_card",
    "read_card",
]

DUAL_SURFACE: Final = "adaptive.dualcoachtest.card.v1"
PHYSIQUE_SURFACE: Final = "adaptive.physique.card.v1"
ADAPTIVE_SURFACES: Final[tuple[str, ...]] = (DUAL_SURFACE, PHYSIQUE_SURFACE)
FRESH_CARD_STATUS: Final = "card"
# The line between the envelope's title and the card body (Rule 3).
ENVELOPE_SEPARATOR_LINE: Final = "━━━━━━━━━━━━"

_PAYLOAD_KEYS: Final = frozenset({"status", "text", "buttons", "envelope"})
_ENVELOPE_KEYS: Final = frozenset(
    {"schema_version", "session_id", "proposal_digest", "revision", "card_kind"}
)
_BUTTON_KEYS: Final = frozenset({"text", "callback_data"})


class CardOrigin(enum.Enum):
    """Why the host is presenting this card.

    ``FRESH_CALLBACK``: the operator's callback just produced it (the only origin
    that may be expressed). ``RECOVERY``: the host is republishing a persisted
    ``card_payload``; recovery never regenerates a presentation (plan "Verified
    source boundaries": ``recover_pending_cards`` republishes unchanged).
    """

    FRESH_CALLBACK = "fresh_callback"
    RECOVERY = "recovery"


@dataclass(frozen=True, slots=True)
class AdaptiveBinding:
    """What a card presentation is bound to, from the host's own session state.

    ``callback_action`` is the fresh callback/session action being handled;
    ``origin_message_id`` the origin provenance ("" when there is none). The
    artifact key uses (surface, session_id, proposal_digest, revision, card_kind);
    the binding digest uses all of it. Raw values never leave the gateway.
    """

    callback_action: str
    session_id: str
    proposal_digest: str
    revision: int
    card_kind: str
    origin_message_id: str = ""
    origin: CardOrigin = CardOrigin.FRESH_CALLBACK
    # The host's own authority pins (owner, config, registry, consent,
    # activation, source, epoch...), as opaque strings it rebuilds from its
    # reloaded session. Only the binding digest sees them, so any change between
    # candidate creation and the locked commit makes `revalidate` fail.
    authority_pins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("callback_action", "session_id", "proposal_digest", "card_kind"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise TypeError(f"{name} must be a non-empty str")
        if not isinstance(self.origin_message_id, str):
            raise TypeError("origin_message_id must be a str")
        if type(self.revision) is not int or self.revision < 0:
            raise TypeError("revision must be a non-negative int")
        if not isinstance(self.origin, CardOrigin):
            raise TypeError("origin must be a CardOrigin")
        if not isinstance(self.authority_pins, tuple) or not all(
            isinstance(pin, str) for pin in self.authority_pins
        ):
            raise TypeError("authority_pins must be a tuple of str")

    def to_json_object(self) -> dict[str, object]:
        return {
            "callback_action": self.callback_action,
            "session_id": self.session_id,
            "proposal_digest": self.proposal_digest,
            "revision": self.revision,
            "card_kind": self.card_kind,
            "origin_message_id": self.origin_message_id,
            "origin": self.origin.value,
            "authority_pins": list(self.authority_pins),
        }


@dataclass(frozen=True, slots=True)
class Button:
    text: str
    callback_data: str


@dataclass(frozen=True, slots=True)
class CardEnvelope:
    schema_version: str
    session_id: str
    proposal_digest: str
    revision: int
    card_kind: str


@dataclass(frozen=True, slots=True)
class AdaptiveCard:
    """A well-formed payload (any status), read by ``read_card``."""

    status: str
    text: str
    buttons: tuple[tuple[Button, ...], ...]
    envelope: CardEnvelope

    def to_json_object(self) -> dict[str, object]:
        """The payload as plain JSON values (lists, dicts), for digests."""
        return {
            "status": self.status,
            "text": self.text,
            "buttons": [
                [{"text": b.text, "callback_data": b.callback_data} for b in row]
                for row in self.buttons
            ],
            "envelope": {
                "schema_version": self.envelope.schema_version,
                "session_id": self.envelope.session_id,
                "proposal_digest": self.envelope.proposal_digest,
                "revision": self.envelope.revision,
                "card_kind": self.envelope.card_kind,
            },
        }


def card_payload(
    *,
    surface: str,
    text: str,
    buttons: Sequence[Sequence[tuple[str, str]]],
    session_id: str,
    proposal_digest: str,
    revision: int,
    card_kind: str,
    status: str = FRESH_CARD_STATUS,
) -> dict[str, object]:
    """Build a v1 payload (the host's renderer); ``buttons`` as rows of
    ``(text, callback_data)``. Raises ``ValueError`` for what ``read_card`` would
    refuse."""
    payload: dict[str, object] = {
        "status": status,
        "text": text,
        "buttons": [[{"text": t, "callback_data": d} for t, d in row] for row in buttons],
        "envelope": {
            "schema_version": surface,
            "session_id": session_id,
            "proposal_digest": proposal_digest,
            "revision": revision,
            "card_kind": card_kind,
        },
    }
    try:
        read_card(payload)
    except Ineligible as e:
        raise ValueError(e.reason.value) from e
    return payload


def adaptive_surface_of(payload: object) -> str | None:
    """The payload's adaptive surface version if it names a known one, else None.

    A peek used to label a candidate; eligibility is ``fresh_card``'s job.
    """
    if isinstance(payload, Mapping):
        envelope = payload.get("envelope")
        if isinstance(envelope, Mapping):
            schema = envelope.get("schema_version")
            if isinstance(schema, str) and schema in ADAPTIVE_SURFACES:
                return schema
    return None


def _exact_keys(value: object, keys: frozenset[str]) -> Mapping[str, object] | None:
    if not isinstance(value, Mapping) or set(value) != keys:
        return None
    return value


def _is_str(value: object, *, nonempty: bool = True) -> bool:
    return isinstance(value, str) and (bool(value) or not nonempty)


def read_card(payload: object) -> AdaptiveCard:
    """Read a payload of any status; raises ``Ineligible`` unless well-formed v1.

    The schema is checked before the exact key sets, so that a payload of an
    unknown future schema (which may have other keys) says so.
    """
    if not isinstance(payload, Mapping):
        raise Ineligible(IneligibleReason.PAYLOAD_MALFORMED)
    raw_envelope = payload.get("envelope")
    if not isinstance(raw_envelope, Mapping) or not isinstance(
        raw_envelope.get("schema_version"), str
    ):
        raise Ineligible(IneligibleReason.PAYLOAD_MALFORMED)
    if raw_envelope["schema_version"] not in ADAPTIVE_SURFACES:
        raise Ineligible(IneligibleReason.UNKNOWN_SCHEMA)
    top = _exact_keys(payload, _PAYLOAD_KEYS)
    envelope = _exact_keys(raw_envelope, _ENVELOPE_KEYS)
    if top is None or envelope is None:
        raise Ineligible(IneligibleReason.PAYLOAD_MALFORMED)
    status, text = top["status"], top["text"]
    if not _is_str(status) or not _is_str(text, nonempty=False):
        raise Ineligible(IneligibleReason.PAYLOAD_MALFORMED)
    revision = envelope["revision"]
    session_id = envelope["session_id"]
    proposal_digest = envelope["proposal_digest"]
    card_kind = envelope["card_kind"]
    if (
        not isinstance(session_id, str)
        or not isinstance(proposal_digest, str)
        or not isinstance(card_kind, str)
        or not (session_id and proposal_digest and card_kind)
        or type(revision) is not int
        or revision < 0
    ):
        raise Ineligible(IneligibleReason.PAYLOAD_MALFORMED)
    assert isinstance(status, str) and isinstance(text, str)
    return AdaptiveCard(
        status=status,
        text=text,
        buttons=_read_buttons(top["buttons"]),
        envelope=CardEnvelope(
            schema_version=raw_envelope["schema_version"],
            session_id=session_id,
            proposal_digest=proposal_digest,
            revision=revision,
            card_kind=card_kind,
        ),
    )


def _read_buttons(value: object) -> tuple[tuple[Button, ...], ...]:
    """buttons ::= [ row* ]; row ::= [ button+ ]; button ::= {text, callback_data}."""
    if not isinstance(value, (list, tuple)):
        raise Ineligible(IneligibleReason.BUTTONS_MALFORMED)
    rows: list[tuple[Button, ...]] = []
    for row in value:
        if not isinstance(row, (list, tuple)) or not row:
            raise Ineligible(IneligibleReason.BUTTONS_MALFORMED)
        buttons: list[Button] = []
        for raw in row:
            button = _exact_keys(raw, _BUTTON_KEYS)
            if button is None:
                raise Ineligible(IneligibleReason.BUTTONS_MALFORMED)
            label, data = button["text"], button["callback_data"]
            if not isinstance(label, str) or not isinstance(data, str) or not (label and data):
                raise Ineligible(IneligibleReason.BUTTONS_MALFORMED)
            buttons.append(Button(text=label, callback_data=data))
        rows.append(tuple(buttons))
    return tuple(rows)


def fresh_card(payload: object, binding: AdaptiveBinding, surface: str) -> AdaptiveCard:
    """Rule 1: the payload as an eligible fresh card of ``surface``, or ``Ineligible``."""
    if not isinstance(binding, AdaptiveBinding):
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    if binding.origin is not CardOrigin.FRESH_CALLBACK:
        raise Ineligible(IneligibleReason.RECOVERY_PAYLOAD)
    card = read_card(payload)
    if card.envelope.schema_version != surface:
        raise Ineligible(IneligibleReason.SCHEMA_MISMATCH)
    if card.status != FRESH_CARD_STATUS:
        raise Ineligible(IneligibleReason.STATUS_NOT_CARD)
    envelope = card.envelope
    if (
        envelope.session_id != binding.session_id
        or envelope.proposal_digest != binding.proposal_digest
        or envelope.revision != binding.revision
        or envelope.card_kind != binding.card_kind
    ):
        raise Ineligible(IneligibleReason.BINDING_MISMATCH)
    return card

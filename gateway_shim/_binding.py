"""The host integration contract (design §8): `binding_digest` and `revalidate`, pure.

Holds the two functions an adaptive host calls under its own service locks
before persisting a pending card, the refusal they raise
(`RevalidationError` with its `RevalidationReason` enum, never content), and the
digest helpers the coordinator binds daily and weekly candidates with. Private:
import these names from `gateway_shim.coordinator` (or `gateway_shim`).
Coordinator rules that apply: rule 8 (below), rule 3 (a selected body is
re-proved from its own strict-parsed composition) and rule 1 (any doubt is a
refusal; nothing is repaired).

Rule 8 of `gateway_shim.coordinator`, in full:

8. The host integration contract (design §8) is two pure functions:
   `binding_digest` and `revalidate`, which an adaptive host calls under its
   own service locks before persisting a pending card (validation and
   persistence are one locked operation of the host's). Neither does I/O;
   neither needs the coordinator.
"""

from __future__ import annotations

import copy
import enum
import hashlib
from collections.abc import Mapping
from typing import Final

from gateway_shim._candidate import CandidateStatus, PresentationCandidate
from gateway_shim.operator_glossary import DualGlossary
from gateway_shim.surfaces import Ineligible, IneligibleReason, RenderError
from gateway_shim.surfaces.adaptive import adaptive_card, parse_adaptive
from gateway_shim.surfaces.card import CardOrigin
from kexpr.spool.canonical import canonical_json
from kexpr.spool.outcomes import Outcome

BINDING_DIGEST_VERSION: Final = "kexpr-binding-v1"


def _digest(parts: Mapping[str, object]) -> str:
    return hashlib.sha256(canonical_json(parts).encode("utf-8")).hexdigest()


def _artifact_binding(surface_version: str, body: str, key_fields: tuple[object, ...]) -> str:
    """Daily/weekly binding digest: the surface, the canonical body, the artifact."""
    return _digest(
        {
            "version": BINDING_DIGEST_VERSION,
            "surface": surface_version,
            "body": body,
            "artifact": list(key_fields),
        }
    )


# --- the host integration contract (design §8), pure -----------------------------------


def _pins(authority_pins: tuple[str, ...]) -> list[str]:
    if not isinstance(authority_pins, tuple) or not all(
        isinstance(pin, str) for pin in authority_pins
    ):
        raise TypeError("authority_pins must be a tuple of str")
    return list(authority_pins)


def binding_digest(
    canonical_payload: Mapping[str, object],
    *,
    callback_data: str,
    origin: CardOrigin = CardOrigin.FRESH,
    surface: str | None = None,
    authority_pins: tuple[str, ...] = (),
) -> str:
    """SHA-256 over canonical JSON of what an adaptive presentation is bound to.

    The pressed button's ``callback_data`` (its session and action), the origin,
    the surface (the deployed profile's, or the one the body's grammar names),
    the host's authority pins (owner, config, registry, consent, activation,
    source, epoch..., as opaque strings it rebuilds from its reloaded session),
    and the whole payload: status, customer key, proposal digest, revision,
    text, envelope and buttons. Internal: never persisted, sent, journaled or
    emitted (it lives only inside the host's locked validate-and-persist step).

    Raises ``Ineligible`` when the payload is not an eligible fresh card (see
    `gateway_shim.surfaces.card`) or holds text UTF-8 cannot encode (a lone
    surrogate: ``invalid_unicode``), ``TypeError`` for malformed pins; nothing
    else, for any argument (coordinator rule 9).
    """
    pins = _pins(authority_pins)
    try:
        return _payload_digest(canonical_payload, callback_data, origin, surface, pins)
    except Ineligible:
        raise
    except UnicodeError:
        raise Ineligible(IneligibleReason.INVALID_UNICODE) from None
    except Exception:  # noqa: BLE001 - rule 9: an unreadable payload is not eligible
        raise Ineligible(IneligibleReason.NOT_TEXT) from None


def _payload_digest(
    canonical_payload: Mapping[str, object],
    callback_data: str,
    origin: CardOrigin,
    surface: str | None,
    pins: list[str],
) -> str:
    card, resolved = adaptive_card(
        canonical_payload, callback_data=callback_data, origin=origin, surface=surface
    )
    return _digest(
        {
            "version": BINDING_DIGEST_VERSION,
            "callback_data": callback_data,
            "origin": origin.value,
            "surface": resolved,
            "authority_pins": pins,
            "payload": {
                "status": "card",
                "customer_key": card.customer_key,
                "proposal_digest": card.proposal_digest,
                "revision": card.revision,
                "text": card.text,
                "envelope": {
                    "marker": card.envelope.marker,
                    "customer_label": card.envelope.customer_label,
                    "kst_day": card.envelope.kst_day,
                    "revision": card.envelope.revision,
                    "state": card.envelope.state,
                },
                "buttons": [
                    {"label": b.label, "callback_data": b.callback_data} for b in card.buttons
                ],
            },
        }
    )


class RevalidationReason(enum.Enum):
    """Why `revalidate` refused a candidate. Enum only, never content."""

    NOT_A_CANDIDATE = "not_a_candidate"
    NOT_PUBLISHABLE = "not_publishable"
    INELIGIBLE = "ineligible"
    SURFACE_MISMATCH = "surface_mismatch"
    BINDING_MISMATCH = "binding_mismatch"
    RENDER_MISMATCH = "render_mismatch"


class RevalidationError(ValueError):
    """The candidate is stale or invalid for this payload and binding: persist
    nothing from it and edit nothing. The message is the enum value only. A
    ``ValueError`` (the host's misuse), and the only exception `revalidate`
    raises, for any argument (coordinator rule 9)."""

    def __init__(self, reason: RevalidationReason) -> None:
        super().__init__(reason.value)
        self.reason: Final = reason


def revalidate(
    candidate: PresentationCandidate,
    canonical_payload: Mapping[str, object],
    *,
    callback_data: str,
    origin: CardOrigin = CardOrigin.FRESH,
    surface: str | None = None,
    authority_pins: tuple[str, ...] = (),
    glossary: DualGlossary | None = None,
) -> dict[str, object]:
    """Re-prove an adaptive candidate against the host's CURRENT state. Pure.

    For the host to call while holding its own service locks, right before it
    persists the pending card:

    1. re-parse ``canonical_payload`` with the versioned adapter (fresh card,
       the pressed ``callback_data``, the deployed ``surface``, the dual
       ``glossary`` in force: pass `KoreanExpressionCoordinator.dual_glossary()`;
       ``None`` is the shipped public texts);
    2. recompute `binding_digest` (with the host's reloaded ``authority_pins``)
       and require equality with the candidate's;
    3. re-run slot and render validation: a selected body must re-render from
       its own strict-parsed composition, byte for byte with the same locked
       spans; a canonical body must be the surface's canonical body (or, for a
       ``disabled`` candidate, the payload text unchanged).

    Returns the payload to persist: a deep copy of ``canonical_payload`` with
    only ``text`` replaced by the candidate's body, so status, customer key,
    proposal digest, revision, buttons and envelope are identical. Raises
    `RevalidationError` otherwise. (The artifact key is not recomputed: that
    needs ``identity.key``; the digest binds the same inputs and more.)
    """
    try:
        return _revalidate(
            candidate, canonical_payload, callback_data, origin, surface, authority_pins, glossary
        )
    except RevalidationError:
        raise
    except Exception:  # noqa: BLE001 - rule 9: whatever the arguments, one refusal
        raise RevalidationError(RevalidationReason.INELIGIBLE) from None


def _revalidate(
    candidate: PresentationCandidate,
    canonical_payload: Mapping[str, object],
    callback_data: str,
    origin: CardOrigin,
    surface: str | None,
    authority_pins: tuple[str, ...],
    glossary: DualGlossary | None,
) -> dict[str, object]:
    if not isinstance(candidate, PresentationCandidate):
        raise RevalidationError(RevalidationReason.NOT_A_CANDIDATE)
    if not candidate.publication_permitted:
        raise RevalidationError(RevalidationReason.NOT_PUBLISHABLE)
    try:
        parsed = parse_adaptive(
            canonical_payload,
            callback_data=callback_data,
            origin=origin,
            surface=surface,
            glossary=glossary,
        )
        digest = binding_digest(
            canonical_payload,
            callback_data=callback_data,
            origin=origin,
            surface=surface,
            authority_pins=authority_pins,
        )
    except (Ineligible, TypeError) as e:
        raise RevalidationError(RevalidationReason.INELIGIBLE) from e
    if candidate.surface_version != parsed.surface:
        raise RevalidationError(RevalidationReason.SURFACE_MISMATCH)
    if candidate.binding_digest != digest:
        raise RevalidationError(RevalidationReason.BINDING_MISMATCH)
    if candidate.status is CandidateStatus.SELECTED:
        if candidate.outcome is not Outcome.ACCEPTED:
            raise RevalidationError(RevalidationReason.RENDER_MISMATCH)
        try:
            rendered = parsed.render(dict(candidate.generated))
        except RenderError as e:
            raise RevalidationError(RevalidationReason.RENDER_MISMATCH) from e
        if (rendered.body, rendered.locked_spans_utf16) != (
            candidate.body,
            candidate.locked_spans_utf16,
        ):
            raise RevalidationError(RevalidationReason.RENDER_MISMATCH)
    else:
        # Canonical: the surface's canonical body (a physique card's projection),
        # or, when the feature was off for this card or the coordinator closed
        # before reading it, the source text untouched.
        source_text = canonical_payload.get("text")
        untouched = candidate.outcome in (Outcome.DISABLED, Outcome.CLOSED)
        if candidate.body != parsed.canonical().body and not (
            untouched and candidate.body == source_text
        ):
            raise RevalidationError(RevalidationReason.RENDER_MISMATCH)
    persisted = copy.deepcopy(dict(canonical_payload))
    persisted["text"] = candidate.body
    return persisted

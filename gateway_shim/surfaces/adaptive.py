"""One entry point for both adaptive card schemas.

``parse_adaptive`` checks the host's payload (``card.fresh_card``: status,
envelope, buttons, the pressed callback, header and progress lines), then the
body with the deployed profile's grammar: ``surface`` is the profile's
(``DUAL_SURFACE`` for dualcoachtest, ``PHYSIQUE_SURFACE`` for physique-coach), or
``None`` to let the body decide — the two grammars are disjoint (a dual body
ends with ``고객에게는 아직 전달되지 않았습니다.``, a physique body with its
``상태: …`` status line). The coordinator presents with it and
``gateway_shim.revalidate`` re-parses with it, so both always agree.

``presented_host_text`` gives back the text the host rendered: the canonical
presentation without the physique projection (identical for dual), so
``presented_host_text(parse_adaptive(p, ...)) == p["text"]`` for every eligible
payload (the roundtrip of ``kexpr surfaces check``).
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway_shim.operator_glossary import SHIPPED_DUAL_GLOSSARY, DualGlossary
from gateway_shim.surfaces._model import CanonicalSurface, Ineligible, IneligibleReason
from gateway_shim.surfaces._text import check_body
from gateway_shim.surfaces.card import (
    ADAPTIVE_SURFACES,
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    AdaptiveCard,
    CardOrigin,
    fresh_card,
)
from gateway_shim.surfaces.dual import is_dual_body, parse_dual_body
from gateway_shim.surfaces.physique import (
    is_physique_body,
    parse_physique_body,
    strip_review_notice,
)

__all__ = ["adaptive_card", "parse_adaptive", "presented_host_text", "resolve_surface"]


def resolve_surface(card: AdaptiveCard, surface: str | None) -> str:
    """The surface whose grammar reads ``card``'s body."""
    if surface is not None:
        if surface not in ADAPTIVE_SURFACES:
            raise Ineligible(IneligibleReason.UNKNOWN_SURFACE)
        return surface
    if is_dual_body(card.body):
        return DUAL_SURFACE
    if is_physique_body(card.body):
        return PHYSIQUE_SURFACE
    raise Ineligible(IneligibleReason.BODY_GRAMMAR_UNKNOWN)


def adaptive_card(
    payload: Mapping[str, object],
    *,
    callback_data: str,
    origin: CardOrigin,
    surface: str | None = None,
) -> tuple[AdaptiveCard, str]:
    """The eligible fresh card and its surface (no body grammar yet)."""
    if surface is not None and surface not in ADAPTIVE_SURFACES:
        raise Ineligible(IneligibleReason.UNKNOWN_SURFACE)
    card = fresh_card(payload, callback_data=callback_data, origin=origin)
    return card, resolve_surface(card, surface)


def parse_adaptive(
    payload: Mapping[str, object],
    *,
    callback_data: str,
    origin: CardOrigin,
    surface: str | None = None,
    glossary: DualGlossary | None = None,
) -> CanonicalSurface:
    """Parse a fresh adaptive card payload; ``Ineligible`` (enum only) otherwise.

    ``glossary``: the dual decision/reason glossary in force (None: the shipped
    public texts). Not used for a physique card.
    """
    card, resolved = adaptive_card(
        payload, callback_data=callback_data, origin=origin, surface=surface
    )
    if resolved == PHYSIQUE_SURFACE:
        return parse_physique_body(card.envelope_text, card.body)
    check_body(card.text)
    if glossary is None:
        glossary = SHIPPED_DUAL_GLOSSARY
    elif not isinstance(glossary, DualGlossary):
        raise Ineligible(IneligibleReason.GLOSSARY_INVALID)
    return parse_dual_body(card.envelope_text, card.body, glossary)


def presented_host_text(surface: CanonicalSurface) -> str:
    """The text the host rendered: the canonical presentation minus the physique
    ``검토 안내`` block; identical for a dual card."""
    body = surface.canonical().body
    if surface.surface == PHYSIQUE_SURFACE:
        return strip_review_notice(body)
    return body

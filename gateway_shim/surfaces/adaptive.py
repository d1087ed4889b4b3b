"""One entry point for both adaptive card schemas (SPEC §7).

``parse_adaptive`` reads the payload's envelope schema and hands the payload to
that schema's versioned adapter; an unknown schema, or facts of the wrong kind
for the schema, is ``Ineligible``. The coordinator presents with it and
``gateway_shim.revalidate`` re-parses with it, so both always use the same
versioned adapter for the same payload.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway_shim.surfaces._model import CanonicalSurface, Ineligible, IneligibleReason
from gateway_shim.surfaces.card import (
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    AdaptiveBinding,
    read_card,
)
from gateway_shim.surfaces.dual import DualFacts, parse_dual_card
from gateway_shim.surfaces.physique import parse_physique_card

__all__ = ["parse_adaptive"]


def parse_adaptive(
    payload: Mapping[str, object], binding: AdaptiveBinding, facts: DualFacts | None = None
) -> CanonicalSurface:
    """Parse an adaptive payload with its schema's adapter.

    ``facts``: the ``DualFacts`` for a dualcoachtest card; ``None`` for a
    physique card (its only slot has a fixed ID).
    """
    schema = read_card(payload).envelope.schema_version
    if schema == DUAL_SURFACE:
        return parse_dual_card(payload, binding, facts)
    assert schema == PHYSIQUE_SURFACE
    surface = parse_physique_card(payload, binding)
    # Eligibility (origin, status, binding, grammar) decides first, the facts
    # only then: a menu payload is STATUS_NOT_CARD whatever facts came with it.
    if facts is not None:
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    return surface

"""Surface adapters (design §7): parse a canonical body, render a composition.

Pure: no I/O, no clock, no randomness. Each surface module exports its own
``parse_*``/``format_*`` pair; the surface-independent model is re-exported here.

- ``daily``     ``daily.v1``                         (``parse_daily``)
- ``weekly``    ``weekly.v1``                        (``parse_weekly``)
- ``card``      the host's adaptive card payload and its eligibility
- ``dual``      ``adaptive.dualcoachtest.card.v1``   (``parse_dual_body``)
- ``physique``  ``adaptive.physique.card.v1``        (``parse_physique_body``)
- ``adaptive``  ``parse_adaptive``: either card, by the deployed profile's surface
                (or the body's grammar); ``presented_host_text``
"""

from gateway_shim.surfaces._model import (
    SENTENCE_SEPARATORS,
    TELEGRAM_MAX_UTF16,
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    Locked,
    Placeholder,
    ProseSlot,
    RenderedBody,
    RenderError,
    RenderReason,
    SlotRef,
    sentence_separator,
    utf16_len,
)

__all__ = [
    "SENTENCE_SEPARATORS",
    "TELEGRAM_MAX_UTF16",
    "CanonicalSurface",
    "Ineligible",
    "IneligibleReason",
    "Locked",
    "Placeholder",
    "ProseSlot",
    "RenderError",
    "RenderReason",
    "RenderedBody",
    "SlotRef",
    "sentence_separator",
    "utf16_len",
]

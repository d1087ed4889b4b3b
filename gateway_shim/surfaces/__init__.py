"""Surface adapters (SPEC §7): parse a canonical body, render a composition.

Pure: no I/O, no clock, no randomness. Each surface module exports its own
``parse_*``/``format_*`` pair; the surface-independent model is re-exported here.
"""

from gateway_shim.surfaces._model import (
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
    utf16_len,
)

__all__ = [
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
    "utf16_len",
]

"""kexpr gateway shim: imported into the host gateway (SPEC §8).

Light on purpose: pydantic and watchdog only. It never imports the
provider SDK and never reads the provider key.

One coordinator method per surface (``present_daily``, ``present_weekly``,
``present_adaptive`` and their ``apresent_*`` twins), the reference renderers of
each surface's v1 canonical format, the typed facts a host passes, and the two
pure functions of the host integration contract (``binding_digest``,
``revalidate``).
"""

from gateway_shim.config import ConfigDiagnostic, KoreanExpressionConfig, Mode, exact_block
from gateway_shim.coordinator import (
    ADAPTIVE_UNKNOWN_SURFACE,
    CandidateOutcome,
    CandidateStatus,
    HostOutcome,
    KoreanExpressionCoordinator,
    PresentationCandidate,
    RevalidationError,
    RevalidationReason,
    binding_digest,
    revalidate,
)
from gateway_shim.surfaces.card import AdaptiveBinding, CardOrigin, card_payload
from gateway_shim.surfaces.daily import DailyFacts, format_daily
from gateway_shim.surfaces.dual import DualDecision, DualFacts, DualReason, format_dual_card
from gateway_shim.surfaces.physique import format_physique_card
from gateway_shim.surfaces.weekly import (
    WeeklyFacts,
    WeeklyInterpretation,
    WeeklyRationale,
    format_weekly,
)

__all__ = [
    "ADAPTIVE_UNKNOWN_SURFACE",
    "AdaptiveBinding",
    "CandidateOutcome",
    "CandidateStatus",
    "CardOrigin",
    "ConfigDiagnostic",
    "DailyFacts",
    "DualDecision",
    "DualFacts",
    "DualReason",
    "HostOutcome",
    "KoreanExpressionConfig",
    "KoreanExpressionCoordinator",
    "Mode",
    "PresentationCandidate",
    "RevalidationError",
    "RevalidationReason",
    "WeeklyFacts",
    "WeeklyInterpretation",
    "WeeklyRationale",
    "binding_digest",
    "card_payload",
    "exact_block",
    "format_daily",
    "format_dual_card",
    "format_physique_card",
    "format_weekly",
    "revalidate",
]

"""kexpr gateway shim: imported into the host gateway (design §8).

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
    Outcome,
    PresentationCandidate,
    RevalidationError,
    RevalidationReason,
    binding_digest,
    revalidate,
)
from gateway_shim.operator_glossary import DualGlossary, GlossaryError, load_operator_glossary
from gateway_shim.surfaces.adaptive import parse_adaptive, presented_host_text
from gateway_shim.surfaces.card import DUAL_SURFACE, PHYSIQUE_SURFACE, CardOrigin, card_payload
from gateway_shim.surfaces.daily import DailyFacts, format_daily
from gateway_shim.surfaces.dual import format_dual_body
from gateway_shim.surfaces.weekly import (
    WeeklyInterpretation,
    WeeklyJudgment,
    WeeklyRationale,
    format_weekly,
)

__all__ = [
    "ADAPTIVE_UNKNOWN_SURFACE",
    "DUAL_SURFACE",
    "PHYSIQUE_SURFACE",
    "CandidateOutcome",
    "CandidateStatus",
    "CardOrigin",
    "ConfigDiagnostic",
    "DailyFacts",
    "DualGlossary",
    "GlossaryError",
    "HostOutcome",
    "KoreanExpressionConfig",
    "KoreanExpressionCoordinator",
    "Mode",
    "Outcome",
    "PresentationCandidate",
    "RevalidationError",
    "RevalidationReason",
    "WeeklyInterpretation",
    "WeeklyJudgment",
    "WeeklyRationale",
    "binding_digest",
    "card_payload",
    "exact_block",
    "format_daily",
    "format_dual_body",
    "format_weekly",
    "load_operator_glossary",
    "parse_adaptive",
    "presented_host_text",
    "revalidate",
]

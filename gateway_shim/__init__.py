"""kexpr gateway shim: imported into the host gateway (SPEC §8).

Light on purpose: pydantic, filelock and watchdog only. It never imports the
provider SDK and never reads the provider key.
"""

from gateway_shim.config import ConfigDiagnostic, KoreanExpressionConfig, Mode, exact_block
from gateway_shim.coordinator import (
    CandidateOutcome,
    CandidateStatus,
    HostOutcome,
    KoreanExpressionCoordinator,
    PresentationCandidate,
)
from gateway_shim.surfaces.daily import DailyFacts, format_daily

__all__ = [
    "CandidateOutcome",
    "CandidateStatus",
    "ConfigDiagnostic",
    "DailyFacts",
    "HostOutcome",
    "KoreanExpressionConfig",
    "KoreanExpressionCoordinator",
    "Mode",
    "PresentationCandidate",
    "exact_block",
    "format_daily",
]

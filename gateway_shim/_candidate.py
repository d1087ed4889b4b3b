"""What a presentation returns: `PresentationCandidate`.

Holds the candidate type, its status enum, which response statuses the host may
publish, and `build_candidate`, the pure assembly of a candidate from what a
presentation found. Its outcome is a `CandidateOutcome`, a subset of the one
vocabulary `kexpr.spool.outcomes.Outcome`. Private: import these names from
`gateway_shim.coordinator` (or `gateway_shim`). Coordinator rules that apply:
rule 1 (any doubt means canonical: only an ``accepted`` outcome with a rendered
body is ``selected``; everything else carries the canonical body) and rule 6
(outcomes are enums, never content).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from gateway_shim.surfaces import RenderedBody
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import CandidateOutcome, Outcome


class CandidateStatus(enum.StrEnum):
    SELECTED = "selected"
    CANONICAL = "canonical"


# ``in_flight`` means a live owner exists (spool.lifecycle rule 4): the only
# answer whose canonical body the host must not publish.
_PUBLISHABLE: Final[Mapping[ResponseStatus, bool]] = {
    ResponseStatus.ACCEPTED: True,
    ResponseStatus.CANONICAL: True,
    ResponseStatus.IN_FLIGHT: False,
    ResponseStatus.ALREADY_ATTEMPTED: True,
}


@dataclass(frozen=True, slots=True)
class PresentationCandidate:
    """What the host publishes. ``body`` is always publishable as is when
    ``publication_permitted``; ``status`` says whether it is the selected
    expression or the canonical body. In-process only: never persisted."""

    surface_version: str
    attempt_id: str | None
    artifact_key: str | None
    binding_digest: str
    status: CandidateStatus
    body: str
    publication_permitted: bool
    outcome: CandidateOutcome
    # UTF-16 [start, end) of each locked segment in the canonical body and in
    # ``body`` (equal when canonical), so a host can shift message entities.
    canonical_locked_spans_utf16: tuple[tuple[int, int], ...] = ()
    locked_spans_utf16: tuple[tuple[int, int], ...] = ()
    # The strict-parsed composition (slot_id, generated_ko) behind a SELECTED
    # body, in slot order; empty otherwise. `revalidate` re-renders from it.
    generated: tuple[tuple[str, str], ...] = ()


def build_candidate(
    outcome: CandidateOutcome,
    *,
    surface_version: str,
    binding: str,
    host_body: str,
    canon: RenderedBody | None,
    rendered: RenderedBody | None,
    attempt_id: str | None,
    akey: str | None,
    permitted: bool,
    generated: tuple[tuple[str, str], ...],
) -> PresentationCandidate:
    """The candidate for ``outcome`` (rule 1): the rendered body only when
    ``accepted``; else the surface's canonical body ``canon`` once parsed (for
    a physique card, its projection), before that the host's body untouched."""
    selected = rendered is not None and outcome is Outcome.ACCEPTED
    fallback = canon.body if canon is not None else host_body
    body = rendered.body if selected and rendered is not None else fallback
    return PresentationCandidate(
        surface_version=surface_version,
        attempt_id=attempt_id,
        artifact_key=akey,
        binding_digest=binding,
        status=CandidateStatus.SELECTED if selected else CandidateStatus.CANONICAL,
        body=body,
        publication_permitted=permitted,
        outcome=outcome,
        canonical_locked_spans_utf16=canon.locked_spans_utf16 if canon else (),
        locked_spans_utf16=(
            rendered.locked_spans_utf16
            if selected and rendered is not None
            else (canon.locked_spans_utf16 if canon else ())
        ),
        generated=generated if selected else (),
    )

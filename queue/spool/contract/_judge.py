"""`judge`: one raw model response against one capsule → one verdict (design §6).

Rules for this module:

Rule 1: `judge` never raises for any content: every str (lone surrogates included) and
        every bytes value gets a `Judgement`. Only a caller bug (content that is neither
        str nor bytes) raises TypeError.
Rule 2: the checks run in one fixed order and the first failure is the verdict:
          1. the strict reader (`_strictjson`, steps 1-7)            → invalid_response
          2. strict pydantic typing of the document                 → invalid_response
                                                                      schema_mismatch
          3. echo rules against the capsule, in this order:          → validation_rejected
             schema_version · surface · artifact_key · the tuple of slot ids (capsule
             order: wrong, missing, extra or reordered are all slot_mismatch) · then per
             slot, in capsule order: predicate_ids · action_ids · placeholder_tokens
             (each echoed exactly and in order)
          4. `check_generated` for each slot, in capsule order      → validation_rejected
        All slots' echoes are checked before any slot's prose, so a document whose IDs
        are wrong is reported as such even when its prose is also bad.
Rule 3: one failed slot rejects the whole document. There is no repair, extraction,
        retry or partial selection; a composition is returned only when accepted.
Rule 4: a Judgement carries an enum reason, never content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from pydantic import ValidationError

from ._grammar import check_generated
from ._models import Capsule, Composition, composition_from_object
from ._strictjson import StrictJsonError, read_object
from .reasons import REASON_VERDICT, Reason, Verdict


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict on one response. `composition` only when accepted (Rule 3)."""

    verdict: Verdict
    reason: Reason | None
    composition: Composition | None

    def __post_init__(self) -> None:
        accepted = self.verdict is Verdict.ACCEPTED
        if accepted != (self.reason is None) or accepted != (self.composition is not None):
            raise ValueError("accepted ⇔ no reason ⇔ a composition")
        if self.reason is not None and REASON_VERDICT[self.reason] is not self.verdict:
            raise ValueError("reason belongs to another verdict")

    @classmethod
    def rejected(cls, reason: Reason) -> Judgement:
        # A rejection holds only its enum, so there is one (frozen) value per Reason.
        if cls is Judgement:
            return _REJECTED[reason]
        return cls(verdict=REASON_VERDICT[reason], reason=reason, composition=None)

    @classmethod
    def accepted(cls, composition: Composition) -> Judgement:
        return cls(verdict=Verdict.ACCEPTED, reason=None, composition=composition)

    def to_dict(self) -> dict[str, str | None]:
        """`{"verdict": ..., "reason": ...}` — the shape the CLI and telemetry print."""
        return {
            "verdict": self.verdict.value,
            "reason": None if self.reason is None else self.reason.value,
        }


_REJECTED: Final[Mapping[Reason, Judgement]] = MappingProxyType(
    {reason: Judgement(REASON_VERDICT[reason], reason, None) for reason in Reason}
)


def _first_mismatch(*echoes: tuple[object, object, Reason]) -> Reason | None:
    """The reason of the first ``(echoed, expected, reason)`` whose two differ."""
    return next((reason for echoed, expected, reason in echoes if echoed != expected), None)


def _echo_reason(capsule: Capsule, composition: Composition) -> Reason | None:
    """Rule 2 step 3: the document's echoes, then each slot's, in that order."""
    reason = _first_mismatch(
        (composition.schema_version, capsule.schema_version, Reason.SCHEMA_VERSION_MISMATCH),
        (composition.surface, capsule.surface, Reason.SURFACE_MISMATCH),
        (composition.artifact_key, capsule.artifact_key, Reason.ARTIFACT_KEY_MISMATCH),
        (
            tuple(s.slot_id for s in composition.slots),
            tuple(p.slot_id for p in capsule.slots),
            Reason.SLOT_MISMATCH,
        ),
    )
    if reason is not None:
        return reason
    for slot, policy in zip(composition.slots, capsule.slots, strict=True):
        reason = _first_mismatch(
            (slot.predicate_ids, policy.allowed_predicate_ids, Reason.PREDICATE_IDS_MISMATCH),
            (slot.action_ids, policy.allowed_action_ids, Reason.ACTION_IDS_MISMATCH),
            (
                slot.placeholder_tokens,
                policy.required_placeholder_tokens,
                Reason.PLACEHOLDER_TOKENS_MISMATCH,
            ),
        )
        if reason is not None:
            return reason
    return None


def judge(capsule: Capsule, content: str | bytes) -> Judgement:
    """Judge raw model `content` against `capsule` (Rule 2). Never raises for content."""
    try:
        document = read_object(content)
    except StrictJsonError as e:
        return Judgement.rejected(e.reason)
    try:
        composition = composition_from_object(document)
    except ValidationError:
        return Judgement.rejected(Reason.SCHEMA_MISMATCH)

    reason = _echo_reason(capsule, composition)
    if reason is not None:
        return Judgement.rejected(reason)
    for slot, policy in zip(composition.slots, capsule.slots, strict=True):
        reason = check_generated(policy, slot.generated_ko)
        if reason is not None:
            return Judgement.rejected(reason)
    return Judgement.accepted(composition)

"""The one outcome vocabulary (design §4, docs/lifecycle.md §4).

Every outcome word the product uses anywhere is a member of `Outcome`, defined
here once. Each role that uses only some of the words has a type, not a new
enum: a ``Literal`` of `Outcome` members (mypy narrows it; pydantic validates
it from JSON strings in strict mode and refuses every other member), and one
runtime frozenset read off that ``Literal`` with ``typing.get_args``.

Roles:

- journal  `JournalOutcome` (the outcome journal, design §5; `TerminalOutcome` is
  every journal word but ``attempt_started``)
- provider `ProviderFailure`: how one call failed (a call that returned content
  has no outcome: `kexpr.worker.provider.ProviderResult` then carries content)
- contract `ContractRejection`: the contract's refusal of a call's content
- call     `CallFailure`: the failures a call ends with (provider or contract); `ConcludedOutcome` adds the expiry: the terminal outcomes a worker
  answers a request with (`kexpr.spool.lifecycle.conclude`)
- response `ResponseOutcome`: worker -> shim (``accepted``, the concluded
  outcomes, and the answers that write no row)
- report   `ReportOutcome`: shim -> worker
- candidate `CandidateOutcome`: shim -> host (every response word, plus the
  shim's own ``disabled``, ``ineligible``, ``spool_unavailable``,
  ``closed``, ``worker_unavailable``, ``shadow_selected``)
- host     `HostOutcome`: host -> shim, after an enabled-mode selected candidate

A word passes between roles unchanged wherever the roles share it (a report's
``selected`` is journaled ``selected``; a response's ``timeout`` is the
candidate's ``timeout``): those are subset relations, checked by mypy and by
``tests/spool_tests/test_outcome_maps.py``, not maps. The one map is where a
role changes the meaning: the contract's `Verdict` (its own vocabulary) to an
outcome (`OUTCOME_FOR_VERDICT`). Nothing converts one enum into another by its
``.value``: there is no other outcome enum.

The string values are the journal's and the spool's bytes: never change one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final, Literal, TypeAlias, get_args

from kexpr.spool.contract.reasons import Verdict


class Outcome(enum.StrEnum):
    # The journal's words (design §5).
    ATTEMPT_STARTED = "attempt_started"
    SELECTED = "selected"
    SHADOW_SELECTED = "shadow_selected"
    CREDENTIAL_UNAVAILABLE = "credential_unavailable"
    PROVIDER_ERROR = "provider_error"
    TIMEOUT = "timeout"
    INVALID_RESPONSE = "invalid_response"
    VALIDATION_REJECTED = "validation_rejected"
    COMMIT_FAILED = "commit_failed"
    PUBLICATION_FAILED = "publication_failed"
    CLAIM_EXPIRED_CANONICAL = "claim_expired_canonical"
    # The worker's answers that write no terminal row; ``accepted``: the
    # attempt is open awaiting the shim's report.
    ACCEPTED = "accepted"
    IN_FLIGHT = "in_flight"
    ALREADY_ATTEMPTED = "already_attempted"
    JOURNAL_UNAVAILABLE = "journal_unavailable"
    INVALID_REQUEST = "invalid_request"
    # The request's wall timestamps are outside the worker's skew bound
    # (spool.lifecycle rule 6): no row, no call.
    CLOCK_SKEW = "clock_skew"
    # Judged under the journal lock right before the start row: the
    # time left cannot hold even the capsule's minimal answer at the fastest
    # published rate (`kexpr.spool.contract.budget`): no row, no call.
    NO_TIME_TO_ANSWER = "no_time_to_answer"
    # What publishing the answer needs (a staging file and its bytes)
    # could not be reserved before the start row: no row, no call.
    ANSWER_UNPUBLISHABLE = "answer_unpublishable"
    # LEGACY, read only: the previous release's worker refused a request here
    # when its learned estimate of the provider's speed said the answer could not
    # arrive (no row, no call). That admission is retired; no worker of this
    # release answers with it. It stays a response word so that this release's
    # shim, beside an older worker during an upgrade, still reads such an answer
    # as what it is: canonical (docs/upgrade.md). Never journaled, never produced.
    PROVIDER_TOO_SLOW = "provider_too_slow"
    # The provider timed out or failed several calls in a row: the worker makes
    # no call for a short cool-down, then one probe (`kexpr.worker.cooldown`):
    # no row, no call.
    PROVIDER_COOLING_DOWN = "provider_cooling_down"
    # Judged under the journal lock right before the start row: the
    # operator's cap on the attempts started in the rolling hour or the UTC day
    # is reached (`kexpr.worker.spend`): no row, no call.
    SPEND_CAP_REACHED = "spend_cap_reached"
    # The shim's own: no request was written (or none could be).
    DISABLED = "disabled"
    INELIGIBLE = "ineligible"
    # The body is the host's and eligible, but none of its slots may take a style
    # word (the contract's fit table, design §6.1: a dual card with one review
    # line): canonical, no request written.
    NOTHING_TO_STYLE = "nothing_to_style"
    SPOOL_UNAVAILABLE = "spool_unavailable"
    # The coordinator was closed (before or during the presentation): nothing
    # is started or written any more (gateway_shim.coordinator rule 11).
    CLOSED = "closed"
    # No worker is serving the data root (its heartbeat is absent, stale or not
    # ``ready``): canonical at once, no request written (gateway_shim.coordinator
    # rule 13). The worker never sees it: never a journal or response word.
    WORKER_UNAVAILABLE = "worker_unavailable"
    # The data root's identity.key is missing, or is not the key its record or
    # its journal names, or nothing proves it, beside a journal with rows: a new
    # key would name every artifact anew and pay for it again. Canonical at
    # once, no request written, no key minted (gateway_shim.coordinator rule
    # 14). Also the worker's answer to a request under a key its journal does
    # not name (kexpr.spool._journal_identity): no row, no call. Never a
    # journal word.
    IDENTITY_MISMATCH = "identity_mismatch"


ProviderFailure: TypeAlias = Literal[
    Outcome.CREDENTIAL_UNAVAILABLE,
    Outcome.PROVIDER_ERROR,
    Outcome.TIMEOUT,
    Outcome.INVALID_RESPONSE,
]
ContractRejection: TypeAlias = Literal[Outcome.INVALID_RESPONSE, Outcome.VALIDATION_REJECTED]
CallFailure: TypeAlias = Literal[ProviderFailure, ContractRejection]
ConcludedOutcome: TypeAlias = Literal[CallFailure, Outcome.CLAIM_EXPIRED_CANONICAL]
HostOutcome: TypeAlias = Literal[
    Outcome.SELECTED,
    Outcome.COMMIT_FAILED,
    Outcome.PUBLICATION_FAILED,
]
ReportOutcome: TypeAlias = Literal[
    HostOutcome,
    Outcome.SHADOW_SELECTED,
    Outcome.VALIDATION_REJECTED,
]
TerminalOutcome: TypeAlias = Literal[ConcludedOutcome, ReportOutcome]
JournalOutcome: TypeAlias = Literal[TerminalOutcome, Outcome.ATTEMPT_STARTED]
ResponseOutcome: TypeAlias = Literal[
    ConcludedOutcome,
    Outcome.ACCEPTED,
    Outcome.IN_FLIGHT,
    Outcome.ALREADY_ATTEMPTED,
    Outcome.JOURNAL_UNAVAILABLE,
    Outcome.INVALID_REQUEST,
    Outcome.CLOCK_SKEW,
    Outcome.NO_TIME_TO_ANSWER,
    Outcome.ANSWER_UNPUBLISHABLE,
    Outcome.PROVIDER_TOO_SLOW,  # legacy: read from an older worker, never produced
    Outcome.PROVIDER_COOLING_DOWN,
    Outcome.SPEND_CAP_REACHED,
    Outcome.IDENTITY_MISMATCH,
]
CandidateOutcome: TypeAlias = Literal[
    ResponseOutcome,
    Outcome.SHADOW_SELECTED,
    Outcome.DISABLED,
    Outcome.INELIGIBLE,
    Outcome.NOTHING_TO_STYLE,
    Outcome.SPOOL_UNAVAILABLE,
    Outcome.CLOSED,
    Outcome.WORKER_UNAVAILABLE,
]


def _members(alias: object) -> frozenset[Outcome]:
    members = frozenset(get_args(alias))
    assert all(isinstance(m, Outcome) for m in members)
    return members


PROVIDER_FAILURES: Final = _members(ProviderFailure)
CONTRACT_REJECTIONS: Final = _members(ContractRejection)
CALL_FAILURES: Final = _members(CallFailure)
CONCLUDED_OUTCOMES: Final = _members(ConcludedOutcome)
HOST_OUTCOMES: Final = _members(HostOutcome)
REPORT_OUTCOMES: Final = _members(ReportOutcome)
TERMINAL_OUTCOMES: Final = _members(TerminalOutcome)
JOURNAL_OUTCOMES: Final = _members(JournalOutcome)
RESPONSE_OUTCOMES: Final = _members(ResponseOutcome)
CANDIDATE_OUTCOMES: Final = _members(CandidateOutcome)

# Contract verdict -> outcome, total over Verdict: the role changes (a verdict
# judges content; ``accepted`` then means "awaiting the report").
OUTCOME_FOR_VERDICT: Final[Mapping[Verdict, Literal[ContractRejection, Outcome.ACCEPTED]]] = {
    Verdict.ACCEPTED: Outcome.ACCEPTED,
    Verdict.INVALID_RESPONSE: Outcome.INVALID_RESPONSE,
    Verdict.VALIDATION_REJECTED: Outcome.VALIDATION_REJECTED,
}

# Read off the one definition of the role, like the frozensets above.
_HOST_BY_VALUE: Final[Mapping[str, HostOutcome]] = {o.value: o for o in get_args(HostOutcome)}


def host_outcome(value: object) -> HostOutcome | None:
    """``value`` (an `Outcome` or its string) as a host outcome, else None."""
    return _HOST_BY_VALUE.get(value) if isinstance(value, str) else None


__all__ = [
    "CALL_FAILURES",
    "CANDIDATE_OUTCOMES",
    "CONCLUDED_OUTCOMES",
    "CONTRACT_REJECTIONS",
    "HOST_OUTCOMES",
    "JOURNAL_OUTCOMES",
    "OUTCOME_FOR_VERDICT",
    "PROVIDER_FAILURES",
    "REPORT_OUTCOMES",
    "RESPONSE_OUTCOMES",
    "TERMINAL_OUTCOMES",
    "CallFailure",
    "CandidateOutcome",
    "ConcludedOutcome",
    "ContractRejection",
    "HostOutcome",
    "JournalOutcome",
    "Outcome",
    "ProviderFailure",
    "ReportOutcome",
    "ResponseOutcome",
    "TerminalOutcome",
    "host_outcome",
]

"""The explicit maps between the outcome vocabularies are total over their
domain and agree on names (docs/lifecycle.md §4)."""

from __future__ import annotations

from gateway_shim import coordinator
from gateway_shim.coordinator import CandidateOutcome, HostOutcome
from kexpr.spool.contract import Verdict
from kexpr.spool.lifecycle import EVENT_OUTCOMES, Event
from kexpr.spool.messages import (
    RESPONSE_FOR_TERMINAL,
    TERMINAL_FOR_REPORT,
    ReportOutcome,
    ResponseOutcome,
    ResponseStatus,
)
from kexpr.worker import attempt as daemon
from kexpr.worker.provider import ProviderOutcome


def test_journal_to_response_covers_every_outcome_a_request_is_answered_with() -> None:
    answered = EVENT_OUTCOMES[Event.CALL_FAILED] | EVENT_OUTCOMES[Event.EXPIRE]
    assert set(RESPONSE_FOR_TERMINAL) == answered
    assert all(r.value == o.value for o, r in RESPONSE_FOR_TERMINAL.items())


def test_report_to_journal_is_total_and_lands_on_report_outcomes() -> None:
    assert set(TERMINAL_FOR_REPORT) == set(ReportOutcome)
    assert set(TERMINAL_FOR_REPORT.values()) == EVENT_OUTCOMES[Event.REPORT]


def test_shim_maps_are_total() -> None:
    assert set(coordinator._CANDIDATE_FOR_RESPONSE) == set(ResponseOutcome)
    assert all(c.value == r.value for r, c in coordinator._CANDIDATE_FOR_RESPONSE.items())
    assert set(coordinator._PUBLISHABLE) == set(ResponseStatus)
    assert [s for s, ok in coordinator._PUBLISHABLE.items() if not ok] == [ResponseStatus.IN_FLIGHT]
    assert set(coordinator._REPORT_FOR_HOST) == set(HostOutcome)
    assert set(CandidateOutcome) >= set(coordinator._CANDIDATE_FOR_RESPONSE.values())


def test_worker_maps_are_total() -> None:
    assert set(daemon._CALL_FAILED) == set(ProviderOutcome)
    assert set(daemon._VERDICT_OUTCOME) == set(Verdict)
    assert daemon._CALL_FAILED[ProviderOutcome.CONTENT] is None
    assert daemon._VERDICT_OUTCOME[Verdict.ACCEPTED] is None

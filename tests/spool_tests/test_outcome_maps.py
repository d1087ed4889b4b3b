"""One outcome vocabulary (`kexpr.spool.outcomes`): one enum, each role a subset
of it, the subsets related as the lifecycle needs, the one map total over its
domain, and nothing converting an outcome by its ``.value`` (docs/lifecycle.md §4)."""

from __future__ import annotations

import enum
import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import gateway_shim
from gateway_shim import _candidate
from kexpr.spool.contract import Verdict
from kexpr.spool.lifecycle import EVENT_OUTCOMES, Event
from kexpr.spool.messages import (
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    parse_report,
    parse_response,
)
from kexpr.spool.outcomes import (
    CALL_FAILURES,
    CANDIDATE_OUTCOMES,
    CONCLUDED_OUTCOMES,
    CONTRACT_REJECTIONS,
    HOST_OUTCOMES,
    JOURNAL_OUTCOMES,
    OUTCOME_FOR_VERDICT,
    PROVIDER_FAILURES,
    REPORT_OUTCOMES,
    RESPONSE_OUTCOMES,
    TERMINAL_OUTCOMES,
    Outcome,
    host_outcome,
)

PRODUCT_PACKAGES = ("kexpr.spool", "gateway_shim", "kexpr.worker", "kexpr.ops")


def _product_modules() -> list[ModuleType]:
    out: list[ModuleType] = []
    for top in PRODUCT_PACKAGES:
        package = importlib.import_module(top)
        out.append(package)
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            if info.name.endswith("__main__"):
                continue  # runs the program on import
            out.append(importlib.import_module(info.name))
    return out


def test_one_outcome_enum_in_the_product() -> None:
    modules = _product_modules()
    assert len(modules) > 20  # the walk really saw the packages
    found = {
        (value.__module__, value.__qualname__)
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, enum.Enum)
        and value.__name__.endswith("Outcome")
    }
    assert found == {("kexpr.spool.outcomes", "Outcome")}


_VALUE_CONVERSION = re.compile(r"\b\w*(Outcome|OUTCOME\w*)\w*\([^()]*\.value\)")


def test_no_conversion_by_value_in_the_product_sources() -> None:
    repo = Path(__file__).resolve().parents[2]
    sources = [
        p for d in ("queue", "gateway_shim", "worker", "ops") for p in (repo / d).rglob("*.py")
    ]
    assert len(sources) > 20
    assert [str(p) for p in sources if _VALUE_CONVERSION.search(p.read_text("utf-8"))] == []
    assert _VALUE_CONVERSION.search("ResponseOutcome(verdict.verdict.value)")  # the pattern bites


def test_the_words_and_their_bytes_do_not_change() -> None:
    # Journal rows and spool files hold these strings: existing journals stay valid.
    assert {o.name.lower() for o in Outcome} == {o.value for o in Outcome}
    assert {o.value for o in JOURNAL_OUTCOMES} == {
        "attempt_started",
        "selected",
        "shadow_selected",
        "credential_unavailable",
        "provider_error",
        "timeout",
        "invalid_response",
        "validation_rejected",
        "commit_failed",
        "publication_failed",
        "claim_expired_canonical",
    }


def test_every_word_belongs_to_a_role() -> None:
    assert JOURNAL_OUTCOMES | RESPONSE_OUTCOMES | CANDIDATE_OUTCOMES == set(Outcome)


def test_roles_are_subsets_as_the_lifecycle_needs() -> None:
    # provider -> call -> concluded: the words a request is answered with
    assert PROVIDER_FAILURES < CALL_FAILURES < CONCLUDED_OUTCOMES < TERMINAL_OUTCOMES
    assert CONTRACT_REJECTIONS < CALL_FAILURES
    assert CALL_FAILURES == EVENT_OUTCOMES[Event.CALL_FAILED]
    assert CONCLUDED_OUTCOMES == CALL_FAILURES | EVENT_OUTCOMES[Event.EXPIRE]
    # journal: every terminal row's word, and the start row's
    assert TERMINAL_OUTCOMES == frozenset().union(*EVENT_OUTCOMES.values())
    assert JOURNAL_OUTCOMES == TERMINAL_OUTCOMES | {Outcome.ATTEMPT_STARTED}
    # response -> candidate: every response word reaches the host unchanged
    assert CONCLUDED_OUTCOMES < RESPONSE_OUTCOMES < CANDIDATE_OUTCOMES
    assert Outcome.ATTEMPT_STARTED not in CANDIDATE_OUTCOMES
    # host -> report -> journal: journaled as reported
    assert HOST_OUTCOMES < REPORT_OUTCOMES < TERMINAL_OUTCOMES
    assert REPORT_OUTCOMES == EVENT_OUTCOMES[Event.REPORT]


def test_the_verdict_map_is_total() -> None:
    assert set(OUTCOME_FOR_VERDICT) == set(Verdict)
    assert OUTCOME_FOR_VERDICT[Verdict.ACCEPTED] is Outcome.ACCEPTED
    rejections = {v for k, v in OUTCOME_FOR_VERDICT.items() if k is not Verdict.ACCEPTED}
    assert rejections == CONTRACT_REJECTIONS
    assert set(OUTCOME_FOR_VERDICT.values()) <= RESPONSE_OUTCOMES


def test_publishable_is_total_over_statuses() -> None:
    assert set(_candidate._PUBLISHABLE) == set(ResponseStatus)
    assert [s for s, ok in _candidate._PUBLISHABLE.items() if not ok] == [ResponseStatus.IN_FLIGHT]


@pytest.mark.parametrize("outcome", sorted(Outcome), ids=str)
def test_host_outcome_reads_exactly_the_host_words(outcome: Outcome) -> None:
    expected = outcome if outcome in HOST_OUTCOMES else None
    assert host_outcome(outcome) is expected
    assert host_outcome(outcome.value) is expected
    assert host_outcome(outcome.name) is None  # "SELECTED" is not a word


def test_the_host_api_exports_the_vocabulary() -> None:
    assert gateway_shim.Outcome is Outcome
    assert {"Outcome", "CandidateOutcome", "HostOutcome"} <= set(gateway_shim.__all__)


@pytest.mark.parametrize("outcome", sorted(Outcome), ids=str)
def test_a_report_file_holds_only_a_report_word(outcome: Outcome) -> None:
    data = (
        '{"attempt_id":"' + "e" * 32 + f'","outcome":"{outcome.value}",'
        f'"spool_version":"{SPOOL_VERSION}"}}'
    ).encode()
    if outcome in REPORT_OUTCOMES:
        assert parse_report(data).outcome is outcome
    else:
        with pytest.raises(MessageError):
            parse_report(data)


@pytest.mark.parametrize("outcome", sorted(Outcome), ids=str)
def test_a_response_file_holds_only_a_response_word(outcome: Outcome) -> None:
    data = (
        '{"attempt_id":null,"composition":null,'
        f'"outcome":"{outcome.value}","request_id":"{"a" * 32}",'
        f'"spool_version":"{SPOOL_VERSION}","status":"canonical"}}'
    ).encode()
    if outcome in RESPONSE_OUTCOMES:
        assert parse_response(data).outcome is outcome
    else:
        with pytest.raises(MessageError):
            parse_response(data)


def test_the_lifecycle_doc_table_is_the_code() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md").read_text("utf-8")
    section = doc[doc.index("## 4. One outcome vocabulary") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    lines = [ln for ln in section.splitlines() if ln.startswith("| word |")]
    assert len(lines) == 1
    header = [c.strip() for c in lines[0].strip("|").split("|")][1:]
    roles = {
        "journal": JOURNAL_OUTCOMES,
        "provider": PROVIDER_FAILURES,
        "contract": CONTRACT_REJECTIONS,
        "response": RESPONSE_OUTCOMES,
        "report": REPORT_OUTCOMES,
        "host": HOST_OUTCOMES,
        "candidate": CANDIDATE_OUTCOMES,
    }
    assert header == list(roles)
    rows = {}
    for ln in section.splitlines():
        m = re.match(r"^\| `([a-z_]+)` \|(.*)\|$", ln)
        if m:
            cells = [c.strip() for c in m.group(2).split("|")]
            rows[m.group(1)] = {r for r, c in zip(roles, cells, strict=True) if c == "✓"}
    assert rows == {o.value: {r for r, s in roles.items() if o in s} for o in Outcome}

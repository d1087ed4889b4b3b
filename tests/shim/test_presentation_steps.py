"""One presentation's steps are a table (`gateway_shim._presentation.ENDS`;
docs/lifecycle.md §5): the table is total over the candidate's outcomes, an end
it does not give is refused, the refusal is the last guard's, the doc's table is
the code's, and real presentations end where the table says: the styled weekly
(the one body the fit table styles, design §6.1) wherever a step needs a request,
and a daily body, a dual card and a physique card for ``nothing_to_style``."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit.bodies import (
    DAILY_BODY,
    DAILY_FACTS,
    STYLED_BODY,
    STYLED_SURFACE,
    apresent_styled,
    present_styled,
)
from reference_host.samples import (
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    callback_data,
    dual_card,
    physique_card,
    session,
)

from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    _presentation,
    _setup,
    exact_block,
)
from gateway_shim._presentation import (
    ENDS,
    RECHECKED,
    ZERO_FILES,
    IllegalEnd,
    Recorder,
    Step,
)
from gateway_shim.telemetry import Telemetry
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import CANDIDATE_OUTCOMES, RESPONSE_OUTCOMES, CandidateOutcome
from shim.test_coordinator import ScriptedWorker, accepted, coordinator

DOC = Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md"

# The styled weekly's interpretation slot, as the fit table allows it.
STYLED = "[[P:01]]. 다만 [[A:01]]."

End = tuple[Step, Outcome]


# ------------------------------------------------------------------ the table


def test_every_candidate_outcome_ends_some_step_and_nothing_else_does() -> None:
    assert frozenset().union(*ENDS.values()) == CANDIDATE_OUTCOMES
    assert set(ENDS) == set(Step)


def test_the_zero_file_ends_are_set_up_ends_and_the_rechecked_ones_are_ends() -> None:
    assert ZERO_FILES <= ENDS[Step.SET_UP]
    assert RECHECKED <= ENDS[Step.SET_UP] | ENDS[Step.PUBLISHED] | ENDS[Step.CONCLUDED]
    # Only an answer read can carry the worker's word.
    assert RESPONSE_OUTCOMES <= ENDS[Step.CONCLUDED]
    assert not (RESPONSE_OUTCOMES - {Outcome.TIMEOUT}) & ENDS[Step.PUBLISHED]


def _doc_table() -> dict[str, frozenset[Outcome]]:
    doc = DOC.read_text("utf-8")
    section = doc[doc.index("## 5. One presentation in the shim") :]
    rows: dict[str, frozenset[Outcome]] = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([a-z_]+)` \|[^|]*\|([^|]*)\|$", line)
        if m:
            words = {Outcome(w) for w in re.findall(r"`([a-z_]+)`", m.group(2))}
            if "every response outcome" in m.group(2):
                words |= RESPONSE_OUTCOMES
            rows[m.group(1)] = frozenset(words)
    return rows


def test_the_doc_table_is_the_code() -> None:
    assert _doc_table() == {step.value: ends for step, ends in ENDS.items()}


def _recorder(events: list[dict[str, str]]) -> tuple[Recorder, Telemetry]:
    telemetry = Telemetry(lambda e: events.append(dict(e)))
    rec = Recorder(
        surface_version=STYLED_SURFACE,
        binding="0" * 64,
        host_body=STYLED_BODY,
        mode=Mode.ENABLED,
        called=0.0,
        mono=lambda: 0.0,
        telemetry=telemetry,
    )
    return rec, telemetry


@pytest.mark.parametrize(
    ("step", "outcome"),
    [(s, o) for s in Step for o in sorted(CANDIDATE_OUTCOMES) if o not in ENDS[s]],
    ids=lambda v: str(v),
)
def test_an_end_the_table_does_not_give_is_refused(step: Step, outcome: CandidateOutcome) -> None:
    events: list[dict[str, str]] = []
    rec, telemetry = _recorder(events)
    with pytest.raises(IllegalEnd) as e:
        rec.end(step, outcome)
    telemetry.close()
    assert (e.value.step, e.value.outcome) == (step, outcome)
    assert str(e.value) == f"{step.value}:{outcome.value}"  # enum words only
    assert events == []  # nothing emitted for an end that did not happen


@pytest.mark.parametrize(
    ("step", "outcome"),
    [(s, o) for s in Step for o in sorted(ENDS[s])],
    ids=lambda v: str(v),
)
def test_an_end_the_table_gives_is_one_candidate_and_one_event(
    step: Step, outcome: CandidateOutcome
) -> None:
    events: list[dict[str, str]] = []
    rec, telemetry = _recorder(events)
    cand = rec.end(step, outcome)
    telemetry.close()
    assert cand.outcome is outcome
    assert [e["outcome"] for e in events] == [outcome.value]


def test_an_illegal_end_is_the_last_guards(root: DataRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table is what the code obeys: take ``disabled`` out of the set-up's
    ends and a disabled presentation is refused, caught by the last guard
    (canonical ``spool_unavailable``, counted), never raised into the host."""
    monkeypatch.setitem(ENDS, Step.SET_UP, ENDS[Step.SET_UP] - {Outcome.DISABLED})
    config = KoreanExpressionConfig.from_block(exact_block(Mode.DISABLED, weekly=True))
    coord = KoreanExpressionCoordinator(config, root.root)
    cands = [present_styled(coord, "a"), asyncio.run(apresent_styled(coord, "b"))]
    coord.close()
    for cand in cands:
        assert cand.outcome is Outcome.SPOOL_UNAVAILABLE
        assert cand.status is CandidateStatus.CANONICAL and cand.body == STYLED_BODY
    assert coord.presentations_guarded == 2
    assert not root.root.exists()  # still nothing written


# ------------------------------------------------- presentations walk the table


@pytest.fixture
def ends(monkeypatch: pytest.MonkeyPatch) -> list[End]:
    """Every (step, outcome) a presentation ended with, in order."""
    seen: list[End] = []
    original = Recorder.end

    def spy(
        self: Recorder, step: Step, outcome: CandidateOutcome, **kwargs: Any
    ) -> PresentationCandidate:
        seen.append((step, outcome))
        return original(self, step, outcome, **kwargs)

    monkeypatch.setattr(_presentation.Recorder, "end", spy)
    return seen


def _present(coord: KoreanExpressionCoordinator, asyncio_host: bool, key: str) -> Outcome:
    """The styled weekly as artifact ``key``: a presentation that writes a request."""
    if asyncio_host:
        return asyncio.run(apresent_styled(coord, key)).outcome
    return present_styled(coord, key).outcome


Scenario = Callable[[DataRoot, bool], Outcome]


def _styled_coordinator(root: DataRoot) -> KoreanExpressionCoordinator:
    return coordinator(root.root, weekly=True)


def _closed(root: DataRoot, asyncio_host: bool) -> Outcome:
    coord = _styled_coordinator(root)
    coord.close()
    return _present(coord, asyncio_host, "closed")


def _disabled(root: DataRoot, asyncio_host: bool) -> Outcome:
    config = KoreanExpressionConfig.from_block(exact_block(Mode.DISABLED, weekly=True))
    coord = KoreanExpressionCoordinator(config, root.root)
    try:
        return _present(coord, asyncio_host, "disabled")
    finally:
        coord.close()


def _ineligible(root: DataRoot, asyncio_host: bool) -> Outcome:
    """The styled weekly with a byte the host never renders (a trailing newline)."""
    coord = _styled_coordinator(root)
    args: dict[str, Any] = {
        "explicit_fields": (),
        "schedule_key": "i",
        "kind": "weekly_report",
        "kst_day": "2025-11-30",
    }
    try:
        if asyncio_host:
            cand = asyncio.run(coord.apresent_weekly(STYLED_BODY + "\n", **args))
        else:
            cand = coord.present_weekly(STYLED_BODY + "\n", **args)
        return cand.outcome
    finally:
        coord.close()


def _nothing_to_style(surface: str) -> Scenario:
    """An eligible body whose every slot the fit table locks (a daily body, a dual
    card, a physique card): ``nothing_to_style`` before the data root is touched,
    with no worker there (a body with a slot to ask would end
    ``worker_unavailable``)."""

    def scenario(root: DataRoot, asyncio_host: bool) -> Outcome:
        coord = coordinator(root.root, daily=True, weekly=True, adaptive_operator=True)
        s = session()
        payload = {"dual": dual_card(s), "physique": physique_card(s)}.get(surface)
        card = {"dual": DUAL_SURFACE, "physique": PHYSIQUE_SURFACE}.get(surface)
        try:
            if payload is None:
                daily: dict[str, Any] = {"facts": DAILY_FACTS, "finalized_event_id": "n"}
                cand = (
                    asyncio.run(coord.apresent_daily(DAILY_BODY, **daily))
                    if asyncio_host
                    else coord.present_daily(DAILY_BODY, **daily)
                )
            else:
                adaptive: dict[str, Any] = {"callback_data": callback_data(s), "surface": card}
                cand = (
                    asyncio.run(coord.apresent_adaptive(payload, **adaptive))
                    if asyncio_host
                    else coord.present_adaptive(payload, **adaptive)
                )
        finally:
            coord.close()
        assert cand.status is CandidateStatus.CANONICAL
        assert not root.root.exists()  # zero files
        return cand.outcome

    return scenario


def _no_worker(root: DataRoot, asyncio_host: bool) -> Outcome:
    coord = _styled_coordinator(root)
    try:
        return _present(coord, asyncio_host, "nobody")
    finally:
        coord.close()


def _answered(root: DataRoot, asyncio_host: bool) -> Outcome:
    coord = _styled_coordinator(root)
    try:
        with ScriptedWorker(root, accepted(STYLED)):
            return _present(coord, asyncio_host, "answered")
    finally:
        coord.close()


def _rejected(root: DataRoot, asyncio_host: bool) -> Outcome:
    coord = _styled_coordinator(root)
    try:
        # Outside the lexicon: the shim's own re-validation refuses it.
        with ScriptedWorker(root, accepted("오늘은 [[P:01]]. [[A:01]].")):
            return _present(coord, asyncio_host, "rejected")
    finally:
        coord.close()


def _unanswered(root: DataRoot, asyncio_host: bool) -> Outcome:
    coord = _styled_coordinator(root)
    try:
        with ScriptedWorker(root, lambda _req: None):
            return _present(coord, asyncio_host, "unanswered")
    finally:
        coord.close()


SCENARIOS: dict[str, tuple[Scenario, End]] = {
    "closed": (_closed, (Step.SET_UP, Outcome.CLOSED)),
    "disabled": (_disabled, (Step.SET_UP, Outcome.DISABLED)),
    "ineligible": (_ineligible, (Step.SET_UP, Outcome.INELIGIBLE)),
    "nothing_to_style_daily": (_nothing_to_style("daily"), (Step.SET_UP, Outcome.NOTHING_TO_STYLE)),
    "nothing_to_style_dual": (_nothing_to_style("dual"), (Step.SET_UP, Outcome.NOTHING_TO_STYLE)),
    "nothing_to_style_physique": (
        _nothing_to_style("physique"),
        (Step.SET_UP, Outcome.NOTHING_TO_STYLE),
    ),
    "worker_unavailable": (_no_worker, (Step.SET_UP, Outcome.WORKER_UNAVAILABLE)),
    "accepted": (_answered, (Step.CONCLUDED, Outcome.ACCEPTED)),
    "validation_rejected": (_rejected, (Step.CONCLUDED, Outcome.VALIDATION_REJECTED)),
    "timeout": (_unanswered, (Step.PUBLISHED, Outcome.TIMEOUT)),
}


@pytest.mark.parametrize("asyncio_host", [False, True], ids=["present", "apresent"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_presentation_ends_once_at_the_step_the_table_gives(
    root: DataRoot,
    monkeypatch: pytest.MonkeyPatch,
    ends: list[End],
    name: str,
    asyncio_host: bool,
) -> None:
    monkeypatch.setattr(_setup, "MAX_WAIT", dt.timedelta(seconds=0.5))  # the timeout case
    scenario, want = SCENARIOS[name]
    outcome = scenario(root, asyncio_host)
    assert ends == [want]
    assert outcome is want[1]


def test_a_wait_closed_under_it_ends_at_published(root: DataRoot, ends: list[End]) -> None:
    coord = _styled_coordinator(root)
    out: list[Outcome] = []
    claimed = threading.Event()

    def never_answer(_req: dict[str, object]) -> None:
        claimed.set()  # the request was published: the presentation waits

    with ScriptedWorker(root, never_answer):
        presenter = threading.Thread(
            target=lambda: out.append(_present(coord, False, "in-flight")), daemon=True
        )
        presenter.start()
        assert claimed.wait(30)
        coord.close()
        presenter.join(30)
    assert out == [Outcome.CLOSED]
    assert ends == [(Step.PUBLISHED, Outcome.CLOSED)]


# --------------------------------------------------------- the entry points


@pytest.mark.parametrize("surface", ["daily", "weekly", "adaptive"])
def test_each_entry_point_has_its_real_signature_and_its_twin_the_same(surface: str) -> None:
    """Plain methods, not generated: what ``inspect`` and a type checker see is
    what runs. A call that does not fit raises ``TypeError`` at the call, for
    ``apresent_*`` as for any coroutine function (rule 9 is about the values
    of well-formed calls: those never raise)."""
    import inspect

    sync = getattr(KoreanExpressionCoordinator, f"present_{surface}")
    twin = getattr(KoreanExpressionCoordinator, f"apresent_{surface}")
    assert not inspect.iscoroutinefunction(sync) and inspect.iscoroutinefunction(twin)
    assert inspect.signature(sync) == inspect.signature(twin)
    first = list(inspect.signature(sync).parameters.values())[1]
    assert first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD  # the body or payload
    assert all(
        p.kind is inspect.Parameter.KEYWORD_ONLY
        for p in list(inspect.signature(sync).parameters.values())[2:]
    )


def test_a_call_that_does_not_fit_raises_at_the_call(root: DataRoot) -> None:
    coord = coordinator(root.root, daily=True, weekly=True)
    with pytest.raises(TypeError):
        coord.present_daily(DAILY_BODY)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        coord.apresent_daily(DAILY_BODY, finalized_event_id="e", bogus=1)  # type: ignore[call-arg,unused-coroutine]
    with pytest.raises(TypeError):
        coord.present_weekly(STYLED_BODY)  # type: ignore[call-arg]
    coord.close()
    assert not root.root.exists()

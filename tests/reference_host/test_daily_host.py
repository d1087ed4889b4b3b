"""Daily: the first save edits once; replay is canonical-only with zero requests
(plan "Daily cutover"; design §8). The daily summary has nothing to style (the fit
table, design §6.2): the first save's candidate is `nothing_to_style`, its edit is
the canonical body, and there is no request, no call and no report, whether the
edit succeeds or fails. The Save edit's result is still observed (the host at the
pin swallows a failed edit); it decides a report only for a selected candidate,
which the weekly host shows (test_host_journal.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from gateway_shim import DailyFacts, KoreanExpressionCoordinator, Mode, Outcome
from kexpr.spool.layout import DataRoot
from reference_host.bot import RecordingQuery
from reference_host.daily import DailyHost, FinalizedCheckin
from reference_host.host_render import render_daily
from reference_host.scripted_worker import ScriptedWorker, report_outcomes, spool_request_files

# A finalized check-in's answers, rendered as the host renders them.
ANSWERS = {
    "bodyweight": "72.4",
    "calories": "2150",
    "macros": {"carbohydrate": 260, "protein": 138, "fat": 70},
    "training_summary": "스쿼트 5세트",
    "sleep_duration": "6.7",
    "sleep_quality": "4",
    "condition": "3",
    "digestion": "bristol_4",
    "water": "2.1",
}
BODY = render_daily(ANSWERS)
CHECKIN = FinalizedCheckin(body=BODY, finalized_event_id="evt-0001")
# A daily body as an earlier fit table styled it (a word before the status): not the
# host's text, so fed back as canonical it is ineligible.
SELECTED = BODY.replace("저장된 오늘 기록을", "그리고 저장된 오늘 기록을")
assert SELECTED != BODY
SAVE = "ck1:save"  # the Save button's callback data (its format does not matter here)


def save(daily: DailyHost, checkin: FinalizedCheckin, *, fail_edit: bool = False) -> RecordingQuery:
    query = RecordingQuery(SAVE, fail_edit=fail_edit)
    asyncio.run(daily.first_save(query, checkin))
    return query


def test_first_save_edits_once_then_replay_is_canonical_with_zero_requests(
    root: DataRoot,
    worker: ScriptedWorker,
    make_coordinator: Callable[[Mode], KoreanExpressionCoordinator],
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    cand = coord.present_daily(BODY, finalized_event_id="evt-0000")
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.body == BODY
    daily = DailyHost(coord)
    assert save(daily, CHECKIN).edits == [BODY]
    assert report_outcomes(root) == []
    sent: list[str] = []
    for _ in range(3):
        assert daily.replay(sent.append, CHECKIN) == BODY
    assert sent == [BODY, BODY, BODY]
    assert worker.requests == [] and worker.provider_calls == 0
    assert spool_request_files(root) == []


def test_a_failed_edit_is_swallowed_and_nothing_is_reported(
    root: DataRoot,
    worker: ScriptedWorker,
    make_coordinator: Callable[[Mode], KoreanExpressionCoordinator],
) -> None:
    """The handler still never raises for a failed edit (the check-in is saved); the
    candidate had nothing to style, so there is no attempt to report."""
    query = save(DailyHost(make_coordinator(Mode.ENABLED)), CHECKIN, fail_edit=True)
    assert query.edits == []
    assert report_outcomes(root) == []
    assert worker.requests == [] and worker.provider_calls == 0


def test_a_failed_edit_in_shadow_mode_reports_nothing(
    root: DataRoot,
    worker: ScriptedWorker,
    make_coordinator: Callable[[Mode], KoreanExpressionCoordinator],
) -> None:
    query = save(DailyHost(make_coordinator(Mode.SHADOW)), CHECKIN, fail_edit=True)
    assert query.edits == []
    assert report_outcomes(root) == []  # nothing to style: not even the shim's report
    assert worker.requests == [] and worker.provider_calls == 0


def test_replay_alone_touches_nothing(
    tmp_path: Path, make_coordinator: Callable[[Mode], KoreanExpressionCoordinator]
) -> None:
    sent: list[str] = []
    daily = DailyHost(make_coordinator(Mode.ENABLED))
    assert daily.replay(sent.append, CHECKIN) == BODY
    assert sent == [BODY]
    assert not (tmp_path / "kexpr").exists()  # zero files: the data root was never created


def test_a_selected_body_fed_back_as_canonical_is_ineligible_with_zero_files(
    tmp_path: Path, make_coordinator: Callable[[Mode], KoreanExpressionCoordinator]
) -> None:
    coord = make_coordinator(Mode.ENABLED)
    cand = coord.present_daily(
        SELECTED, facts=DailyFacts(complete=True), finalized_event_id="evt-0001"
    )
    assert cand.outcome.value == "ineligible" and cand.body == SELECTED
    assert not (tmp_path / "kexpr").exists()


def test_host_typed_facts_are_optional_and_checked(
    tmp_path: Path, make_coordinator: Callable[[Mode], KoreanExpressionCoordinator]
) -> None:
    assert BODY.startswith("오늘 체크인 완료\n\n- 체중: 72.4kg\n- 섭취: 2,150kcal\n")
    coord = make_coordinator(Mode.ENABLED)
    # The host's typed flag disagrees with the seven rendered facts: canonical, no files.
    wrong = FinalizedCheckin(
        body=BODY, finalized_event_id="evt-0002", facts=DailyFacts(complete=False)
    )
    assert save(DailyHost(coord), wrong).edits == [BODY]
    assert not (tmp_path / "kexpr").exists()

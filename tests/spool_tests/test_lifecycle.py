"""The lifecycle tables and decisions (spool.lifecycle), walked row by row."""

from __future__ import annotations

import datetime as dt

import pytest

from kexpr.spool import lifecycle as lc
from kexpr.spool.lifecycle import (
    EVENT_OUTCOMES,
    LEGAL_TERMINALS,
    MODE_FORBIDS,
    SPOOL_FILE_MOVES,
    TRANSITIONS,
    Actor,
    Admission,
    Answer,
    Event,
    File,
    Held,
    IllegalMove,
    IllegalTransition,
    Inadmissible,
    Inherited,
    Move,
    Outcome,
    Phase,
    Reply,
    SpoolMode,
    Where,
)

T = dt.datetime(2026, 11, 30, 9, 0, 0, tzinfo=dt.UTC)
S = dt.timedelta(seconds=1)


# ------------------------------------------------------------- attempt table


@pytest.mark.parametrize(("key", "nxt"), sorted(TRANSITIONS.items(), key=str))
def test_every_transition_row_is_taken_with_each_outcome_it_allows(key, nxt) -> None:
    phase, event = key
    for mode in SpoolMode:
        allowed = EVENT_OUTCOMES.get(event)
        if allowed is None:
            assert lc.transition(phase, event, None, mode) is nxt
            continue
        for outcome in Outcome:
            if outcome in allowed and outcome not in MODE_FORBIDS[mode]:
                assert lc.transition(phase, event, outcome, mode) is nxt
            else:
                with pytest.raises(IllegalTransition):
                    lc.transition(phase, event, outcome, mode)


def test_every_missing_row_is_illegal_and_finalized_has_no_edge() -> None:
    for phase in (None, *Phase):
        for event in Event:
            if (phase, event) in TRANSITIONS:
                continue
            for outcome in (None, *Outcome):
                with pytest.raises(IllegalTransition):
                    lc.transition(phase, event, outcome, SpoolMode.ENABLED)
    assert not [k for k in TRANSITIONS if k[0] is Phase.FINALIZED]


def test_legal_terminals_are_exactly_the_table_edges_into_finalized() -> None:
    expected = {
        (m, o)
        for m in SpoolMode
        for o in lc.TERMINAL_OUTCOMES
        for (p, e), nxt in TRANSITIONS.items()
        if nxt is Phase.FINALIZED and o in EVENT_OUTCOMES.get(e, ())
        if o not in MODE_FORBIDS[m]
    }
    assert LEGAL_TERMINALS == expected
    assert (SpoolMode.SHADOW, Outcome.SELECTED) not in LEGAL_TERMINALS
    assert (SpoolMode.ENABLED, Outcome.SHADOW_SELECTED) not in LEGAL_TERMINALS
    assert (SpoolMode.ENABLED, Outcome.ATTEMPT_STARTED) not in LEGAL_TERMINALS


# ------------------------------------------------------------------ decisions

LIVE_OPEN = Held(Phase.OPEN, live=True, starter="r1", until=10.0)
AWAITING = Held(Phase.AWAITING_REPORT, live=True, starter="r1", until=10.0)
INHERITED_AWAITING = Held(Phase.AWAITING_REPORT, live=False, starter=None, until=10.0)
DEAD_OPEN = Held(Phase.OPEN, live=False, starter=None, until=10.0)


@pytest.mark.parametrize(
    ("outcome", "held", "asker", "answer"),
    [
        (Outcome.TIMEOUT, None, "r2", Answer.ALREADY_ATTEMPTED),
        (Outcome.SELECTED, AWAITING, "r1", Answer.ALREADY_ATTEMPTED),
        (None, AWAITING, "r2", Answer.ALREADY_ATTEMPTED),
        (None, INHERITED_AWAITING, "r2", Answer.ALREADY_ATTEMPTED),
        (None, LIVE_OPEN, "r2", Answer.IN_FLIGHT),
        # Never in_flight to the request that started the attempt.
        (None, LIVE_OPEN, "r1", Answer.NONE),
        # No live owner: lost; never in_flight, whoever asks.
        (None, DEAD_OPEN, "r1", Answer.EXPIRE_CANONICAL),
        (None, DEAD_OPEN, "r2", Answer.EXPIRE_CANONICAL),
        (None, None, "r1", Answer.EXPIRE_CANONICAL),
    ],
)
def test_answer_existing(outcome, held, asker, answer) -> None:
    assert lc.answer_existing(outcome, held, asker, 0.0) is answer


def test_inherited_attempts_are_answered_or_lost_from_the_spool() -> None:
    assert lc.inherited_phase(True) is Inherited.ANSWERED
    assert lc.inherited_phase(False) is Inherited.LOST
    assert lc.held_inherited(Inherited.LOST, T + 3 * S, T, 100.0, 600.0) is None
    held = lc.held_inherited(Inherited.ANSWERED, T + 3 * S, T, 100.0, 600.0)
    assert held == Held(Phase.AWAITING_REPORT, live=False, starter=None, until=703.0)
    # A wall deadline an hour away is bounded by MAX_WAIT + grace; one whose
    # grace is over is due at once; one inside its grace keeps what is left.
    far = lc.held_inherited(Inherited.ANSWERED, T + 3600 * S, T, 100.0, 600.0)
    past = lc.held_inherited(Inherited.ANSWERED, T - 3600 * S, T, 100.0, 600.0)
    inside = lc.held_inherited(Inherited.ANSWERED, T - 100 * S, T, 100.0, 600.0)
    assert far is not None and far.until == 704.0
    assert past is not None and past.until == 100.0
    assert inside is not None and inside.until == 600.0


@pytest.mark.parametrize(
    ("outcome", "held", "now", "due"),
    [
        (Outcome.TIMEOUT, None, 0.0, False),
        (None, None, 0.0, True),
        (None, LIVE_OPEN, 1e9, False),
        (None, DEAD_OPEN, 9.0, False),
        (None, DEAD_OPEN, 10.0, True),
        (None, AWAITING, 9.99, False),
        (None, AWAITING, 10.0, True),
    ],
)
def test_expiry_due(outcome, held, now, due) -> None:
    assert lc.expiry_due(outcome, held, now) is due


@pytest.mark.parametrize(
    ("outcome", "mode", "held", "reported", "now", "verdict"),
    [
        (None, SpoolMode.ENABLED, AWAITING, Outcome.SELECTED, 0.0, None),
        (None, SpoolMode.SHADOW, INHERITED_AWAITING, Outcome.SHADOW_SELECTED, 0.0, None),
        (None, None, AWAITING, Outcome.SELECTED, 0.0, Inadmissible.UNKNOWN_ATTEMPT),
        (Outcome.SELECTED, SpoolMode.ENABLED, None, Outcome.SELECTED, 0.0, Inadmissible.TERMINAL),
        (None, SpoolMode.ENABLED, LIVE_OPEN, Outcome.SELECTED, 0.0, Inadmissible.NOT_AWAITING),
        (None, SpoolMode.ENABLED, None, Outcome.SELECTED, 0.0, Inadmissible.NOT_AWAITING),
        (None, SpoolMode.ENABLED, AWAITING, Outcome.SELECTED, 10.0, Inadmissible.OUTSIDE_GRACE),
        (None, SpoolMode.SHADOW, AWAITING, Outcome.SELECTED, 0.0, Inadmissible.WRONG_OUTCOME),
        (
            None,
            SpoolMode.ENABLED,
            AWAITING,
            Outcome.SHADOW_SELECTED,
            0.0,
            Inadmissible.WRONG_OUTCOME,
        ),
        (None, SpoolMode.ENABLED, AWAITING, Outcome.TIMEOUT, 0.0, Inadmissible.WRONG_OUTCOME),
    ],
)
def test_report_admissible(outcome, mode, held, reported, now, verdict) -> None:
    assert lc.report_admissible(outcome, mode, held, reported, now) is verdict


@pytest.mark.parametrize(
    ("failed", "rejected", "late", "quarantined", "expected"),
    [
        (None, None, False, False, (Event.CALL_ACCEPTED, None, Reply.ACCEPTED)),
        (None, None, False, True, (Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, Reply.CANONICAL)),
        (None, None, True, False, (Event.CALL_FAILED, Outcome.TIMEOUT, Reply.NONE)),
        # Timed out before the deadline: the shim still waits, so it is told at once.
        (
            Outcome.TIMEOUT,
            None,
            False,
            False,
            (Event.CALL_FAILED, Outcome.TIMEOUT, Reply.CANONICAL),
        ),
        (
            Outcome.PROVIDER_ERROR,
            None,
            False,
            False,
            (Event.CALL_FAILED, Outcome.PROVIDER_ERROR, Reply.CANONICAL),
        ),
        (
            Outcome.PROVIDER_ERROR,
            None,
            True,
            False,
            (Event.CALL_FAILED, Outcome.TIMEOUT, Reply.NONE),
        ),
        (
            None,
            Outcome.VALIDATION_REJECTED,
            False,
            False,
            (Event.CALL_FAILED, Outcome.VALIDATION_REJECTED, Reply.CANONICAL),
        ),
        (
            None,
            Outcome.INVALID_RESPONSE,
            False,
            False,
            (Event.CALL_FAILED, Outcome.INVALID_RESPONSE, Reply.CANONICAL),
        ),
    ],
)
def test_conclude(failed, rejected, late, quarantined, expected) -> None:
    c = lc.conclude(failed, rejected, late=late, quarantined=quarantined)
    assert (c.event, c.outcome, c.reply) == expected
    for mode in SpoolMode:  # every conclusion is a legal step from OPEN
        lc.transition(Phase.OPEN, c.event, c.outcome, mode)


@pytest.mark.parametrize(
    ("age_s", "admission"),
    [
        (0.0, Admission.ADMIT),
        (3.9, Admission.ADMIT),
        (-1.9, Admission.ADMIT),
        (4.0, Admission.EXPIRED),
        (6.0, Admission.EXPIRED),
        (6.1, Admission.CLOCK_SKEW),
        (-2.1, Admission.CLOCK_SKEW),
        (3600.0, Admission.CLOCK_SKEW),
        (-3600.0, Admission.CLOCK_SKEW),
        (40 * 86400.0, Admission.CLOCK_SKEW),
    ],
)
def test_admit_request_trusts_another_process_wall_clock_within_the_skew(age_s, admission) -> None:
    assert lc.admit_request(T, T + 4 * S, T + dt.timedelta(seconds=age_s)) is admission


def test_remaining_budget_is_bounded_by_the_wait() -> None:
    assert lc.remaining_budget(T + 4 * S, T + 1 * S) == 3.0
    assert lc.remaining_budget(T + 4 * S, T - 3600 * S) == 4.0
    assert lc.remaining_budget(T + 4 * S, T + 3600 * S) == 0.0


@pytest.mark.parametrize(
    ("wall", "mono", "step"),
    [
        (0.0, 0.0, False),
        (10.0, 14.0, False),
        (3600.0, 3600.0, False),
        (-3600.0, 1.0, True),
        (3601.0, 1.0, True),
        (40 * 86400.0 + 10, 10.0, True),
        (86400.0 + 40.0, 86400.0, False),  # slew within 500 ppm
        (86400.0 + 60.0, 86400.0, True),
    ],
)
def test_step_observed(wall, mono, step) -> None:
    assert lc.step_observed(wall, mono) is step


# -------------------------------------------------------------- spool files


@pytest.mark.parametrize(("key", "row"), sorted(SPOOL_FILE_MOVES.items(), key=str))
def test_every_spool_file_move_is_allowed_to_its_actor_only(key, row) -> None:
    file, move = key
    _, to, actor = row
    assert lc.file_move(file, move, actor) is to
    other = Actor.SHIM if actor is Actor.WORKER else Actor.WORKER
    with pytest.raises(IllegalMove):
        lc.file_move(file, move, other)


@pytest.mark.parametrize(("key", "row"), sorted(SPOOL_FILE_MOVES.items(), key=str))
def test_the_data_root_routes_every_move_by_the_table(key, row, tmp_path) -> None:
    from kexpr.spool.layout import DataRoot

    root = DataRoot(tmp_path / "root")
    file, move = key
    src, dst, actor = row
    dirs = {
        Where.REQUESTS: root.requests,
        Where.CLAIMED: root.claimed,
        Where.RESPONSES: root.responses,
        Where.REPORTS: root.reports,
    }
    assert root.route(file, move, actor) == (dirs.get(src), dirs.get(dst))
    other = Actor.SHIM if actor is Actor.WORKER else Actor.WORKER
    with pytest.raises(IllegalMove):
        root.route(file, move, other)


def test_spool_file_moves_not_in_the_table_are_illegal() -> None:
    for file in File:
        for move in Move:
            if (file, move) in SPOOL_FILE_MOVES:
                continue
            for actor in Actor:
                with pytest.raises(IllegalMove):
                    lc.file_move(file, move, actor)


def test_every_spool_file_is_published_by_one_side_and_removed_by_a_rule() -> None:
    for file in File:
        froms = {SPOOL_FILE_MOVES[k][0] for k in SPOOL_FILE_MOVES if k[0] is file}
        tos = {SPOOL_FILE_MOVES[k][1] for k in SPOOL_FILE_MOVES if k[0] is file}
        assert None in froms and Where.REMOVED in tos  # nothing is left forever
    # The shim never removes an accepted answer: it is its attempt's durable phase.
    assert not [
        k
        for k, row in SPOOL_FILE_MOVES.items()
        if k[0] is File.ACCEPTED_ANSWER and row[2] is Actor.SHIM
    ]
    # A report is removed only once its row is durable or it is inadmissible.
    assert {k[1] for k in SPOOL_FILE_MOVES if k[0] is File.REPORT} == {
        Move.PUBLISH,
        Move.TERMINAL_DURABLE,
        Move.INADMISSIBLE,
    }


@pytest.mark.parametrize(
    ("accepted", "open_", "file"),
    [
        (True, True, File.ACCEPTED_ANSWER),
        (True, False, File.ANSWER),
        (False, True, File.ANSWER),
        (False, False, File.ANSWER),
    ],
)
def test_answer_file(accepted, open_, file) -> None:
    assert lc.answer_file(accepted, open_) is file


def test_a_request_whose_claim_failed_is_removed_from_requests_by_the_worker(tmp_path) -> None:
    # The worker answers canonical a request it could not rename into claimed/
    # and removes it from requests/ (it was never claimed); the shim may not.
    from kexpr.spool.layout import DataRoot

    assert SPOOL_FILE_MOVES[(File.REQUEST, Move.REFUSED)] == (
        Where.REQUESTS,
        Where.REMOVED,
        Actor.WORKER,
    )
    root = DataRoot(tmp_path / "root")
    assert root.route(File.REQUEST, Move.REFUSED, Actor.WORKER) == (root.requests, None)
    with pytest.raises(IllegalMove):
        root.route(File.REQUEST, Move.REFUSED, Actor.SHIM)

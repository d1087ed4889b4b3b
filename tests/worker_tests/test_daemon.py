"""The worker's request handling, in process, with a controllable clock and the
provider seam fed by an ``httpx.MockTransport``."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kit.bodies import STYLED_SURFACE
from worker_tests.worker_kit import (
    STYLED_GENERATED,
    Clock,
    completion,
    composition_for,
    make_worker,
    outcomes,
    raw_segment,
    response,
    rid,
    status,
    submit,
)

from kexpr.spool.contract import Capsule, CapsuleError, CapsuleReason, fit, slot_policy
from kexpr.spool.fsio import publish
from kexpr.spool.journal import Journal, SpoolMode, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import RESPONSE_TTL
from kexpr.spool.messages import (
    MAX_MESSAGE_BYTES,
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    SpoolReport,
    parse_request,
)
from kexpr.spool.outcomes import Outcome, ReportOutcome
from kexpr.spool.retention import Hold
from kexpr.worker import housekeeping, listing, reports, scan
from kexpr.worker.daemon import Worker
from kexpr.worker.exitcodes import ExitCode
from kexpr.worker.provider import build_client
from kexpr.worker.status import wait_ready


def test_accepted_composition_is_answered_and_awaits_report(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert r.status is ResponseStatus.ACCEPTED and r.composition is not None
    assert r.composition.slots[0].generated_ko == STYLED_GENERATED
    assert len(provider.calls) == 1
    assert outcomes(root) == [None]  # open: the shim owns the outcome now
    assert not (root.claimed / f"{rid(1)}.json").exists()


def test_report_terminalizes_accepted_attempt(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    attempt = response(root, rid(1)).attempt_id
    rep = SpoolReport(
        spool_version=SPOOL_VERSION, attempt_id=attempt, outcome=Outcome.SHADOW_SELECTED
    )
    publish(root.tmp, root.reports / f"{attempt}.json", rep.to_bytes())
    reports.handle_reports(w.parts, [f"{attempt}.json"])
    assert outcomes(root) == ["shadow_selected"]
    assert not (root.reports / f"{attempt}.json").exists()


@pytest.mark.parametrize(
    ("report_outcome", "mode"),
    [(Outcome.SELECTED, "shadow"), (Outcome.SHADOW_SELECTED, "enabled")],
)
def test_report_that_contradicts_the_mode_is_ignored(
    root, provider, env, report_outcome, mode
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1), mode=mode)}.json")
    attempt = response(root, rid(1)).attempt_id
    rep = SpoolReport(spool_version=SPOOL_VERSION, attempt_id=attempt, outcome=report_outcome)
    publish(root.tmp, root.reports / f"{attempt}.json", rep.to_bytes())
    reports.handle_reports(w.parts, [f"{attempt}.json"])
    assert outcomes(root) == [None]
    assert w.counters.orphan_reports == 1


def test_report_for_unknown_attempt_is_ignored(root, provider, env) -> None:
    w = make_worker(root, provider, Clock(), env)
    rep = SpoolReport(spool_version=SPOOL_VERSION, attempt_id="c" * 32, outcome=Outcome.SELECTED)
    publish(root.tmp, root.reports / f"{'c' * 32}.json", rep.to_bytes())
    reports.handle_reports(w.parts, [f"{'c' * 32}.json"])
    assert outcomes(root) == [] and w.counters.orphan_reports == 1


def test_commit_grace_terminalizes_unreported_attempt(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(seconds=60))
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    clock.advance(30)
    housekeeping.sweep(w.parts)
    assert outcomes(root) == [None]  # past the deadline but inside the grace
    clock.advance(40)
    housekeeping.sweep(w.parts)
    assert outcomes(root) == ["claim_expired_canonical"]


def test_same_artifact_while_accepted_is_already_attempted(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    r = response(root, rid(2))
    assert (r.status, r.outcome, r.attempt_id) == (
        ResponseStatus.ALREADY_ATTEMPTED,
        Outcome.ALREADY_ATTEMPTED,
        None,
    )
    assert len(provider.calls) == 1


def test_same_artifact_after_terminal_is_already_attempted(root, provider, env) -> None:
    clock = Clock()
    provider.reply = lambda capsule: httpx.Response(500, json={"error": {"message": "x"}})
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is Outcome.PROVIDER_ERROR
    clock.advance(3600)
    w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    assert response(root, rid(2)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert len(provider.calls) == 1
    assert outcomes(root) == ["provider_error"]


def test_a_lost_attempt_is_canonical_for_every_request_after_a_restart(root, provider, env) -> None:
    """A worker died during its call (start row, no response).
    The restarted worker knows from the spool that the call died with it: the
    attempt ends claim_expired_canonical at start-up, and every request for the
    artifact, the one that started it included, is answered canonical with
    publication permitted (never in_flight), with no call."""
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    starter = submit(root, clock, rid=rid(1))
    with w1.journal.locked() as j:
        j.append_start(
            artifact_key="a" * 64,
            surface=STYLED_SURFACE,
            mode=SpoolMode.SHADOW,
            attempt_id="d" * 32,
            started_at=clock.now,
            deadline_at_utc=format_ts(clock.now + dt.timedelta(seconds=4)),
        )
    clock.advance(1)  # restarted well before the deadline
    w2 = make_worker(root, provider, clock, env)
    assert outcomes(root) == ["claim_expired_canonical"]
    assert w2.counters.lost_attempts == 1
    w2.handle_claimed(f"{starter}.json")  # its predecessor's claimed request
    w2.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    for n in (1, 2):
        r = response(root, rid(n))
        assert r.status is not ResponseStatus.IN_FLIGHT
        assert r.status in (ResponseStatus.CANONICAL, ResponseStatus.ALREADY_ATTEMPTED)
    assert provider.calls == [] and w2.counters.in_flight == 0


def test_in_flight_only_to_another_request_while_the_live_owner_calls(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    seen: list[ResponseStatus] = []

    def during_call() -> None:
        w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
        seen.append(response(root, rid(2)).status)

    provider.on_call = during_call
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert seen == [ResponseStatus.IN_FLIGHT]
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 1


def test_an_answered_attempt_keeps_its_report_window_across_a_restart(root, provider, env) -> None:
    """The accepted response in responses/ is the attempt's
    durable AWAITING_REPORT; a report arriving after the restart is journaled."""
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    (attempt,) = _accepted(w1, root, clock, 1)
    clock.advance(5)  # past the deadline, inside COMMIT_GRACE
    w2 = make_worker(root, provider, clock, env)
    housekeeping.sweep(w2.parts)
    assert outcomes(root) == [None]
    reports.handle_reports(w2.parts, [_report(root, attempt, Outcome.SELECTED)])
    assert outcomes(root) == ["selected"] and w2.counters.orphan_reports == 0
    # Its terminal row is durable: the response file is removed, the report too.
    assert list(root.responses.iterdir()) == [] and list(root.reports.iterdir()) == []


def test_expired_request_is_dropped_without_row_or_call(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    name = f"{submit(root, clock, rid=rid(1))}.json"
    clock.advance(4)
    w.handle_claimed(name)
    assert not (root.responses / name).exists()
    assert outcomes(root) == [] and provider.calls == []
    assert not (root.claimed / name).exists()


def test_late_result_is_discarded_as_timeout(root, provider, env) -> None:
    clock = Clock()
    provider.on_call = lambda: clock.advance(5)  # the answer arrives after the deadline
    w = make_worker(root, provider, clock, env)
    name = f"{submit(root, clock, rid=rid(1))}.json"
    w.handle_claimed(name)
    assert outcomes(root) == ["timeout"]
    assert not (root.responses / name).exists()
    assert len(provider.calls) == 1 and w.counters.late_results == 1


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (lambda c: httpx.Response(429, json={"error": {"message": "slow down"}}), "provider_error"),
        (lambda c: httpx.Response(503, json={"error": {"message": "x"}}), "provider_error"),
        (
            lambda c: httpx.Response(200, content=b"<html>", headers={"content-type": "text/html"}),
            "invalid_response",
        ),
        (lambda c: httpx.Response(200, json=completion("{}", "length")), "invalid_response"),
        (lambda c: httpx.Response(200, json=completion("not json")), "invalid_response"),
        (
            lambda c: httpx.Response(
                200, json=completion(composition_for(c, "오늘은 차분히, [[P:01]]."))
            ),
            "validation_rejected",
        ),
        (
            lambda c: httpx.Response(200, json=completion(composition_for(c, "[[P:01]]."))),
            "validation_rejected",
        ),
    ],
)
def test_failures_are_terminal_canonical_with_one_call(root, provider, env, reply, outcome) -> None:
    clock = Clock()
    provider.reply = reply
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert r.status is ResponseStatus.CANONICAL and r.outcome.value == outcome
    assert r.composition is None
    assert outcomes(root) == [outcome]
    assert len(provider.calls) == 1


def test_no_key_is_credential_unavailable_zero_http(root, provider) -> None:
    clock = Clock()
    w = Worker(root, environ={}, client_factory=lambda: None, clock=clock)
    w.prepare()
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is Outcome.CREDENTIAL_UNAVAILABLE
    assert outcomes(root) == ["credential_unavailable"] and provider.calls == []


def test_unverified_journal_means_zero_calls(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.parts.quarantine.journal_ok = False
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert r.outcome is Outcome.JOURNAL_UNAVAILABLE and provider.calls == []
    assert outcomes(root) == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b.replace(b'"mode":"shadow"', b'"mode":"disabled"'),
        lambda b: b.replace(b'"spool_version"', b'"extra":1,"spool_version"'),
        lambda b: b.replace(
            b'"deadline_at_utc":"2026-11-30T09:00:04', b'"deadline_at_utc":"2026-11-30T09:00:09'
        ),
        lambda b: b.replace(b"P_WEEKLY_TREND_OBSERVED", b"P_DAILY_COMPLETE"),
        lambda b: b[:-1],
        lambda b: b"\xef\xbb\xbf" + b,
        # RFC3339 digits are ASCII (a \d pattern took these, and strptime too).
        lambda b: b.replace(b'"submitted_at_utc":"2026', '"submitted_at_utc":"２０２６'.encode()),
    ],
    ids=[
        "mode",
        "extra_key",
        "deadline_extended",
        "foreign_id",
        "truncated",
        "bom",
        "fullwidth_digits",
    ],
)
def test_invalid_request_gets_canonical_and_no_call(root, provider, env, mutate) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    name = f"{submit(root, clock, rid=rid(1))}.json"
    path = root.claimed / name
    data = mutate(path.read_bytes())
    path.unlink()
    publish(root.tmp, path, data)
    w.handle_claimed(name)
    assert response(root, rid(1)).outcome is Outcome.INVALID_REQUEST
    assert provider.calls == [] and outcomes(root) == []


# Every slot the fit table locks (design §6.1/§6.2): each surface but the
# goal-missing weekly interpretation has nothing to style.
LOCKED_SLOTS = [
    pytest.param("daily.v1", "daily.status", ["P_DAILY_COMPLETE"], id="daily"),
    pytest.param("daily.v1", "daily.status", ["P_DAILY_PARTIAL"], id="daily_partial"),
    pytest.param(
        "adaptive.dualcoachtest.card.v1",
        "adaptive.dual.judgment",
        ["P_DUAL_DECISION_HOLD"],
        id="dual_judgment",
    ),
    pytest.param(
        "adaptive.dualcoachtest.card.v1",
        "adaptive.dual.review.1",
        ["P_DUAL_REASON_EDIT"],
        id="dual_first_line",
    ),
    pytest.param(
        "adaptive.dualcoachtest.card.v1",
        "adaptive.dual.review.2",
        ["P_DUAL_REASON_LATEST"],
        id="dual_later_line",
    ),
    pytest.param(
        "adaptive.physique.card.v1",
        "adaptive.physique.review_instruction",
        ["A_OPERATOR_REVIEW_DECISION"],
        id="physique",
    ),
    pytest.param("weekly.v1", "weekly.rationale", ["A_WEEKLY_KEEP_BASELINE"], id="rationale"),
    pytest.param(
        "weekly.v1",
        "weekly.interpretation",
        ["P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"],
        id="interpretation_I3",
    ),
    pytest.param(
        "weekly.v1",
        "weekly.interpretation",
        ["P_WEEKLY_TREND_UNAVAILABLE", "A_WEEKLY_RECHECK_AFTER_RECORD"],
        id="interpretation_I1",
    ),
    pytest.param(
        "weekly.v1",
        "weekly.interpretation",
        ["P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT"],
        id="interpretation_I4",
    ),
]


@pytest.mark.parametrize(("surface", "slot_id", "ids"), LOCKED_SLOTS)
def test_a_capsule_with_a_locked_slot_is_refused_before_any_row_or_call(
    root, provider, env, surface, slot_id, ids
) -> None:
    """A slot the fit table leaves no choice is never asked (slot_unstyleable): a
    request carrying one (an older shim's, built as bytes since today's models
    refuse it) is answered canonical, invalid_request, with no journal row and no
    call; the styled slot in its place is called (the control)."""
    locked = slot_policy(slot_id, ids)
    assert not fit.slot_styleable(slot_id, locked.semantic_ids)
    with pytest.raises(CapsuleError) as refused:
        Capsule(
            schema_version="korean-expression-v4",
            surface=surface,
            artifact_key="a" * 32,
            slots=(locked,),
        )
    assert refused.value.reason is CapsuleReason.SLOT_UNSTYLEABLE
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    name = f"{submit(root, clock, rid=rid(1), surface=surface, slot=locked)}.json"
    data = (root.claimed / name).read_bytes()
    request = json.loads(data)
    assert request["capsule"]["surface"] == surface
    assert [s["slot_id"] for s in request["capsule"]["slots"]] == [slot_id]
    with pytest.raises(MessageError) as unreadable:  # the worker's reader, for this reason
        parse_request(data)
    assert "slot_unstyleable" in str(unreadable.value.__cause__)
    w.handle_claimed(name)
    r = response(root, rid(1))
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.INVALID_REQUEST)
    assert r.attempt_id is None and r.composition is None
    assert provider.calls == [] and outcomes(root) == []
    # The same request with the styled slot is the one call.
    w.handle_claimed(f"{submit(root, clock, akey='b' * 32, rid=rid(2))}.json")
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 1 and outcomes(root) == [None]


def test_request_id_must_match_file_name(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    submit(root, clock, rid=rid(1))
    (root.claimed / f"{rid(1)}.json").rename(root.claimed / f"{rid(2)}.json")
    w.handle_claimed(f"{rid(2)}.json")
    assert response(root, rid(2)).outcome is Outcome.INVALID_REQUEST
    assert provider.calls == []


def test_symlinked_request_is_refused(root, provider, env, tmp_path: Path) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    submit(root, clock, rid=rid(1))
    real = tmp_path / "real.json"
    (root.claimed / f"{rid(1)}.json").rename(real)
    (root.claimed / f"{rid(1)}.json").symlink_to(real)
    w.handle_claimed(f"{rid(1)}.json")
    assert response(root, rid(1)).outcome is Outcome.INVALID_REQUEST
    assert provider.calls == []


def test_concurrent_requests_for_one_artifact_make_one_call(root, provider, env) -> None:
    clock = Clock()
    gate = threading.Event()
    provider.on_call = lambda: gate.wait(5) and None
    w = make_worker(root, provider, clock, env)
    names = [f"{submit(root, clock, rid=rid(i))}.json" for i in range(1, 9)]
    threads = [threading.Thread(target=w.handle_claimed, args=(n,)) for n in names]
    for t in threads:
        t.start()
    # Wait until every thread but the owner has answered.
    deadline = threading.Event()
    for _ in range(200):
        if len(list(root.responses.iterdir())) >= 7:
            break
        deadline.wait(0.05)
    gate.set()
    for t in threads:
        t.join(10)
    statuses = sorted(response(root, n[:-5]).status.value for n in names)
    assert statuses.count("accepted") == 1
    assert statuses.count("in_flight") == 7
    assert len(provider.calls) == 1


def test_hazardous_environment_refuses_to_start(root) -> None:
    for env in (
        {"OPENAI_BASE_URL": "https://evil"},
        {"SSLKEYLOGFILE": "/tmp/k"},
        {"OPENAI_CUSTOM_HEADERS": "x"},
    ):
        w = Worker(root, environ={"OPENAI_API_KEY": "sk", **env}, client_factory=lambda: None)
        assert w.run(threading.Event()) is ExitCode.HAZARDOUS_ENVIRONMENT


def test_second_worker_on_one_data_root_refuses(root, provider, env) -> None:
    stop = threading.Event()
    first = Worker(root, environ=env, client_factory=lambda: None, rescan_interval_s=0.05)
    t = threading.Thread(target=first.run, args=(stop,))
    t.start()
    try:
        wait_ready(root, 10.0)
        second = Worker(root, environ=env, client_factory=lambda: None)
        assert second.run(threading.Event()) is ExitCode.ANOTHER_WORKER
    finally:
        stop.set()
        t.join(10)


def test_status_file_holds_no_content(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    w.status.write()
    status = json.loads(root.status_file.read_bytes())
    text = json.dumps(status)
    assert "a" * 32 not in text and rid(1) not in text and "P_WEEKLY" not in text
    assert status["counters"]["calls"] == 1 and status["credential"] == "present"


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    for t in set(threading.enumerate()) - before:
        t.join(5)


# ------------------------------------- unsafe files, quarantine, retention


@pytest.mark.parametrize("kind", ["fifo", "bad_mode", "directory", "oversized", "wrong_owner"])
def test_unsafe_request_file_is_canonical_with_zero_calls(root, provider, env, kind) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    path = root.claimed / f"{rid(1)}.json"
    expected = {
        "fifo": "not_regular_file",
        "bad_mode": "bad_mode",
        "directory": "not_regular_file",
        "oversized": "too_large",
        "wrong_owner": "wrong_owner",
    }[kind]
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        os.mkdir(path, 0o700)
    elif kind == "oversized":
        publish(root.tmp, path, b" " * (MAX_MESSAGE_BYTES + 1))
    else:
        submit(root, clock, rid=rid(1))
        if kind == "bad_mode":
            os.chmod(path, 0o644)
        else:
            if os.geteuid() != 0:
                pytest.skip("chown needs root")
            os.chown(path, 65534, -1)
    w.handle_claimed(path.name)
    r = response(root, rid(1))
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.INVALID_REQUEST)
    assert provider.calls == [] and outcomes(root) == []
    assert w.counters.unsafe == {expected: 1}
    if kind != "directory":
        assert not os.path.lexists(path)


def test_symlinked_request_is_counted_by_reason(root, provider, env, tmp_path: Path) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    submit(root, clock, rid=rid(1))
    real = tmp_path / "real.json"
    (root.claimed / f"{rid(1)}.json").rename(real)
    (root.claimed / f"{rid(1)}.json").symlink_to(real)
    w.handle_claimed(f"{rid(1)}.json")
    assert w.counters.unsafe == {"symlink": 1} and provider.calls == []
    assert real.exists()  # the link was removed, never its target
    w.status.write()
    assert status(root)["unsafe"] == {"symlink": 1}


def test_unsafe_report_is_ignored_and_counted(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(seconds=60))
    w.handle_claimed(f"{submit(root, clock, rid=rid(1), mode='enabled')}.json")
    attempt = response(root, rid(1)).attempt_id
    rep = SpoolReport(spool_version=SPOOL_VERSION, attempt_id=attempt, outcome=Outcome.SELECTED)
    publish(root.tmp, root.reports / f"{attempt}.json", rep.to_bytes())
    os.chmod(root.reports / f"{attempt}.json", 0o666)
    reports.handle_reports(w.parts, [f"{attempt}.json"])
    assert outcomes(root) == [None] and w.counters.unsafe == {"bad_mode": 1}


def test_torn_tail_at_start_up_quarantines_without_truncating(root, provider, env) -> None:
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    w1.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")
    seg = root.outcomes / "2026-11-30.jsonl"
    with open(seg, "ab") as f:
        f.write(b'{"artifact_key":"' + b"2" * 64)  # a crash mid-append
    torn = seg.read_bytes()
    w2 = Worker(root, environ=env, client_factory=lambda: w1.parts.client, clock=clock)
    w2.prepare()
    assert not w2.journal_ok and w2.quarantine == "torn_tail"
    for n, akey in ((2, "3" * 32), (3, "1" * 32)):
        w2.handle_claimed(f"{submit(root, clock, akey=akey, rid=rid(n))}.json")
        r = response(root, rid(n))
        assert (r.status, r.outcome) == (
            ResponseStatus.CANONICAL,
            Outcome.JOURNAL_UNAVAILABLE,
        )
    assert len(provider.calls) == 1  # only w1's, before the tear
    assert seg.read_bytes() == torn  # never truncated, never repaired
    w2.status.write()
    assert (status(root)["journal"], status(root)["quarantine"]) == ("unverified", "torn_tail")


def test_after_the_operator_quarantines_the_segment_sealed_artifacts_never_call_again(
    root, provider, env
) -> None:
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    w1.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")  # accepted, open
    with open(root.outcomes / "2026-11-30.jsonl", "ab") as f:
        f.write(b'{"artifact_key":"' + b"2" * 64 + b'","attempt_id":"')
    Journal(root).quarantine_torn("2026-11-30", apply=True)
    clock.advance(60)
    w2 = make_worker(root, provider, clock, env)  # verifies again
    for n, akey in ((2, "1" * 32), (3, "2" * 32)):
        w2.handle_claimed(f"{submit(root, clock, akey=akey, rid=rid(n))}.json")
        assert response(root, rid(n)).status is ResponseStatus.ALREADY_ATTEMPTED
    w2.handle_claimed(f"{submit(root, clock, akey='4' * 32, rid=rid(4))}.json")
    assert response(root, rid(4)).status is ResponseStatus.ACCEPTED
    assert [c["artifact_key"] for c in provider.calls] == ["1" * 32, "4" * 32]


@pytest.mark.parametrize("walk", [True, False], ids=["walk", "glance"])
@pytest.mark.parametrize("where", ["spool", "claimed", "outcomes"])
def test_directory_swapped_after_start_up_quarantines(
    root, provider, env, tmp_path: Path, where: str, walk: bool
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    target = {"spool": root.spool, "claimed": root.claimed, "outcomes": root.outcomes}[where]
    aside = tmp_path / "aside"
    os.rename(target, aside)
    os.mkdir(target, 0o700)  # a look-alike: right type, mode and owner, another inode
    if where == "spool":
        for d in root.spool_dirs():
            os.mkdir(d, 0o700)
    w.parts.quarantine.check_tree(walk=walk)
    assert w.quarantine == "inode_changed" and not w.journal_ok
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is Outcome.JOURNAL_UNAVAILABLE
    assert provider.calls == []


@pytest.mark.parametrize("walk", [True, False], ids=["walk", "glance"])
def test_directory_replaced_by_a_symlink_quarantines(
    root, provider, env, tmp_path: Path, walk: bool
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    os.rename(root.outcomes, tmp_path / "real")
    os.symlink(tmp_path / "real", root.outcomes)
    w.parts.quarantine.check_tree(walk=walk)
    assert w.quarantine == "symlink"
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is Outcome.JOURNAL_UNAVAILABLE
    assert provider.calls == [] and os.listdir(tmp_path / "real") == []


@pytest.mark.parametrize("walk", [True, False], ids=["walk", "glance"])
def test_directory_re_moded_after_start_up_quarantines(root, provider, env, walk: bool) -> None:
    w = make_worker(root, provider, Clock(), env)
    os.chmod(root.reports, 0o755)
    w.parts.quarantine.check_tree(walk=walk)
    assert w.quarantine == "bad_mode" and not w.journal_ok


@pytest.mark.parametrize("walk", [True, False], ids=["walk", "glance"])
def test_directory_removed_after_start_up_quarantines(root, provider, env, walk: bool) -> None:
    w = make_worker(root, provider, Clock(), env)
    os.rmdir(root.reports)
    w.parts.quarantine.check_tree(walk=walk)
    assert w.quarantine == "io_error" and not w.journal_ok


def test_segment_swapped_under_the_worker_quarantines_with_zero_calls(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")
    seg = root.outcomes / "2026-11-30.jsonl"
    data = seg.read_bytes()
    os.rename(seg, root.root / "aside")
    fd = os.open(seg, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    os.close(fd)
    w.handle_claimed(f"{submit(root, clock, akey='2' * 32, rid=rid(2))}.json")
    assert response(root, rid(2)).outcome is Outcome.JOURNAL_UNAVAILABLE
    assert w.quarantine == "append_conflict"
    assert [c["artifact_key"] for c in provider.calls] == ["1" * 32]
    assert seg.read_bytes() == data


def test_swapped_journal_lock_quarantines_with_zero_calls(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    os.rename(root.journal_lock, root.root / "old.lock")
    fd = os.open(root.journal_lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is Outcome.JOURNAL_UNAVAILABLE
    assert w.quarantine == "lock_unsafe" and provider.calls == []


def test_quarantine_while_a_call_runs_delivers_nothing(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    provider.on_call = lambda: w.parts.quarantine.enter("inode_changed")
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert (r.status, r.composition) == (ResponseStatus.CANONICAL, None)
    assert outcomes(root) == ["claim_expired_canonical"] and len(provider.calls) == 1


def test_retention_terminalizes_then_removes_an_aged_segment(root, provider, env) -> None:
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    w1.handle_claimed(
        f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json"
    )  # open (awaiting report)
    clock.advance(35 * 86400)  # 2027-01-04: 2026-11-30 is exactly 35 completed days old
    housekeeping.sweep(w1.parts)  # w1 ran all along: its retention record says now
    w2 = make_worker(root, provider, clock, env)
    assert outcomes(root) == ["claim_expired_canonical"]  # restart after expiry
    assert (root.outcomes / "2026-11-30.jsonl").exists()  # still inside the window
    clock.advance(86400)
    housekeeping.sweep(w2.parts)
    # Aged out, but it holds the newest row: kept (spool.lifecycle rule 7).
    assert os.listdir(root.outcomes) == ["2026-11-30.jsonl"]
    w2.handle_claimed(f"{submit(root, clock, akey='2' * 32, rid=rid(2))}.json")
    housekeeping.sweep(w2.parts)
    assert os.listdir(root.outcomes) == ["2027-01-05.jsonl"]
    assert w2.counters.retired_segments == 1
    # Outside the window dedupe is over (design §4): a new attempt is allowed.
    w2.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(3))}.json")
    assert response(root, rid(3)).status is ResponseStatus.ACCEPTED


def test_retention_terminalizes_an_open_attempt_before_its_segment_ages_out(
    root, provider, env
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(days=400))
    w.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")  # awaiting report
    clock.advance(36 * 86400)
    before = raw_segment(root)
    housekeeping.sweep(w.parts)
    # The journal's newest row is 36 days old: retention holds (spool.journal
    # rule 7a), so nothing is terminalized or removed.
    assert outcomes(root) == [None] and w.parts.retention.hold is Hold.JOURNAL_STALE
    # A new row: the journal agrees with the clock again.
    w.handle_claimed(f"{submit(root, clock, akey='2' * 32, rid=rid(2))}.json")
    housekeeping.sweep(w.parts)  # the grace has not passed, but the segment is leaving the window
    # Terminalized first, then removed whole.
    rows = [json.loads(x) for x in before.split(b"\n") if x]
    assert len(rows) == 1  # we saw only the start row before the sweep
    assert w.counters.by_outcome == {"claim_expired_canonical": 1}
    assert os.listdir(root.outcomes) == ["2027-01-05.jsonl"]


def test_retention_runs_before_a_new_attempt(root, provider, env) -> None:
    clock = Clock()
    provider.reply = lambda capsule: httpx.Response(500, json={"error": {"message": "x"}})
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")
    clock.advance(36 * 86400)
    w.handle_claimed(
        f"{submit(root, clock, akey='2' * 32, rid=rid(2))}.json"
    )  # no sweep in between
    # The old segment held the newest row when retention ran: kept until now.
    assert sorted(os.listdir(root.outcomes)) == ["2026-11-30.jsonl", "2027-01-05.jsonl"]
    w.handle_claimed(
        f"{submit(root, clock, akey='3' * 32, rid=rid(3))}.json"
    )  # no sweep in between
    assert sorted(os.listdir(root.outcomes)) == ["2027-01-05.jsonl"]


def test_commit_grace_is_ten_minutes() -> None:
    from kexpr.spool.lifecycle import COMMIT_GRACE

    assert COMMIT_GRACE == dt.timedelta(minutes=10)


@pytest.mark.skipif(os.geteuid() != 0, reason="a shared group root is set up with chown")
def test_worker_serves_a_shared_group_root(tmp_path: Path, provider, env) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    os.chown(d, -1, 65534)
    os.chmod(d, 0o2770)
    root = DataRoot(d)
    root.ensure()
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    name = f"{submit(root, clock, rid=rid(1))}.json"
    os.chown(root.claimed / name, 65534, -1)  # written by the gateway user, a member
    w.handle_claimed(name)
    resp = root.responses / name
    st = os.stat(resp)
    assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == 65534
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    seg = os.stat(root.outcomes / "2026-11-30.jsonl")
    assert stat.S_IMODE(seg.st_mode) == 0o660 and seg.st_gid == 65534


def test_observer_past_the_deadline_leaves_the_terminal_row_to_the_running_owner(
    root, provider, env
) -> None:
    """A second request arrives after the deadline while the owner's call is still
    concluding: in_flight (no row, no call); the owner writes the one terminal row."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)

    def meanwhile() -> None:
        clock.advance(4.5)  # the owner's deadline has passed; the new request is fresh
        w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")

    provider.on_call = meanwhile
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(2)).status is ResponseStatus.IN_FLIGHT
    assert outcomes(root) == ["timeout"] and len(provider.calls) == 1


def test_die_with_parent_asks_for_sigterm_and_notices_an_early_orphan() -> None:
    import signal as _signal

    from kexpr.worker.main import PR_SET_PDEATHSIG, die_with_parent

    calls: list[tuple[int, ...]] = []

    def prctl(*args: int) -> int:
        calls.append(args)
        return 0

    assert die_with_parent(prctl, parent=os.getppid()) is True
    assert calls == [(PR_SET_PDEATHSIG, int(_signal.SIGTERM), 0, 0, 0)]
    assert die_with_parent(prctl, parent=-1) is False  # already re-parented: exit at once


# -- reports are journaled as a group on the rescan timer (group commit) --------


def _accepted(w: Worker, root: DataRoot, clock: Clock, n: int, mode: str = "enabled") -> list[str]:
    attempts = []
    for i in range(n):
        w.handle_claimed(
            f"{submit(root, clock, akey=f'{i + 1:032x}', rid=rid(i + 1), mode=mode)}.json"
        )
        attempts.append(response(root, rid(i + 1)).attempt_id)
    return attempts


def _report(root: DataRoot, attempt: str, outcome: ReportOutcome) -> str:
    rep = SpoolReport(spool_version=SPOOL_VERSION, attempt_id=attempt, outcome=outcome)
    publish(root.tmp, root.reports / f"{attempt}.json", rep.to_bytes())
    return f"{attempt}.json"


def test_reports_are_journaled_as_one_group_with_one_fsync(
    root, provider, env, monkeypatch
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    attempts = _accepted(w, root, clock, 4)
    names = [_report(root, a, Outcome.SELECTED) for a in attempts]
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    reports.handle_reports(w.parts, sorted(names))
    assert len(synced) == 1  # one segment, one group: one fsync for four rows
    assert outcomes(root) == ["selected"] * 4
    assert w.counters.reports == 4 and w.counters.orphan_reports == 0
    assert list(root.reports.iterdir()) == []


def test_an_orphan_in_a_group_is_counted_and_the_rest_are_journaled(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    attempts = _accepted(w, root, clock, 3)
    names = [
        _report(root, attempts[0], Outcome.SELECTED),
        _report(root, attempts[1], Outcome.SHADOW_SELECTED),  # enabled attempt: illegal
        _report(root, "c" * 32, Outcome.SELECTED),  # no such attempt
        _report(root, attempts[2], Outcome.COMMIT_FAILED),
    ]
    (root.reports / f"{'d' * 32}.json").write_bytes(b"{not json")  # malformed
    os.chmod(root.reports / f"{'d' * 32}.json", 0o600)
    reports.handle_reports(w.parts, sorted([*names, f"{'d' * 32}.json"]))
    assert sorted(o or "open" for o in outcomes(root)) == ["commit_failed", "open", "selected"]
    assert w.counters.reports == 2 and w.counters.orphan_reports == 3
    assert list(root.reports.iterdir()) == []


def test_a_report_waits_for_the_timer_scan_and_a_wake_scan_leaves_it(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    (attempt,) = _accepted(w, root, clock, 1)
    _report(root, attempt, Outcome.SELECTED)
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(1) as pool:
        scan.scan(w.parts, pool, walk=False, reports=False)  # a wake: requests only
        assert outcomes(root) == [None] and (root.reports / f"{attempt}.json").exists()
        scan.scan(w.parts, pool, walk=True, reports=True)  # the timer tick
    assert outcomes(root) == ["selected"] and not (root.reports / f"{attempt}.json").exists()


def test_a_failed_group_append_quarantines_and_journals_nothing(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    attempts = _accepted(w, root, clock, 2)
    names = [_report(root, a, Outcome.SELECTED) for a in attempts]
    with open(root.outcomes / "2026-11-30.jsonl", "ab") as f:
        f.write(b"\n")  # the segment changed under the worker
    reports.handle_reports(w.parts, sorted(names))
    assert not w.journal_ok and w.quarantine == "append_conflict"
    assert w.counters.reports == 0


def test_stop_journals_the_reports_that_arrived_since_the_last_tick(root, provider, env) -> None:
    stop = threading.Event()
    client = build_client(http_client=httpx.Client(transport=httpx.MockTransport(provider.handler)))
    w = Worker(root, environ=env, client_factory=lambda: client, rescan_interval_s=3600)
    t = threading.Thread(target=w.run, args=(stop,))
    t.start()
    try:
        wait_ready(root, 10.0)
        clock = Clock()
        clock.now = dt.datetime.now(dt.UTC)
        submit(root, clock, rid=rid(1), mode="enabled")
        # Published like a shim does: an arrival in requests/ wakes the worker.
        os.rename(root.claimed / f"{rid(1)}.json", root.requests / f"{rid(1)}.json")
        for _ in range(200):
            if (root.responses / f"{rid(1)}.json").exists():
                break
            stop.wait(0.05)
        attempt = response(root, rid(1)).attempt_id
        _report(root, attempt, Outcome.SELECTED)
        stop.wait(0.2)
        assert (root.reports / f"{attempt}.json").exists()  # the tick is an hour away
        stop.set()
        _report(root, "e" * 32, Outcome.SELECTED)  # an arrival: the loop sees stop
        t.join(10)
        assert not t.is_alive()
    finally:
        stop.set()
        t.join(10)
    assert outcomes(root) == ["selected"]
    assert w.counters.reports == 1 and w.counters.orphan_reports == 1
    assert list(root.reports.iterdir()) == []


def test_a_report_a_dead_worker_left_is_journaled_at_start_up(root, provider, env) -> None:
    """The worker died before its tick: the next one journals the shim's outcome
    before its start-up sweep, instead of expiring the attempt."""
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    (attempt,) = _accepted(w1, root, clock, 1)
    _report(root, attempt, Outcome.SELECTED)
    clock.advance(30)  # past the deadline, within COMMIT_GRACE
    w2 = make_worker(root, provider, clock, env)
    assert outcomes(root) == ["selected"]
    assert w2.counters.reports == 1 and w2.counters.orphan_reports == 0
    assert list(root.reports.iterdir()) == []


def test_a_report_left_while_no_worker_ran_is_evidence_even_past_commit_grace(
    root, provider, env
) -> None:
    """A report on disk for an open attempt proves the host
    published. Written while no worker ran (stopped for an upgrade longer than
    the grace), its lateness is the worker's: it is journaled, not orphaned."""
    clock = Clock()
    w1 = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(seconds=60))
    (attempt,) = _accepted(w1, root, clock, 1)
    _report(root, attempt, Outcome.SELECTED)
    clock.advance(120)
    w2 = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(seconds=60))
    assert outcomes(root) == ["selected"]
    assert w2.counters.orphan_reports == 0 and w2.counters.lost_attempts == 0


def test_a_report_arriving_past_commit_grace_while_the_worker_runs_is_an_orphan(
    root, provider, env
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(seconds=60))
    (attempt,) = _accepted(w, root, clock, 1)
    clock.advance(120)
    _report(root, attempt, Outcome.SELECTED)
    reports.handle_reports(w.parts, [f"{attempt}.json"])
    assert w.counters.orphan_reports == 1
    housekeeping.sweep(w.parts)
    assert outcomes(root) == ["claim_expired_canonical"]


def test_a_left_report_that_contradicts_the_mode_is_still_refused(root, provider, env) -> None:
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    (attempt,) = _accepted(w1, root, clock, 1, mode="shadow")
    _report(root, attempt, Outcome.SELECTED)  # enabled-only outcome
    w2 = make_worker(root, provider, clock, env)
    assert w2.counters.orphan_reports == 1
    assert outcomes(root) == [None]  # before its deadline: still open, not expired


def test_an_answered_attempt_without_a_report_expires_after_grace_and_its_response_goes(
    root, provider, env
) -> None:
    clock = Clock()
    w1 = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(seconds=60))
    _accepted(w1, root, clock, 1)
    w2 = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(seconds=60))
    clock.advance(63)
    housekeeping.sweep(w2.parts)
    assert outcomes(root) == [None]
    clock.advance(2)
    housekeeping.sweep(w2.parts)
    assert outcomes(root) == ["claim_expired_canonical"]
    assert list(root.responses.iterdir()) == []


def test_a_report_whose_row_fails_stays_for_the_next_worker(
    root, provider, env, monkeypatch
) -> None:
    """The terminal row's append fails (ENOSPC): the worker
    quarantines and keeps the report; the next worker journals it."""
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    (attempt,) = _accepted(w1, root, clock, 1)
    name = _report(root, attempt, Outcome.SELECTED)

    def full(*a: object, **k: object) -> object:
        raise OSError(28, "ENOSPC")

    monkeypatch.setattr(w1.journal, "_append_rows", full)
    reports.handle_reports(w1.parts, [name])
    assert not w1.journal_ok
    assert (root.reports / name).exists() and outcomes(root) == [None]
    monkeypatch.undo()
    w2 = make_worker(root, provider, clock, env)
    assert outcomes(root) == ["selected"] and w2.counters.reports == 1
    assert list(root.reports.iterdir()) == []


def test_an_unsafe_reports_folder_at_the_tick_quarantines(root, provider, env, tmp_path) -> None:
    w = make_worker(root, provider, Clock(), env)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.rmdir(root.reports)
    os.symlink(elsewhere, root.reports)
    scan.scan_reports(w.parts)
    assert not w.journal_ok and w.quarantine == "symlink"


def test_a_reports_listing_that_fails_quarantines_io_error(
    root, provider, env, monkeypatch
) -> None:

    w = make_worker(root, provider, Clock(), env)

    def failing(path: Path) -> list[str]:
        raise OSError(5, "EIO")

    monkeypatch.setattr(listing, "list_dir", failing)
    scan.scan_reports(w.parts)
    assert not w.journal_ok and w.quarantine == "io_error"


# ----------------------------------------------------------------- clock steps


def test_a_request_outside_the_skew_bound_is_canonical_with_no_call(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    clock.step(-3600)  # the worker's wall clock goes back an hour
    shim = Clock()  # the shim's clock is right
    shim.now = clock.now + dt.timedelta(seconds=3600)
    w.handle_claimed(f"{submit(root, shim, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.CLOCK_SKEW)
    assert provider.calls == [] and outcomes(root) == []
    # Nobody collects it: it is litter after RESPONSE_TTL of monotonic time.
    housekeeping.sweep(w.parts)
    assert (root.responses / f"{rid(1)}.json").exists()
    clock.advance(RESPONSE_TTL.total_seconds())
    housekeeping.sweep(w.parts)
    assert list(root.responses.iterdir()) == []


def test_a_clock_step_back_during_the_call_cannot_extend_its_budget(root, provider, env) -> None:
    clock = Clock()

    def slow_and_stepped() -> None:
        clock.step(-3600)
        clock.advance(4.5)  # 4.5 s of real (monotonic) time pass during the call

    provider.on_call = slow_and_stepped
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert outcomes(root) == ["timeout"] and w.counters.accepted == 0
    assert w.counters.late_results == 1
    assert not (root.responses / f"{rid(1)}.json").exists()


def test_a_forty_day_step_never_empties_the_journal_nor_calls_twice(root, provider, env) -> None:
    clock = Clock()
    provider.reply = lambda capsule: httpx.Response(500, json={"error": {"message": "x"}})
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")
    assert outcomes(root) == ["provider_error"]
    clock.step(40 * 86400)
    housekeeping.sweep(w.parts)
    w.status.write()
    assert w.clock_step and os.listdir(root.outcomes) == ["2026-11-30.jsonl"]
    status = json.loads(root.status_file.read_bytes())
    assert status["clock_step_observed"] is True
    # While stepped: canonical, no call; no retention before a new attempt either.
    w.handle_claimed(f"{submit(root, Clock(), akey='2' * 32, rid=rid(2))}.json")
    assert response(root, rid(2)).outcome is Outcome.CLOCK_SKEW
    clock.step(-40 * 86400)  # corrected
    housekeeping.sweep(w.parts)
    w.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(3))}.json")
    assert response(root, rid(3)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert len(provider.calls) == 1 and os.listdir(root.outcomes) == ["2026-11-30.jsonl"]


def test_retention_never_removes_the_segment_of_the_newest_row(root, provider, env) -> None:
    """A worker *started* with a clock 40 days ahead has observed no step; the
    newest segment still stays."""
    clock = Clock()
    provider.reply = lambda capsule: httpx.Response(500, json={"error": {"message": "x"}})
    w1 = make_worker(root, provider, clock, env)
    w1.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")
    clock.step(40 * 86400)
    w2 = make_worker(root, provider, clock, env)
    assert not w2.clock_step
    assert os.listdir(root.outcomes) == ["2026-11-30.jsonl"]

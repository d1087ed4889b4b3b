"""The worker's request handling, in process, with a controllable clock and the
provider seam fed by an ``httpx.MockTransport`` (STYLE.md: httpx, trio)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from spool.contract import Capsule, slot_policy
from spool.fsio import publish
from spool.journal import Journal, Mode, format_ts
from spool.layout import DataRoot
from spool.messages import (
    SPOOL_VERSION,
    ReportOutcome,
    ResponseOutcome,
    ResponseStatus,
    SpoolReport,
    SpoolRequest,
    parse_response,
)
from worker.daemon import Worker
from worker.exitcodes import ExitCode
from worker.provider import build_client

T0 = dt.datetime(2026, 11, 30, 9, 0, 0, tzinfo=dt.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def completion(content: str, finish_reason: str = "stop") -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4.1-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
    }


def composition_for(capsule: dict[str, object], generated: str) -> str:
    slots = capsule["slots"]
    assert isinstance(slots, list)
    return json.dumps(
        {
            "schema_version": capsule["schema_version"],
            "surface": capsule["surface"],
            "artifact_key": capsule["artifact_key"],
            "slots": [
                {
                    "slot_id": s["slot_id"],
                    "predicate_ids": s["allowed_predicate_ids"],
                    "action_ids": s["allowed_action_ids"],
                    "placeholder_tokens": s["required_placeholder_tokens"],
                    "generated_ko": generated,
                }
                for s in slots
            ],
        },
        ensure_ascii=False,
    )


class Provider:
    """A MockTransport handler that counts requests per artifact."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []
        self.reply: Callable[[dict[str, object]], httpx.Response] = lambda capsule: httpx.Response(
            200, json=completion(composition_for(capsule, "차분히, [[P:01]]."))
        )
        self.on_call: Callable[[], None] = lambda: None

    def handler(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        capsule = json.loads(body["messages"][-1]["content"])
        self.calls.append(capsule)
        self.on_call()
        return self.reply(capsule)


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    r = DataRoot(tmp_path / "root")
    r.ensure()
    return r


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return {"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin"}


def make_worker(
    root: DataRoot, provider: Provider, clock: Clock, env: dict[str, str], **kw: object
) -> Worker:
    client = build_client(http_client=httpx.Client(transport=httpx.MockTransport(provider.handler)))
    w = Worker(root, environ=env, client_factory=lambda: client, clock=clock, **kw)  # type: ignore[arg-type]
    w.prepare()
    assert w.journal_ok
    return w


def submit(
    root: DataRoot, clock: Clock, akey: str = "a" * 64, rid: str | None = None, mode: str = "shadow"
) -> str:
    rid = rid or format(len(list(root.claimed.iterdir())) + hash(clock.now) % 10**8, "032x")[-32:]
    capsule = Capsule(
        schema_version="korean-expression-v4",
        surface="daily.v1",
        artifact_key=akey,
        slots=(slot_policy("daily.status", ["P_DAILY_COMPLETE"]),),
    )
    req = SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=rid,
        submitted_at_utc=format_ts(clock.now),
        deadline_at_utc=format_ts(clock.now + dt.timedelta(seconds=4)),
        mode=mode,  # type: ignore[arg-type]
        capsule=capsule,
    )
    # As the worker would find it after its claim rename.
    publish(root.tmp, root.claimed / f"{rid}.json", req.to_bytes())
    return rid


def response(root: DataRoot, rid: str):  # type: ignore[no-untyped-def]
    return parse_response((root.responses / f"{rid}.json").read_bytes())


def outcomes(root: DataRoot) -> list[str | None]:
    j = Journal(root)
    idx = j.load()
    return [r.outcome.value if r.outcome else None for r in idx.by_attempt.values()]


def rid(n: int) -> str:
    return f"{n:032x}"


def test_accepted_composition_is_answered_and_awaits_report(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert r.status is ResponseStatus.ACCEPTED and r.composition is not None
    assert r.composition.slots[0].generated_ko == "차분히, [[P:01]]."
    assert len(provider.calls) == 1
    assert outcomes(root) == [None]  # open: the shim owns the outcome now
    assert not (root.claimed / f"{rid(1)}.json").exists()


def test_report_terminalizes_accepted_attempt(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    attempt = response(root, rid(1)).attempt_id
    rep = SpoolReport(
        spool_version=SPOOL_VERSION, attempt_id=attempt, outcome=ReportOutcome.SHADOW_SELECTED
    )
    publish(root.tmp, root.reports / f"{attempt}.json", rep.to_bytes())
    w._handle_report(f"{attempt}.json")
    assert outcomes(root) == ["shadow_selected"]
    assert not (root.reports / f"{attempt}.json").exists()


@pytest.mark.parametrize(
    ("report_outcome", "mode"),
    [(ReportOutcome.SELECTED, "shadow"), (ReportOutcome.SHADOW_SELECTED, "enabled")],
)
def test_report_that_contradicts_the_mode_is_ignored(
    root, provider, env, report_outcome, mode
) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1), mode=mode)}.json")
    attempt = response(root, rid(1)).attempt_id
    rep = SpoolReport(spool_version=SPOOL_VERSION, attempt_id=attempt, outcome=report_outcome)
    publish(root.tmp, root.reports / f"{attempt}.json", rep.to_bytes())
    w._handle_report(f"{attempt}.json")
    assert outcomes(root) == [None]
    assert w.counters.orphan_reports == 1


def test_report_for_unknown_attempt_is_ignored(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    w = make_worker(root, provider, Clock(), env)
    rep = SpoolReport(
        spool_version=SPOOL_VERSION, attempt_id="c" * 32, outcome=ReportOutcome.SELECTED
    )
    publish(root.tmp, root.reports / f"{'c' * 32}.json", rep.to_bytes())
    w._handle_report(f"{'c' * 32}.json")
    assert outcomes(root) == [] and w.counters.orphan_reports == 1


def test_commit_grace_terminalizes_unreported_attempt(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env, commit_grace=dt.timedelta(seconds=60))
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    clock.advance(30)
    w._sweep()
    assert outcomes(root) == [None]  # past the deadline but inside the grace
    clock.advance(40)
    w._sweep()
    assert outcomes(root) == ["claim_expired_canonical"]


def test_same_artifact_while_accepted_is_already_attempted(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    r = response(root, rid(2))
    assert (r.status, r.outcome, r.attempt_id) == (
        ResponseStatus.ALREADY_ATTEMPTED,
        ResponseOutcome.ALREADY_ATTEMPTED,
        None,
    )
    assert len(provider.calls) == 1


def test_same_artifact_after_terminal_is_already_attempted(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    provider.reply = lambda capsule: httpx.Response(500, json={"error": {"message": "x"}})
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is ResponseOutcome.PROVIDER_ERROR
    clock.advance(3600)
    w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    assert response(root, rid(2)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert len(provider.calls) == 1
    assert outcomes(root) == ["provider_error"]


def test_in_flight_then_expired_across_restart(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    """An open attempt from a dead worker: unexpired -> in_flight (no row, no call);
    expired -> claim_expired_canonical (one row, no call)."""
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    # Simulate a worker that died after its start row: append the row only.
    with w1.journal.locked() as j:
        j.append_start(
            artifact_key="a" * 64,
            surface="daily.v1",
            mode=Mode.SHADOW,
            attempt_id="d" * 32,
            started_at=clock.now,
            deadline_at_utc=format_ts(clock.now + dt.timedelta(seconds=4)),
        )
    w2 = make_worker(root, provider, clock, env)  # restart: index rebuilt from disk
    clock.advance(1)
    w2.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).status is ResponseStatus.IN_FLIGHT
    assert outcomes(root) == [None]
    clock.advance(4)
    w2.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    r = response(root, rid(2))
    assert (r.status, r.outcome) == (
        ResponseStatus.CANONICAL,
        ResponseOutcome.CLAIM_EXPIRED_CANONICAL,
    )
    assert outcomes(root) == ["claim_expired_canonical"]
    assert provider.calls == []


def test_startup_sweep_expires_dead_attempts(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w1 = make_worker(root, provider, clock, env)
    w1.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")  # accepted, awaiting report
    clock.advance(5)
    w2 = make_worker(root, provider, clock, env)  # restart: AWAITING_REPORT is not on disk
    w2._sweep()
    assert outcomes(root) == ["claim_expired_canonical"]


def test_expired_request_is_dropped_without_row_or_call(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    name = f"{submit(root, clock, rid=rid(1))}.json"
    clock.advance(4)
    w.handle_claimed(name)
    assert not (root.responses / name).exists()
    assert outcomes(root) == [] and provider.calls == []
    assert not (root.claimed / name).exists()


def test_late_result_is_discarded_as_timeout(root, provider, env) -> None:  # type: ignore[no-untyped-def]
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
def test_failures_are_terminal_canonical_with_one_call(root, provider, env, reply, outcome) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    provider.reply = reply
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert r.status is ResponseStatus.CANONICAL and r.outcome.value == outcome
    assert r.composition is None
    assert outcomes(root) == [outcome]
    assert len(provider.calls) == 1


def test_no_key_is_credential_unavailable_zero_http(root, provider) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = Worker(root, environ={}, client_factory=lambda: None, clock=clock)
    w.prepare()
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is ResponseOutcome.CREDENTIAL_UNAVAILABLE
    assert outcomes(root) == ["credential_unavailable"] and provider.calls == []


def test_unverified_journal_means_zero_calls(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.journal_ok = False
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert r.outcome is ResponseOutcome.JOURNAL_UNAVAILABLE and provider.calls == []
    assert outcomes(root) == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda b: b.replace(b'"mode":"shadow"', b'"mode":"disabled"'),
        lambda b: b.replace(b'"spool_version"', b'"extra":1,"spool_version"'),
        lambda b: b.replace(
            b'"deadline_at_utc":"2026-11-30T09:00:04', b'"deadline_at_utc":"2026-11-30T09:00:09'
        ),
        lambda b: b.replace(b"P_DAILY_COMPLETE", b"P_WEEKLY_IN_GOAL"),
        lambda b: b[:-1],
        lambda b: b"\xef\xbb\xbf" + b,
    ],
    ids=["mode", "extra_key", "deadline_extended", "foreign_id", "truncated", "bom"],
)
def test_invalid_request_gets_canonical_and_no_call(root, provider, env, mutate) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    name = f"{submit(root, clock, rid=rid(1))}.json"
    path = root.claimed / name
    data = mutate(path.read_bytes())
    path.unlink()
    publish(root.tmp, path, data)
    w.handle_claimed(name)
    assert response(root, rid(1)).outcome is ResponseOutcome.INVALID_REQUEST
    assert provider.calls == [] and outcomes(root) == []


def test_request_id_must_match_file_name(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    submit(root, clock, rid=rid(1))
    (root.claimed / f"{rid(1)}.json").rename(root.claimed / f"{rid(2)}.json")
    w.handle_claimed(f"{rid(2)}.json")
    assert response(root, rid(2)).outcome is ResponseOutcome.INVALID_REQUEST
    assert provider.calls == []


def test_symlinked_request_is_refused(root, provider, env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    submit(root, clock, rid=rid(1))
    real = tmp_path / "real.json"
    (root.claimed / f"{rid(1)}.json").rename(real)
    (root.claimed / f"{rid(1)}.json").symlink_to(real)
    w.handle_claimed(f"{rid(1)}.json")
    assert response(root, rid(1)).outcome is ResponseOutcome.INVALID_REQUEST
    assert provider.calls == []


def test_concurrent_requests_for_one_artifact_make_one_call(root, provider, env) -> None:  # type: ignore[no-untyped-def]
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


def test_hazardous_environment_refuses_to_start(root) -> None:  # type: ignore[no-untyped-def]
    for env in (
        {"OPENAI_BASE_URL": "https://evil"},
        {"SSLKEYLOGFILE": "/tmp/k"},
        {"OPENAI_CUSTOM_HEADERS": "x"},
    ):
        w = Worker(root, environ={"OPENAI_API_KEY": "sk", **env}, client_factory=lambda: None)
        assert w.run(threading.Event()) is ExitCode.HAZARDOUS_ENVIRONMENT


def test_second_worker_on_one_data_root_refuses(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    stop = threading.Event()
    first = Worker(root, environ=env, client_factory=lambda: None, rescan_interval_s=0.05)
    t = threading.Thread(target=first.run, args=(stop,))
    t.start()
    try:
        for _ in range(200):
            if (
                root.status_file.exists()
                and json.loads(root.status_file.read_bytes())["state"] == "ready"
            ):
                break
            stop.wait(0.05)
        second = Worker(root, environ=env, client_factory=lambda: None)
        assert second.run(threading.Event()) is ExitCode.ANOTHER_WORKER
    finally:
        stop.set()
        t.join(10)


def test_status_file_holds_no_content(root, provider, env) -> None:  # type: ignore[no-untyped-def]
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    w._write_status()
    status = json.loads(root.status_file.read_bytes())
    text = json.dumps(status)
    assert "a" * 64 not in text and rid(1) not in text and "P_DAILY" not in text
    assert status["counters"]["calls"] == 1 and status["credential"] == "present"


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    for t in set(threading.enumerate()) - before:
        t.join(5)

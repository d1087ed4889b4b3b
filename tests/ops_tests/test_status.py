"""`kexpr status`: verdicts from the status files alone; nothing unvalidated echoed."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest
from kit.bodies import STYLED_SURFACE
from ops_support import kexpr
from worker_tests.worker_kit import Clock, completion, composition_for

from kexpr.ops.status_cli import EXIT, HealthVerdict, collect, render
from kexpr.ops.supervisor import supervisor_status_path
from kexpr.spool.layout import DataRoot

NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def _ts(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj))
    os.chmod(path, 0o600)


def _worker(state: str = "ready", age: float = 0.5, pid: int = 4242) -> dict[str, object]:
    return {
        "schema": "kexpr-worker-status-v1",
        "pid": pid,
        "state": state,
        "started_at_utc": _ts(100),
        "heartbeat_at_utc": _ts(age),
        "journal": "verified",
        "credential": "present",
        "counters": {"claimed": 3, "calls": 3, "by_outcome": {"shadow_selected": 2, "timeout": 1}},
    }


@pytest.fixture
def root(data_root: Path) -> DataRoot:
    dr = DataRoot(data_root)
    dr.ensure()
    return dr


@pytest.mark.parametrize(
    ("worker", "alive", "verdict"),
    [
        (_worker(), True, HealthVerdict.HEALTHY),
        (_worker(age=30), True, HealthVerdict.STALE_HEARTBEAT),
        (_worker(), False, HealthVerdict.WORKER_NOT_RUNNING),
        (_worker(state="starting"), True, HealthVerdict.STARTING),
        (_worker(state="stopping"), True, HealthVerdict.STOPPING),
        (_worker(state="stopped"), False, HealthVerdict.STOPPED),
        (None, True, HealthVerdict.NO_STATUS),
    ],
)
def test_verdicts(
    root: DataRoot, worker: dict[str, object] | None, alive: bool, verdict: HealthVerdict
) -> None:
    if worker is not None:
        _write(root.status_file, worker)
    report = collect(root, now=NOW, alive=lambda pid: alive)
    assert report.verdict is verdict
    assert EXIT[verdict] == (0 if verdict is HealthVerdict.HEALTHY else 1)


def test_a_supervisor_that_gave_up_explains_the_rest(root: DataRoot) -> None:
    _write(root.status_file, _worker(state="stopped"))
    _write(
        supervisor_status_path(root),
        {
            "pid": 1,
            "state": "crash_loop",
            "heartbeat_at_utc": _ts(5),
            "restarts": 5,
            "last_exit": -9,
        },
    )
    report = collect(root, now=NOW, alive=lambda pid: False)
    assert report.verdict is HealthVerdict.CRASH_LOOP
    assert "restarts 5" in render(report) and "last worker exit -9" in render(report)


def test_a_quarantined_worker_is_not_healthy(root: DataRoot) -> None:
    _write(
        root.status_file,
        {**_worker(), "journal": "unverified", "quarantine": "torn_tail", "unsafe": {"symlink": 2}},
    )
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.verdict is HealthVerdict.QUARANTINED and EXIT[report.verdict] == 1
    assert "quarantine  torn_tail  unsafe paths: symlink 2" in render(report)


def test_an_observed_clock_step_is_shown(root: DataRoot) -> None:
    _write(root.status_file, {**_worker(), "clock_step_observed": True})
    report = collect(root, now=NOW, alive=lambda p: True)
    assert "clock       wall-clock step observed: retention off until restart" in render(report)
    _write(root.status_file, _worker())
    assert "clock" not in render(collect(root, now=NOW, alive=lambda p: True))


def test_a_held_retention_is_shown_with_its_reason(root: DataRoot) -> None:
    """spool.journal rule 7a: the reason is an enum; a status file without the
    field (an older worker) reads cleanly and says nothing about retention."""
    _write(root.status_file, {**_worker(), "retention_held": "clock_ahead_of_record"})
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.verdict is HealthVerdict.HEALTHY
    assert "retention   held: clock_ahead_of_record (no segment is removed)" in render(report)
    _write(root.status_file, {**_worker(), "retention_held": "김민지 010-1234"})
    assert "김민지" not in render(collect(root, now=NOW, alive=lambda p: True))
    legacy = _worker()
    legacy.pop("retention_held", None)
    _write(root.status_file, legacy)
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.verdict is HealthVerdict.HEALTHY and "retention" not in render(report)


def test_stale_after_is_the_operators_choice(root: DataRoot) -> None:
    _write(root.status_file, _worker(age=8))
    assert collect(root, now=NOW, alive=lambda p: True).verdict is HealthVerdict.HEALTHY
    assert (
        collect(root, now=NOW, alive=lambda p: True, stale_after_s=5).verdict
        is HealthVerdict.STALE_HEARTBEAT
    )


def test_planted_strings_are_never_echoed(root: DataRoot) -> None:
    planted = _worker()
    planted["state"] = "김민지 72.4kg"
    planted["journal"] = "sk-planted-secret"
    planted["counters"] = {
        "claimed": "72.4kg",
        "김민지": 3,
        "by_outcome": {"김민지": 1, "timeout": "x"},
    }
    _write(root.status_file, planted)
    report = collect(root, now=NOW, alive=lambda p: True)
    text = render(report) + json.dumps(report.to_json(), ensure_ascii=False)
    for needle in ("김민지", "72.4kg", "sk-planted-secret"):
        assert needle not in text
    assert report.worker is not None and report.worker.state == "unknown"


def test_unusable_status_files_exit_2(root: DataRoot, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    _write(target, _worker())
    os.symlink(target, root.status_file)
    out = kexpr("status", "--data-root", root.root)
    assert out.returncode == 2 and "status_unreadable (worker_symlink)" in out.stdout
    os.unlink(root.status_file)
    root.status_file.write_text("{not json")
    out = kexpr("status", "--data-root", root.root, "--json")
    assert out.returncode == 2 and json.loads(out.stdout)["problem"] == "worker_io_error"
    assert kexpr("status", "--data-root", tmp_path / "missing").returncode == 2


# ------------------------------------------ the margin, and truthful under load
#
# A real in-process worker (kexpr.worker.daemon.Worker) with a controllable clock and
# the provider seam fed by an httpx.MockTransport, as in worker_tests/worker_kit.py:
# its status file is what `kexpr status` reads.


def _completion(capsule: dict[str, Any], tokens: int | None) -> dict[str, Any]:
    body: dict[str, Any] = completion(composition_for(capsule, "[[P:01]]. 다만 [[A:01]]."))
    if tokens is not None:
        body["usage"] = {"prompt_tokens": 300, "completion_tokens": tokens, "total_tokens": 0}
    return body


# One step per call: how long the call takes on the worker's clock, then the reply
# (usage.completion_tokens) or a read timeout.
Step = tuple[float, int | None | type[Exception]]


def _running_worker(
    root: DataRoot, clock: Clock, steps: list[Step], monkeypatch: pytest.MonkeyPatch
) -> Any:
    import httpx

    from kexpr.worker.daemon import Worker
    from kexpr.worker.provider import build_client

    def handler(request: httpx.Request) -> httpx.Response:
        capsule = json.loads(json.loads(request.content)["messages"][-1]["content"])
        seconds, reply = steps.pop(0)
        clock.advance(seconds)
        if isinstance(reply, type):
            raise reply("read timed out", request=request)  # type: ignore[call-arg]
        return httpx.Response(200, json=_completion(capsule, reply))

    from gateway_shim.identity import load_or_create_key

    # The gateway that writes these requests holds the data root's identity.
    load_or_create_key(root)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    client = build_client(http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    w = Worker(
        root,
        environ={"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin"},
        client_factory=lambda: client,
        clock=clock,
        monotonic=clock.monotonic,
    )
    w.prepare()
    assert w.journal_ok
    w.status.state = "ready"  # as the run loop sets it
    return w


def _present(w: Any, root: DataRoot, clock: Clock, n: int, *, age_s: float = 0.0) -> None:
    """Request ``n`` (the styled weekly) written ``age_s`` seconds ago with the
    shim's 4 s deadline, through the worker's real claim and handling
    (worker.scan, worker.attempt)."""
    from kit.spool import STYLED_SLOT

    from kexpr.spool.contract import Capsule
    from kexpr.spool.fsio import publish
    from kexpr.spool.journal import SpoolMode, format_ts
    from kexpr.spool.messages import SPOOL_VERSION, SpoolRequest
    from kexpr.worker.scan import claim_request

    rid = f"{n:032x}"
    submitted = clock.now - dt.timedelta(seconds=age_s)
    req = SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=rid,
        submitted_at_utc=format_ts(submitted),
        deadline_at_utc=format_ts(submitted + dt.timedelta(seconds=4)),
        mode=SpoolMode.SHADOW,
        capsule=Capsule(
            schema_version="korean-expression-v4",
            surface=STYLED_SURFACE,
            artifact_key=rid,
            slots=(STYLED_SLOT,),
        ),
    )
    publish(root.tmp, root.requests / f"{rid}.json", req.to_bytes())
    assert claim_request(w.parts, f"{rid}.json")
    w.handle_claimed(f"{rid}.json")


def test_status_shows_each_surfaces_call_time_and_tokens(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the worker's status had no call figures."""
    import httpx

    clock = Clock()
    steps: list[Step] = [(2.6, 150), (0.1, 300), (3.2, httpx.ReadTimeout)]
    w = _running_worker(root, clock, steps, monkeypatch)
    for n in (1, 2, 3):
        _present(w, root, clock, n)
    assert steps == []
    w.status.write()
    # The worker kit's requests: the styled weekly report (the one surface called).
    written = json.loads(root.status_file.read_bytes())["calls_by_surface"][STYLED_SURFACE]
    # 0.1 s, 2.6 s and 3.2 s: buckets (0, 0.25], (2.5, 2.75], (3.0, 3.5].
    assert [i for i, c in enumerate(written["call_seconds"]) for _ in range(c)] == [0, 10, 12]
    # 150 and 300 tokens: (128, 160] and (297, 320]; the timeout reported none.
    assert [i for i, c in enumerate(written["completion_tokens"]) for _ in range(c)] == [4, 10]
    assert written["tokens_absent"] == 1 and written["failures"] == {"timeout": 1}

    report = collect(root, now=clock.now, alive=lambda p: True)
    assert report.verdict is HealthVerdict.HEALTHY
    assert report.worker is not None
    figures = report.worker.fields["calls_by_surface"]
    assert set(figures) == {"daily.v1", "weekly.v1", *ADAPTIVE}
    called = figures[STYLED_SURFACE]
    assert (called["calls"], called["margin"], called["p95_call_s"]) == (3, "over_budget", 3.5)
    assert called["p95_completion_tokens"] == 320
    assert figures["daily.v1"]["calls"] == 0 and figures["daily.v1"]["margin"] == "no_calls"
    text = render(report)
    assert STYLED_SURFACE in text and "over_budget" in text and "<=3.5" in text
    assert "call_seconds" in text and "<=0.25 1  <=2.75 1  <=3.5 1" in text
    assert "completion_tokens" in text and "<=160 1  <=320 1  absent 1" in text
    out = report.to_json()["worker"]["calls_by_surface"][STYLED_SURFACE]
    assert out["call_seconds"] == written["call_seconds"]


ADAPTIVE = ("adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1")


def test_a_burst_reached_too_late_to_answer_is_not_healthy(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests the worker reaches with less time left than their minimal answer
    needs are refused before the start row (no_time_to_answer): the host
    gets canonical for them just as for expired ones, so they count the same."""
    clock = Clock()
    w = _running_worker(root, clock, [(0.1, 120)], monkeypatch)
    _present(w, root, clock, 1)  # one on time
    for n in range(2, 12):  # ten reached 3.5 s after the shim wrote them: 0.5 s left
        clock.advance(0.5)
        _present(w, root, clock, n, age_s=3.5)
    w.status.write()
    report = collect(root, now=clock.now, alive=lambda p: True)
    assert report.worker is not None
    assert report.worker.fields["last_minute"]["no_time_to_answer"] == 10
    assert report.verdict is HealthVerdict.EXPIRING and EXIT[report.verdict] == 1
    assert "too late 10 per minute" in render(report)


def test_a_burst_where_most_requests_expire_is_not_healthy(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (truthful status under load): requests that expire
    before the worker reaches them are dropped without a row, and `kexpr status`
    said ``healthy`` however many did."""
    clock = Clock()
    w = _running_worker(root, clock, [(0.1, 120)], monkeypatch)
    _present(w, root, clock, 1)  # one on time
    for n in range(2, 12):  # ten the host wrote 5 s before the worker got to them
        clock.advance(0.5)
        _present(w, root, clock, n, age_s=5.0)
        assert not (root.responses / f"{n:032x}.json").exists()  # expired: no answer
    w.status.write()
    report = collect(root, now=clock.now, alive=lambda p: True)
    assert report.verdict is not HealthVerdict.HEALTHY
    assert report.verdict is HealthVerdict.EXPIRING and EXIT[report.verdict] == 1
    assert report.worker is not None
    assert report.worker.fields["last_minute"] == {
        "claimed": 11,
        "calls": 1,
        "expired_requests": 10,
        "no_time_to_answer": 0,
    }
    assert "last 60 s   claimed 11  calls 1  expired 10  too late 0 per minute" in render(report)
    # The burst is over a minute later: the rate falls back and so does the verdict.
    clock.advance(61)
    w.status.write()
    report = collect(root, now=clock.now, alive=lambda p: True)
    assert report.verdict is HealthVerdict.HEALTHY
    assert (
        report.worker is not None and report.worker.fields["last_minute"]["expired_requests"] == 0
    )
    assert report.worker.fields["counters"]["expired_requests"] == 10  # the total stays


@pytest.mark.parametrize(
    ("claimed", "expired", "verdict"),
    [
        (11, 10, HealthVerdict.EXPIRING),
        (9, 5, HealthVerdict.EXPIRING),  # the floor, and more than half
        (10, 5, HealthVerdict.HEALTHY),  # half is not most
        (4, 4, HealthVerdict.HEALTHY),  # below the floor: a restart's leftovers
        (200, 60, HealthVerdict.HEALTHY),
    ],
)
def test_expiring_is_most_of_the_last_minutes_requests(
    root: DataRoot, claimed: int, expired: int, verdict: HealthVerdict
) -> None:
    from kexpr.ops.status_cli import EXPIRING_MIN

    assert EXPIRING_MIN == 5
    _write(
        root.status_file,
        {**_worker(), "last_minute": {"claimed": claimed, "calls": 0, "expired_requests": expired}},
    )
    assert collect(root, now=NOW, alive=lambda p: True).verdict is verdict


def _figures(**daily: object) -> dict[str, object]:
    from kexpr.worker.histograms import SurfaceCalls, edges_json, new_surfaces

    surfaces = {s: v.to_json() for s, v in new_surfaces().items()}
    calls = SurfaceCalls()
    calls.record(0.4, None, 120)
    surfaces["daily.v1"] = {**calls.to_json(), **daily}
    return {"calls_by_surface": surfaces, "histogram_edges": edges_json()}


def test_planted_strings_in_the_call_figures_are_never_echoed(root: DataRoot) -> None:
    planted = {**_worker(), **_figures(failures={"김민지": 1, "timeout": 0})}
    planted["calls_by_surface"]["sk-planted-secret"] = planted["calls_by_surface"]["daily.v1"]  # type: ignore[index]
    planted["last_minute"] = {"claimed": "72.4kg", "김민지": 3, "expired_requests": 1}
    _write(root.status_file, planted)
    report = collect(root, now=NOW, alive=lambda p: True)
    text = render(report) + json.dumps(report.to_json(), ensure_ascii=False)
    for needle in ("김민지", "72.4kg", "sk-planted-secret"):
        assert needle not in text
    assert report.worker is not None
    assert report.worker.fields["last_minute"] == {"expired_requests": 1}
    assert report.worker.fields["calls_by_surface"]["daily.v1"]["failures"] == {"timeout": 0}


@pytest.mark.parametrize(
    "bad",
    [
        {"calls": 2},  # the counts do not add up to the calls
        {"call_seconds": [1]},  # not this version's bucket count
        {"completion_tokens": [0] * 13 + ["x"]},
        {"tokens_absent": -1},
        {"calls": True},
        {"failures": {"timeout": 2}},  # more failures than calls
    ],
)
def test_a_malformed_surface_record_is_dropped_not_guessed(
    root: DataRoot, bad: dict[str, object]
) -> None:
    _write(root.status_file, {**_worker(), **_figures(**bad)})
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.worker is not None
    figures = report.worker.fields["calls_by_surface"]
    assert "daily.v1" not in figures and "weekly.v1" in figures


def test_other_bucket_edges_show_no_histograms(root: DataRoot) -> None:
    doc = {**_worker(), **_figures()}
    doc["histogram_edges"] = {"call_seconds": [1.0, 2.0], "completion_tokens": [100.0]}
    _write(root.status_file, doc)
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.worker is not None and report.worker.fields["calls_by_surface"] == {}
    _write(root.status_file, {**_worker(), **_figures()})
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.worker is not None
    assert report.worker.fields["calls_by_surface"]["daily.v1"]["margin"] == "within_budget"


def test_the_cli_docs_name_every_verdict_in_order() -> None:
    # docs/cli.md lists the verdicts worst first, as _verdict decides them.
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text("utf-8")
    listed = text.split("Verdicts, worst first: ", 1)[1].split(". ", 1)[0]
    names = [w.strip("`, ") for w in listed.split()]
    assert set(names) == {v.value for v in HealthVerdict} - {"status_unreadable"}
    assert names.index("refusing") < names.index("expiring") < names.index("healthy")


# ------------------------------------------------------ the provider cool-down


def test_status_shows_the_cool_down_and_its_refusals(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the status had no cool-down and no refusals for it."""
    import httpx

    from kexpr.worker.cooldown import FAILURES_IN_A_ROW

    clock = Clock()
    # Six calls at ~110 tokens/s after 0.3 s, then the provider times out.
    steps: list[Step] = [(0.3 + 104 / 110, 104)] * 6
    steps += [(3.0, httpx.ReadTimeout)] * FAILURES_IN_A_ROW
    w = _running_worker(root, clock, steps, monkeypatch)
    for n in range(1, 6 + FAILURES_IN_A_ROW + 3):
        _present(w, root, clock, n)
        clock.advance(0.5)
    assert steps == []
    w.status.write()
    report = collect(root, now=clock.now, alive=lambda p: True)
    assert report.worker is not None
    admission = report.worker.fields["admission"]
    assert set(admission) == {"cooldown", "refused_by_surface"}
    assert admission["cooldown"]["state"] == "open"
    assert admission["refused_by_surface"][STYLED_SURFACE] == {"provider_cooling_down": 2}
    text = render(report)
    assert "speed" not in text
    assert "provider    cooling down" in text and f"failures in a row 0/{FAILURES_IN_A_ROW}" in text
    assert "refused     surface" in text and STYLED_SURFACE in text
    out = report.to_json()["worker"]["admission"]
    assert out["cooldown"]["cool_downs"] == 1


def test_a_planted_admission_record_is_dropped_not_echoed(root: DataRoot) -> None:
    from kexpr.ops.status_cli import admission_figures

    planted = {
        "admission": {
            "cooldown": {"state": "open", "failures_in_a_row": "x"},
            "refused_by_surface": {
                "sk-planted": {"provider_cooling_down": 1},
                "daily.v1": {"provider_cooling_down": -1},
                "weekly.v1": {"provider_cooling_down": 2},
            },
        }
    }
    assert admission_figures(planted) == {
        "refused_by_surface": {"weekly.v1": {"provider_cooling_down": 2}}
    }
    assert admission_figures({"admission": "x"}) == {}


# ------------------------------------------------------------ the spend bound


def _spend(**over: object) -> dict[str, object]:
    record: dict[str, object] = {
        "per_hour": 120,
        "per_day": 600,
        "last_hour": 4,
        "today": 9,
        "refused": 0,
        "warn_share": 0.8,
        "history_hours": 12,
        "hourly_median": 2.0,
    }
    return {**record, **over}


@pytest.mark.parametrize(
    ("spend", "verdict"),
    [
        (_spend(), HealthVerdict.HEALTHY),
        (_spend(last_hour=120, today=120, refused=3), HealthVerdict.SPEND_CAPPED),
        (_spend(last_hour=10, today=600), HealthVerdict.SPEND_CAPPED),
        # Far above the history: ten times the median, at least 30.
        (_spend(last_hour=29, hourly_median=0.0, history_hours=0), HealthVerdict.HEALTHY),
        (_spend(last_hour=30, hourly_median=0.0, history_hours=0), HealthVerdict.UNUSUAL_RATE),
        (_spend(last_hour=49, hourly_median=5.0), HealthVerdict.HEALTHY),
        (_spend(last_hour=50, hourly_median=5.0), HealthVerdict.UNUSUAL_RATE),
    ],
)
def test_a_spend_cap_reached_or_a_rate_far_above_the_history_is_not_healthy(
    root: DataRoot, spend: dict[str, object], verdict: HealthVerdict
) -> None:
    """Regression: a host presenting new artifacts in a loop was ``healthy``."""
    _write(root.status_file, {**_worker(), "spend": spend})
    report = collect(root, now=NOW, alive=lambda pid: True)
    assert report.verdict is verdict
    assert EXIT[verdict] == (0 if verdict is HealthVerdict.HEALTHY else 1)
    assert report.worker is not None
    shown = report.worker.fields["spend"]
    assert (shown["per_hour"], shown["last_hour"]) == (spend["per_hour"], spend["last_hour"])
    text = render(report)
    assert (
        f"spend       last hour {spend['last_hour']}/120  today (UTC) {spend['today']}/600" in text
    )
    assert ("(cap reached: no calls)" in text) == (verdict is HealthVerdict.SPEND_CAPPED)
    # A cap reached at the rate of a loop is both; the verdict names the cap.
    assert ("(far above: unusual_rate)" in text) == shown["unusual"]
    if verdict is HealthVerdict.UNUSUAL_RATE:
        assert shown["unusual"] and not shown["capped"]
    assert report.to_json()["worker"]["spend"]["capped"] == (verdict is HealthVerdict.SPEND_CAPPED)


@pytest.mark.parametrize(
    "spend",
    [
        "sk-planted",
        _spend(per_hour=0),
        _spend(per_day="600"),
        _spend(last_hour=-1),
        _spend(hourly_median="sk-planted"),
        _spend(hourly_median=float("nan")),
        {k: v for k, v in _spend().items() if k != "today"},
    ],
)
def test_a_planted_spend_record_is_dropped_not_echoed(root: DataRoot, spend: object) -> None:
    from kexpr.ops.status_cli import spend_figures

    assert spend_figures({"spend": spend}) == {}
    _write(root.status_file, {**_worker(), "spend": spend})
    report = collect(root, now=NOW, alive=lambda pid: True)
    assert report.verdict is HealthVerdict.HEALTHY
    assert "spend " not in render(report) and "sk-planted" not in render(report)


# ------------------------------------------- refusals for speed are a finding

DUAL = "adaptive.dualcoachtest.card.v1"


PREVIOUS_RELEASE_STATUS = Path(__file__).parent / "fixtures" / "worker.status.previous-release.json"
# What the previous release's worker wrote for the learned speed admission it had
# (docs/upgrade.md): a file of it is read cleanly, and none of it is said.
RETIRED = ("speed", "too_slow", "too slow", "last_ten_minutes", "refused_bounds", "tokens/s")


def test_a_status_file_of_the_previous_release_is_read_and_its_speed_figures_ignored(
    root: DataRoot,
) -> None:
    """The fixture is what the previous release's `StatusFile.write` wrote with a
    learned speed, speed refusals (``provider_too_slow`` counters, per surface, the
    last one's verdict, the last ten minutes) and one cool-down refusal."""
    doc = json.loads(PREVIOUS_RELEASE_STATUS.read_text("utf-8"))
    assert doc["counters"]["provider_too_slow"] == 3
    assert {"speed", "too_slow_last", "last_ten_minutes"} <= set(doc["admission"])
    doc.update({"started_at_utc": _ts(100), "heartbeat_at_utc": _ts(0.5)})
    _write(root.status_file, doc)
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.verdict is HealthVerdict.HEALTHY and EXIT[report.verdict] == 0
    assert report.worker is not None
    fields = report.worker.fields
    assert set(fields["admission"]) == {"cooldown", "refused_by_surface"}
    assert fields["admission"]["refused_by_surface"]["weekly.v1"] == {"provider_cooling_down": 1}
    assert "provider_too_slow" not in fields["counters"]
    assert fields["counters"]["provider_cooling_down"] == 1
    text, js = render(report), json.dumps(report.to_json())
    for word in RETIRED:
        assert word not in text and word not in js, word
    assert "provider    closed" in text and "weekly.v1" in text


def test_kexpr_status_reads_a_previous_release_status_file(root: DataRoot) -> None:
    """The command itself, end to end, on the previous release's file."""
    doc = json.loads(PREVIOUS_RELEASE_STATUS.read_text("utf-8"))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    doc.update({"pid": os.getpid(), "started_at_utc": stamp, "heartbeat_at_utc": stamp})
    _write(root.status_file, doc)
    proc = kexpr("status", "--data-root", root.root)
    assert proc.returncode == 0, proc.stderr
    assert "verdict     healthy" in proc.stdout and proc.stderr == ""
    for word in RETIRED:
        assert word not in proc.stdout, word


def test_status_says_per_surface_what_is_left_to_style(root: DataRoot) -> None:
    """From the fit table alone: the goal-missing weekly interpretation (IDs, no
    text); "nothing to style" for every other surface (design §6.2)."""
    report = collect(root, alive=lambda p: True)
    weekly = [
        {
            "slot_id": "weekly.interpretation",
            "ids": ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
            "compositions": 2,
        }
    ]
    assert report.to_json()["left_to_style"] == {
        "daily.v1": [],
        "weekly.v1": weekly,
        "adaptive.dualcoachtest.card.v1": [],
        "adaptive.physique.card.v1": [],
    }
    left = [ln for ln in render(report).splitlines() if ln.startswith(("left ", "      "))]
    assert [ln.split() for ln in left] == [
        ["left", "daily.v1", "nothing", "to", "style"],
        [
            "weekly.v1",
            "weekly.interpretation",
            "(P_WEEKLY_TREND_OBSERVED",
            "A_WEEKLY_HOLD_FOR_MISSING_GOAL):",
            "2",
            "compositions",
        ],
        ["adaptive.dualcoachtest.card.v1", "nothing", "to", "style"],
        ["adaptive.physique.card.v1", "nothing", "to", "style"],
    ]

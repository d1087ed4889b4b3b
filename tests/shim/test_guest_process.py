"""A good guest in the host's process (coordinator rules 4, 11, 12).

Structural facts only, never latencies (those are bench/guest.py's): which
executor an asyncio presentation uses, how many threads and inotify instances
exist before and after, whether a wake-up came from the watcher, what a forked
child may touch, what happens without a watcher.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import json
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kit.bodies import STYLED_BODY, STYLED_SELECTED, apresent_styled, present_styled
from reference_host.scripted_worker import heartbeat

from gateway_shim import CandidateStatus, KoreanExpressionCoordinator, Mode, Outcome
from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import parse_request
from shim.test_coordinator import (
    Answer,
    ScriptedWorker,
    accepted,
    coordinator,
    status,
)


@functools.cache
def observer_threads() -> int:
    """The threads one watch of ``responses/`` runs, counted on the installed
    watchdog (not assumed): its observer's, its emitter's, its inotify reader's
    and, from watchdog 7.1, the reader's dispatcher (the gateway side accepts
    watchdog>=4.0, so the number is the release's, not kexpr's). Counted once an
    event has come through: every thread that carries one is running by then
    (the dispatcher is started by the reader's own thread, not by ``start``)."""
    import tempfile

    from watchdog.events import FileSystemEvent, FileSystemEventHandler

    from gateway_shim._responses import stop_watching, watch_responses

    class Arrived(FileSystemEventHandler):
        def __init__(self) -> None:
            self.seen = threading.Event()

        def on_any_event(self, event: FileSystemEvent) -> None:
            self.seen.set()

    before = set(threading.enumerate())
    with tempfile.TemporaryDirectory() as d:
        handler = Arrived()
        observer = watch_responses(handler, Path(d))
        try:
            Path(d, "probe.json").touch()
            assert handler.seen.wait(30), "the watch delivered no event"
            started = len(set(threading.enumerate()) - before)
        finally:
            stop_watching(observer)
    return started


def inotify_instances() -> int:
    """This process's inotify instances (each one fd -> anon_inode:inotify)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                n += 1
        except OSError:
            pass
    return n


def threads() -> set[threading.Thread]:
    return set(threading.enumerate())


@pytest.fixture(autouse=True)
def long_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 30 s wait: every answer here arrives long before it on any machine, and a
    wait that must still be running (closed, cancelled, many waits) still is.
    Nothing here measures time."""
    import datetime as dt

    from gateway_shim import _setup as module

    monkeypatch.setattr(module, "MAX_WAIT", dt.timedelta(seconds=30))


def request_files(root: DataRoot) -> list[Path]:
    return sorted(root.requests.glob("*.json")) if root.requests.exists() else []


# ------------------------------------------------------------- closed is closed


def test_fifty_create_present_close_cycles_leave_no_thread_and_no_inotify(
    root: DataRoot,
) -> None:
    events: list[object] = []
    with ScriptedWorker(root, status("canonical", "provider_error")):
        before_threads, before_inotify = threads(), inotify_instances()
        for _ in range(50):
            coord = KoreanExpressionCoordinator(
                coordinator(root.root).config, root.root, telemetry=events.append
            )
            cand = present_styled(coord, "evt")
            assert cand.outcome is Outcome.PROVIDER_ERROR
            asyncio.run(apresent_styled(coord, "evt2"))
            coord.close()
            coord.close()  # idempotent
        assert threads() == before_threads
        assert inotify_instances() == before_inotify
    assert len(events) == 100  # every telemetry event was delivered before its close


def test_a_presentation_after_close_is_closed_and_starts_nothing(root: DataRoot) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()):
        assert present_styled(coord, "a").outcome is Outcome.ACCEPTED
        coord.close()
        before_threads, before_inotify = threads(), inotify_instances()
        before_files = request_files(root)
        for cand in (
            present_styled(coord, "b"),
            asyncio.run(apresent_styled(coord, "c")),
        ):
            assert cand.outcome is Outcome.CLOSED
            assert (cand.status, cand.body, cand.publication_permitted) == (
                CandidateStatus.CANONICAL,
                STYLED_BODY,
                True,
            )
        assert threads() == before_threads and inotify_instances() == before_inotify
        assert request_files(root) == before_files
    assert coord.closed


def test_a_wait_in_flight_ends_closed_when_the_coordinator_closes(root: DataRoot) -> None:
    heartbeat(root)  # a worker said serving answers nothing: the request waits
    coord = coordinator(root.root)
    out: list[Outcome] = []
    t = threading.Thread(target=lambda: out.append(present_styled(coord, "evt").outcome))
    t.start()
    while not request_files(root):  # published: the wait has begun
        t.join(0.01)
    coord.close()
    t.join(10)
    assert out == [Outcome.CLOSED]


# ------------------------------------------------------------- asyncio, natively


class RecordingExecutor(ThreadPoolExecutor):
    """A default executor that counts every submission (asyncio requires a
    ThreadPoolExecutor)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.mark.parametrize("answer", [accepted(), None], ids=["answered", "worker_down"])
def test_apresent_never_uses_the_default_executor(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch, answer: Answer | None
) -> None:
    import datetime as dt

    from gateway_shim import _setup as module

    if answer is None:  # the down case times out, after a short wait
        monkeypatch.setattr(module, "MAX_WAIT", dt.timedelta(seconds=0.6))
    coord = coordinator(root.root)
    recorder = RecordingExecutor()

    async def main() -> Outcome:
        asyncio.get_running_loop().set_default_executor(recorder)
        cand = await apresent_styled(coord, "evt")
        return cand.outcome

    if answer is None:
        heartbeat(root)  # said serving, answering nothing
        assert asyncio.run(main()) is Outcome.TIMEOUT
    else:
        with ScriptedWorker(root, answer):
            assert asyncio.run(main()) is Outcome.ACCEPTED
    coord.close()
    assert recorder.submitted == 0


class GatedResponder:
    """Answers every request only once ``gate`` is set (then as they come)."""

    def __init__(self, root: DataRoot, answer: Answer) -> None:
        self.root, self.answer = root, answer
        self.gate = threading.Event()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> GatedResponder:
        heartbeat(self.root)
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.gate.set()
        self._t.join(5)

    def _loop(self) -> None:
        self.gate.wait()
        while not self._stop.wait(0.01):
            for p in request_files(self.root):
                raw = p.read_bytes()
                parse_request(raw)
                req = json.loads(raw)
                p.unlink()
                data = json.dumps(self.answer(req), ensure_ascii=False).encode()
                publish(self.root.tmp, self.root.responses / f"{req['request_id']}.json", data)


def test_many_waits_hold_no_thread_of_the_host_loop(root: DataRoot) -> None:
    """More concurrent presentations than the default executor has threads: the
    host's own to_thread and getaddrinfo run WHILE every presentation waits (the
    responder answers only after they completed), and every presentation is then
    answered within its wait. Before the fix each wait held a default-executor
    thread: the host's calls queued behind them and the waits timed out."""
    n = (os.cpu_count() or 1) + 4 + 8  # > the default executor's max_workers
    coord = coordinator(root.root)
    with GatedResponder(root, accepted()) as responder:
        baseline = len(threads())

        async def main() -> tuple[list[Outcome], int]:
            loop = asyncio.get_running_loop()
            tasks = [asyncio.create_task(apresent_styled(coord, f"evt{i}")) for i in range(n)]
            while len(request_files(root)) < n:  # every request published, all waiting
                await asyncio.sleep(0.01)
            peak = len(threads()) - baseline
            assert await asyncio.to_thread(lambda: 41) == 41
            await loop.getaddrinfo("localhost", 80)
            assert not any(t.done() for t in tasks)  # the host's calls came first
            responder.gate.set()
            return [c.outcome for c in await asyncio.gather(*tasks)], peak

        outcomes, peak = asyncio.run(main())
    coord.close()
    assert outcomes == [Outcome.ACCEPTED] * n
    # kexpr's threads while n presentations waited: its own executor, the observer
    # and the one shared re-check scan.
    from gateway_shim._guest import MAX_WORKERS

    assert peak <= MAX_WORKERS + observer_threads() + 1


# -------------------------------------------------------------------------- fork


def _wake_via_watcher(coord: KoreanExpressionCoordinator, root: DataRoot, name: str) -> bool:
    """Does a file arriving in responses/ reach the coordinator through its
    watcher? (The periodic re-check never goes through the event handler: only
    the observer calls it.) The handler's method is wrapped on the instance,
    which is where watchdog's dispatch looks it up."""
    waiters = coord._waiters
    arrived = threading.Event()
    original = type(waiters).on_any_event

    def on_any_event(event: Any) -> None:
        path = event.dest_path or event.src_path
        if os.path.basename(os.fsdecode(path)) == f"{name}.json":
            arrived.set()
        original(waiters, event)

    waiters.on_any_event = on_any_event  # type: ignore[method-assign]
    try:
        publish(root.tmp, root.responses / f"{name}.json", b"{}")
        return arrived.wait(10)
    finally:
        del waiters.on_any_event
        (root.responses / f"{name}.json").unlink()


def test_a_forked_child_never_touches_the_parents_watch(root: DataRoot) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()):
        assert present_styled(coord, "a").body == STYLED_SELECTED
        assert _wake_via_watcher(coord, root, "1" * 32)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: present (its own watcher), then close
            code = 1
            try:
                os.close(r)
                cand = present_styled(coord, "child")
                child_woke = _wake_via_watcher(coord, root, "2" * 32)
                coord.close()
                os.write(w, json.dumps([cand.outcome.value, child_woke]).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            child = json.loads(f.read() or b"null")
        _, exit_status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(exit_status) == 0
        # The parent's watch survived the child's close: arrivals still wake it.
        assert _wake_via_watcher(coord, root, "3" * 32)
        assert child == ["accepted", True]  # the child started and used its own watcher
        cand = present_styled(coord, "b")
        assert cand.outcome is Outcome.ACCEPTED
    coord.close()


# ---------------------------------------------------------------- no watcher


def test_without_a_watcher_the_wait_degrades_to_the_recheck_and_says_so_once(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from watchdog.observers.inotify_c import InotifyFD

    def exhausted(cls: type) -> int:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))  # the per-user limit

    monkeypatch.setattr(InotifyFD, "_create_inotify_fd", classmethod(exhausted))
    caplog.set_level(logging.DEBUG, logger="kexpr")
    before_inotify = inotify_instances()
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()) as w:
        first = present_styled(coord, "a")
        second = asyncio.run(apresent_styled(coord, "b"))
    coord.close()
    assert (first.outcome, first.body) == (Outcome.ACCEPTED, STYLED_SELECTED)
    assert second.outcome is Outcome.ACCEPTED
    assert len(w.requests) == 2  # requests were written, not refused at once
    assert coord.watching is False
    said = [r for r in caplog.records if "watcher_unavailable" in r.getMessage()]
    assert len(said) == 1 and said[0].name == "kexpr.shim"
    assert said[0].getMessage() == "watcher_unavailable fallback_recheck=true"
    assert inotify_instances() == before_inotify


# ------------------------------------------------------ nothing grows with uptime


def test_the_memory_of_awaited_reports_is_bounded() -> None:
    from gateway_shim import _awaiting

    clock = [1000.0]
    awaiting = _awaiting.AwaitingReports(lambda: clock[0])
    for i in range(_awaiting.MAX_AWAITING + 100):
        awaiting.add(f"{i:032x}")
    assert len(awaiting) == _awaiting.MAX_AWAITING
    assert not awaiting.take(f"{0:032x}")  # the oldest went first
    last = f"{_awaiting.MAX_AWAITING + 99:032x}"
    assert awaiting.take(last) and not awaiting.take(last)  # exactly once
    clock[0] += _awaiting.MAX_AGE_S + 1
    awaiting.add("f" * 32)
    assert len(awaiting) == 1  # past the worker's commit grace: pruned


def test_reported_attempts_are_forgotten(root: DataRoot) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()):
        for i in range(5):
            cand = present_styled(coord, f"e{i}")
            coord.report(cand, Outcome.SELECTED)
    coord.close()
    assert len(coord._awaiting) == 0
    assert not hasattr(coord, "_reported")


def test_report_after_close_still_writes_the_report(root: DataRoot) -> None:
    coord = coordinator(root.root, Mode.ENABLED)
    with ScriptedWorker(root, accepted()):
        cand = present_styled(coord, "evt")
    coord.close()
    coord.report(cand, Outcome.PUBLICATION_FAILED)
    reports = list(root.reports.glob("*.json"))
    assert [json.loads(p.read_bytes())["outcome"] for p in reports] == ["publication_failed"]


@pytest.mark.parametrize("surface", ["dual", "physique"])
def test_a_closed_candidate_revalidates_as_the_payload_untouched(
    root: DataRoot, surface: str
) -> None:
    """A host whose coordinator closed under it still persists its card as it
    always did: the ``closed`` candidate is the payload text untouched, as for
    ``disabled`` (for a physique card that is not its canonical projection)."""
    from reference_host.samples import (
        DUAL_SURFACE,
        PHYSIQUE_SURFACE,
        callback_data,
        dual_card,
        physique_card,
        session,
    )

    from gateway_shim import revalidate

    s = session()
    card, kind = (
        (dual_card(s), DUAL_SURFACE) if surface == "dual" else (physique_card(s), PHYSIQUE_SURFACE)
    )
    coord = coordinator(root.root, adaptive_operator=True)
    coord.close()
    cand = coord.present_adaptive(card, callback_data=callback_data(s), surface=kind)
    assert cand.outcome is Outcome.CLOSED and cand.body == card["text"]
    assert revalidate(cand, card, callback_data=callback_data(s), surface=kind) == card
    assert not root.root.exists()


@pytest.mark.parametrize("when", ["setting_up", "waiting"])
def test_a_cancelled_apresent_leaves_no_waiter_behind(root: DataRoot, when: str) -> None:
    """The host may cancel its task at any await: nothing of the presentation
    outlives it in the coordinator (nothing grows with the host's uptime)."""
    heartbeat(root)  # said serving, answering nothing: the wait would run to its deadline
    coord = coordinator(root.root)

    async def main() -> None:
        for i in range(5):
            task = asyncio.create_task(apresent_styled(coord, f"evt{i}"))
            await asyncio.sleep(0)  # the task starts; its set-up runs on our executor
            if when == "waiting":
                while len(request_files(root)) <= i:
                    await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    coord.close()  # waits for a set-up still running on the executor
    assert coord._waiters._wakes == {}


def test_a_waiter_table_that_raises_on_a_wake_is_counted_and_the_others_are_woken(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The shared watch hands each event to every coordinator's waiters
    (`gateway_shim._watch`): one that raises does not keep the event from the
    others and does not end the observer's thread; its fault is counted in its
    own `scan_faults` and said once (``wake_failed``)."""
    import time

    from watchdog.events import FileCreatedEvent

    from gateway_shim._responses import ResponseWaiters
    from gateway_shim._watch import _FanOut

    class Broken(ResponseWaiters):
        def on_any_event(self, event: object) -> None:
            raise RuntimeError("wake failed")

    woken: list[object] = []

    class Healthy(ResponseWaiters):
        def on_any_event(self, event: object) -> None:
            woken.append(event)

    caplog.set_level(logging.WARNING, logger="kexpr.shim")
    broken, healthy = Broken(tmp_path, time.monotonic), Healthy(tmp_path, time.monotonic)
    fan = _FanOut()
    fan.add(broken)
    fan.add(healthy)
    for i in range(3):
        fan.on_any_event(FileCreatedEvent(str(tmp_path / f"{i}.json")))
    assert len(woken) == 3
    assert broken.scan_faults == 3 and healthy.scan_faults == 0
    said = [r.getMessage() for r in caplog.records if r.name == "kexpr.shim"]
    assert said == ["wake_failed"]


def test_a_part_that_fails_to_stop_does_not_keep_the_others_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`close` and the finalizer stop every part (`gateway_shim._guest.release`):
    one whose ``close`` raises is counted and said once (``release_incomplete``),
    and the parts after it are still stopped, never raised into the host."""
    from gateway_shim._guest import release

    stopped: list[tuple[str, bool]] = []

    class Part:
        def __init__(self, name: str, fails: bool = False) -> None:
            self.name, self.fails = name, fails

        def close(self, *, wait: bool = False) -> None:
            if self.fails:
                raise OSError("close failed")
            stopped.append((self.name, wait))

    caplog.set_level(logging.WARNING, logger="kexpr.shim")
    release(
        Part("watch", fails=True), Part("scan"), Part("executor", fails=True), Part("telemetry")
    )
    assert stopped == [("scan", False), ("telemetry", False)]
    said = [r.getMessage() for r in caplog.records if r.name == "kexpr.shim"]
    assert said == ["release_incomplete parts=2"]
    stopped.clear()
    release(Part("watch"), wait=True)  # from close: each part joined
    assert stopped == [("watch", True)]

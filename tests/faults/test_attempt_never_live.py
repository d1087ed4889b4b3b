"""Issue 21 item 1: no exception leaves an attempt live.

Observed: ``RuntimeError("can't start new thread")`` raised after the start row
(the process at its thread or memory limit) left the attempt OPEN and *live* in
memory; every later presentation of the artifact got ``in_flight`` (not
publishable) until the worker restarted, and no fault was counted.

The property: an exception raised at *any* statement the worker executes after
`append_start` returns (the thread start, the judge, the terminal row, the
publication, the counters ...) leaves the artifact publishable for its next
presentation (canonical or already_attempted, never ``in_flight``), spends at
most one wire request, and is counted. The statements are not listed by hand:
a line tracer (`sys.settrace`, this thread only) counts every line executed in
``kexpr/worker/`` after the start row and raises at the k-th, for every k until
a run executes fewer than k lines.
"""

from __future__ import annotations

import linecache
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from worker_tests.worker_kit import (
    Clock,
    Provider,
    make_worker,
    response,
    rid,
    submit,
)

import kexpr.worker
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import Phase
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import Outcome
from kexpr.worker import provider as provider_mod
from kexpr.worker import scan

WORKER_DIR = str(Path(kexpr.worker.__file__).resolve().parent)


class Inject:
    """Raise ``make()`` at the k-th line executed under kexpr/worker/ after the
    start row is written (one fault per run). ``seen``: lines counted."""

    def __init__(self, k: int, make: Callable[[], BaseException]) -> None:
        self.k, self.make = k, make
        self.armed = False
        self.seen = 0
        self.fired: str | None = None

    def trace(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            code = frame.f_code
            if code.co_qualname.startswith("_CallThreads."):
                # The provider's kept-thread hand-off: raised between a thread's
                # start and its first task, it strands that thread waiting for
                # ever (the provider's own concern). Its one realistic failure,
                # the thread start itself, is `test_a_thread_that_cannot_start`.
                return None
            return self.local if code.co_filename.startswith(WORKER_DIR) else None
        return None

    def local(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line" and self.armed and self.fired is None:
            if _is_with(frame):
                # The line event of a ``with`` also fires when its block is
                # left, before ``__exit__`` is called: raised there, by a tracer,
                # an exception skips ``__exit__`` (the lock stays held), which no
                # real exception can do. The lines inside are injected instead.
                return self.local
            self.seen += 1
            if self.seen == self.k:
                self.fired = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
                raise self.make()
        return self.local


def _is_with(frame: types.FrameType) -> bool:
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).lstrip()
    return line.startswith("with ")


class InlinePool:
    """The call pool, run inline in the traced thread (scan.dispatch's net
    included). Like a pool's future, it keeps what the job raised."""

    def __init__(self) -> None:
        self.raised: list[BaseException] = []

    def submit(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - recorded, asserted by the tests
            self.raised.append(e)


FAULTS: dict[str, Callable[[], BaseException]] = {
    "thread_limit": lambda: RuntimeError("can't start new thread"),
    "memory": MemoryError,
}


def _one_run(
    root: DataRoot, env: dict[str, str], inject: Inject, monkeypatch: pytest.MonkeyPatch
) -> tuple[Provider, Any]:
    provider = Provider()
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    real_start = Journal.append_start

    def append_start(self: Journal, **kw: Any) -> Any:
        rec = real_start(self, **kw)
        inject.armed = True
        return rec

    starter = submit(root, clock, rid=rid(1))
    with monkeypatch.context() as m:
        m.setattr(Journal, "append_start", append_start)
        sys.settrace(inject.trace)
        try:
            scan.dispatch(w.parts, InlinePool(), f"{starter}.json")  # type: ignore[arg-type]
        finally:
            sys.settrace(None)
    # The next presentation of the same artifact, in the same process.
    second = submit(root, clock, rid=rid(2))
    w.handle_claimed(f"{second}.json")
    return provider, w


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_exception_at_any_statement_after_the_start_row_never_leaves_it_live(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    fired: list[str] = []
    k = 0
    while True:
        k += 1
        root = DataRoot(tmp_path / f"{fault}-{k}")
        root.ensure()
        inject = Inject(k, FAULTS[fault])
        provider, w = _one_run(root, env, inject, monkeypatch)
        if inject.fired is None:
            break  # the whole path ran in fewer than k lines: every line was tried
        fired.append(inject.fired)
        where = f"{fault} at {inject.fired}"
        assert len(provider.calls) <= 1, where
        r = response(root, rid(2))
        assert r.status in (ResponseStatus.CANONICAL, ResponseStatus.ALREADY_ATTEMPTED), where
        assert w.counters.in_flight == 0, where
        assert not any(h.live and h.phase is Phase.OPEN for h in w.parts.attempts.held.values()), (
            where
        )
        assert sum(w.counters.faults.values()) >= 1, where  # counted, never silent
        (rec,) = Journal(root).load().by_attempt.values()
        answered = rec.outcome is None and any(
            (root.responses / f"{rid(1)}.json").exists() for _ in [0]
        )
        assert rec.outcome is not None or answered, where
        assert list(root.tmp.iterdir()) == [], where  # the reservation is given back
    # The tracer really walked the path: the thread start, the judge, the
    # terminal row's bookkeeping and the publication were all hit.
    assert k > 20
    assert any(f.startswith("attempt.py") for f in fired)
    assert any(f.startswith("outbox.py") for f in fired)  # the publication
    assert any(f.startswith("provider.py") for f in fired)  # the thread start


def test_a_thread_that_cannot_start_does_not_spend_the_artifact(
    root: DataRoot, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The observed case itself: ``RuntimeError("can't start new thread")`` at
    the call's thread start (a process at its RLIMIT_NPROC or TasksMax=).
    Issue 21: the attempt stayed live. Issue 26 item 9: it was then ended, but
    after its start row, so the artifact's one attempt was spent with no
    request. Now the thread is taken before the row: this presentation is
    canonical (``answer_unpublishable``), no row, no call, counted; the next
    presentation of the artifact gets its one attempt."""
    import threading

    provider = Provider()
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if self.name == "kexpr-provider-call":
            raise RuntimeError("can't start new thread")
        real_start(self)

    with monkeypatch.context() as m:
        m.setattr(threading.Thread, "start", start)
        # No kept idle thread to hand the call to: a thread must be started.
        m.setattr(provider_mod._CALL_THREADS, "_idle", [])
        scan.dispatch(w.parts, InlinePool(), f"{submit(root, clock, rid=rid(1))}.json")  # type: ignore[arg-type]
    assert provider.calls == [] and w.counters.calls == 0
    assert w.counters.faults == {"thread_start_failed": 1}
    assert Journal(root).load().by_attempt == {}  # no start row: nothing spent
    first = response(root, rid(1))
    assert first.status is ResponseStatus.CANONICAL
    assert first.outcome is Outcome.ANSWER_UNPUBLISHABLE
    assert list(root.tmp.iterdir()) == []  # the reservation was given back
    w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 1
    assert w.counters.in_flight == 0

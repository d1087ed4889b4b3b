"""One presentation from the host's call to its candidate: the two drivers.

`Presenter.present` blocks the host's thread; `Presenter.apresent` awaits on
the host's loop without holding a thread (the coordinator's rule 4): the same
set-up (`gateway_shim._setup`), the same two wait decisions (`block_for`,
`after_wake`) and the same conclusion (`gateway_shim._conclusion`). Each runs
under the last guard (rule 9): any exception becomes a canonical
``spool_unavailable`` candidate, counted (`guarded`) and said once on the
``kexpr.shim`` logger (``presentation_guarded``), never raised into the host.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from gateway_shim._candidate import CandidateStatus, PresentationCandidate
from gateway_shim._conclusion import Conclusion, collect_late, try_read
from gateway_shim._data_root import DataRootHold
from gateway_shim._guest import ExecutorClosed, OwnExecutor
from gateway_shim._presentation import RECHECKED, Call, Pending, Wait, utcnow
from gateway_shim._responses import RECHECK_S, ResponseWaiters, Wake
from gateway_shim._setup import SetUp
from gateway_shim._specs import ADAPTIVE_UNKNOWN_SURFACE, UNREADABLE_BINDING, Spec
from kexpr.spool import log
from kexpr.spool.outcomes import Outcome

_log = log.logger("shim")


class Presenter:
    """The waits of every presentation of one coordinator."""

    def __init__(
        self,
        setup: SetUp,
        conclusion: Conclusion,
        hold: DataRootHold,
        waiters: ResponseWaiters,
        executor: OwnExecutor,
        clock: Callable[[], dt.datetime],
        monotonic: Callable[[], float],
    ) -> None:
        self._setup = setup
        self._conclusion = conclusion
        self._hold = hold
        self._waiters = waiters
        self._executor = executor
        self._clock = clock
        self._mono = monotonic
        # Rule 9: presentations the last guard ended (said once, counted always).
        self._guarded_lock = threading.Lock()
        self.guarded = 0

    # ------------------------------------------------------------------ sync

    def present(self, spec: Callable[[], Spec]) -> PresentationCandidate:
        call = self.called()
        try:
            event = threading.Event()
            step = self._setup.begin(spec, event.set, call)
            if isinstance(step, PresentationCandidate):
                return self.after(step)
            try:
                data = self._wait_sync(step, event)
            finally:
                self._waiters.forget(step.rid)
            return self.after(self._conclusion.finish(step, data))
        except Exception:  # noqa: BLE001 - rule 9, the last guard: counted and said
            return self._last_guard(spec)

    def _wait_sync(self, p: Pending, arrived: threading.Event) -> bytes | Wait:
        """Wait for the response until the deadline (rule 4).

        Waits first: the waiter was registered (and the observer started) before
        the request was published, so a response that is already there has set
        ``arrived``; a read before the first wait would only fail (one walk and
        one open per artifact)."""
        while True:
            block = self.block_for(p)
            if isinstance(block, Wait):
                return block
            woke = arrived.wait(block)
            arrived.clear()
            then = self.after_wake(woke)
            if then is Wait.NOT_YET:
                continue
            if then is not None:
                return then
            data = try_read(p.response_path)
            if data is not Wait.NOT_YET:
                return data

    # The wait's two decisions, one definition for both drivers (`_wait_sync`
    # blocks the host's thread, `_wait_async` a timer on the loop).

    def block_for(self, p: Pending) -> float | Wait:
        """How long the next wait may block, or ``EXPIRED`` at the deadline: to
        the deadline while the shared scan runs (it and the watcher wake us);
        else one `RECHECK_S` re-check."""
        remaining = p.mono_deadline - self._mono()
        if remaining <= 0:
            return Wait.EXPIRED
        return remaining if self._waiters.scanning else min(remaining, RECHECK_S)

    def after_wake(self, woke: bool) -> Wait | None:
        """After one wait: ``CLOSED``; ``NOT_YET`` when nothing arrived and the
        shared scan would have woken us (wait again, no read); None: read now."""
        if self._setup.closed:
            return Wait.CLOSED
        if not woke and self._waiters.scanning:
            return Wait.NOT_YET
        return None

    # --------------------------------------------------------------- asyncio

    async def apresent(self, spec: Callable[[], Spec]) -> PresentationCandidate:
        call = self.called()
        try:
            loop = asyncio.get_running_loop()
            arrived = asyncio.Event()

            def wake() -> None:
                # Called on the watcher's thread: the loop's own thread sets it.
                loop.call_soon_threadsafe(arrived.set)

            try:
                step = await self._offload_begin(spec, wake, call)
            except ExecutorClosed:
                # Closed: `SetUp.begin` answers ``closed`` without any I/O (rule 11).
                step = self._setup.begin(spec, wake, call)
            if isinstance(step, PresentationCandidate):
                cand = step
            else:
                try:
                    result = await self._wait_async(step, arrived)
                finally:
                    self._waiters.forget(step.rid)
                if isinstance(result, PresentationCandidate):
                    return result
                # Expired or closed: concluded on the loop, no file work.
                cand = self._conclusion.finish(step, result)
            if cand.outcome in RECHECKED and self._hold.recheck_due():
                # In the background: it serves the next presentation, and this
                # one's answer must not queue behind it (rule 4).
                self._submit_or_skip(self._hold.recheck_identity)
            return cand
        except Exception:  # noqa: BLE001 - rule 9, the last guard: counted and said
            return self._last_guard(spec)

    async def _wait_async(self, p: Pending, arrived: asyncio.Event) -> PresentationCandidate | Wait:
        """`_wait_sync` as an awaitable: no thread is held while waiting (a
        timer on the loop, no task per wait); the one read per wake and the
        conclusion run together on the coordinator's own executor."""
        while True:
            block = self.block_for(p)
            if isinstance(block, Wait):
                return block
            woke = arrived.is_set()
            if not woke:
                try:
                    async with asyncio.timeout(block):
                        await arrived.wait()
                    woke = True
                except TimeoutError:
                    pass
            arrived.clear()
            then = self.after_wake(woke)
            if then is Wait.NOT_YET:
                continue
            if then is not None:
                return then
            try:
                out = await self._read_by_deadline(p)
            except ExecutorClosed:
                return Wait.CLOSED
            if out is not Wait.NOT_YET:
                return out

    async def _read_by_deadline(self, p: Pending) -> PresentationCandidate | Wait:
        """One read and conclusion on our executor, but never past the deadline
        (rule 4): with many waiters the executor may hold this read in its queue
        until after it; the wait then ends ``timeout`` at its deadline and the
        read, when it runs, only collects what it finds (`Pending.take_conclusion`)."""
        job = self._executor.submit(lambda: self.read_and_conclude(p))
        result = asyncio.wrap_future(job)
        try:
            async with asyncio.timeout(max(0.0, p.mono_deadline - self._mono())):
                return await asyncio.shield(result)
        except TimeoutError:
            if p.take_conclusion():
                job.cancel()  # not started: it never runs
                return Wait.EXPIRED
        # The read took the conclusion as the deadline passed: it is moments away.
        return await result

    def read_and_conclude(self, p: Pending) -> PresentationCandidate | Wait:
        """One read; if the answer is there, its conclusion (one executor hop),
        unless the wait has already ended at its deadline."""
        data = try_read(p.response_path)
        if data is Wait.NOT_YET:
            return data
        if not p.take_conclusion():
            collect_late(p.response_path, data)
            return Wait.EXPIRED
        return self.after(self._conclusion.finish(p, data))

    async def _offload_begin(
        self, spec: Callable[[], Spec], wake: Wake, call: Call
    ) -> PresentationCandidate | Pending:
        """`SetUp.begin` on our executor. If the host cancels the awaiting task
        meanwhile, the request may still be published: its waiter is then
        forgotten when `begin` returns, so no entry outlives it."""
        future = self._executor.submit(lambda: self._setup.begin(spec, wake, call))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(self._forget_abandoned)
            raise

    def _forget_abandoned(self, future: Future[PresentationCandidate | Pending]) -> None:
        if not future.cancelled() and future.exception() is None:
            step = future.result()
            if isinstance(step, Pending):
                self._waiters.forget(step.rid)

    def _submit_or_skip(self, fn: Callable[[], None]) -> None:
        """``fn`` on our executor, not awaited (it never raises); skipped after
        `close`."""
        try:
            self._executor.submit(fn)
        except ExecutorClosed:
            pass

    # ------------------------------------------------------ the shared steps

    def called(self) -> Call:
        """The host's call instant (rule 4); never raises (a broken injected
        clock: the real ones)."""
        try:
            return Call(self._mono(), self._clock())
        except Exception:  # noqa: BLE001 - rule 9: the real clocks serve instead
            return Call(time.monotonic(), utcnow())

    def after(self, cand: PresentationCandidate) -> PresentationCandidate:
        if cand.outcome in RECHECKED and self._hold.recheck_due():
            self._hold.recheck_identity()
        return cand

    def _last_guard(self, make_spec: Callable[[], Spec]) -> PresentationCandidate:
        """Rule 9, the last guard, counted and said once; never raises."""
        with self._guarded_lock:
            self.guarded += 1
            first = self.guarded == 1
        if first:
            try:
                log.event(_log, logging.WARNING, "presentation_guarded")
            except Exception:  # noqa: BLE001 - rule 9: counted above; saying it is best effort
                pass
        return last_guard(make_spec)

    def after_fork_in_child(self) -> None:
        self._guarded_lock = threading.Lock()


def last_guard(make_spec: Callable[[], Spec]) -> PresentationCandidate:
    """Rule 9, the last guard: a canonical candidate from as little as can be
    read; never raises. No telemetry (that may be what failed)."""
    label, body = ADAPTIVE_UNKNOWN_SURFACE, ""
    try:
        spec = make_spec()
        label = spec.surface_version
        body = spec.body if isinstance(spec.body, str) else ""
    except Exception:  # noqa: BLE001 - rule 9: counted by the caller (`guarded`); the
        pass  # unknown label and no body serve
    return PresentationCandidate(
        surface_version=label,
        attempt_id=None,
        artifact_key=None,
        binding_digest=UNREADABLE_BINDING,
        status=CandidateStatus.CANONICAL,
        body=body,
        publication_permitted=True,
        outcome=Outcome.SPOOL_UNAVAILABLE,
    )

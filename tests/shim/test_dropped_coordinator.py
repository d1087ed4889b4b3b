"""A coordinator the host drops without ``close`` releases what it holds
(coordinator rule 11), and the watch of ``responses/`` is one per process and
data root, not one per coordinator (`gateway_shim._watch`).

A host that builds a coordinator per message and never closes it used to keep
every one: measured on 200, 581 threads, 382 fds and 127 inotify instances, and
past the per-user inotify limit every presentation fell back to the 0.25 s
re-check (a worker of the same user lost its own watch too)."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
import weakref

from kit.bodies import apresent_styled, present_styled
from reference_host.scripted_worker import ScriptedWorker

from gateway_shim import Outcome
from gateway_shim._watch import shared_watches
from kexpr.spool.layout import DataRoot
from shim.test_coordinator import coordinator
from shim.test_guest_process import _wake_via_watcher, inotify_instances, observer_threads

DROPPED = 200


def _fds() -> set[str]:
    """The process's open fds, without the one the listing itself used (closed
    by the time it returns, so the same count could show another number)."""
    return {f for f in os.listdir("/proc/self/fd") if os.path.lexists(f"/proc/self/fd/{f}")}


def _settle(baseline: set[threading.Thread], within_s: float = 20.0) -> None:
    """Wait for the threads started since ``baseline`` to end (each one joined,
    all within one bound): event-driven, no sleep."""
    end = time.monotonic() + within_s
    for t in set(threading.enumerate()) - baseline:
        t.join(max(0.0, end - time.monotonic()))


def test_dropped_coordinators_leave_no_thread_fd_or_inotify_instance(root: DataRoot) -> None:
    with ScriptedWorker(root) as worker:
        gc.collect()
        with worker.quiet():  # its own descriptors are not the coordinators'
            threads, fds, inotify = set(threading.enumerate()), _fds(), inotify_instances()
        dropped: list[weakref.ref[object]] = []
        for i in range(DROPPED):
            coord = coordinator(root.root)
            # Every part started: the watch, the shared scan, and (every tenth,
            # an asyncio presentation) the coordinator's own executor.
            assert present_styled(coord, f"d{i}").outcome is Outcome.ACCEPTED
            if i % 10 == 0:
                cand = asyncio.run(apresent_styled(coord, f"a{i}"))
                assert cand.outcome is Outcome.ACCEPTED
            dropped.append(weakref.ref(coord))
            del coord  # the host's last reference: never closed
        gc.collect()
        _settle(threads)
        assert [r for r in dropped if r() is not None] == []  # nothing kept them alive
        assert set(threading.enumerate()) == threads
        with worker.quiet():
            assert _fds() == fds
            assert inotify_instances() == inotify
        assert shared_watches() == 0


def test_live_coordinators_of_one_data_root_share_one_watch(root: DataRoot) -> None:
    with ScriptedWorker(root):
        threads, inotify = set(threading.enumerate()), inotify_instances()
        live = [coordinator(root.root) for _ in range(20)]
        for i, coord in enumerate(live):
            assert present_styled(coord, f"s{i}").outcome is Outcome.ACCEPTED
        assert inotify_instances() == inotify + 1 and shared_watches() == 1
        started = {t for t in set(threading.enumerate()) - threads if "recheck" not in t.name}
        assert len(started) == observer_threads()  # one observer; a scan per coordinator
        # Every coordinator is woken by the one watcher; dropping all but one
        # keeps the watch for the last, closing it releases it.
        assert all(_wake_via_watcher(c, root, f"{i:032x}") for i, c in enumerate(live))
        last = live.pop()
        del live
        gc.collect()
        assert shared_watches() == 1 and _wake_via_watcher(last, root, "f" * 32)
        last.close()
        _settle(threads)
        assert shared_watches() == 0 and inotify_instances() == inotify
        assert set(threading.enumerate()) == threads


def test_a_replaced_responses_directory_is_another_watch(root: DataRoot) -> None:
    """The key is the directory, not its name: after ``responses/`` is replaced a
    coordinator re-establishes its watch on the new one (`check_watch`), and the
    old shared watch goes with its last user."""
    with ScriptedWorker(root):
        inotify = inotify_instances()
        a, b = coordinator(root.root), coordinator(root.root)
        for c in (a, b):
            assert present_styled(c, str(id(c))).outcome is Outcome.ACCEPTED
        os.rename(root.responses, root.spool / "old")
        root.ensure()
        for c in (a, b):
            c._waiters.scan_once()  # the shared re-check finds the watch lost
        assert shared_watches() == 1 and inotify_instances() == inotify + 1
        assert _wake_via_watcher(a, root, "1" * 32) and _wake_via_watcher(b, root, "2" * 32)
        a.close()
        b.close()
        assert shared_watches() == 0 and inotify_instances() == inotify

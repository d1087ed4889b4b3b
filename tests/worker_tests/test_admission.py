"""No call that cannot succeed.

1. Admission is judged again under the journal lock, right before the start
   row. Observed in a burst (1,000 artifacts, 20 gateways): 55 of 204 start
   rows written after their deadline, 68 attempts spent with zero wire
   requests, 12-43 wire requests sent after the deadline, and ``calls`` said
   205 where 136 left. Here the lock is taken late on a controllable clock.
2. What publishing the answer needs is reserved before the row and the call.
   Observed: a data root out of inodes (room for the request, none for the
   response): 6 billed requests, 0 delivered answers (``respond_failed``).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import mounted_tmpfs
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT
from worker_tests.worker_kit import (
    Clock,
    Provider,
    make_worker,
    outcomes,
    response,
    rid,
    submit,
)

from kexpr.spool.contract import Capsule
from kexpr.spool.contract.budget import answer_token_bound, min_answer_seconds
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import Outcome
from kexpr.worker.attempt import PUBLISH_MARGIN_S
from kexpr.worker.daemon import Worker


def _minimal_answer_s() -> float:
    """What `submit`'s capsule needs at the fastest rate (the lead's budget)."""
    capsule = Capsule(
        schema_version="korean-expression-v4",
        surface=STYLED_SURFACE,
        artifact_key="a" * 32,
        slots=(STYLED_SLOT,),
    )
    bound = answer_token_bound(capsule)
    assert bound is not None
    return min_answer_seconds(bound)


def _lock_taken_late(w: Worker, clock: Clock, wait: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first journal lock of the next request is granted ``wait`` seconds
    after the request was first seen (a scan or a lock queue under a burst)."""
    real = w.journal.locked
    waits = [wait]

    @contextlib.contextmanager
    def locked() -> Iterator[Any]:
        if waits:
            clock.advance(waits.pop())
        with real() as j:
            yield j

    monkeypatch.setattr(w.journal, "locked", locked)


@pytest.mark.parametrize("wait", [4.5, 3.99, 4.0], ids=["after_deadline", "just_before", "at"])
def test_a_lock_taken_too_late_writes_no_start_row_and_makes_no_call(
    root: DataRoot,
    provider: Provider,
    env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    wait: float,
) -> None:
    """Regression: the old worker wrote the start row and called (or,
    past the deadline, spent the attempt with zero requests) whatever the lock
    wait had taken, and counted a call either way."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    _lock_taken_late(w, clock, wait, monkeypatch)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert outcomes(root) == []  # no start row
    assert provider.calls == [] and w.counters.calls == 0
    r = response(root, rid(1))
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.NO_TIME_TO_ANSWER)
    assert w.counters.no_time_to_answer == 1
    # The artifact was never attempted: a later presentation is judged afresh.
    clock.advance(10)
    w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 1


def test_the_boundary_is_the_minimal_answer_at_the_fastest_rate_before_the_margin(
    root: DataRoot, provider: Provider, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The answer has until deadline - PUBLISH_MARGIN_S (the call is cut there).
    need = _minimal_answer_s() + PUBLISH_MARGIN_S
    assert 0 < need < 4
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    # Just less than the minimal answer needs: refused.
    _lock_taken_late(w, clock, 4 - need + 0.01, monkeypatch)
    w.handle_claimed(f"{submit(root, clock, 'b' * 32, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is Outcome.NO_TIME_TO_ANSWER
    # Just enough: admitted, one row, one call.
    _lock_taken_late(w, clock, 4 - need - 0.01, monkeypatch)
    w.handle_claimed(f"{submit(root, clock, 'c' * 32, rid=rid(2))}.json")
    assert len(provider.calls) == 1 and w.counters.calls == 1
    assert outcomes(root) != []


# -------------------------------------------------- the answer is reserved first


def _no_new_staging_file(real: Callable[..., int]) -> Callable[..., int]:
    """``open`` refuses to create a dot-named staging file (ENOSPC, as a root
    out of inodes does); everything else (the journal) still works."""

    def open_(path: Any, flags: int, *a: Any, **kw: Any) -> int:
        if flags & os.O_CREAT and os.fsdecode(path).startswith("."):
            raise OSError(errno.ENOSPC, "injected")
        return real(path, flags, *a, **kw)

    return open_


def test_no_room_for_the_answer_means_no_row_and_no_call(
    root: DataRoot, provider: Provider, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the old worker called first and then failed to
    publish (a billed request, no delivered answer)."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, 'e' * 32, rid=rid(9))}.json")  # today's segment exists
    assert len(provider.calls) == 1
    starter = submit(root, clock, rid=rid(1))
    with monkeypatch.context() as m:
        m.setattr(os, "open", _no_new_staging_file(os.open))
        w.handle_claimed(f"{starter}.json")
    assert len(provider.calls) == 1  # no second request
    assert outcomes(root) == [None]  # only the first artifact's row
    assert w.counters.faults.get("reserve_failed") == 1
    assert len(w.parts.attempts.held) == 1  # only the first attempt is held
    # Room again: the artifact was never attempted, so it may be now.
    w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 2
    assert list(root.tmp.iterdir()) == []


def test_the_reserved_file_carries_the_answer(
    root: DataRoot, provider: Provider, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once reserved, the answer needs no new inode: staging files may no longer
    be created after the reservation, and the accepted answer still arrives."""
    from kexpr.spool import fsio

    clock = Clock()
    w = make_worker(root, provider, clock, env)
    real_reserve = fsio.reserve

    def reserve_then_exhaust(*a: Any, **kw: Any) -> Any:
        r = real_reserve(*a, **kw)
        monkeypatch.setattr(os, "open", _no_new_staging_file(os.open))
        return r

    monkeypatch.setattr("kexpr.worker.attempt.reserve", reserve_then_exhaust)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    assert w.counters.faults == {}


@pytest.fixture
def inode_poor_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(
        tmp_path / "inodes",
        "size=4m,nr_inodes=64",
        "the injected ENOSPC test covers a regular user",
    ) as mnt:
        yield mnt


@pytest.mark.e2e
def test_a_root_out_of_inodes_gets_no_call(
    inode_poor_tmpfs: Path, provider: Provider, env: dict[str, str]
) -> None:
    """The observed case on a real file system: the request is on disk, then the
    last inode goes; the old worker billed the call and lost the answer."""
    root = DataRoot(inode_poor_tmpfs / "root")
    root.ensure()
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, 'e' * 32, rid=rid(9))}.json")
    assert len(provider.calls) == 1
    starter = submit(root, clock, rid=rid(1))
    filler = inode_poor_tmpfs / "filler"
    filler.mkdir()
    n = 0
    with contextlib.suppress(OSError):
        while True:
            (filler / str(n)).touch()
            n += 1
    assert n > 0
    w.handle_claimed(f"{starter}.json")
    assert len(provider.calls) == 1
    assert outcomes(root) == [None]
    assert w.counters.faults.get("reserve_failed") == 1
    # Inodes again: the artifact gets its one attempt now.
    for p in filler.iterdir():
        p.unlink()
    w.handle_claimed(f"{submit(root, clock, rid=rid(2))}.json")
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 2


def test_a_killed_workers_reservation_is_removed_at_the_next_start(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """A worker SIGKILLed during its call leaves its reservation in tmp/; the
    next worker (it holds worker.lock) removes it, and nothing else there."""
    from kexpr.spool.fsio import publish, reserve

    left = reserve(root.tmp, root.responses / f"{rid(1)}.json", 512)
    os.close(left._take())  # the process died: its descriptor is gone, the file is not
    publish(root.tmp, root.tmp / ".someone-elses-upload", b"x")  # a shim's staging file
    make_worker(root, provider, Clock(), env)
    assert sorted(os.listdir(root.tmp)) == [".someone-elses-upload"]

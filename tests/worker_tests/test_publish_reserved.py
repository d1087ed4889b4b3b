"""Publishing needs only what was reserved, on ext4 and on tmpfs.

The reserved staging file used to be published with ``link(2)``; tmpfs counts
every link against ``nr_inodes``, so on a tmpfs whose inodes ran out after the
reservation the link failed with ENOSPC: 6 billed calls, 0 delivered answers
(``respond_failed`` 12). The reservation is now *moved* into place
(``renameat2(RENAME_NOREPLACE)``), which needs no inode slot and still never
replaces an existing file.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import mounted_tmpfs
from worker_tests.worker_kit import Clock, Provider, make_worker, outcomes, response, rid, submit

from kexpr.spool import fsio
from kexpr.spool.fsio import move_noreplace, reserve
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import ResponseStatus


def _fill_inodes(d: Path) -> int:
    """Create empty files in ``d`` until the file system refuses one."""
    d.mkdir()
    n = 0
    with contextlib.suppress(OSError):
        while True:
            (d / str(n)).touch()
            n += 1
    return n


def _no_link(*a: Any, **kw: Any) -> None:
    raise OSError(errno.ENOSPC, "injected: link needs an inode slot")


# --- the primitive ----------------------------------------------------------------


def test_a_reservation_is_published_without_link(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: with ``link`` refused as a full tmpfs refuses it, the reserved
    file still reaches its place (the old publish linked, and failed here)."""
    final = root.responses / f"{rid(1)}.json"
    r = reserve(root.tmp, final, 512)
    monkeypatch.setattr(os, "link", _no_link)
    r.publish(b'{"x": 1}')
    assert final.read_bytes() == b'{"x": 1}'
    assert list(root.tmp.iterdir()) == []


def test_a_reserved_publish_never_replaces(root: DataRoot) -> None:
    final = root.responses / f"{rid(1)}.json"
    final.write_bytes(b"theirs")
    final.chmod(0o600)
    r = reserve(root.tmp, final, 512)
    with pytest.raises(FileExistsError):
        r.publish(b"ours")
    assert final.read_bytes() == b"theirs"
    assert list(root.tmp.iterdir()) == []  # the staging file is removed anyway


def test_without_renameat2_the_fallback_links_and_never_replaces(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A C library without renameat2: the link of fsio rule 5, same guarantees."""
    monkeypatch.setattr(fsio, "_renameat2", False)
    final = root.responses / f"{rid(1)}.json"
    reserve(root.tmp, final, 512).publish(b"one")
    assert final.read_bytes() == b"one"
    with pytest.raises(FileExistsError):
        reserve(root.tmp, final, 512).publish(b"two")
    assert final.read_bytes() == b"one"
    assert list(root.tmp.iterdir()) == []


def test_move_noreplace_refuses_an_existing_target(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "b").write_bytes(b"b")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(FileExistsError):
            move_noreplace("a", fd, "b", fd)
        move_noreplace("a", fd, "c", fd)
    finally:
        os.close(fd)
    assert sorted(os.listdir(tmp_path)) == ["b", "c"]


# --- the worker on a real tmpfs ----------------------------------------------------


@pytest.fixture
def inode_poor_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(
        tmp_path / "inodes",
        "size=4m,nr_inodes=64",
        "test_a_reservation_is_published_without_link injects the same refusal",
    ) as mnt:
        yield mnt


@pytest.mark.e2e
def test_inodes_gone_during_the_call_still_deliver_the_answer(
    inode_poor_tmpfs: Path, provider: Provider, env: dict[str, str]
) -> None:
    """The observed case: room for the request and the reservation, then the
    last inode goes while the call runs. Before: the billed answer could not be
    published (``respond_failed``). Now: every billed call's answer arrives."""
    root = DataRoot(inode_poor_tmpfs / "root")
    root.ensure()
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    filled: list[int] = []
    provider.on_call = lambda: filled.append(_fill_inodes(inode_poor_tmpfs / "filler"))
    w.handle_claimed(f"{submit(root, clock, rid=rid(1))}.json")
    assert filled and filled[0] >= 0
    assert len(provider.calls) == 1
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    assert outcomes(root) == [None]  # answered, awaiting its report
    assert w.counters.faults.get("respond_failed") is None

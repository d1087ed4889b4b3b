"""Issue 14 item 8: a data root moved to a new volume at the same path does not
strand a running gateway. The shim pins the data root's parent for its life;
after a presentation fails it compares the pinned parent and the root with a
fresh walk (device, inode) and, if either changed, re-pins: the next
presentation reaches the new root. The old code timed out at every call until
the gateway restarted. Real worker processes (``kexpr supervise``) on each
volume; the gateway is this process."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import start_supervised_worker
from fakeapi import FakeOpenAI
from kit.bodies import present_styled
from shim.test_coordinator import coordinator

import gateway_shim._setup as setup_mod
from kexpr.spool.outcomes import Outcome

pytestmark = pytest.mark.e2e


def _new_volume(parent: Path) -> None:
    """Move the parent's contents to a new directory (a new volume when this
    runs as root and can mount a tmpfs) at the same path."""
    old = parent.with_name(parent.name + ".old")
    os.rename(parent, old)
    parent.mkdir(mode=0o700)
    if os.geteuid() == 0:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(parent)],
            capture_output=True,
            check=False,
        )
    for name in os.listdir(old):
        shutil.copytree(old / name, parent / name, symlinks=True)


def test_a_gateway_follows_its_data_root_to_a_new_volume(
    data_root: Path, fake_api: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(setup_mod, "MAX_WAIT", dt.timedelta(seconds=2))
    w = start_supervised_worker(data_root, fake_api)
    coord = coordinator(data_root, weekly=True)
    parent = data_root.parent
    try:
        first = present_styled(coord, "evt-1")
        assert first.outcome is Outcome.ACCEPTED
        coord.report(first, "selected")
        w.stop()
        _new_volume(parent)
        w = start_supervised_worker(data_root, fake_api)
        got = [present_styled(coord, f"evt-{n}").outcome for n in (2, 3)]
        # At most the first call after the move is lost; then the gateway is
        # on the new root (the old code: timeout, timeout, ... until restart).
        assert got[-1] is Outcome.ACCEPTED, got
    finally:
        coord.close()
        w.stop()
        subprocess.run(["umount", "-l", str(parent)], capture_output=True, check=False)

"""Issue 14 item 7 (the staging part): staging files are removed on every
failure path. `replace_private` used to leave its staging file behind when the
write failed (ENOSPC: 6 files in 3.5 s); a file created ``O_EXCL`` and then
refused by the post-create checks was left too."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kexpr.spool import fsio
from kexpr.spool.fsio import create_private_file, publish, replace_private
from kexpr.spool.layout import DataRoot


def _fail(code: int) -> Callable[..., object]:
    def f(*a: object, **kw: object) -> object:
        raise OSError(code, "injected")

    return f


def _half(real: Callable[[int, bytes], int]) -> Callable[[int, bytes], int]:
    calls = [0]

    def write(fd: int, data: bytes) -> int:
        calls[0] += 1
        if calls[0] > 1:
            raise OSError(errno.ENOSPC, "injected")
        return real(fd, bytes(data)[: max(1, len(data) // 2)])

    return write


WRITERS = {
    "replace_private": lambda r: replace_private(r.status_file, b"x" * 4096),
    "publish": lambda r: publish(r.tmp, r.responses / "a.json", b"x" * 4096),
    "create_private_file": lambda r: create_private_file(r.tmp, r.root / "k", b"x" * 4096),
}


def _listing(r: DataRoot) -> dict[str, list[str]]:
    return {str(d): sorted(os.listdir(d)) for d in (r.root, r.tmp, r.responses)}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("fault", ["enospc_mid_write", "fchmod_refused"])
def test_no_staging_file_is_left_behind(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch, writer: str, fault: str
) -> None:
    before = _listing(root)
    with monkeypatch.context() as m:
        if fault == "enospc_mid_write":
            m.setattr(fsio.os, "write", _half(os.write))
        else:
            m.setattr(fsio.os, "fchmod", _fail(errno.EPERM))
        with pytest.raises(OSError):
            WRITERS[writer](root)
    assert _listing(root) == before


def test_a_real_full_tmpfs_leaves_no_staging_file(tmp_path: Path) -> None:
    """As root: a 64 KiB tmpfs, filled; the status heartbeat fails ENOSPC and
    leaves nothing (the old code left one file per attempt)."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the injected ENOSPC test covers the path)")
    mnt = tmp_path / "tiny"
    mnt.mkdir(mode=0o700)
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mnt)],
            capture_output=True,
            check=False,
        ).returncode
        != 0
    ):
        pytest.skip("this container cannot mount a tmpfs")
    try:
        r = DataRoot(mnt / "root")
        r.ensure()
        fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while os.write(fd, b"\0" * 4096) == 4096:
                pass
        except OSError as e:
            assert e.errno == errno.ENOSPC
        finally:
            os.close(fd)
        before = sorted(os.listdir(r.root))
        for _ in range(6):
            with pytest.raises(OSError) as raised:
                replace_private(r.status_file, b"x" * 20000)
            assert raised.value.errno == errno.ENOSPC
        assert sorted(os.listdir(r.root)) == before
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)

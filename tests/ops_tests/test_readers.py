"""kexpr.ops.readers: the no-owner-check bounded reader used by root-run ops tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from kexpr.ops.readers import ReadProblem, ReadRefused, read_nofollow


def test_bounded_read_and_refusals(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x" * 10)
    assert read_nofollow(f, max_bytes=10) == b"x" * 10
    with pytest.raises(ReadRefused) as e:
        read_nofollow(f, max_bytes=9)
    assert e.value.problem is ReadProblem.TOO_LARGE
    (tmp_path / "link").symlink_to(f)
    with pytest.raises(ReadRefused) as e:
        read_nofollow(tmp_path / "link", max_bytes=10)
    assert e.value.problem is ReadProblem.SYMLINK
    with pytest.raises(ReadRefused) as e:
        read_nofollow(tmp_path, max_bytes=10)
    assert e.value.problem is ReadProblem.NOT_REGULAR_FILE

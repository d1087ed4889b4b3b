"""What the shim's tests share: the data root a coordinator is given, not yet set
up (the coordinator and the scripted worker make what they need of it; the suite's
own `root`, tests/conftest.py, is set up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kexpr.spool.layout import DataRoot


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    return DataRoot(tmp_path / "root")

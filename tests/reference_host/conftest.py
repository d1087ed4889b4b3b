"""Fixtures of the reference-host tests: a data root, a scripted worker and a
coordinator per mode."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gateway_shim import KoreanExpressionConfig, KoreanExpressionCoordinator, Mode, exact_block
from kexpr.spool.layout import DataRoot
from reference_host.scripted_worker import ScriptedWorker


@pytest.fixture
def root(tmp_path: Path) -> DataRoot:
    return DataRoot(tmp_path / "kexpr")


@pytest.fixture
def worker(root: DataRoot) -> Iterator[ScriptedWorker]:
    with ScriptedWorker(root) as w:
        yield w


@pytest.fixture
def make_coordinator(root: DataRoot) -> Iterator[Callable[[Mode], KoreanExpressionCoordinator]]:
    made: list[KoreanExpressionCoordinator] = []

    def make(mode: Mode = Mode.ENABLED) -> KoreanExpressionCoordinator:
        config = KoreanExpressionConfig.from_block(
            exact_block(mode, daily=True, weekly=True, adaptive_operator=True)
        )
        coord = KoreanExpressionCoordinator(config, root.root)
        made.append(coord)
        return coord

    yield make
    for coord in made:
        coord.close()

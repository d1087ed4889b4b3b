"""The shared re-check survives a fault and says so: counted, and said once per
kind on the ``kexpr.shim`` logger (a fixed word, no content), never raised."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway_shim._responses import ResponseWaiters


def test_a_failing_watch_check_is_counted_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    waiters = ResponseWaiters(tmp_path)

    def broken_tick() -> None:
        raise RuntimeError("a fault")

    waiters.on_tick = broken_tick
    with caplog.at_level(logging.WARNING, logger="kexpr.shim"):
        waiters.scan_once()
        waiters.scan_once()
    assert waiters.scan_faults == 2
    said = [r.getMessage() for r in caplog.records if r.name == "kexpr.shim"]
    assert said == ["watch_check_failed"]

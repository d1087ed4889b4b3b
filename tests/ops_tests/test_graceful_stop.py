"""Graceful stop (design §10): SIGTERM to `kexpr supervise` lets a call in flight
finish — or reach its 4 s deadline and be journaled `timeout` — before the worker
exits. Real supervisor, worker and shim; the loopback HTTPS fake behind a real
CONNECT proxy."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import journal_rows
from fakeapi import FakeOpenAI, compose_reply, default_style
from kit.bodies import present_styled
from ops_support import start_supervisor, wait_for

from gateway_shim import (
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    exact_block,
)
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot

pytestmark = pytest.mark.e2e


def _present_in_thread(
    root: Path, mode: Mode, out: list[PresentationCandidate]
) -> threading.Thread:
    def run() -> None:
        coord = KoreanExpressionCoordinator(
            KoreanExpressionConfig.from_block(exact_block(mode, weekly=True)), root
        )
        try:
            out.append(present_styled(coord, "evt-graceful-1"))
        finally:
            coord.close()

    t = threading.Thread(target=run)
    t.start()
    return t


def _rows(root: Path) -> list[dict[str, Any]]:
    return journal_rows(root)


def test_sigterm_lets_the_call_in_flight_finish(data_root: Path, fake_api: FakeOpenAI) -> None:
    fake_api.behaviour = compose_reply(default_style, delay_s=1.5)
    sup = start_supervisor(data_root, fake=fake_api)
    out: list[PresentationCandidate] = []
    t = _present_in_thread(data_root, Mode.ENABLED, out)
    try:
        assert wait_for(lambda: len(fake_api.requests) == 1, timeout=10)
        t0 = time.monotonic()
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(20) == 0
        waited = time.monotonic() - t0
    finally:
        t.join(10)
        sup.stop()
    # The worker waited for the provider (~1.5 s) instead of dying mid-call ...
    assert waited >= 1.0
    # ... and the shim got the accepted composition before the deadline.
    assert [c.outcome for c in out] == [Outcome.ACCEPTED]
    assert len(fake_api.requests) == 1
    status = json.loads(DataRoot(data_root).status_file.read_bytes())
    assert status["state"] == "stopped"
    Journal(DataRoot(data_root)).load()


def test_sigterm_during_a_slow_call_journals_timeout_before_exit(
    data_root: Path, fake_api: FakeOpenAI
) -> None:
    fake_api.behaviour = compose_reply(default_style, delay_s=8.0)
    sup = start_supervisor(data_root, fake=fake_api)
    out: list[PresentationCandidate] = []
    t = _present_in_thread(data_root, Mode.SHADOW, out)
    try:
        assert wait_for(lambda: len(fake_api.requests) == 1, timeout=10)
        sup.proc.send_signal(signal.SIGTERM)
        assert sup.proc.wait(20) == 0
    finally:
        t.join(10)
        sup.stop()
    # The attempt is terminal in the journal (not left open for a restart to expire).
    assert [(r["state"], r["outcome"]) for r in _rows(data_root)] == [
        ("attempt_started", "attempt_started"),
        ("finalized", "timeout"),
    ]
    assert [c.outcome for c in out] == [Outcome.TIMEOUT]
    assert len(fake_api.requests) == 1

"""What the end-to-end tests share: a supervised worker for one test, and the
host's own example bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conftest import RunningWorker, start_supervised_worker
from fakeapi import FakeOpenAI

from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot

GOLDENS = Path(__file__).resolve().parents[1] / "surfaces" / "goldens" / "host-examples.jsonl"


def supervised(data_root: Path, fake_api: FakeOpenAI) -> Iterator[RunningWorker]:
    """A fixture's body: the real supervised worker for one test, stopped after
    it; every run leaves a journal that verifies."""
    w = start_supervised_worker(data_root, fake_api)
    yield w
    w.stop()
    Journal(DataRoot(data_root)).load()


def host_example(name: str) -> dict[str, Any]:
    """The request of the host's example ``name`` (HOST-FORMATS.md D4, W3, ...)."""
    for line in GOLDENS.read_text(encoding="utf-8").splitlines():
        if line.strip() and json.loads(line)["example"] == f"HOST-FORMATS.md {name}":
            request: dict[str, Any] = json.loads(line)["request"]
            return request
    raise AssertionError(name)

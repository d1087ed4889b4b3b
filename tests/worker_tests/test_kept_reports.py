"""Kept files cost nothing at rest.

Observed: 10,000 report files of a newer protocol version (kept by design: never
ours to judge, never dropped) made the idle worker use 29-34 % of a core: every
1 s tick re-read and re-parsed every one, and its memory of foreign names grew
by one per file for the process's life. Now each is read and parsed once per
(name, change); a settled folder is not even listed; forgotten names are
forgotten. Counted here with instrumented readers, over many ticks, no timing.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections import Counter
from typing import Any

import pytest
from worker_tests.worker_kit import Clock, Provider, make_worker

from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.worker import reports, scan
from kexpr.worker.daemon import Worker
from kexpr.worker.reports import KEPT_RECHECK_TICKS

FILES = 50
TICKS = 3 * KEPT_RECHECK_TICKS


def _plant(root: DataRoot, n: int, version: str = "kexpr-spool-v9") -> list[str]:
    names = []
    for _ in range(n):
        aid = secrets.token_hex(16)
        body = {"attempt_id": aid, "outcome": "selected", "spool_version": version}
        publish(root.tmp, root.reports / f"{aid}.json", json.dumps(body).encode())
        names.append(f"{aid}.json")
    return names


def _age(root: DataRoot) -> None:
    """The folder last changed long ago (what an idle worker sees)."""
    old = time.time_ns() - 60 * 10**9
    os.utime(root.reports, ns=(old, old))


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    counts: Counter[str] = Counter()
    real_parse, real_names = reports.parse_report, scan.json_names

    def parse(data: bytes) -> Any:
        counts["parse"] += 1
        return real_parse(data)

    def names(d: Any) -> list[str]:
        counts["list"] += 1
        return real_names(d)

    monkeypatch.setattr(reports, "parse_report", parse)
    monkeypatch.setattr(scan, "json_names", names)
    return counts


def _worker(root: DataRoot, env: dict[str, str]) -> Worker:
    return make_worker(root, Provider(), Clock(), env)


def test_kept_reports_are_parsed_once_not_per_tick(
    root: DataRoot, env: dict[str, str], counted: Counter[str]
) -> None:
    """Regression: the old worker parsed every kept file on every tick
    (FILES * TICKS parses here)."""
    w = _worker(root, env)
    _plant(root, FILES)
    counted.clear()
    for _ in range(TICKS):
        scan.scan_reports(w.parts)
    assert counted["parse"] == FILES
    assert w.counters.faults == {"unknown_spool_version": FILES}  # counted once each
    assert len(list(root.reports.iterdir())) == FILES  # kept, never dropped


def test_a_settled_folder_is_not_even_listed(
    root: DataRoot, env: dict[str, str], counted: Counter[str]
) -> None:
    w = _worker(root, env)
    _plant(root, FILES)
    scan.scan_reports(w.parts)
    _age(root)
    counted.clear()
    for _ in range(TICKS):
        scan.scan_reports(w.parts)
    # One listing to settle, then one per re-check of the kept files' identity.
    assert counted["list"] <= 1 + TICKS // KEPT_RECHECK_TICKS + 1
    assert counted["parse"] == 0


def test_a_new_report_beside_kept_ones_is_journaled_at_once(
    root: DataRoot, env: dict[str, str], counted: Counter[str]
) -> None:
    """Settled is not blind: a new file changes the folder and is read on the next tick."""
    w = _worker(root, env)
    _plant(root, FILES)
    scan.scan_reports(w.parts)
    _age(root)
    scan.scan_reports(w.parts)
    counted.clear()
    (new,) = _plant(root, 1, version="kexpr-spool-v2")  # ours, for no attempt: an orphan
    scan.scan_reports(w.parts)
    assert counted["parse"] == 1
    assert w.counters.orphan_reports == 1
    assert not (root.reports / new).exists()


def test_a_kept_file_rewritten_in_place_is_read_again_within_the_recheck(
    root: DataRoot, env: dict[str, str], counted: Counter[str]
) -> None:
    w = _worker(root, env)
    (name,) = _plant(root, 1)
    scan.scan_reports(w.parts)
    path = root.reports / name
    body = json.loads(path.read_bytes())
    body["outcome"] = "shadow_selected"
    path.write_bytes(json.dumps(body).encode())  # same inode, new content
    _age(root)
    counted.clear()
    for _ in range(KEPT_RECHECK_TICKS + 1):
        scan.scan_reports(w.parts)
    assert counted["parse"] == 1
    assert w.counters.faults == {"unknown_spool_version": 1}  # the same name: not recounted


def test_the_memory_of_kept_names_follows_the_folder(root: DataRoot, env: dict[str, str]) -> None:
    """Regression: names of removed kept files were remembered for ever."""
    w = _worker(root, env)
    names = _plant(root, FILES)
    scan.scan_reports(w.parts)
    assert len(w.parts.kept_reports.files) == FILES
    for name in names[: FILES // 2]:
        (root.reports / name).unlink()
    scan.scan_reports(w.parts)
    assert set(w.parts.kept_reports.files) == set(names[FILES // 2 :])


def test_the_memory_of_kept_names_is_bounded(
    root: DataRoot, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reports, "KEPT_MAX", 10)
    w = _worker(root, env)
    _plant(root, 25)
    scan.scan_reports(w.parts)
    assert len(w.parts.kept_reports.files) == 10
    assert len(list(root.reports.iterdir())) == 25

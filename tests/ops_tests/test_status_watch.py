"""Watching the worker like a service: what the model writes (style words per slot,
content-free), tokens and a cost at the operator's price, a worker run as root,
and ``kexpr status --json`` as the monitoring interface with stable field names
(docs/cli.md "Monitoring")."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

import httpx
import pytest
from ops_support import kexpr
from worker_tests.worker_kit import Clock, completion, composition_for, make_worker, rid, submit

from kexpr.ops.status_cli import EXIT, HealthVerdict, Price, collect, render
from kexpr.spool.layout import DataRoot
from kexpr.worker.environment import warn_if_root

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def _ts(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _write(root: DataRoot, obj: dict[str, object]) -> None:
    root.status_file.write_text(json.dumps(obj, ensure_ascii=False), "utf-8")
    os.chmod(root.status_file, 0o600)


def _status(**extra: object) -> dict[str, object]:
    return {
        "schema": "kexpr-worker-status-v1",
        "pid": 4242,
        "state": "ready",
        "started_at_utc": _ts(7200),
        "heartbeat_at_utc": _ts(0.5),
        "journal": "verified",
        "credential": "present",
        **extra,
    }


def test_the_style_words_the_accepted_answers_used_are_counted_per_slot(
    root: DataRoot,
    provider,
    env,
) -> None:
    """Regression: an operator could not see what the model writes in production."""
    # The worker kit's requests are the styled weekly report: the fit table's two
    # compositions, and one answer it rejects (a word outside its cell: never counted).
    styles = iter(
        ["[[P:01]]. 다만 [[A:01]].", "[[P:01]]. 그리고 [[A:01]].", "[[P:01]]. 다만, [[A:01]]."]
    )
    provider.reply = lambda capsule: httpx.Response(
        200,
        json={
            **completion(composition_for(capsule, next(styles))),
            "usage": {"prompt_tokens": 900, "completion_tokens": 80, "total_tokens": 980},
        },
    )
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    for n in (1, 2, 3):
        w.handle_claimed(f"{submit(root, clock, akey=f'{n}' * 32, rid=rid(n))}.json")
    w.status.write()
    written = json.loads(root.status_file.read_bytes())
    assert written["style_words_by_slot"] == {
        "weekly.interpretation": {"answers": 2, "words": {"다만": 2}}
    }
    assert written["tokens_by_surface"]["weekly.v1"] == {
        "prompt": 2700,
        "completion": 240,
        "calls_with_usage": 3,
    }
    report = collect(root, now=clock.now, alive=lambda p: True)
    assert report.worker is not None
    assert report.worker.fields["style_words_by_slot"] == {
        "weekly.interpretation": {"answers": 2, "words": {"다만": 2}}
    }
    assert "style       weekly.interpretation  2 answers: 다만 2" in render(report)


def test_a_planted_word_or_slot_is_never_shown(root: DataRoot) -> None:
    _write(
        root,
        _status(
            style_words_by_slot={
                "daily.status": {"answers": 2, "words": {"김민지": 5, "차분히": 1}},
                "client_042": {"answers": 1, "words": {"차분히": 1}},
            }
        ),
    )
    report = collect(root, now=NOW, alive=lambda p: True)
    text = render(report) + json.dumps(report.to_json(), ensure_ascii=False)
    assert "김민지" not in text and "client_042" not in text
    assert "daily.status  2 answers: 차분히 1" in text


def test_the_cost_is_estimated_only_at_the_operators_price(root: DataRoot) -> None:
    _write(
        root,
        _status(
            tokens_by_surface={
                "daily.v1": {"prompt": 1_800_000, "completion": 200_000, "calls_with_usage": 2000},
                "weekly.v1": {"prompt": 200_000, "completion": 50_000, "calls_with_usage": 100},
            }
        ),
    )
    report = collect(root, now=NOW, alive=lambda p: True)
    assert report.worker is not None
    cost = report.worker.fields["cost"]
    assert (cost["prompt_tokens"], cost["completion_tokens"]) == (2_000_000, 250_000)
    assert cost["cost_so_far"] is None and cost["cost_per_day"] is None  # no default price
    assert "give --price-per-mtok-in and --price-per-mtok-out" in render(report)
    report = collect(root, now=NOW, alive=lambda p: True, price=Price(0.4, 1.6))
    assert report.worker is not None
    cost = report.worker.fields["cost"]
    # 2 M in at 0.4 + 0.25 M out at 1.6 = 1.2 in two hours: 14.4 a day at that rate.
    assert cost["cost_so_far"] == pytest.approx(1.2)
    assert cost["cost_per_day"] == pytest.approx(14.4)
    assert "1.2000 since start, about 14.4000 per day at this rate" in render(report)


def test_the_price_options_come_together(root: DataRoot) -> None:
    _write(root, _status())
    out = kexpr("status", "--data-root", root.root, "--price-per-mtok-in", "0.4")
    assert out.returncode == 2 and "give both" in out.stderr
    out = kexpr(
        "status",
        "--data-root",
        root.root,
        "--price-per-mtok-in",
        "0.4",
        "--price-per-mtok-out",
        "1.6",
        "--json",
    )
    assert json.loads(out.stdout)["worker"]["cost"]["price_per_mtok_out"] == 1.6


def test_a_worker_run_as_root_is_said(root: DataRoot, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: only `kexpr audit` said uid=0; the worker and `status` were silent."""
    assert warn_if_root(0) is True
    assert "kexpr worker: warning: running_as_root" in capsys.readouterr().err
    assert warn_if_root(1000) is False and capsys.readouterr().err == ""
    _write(root, _status(running_as_root=True))
    report = collect(root, now=NOW, alive=lambda p: True)
    assert "root        WARNING the worker runs as root" in render(report)
    assert report.verdict is HealthVerdict.HEALTHY  # said, not a verdict


# ---------------------------------------------------------------- the monitoring interface


def _documented(heading: str) -> str:
    text = (REPO / "docs" / "cli.md").read_text("utf-8")
    section = text[text.index(f"\n## {heading}\n") :]
    section = section[: section.index("\n## ", 1)]
    return section


def test_status_json_field_names_are_the_documented_ones(root: DataRoot) -> None:
    _write(root, _status())
    out = kexpr("status", "--data-root", root.root, "--json")
    doc = json.loads(out.stdout)
    section = _documented("Monitoring: `kexpr status --json`")
    top = re.findall(r"^- `([a-z_]+)`", section, re.MULTILINE)
    worker = [
        name
        for line in section.splitlines()
        if line.startswith("  - ")
        for name in re.findall(r"`worker\.([a-z_]+)`", line.split(":")[0])
    ]
    assert top == sorted(doc) and sorted(doc) == [
        "glossary",
        "identity",
        "left_to_style",
        "problem",
        "schema",
        "supervisor",
        "verdict",
        "worker",
    ]
    assert sorted(worker) == sorted(doc["worker"])
    assert doc["schema"] == "kexpr-status-v1"


def test_every_verdicts_exit_code_is_documented() -> None:
    section = _documented("Monitoring: `kexpr status --json`")
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| ([0-9]) \|", section, re.MULTILINE))
    assert {HealthVerdict(k): int(v) for k, v in rows.items()} == dict(EXIT)

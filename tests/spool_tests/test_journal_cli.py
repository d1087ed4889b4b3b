"""``kexpr journal verify | stats | prune | quarantine``: exit codes, enum findings,
no content in any output."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT
from spool_tests.journal_support import hand_rows, write_segment

from kexpr.ops.journal_cli import cli
from kexpr.spool.fsio import make_flock, publish
from kexpr.spool.layout import DataRoot
from kexpr.spool.retention import Record, write_record

AKEYS = ("1" * 64, "3" * 64, "5" * 64)
AIDS = ("2" * 32, "4" * 32, "6" * 32)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = cli([*argv, "--json"])
    out = capsys.readouterr().out
    assert all(k not in out for k in (*AKEYS, *AIDS)), "no artifact key or attempt id in any output"
    return code, json.loads(out)


def today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def intact(root: DataRoot) -> None:
    write_segment(root, "2026-11-29.jsonl", hand_rows(AKEYS[0], AIDS[0], "2026-11-29", ["timeout"]))
    write_segment(root, f"{today()}.jsonl", hand_rows(AKEYS[1], AIDS[1], today(), []))  # still open


def test_verify_intact_journal_with_an_open_attempt(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    intact(root)
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 0 and out["ok"] is True
    assert (out["segments"], out["attempts"], out["open_attempts"]) == (2, 2, 1)
    assert out["findings"] == [] and out["sharing"] == "private"


@pytest.mark.parametrize(
    ("damage", "finding", "where"),
    [
        (
            lambda r: (r.outcomes / "2026-11-29.jsonl").write_bytes(b'{"x":1}\n'),
            "field_set",
            "outcomes/2026-11-29.jsonl",
        ),
        (
            lambda r: os.chmod(r.outcomes / "2026-11-29.jsonl", 0o644),
            "unsafe_file",
            "outcomes/2026-11-29.jsonl",
        ),
        (lambda r: os.chmod(r.claimed, 0o755), "bad_mode", "spool/claimed"),
        (
            lambda r: os.symlink("/etc/passwd", r.requests / ("a" * 32 + ".json")),
            "symlink",
            "spool/requests/" + "a" * 32 + ".json",
        ),
        (
            lambda r: os.mkfifo(r.responses / ("b" * 32 + ".json"), 0o600),
            "not_regular_file",
            "spool/responses/" + "b" * 32 + ".json",
        ),
        (
            lambda r: (publish(r.tmp, r.identity_key, b"k" * 32), os.chmod(r.identity_key, 0o640)),
            "bad_mode",
            "identity.key",
        ),
        (lambda r: os.symlink("/tmp", r.journal_lock), "symlink", "journal.lock"),
        (lambda r: (r.outcomes / "notes.txt").write_bytes(b""), "unexpected_file", "outcomes"),
    ],
    ids=[
        "malformed_row",
        "segment_mode",
        "dir_mode",
        "spool_symlink",
        "spool_fifo",
        "key_mode",
        "lock_symlink",
        "stray_file",
    ],
)
def test_verify_reports_each_violation_with_exit_1(
    root: DataRoot, capsys: pytest.CaptureFixture[str], damage: Any, finding: str, where: str
) -> None:
    intact(root)
    damage(root)
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 1 and out["ok"] is False
    assert {"finding": finding, "where": where} in out["findings"]


def test_verify_human_output_and_process_exit(root: DataRoot) -> None:
    intact(root)
    with open(root.outcomes / "2026-11-29.jsonl", "ab") as f:
        f.write(b'{"artifact_key":"')
    p = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "journal", "verify", "--data-root", str(root.root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 1
    assert "torn_tail" in p.stderr and "outcomes/2026-11-29.jsonl" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "journal", "verify"],
        capture_output=True,
        text=True,
        check=False,
        cwd=root.root.parent,
    )
    assert p.returncode == 2  # the default ./var/korean-expression-v1 does not exist here: unusable
    p = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "journal", "frobnicate"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 2


def test_verify_tolerates_crash_debris_and_leftover_spool_files(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    intact(root)
    publish(root.tmp, root.responses / ("c" * 32 + ".json"), b"{}")  # never read: shim gave up
    fd = os.open(root.tmp / f".{'d' * 32}.json.123.{'e' * 12}", os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)  # staging left by a SIGKILL
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    # Exit 0; the uncollected response is a warning, not an error.
    assert code == 0 and out["leftovers"] == 1
    assert out["notices"] == [
        {"notice": "spool_leftovers", "where": "1 files in spool/responses or spool/reports"}
    ]


def test_verify_does_not_count_an_open_attempts_accepted_answer_as_leftover(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    from kexpr.spool.contract import Capsule
    from kexpr.spool.contract.answers import answer_document
    from kexpr.spool.messages import SPOOL_VERSION, parse_response

    intact(root)  # AIDS[1] is open
    capsule = Capsule(
        schema_version="korean-expression-v4",
        surface=STYLED_SURFACE,
        artifact_key=AKEYS[1],
        slots=(STYLED_SLOT,),
    )
    composition = answer_document(capsule, {"weekly.interpretation": "[[P:01]]. 다만 [[A:01]]."})
    raw = {
        "spool_version": SPOOL_VERSION,
        "request_id": "c" * 32,
        "attempt_id": AIDS[1],
        "status": "accepted",
        "outcome": "accepted",
        "composition": composition,
    }
    resp = parse_response(json.dumps(raw, ensure_ascii=False).encode("utf-8"))
    publish(root.tmp, root.responses / ("c" * 32 + ".json"), resp.to_bytes())
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 0 and out["leftovers"] == 0 and out["notices"] == []


def test_stats_counts_without_content(root: DataRoot, capsys: pytest.CaptureFixture[str]) -> None:
    intact(root)
    write_segment(
        root,
        "2026-11-28.jsonl",
        hand_rows(AKEYS[2], AIDS[2], "2026-11-28", ["selected"], mode="enabled"),
    )
    code, out = run(capsys, "stats", "--data-root", str(root.root))
    assert code == 0
    assert out["totals"] == {"open": 1, "selected": 1, "timeout": 1}
    assert out["days"]["2026-11-28"] == {"daily.v1": {"enabled": {"selected": 1}}}
    assert out["days"]["2026-11-29"] == {"daily.v1": {"shadow": {"timeout": 1}}}
    os.chmod(root.outcomes / "2026-11-28.jsonl", 0o666)
    code, out = run(capsys, "stats", "--data-root", str(root.root))
    assert code == 1 and out["findings"][0]["finding"] == "unsafe_file"


def test_prune_is_a_dry_run_by_default_and_keeps_open_attempts(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    old = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=40)).isoformat()
    older = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=41)).isoformat()
    edge = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=35)).isoformat()
    write_segment(root, f"{older}.jsonl", hand_rows(AKEYS[0], AIDS[0], older, ["timeout"]))
    write_segment(root, f"{old}.jsonl", hand_rows(AKEYS[1], AIDS[1], old, []))  # open
    write_segment(root, f"{edge}.jsonl", hand_rows(AKEYS[2], AIDS[2], edge, ["timeout"]))
    _agreeing_clock(root)
    code, out = run(capsys, "prune", "--data-root", str(root.root))
    assert code == 0 and out["would_remove"] == [older] and out["kept_open"] == [old]
    assert len(os.listdir(root.outcomes)) == 4
    code, out = run(capsys, "prune", "--data-root", str(root.root), "--apply")
    assert code == 0 and out["removed"] == [older]
    assert sorted(os.listdir(root.outcomes)) == sorted(
        [f"{old}.jsonl", f"{edge}.jsonl", f"{_yesterday()}.jsonl"]
    )
    assert not root.journal_lock.exists() or os.stat(root.journal_lock).st_uid == os.geteuid()


def _yesterday() -> str:
    """A day whose rows (`hand_rows` stamps 10:00) are always under two days old."""
    return (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()


def _agreeing_clock(root: DataRoot) -> None:
    """What a running worker leaves: a recent row and its retention record."""
    day = _yesterday()
    write_segment(root, f"{day}.jsonl", hand_rows("7" * 64, "8" * 32, day, ["timeout"]))
    write_record(root, Record(dt.datetime.now(dt.UTC).replace(microsecond=0)))


@pytest.mark.parametrize(
    ("record", "finding"),
    [
        (None, "record_unreadable"),
        (dt.timedelta(days=-40), "clock_ahead_of_record"),
        (dt.timedelta(days=40), "clock_behind_record"),
    ],
)
def test_prune_removes_nothing_unless_the_clock_agrees_with_the_record(
    root: DataRoot,
    capsys: pytest.CaptureFixture[str],
    record: dt.timedelta | None,
    finding: str,
) -> None:
    """A segment is never removed on the word of the operator's clock alone
    (`kexpr.spool.retention`): no record, or a record far from now, holds."""
    older = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=41)).isoformat()
    write_segment(root, f"{older}.jsonl", hand_rows(AKEYS[0], AIDS[0], older, ["timeout"]))
    day = _yesterday()
    write_segment(root, f"{day}.jsonl", hand_rows(AKEYS[1], AIDS[1], day, ["timeout"]))
    if record is not None:
        write_record(root, Record(dt.datetime.now(dt.UTC).replace(microsecond=0) + record))
    code, out = run(capsys, "prune", "--data-root", str(root.root), "--apply")
    assert code == 1 and out["findings"] == [{"finding": finding, "where": "retention.json"}]
    assert len(os.listdir(root.outcomes)) == 2


def test_prune_refuses_an_unverified_journal(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    older = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=41)).isoformat()
    write_segment(root, f"{older}.jsonl", hand_rows(AKEYS[0], AIDS[0], older, ["timeout"])[:-1])
    code, out = run(capsys, "prune", "--data-root", str(root.root), "--apply")
    assert code == 1 and out["findings"] == [
        {"finding": "torn_tail", "where": f"outcomes/{older}.jsonl"}
    ]
    assert os.listdir(root.outcomes) == [f"{older}.jsonl"]


def test_quarantine_command_flow(root: DataRoot, capsys: pytest.CaptureFixture[str]) -> None:
    intact(root)
    seg = root.outcomes / "2026-11-29.jsonl"
    with open(seg, "ab") as f:
        f.write(b'{"artifact_key":"' + b"7" * 40)
    torn = seg.read_bytes()
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 1 and out["findings"] == [
        {"finding": "torn_tail", "where": "outcomes/2026-11-29.jsonl"}
    ]
    lock = make_flock(root.worker_lock)
    lock.acquire()
    try:
        code, out = run(
            capsys,
            "quarantine",
            "--data-root",
            str(root.root),
            "--segment",
            "2026-11-29",
            "--apply",
        )
        assert code == 1 and out["findings"] == [
            {"finding": "worker_running", "where": "worker.lock"}
        ]
    finally:
        lock.release()
    code, out = run(capsys, "quarantine", "--data-root", str(root.root), "--segment", "2026-11-29")
    assert (
        code == 0 and out["would_quarantine_to"] == "quarantine/2026-11-29.1.jsonl" and seg.exists()
    )
    code, out = run(
        capsys, "quarantine", "--data-root", str(root.root), "--segment", "2026-11-29", "--apply"
    )
    assert code == 0 and out["quarantined_to"] == "quarantine/2026-11-29.1.jsonl"
    assert (root.quarantine / "2026-11-29.1.jsonl").read_bytes() == torn
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert (
        code == 0 and out["quarantined"] == ["2026-11-29.1.jsonl"] and out["sealed_artifacts"] == 1
    )
    code, out = run(
        capsys, "quarantine", "--data-root", str(root.root), "--segment", today(), "--apply"
    )
    assert code == 1 and out["findings"] == [
        {"finding": "not_torn", "where": f"outcomes/{today()}.jsonl"}
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_verify_judges_ownership_against_the_data_root_owner(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator (root here) auditing a root the worker's user owns."""
    intact(root)
    for dirpath, dirnames, filenames in os.walk(root.root):
        for n in (*dirnames, *filenames):
            os.chown(os.path.join(dirpath, n), 65534, -1)
    os.chown(root.root, 65534, -1)
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 0, out
    os.chown(root.outcomes / "2026-11-29.jsonl", 0, -1)  # one file of someone else
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert (
        code == 1
        and {"finding": "unsafe_file", "where": "outcomes/2026-11-29.jsonl"} in out["findings"]
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="a shared group root is set up with chown")
def test_verify_a_shared_group_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    os.chown(d, -1, 65534)
    os.chmod(d, 0o2770)
    root = DataRoot(d)
    root.ensure()
    publish(root.tmp, root.requests / ("a" * 32 + ".json"), b"{}")
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 0 and out["sharing"] == "shared_group"
    os.chmod(root.requests / ("a" * 32 + ".json"), 0o666)
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 1 and out["findings"] == [
        {"finding": "bad_mode", "where": "spool/requests/" + "a" * 32 + ".json"}
    ]


def test_verify_knows_every_file_the_product_writes_into_the_data_root(
    root: DataRoot, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A rehearsal root with the operator's glossary installed: the guide tells the
    operator to create or expect both files, and verify listed each as
    ``unexpected_entry``."""
    from kexpr.ops.glossary_cli import cli as glossary
    from kexpr.spool.rehearsal import mark_rehearsal_root

    intact(root)
    mark_rehearsal_root(root)
    glossary_file = tmp_path / "operator-glossary.json"
    glossary_file.write_text(
        json.dumps(
            {
                "version": "kexpr-dual-glossary-v1",
                "decisions": {"P_DUAL_DECISION_KEEP_TARGET": "현재 목표 섭취량 유지"},
                "reasons": {"P_DUAL_REASON_TREND_SHORT": "체중 추세를 판단할 기간이 짧습니다."},
            },
            ensure_ascii=False,
        ),
        "utf-8",
    )
    assert glossary(["install", str(glossary_file), "--data-root", str(root.root)]) == 0
    capsys.readouterr()
    assert {"rehearsal.marker", "operator-glossary.json"} <= set(os.listdir(root.root))
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 0 and out["findings"] == []
    assert out["notices"] == []


def test_verify_knows_the_staging_files_of_a_live_root(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    """Met while they are written: the heartbeats are replaced through a staging
    file beside them, and ``tmp/`` stages files whose names hold a hyphen (the
    glossary, the quarantine ask). Verify listed them as ``unexpected_entry``."""
    intact(root)
    staged = [
        root.root / ".worker.status.json.7.0123456789ab",
        root.root / ".identity.key.7.0123456789ab",
        root.tmp / ".operator-glossary.json.7.0123456789ab",
        root.tmp / ".quarantine-clear.request.7.0123456789ab",
        root.tmp / f".{'ab' * 16}.json.reserve.7.0123456789ab",
    ]
    for path in staged:
        path.write_bytes(b"{")
        path.chmod(0o600)
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert code == 0 and out["findings"] == [] and out["notices"] == []
    (root.root / ".worker.status.json.7.01234567").write_bytes(b"{")  # not a staging name
    code, out = run(capsys, "verify", "--data-root", str(root.root))
    assert out["notices"] == [{"notice": "unexpected_entry", "where": "<unrecognized>"}]


def test_verify_accepts_a_staging_name_only_where_and_while_the_product_writes_it(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    """A staging shape was accepted for any final name, anywhere a staging file
    may be, with any "pid" of up to 10 digits, and a finding on such a file
    printed its name as it was: digits and all. Now each is an unexpected entry
    named ``<unrecognized>``, in the human report and the JSON alike; and a
    staging file the product does write there, three days old, is the notice
    ``stale_staging_file``."""
    intact(root)
    hexes = "d15ea5edbeef"
    planted = [
        root.root / f".identity.key.1234567890.{hexes}",  # no pid has 10 digits
        root.root / f".spool.48213.{hexes}",  # never staged at the top
        root.root / f".journal.lock.48213.{hexes}",  # never replaced
        root.tmp / f".outcomes.48213.{hexes}",  # never staged in tmp/
        root.tmp / f".{'c0ffee00' * 4}.json.1234567890.{hexes}",
        root.requests / f".{'c0ffee00' * 4}.json.48213.{hexes}",  # staged only in tmp/
    ]
    for path in planted:
        path.write_text('{"note": "김민지 010-4821-7365"}', "utf-8")
        path.chmod(0o644)  # a finding on it printed its name
    stale = root.tmp / f".{'c0ffee01' * 4}.json.39.{hexes}"
    stale.write_bytes(b"{")
    stale.chmod(0o600)
    then = dt.datetime.now(dt.UTC).timestamp() - 3 * 86400
    os.utime(stale, (then, then))
    code = cli(["verify", "--data-root", str(root.root), "--json"])
    text = capsys.readouterr().out
    out = json.loads(text)
    assert code == 1 and out["ok"] is False
    cli(["verify", "--data-root", str(root.root)])
    captured = capsys.readouterr()
    text += captured.out + captured.err + json.dumps(out, ensure_ascii=False)
    for needle in ("1234567890", "48213", "c0ffee00", ".outcomes", ".spool", ".journal.lock"):
        assert needle not in text, needle
    unrecognized = {"<unrecognized>", "spool/tmp/<unrecognized>", "spool/requests/<unrecognized>"}
    assert {(n["notice"], n["where"]) for n in out["notices"]} == {
        *(("unexpected_entry", w) for w in unrecognized),
        ("stale_staging_file", f"spool/tmp/{stale.name}"),
    }
    assert {f["where"] for f in out["findings"]} <= unrecognized


def test_verify_names_an_entry_it_does_not_know_without_its_name(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name the product did not make could carry content: verify printed it
    as it was; it is named as the audit names it (`display_path`)."""
    intact(root)
    leak = "김민지 72.4kg"
    (root.root / leak).write_text("x")
    (root.requests / leak).write_text("x")
    (root.requests / leak).chmod(0o644)
    (root.tmp / leak).write_text("x")
    code = cli(["verify", "--data-root", str(root.root), "--json"])
    text = capsys.readouterr().out
    assert leak not in text and "김민지" not in text and "72.4" not in text
    out = json.loads(text)
    assert code == 1
    assert out["notices"] == [
        {"notice": "unexpected_entry", "where": w}
        for w in ("<unrecognized>", "spool/requests/<unrecognized>", "spool/tmp/<unrecognized>")
    ]
    assert {"finding": "bad_mode", "where": "spool/requests/<unrecognized>"} in out["findings"]


def test_verify_and_audit_know_the_same_top_level_files(root: DataRoot) -> None:
    from kexpr.ops._audit_data_root import _TOP_LEVEL
    from kexpr.ops.journal_cli import ROOT_FILES

    dirs = {p.name for p in root.product_dirs() if p.parent == root.root}
    assert set(ROOT_FILES) == _TOP_LEVEL - dirs

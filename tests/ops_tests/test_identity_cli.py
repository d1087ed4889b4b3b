"""``kexpr identity`` and the identity in ``kexpr status`` / ``kexpr audit``: a key
that is missing or not the recorded one beside a journal with rows is named (a
finding, never healthy or clean), and a rotation on purpose is one command."""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
from pathlib import Path

import pytest
from spool_tests.journal_support import hand_rows, write_segment

from gateway_shim.identity import fingerprint, load_or_create_key
from kexpr.ops import identity_cli
from kexpr.ops._audit_data_root import audit_data_root
from kexpr.ops.identity_cli import IdentityState, cli, identity_report
from kexpr.ops.readers import ReadProblem, ReadRefused
from kexpr.ops.status_cli import HealthVerdict, collect, render
from kexpr.spool import _journal_identity as journal_identity
from kexpr.spool.fsio import create_private_file, replace_private
from kexpr.spool.layout import DataRoot

NOW = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def root(data_root: Path) -> DataRoot:
    r = DataRoot(data_root)
    r.ensure()
    return r


def _rows(root: DataRoot) -> None:
    """A journal that holds one attempt (rows that verify)."""
    write_segment(
        root, "2026-11-30.jsonl", hand_rows("1" * 32, "2" * 32, "2026-11-30", ["timeout"])
    )


def _ready_worker(root: DataRoot) -> None:
    ts = (NOW - dt.timedelta(seconds=0.5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    doc = {
        "schema": "kexpr-worker-status-v1",
        "state": "ready",
        "pid": os.getpid(),
        "heartbeat_at_utc": ts,
        "journal": "verified",
        "quarantine": None,
    }
    replace_private(root.status_file, json.dumps(doc).encode())


def _check(root: DataRoot, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    code = cli(["check", "--data-root", str(root.root)])
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return code, out


def test_a_fresh_root_then_a_served_one_are_fine(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _check(root, capsys) == (
        0,
        {
            "fingerprint": None,
            "journal_fingerprint": None,
            "problem": None,
            "sealed": 0,
            "state": "no_key_yet",
        },
    )
    key = load_or_create_key(root)
    _rows(root)
    code, out = _check(root, capsys)
    assert (code, out["state"], out["fingerprint"]) == (0, "matches", fingerprint(key))
    journal_identity.write(root, fingerprint(key))  # the worker's first attempt
    code, out = _check(root, capsys)
    assert (code, out["state"], out["journal_fingerprint"]) == (0, "matches", fingerprint(key))
    root.identity_record.unlink()  # the journal proves the key: recorded again
    assert _check(root, capsys)[:2] == (0, {**out, "state": "not_recorded", "fingerprint": None})


@pytest.mark.parametrize("journal", [False, True], ids=["no_journal_record", "journal_record"])
def test_a_deleted_record_and_another_key_fail_check_status_and_audit(
    root: DataRoot, capsys: pytest.CaptureFixture[str], journal: bool
) -> None:
    """The issue's case 2: the record that disagreed deleted, another key present.
    With the journal's record the key is ``key_differs``; without it (a journal
    an earlier release wrote) nothing proves the key: ``proof_missing``."""
    key = load_or_create_key(root)
    _rows(root)
    if journal:
        journal_identity.write(root, fingerprint(key))
    root.identity_record.unlink()
    root.identity_key.unlink()
    create_private_file(root.tmp, root.identity_key, secrets.token_bytes(32))
    state = "key_differs" if journal else "proof_missing"
    code, out = _check(root, capsys)
    assert (code, out["state"]) == (1, state)
    _ready_worker(root)
    report = collect(root, now=NOW, alive=lambda pid: True)
    assert report.verdict is HealthVerdict.IDENTITY_MISMATCH
    assert f"identity    {state}  " in render(report)
    audit = audit_data_root(root.root)
    assert [(i.finding.value, i.detail) for i in audit.findings] == [("identity_mismatch", state)]


def test_adopt_records_an_unproven_key_and_nothing_else(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    key = load_or_create_key(root)
    _rows(root)
    root.identity_record.unlink()  # a root from before the record
    assert _check(root, capsys)[:1] == (1,)
    assert cli(["adopt", "--data-root", str(root.root)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"adopted": True, "fingerprint": fingerprint(key), "problem": None}
    assert _check(root, capsys)[1]["state"] == "matches"
    assert cli(["adopt", "--data-root", str(root.root)]) == 1
    assert json.loads(capsys.readouterr().out) == {
        "adopted": False,
        "problem": "nothing_to_adopt",
    }


@pytest.mark.parametrize("replaced", [False, True], ids=["missing", "differs"])
def test_a_lost_key_is_a_finding_in_check_status_and_audit(
    root: DataRoot, capsys: pytest.CaptureFixture[str], replaced: bool
) -> None:
    load_or_create_key(root)
    _rows(root)
    root.identity_key.unlink()
    if replaced:
        create_private_file(root.tmp, root.identity_key, secrets.token_bytes(32))
    state = "key_differs" if replaced else "key_missing"
    code, out = _check(root, capsys)
    assert (code, out["state"]) == (1, state)

    _ready_worker(root)
    report = collect(root, now=NOW, alive=lambda pid: True)
    assert report.verdict is HealthVerdict.IDENTITY_MISMATCH
    assert report.to_json()["identity"]["state"] == state
    assert f"identity    {state}  " in render(report)

    audit = audit_data_root(root.root)
    assert audit.status == "findings"
    assert [(i.finding.value, i.detail) for i in audit.findings] == [("identity_mismatch", state)]
    assert audit.info["identity"] == state


def test_a_healthy_worker_on_a_sound_identity_stays_healthy(root: DataRoot) -> None:
    load_or_create_key(root)
    _rows(root)
    _ready_worker(root)
    report = collect(root, now=NOW, alive=lambda pid: True)
    assert report.verdict is HealthVerdict.HEALTHY
    assert "identity    matches  the key is the recorded one  fingerprint " in render(report)


def test_a_stopped_worker_is_still_said_first(root: DataRoot) -> None:
    _rows(root)  # no key beside rows
    report = collect(root, now=NOW, alive=lambda pid: True)
    assert report.verdict is HealthVerdict.NO_STATUS  # the worker's state explains more
    assert report.identity is not None and report.identity.finding


def test_a_key_this_user_cannot_read_is_unchecked_not_clean(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    load_or_create_key(root)
    real = identity_cli.read_nofollow

    def denied(path: os.PathLike[str] | str, *, max_bytes: int) -> bytes:
        if Path(path).name == "identity.key":
            raise ReadRefused(ReadProblem.PERMISSION_DENIED)
        return real(path, max_bytes=max_bytes)

    monkeypatch.setattr(identity_cli, "read_nofollow", denied)
    report = identity_report(root)
    assert (report.state, report.problem) == (IdentityState.UNCHECKED, "key_permission_denied")
    assert not report.finding
    assert _check(root, capsys)[0] == 2


def test_a_malformed_record_is_a_finding(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    load_or_create_key(root)
    root.identity_record.write_bytes(b'{"fingerprint":"nope"}')
    assert _check(root, capsys)[:1] == (1,)
    assert identity_report(root).state is IdentityState.RECORD_INVALID


def test_rotate_seals_then_check_shows_it(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    old = load_or_create_key(root)
    _rows(root)
    assert cli(["rotate", "--data-root", str(root.root)], now=lambda: NOW) == 0
    done = json.loads(capsys.readouterr().out)
    new = root.identity_key.read_bytes()
    assert done == {
        "finished_earlier_rotation": False,
        "fingerprint": fingerprint(new),
        "problem": None,
        "pruned": 0,
        "rotated": True,
        "sealed": 1,
    }
    assert new != old
    code, out = _check(root, capsys)
    assert (code, out["state"], out["sealed"]) == (0, "matches", 1)


def test_rotate_refuses_a_lost_key_unless_told_it_is_lost(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    load_or_create_key(root)
    _rows(root)
    root.identity_key.unlink()
    assert cli(["rotate", "--data-root", str(root.root)], now=lambda: NOW) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"problem": "key_missing", "rotated": False}
    assert err.startswith("kexpr identity rotate: refused: key_missing: identity.key is missing")
    assert not root.identity_key.exists()
    assert cli(["rotate", "--data-root", str(root.root), "--old-key-lost"], now=lambda: NOW) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["rotated"] is True
    assert "may be attempted once more" in err
    assert identity_report(root).state is IdentityState.MATCHES


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the key to another user needs root")
def test_rotate_as_another_user_than_the_keys_owner_is_refused(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    load_or_create_key(root)
    key = root.identity_key.read_bytes()
    os.chown(root.identity_key, 65534, -1)  # the gateway's, not ours
    assert cli(["rotate", "--data-root", str(root.root)], now=lambda: NOW) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["problem"] == "not_key_owner"
    assert "run it as the gateway's user" in err
    assert root.identity_key.read_bytes() == key

"""The journal's proof of its key, and a moved root (`gateway_shim.identity`
rules 6 and 7; `kexpr.spool._journal_identity`).

``outcomes/identity.json`` names the fingerprint of the key the journal's rows
were written under. Where it exists it decides: neither deleting
``identity.fingerprint`` nor a restore that brings back another key (with or
without its own record) re-keys an artifact. Where it does not, a key with no
record beside rows is ``proof_missing`` until the operator attests it. A
gateway that served an identity at a path never mints in a root found there
later with no key and no journal.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import shutil
from pathlib import Path

import pytest

from gateway_shim import _identity_store as store
from gateway_shim._data_root import DataRootHold
from gateway_shim._responses import ResponseWaiters
from gateway_shim.identity import (
    JOURNAL_RULES,
    Action,
    IdentityProblem,
    IdentityRefused,
    Journal,
    Recorded,
    fingerprint,
    load_or_create_key,
    parse_sealed,
)
from kexpr.spool import _journal_identity as journal_identity
from kexpr.spool.fsio import create_private_file
from kexpr.spool.layout import DataRoot

NOW = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)


def _root(tmp_path: Path) -> DataRoot:
    root = DataRoot(tmp_path / "r")
    root.ensure()
    return root


def _row(root: DataRoot, day: str = "2026-11-30") -> None:
    (root.outcomes / f"{day}.jsonl").write_bytes(b'{"a row":1}\n')
    os.chmod(root.outcomes / f"{day}.jsonl", 0o600)


def _journaled(root: DataRoot, key: bytes) -> None:
    """What the worker writes at the first attempt under ``key``."""
    _row(root)
    journal_identity.write(root, fingerprint(key))


def _put_key(root: DataRoot, key: bytes) -> None:
    root.identity_key.unlink(missing_ok=True)
    create_private_file(root.tmp, root.identity_key, key)


def _refused(root: DataRoot) -> IdentityProblem:
    with pytest.raises(IdentityRefused) as e:
        store.load_identity(root)
    return e.value.problem


# ------------------------------------------------------------------ the table


def test_the_journal_rules_are_total_and_never_mint() -> None:
    domain = {
        (present, state, said)
        for present in (False, True)
        for state in Recorded
        for said in (Journal.MATCHES, Journal.CONTINUED, Journal.OTHER)
        if present or (state in (Recorded.ABSENT, Recorded.OTHER) and said is Journal.OTHER)
    }
    assert set(JOURNAL_RULES) == domain
    assert Action.MINT not in JOURNAL_RULES.values()
    # A key the journal does not name and does not continue from: refused,
    # whatever the record beside the key says.
    assert {v for (_, _, said), v in JOURNAL_RULES.items() if said is Journal.OTHER} == {
        IdentityProblem.KEY_MISSING,
        IdentityProblem.KEY_DIFFERS,
    }
    # The journal's own key is served whatever the record beside it says.
    assert {v for (_, _, said), v in JOURNAL_RULES.items() if said is Journal.MATCHES} <= {
        Action.SERVE,
        Action.RECORD,
    }


# ------------------------------------------- the case 2, file by file


def test_a_deleted_record_beside_the_journals_key_is_written_again(tmp_path: Path) -> None:
    root = _root(tmp_path)
    key = load_or_create_key(root)
    _journaled(root, key)
    root.identity_record.unlink()
    identity = store.load_identity(root)
    assert identity.key == key and identity.fingerprint == fingerprint(key)
    assert root.identity_record.exists()


def test_a_deleted_record_does_not_let_another_key_in(tmp_path: Path) -> None:
    """The issue's case: the file that disagreed deleted, another key present."""
    root = _root(tmp_path)
    _journaled(root, load_or_create_key(root))
    other = secrets.token_bytes(32)
    _put_key(root, other)
    assert _refused(root) is IdentityProblem.KEY_DIFFERS  # the record still names the old
    root.identity_record.unlink()
    assert _refused(root) is IdentityProblem.KEY_DIFFERS
    assert not root.identity_record.exists()  # nothing recorded on trust
    assert root.identity_key.read_bytes() == other


def test_a_restore_of_another_deployments_identity_files_is_refused(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _journaled(root, load_or_create_key(root))
    elsewhere = _root(tmp_path / "elsewhere")
    load_or_create_key(elsewhere)
    store.rotate(elsewhere, NOW)  # with a sealed key of its own
    for f in ("identity_key", "identity_record", "identity_sealed"):
        getattr(root, f).unlink(missing_ok=True)
        os.link(getattr(elsewhere, f), getattr(root, f))
    assert _refused(root) is IdentityProblem.KEY_DIFFERS


def test_a_rollback_to_a_key_the_journal_moved_on_from_is_refused(tmp_path: Path) -> None:
    root = _root(tmp_path)
    first = load_or_create_key(root)
    _journaled(root, first)
    saved = {f: getattr(root, f).read_bytes() for f in ("identity_key", "identity_record")}
    store.rotate(root, NOW)
    journal_identity.write(root, store.load_identity(root).fingerprint)  # the worker moved on
    # An old backup of the key and its record put back (identity.sealed left).
    root.identity_record.unlink()
    _put_key(root, saved["identity_key"])
    root.identity_record.write_bytes(saved["identity_record"])
    os.chmod(root.identity_record, 0o600)
    assert _refused(root) is IdentityProblem.KEY_DIFFERS


def test_a_missing_key_beside_the_journals_record_is_refused(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _journaled(root, load_or_create_key(root))
    root.identity_key.unlink()
    root.identity_record.unlink()
    assert _refused(root) is IdentityProblem.KEY_MISSING
    assert not root.identity_key.exists()


@pytest.mark.parametrize(
    "data",
    [b"", b"{}", b'{"fingerprint":"' + b"0" * 32 + b'"}', b'{"schema":"x"}'],
    ids=["empty", "object", "no_schema", "no_fingerprint"],
)
def test_a_journal_record_not_in_its_format_is_refused(tmp_path: Path, data: bytes) -> None:
    root = _root(tmp_path)
    load_or_create_key(root)
    _row(root)
    journal_identity.path(root).write_bytes(data)
    os.chmod(journal_identity.path(root), 0o600)
    assert _refused(root) is IdentityProblem.RECORD_INVALID


# -------------------------------------------------- rotations and a lost key


def test_a_rotation_continues_from_the_journals_key(tmp_path: Path) -> None:
    root = _root(tmp_path)
    first = load_or_create_key(root)
    _journaled(root, first)
    store.rotate(root, NOW)
    identity = store.load_identity(root)
    assert identity.key != first
    assert identity.earlier == (fingerprint(first),)
    # Until the worker moves on, the record beside the key finishes a rotation:
    # deleted, it is written again (the sealed keys prove the continuity).
    root.identity_record.unlink()
    assert store.load_identity(root).key == identity.key
    # A second rotation before any attempt: both earlier keys are named.
    store.rotate(root, NOW)
    again = store.load_identity(root)
    assert again.earlier == (fingerprint(first), identity.fingerprint)


def test_the_key_the_journal_names_stays_sealed_however_old(tmp_path: Path) -> None:
    """A rotation, then no attempt for longer than the journal's window, then
    another rotation: the first key's rows are gone, but the journal's record
    still names it; dropped, every presentation would be ``key_differs``."""
    root = _root(tmp_path)
    first = load_or_create_key(root)
    _journaled(root, first)  # rows of 2026-11-30
    store.rotate(root, NOW)
    (root.outcomes / "2026-11-30.jsonl").unlink()  # retention, 36 days on
    _row(root, "2027-01-06")
    done = store.rotate(root, NOW + dt.timedelta(days=37))
    assert (done.sealed, done.pruned) == (2, 0)
    assert fingerprint(first) in store.load_identity(root).earlier


def test_a_lost_key_is_let_go_and_the_journal_may_move_on(tmp_path: Path) -> None:
    root = _root(tmp_path)
    first = load_or_create_key(root)
    _journaled(root, first)
    root.identity_key.unlink()
    assert _refused(root) is IdentityProblem.KEY_MISSING
    done = store.rotate(root, NOW, old_key_lost=True)
    identity = store.load_identity(root)
    assert done.fingerprint == identity.fingerprint
    assert identity.sealed == ()  # nothing to dedupe under: the key is gone
    assert identity.earlier == (fingerprint(first),)  # but the journal may move on
    (let_go,) = parse_sealed(root.identity_sealed.read_bytes())
    assert (let_go.key, let_go.fingerprint) == (None, fingerprint(first))


def test_an_unproven_key_is_refused_until_adopted(tmp_path: Path) -> None:
    """A data root a release before the record wrote (a key and rows, no
    record, no journal record): nothing proves the key."""
    root = _root(tmp_path)
    key = secrets.token_bytes(32)
    create_private_file(root.tmp, root.identity_key, key)
    _row(root)
    assert _refused(root) is IdentityProblem.PROOF_MISSING
    assert not root.identity_record.exists()
    assert store.adopt(root) == fingerprint(key)
    assert store.load_identity(root).key == key
    with pytest.raises(store.RotationRefused) as e:
        store.adopt(root)
    assert e.value.problem is store.RotationProblem.NOTHING_TO_ADOPT


def test_adopt_never_overrides_the_journal(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _journaled(root, load_or_create_key(root))
    root.identity_record.unlink()
    _put_key(root, secrets.token_bytes(32))
    with pytest.raises(store.RotationRefused) as e:
        store.adopt(root)
    assert e.value.problem is store.RotationProblem.NOTHING_TO_ADOPT
    assert not root.identity_record.exists()


def test_an_unproven_key_may_be_let_go(tmp_path: Path) -> None:
    root = _root(tmp_path)
    create_private_file(root.tmp, root.identity_key, secrets.token_bytes(32))
    _row(root)
    store.rotate(root, NOW, old_key_lost=True)
    identity = store.load_identity(root)  # proven by the record now; the worker adopts
    assert identity.earlier == ()


# ----------------------------------------------------- rule 7: a moved root


def test_a_gateway_does_not_mint_in_a_root_swapped_in_at_its_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kexpr")
    root = _root(tmp_path)
    hold = DataRootHold(root, ResponseWaiters(root.responses))
    try:
        first = hold.ensure_started()
        _journaled(root, first.key)
        # Another directory put at the path (an empty one: no key, no journal).
        os.rename(root.root, tmp_path / "moved-away")
        os.mkdir(root.root, 0o700)
        hold.recheck_identity()
        with pytest.raises(IdentityRefused) as e:
            hold.ensure_started()
        assert e.value.problem is IdentityProblem.ROOT_REPLACED
        assert not root.identity_key.exists()  # nothing minted
        said = [r.getMessage() for r in caplog.records if r.name == "kexpr.shim"]
        assert said.count("identity_mismatch reason=root_replaced") == 1
        # The original put back: served again, the same key.
        shutil.rmtree(root.root)  # (the spool's directories were made in it)
        os.rename(tmp_path / "moved-away", root.root)
        hold.recheck_identity()
        assert hold.ensure_started().key == first.key
    finally:
        hold.close()
    # A gateway process started on an empty root mints, as before.
    os.rename(root.root, tmp_path / "kept")
    os.mkdir(root.root, 0o700)
    fresh = DataRootHold(root, ResponseWaiters(root.responses))
    try:
        assert fresh.ensure_started().key != first.key
    finally:
        fresh.close()


def test_a_lost_key_is_not_let_go_past_the_sealed_limit(tmp_path: Path) -> None:
    """Eight sealed keys, the journal naming another (lost) key: the let-go entry
    would be a ninth, so the rotation is refused and nothing is written."""
    root = _root(tmp_path)
    load_or_create_key(root)
    _row(root)
    for _ in range(8):
        store.rotate(root, NOW)
    journal_identity.write(root, "e" * 32)  # a key none of the files holds
    before = {f: getattr(root, f).read_bytes() for f in ("identity_key", "identity_sealed")}
    with pytest.raises(store.RotationRefused) as e:
        store.rotate(root, NOW, old_key_lost=True)
    assert e.value.problem is store.RotationProblem.TOO_MANY_SEALED
    assert {f: getattr(root, f).read_bytes() for f in before} == before


def test_an_unsafe_journal_record_is_a_journal_finding(tmp_path: Path) -> None:
    from kexpr.spool.journal import audit_journal

    root = _root(tmp_path)
    _journaled(root, load_or_create_key(root))
    os.chmod(journal_identity.path(root), 0o644)  # readable by anyone: not ours
    where = "outcomes/identity.json"  # (the hand-made row has findings of its own)
    assert [f.finding for f in audit_journal(root).findings if f.where == where] == ["bad_mode"]
    os.chmod(journal_identity.path(root), 0o600)
    assert [f for f in audit_journal(root).findings if f.where == where] == []

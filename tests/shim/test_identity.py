"""identity.key, the HMAC artifact key, and the identity as evidence: the record
of the key's fingerprint, the refusal of a lost or replaced key beside journal
rows, and the rotation on purpose (`gateway_shim.identity` rules 1-4)."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging
import os
import secrets
from pathlib import Path

import pytest

from gateway_shim import Outcome
from gateway_shim import _identity_store as store
from gateway_shim import identity as ident
from gateway_shim.identity import (
    DOMAIN,
    IDENTITY_RULES,
    Action,
    IdentityProblem,
    IdentityRefused,
    Recorded,
    artifact_key,
    encode_fields,
    fingerprint,
    load_or_create_key,
)
from kexpr.spool.fsio import UnsafePath, UnsafeReason
from kexpr.spool.fsio import create_private_file as _create
from kexpr.spool.layout import DataRoot


def test_vector() -> None:
    key = bytes(range(32))
    fields = ("daily.v1", "evt-1")
    msg = b"korean-expression-v4\x00" + b"\x00\x00\x00\x08daily.v1" + b"\x00\x00\x00\x05evt-1"
    assert encode_fields(fields) == msg
    # HMAC-SHA-256 truncated to 128 bits, the old 64-hex key's prefix.
    assert artifact_key(key, fields) == hmac.new(key, msg, hashlib.sha256).hexdigest()[:32]


def test_fields_are_nfc_normalized_and_length_prefixed() -> None:
    key = b"k" * 32
    decomposed = "\u1100\u1161"  # 가 decomposed
    assert artifact_key(key, ("x", decomposed)) == artifact_key(key, ("x", "가"))
    # length prefixes keep ("ab","c") and ("a","bc") apart
    assert artifact_key(key, ("ab", "c")) != artifact_key(key, ("a", "bc"))
    assert DOMAIN.endswith(b"\0")


def test_key_created_once_private(tmp_path: Path) -> None:
    root = DataRoot(tmp_path / "r")
    root.ensure()
    k1 = load_or_create_key(root)
    k2 = load_or_create_key(root)
    assert k1 == k2 and len(k1) == 32
    assert os.stat(root.identity_key).st_mode & 0o777 == 0o600


def test_symlinked_key_is_refused(tmp_path: Path) -> None:
    root = DataRoot(tmp_path / "r")
    root.ensure()
    (tmp_path / "evil").write_bytes(b"x" * 32)
    root.identity_key.symlink_to(tmp_path / "evil")
    with pytest.raises(UnsafePath) as e:
        load_or_create_key(root)
    assert e.value.reason is UnsafeReason.SYMLINK


def test_world_readable_key_is_refused(tmp_path: Path) -> None:
    root = DataRoot(tmp_path / "r")
    root.ensure()
    load_or_create_key(root)
    os.chmod(root.identity_key, 0o644)
    with pytest.raises(UnsafePath) as e:
        load_or_create_key(root)
    assert e.value.reason is UnsafeReason.BAD_MODE


def test_short_key_is_refused(tmp_path: Path) -> None:
    root = DataRoot(tmp_path / "r")
    root.ensure()
    fd = os.open(root.identity_key, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"short")
    os.close(fd)
    with pytest.raises(UnsafePath):
        load_or_create_key(root)


def test_group_readable_key_is_refused(tmp_path: Path) -> None:
    # identity.key stays 0600 even where the spool is shared with a group (0660).
    root = DataRoot(tmp_path / "r")
    root.ensure()
    load_or_create_key(root)
    os.chmod(root.identity_key, 0o640)
    with pytest.raises(UnsafePath):
        load_or_create_key(root)


def test_gateways_starting_at_once_all_get_the_one_key(tmp_path: Path) -> None:
    """The crash suite once saw two artifact keys for one artifact: a gateway
    opened the key file another had just created and not yet written, read
    0 bytes and failed. The key now appears complete or not at all."""
    import threading

    for round_ in range(20):
        root = DataRoot(tmp_path / f"r{round_}")
        root.ensure()
        gate = threading.Barrier(6)
        keys: list[bytes | Exception] = []

        def start(
            gate: threading.Barrier = gate,
            keys: list[bytes | Exception] = keys,
            root: DataRoot = root,
        ) -> None:
            gate.wait()
            try:
                keys.append(load_or_create_key(root))
            except Exception as e:  # noqa: BLE001 -- recorded, asserted below
                keys.append(e)

        threads = [threading.Thread(target=start) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(keys) == 6 and all(isinstance(k, bytes) and len(k) == 32 for k in keys), keys
        assert len(set(keys)) == 1


def test_the_key_is_never_visible_half_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic form of the race: while the creator is between its create
    and its write, the key path must not exist yet."""
    from kexpr.spool import fsio

    root = DataRoot(tmp_path / "r")
    root.ensure()
    seen: list[bool] = []
    real_write_all = fsio._write_all

    def write_all(fd: int, data: bytes) -> None:
        seen.append(root.identity_key.exists())
        real_write_all(fd, data)

    monkeypatch.setattr(fsio, "_write_all", write_all)
    key = load_or_create_key(root)
    # The key's write, then the record's (its fingerprint, published after it).
    assert seen == [False, True] and len(key) == 32
    assert os.listdir(root.tmp) == []  # the staging file is gone


# --------------------------------------------------- the identity is evidence
#
# gateway_shim.identity rules 1-4: the record, the refusal, the rotation.

NOW = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)


def _root(tmp_path: Path) -> DataRoot:
    root = DataRoot(tmp_path / "r")
    root.ensure()
    return root


def _row(root: DataRoot, day: str = "2026-11-30") -> None:
    """A journal that holds rows (what the worker would have written)."""
    (root.outcomes / f"{day}.jsonl").write_bytes(b'{"a row":1}\n')
    os.chmod(root.outcomes / f"{day}.jsonl", 0o600)


def _record(root: DataRoot) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(root.identity_record.read_bytes())
    return loaded


def test_the_rules_are_total_and_refuse_only_beside_rows() -> None:
    domain = {
        (present, state, rows)
        for present in (False, True)
        for state in Recorded
        for rows in (False, True)
        if present or state in (Recorded.ABSENT, Recorded.OTHER)
    }
    assert set(IDENTITY_RULES) == domain
    # Without rows nothing can be paid twice: never a refusal.
    assert all(isinstance(v, Action) for (_, _, rows), v in IDENTITY_RULES.items() if not rows)
    assert IDENTITY_RULES[(False, Recorded.ABSENT, True)] is IdentityProblem.KEY_MISSING
    assert IDENTITY_RULES[(True, Recorded.OTHER, True)] is IdentityProblem.KEY_DIFFERS
    assert IDENTITY_RULES[(True, Recorded.SEALED, True)] is IdentityProblem.ROTATION_UNFINISHED
    # Never a mint beside a key, never a mint beside rows.
    assert [k for k, v in IDENTITY_RULES.items() if v is Action.MINT] == [
        (False, Recorded.ABSENT, False),
        (False, Recorded.OTHER, False),
    ]


def test_the_fingerprint_is_keyed_domain_separated_and_not_the_key() -> None:
    key = bytes(range(32))
    fp = fingerprint(key)
    assert fp == hmac.new(key, b"kexpr identity fingerprint v1", hashlib.sha256).hexdigest()[:32]
    assert fp != fingerprint(bytes(32)) and key.hex() not in fp and fp not in key.hex()
    # No artifact's HMAC message can be the fingerprint's (DOMAIN prefixes every one).
    assert not ident.FINGERPRINT_DOMAIN.startswith(DOMAIN)


def test_a_fresh_root_mints_and_records(tmp_path: Path) -> None:
    root = _root(tmp_path)
    key = load_or_create_key(root)
    assert _record(root) == {"fingerprint": fingerprint(key), "schema": "kexpr-identity-v1"}
    assert os.stat(root.identity_record).st_mode & 0o777 == 0o600  # private root
    assert not root.identity_sealed.exists()
    assert load_or_create_key(root) == key


def test_a_root_from_before_the_record_is_adopted_only_when_attested(tmp_path: Path) -> None:
    root = _root(tmp_path)
    key = secrets.token_bytes(32)
    _create(root.tmp, root.identity_key, key)
    _row(root)
    # Nothing proves the key wrote the rows (rule 6): refused, nothing recorded.
    with pytest.raises(IdentityRefused) as e:
        load_or_create_key(root)
    assert e.value.problem is IdentityProblem.PROOF_MISSING
    assert not root.identity_record.exists()
    store.adopt(root)  # `kexpr identity adopt`
    assert load_or_create_key(root) == key
    assert _record(root)["fingerprint"] == fingerprint(key)


@pytest.mark.parametrize("replaced", [False, True], ids=["deleted", "replaced"])
def test_a_lost_key_beside_rows_is_refused_and_nothing_is_minted(
    tmp_path: Path, replaced: bool
) -> None:
    root = _root(tmp_path)
    load_or_create_key(root)
    _row(root)
    record = root.identity_record.read_bytes()
    root.identity_key.unlink()
    if replaced:
        _create(root.tmp, root.identity_key, secrets.token_bytes(32))
    before = root.identity_key.read_bytes() if replaced else None
    with pytest.raises(IdentityRefused) as e:
        load_or_create_key(root)
    assert e.value.problem is (
        IdentityProblem.KEY_DIFFERS if replaced else IdentityProblem.KEY_MISSING
    )
    assert (root.identity_key.read_bytes() if replaced else None) == before
    assert root.identity_key.exists() is replaced  # nothing minted
    assert root.identity_record.read_bytes() == record  # nothing re-recorded


def test_a_lost_record_and_key_beside_rows_is_refused(tmp_path: Path) -> None:
    root = _root(tmp_path)
    _row(root)
    with pytest.raises(IdentityRefused) as e:
        load_or_create_key(root)
    assert e.value.problem is IdentityProblem.KEY_MISSING
    assert not root.identity_key.exists() and not root.identity_record.exists()


@pytest.mark.parametrize("what", ["empty_file", "a_directory", "quarantined"])
def test_what_counts_as_rows_fails_closed(tmp_path: Path, what: str) -> None:
    root = _root(tmp_path)
    if what == "empty_file":
        (root.outcomes / "2026-11-30.jsonl").touch(0o600)
        assert not store.journal_has_rows(root)  # an undone append: no rows
        return
    if what == "a_directory":
        (root.outcomes / "x").mkdir(0o700)
    else:
        (root.quarantine / "2026-11-30.1.jsonl").write_bytes(b"x")
        os.chmod(root.quarantine / "2026-11-30.1.jsonl", 0o600)
    assert store.journal_has_rows(root)


def test_a_key_beside_no_rows_is_minted_or_recorded_anew(tmp_path: Path) -> None:
    root = _root(tmp_path)
    first = load_or_create_key(root)
    root.identity_key.unlink()
    second = load_or_create_key(root)  # no rows: nothing can be paid twice
    assert second != first and _record(root)["fingerprint"] == fingerprint(second)
    root.identity_key.unlink()
    third = secrets.token_bytes(32)
    _create(root.tmp, root.identity_key, third)
    assert load_or_create_key(root) == third
    assert _record(root)["fingerprint"] == fingerprint(third)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{}",
        b'{"fingerprint":"' + b"0" * 32 + b'"}',
        b'{"fingerprint":"' + b"0" * 31 + b'","schema":"kexpr-identity-v1"}',
        b'{"fingerprint":"' + b"0" * 32 + b'","schema":"kexpr-identity-v2"}',
        b'{"fingerprint":"' + b"0" * 32 + b'","schema":"kexpr-identity-v1","x":1}',
        b'{"fingerprint":"' + b"0" * 32 + b'","fingerprint":"' + b"1" * 32 + b'"}',
    ],
)
@pytest.mark.parametrize("rows", [False, True])
def test_a_malformed_record_is_refused_rows_or_not(tmp_path: Path, data: bytes, rows: bool) -> None:
    root = _root(tmp_path)
    load_or_create_key(root)
    if rows:
        _row(root)
    root.identity_record.unlink()
    root.identity_record.write_bytes(data)
    os.chmod(root.identity_record, 0o600)
    with pytest.raises(IdentityRefused) as e:
        load_or_create_key(root)
    assert e.value.problem is IdentityProblem.RECORD_INVALID


def test_an_unsafe_record_is_an_unsafe_path(tmp_path: Path) -> None:
    root = _root(tmp_path)
    load_or_create_key(root)
    os.chmod(root.identity_record, 0o644)
    with pytest.raises(UnsafePath) as e:
        load_or_create_key(root)
    assert e.value.reason is UnsafeReason.BAD_MODE


def test_gateways_starting_at_once_record_the_one_key(tmp_path: Path) -> None:
    import threading

    for round_ in range(10):
        root = DataRoot(tmp_path / f"r{round_}")
        root.ensure()
        gate = threading.Barrier(6)
        keys: list[bytes | Exception] = []

        def start(
            gate: threading.Barrier = gate,
            keys: list[bytes | Exception] = keys,
            root: DataRoot = root,
        ) -> None:
            gate.wait()
            try:
                keys.append(load_or_create_key(root))
            except Exception as e:  # noqa: BLE001 -- recorded, asserted below
                keys.append(e)

        threads = [threading.Thread(target=start) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(keys)) == 1 and isinstance(keys[0], bytes), keys
        assert _record(root)["fingerprint"] == fingerprint(keys[0])


# ----------------------------------------------------------------- rotation


def test_a_rotation_seals_the_old_key_and_records_the_new(tmp_path: Path) -> None:
    root = _root(tmp_path)
    old = load_or_create_key(root)
    _row(root)
    done = store.rotate(root, NOW)
    new = root.identity_key.read_bytes()
    assert new != old and done.fingerprint == fingerprint(new)
    assert (done.sealed, done.pruned, done.finished) == (1, 0, False)
    assert _record(root)["fingerprint"] == fingerprint(new)
    assert os.stat(root.identity_sealed).st_mode & 0o777 == 0o600
    assert os.stat(root.identity_key).st_mode & 0o777 == 0o600
    identity = store.load_identity(root)
    assert (identity.key, identity.sealed) == (new, (old,))
    fields = ("daily.v1", "evt-1")
    assert ident.prior_artifact_keys(identity.sealed, new, fields) == (artifact_key(old, fields),)
    # A second rotation seals both; the oldest stays first.
    store.rotate(root, NOW + dt.timedelta(days=1))
    assert store.load_identity(root).sealed == (old, new)


def test_prior_keys_leave_out_the_current_key_and_repeats() -> None:
    a, b = b"a" * 32, b"b" * 32
    fields = ("daily.v1", "evt-1")
    assert ident.prior_artifact_keys((a, b, a), a, fields) == (artifact_key(b, fields),)
    assert ident.prior_artifact_keys((), a, fields) == ()


@pytest.mark.parametrize("crash_at", [1, 2, 3])
def test_a_rotation_interrupted_anywhere_is_safe_and_finished_by_running_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_at: int
) -> None:
    """The three writes: sealed, key, record. A crash after the first leaves the
    old key current and also sealed (served); after the second, the record names
    a sealed key (refused, rotation_unfinished); the command run again finishes."""
    root = _root(tmp_path)
    old = load_or_create_key(root)
    _row(root)
    real = store.replace_private
    writes = [0]

    def crashing(*args: object, **kw: bool) -> None:
        writes[0] += 1
        if writes[0] == crash_at:
            raise OSError("power lost")
        real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "replace_private", crashing)
    with pytest.raises(OSError):
        store.rotate(root, NOW)
    monkeypatch.setattr(store, "replace_private", real)
    if crash_at == 1:
        assert store.load_identity(root).key == old  # nothing changed
    elif crash_at == 2:
        identity = store.load_identity(root)  # sealed, the old key still current
        assert identity.key == old and identity.sealed == (old,)
        assert ident.prior_artifact_keys(identity.sealed, old, ("d", "e")) == ()
    else:
        with pytest.raises(IdentityRefused) as e:
            store.load_identity(root)
        assert e.value.problem is IdentityProblem.ROTATION_UNFINISHED
    done = store.rotate(root, NOW)
    assert done.finished is (crash_at == 3)
    identity = store.load_identity(root)
    assert identity.key != old and identity.sealed == (old,)
    assert os.listdir(root.root).count("identity.key") == 1
    assert not [n for n in os.listdir(root.root) if n.startswith(".identity")]  # no litter


def test_rotation_refusals(tmp_path: Path) -> None:
    refused = store.RotationRefused
    problem = store.RotationProblem
    root = _root(tmp_path)
    with pytest.raises(refused) as e:
        store.rotate(root, NOW)  # no key, no rows: nothing to rotate
    assert e.value.problem is problem.NO_KEY
    load_or_create_key(root)
    _row(root)
    with pytest.raises(refused) as e:
        store.rotate(root, NOW, old_key_lost=True)
    assert e.value.problem is problem.KEY_NOT_LOST
    root.identity_key.unlink()
    with pytest.raises(refused) as e:
        store.rotate(root, NOW)
    assert e.value.problem is problem.KEY_MISSING
    _create(root.tmp, root.identity_key, secrets.token_bytes(32))
    with pytest.raises(refused) as e:
        store.rotate(root, NOW)
    assert e.value.problem is problem.KEY_DIFFERS
    root.identity_record.write_bytes(b"{}")
    with pytest.raises(refused) as e:
        store.rotate(root, NOW)
    assert e.value.problem is problem.RECORD_INVALID


def test_a_lost_key_can_be_replaced_on_purpose_only(tmp_path: Path) -> None:
    root = _root(tmp_path)
    first = load_or_create_key(root)
    _row(root)
    store.rotate(root, NOW)  # first is sealed
    root.identity_key.unlink()  # the second key is lost
    done = store.rotate(root, NOW, old_key_lost=True)
    identity = store.load_identity(root)
    assert done.fingerprint == fingerprint(identity.key)
    assert identity.sealed == (first,)  # what was sealed stays sealed; nothing added


def test_a_sealed_key_is_kept_while_the_journal_may_hold_its_rows(tmp_path: Path) -> None:
    root = _root(tmp_path)
    first = load_or_create_key(root)
    _row(root, "2026-11-29")
    store.rotate(root, NOW)  # sealed on 2026-11-30
    # Its rows may be in the 29th's, the 30th's or the 1st's segment: kept.
    for oldest in ("2026-11-29", "2026-11-30", "2026-12-01"):
        for p in root.outcomes.iterdir():
            p.unlink()
        _row(root, oldest)
        assert store.rotate(root, NOW).pruned == 0
        assert first in store.load_identity(root).sealed
    # Retention removed every segment up to the day after the sealing: dropped.
    for p in root.outcomes.iterdir():
        p.unlink()
    _row(root, "2026-12-02")
    later = NOW + dt.timedelta(days=40)
    done = store.rotate(root, later)
    assert done.pruned == 4 and first not in store.load_identity(root).sealed


def test_at_most_eight_keys_are_sealed(tmp_path: Path) -> None:
    root = _root(tmp_path)
    load_or_create_key(root)
    _row(root)
    for _ in range(ident.MAX_SEALED_KEYS):
        store.rotate(root, NOW)
    with pytest.raises(store.RotationRefused) as e:
        store.rotate(root, NOW)
    assert e.value.problem is store.RotationProblem.TOO_MANY_SEALED
    assert len(store.load_identity(root).sealed) == ident.MAX_SEALED_KEYS


@pytest.mark.parametrize(
    "mutate",
    [
        lambda doc: doc["sealed"][0].update(fingerprint="0" * 32),
        lambda doc: doc["sealed"][0].update(key="zz" * 32),
        lambda doc: doc["sealed"][0].update(sealed_at_utc="2026-02-30T00:00:00.000000Z"),
        lambda doc: doc["sealed"].append(dict(doc["sealed"][0])),
        lambda doc: doc.update(schema="kexpr-identity-sealed-v2"),
        lambda doc: doc["sealed"][0].update(extra=1),
    ],
    ids=["fingerprint", "key", "date", "twice", "schema", "extra"],
)
def test_a_malformed_sealed_file_is_refused(tmp_path: Path, mutate: object) -> None:
    root = _root(tmp_path)
    load_or_create_key(root)
    _row(root)
    store.rotate(root, NOW)
    doc = json.loads(root.identity_sealed.read_bytes())
    mutate(doc)  # type: ignore[operator]
    root.identity_sealed.write_bytes(json.dumps(doc).encode())
    with pytest.raises(IdentityRefused) as e:
        store.load_identity(root)
    assert e.value.problem is IdentityProblem.RECORD_INVALID


def test_a_sealed_file_others_can_read_is_refused(tmp_path: Path) -> None:
    root = _root(tmp_path)
    load_or_create_key(root)
    _row(root)
    store.rotate(root, NOW)
    os.chmod(root.identity_sealed, 0o640)  # exclusive, like the key
    with pytest.raises(UnsafePath):
        store.load_identity(root)


def test_the_record_changes_with_a_rotation_and_only_then(tmp_path: Path) -> None:
    root = _root(tmp_path)
    load_or_create_key(root)
    identity = store.load_identity(root)
    assert not store.record_changed(root, identity)
    store.rotate(root, NOW)
    assert store.record_changed(root, identity)
    assert not store.record_changed(root, store.load_identity(root))


def test_a_refusal_is_said_once_per_change_and_its_end_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from kit.bodies import STYLED_BODY, present_styled
    from reference_host.scripted_worker import heartbeat

    from shim.test_coordinator import ScriptedWorker, coordinator, status

    caplog.set_level(logging.DEBUG, logger="kexpr")
    root = _root(tmp_path)
    key = load_or_create_key(root)
    _row(root)
    root.identity_key.unlink()
    heartbeat(root)
    coord = coordinator(root.root, weekly=True)
    try:
        with ScriptedWorker(root, status("already_attempted", "already_attempted")) as w:
            for n in range(3):
                c = present_styled(coord, f"e{n}")
                assert c.outcome is Outcome.IDENTITY_MISMATCH and c.body == STYLED_BODY
            _create(root.tmp, root.identity_key, secrets.token_bytes(32))
            c = present_styled(coord, "e")
            assert c.outcome is Outcome.IDENTITY_MISMATCH
            root.identity_key.unlink()
            _create(root.tmp, root.identity_key, key)
            c = present_styled(coord, "e")
            assert c.outcome is Outcome.ALREADY_ATTEMPTED
            assert len(w.requests) == 1  # the refused ones wrote no request
    finally:
        coord.close()
    said = [
        r.getMessage()
        for r in caplog.records
        if r.name == "kexpr.shim" and r.getMessage().startswith("identity_")
    ]
    assert said == [
        "identity_mismatch reason=key_missing",
        "identity_mismatch reason=key_differs",
        "identity_restored",
    ]


def test_a_running_gateway_takes_a_rotation_at_its_next_presentation(tmp_path: Path) -> None:
    from kit.bodies import STYLED_SURFACE, present_styled

    from shim.test_coordinator import ScriptedWorker, coordinator, status

    root = _root(tmp_path)
    old = load_or_create_key(root)
    _row(root)
    coord = coordinator(root.root, weekly=True)
    try:
        with ScriptedWorker(root, status("already_attempted", "already_attempted")) as w:
            present_styled(coord, "sched-1")
            store.rotate(root, NOW)
            new = root.identity_key.read_bytes()
            c = present_styled(coord, "sched-1")
    finally:
        coord.close()
    # The weekly artifact: (surface, schedule_key, kind, kst_day), as present_styled gives it.
    fields = (STYLED_SURFACE, "sched-1", "weekly_report", "2025-11-30")
    before, after = w.requests
    assert before["capsule"]["artifact_key"] == artifact_key(old, fields)
    assert "prior_artifact_keys" not in before  # one spelling: absent when empty
    assert c.artifact_key == after["capsule"]["artifact_key"] == artifact_key(new, fields)
    assert after["prior_artifact_keys"] == [artifact_key(old, fields)]
    # HMACs only: the capsule the model sees carries none of them.
    assert artifact_key(old, fields) not in json.dumps(after["capsule"])

"""identity.key and the HMAC artifact key."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import pytest

from gateway_shim.identity import DOMAIN, artifact_key, encode_fields, load_or_create_key
from kexpr.spool.fsio import UnsafePath, UnsafeReason
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
        assert len(set(keys)) == 1  # type: ignore[arg-type]


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
    assert seen == [False] and len(key) == 32
    assert os.listdir(root.tmp) == []  # the staging file is gone

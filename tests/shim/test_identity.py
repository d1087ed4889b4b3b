"""identity.key and the HMAC artifact key."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import pytest

from gateway_shim.identity import DOMAIN, artifact_key, encode_fields, load_or_create_key
from spool.fsio import UnsafePath, UnsafeReason
from spool.layout import DataRoot


def test_vector() -> None:
    key = bytes(range(32))
    fields = ("daily.v1", "evt-1")
    msg = b"korean-expression-v4\x00" + b"\x00\x00\x00\x08daily.v1" + b"\x00\x00\x00\x05evt-1"
    assert encode_fields(fields) == msg
    assert artifact_key(key, fields) == hmac.new(key, msg, hashlib.sha256).hexdigest()


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

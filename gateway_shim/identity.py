"""``identity.key`` and the opaque artifact key (design §5, §8).

``artifact_key = HMAC-SHA256(identity.key, b"korean-expression-v4\\0" || fields)``
truncated to its first 128 bits (32 lower-case hex), where each field is a 4-byte
big-endian length followed by its NFC UTF-8 bytes. Half the output is the
truncation RFC 2104 recommends, and it halves the key's share of every answer
(the model echoes it: docs/budget.md). The key is a prefix of the full hexdigest,
so a key written by an earlier release (all 64 hex) names the same artifact as
its first 32 hex (the worker's dedupe identity, `kexpr.spool.journal`).
``identity.key`` is 32 random bytes, created once by the gateway (``O_EXCL``, 0600, no
symlink) and checked on every read. Raw inputs (event, schedule, session IDs)
never leave this process: only the HMAC does, and it is not reversible.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import struct
import unicodedata
from collections.abc import Sequence
from typing import Final

from kexpr.spool.fsio import UnsafePath, UnsafeReason, create_private_file, read_private
from kexpr.spool.layout import DataRoot

KEY_BYTES: Final = 32
# 128 bits of the HMAC-SHA-256 output, as lower-case hex.
ARTIFACT_KEY_HEX: Final = 32
DOMAIN: Final = b"korean-expression-v4\0"


def load_or_create_key(root: DataRoot) -> bytes:
    """Read ``identity.key``; create it if absent. Fail closed on anything odd."""
    try:
        key = read_private(root.identity_key, max_bytes=KEY_BYTES, exclusive=True)
    except FileNotFoundError:
        try:
            create_private_file(root.tmp, root.identity_key, secrets.token_bytes(KEY_BYTES))
        except FileExistsError:
            pass  # another gateway thread/process won the race; read theirs
        key = read_private(root.identity_key, max_bytes=KEY_BYTES, exclusive=True)
    if len(key) != KEY_BYTES:
        raise UnsafePath(UnsafeReason.TOO_LARGE if len(key) > KEY_BYTES else UnsafeReason.BAD_MODE)
    return key


def encode_fields(fields: Sequence[str]) -> bytes:
    out = bytearray(DOMAIN)
    for f in fields:
        b = unicodedata.normalize("NFC", f).encode("utf-8")
        out += struct.pack(">I", len(b))
        out += b
    return bytes(out)


def artifact_key(key: bytes, fields: Sequence[str]) -> str:
    if len(key) != KEY_BYTES:
        raise ValueError("identity key length")
    digest = hmac.new(key, encode_fields(fields), hashlib.sha256).hexdigest()
    return digest[:ARTIFACT_KEY_HEX]


def new_request_id() -> str:
    return os.urandom(16).hex()

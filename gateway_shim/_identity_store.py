"""The identity's files in the data root: read, judged, minted, recorded, rotated.

The rules are `gateway_shim.identity`'s (its module header, rules 1-4); this
module does the file work they decide, through `kexpr.spool.fsio` only:

- ``identity.key``: created ``O_EXCL`` complete or not at all
  (`create_private_file`), 0600 in either sharing mode; replaced only by a
  rotation (durable rename, `replace_private`).
- ``identity.fingerprint`` (the record): published (never replaces) when the
  gateway mints or first records a key; replaced (durable rename) only where
  rule 3 says to record a key beside no rows, and by a rotation. 0600 or 0660 as
  the data root's sharing mode says: ``kexpr status`` and ``kexpr audit`` read it.
- ``identity.sealed``: the sealed keys, 0600, the gateway's; written only by a
  rotation (durable rename).
- "The journal holds rows" is judged from names and sizes only (`journal_has_rows`):
  anything in ``outcomes/`` or ``quarantine/`` but an empty regular file counts
  (fail closed: a gateway that cannot tell refuses rather than mints).
- ``outcomes/identity.json``, the journal's own record of its key (rule 6,
  `kexpr.spool._journal_identity`): read here, written by the worker alone.

A rotation's three writes are ordered so that a crash between any two leaves a
state rule 3 names: sealed first (the old key is kept before anything else
changes: the current key is then merely also sealed, harmless), then the new key
(the record still names the old key, which is sealed: ``rotation_unfinished``,
refused until the command runs again), the record last. Running the command
again after a crash finishes the rotation it finds instead of starting another.

Private: the shim uses `load_identity` (through `gateway_shim._data_root`), the
ops command `rotate`.
"""

from __future__ import annotations

import datetime as dt
import enum
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway_shim.identity import (
    KEY_BYTES,
    MAX_IDENTITY_FILE_BYTES,
    MAX_SEALED_KEYS,
    Action,
    IdentityProblem,
    IdentityRefused,
    Journal,
    Recorded,
    SealedKey,
    fingerprint,
    journal_says,
    judge,
    let_go_now,
    needs_rows,
    parse_record,
    parse_sealed,
    recorded,
    render_record,
    render_sealed,
    seal_expired,
    sealed_now,
)
from kexpr.spool import _journal_identity
from kexpr.spool.errors import ReasonError
from kexpr.spool.fsio import (
    FileId,
    UnsafePath,
    UnsafeReason,
    create_private_file,
    list_dir,
    publish,
    read_private,
    read_private_identified,
    replace_private,
)
from kexpr.spool.layout import DataRoot

# A racing gateway (a mint, a record) costs one more look; more than this many
# is not a race but a data root changing under us: refused like an unsafe one.
_TRIES: Final = 5
_SEGMENT_DAY: Final = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})(?:\.[1-9][0-9]{0,5})?\.jsonl")


@dataclass(frozen=True, slots=True)
class Identity:
    """What a gateway presents with: the key, the sealed keys whose artifact
    keys it sends along (rule 4), and the record's (device, inode) when read:
    every write of the record is a new inode, so a changed one means the
    identity changed (a rotation) and is read again. ``fingerprint`` and
    ``earlier`` are what each request names for the journal (rule 6): the
    key's fingerprint and those it continues from."""

    key: bytes
    sealed: tuple[bytes, ...]
    record: FileId | None
    fingerprint: str
    earlier: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Found:
    key: bytes | None
    record: str | None
    record_id: FileId | None
    sealed: tuple[SealedKey, ...]
    # The journal's record (rule 6): the fingerprint it names, or None.
    journal: str | None = None

    @property
    def state(self) -> Recorded:
        return recorded(self.key, self.record, (s.fingerprint for s in self.sealed))

    @property
    def journal_state(self) -> Journal:
        return journal_says(self.key, self.journal, (s.fingerprint for s in self.sealed))

    def action(self, root: DataRoot) -> Action | IdentityProblem:
        """Rules 3 and 6 on what was found (the journal's directory listed
        only where the answer depends on it)."""
        state, journal = self.state, self.journal_state
        rows = needs_rows(self.key, state, journal) and journal_has_rows(root)
        return judge(self.key, state, rows, journal)

    def identity(self) -> Identity:
        assert self.key is not None
        fp = fingerprint(self.key)
        return Identity(
            self.key,
            tuple(s.key for s in self.sealed if s.key is not None),
            self.record_id,
            fp,
            tuple(dict.fromkeys(s.fingerprint for s in self.sealed if s.fingerprint != fp)),
        )


def _read_key(root: DataRoot) -> bytes | None:
    try:
        key = read_private(root.identity_key, max_bytes=KEY_BYTES, exclusive=True)
    except FileNotFoundError:
        return None
    if len(key) != KEY_BYTES:
        raise UnsafePath(UnsafeReason.TOO_LARGE if len(key) > KEY_BYTES else UnsafeReason.BAD_MODE)
    return key


def _read(root: DataRoot) -> _Found:
    key = _read_key(root)
    try:
        data, record_id = read_private_identified(
            root.identity_record, max_bytes=MAX_IDENTITY_FILE_BYTES
        )
        record: str | None = parse_record(data)
    except FileNotFoundError:
        record, record_id = None, None
    try:
        sealed = parse_sealed(
            read_private(root.identity_sealed, max_bytes=MAX_IDENTITY_FILE_BYTES, exclusive=True)
        )
    except FileNotFoundError:
        sealed = ()
    try:
        journal = _journal_identity.read(root)
    except _journal_identity.InvalidRecord as e:
        raise IdentityRefused(IdentityProblem.RECORD_INVALID) from e
    return _Found(key, record, record_id, sealed, journal)


def _journal_names(root: DataRoot) -> Iterator[tuple[Path, str]]:
    """Each name in ``outcomes/`` and ``quarantine/``, with its directory; a
    directory that does not exist has none (any other failure is raised)."""
    for d in (root.outcomes, root.quarantine):
        try:
            names = list_dir(d)
        except FileNotFoundError:
            continue
        for name in names:
            yield d, name


def journal_has_rows(root: DataRoot) -> bool:
    """Does the journal (live or quarantined) hold anything? Names and sizes
    only; anything but an empty regular file counts (module header)."""
    for d, name in _journal_names(root):
        try:
            st = os.stat(d / name, follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed by retention meanwhile
        if not stat.S_ISREG(st.st_mode) or st.st_size > 0:
            return True
    return False


def oldest_segment(root: DataRoot) -> dt.date | None:
    """The oldest day of a live or quarantined journal segment, by name."""
    days: list[dt.date] = []
    for _, name in _journal_names(root):
        m = _SEGMENT_DAY.fullmatch(name)
        if m is not None:
            try:
                days.append(dt.date.fromisoformat(m.group(1)))
            except ValueError:
                continue
    return min(days, default=None)


def _write_record(root: DataRoot, key: bytes, *, replace: bool) -> None:
    data = render_record(fingerprint(key))
    if replace:
        replace_private(root.identity_record, data, durable=True)
    else:
        publish(root.tmp, root.identity_record, data)


def load_identity(root: DataRoot, *, may_mint: bool = True) -> Identity:
    """The identity to present with, after rules 3 and 6: served, or minted /
    recorded first. ``may_mint``: False for a gateway that served another
    identity at this path (rule 7: ``root_replaced`` instead of a mint). Raises
    `IdentityRefused` for a refusal (nothing written, no key minted),
    `UnsafePath` / ``OSError`` for files that cannot be used."""
    for _ in range(_TRIES):
        found = _read(root)
        action = found.action(root)
        if action is Action.MINT and not may_mint:
            raise IdentityRefused(IdentityProblem.ROOT_REPLACED)
        if isinstance(action, IdentityProblem):
            raise IdentityRefused(action)
        if action is Action.SERVE:
            return found.identity()
        try:
            if action is Action.MINT:
                create_private_file(root.tmp, root.identity_key, secrets.token_bytes(KEY_BYTES))
            else:
                assert found.key is not None
                _write_record(root, found.key, replace=found.record is not None)
        except FileExistsError:
            pass  # another gateway thread or process got there first: judge theirs
    raise OSError(errno.EAGAIN, "identity changing")


def record_changed(root: DataRoot, identity: Identity) -> bool:
    """Is the record no longer the file ``identity`` was read with? One
    ``lstat``; a record that cannot be looked at counts as changed."""
    try:
        st = os.stat(root.identity_record, follow_symlinks=False)
    except OSError:
        return True
    return identity.record != FileId.of(st)


# ------------------------------------------------------------------ rotation


class RotationProblem(enum.StrEnum):
    """Why ``kexpr identity rotate`` did not rotate."""

    KEY_MISSING = "key_missing"
    KEY_DIFFERS = "key_differs"
    RECORD_INVALID = "record_invalid"
    # No key and no rows: there is nothing to rotate (the gateway mints one).
    NO_KEY = "no_key"
    TOO_MANY_SEALED = "too_many_sealed"
    # --old-key-lost on an identity that is intact: rotate without it.
    KEY_NOT_LOST = "key_not_lost"
    # identity.key is not this user's (run it as the gateway's user).
    NOT_KEY_OWNER = "not_key_owner"
    # Rule 6: a key nothing proves beside rows: `adopt` it, or --old-key-lost.
    PROOF_MISSING = "proof_missing"
    # `adopt` where the key is not proof_missing (proven, or refused for
    # another reason: the journal's own record wins).
    NOTHING_TO_ADOPT = "nothing_to_adopt"


class RotationRefused(ReasonError[RotationProblem]):
    """Why ``kexpr identity rotate`` did not rotate; the enum only."""


@dataclass(frozen=True, slots=True)
class Rotation:
    """What a rotation did: the new key's fingerprint, how many keys are sealed
    now and how many expired ones were dropped; ``finished``: it completed a
    rotation that had stopped between its steps instead of starting one."""

    fingerprint: str
    sealed: int
    pruned: int
    finished: bool


def rotate(root: DataRoot, now: dt.datetime, *, old_key_lost: bool = False) -> Rotation:
    """Seal the current key and put a new one in its place (module header,
    rule 4 of `gateway_shim.identity`). ``old_key_lost``: the key is gone (or
    the one present is not the one the journal or the record names, or nothing
    proves it) and the operator accepts that artifacts attempted under it may
    be attempted once more: a new key is made and recorded, and the key the
    journal names is let go (rule 6: its fingerprint is kept without a key, so
    the journal moves on to the new one). Raises `RotationRefused`, or
    ``OSError`` for a data root that cannot be used."""
    found = _read_for_ops(root)
    action = found.action(root)
    if old_key_lost:
        if action not in _LOST:
            raise RotationRefused(RotationProblem.KEY_NOT_LOST)
        kept, pruned = _kept(root, found)
        if found.journal is not None and all(s.fingerprint != found.journal for s in kept):
            if len(kept) >= MAX_SEALED_KEYS:
                raise RotationRefused(RotationProblem.TOO_MANY_SEALED)
            kept.append(let_go_now(found.journal, now))
        return _replace_key(root, kept, pruned)
    if action is IdentityProblem.ROTATION_UNFINISHED:
        assert found.key is not None
        _write_record(root, found.key, replace=True)
        return Rotation(fingerprint(found.key), len(found.sealed), 0, finished=True)
    if action is Action.MINT:
        raise RotationRefused(RotationProblem.NO_KEY)
    if isinstance(action, IdentityProblem):
        raise RotationRefused(RotationProblem(action.value))
    assert found.key is not None
    kept, pruned = _kept(root, found)
    if not any(s.key == found.key for s in kept):
        if len(kept) >= MAX_SEALED_KEYS:
            raise RotationRefused(RotationProblem.TOO_MANY_SEALED)
        kept.append(sealed_now(found.key, now))
    return _replace_key(root, kept, pruned)


_LOST: Final = frozenset(
    {IdentityProblem.KEY_MISSING, IdentityProblem.KEY_DIFFERS, IdentityProblem.PROOF_MISSING}
)


def _read_for_ops(root: DataRoot) -> _Found:
    """`_read` for the operator's commands: its refusals as `RotationRefused`."""
    try:
        return _read(root)
    except IdentityRefused as e:
        raise RotationRefused(RotationProblem.RECORD_INVALID) from e
    except UnsafePath as e:
        if e.reason is UnsafeReason.WRONG_OWNER:
            raise RotationRefused(RotationProblem.NOT_KEY_OWNER) from e
        raise
    except PermissionError as e:
        raise RotationRefused(RotationProblem.NOT_KEY_OWNER) from e


def adopt(root: DataRoot) -> str:
    """``kexpr identity adopt`` (rule 6): the operator attests that the key
    present is the one the journal's rows were written under, where nothing
    else proves it (``proof_missing``: a key with no record beside rows, and
    no journal record). Records it beside the key (the worker then records it
    in the journal at the next attempt); its fingerprint. Refused
    (`RotationRefused`) in every other state."""
    found = _read_for_ops(root)
    if found.action(root) is not IdentityProblem.PROOF_MISSING:
        raise RotationRefused(RotationProblem.NOTHING_TO_ADOPT)
    assert found.key is not None
    _write_record(root, found.key, replace=False)
    return fingerprint(found.key)


def _kept(root: DataRoot, found: _Found) -> tuple[list[SealedKey], int]:
    """The sealed keys a rotation keeps: those the journal may still hold rows
    of, and the one the journal's record still names (rule 6: the identity
    continues from it until a request under the new key moves the record on,
    however long that takes)."""
    oldest = oldest_segment(root)
    sealed = found.sealed
    kept = [s for s in sealed if not seal_expired(s, oldest) or s.fingerprint == found.journal]
    return kept, len(sealed) - len(kept)


def _replace_key(root: DataRoot, sealed: list[SealedKey], pruned: int) -> Rotation:
    """The three writes, in the module header's order."""
    replace_private(root.identity_sealed, render_sealed(sealed), durable=True, exclusive=True)
    key = secrets.token_bytes(KEY_BYTES)
    replace_private(root.identity_key, key, durable=True, exclusive=True)
    _write_record(root, key, replace=True)
    return Rotation(fingerprint(key), len(sealed), pruned, finished=False)

"""The data root as its gateway sees it: whose files the shim accepts, and whether
it can read the operator glossary (``kexpr glossary install``, ``kexpr status``).

Rules:

1. The gateway's user is the owner of ``identity.key`` (the gateway creates it:
   design §3, `gateway_shim.identity`), else, before any gateway ran, the owner
   of the data root (the operator makes the root ``-o <gateway>``: `kexpr.spool.fsio`
   rule 3). The sharing mode is the root's own (0700 private, 02770 shared group).
2. "The gateway can read it" is judged by the shim's own read
   (`gateway_shim.operator_glossary.glossary_for_data_root`: no-follow, regular,
   owner and mode as the data root's other files, bounded), with ownership judged
   for the gateway's user instead of this process's (`kexpr.spool.fsio.expect_owner`,
   set for the read and reset after it). So an operator, or root, learns what the
   shim will find, not what they themselves could open.
3. Enum words only: a uid is never printed, nor a path but the operator's own.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from gateway_shim.operator_glossary import DualGlossary, glossary_for_data_root
from kexpr.spool.fsio import expect_owner, sharing_of
from kexpr.spool.layout import DataRoot

__all__ = ["GatewayUser", "gateway_user", "read_as_gateway"]


@dataclass(frozen=True, slots=True)
class GatewayUser:
    """Rule 1: the gateway's uid, and the shared group (None: a private root)."""

    uid: int
    group: int | None


def gateway_user(root: DataRoot) -> GatewayUser:
    """Rule 1. Raises ``OSError`` (`UnsafePath` for a root of neither mode)."""
    top = os.lstat(root.root)
    sharing = sharing_of(top, top)
    uid = top.st_uid
    try:
        key = os.lstat(root.identity_key)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISREG(key.st_mode):
            uid = key.st_uid
    return GatewayUser(uid, sharing.gid)


def read_as_gateway(root: DataRoot, user: GatewayUser) -> DualGlossary:
    """Rule 2: the glossary in force as the gateway's user would load it. Raises
    `gateway_shim.operator_glossary.GlossaryError` as the shim's own read does."""
    expect_owner(user.uid)
    try:
        return glossary_for_data_root(root.root)
    finally:
        expect_owner(None)

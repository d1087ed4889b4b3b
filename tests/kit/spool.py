"""A request written as a shim writes it, and a wait for the worker's answer
(event-free poll, bounded): for the tests that drive a real worker process by
its spool alone, without a coordinator. And the bytes of every file under a
live data root, for the tests that search them."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterable
from pathlib import Path

from kexpr.spool.contract import Capsule, SlotPolicy, slot_policy
from kexpr.spool.fsio import publish
from kexpr.spool.journal import SpoolMode, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import SPOOL_VERSION, SpoolRequest

# The one slot the fit table styles (design §6.1): the weekly interpretation whose
# goal range is missing (branch I2).
STYLED_SLOT = slot_policy(
    "weekly.interpretation", ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"]
)


def write_request(
    root: DataRoot,
    n: int,
    *,
    surface: str = "weekly.v1",
    slot: SlotPolicy = STYLED_SLOT,
    replace: tuple[str, str] | None = None,
) -> str:
    """Request ``n`` (its id and artifact key are ``n`` as 32 hex), shadow mode,
    4 s deadline; ``replace``: (old, new) bytes swapped in the serialized request,
    for what today's models refuse to build (an older shim's request)."""
    rid = f"{n:032x}"
    now = dt.datetime.now(dt.UTC)
    req = SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=rid,
        submitted_at_utc=format_ts(now),
        deadline_at_utc=format_ts(now + dt.timedelta(seconds=4)),
        mode=SpoolMode.SHADOW,
        capsule=Capsule(
            schema_version="korean-expression-v4",
            surface=surface,
            artifact_key=rid,
            slots=(slot,),
        ),
    )
    data = req.to_bytes()
    if replace is not None:
        data = data.replace(replace[0].encode(), replace[1].encode())
    publish(root.tmp, root.requests / f"{rid}.json", data)
    return rid


def await_answer(root: DataRoot, rid: str, timeout: float = 20.0) -> dict[str, object]:
    """The worker's response to ``rid`` once it is there (AssertionError after
    ``timeout`` seconds)."""
    path = root.responses / f"{rid}.json"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            return json.loads(path.read_bytes())
        except (FileNotFoundError, ValueError):
            time.sleep(0.02)
    raise AssertionError("no response")


def files_bytes(top: Path, *, skip: Iterable[str] = ()) -> list[bytes]:
    """The bytes of every file under ``top`` but those named in ``skip``. The root
    may be live: a file consumed, or a staging file renamed, between the listing
    and the read is not there to search, and is left out."""
    skipped = frozenset(skip)
    blobs = []
    for p in top.rglob("*"):
        if p.name in skipped or not p.is_file():
            continue
        try:
            blobs.append(p.read_bytes())
        except FileNotFoundError:
            continue
    return blobs

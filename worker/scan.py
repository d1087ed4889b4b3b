"""The worker's inbox scan (`kexpr.worker.daemon` invariants 6 and 8): list
``claimed/`` and ``requests/``, claim each new request, dispatch each to the call
pool, read each claimed request, and journal the reports. One bad entry harms
only itself: it is answered canonical (or left for the next scan) and counted
by `Fault`; a resource error (`RESOURCE_ERRNOS`) stops the scan for the rescan
timer; an unsafe spool directory is quarantine. The kernel's wake is
`kexpr.worker.inbox`.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime as dt
import os
from typing import TYPE_CHECKING

from kexpr.spool.fsio import UnsafePath, claim, read_private_identified
from kexpr.spool.journal import parse_ts
from kexpr.spool.lifecycle import MAX_WAIT, Actor, File, Move
from kexpr.spool.messages import (
    MAX_MESSAGE_BYTES,
    MessageError,
    ResponseStatus,
    UnknownSpoolVersion,
    parse_request,
)
from kexpr.spool.outcomes import Outcome
from kexpr.worker import attempt
from kexpr.worker.listing import is_hex32, json_names
from kexpr.worker.outbox import quiet_unlink, source
from kexpr.worker.quarantine import RESOURCE_ERRNOS, resource
from kexpr.worker.reports import handle_reports
from kexpr.worker.status import Fault

if TYPE_CHECKING:
    from kexpr.worker.parts import Parts

__all__ = ["RESOURCE_ERRNOS", "scan", "scan_reports"]


def scan(p: Parts, pool: cf.ThreadPoolExecutor, *, walk: bool = True, reports: bool = True) -> None:
    """Check the tree, then dispatch every claimed request (orphans of a dead
    worker first) and claim and dispatch every new one; reports last."""
    p.quarantine.check_tree(walk=walk)
    try:
        # Orphans from a dead worker first (they are deduped like anything else).
        claimed_dir = source(p.root, File.REQUEST, Move.HANDLED)
        claimed = p.attempts.live_names("claimed", json_names(claimed_dir))
        for name in sorted(claimed):
            dispatch(p, pool, name)
        requests_dir = source(p.root, File.REQUEST, Move.CLAIM)
        requests = p.attempts.live_names("requests", json_names(requests_dir))
        for name in sorted(requests):
            if claim_request(p, name):
                dispatch(p, pool, name)
    except (OSError, MemoryError) as e:
        # An unsafe spool directory: nothing in it can be trusted (quarantine).
        # The listing (or a resource) failed, not one entry: nothing is
        # dropped; the next scan tries again (RESOURCE_ERRNOS: back off).
        p.quarantine.failed(e, otherwise=Fault.LIST_FAILED, on_resource=Fault.RESOURCE_EXHAUSTED)
    if reports:
        scan_reports(p)


def scan_reports(p: Parts) -> None:
    """Journal what arrived in reports/. Nothing at all while the folder is as
    the last settled scan left it (only kept files: `reports.KeptReports`)."""
    kept = p.kept_reports
    where = p.root.reports
    if kept.unchanged_since_settled(where):
        return
    try:
        try:
            before: os.stat_result | None = os.lstat(where)
        except OSError:
            before = None
        names = sorted(json_names(where))
        kept.forget_except(set(names))
        handle_reports(p, names)
        if all(kept.is_kept(where / n, n) for n in names):
            kept.settled(where, before)
        else:
            kept.unsettle()
    except (OSError, MemoryError) as e:
        # Out of descriptors or memory: the reports wait for the next tick.
        p.quarantine.failed(e, on_resource=Fault.RESOURCE_EXHAUSTED)


def claim_request(p: Parts, name: str) -> bool:
    """Claim one request (rename into ``claimed/``). An error of this entry
    alone (``claimed/<id>.json`` is a directory: EISDIR; EIO on the rename)
    answers it canonical and removes it; a resource error is raised to the
    scan (back off); an unsafe directory is raised (quarantine)."""
    src_dir, dst_dir = p.root.route(File.REQUEST, Move.CLAIM, Actor.WORKER)
    assert src_dir is not None and dst_dir is not None
    src = src_dir / name
    try:
        won = claim(src, dst_dir / name)
    except UnsafePath:
        raise
    except OSError as e:
        if resource(e):
            raise
        p.counters.fault(Fault.CLAIM_FAILED)
        refuse_request(p, name)
        return False
    if won:
        p.counters.bump("claimed")
    return won


def refuse_request(p: Parts, name: str) -> None:
    """Answer one request that could not be claimed canonical (``invalid_request``,
    no row, no call) and remove it from requests/ (`Move.REFUSED`); one that
    cannot be removed is skipped from now on."""
    rid = name[: -len(".json")]
    if is_hex32(rid):
        p.outbox.respond(rid, None, ResponseStatus.CANONICAL, Outcome.INVALID_REQUEST)
    if not quiet_unlink(source(p.root, File.REQUEST, Move.REFUSED) / name):
        p.counters.fault(Fault.ENTRY_STUCK)
        p.attempts.mark_stuck("requests", name)


def dispatch(p: Parts, pool: cf.ThreadPoolExecutor, name: str) -> None:
    if not p.attempts.take(name):
        return

    def job() -> None:
        try:
            try:
                handle_claimed(p, name)
            finally:
                p.attempts.done(name)
        except (OSError, MemoryError) as e:
            # One entry's failure is its own: counted, never the worker's.
            p.counters.fault(Fault.RESOURCE_EXHAUSTED if resource(e) else Fault.ENTRY_ERROR)
        except Exception:  # noqa: BLE001 -- the pool would swallow it uncounted
            # (an attempt it concerned was already ended: kexpr.worker.attempt).
            p.counters.fault(Fault.UNEXPECTED_ERROR)

    try:
        pool.submit(job)
    except RuntimeError:
        # No thread could be started (ENOMEM, a thread limit): left in
        # claimed/ for the next scan.
        p.attempts.done(name)
        p.counters.fault(Fault.RESOURCE_EXHAUSTED)


def handle_claimed(p: Parts, name: str) -> None:
    """Process one claimed request file to its response (or silent drop)."""
    path = source(p.root, File.REQUEST, Move.HANDLED) / name
    rid = name[: -len(".json")]
    try:
        data, fid = read_private_identified(path, max_bytes=MAX_MESSAGE_BYTES)
        req = parse_request(data)
        if req.request_id != rid:
            raise MessageError("request_id")
        submitted = parse_ts(req.submitted_at_utc)
        deadline = parse_ts(req.deadline_at_utc)
        if not dt.timedelta(0) < deadline - submitted <= MAX_WAIT:
            raise MessageError("deadline")
    except FileNotFoundError:
        return
    except (MessageError, OSError, ValueError) as e:
        unreadable = isinstance(e, OSError) and not isinstance(e, UnsafePath)
        if unreadable and resource(e):
            # Out of descriptors or memory: untouched, the next scan retries.
            p.counters.fault(Fault.RESOURCE_EXHAUSTED)
            return
        # Canonical, zero calls, zero rows.
        p.counters.bump("invalid_requests")
        if isinstance(e, UnknownSpoolVersion):
            # A newer shim's request: refused closed, and said so.
            p.counters.fault(Fault.UNKNOWN_SPOOL_VERSION)
        if unreadable:
            p.counters.fault(Fault.READ_FAILED)
        if not p.outbox.drop(path, e):
            p.counters.fault(Fault.ENTRY_STUCK)
            p.attempts.mark_stuck("claimed", name)
        if is_hex32(rid):
            p.outbox.respond(rid, None, ResponseStatus.CANONICAL, Outcome.INVALID_REQUEST)
        return
    try:
        attempt.handle_request(p, req, submitted, deadline)
    finally:
        # Remove only the file we read; a swapped one is left for the next
        # scan, where it is deduped like any request.
        p.outbox.remove_read(path, fid)

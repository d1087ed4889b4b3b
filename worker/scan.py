"""The worker's inbox scan (`kexpr.worker.daemon` invariants 6 and 8): list
``claimed/`` and ``requests/``, claim each new request, dispatch each to the call
pool, and journal the reports. One bad entry harms only itself: it is answered
canonical (or left for the next scan) and counted by `Fault`; a resource error
(`RESOURCE_ERRNOS`) stops the scan for the rescan timer; an unsafe spool
directory is quarantine. The kernel's wake is `kexpr.worker.inbox`.
"""

from __future__ import annotations

import concurrent.futures as cf
import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from kexpr.spool.fsio import UnsafePath, claim, list_dir, unlink_quiet
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import Outcome
from kexpr.worker.status import Fault

if TYPE_CHECKING:
    from kexpr.worker.daemon import Worker

# Running out of descriptors or memory (``ulimit -n``, a full file table, ENOMEM)
# is the machine's state, not an entry's: the scan stops, nothing is dropped, and
# the next scan (the rescan timer) tries again. Never an exit, never a traceback.
RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


def scan(
    w: Worker, pool: cf.ThreadPoolExecutor, *, walk: bool = True, reports: bool = True
) -> None:
    """Check the tree, then dispatch every claimed request (orphans of a dead
    worker first) and claim and dispatch every new one; reports last."""
    w._check_tree(walk=walk)
    try:
        # Orphans from a dead worker first (they are deduped like anything else).
        claimed = live_names(w, "claimed", json_names(w.root.claimed))
        for name in sorted(claimed):
            dispatch(w, pool, name)
        requests = live_names(w, "requests", json_names(w.root.requests))
        for name in sorted(requests):
            if claim_request(w, name):
                dispatch(w, pool, name)
    except UnsafePath as e:
        # A spool directory itself is unsafe: nothing in it can be trusted.
        w._enter_quarantine(e.reason.value)
    except (OSError, MemoryError) as e:
        # The listing (or a resource) failed, not one entry: nothing is
        # dropped; the next scan tries again (RESOURCE_ERRNOS: back off).
        w.counters.fault(Fault.RESOURCE_EXHAUSTED if resource(e) else Fault.LIST_FAILED)
    if reports:
        scan_reports(w)


def scan_reports(w: Worker) -> None:
    """Journal what arrived in reports/. Nothing at all while the folder is as
    the last settled scan left it (only kept files: `reports.KeptReports`)."""
    kept = w._kept_reports
    if kept.unchanged_since_settled(w.root.reports):
        return
    try:
        try:
            before: os.stat_result | None = os.lstat(w.root.reports)
        except OSError:
            before = None
        names = sorted(json_names(w.root.reports))
        kept.forget_except(set(names))
        w._handle_reports(names)
        if all(kept.is_kept(w.root.reports / n, n) for n in names):
            kept.settled(w.root.reports, before)
        else:
            kept.unsettle()
    except UnsafePath as e:
        w._enter_quarantine(e.reason.value)
    except (OSError, MemoryError) as e:
        if resource(e):
            # Out of descriptors or memory: the reports wait for the next tick.
            w.counters.fault(Fault.RESOURCE_EXHAUSTED)
        else:
            w._enter_quarantine("io_error")


def live_names(w: Worker, where: str, names: list[str]) -> list[str]:
    """``names`` without the stuck entries of ``where``; a stuck entry that
    is no longer listed is forgotten."""
    listed = set(names)
    with w._busy_lock:
        w._stuck = {s for s in w._stuck if s[0] != where or s[1] in listed}
        return [n for n in names if (where, n) not in w._stuck]


def claim_request(w: Worker, name: str) -> bool:
    """Claim one request (rename into ``claimed/``). An error of this entry
    alone (``claimed/<id>.json`` is a directory: EISDIR; EIO on the rename)
    answers it canonical and removes it; a resource error is raised to the
    scan (back off); an unsafe directory is raised (quarantine)."""
    src = w.root.requests / name
    try:
        won = claim(src, w.root.claimed / name)
    except UnsafePath:
        raise
    except OSError as e:
        if resource(e):
            raise
        w.counters.fault(Fault.CLAIM_FAILED)
        refuse_entry(w, "requests", src)
        return False
    if won:
        w.counters.bump("claimed")
    return won


def refuse_entry(w: Worker, where: str, path: Path) -> None:
    """Answer one entry canonical (``invalid_request``, no row, no call) and
    remove its file; one that cannot be removed is skipped from now on."""
    rid = path.name[: -len(".json")]
    if is_hex32(rid):
        w._respond(rid, None, ResponseStatus.CANONICAL, Outcome.INVALID_REQUEST)
    try:
        unlink_quiet(path)
    except (OSError, UnsafePath):
        w.counters.fault(Fault.ENTRY_STUCK)
        with w._busy_lock:
            w._stuck.add((where, path.name))


def dispatch(w: Worker, pool: cf.ThreadPoolExecutor, name: str) -> None:
    with w._busy_lock:
        if name in w._busy:
            return
        w._busy.add(name)

    def job() -> None:
        try:
            try:
                w.handle_claimed(name)
            finally:
                with w._busy_lock:
                    w._busy.discard(name)
        except (OSError, MemoryError) as e:
            # One entry's failure is its own: counted, never the worker's.
            w.counters.fault(Fault.RESOURCE_EXHAUSTED if resource(e) else Fault.ENTRY_ERROR)
        except Exception:  # noqa: BLE001 -- issue 21: the pool would swallow it uncounted
            # (an attempt it concerned was already ended: kexpr.worker.attempt).
            w.counters.fault(Fault.UNEXPECTED_ERROR)

    try:
        pool.submit(job)
    except RuntimeError:
        # No thread could be started (ENOMEM, a thread limit): left in
        # claimed/ for the next scan.
        with w._busy_lock:
            w._busy.discard(name)
        w.counters.fault(Fault.RESOURCE_EXHAUSTED)


def resource(e: BaseException) -> bool:
    """Out of descriptors or memory (RESOURCE_ERRNOS, MemoryError)."""
    return isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno in RESOURCE_ERRNOS)


def json_names(d: Path) -> list[str]:
    """Spool entries (walked and checked by `kexpr.spool.fsio`; raises `UnsafePath`)."""
    try:
        names = list_dir(d)
    except FileNotFoundError:
        return []
    return [n for n in names if n.endswith(".json") and not n.startswith(".")]


def is_hex32(s: str) -> bool:
    return len(s) == 32 and all(c in "0123456789abcdef" for c in s)

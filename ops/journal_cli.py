"""``kexpr journal verify | stats | prune | quarantine`` (design §5, §10).

Every output is enums, counts, dates and product-relative paths
(``outcomes/2026-11-30.jsonl``): never a row's content, an artifact key or an
attempt id.

``verify``     the whole data root: every directory (no symlink, type, owner,
               group, mode — private 0700/0600 or shared-group 02770/0660,
               `kexpr.spool.fsio` rule 3), the lock, key and status files, every spool
               file, and every journal segment and quarantined file against
               every rule of `kexpr.spool.journal`. Exit 0 when intact — attempts
               still open are legal and reported — 1 on any violation.
``stats``      counts per day / surface / mode / outcome (open attempts as
               ``open``); exit 1 if the journal does not verify.
``prune``      retention (35 completed UTC days plus today): lists the whole
               segments that have aged out; ``--apply`` removes them (directory
               fsynced). A segment with an open attempt is kept: the worker
               terminalizes it first. Never writes a row. Exit 1 if the journal
               does not verify, or while retention is held (`kexpr.spool.retention`:
               the clock, the journal's newest row and the worker's record
               ``retention.json`` disagree; the finding is the hold's reason).
``quarantine`` the documented operator action for a torn tail (`kexpr.spool.journal`
               "Torn tail"), with the worker stopped: sets the segment aside
               unchanged under ``quarantine/``. Dry run unless ``--apply``.

Exit codes: 0 ok, 1 finding/violation/refusal, 2 usage or no data root to read (docs/cli.md).

Run it as the data root's owner or as root: ownership is judged against the
data root's owner (`kexpr.spool.fsio.expect_owner`), not against the caller.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gateway_shim.operator_glossary import GLOSSARY_FILE_NAME
from kexpr.ops._audit_data_root import display_path
from kexpr.ops._audit_staging import is_stale, staged_as
from kexpr.ops.inputs import data_root_problem
from kexpr.ops.supervisor import STATUS_NAME as SUPERVISOR_STATUS_NAME
from kexpr.spool.fsio import (
    LockTimeout,
    UnsafePath,
    check_dir,
    check_file,
    expect_owner,
    list_dir,
    make_flock,
    read_private,
)
from kexpr.spool.journal import (
    Finding,
    Index,
    Journal,
    JournalUnverified,
    RetentionHeld,
    audit_journal,
)
from kexpr.spool.layout import DEFAULT_DATA_ROOT, QUARANTINE_CLEAR_NAME, DataRoot
from kexpr.spool.messages import (
    MAX_MESSAGE_BYTES,
    MessageError,
    ResponseStatus,
    parse_report,
    parse_response,
)
from kexpr.spool.rehearsal import MARKER_NAME as REHEARSAL_MARKER
from kexpr.spool.retention import RECORD_NAME as RETENTION_RECORD
from kexpr.spool.retention import RecordUnreadable, offline_hold, read_record

# What may sit at the top of a data root (files; directories are `product_dirs`):
# every file the product itself writes there, each checked by the same rules.
ROOT_FILES: Final = {
    "identity.key": True,  # exclusive: 0600 even in a shared-group root
    "identity.fingerprint": False,
    "identity.sealed": True,
    "journal.lock": False,
    "worker.lock": False,
    "worker.status.json": False,
    SUPERVISOR_STATUS_NAME: False,
    # Retention's record (`kexpr.spool.retention`): timestamps and an enum.
    RETENTION_RECORD: False,
    # A rehearsal root's marker (`kexpr.spool.rehearsal`), written before its first row.
    REHEARSAL_MARKER: False,
    # The operator's dual glossary, from `kexpr glossary install` (the data root's file mode).
    GLOSSARY_FILE_NAME: False,
    # `kexpr quarantine clear`'s one-shot ask, until the worker removes it.
    QUARANTINE_CLEAR_NAME: False,
}
_SPOOL_NAME: Final = re.compile(r"[0-9a-f]{32}\.json")


@dataclass(slots=True)
class Report:
    findings: list[dict[str, str]] = field(default_factory=list)
    notices: list[dict[str, str]] = field(default_factory=list)

    def finding(self, what: str, where: str) -> None:
        self.findings.append({"finding": what, "where": where})

    def notice(self, what: str, where: str) -> None:
        self.notices.append({"notice": what, "where": where})


def _os_reason(e: OSError) -> str:
    if isinstance(e, PermissionError):
        return "permission_denied"
    if isinstance(e, FileNotFoundError):
        return "missing"
    return "io_error"


def _audit_tree(root: DataRoot, rep: Report) -> str | None:
    """Directories, root files and spool files. Returns the sharing mode name."""
    try:
        sharing, _ = check_dir(root.root)
    except UnsafePath as e:
        rep.finding(e.reason.value, ".")
        return None
    except OSError as e:
        rep.finding(_os_reason(e), ".")
        return None
    for d in root.product_dirs():
        rel = str(d.relative_to(root.root))
        try:
            got, _ = check_dir(d)
            if got != sharing:
                rep.finding("bad_mode", rel)
        except FileNotFoundError:
            rep.notice("missing", rel)
        except UnsafePath as e:
            rep.finding(e.reason.value, rel)
        except OSError as e:
            rep.finding(_os_reason(e), rel)
    try:
        names = list_dir(root.root)
    except OSError:
        names = []
    product = {p.name for p in root.product_dirs() if p.parent == root.root}
    now = time.time()
    for name in sorted(names):
        if name in product:
            continue
        # A root file being replaced is staged beside it (`kexpr.ops._audit_staging`).
        final = name if name in ROOT_FILES else staged_as((name,))
        if final is None or final not in ROOT_FILES:
            # Named as the audit names it: a name the product did not make could
            # carry content, and is printed as <unrecognized>.
            rep.notice("unexpected_entry", display_path((name,)))
            continue
        _check_file(rep, root, (name,), now, exclusive=ROOT_FILES[final])
    for d in root.spool_dirs():
        parts = d.relative_to(root.root).parts
        try:
            entries = list_dir(d)
        except OSError:
            continue  # already reported as a directory finding
        for name in sorted(entries):
            where = display_path((*parts, name))
            # In tmp/: the staging files the product writes there (`kexpr.ops._audit_staging`).
            expected = (
                staged_as((*parts, name)) is not None
                if d == root.tmp
                else _SPOOL_NAME.fullmatch(name)
            )
            if not expected:
                rep.notice("unexpected_entry", where)
            _check_file(rep, root, (*parts, name), now)
    return "shared_group" if sharing.shared else "private"


def _check_file(
    rep: Report, root: DataRoot, rel: tuple[str, ...], now: float, *, exclusive: bool = False
) -> None:
    """`kexpr.spool.fsio` rules 1-3 for the file at ``rel``, and a staging file's
    age: one no longer being written is the notice ``stale_staging_file``. Gone
    meanwhile (a staging file renamed into place, a message consumed) is not a
    finding."""
    where = display_path(rel)
    path = root.root.joinpath(*rel)
    try:
        check_file(path, exclusive=exclusive)
        if staged_as(rel) is not None and is_stale(os.lstat(path), now):
            rep.notice("stale_staging_file", where)
    except UnsafePath as e:
        rep.finding(e.reason.value, where)
    except FileNotFoundError:
        pass
    except OSError as e:
        rep.finding(_os_reason(e), where)


def verify(root: DataRoot) -> tuple[bool, dict[str, Any]]:
    rep = Report()
    sharing = _audit_tree(root, rep)
    audit = audit_journal(root)
    for f in audit.findings:
        rep.finding(f.finding, f.where)
    idx = audit.index
    out: dict[str, Any] = {
        "ok": not rep.findings,
        "sharing": sharing,
        "segments": len(audit.segments),
        "quarantined": audit.quarantined,
        "attempts": len(idx.by_attempt),
        "open_attempts": sum(1 for _ in idx.open_attempts()),
        "sealed_artifacts": len(idx.sealed),
        "sealed_open": idx.sealed_open,
        "leftovers": _leftovers(root, idx, rep),
        "findings": rep.findings,
        "notices": rep.notices,
    }
    return not rep.findings, out


def _leftovers(root: DataRoot, idx: Index, rep: Report) -> int:
    """Spool files nothing will remove any more (spool.lifecycle
    `SPOOL_FILE_MOVES`): a response that is not its open attempt's accepted
    answer, or a report for a terminal or unknown attempt. A running worker
    removes such responses after RESPONSE_TTL, so a few are normal while it
    runs; a warning (a notice), never a finding."""
    n = 0
    for d, kind in ((root.responses, "response"), (root.reports, "report")):
        try:
            names = [x for x in list_dir(d) if _SPOOL_NAME.fullmatch(x)]
        except OSError:
            continue  # the tree audit reports the directory itself
        for name in names:
            try:
                data = read_private(d / name, max_bytes=MAX_MESSAGE_BYTES)
                if kind == "response":
                    resp = parse_response(data)
                    rec = idx.by_attempt.get(resp.attempt_id or "")
                    live = (
                        resp.status is ResponseStatus.ACCEPTED
                        and rec is not None
                        and rec.outcome is None
                    )
                else:
                    rec = idx.by_attempt.get(parse_report(data).attempt_id)
                    live = rec is not None and rec.outcome is None
            except (MessageError, OSError, ValueError):
                live = False
            if not live:
                n += 1
    if n:
        rep.notice("spool_leftovers", f"{n} files in spool/responses or spool/reports")
    return n


def stats(root: DataRoot) -> tuple[bool, dict[str, Any]]:
    audit = audit_journal(root)
    if not audit.ok:
        return False, {
            "ok": False,
            "findings": [{"finding": f.finding, "where": f.where} for f in audit.findings],
        }
    days: dict[str, dict[str, dict[str, dict[str, int]]]] = {}
    totals: dict[str, int] = {}
    for rec in audit.index.by_attempt.values():
        outcome = rec.outcome.value if rec.outcome is not None else "open"
        per_mode = (
            days.setdefault(rec.segment, {})
            .setdefault(rec.surface, {})
            .setdefault(rec.mode.value, {})
        )
        per_mode[outcome] = per_mode.get(outcome, 0) + 1
        totals[outcome] = totals.get(outcome, 0) + 1
    return True, {
        "ok": True,
        "attempts": len(audit.index.by_attempt),
        "totals": dict(sorted(totals.items())),
        "days": {d: days[d] for d in sorted(days)},
        "sealed_artifacts": len(audit.index.sealed),
    }


def prune(root: DataRoot, *, apply: bool, now: dt.datetime) -> tuple[bool, dict[str, Any]]:
    """Only when the clock, the journal and the worker's retention record agree
    (`kexpr.spool.retention.offline_hold`); else the hold's reason, nothing removed."""

    def hold(j: Journal) -> RetentionHeld | None:
        try:
            record = read_record(root)
        except (OSError, RecordUnreadable):
            record = None
        held = offline_hold(record, now, j.newest_start())
        return None if held is None else RetentionHeld(held.value)

    today = now.date()
    try:
        removable, kept_open = Journal(root, create_lock=False).prune(today, apply=apply, hold=hold)
    except RetentionHeld as e:
        return False, {"ok": False, "findings": [{"finding": e.reason, "where": RETENTION_RECORD}]}
    except JournalUnverified as e:
        where = f"outcomes/{e.segment}.jsonl" if e.segment else "outcomes"
        return False, {"ok": False, "findings": [{"finding": e.finding.value, "where": where}]}
    except OSError as e:
        reason = e.reason.value if isinstance(e, UnsafePath) else _os_reason(e)
        return False, {"ok": False, "findings": [{"finding": reason, "where": "outcomes"}]}
    return True, {
        "ok": True,
        "applied": apply,
        "today": today.isoformat(),
        "removed" if apply else "would_remove": removable,
        "kept_open": kept_open,
    }


def quarantine(root: DataRoot, segment: str, *, apply: bool) -> tuple[bool, dict[str, Any]]:
    def refused(what: str, where: str) -> tuple[bool, dict[str, Any]]:
        return False, {"ok": False, "findings": [{"finding": what, "where": where}]}

    wlock = make_flock(root.worker_lock, create=False)
    try:
        wlock.acquire(timeout=0)
    except LockTimeout:
        return refused("worker_running", "worker.lock")
    except OSError as e:
        return refused(
            e.reason.value if isinstance(e, UnsafePath) else _os_reason(e), "worker.lock"
        )
    try:
        name = Journal(root, create_lock=False).quarantine_torn(segment, apply=apply)
    except JournalUnverified as e:
        if e.finding is Finding.TORN_TAIL:
            return refused("not_torn", f"outcomes/{segment}.jsonl")
        where = f"outcomes/{e.segment}.jsonl" if e.segment else "outcomes"
        return refused(e.finding.value, where)
    finally:
        wlock.release()
    key = "quarantined_to" if apply else "would_quarantine_to"
    return True, {"ok": True, "applied": apply, "segment": segment, key: f"quarantine/{name}"}


# --------------------------------------------------------------------- output


def _human(command: str, ok: bool, out: dict[str, Any]) -> str:
    lines = [f"kexpr journal {command}: {'ok' if ok else 'FAILED'}"]
    scalars = {k: v for k, v in out.items() if k not in ("ok", "findings", "notices", "days")}
    if scalars:
        lines.append("  " + "  ".join(f"{k} {_short(v)}" for k, v in scalars.items()))
    for f in out.get("findings", []):
        lines.append(f"  finding  {f['finding']:<20} {f['where']}")
    for n in out.get("notices", []):
        lines.append(f"  notice   {n['notice']:<20} {n['where']}")
    for day, surfaces in out.get("days", {}).items():
        for surface, modes in surfaces.items():
            for mode, outcomes in modes.items():
                counts = " ".join(f"{o}={c}" for o, c in sorted(outcomes.items()))
                lines.append(f"  {day}  {surface:<32} {mode:<8} {counts}")
    return "\n".join(lines)


def _short(v: object) -> str:
    if isinstance(v, list):
        return ",".join(str(x) for x in v) or "-"
    if isinstance(v, dict):
        return ",".join(f"{k}={n}" for k, n in v.items()) or "-"
    return "-" if v is None else str(v)


def _owner_of(root: DataRoot) -> int | None:
    try:
        st = os.lstat(root.root)
    except OSError:
        return None
    return st.st_uid if stat.S_ISDIR(st.st_mode) else None


def cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="kexpr journal", description="verify, count and prune the outcome journal"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_ in (
        ("verify", "check the data root and every journal rule; exit 1 on any violation"),
        ("stats", "counts per day/surface/mode/outcome (no content)"),
        (
            "prune",
            "retention: whole segments older than 35 completed UTC days (dry run unless --apply)",
        ),
        (
            "quarantine",
            "set a torn segment aside, unchanged (worker stopped; dry run unless --apply)",
        ),
    ):
        sp = sub.add_parser(name, help=help_)
        sp.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
        sp.add_argument("--json", action="store_true", help="one JSON object on stdout")
        if name in ("prune", "quarantine"):
            sp.add_argument("--apply", action="store_true", help="act (default: dry run)")
        if name == "quarantine":
            sp.add_argument("--segment", required=True, help="YYYY-MM-DD")
    a = p.parse_args(argv)
    root = DataRoot(a.data_root)
    # No data root to read is unusable input (exit 2, docs/cli.md), not a finding:
    # missing, not a directory, a symlink, or an empty directory (no worker ran
    # there: nothing to verify, and `quarantine`/`prune` must not create anything).
    problem = data_root_problem(root.root)
    if problem is not None:
        from kexpr.ops.inputs import refuse

        if a.json:
            finding = {"finding": problem.value, "where": "."}
            error = {"input": "--data-root", "path": str(a.data_root), "problem": problem.value}
            print(json.dumps({"ok": False, "findings": [finding], "error": error}, sort_keys=True))
        return refuse(f"kexpr journal {a.command}", "--data-root", a.data_root, problem)
    expect_owner(_owner_of(root))
    try:
        if a.command == "verify":
            ok, out = verify(root)
        elif a.command == "stats":
            ok, out = stats(root)
        elif a.command == "prune":
            ok, out = prune(root, apply=a.apply, now=dt.datetime.now(dt.UTC))
        else:
            if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", a.segment):
                p.error("--segment must be YYYY-MM-DD")
            ok, out = quarantine(root, a.segment, apply=a.apply)
    finally:
        expect_owner(None)
    if a.json:
        print(json.dumps(out, sort_keys=True))
    else:
        print(_human(a.command, ok, out), file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1

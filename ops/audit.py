"""``kexpr audit``: prove to an auditor that the key lives in one process (design §10).

Each check runs when its input is given; findings are enum values (plus, where it
helps, the *name* of a variable or the product-generated relative path of a file —
never a value, never content). Exit 0 clean, 1 findings, 2 unusable input (a check
could not be completed; its findings so far are still printed).

Checks and why each is sound:

The checks live beside what they are about; this module runs them and reports:

- `kexpr.ops._audit_findings`: the checks, findings and unusable reasons (enums).
- `kexpr.ops._audit_credentials`: ``--gateway-pid``, ``--worker-pid`` (``/proc``) and
  ``--env-file`` — where the key is, and where it must not be.
- `kexpr.ops._audit_data_root`: ``--data-root`` — modes, owners, symlinks, names and the
  journal chain.
- `kexpr.ops._audit_redaction`: the redaction scan of every spool and status file under
  ``--data-root``.
- `kexpr.ops._audit_staging`: which staging files the product writes where, and for
  how long one is being written (shared with ``kexpr journal verify``).

Their names stay importable from here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kexpr.ops._audit_credentials import (
    INJECTION_VARIABLES,
    KEY_VARIABLE,
    MAX_ENV_FILE_BYTES,
    MAX_ENVIRON_BYTES,
    MIN_KEY_VALUE_LEN,
    Creds,
    audit_env_file,
    audit_gateway,
    audit_worker,
    environ_protected,
    parse_env_file,
    parse_environ,
    read_creds,
    read_env_text,
    read_environ,
    safe_name,
)
from kexpr.ops._audit_data_root import (
    SHARED_DIR_MODE,
    SHARED_FILE_MODES,
    audit_data_root,
    display_path,
)
from kexpr.ops._audit_findings import AuditFinding, Check, CheckResult, Item, Unusable
from kexpr.ops._audit_redaction import MAX_SPOOL_FILE_BYTES
from kexpr.ops.inputs import WORDS, InputRefused, Problem
from kexpr.ops.readers import ReadRefused, read_worker_status
from kexpr.spool.layout import DataRoot
from kexpr.spool.retention import Hold

__all__ = [
    "INJECTION_VARIABLES",
    "KEY_VARIABLE",
    "MAX_ENVIRON_BYTES",
    "MAX_ENV_FILE_BYTES",
    "MAX_SPOOL_FILE_BYTES",
    "MIN_KEY_VALUE_LEN",
    "SHARED_DIR_MODE",
    "SHARED_FILE_MODES",
    "AuditReport",
    "Check",
    "CheckResult",
    "Creds",
    "AuditFinding",
    "Item",
    "Unusable",
    "audit_data_root",
    "audit_env_file",
    "audit_gateway",
    "audit_worker",
    "cli",
    "display_path",
    "environ_protected",
    "parse_env_file",
    "parse_environ",
    "read_creds",
    "read_environ",
    "render",
    "run_audit",
    "safe_name",
]

# ------------------------------------------------------------------ the command


@dataclass(slots=True)
class AuditReport:
    results: list[CheckResult]

    @property
    def verdict(self) -> str:
        if any(r.unusable is not None for r in self.results):
            return "unusable"
        return "findings" if any(r.findings for r in self.results) else "clean"

    @property
    def exit_code(self) -> int:
        return {"clean": 0, "findings": 1, "unusable": 2}[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "kexpr-audit-v1",
            "verdict": self.verdict,
            "findings": sum(len(r.findings) for r in self.results),
            "checks": [r.to_json() for r in self.results],
        }


def run_audit(
    *,
    gateway_pids: Iterable[int] = (),
    worker_pid: int | None = None,
    env_files: Iterable[Path] = (),
    data_root: Path | None = None,
) -> AuditReport:
    """Run the requested checks. Key values gathered on the way (the worker's
    environment, env-file assignments) stay in this frame and are compared, never
    stored in a result."""
    results: list[CheckResult] = []
    known: list[str] = []
    pids_uids: list[int] = []
    if worker_pid is not None:
        worker_result, key = audit_worker(worker_pid)
        results.append(worker_result)
        if key:
            known.append(key)
        uid = worker_result.info.get("uid")
        if isinstance(uid, int):
            pids_uids.append(uid)
    env_files = list(env_files)
    # First pass: every key value assigned in the env files, so that each file and
    # each gateway is compared against all of them (order of flags is irrelevant).
    for f in env_files:
        try:
            text = read_env_text(f)
        except InputRefused:
            continue
        known.extend(v for _, name, v in parse_env_file(text) if name == KEY_VARIABLE)
    env_results = [audit_env_file(f, known)[0] for f in env_files]
    gateway_pids = list(gateway_pids)
    gateway_results = [audit_gateway(pid, known) for pid in gateway_pids]
    for pid in gateway_pids:
        try:
            pids_uids.append(read_creds(pid).uids[1])
        except (ReadRefused, KeyError, ValueError, IndexError):
            pass
    results = gateway_results + results + env_results
    if data_root is not None:
        root_result = audit_data_root(data_root, pids_uids)
        held = retention_held(DataRoot(data_root))
        if held is not None and root_result.unusable is None:
            root_result.info["retention_held"] = held
        results.append(root_result)
    return AuditReport(results)


def retention_held(root: DataRoot) -> str | None:
    """Why the worker's retention removes no segment now (`kexpr.spool.retention.Hold`,
    as its status file says), or None: not held, no readable status, or a word that is
    not one of the enum's (never printed). Said beside the findings, never one: a hold
    costs disk, not history."""
    try:
        word = read_worker_status(root).document.get("retention_held")
    except ReadRefused:
        return None
    if isinstance(word, str) and word in {h.value for h in Hold}:
        return word
    return None


def render(report: AuditReport) -> str:
    lines = ["kexpr audit"]
    for r in report.results:
        head = f"  {r.check.value:<20} {r.subject}"
        if r.unusable is not None:
            why = ""
            if r.problem is not None:
                problem = Problem(r.problem)
                why = f": {WORDS[problem]} ({problem.value})"
            lines.append(f"{head}: UNUSABLE {r.unusable.value}{why}")
        elif not r.findings:
            lines.append(f"{head}: clean")
        else:
            lines.append(f"{head}: {len(r.findings)} finding(s)")
        for item in r.findings:
            lines.append(
                f"      FINDING {item.finding.value}" + (f"  {item.detail}" if item.detail else "")
            )
        if r.info:
            lines.append(
                "      info " + "  ".join(f"{k}={_info(v)}" for k, v in sorted(r.info.items()))
            )
    count = sum(len(r.findings) for r in report.results)
    lines.append(f"verdict: {report.verdict}" + (f" ({count} finding(s))" if count else ""))
    return "\n".join(lines)


def _info(v: object) -> str:
    if isinstance(v, bool) or v is None:
        return {True: "yes", False: "no", None: "unknown"}[v]
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)


def cli(argv: list[str]) -> int:
    import argparse

    from kexpr.ops.cli import missing_packages
    from kexpr.spool.ranges import int_range

    p = argparse.ArgumentParser(
        prog="kexpr audit",
        description="credential isolation, permissions, journal chain and spool redaction "
        "(exit 0 clean, 1 findings, 2 unusable input)",
    )
    p.add_argument(
        "--gateway-pid",
        type=int_range(1, 2**31 - 1),
        action="append",
        default=[],
        metavar="PID",
        help="a gateway process: no OPENAI_API_KEY (or other OPENAI_* secret) in /proc/PID/environ",
    )
    p.add_argument(
        "--worker-pid",
        type=int_range(1, 2**31 - 1),
        metavar="PID",
        help="the worker: non-dumpable, no hazardous variables (run as root)",
    )
    p.add_argument(
        "--env-file",
        type=Path,
        action="append",
        default=[],
        metavar="F",
        help="a gateway-side .env file (e.g. ~/.hermes/.env): no key",
    )
    p.add_argument(
        "--data-root",
        type=Path,
        metavar="D",
        help="modes, owners, symlinks, journal chain, spool redaction scan",
    )
    p.add_argument("--json", action="store_true", help="one JSON object instead of the report")
    a = p.parse_args(argv)
    if a.env_file and missing_packages(["dotenv"]):
        # The gateway-side base install has no python-dotenv (the `ops` extra).
        print(
            "kexpr audit: --env-file needs the ops extra (python-dotenv missing here): "
            "install `kexpr[ops]`",
            file=sys.stderr,
        )
        return 2
    if not (a.gateway_pid or a.worker_pid is not None or a.env_file or a.data_root is not None):
        p.print_usage(sys.stderr)
        print(
            "kexpr audit: give at least one of --gateway-pid, --worker-pid, --env-file, --data-root",
            file=sys.stderr,
        )
        return 2
    report = run_audit(
        gateway_pids=a.gateway_pid,
        worker_pid=a.worker_pid,
        env_files=a.env_file,
        data_root=a.data_root,
    )
    print(json.dumps(report.to_json(), sort_keys=True) if a.json else render(report))
    return report.exit_code

"""``kexpr status``: is the worker up, and what has it done? (design §10)

Reads ``worker.status.json`` (the worker's heartbeat and counters) and, when
present, ``supervisor.status.json`` (`kexpr.ops.supervisor`). Both are content-free by
construction; this command still prints only what it has validated: a state
from a fixed set, integers, and timestamps in the journal's exact format.
Anything else in those files is shown as ``unknown`` — a planted string is
never echoed.

HealthVerdict (exit code):

- ``healthy`` (0): state ``ready``, heartbeat fresher than ``--stale-after``, and
  the recorded pid alive.
- ``no_status`` / ``starting`` / ``stopping`` / ``stopped`` / ``stale_heartbeat`` /
  ``worker_not_running`` / ``crash_loop`` / ``fatal`` / ``quarantined`` (the worker
  is up but refuses every new attempt: journal unverified) / ``refusing`` (up,
  journal verified, new attempts refused for the reason shown, e.g.
  ``segment_full``) / ``no_credential`` (a real worker, not a rehearsal, that
  has no key: every request is ``credential_unavailable``) /
  ``journal_unwritable`` (the journal cannot be appended: the worker's last
  append was refused and undone, ``append_undone``; or the journal's file system
  is read-only or out of space, ``read_only`` / ``no_space``) /
  ``glossary_unusable`` (the gateway cannot use the operator glossary: a file
  its user could not read, ``unreadable <reason>``, or one that is not valid,
  ``invalid <problem>``: every dual card is then canonical) / ``expiring`` (up, but in the last minute at least
  `EXPIRING_MIN` requests expired before the worker reached them or were reached
  with too little time left to answer, and they were more than half of the
  requests it claimed: the host is getting canonical answers
  because the worker does not keep up) / ``spend_capped`` (up, but the start
  rows of the rolling hour or of the UTC day have reached the worker's spend
  cap: new artifacts are answered canonical ``spend_cap_reached`` with no call)
  / ``unusual_rate`` (up, but the last hour's start rows are far above the
  profile's history, `kexpr.worker.spend.unusual_rate`: at least ten times the
  median of its active hours and at least 30 — a host presenting new artifacts
  in a loop)
  / ``identity_mismatch`` (the worker is
  up, but the data root's ``identity.key`` is missing or is not the recorded
  key beside a journal with rows: every presentation is refused canonical,
  `kexpr.ops.identity_cli`) (1).
- ``status_unreadable`` (2): a symlink, a non-regular or oversized file, or
  malformed JSON where the status should be; or the data root is unusable
  (``data_root_<problem>``, `kexpr.ops.inputs`: missing, not a directory, a
  symlink, an empty directory), said in one line naming the path.

Besides the verdict it shows: the last minute's claimed
requests, calls and expired requests (``expired`` is the rate per minute), and per
surface the calls, their failures, the p95 call time against the 3 s budget and
the call-time and completion-token histograms (`kexpr.worker.histograms`). Those
figures are validated like everything else: public surface names and failure
words as keys, integers as counts, and histograms only when the file's bucket
edges are exactly this version's; anything else is dropped, never echoed.
And (`admission_figures`) the provider cool-down's state, and per surface the
requests it refused before a start row (`kexpr.worker.cooldown`).
And (`spend_figures`) the spend bound: both caps, the start rows of the rolling
hour and of the UTC day, the requests refused at a cap and the profile's hourly
median (`kexpr.worker.spend`).

The worker rewrites its status on every pass of its scan loop (at least once a
second, `kexpr.worker.daemon.RESCAN_INTERVAL_S`), so a heartbeat older than the
default 10 s means the loop is stuck or the process is gone.

This module is the command line; the command's parts are the figures validated
(`kexpr.ops._status_figures`), the verdicts (`kexpr.ops._status_verdicts`), the
state read and the ``--json`` document (`kexpr.ops._status_read`) and the table
(`kexpr.ops._status_render`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# The command's names, importable from here (explicit re-exports): the report and
# how it is collected and printed, its verdicts, and the figures other tools read too.
from kexpr.ops._status_figures import Price as Price
from kexpr.ops._status_figures import admission_figures as admission_figures
from kexpr.ops._status_figures import call_figures as call_figures
from kexpr.ops._status_figures import spend_figures as spend_figures
from kexpr.ops._status_read import StatusReport as StatusReport
from kexpr.ops._status_read import collect as collect
from kexpr.ops._status_read import journal_space_problem as journal_space_problem
from kexpr.ops._status_render import render as render
from kexpr.ops._status_verdicts import EXIT as EXIT
from kexpr.ops._status_verdicts import EXPIRING_MIN as EXPIRING_MIN
from kexpr.ops._status_verdicts import HealthVerdict as HealthVerdict
from kexpr.spool.layout import DataRoot
from kexpr.spool.status import STALE_AFTER_S as STALE_AFTER_S


def cli(argv: list[str]) -> int:
    import argparse

    from kexpr.spool.layout import DEFAULT_DATA_ROOT
    from kexpr.spool.ranges import float_range

    p = argparse.ArgumentParser(
        prog="kexpr status", description="worker state and counters (no content)"
    )
    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    p.add_argument(
        "--stale-after",
        type=float_range(0.0, 86400.0, lo_open=True),
        default=STALE_AFTER_S,
        help=f"seconds after which a heartbeat is stale (default {STALE_AFTER_S:g})",
    )
    price_arg = float_range(0.0, 1_000_000.0)
    p.add_argument(
        "--price-per-mtok-in",
        type=price_arg,
        default=None,
        help="your price per 1M input (prompt) tokens: with --price-per-mtok-out, a cost estimate",
    )
    p.add_argument(
        "--price-per-mtok-out",
        type=price_arg,
        default=None,
        help="your price per 1M output (completion) tokens",
    )
    a = p.parse_args(argv)
    if (a.price_per_mtok_in is None) != (a.price_per_mtok_out is None):
        p.error("give both --price-per-mtok-in and --price-per-mtok-out, or neither")
    price = (
        None if a.price_per_mtok_in is None else Price(a.price_per_mtok_in, a.price_per_mtok_out)
    )
    report = collect(DataRoot(a.data_root), stale_after_s=a.stale_after, price=price)
    if report.problem is not None and report.problem.startswith("data_root_"):
        from kexpr.ops.inputs import Problem, line

        problem = Problem(report.problem.removeprefix("data_root_"))
        print(line("kexpr status", "--data-root", a.data_root, problem), file=sys.stderr)
        if a.json:
            print(json.dumps(report.to_json(), sort_keys=True))
        return EXIT[report.verdict]
    if a.json:
        print(json.dumps(report.to_json(), sort_keys=True))
    else:
        print(render(report))
    sys.stdout.flush()
    return EXIT[report.verdict]

"""The options every ``kexpr`` command that starts the worker takes (``kexpr run``,
``kexpr supervise``), range-checked at parse time (`kexpr.spool.ranges`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kexpr.spool.ranges import int_range


def add_worker_options(p: argparse.ArgumentParser) -> None:
    """The options of a command that starts the worker (``kexpr run``, ``kexpr
    supervise``): its data root, its operator-configured egress and its spend
    bound (passed on to ``kexpr worker``, `kexpr.worker.spend`)."""
    from kexpr.spool.layout import DEFAULT_DATA_ROOT
    from kexpr.worker.spend import CAP_RANGE, DEFAULT_PER_DAY, DEFAULT_PER_HOUR

    p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
    p.add_argument("--https-proxy", help="egress proxy for the worker (operator-configured)")
    p.add_argument("--ssl-cert-file", help="CA bundle for the worker (operator-configured)")
    p.add_argument(
        "--max-calls-per-hour",
        type=int_range(*CAP_RANGE),
        default=DEFAULT_PER_HOUR,
        help=f"the worker's paid calls in any rolling hour (default {DEFAULT_PER_HOUR})",
    )
    p.add_argument(
        "--max-calls-per-day",
        type=int_range(*CAP_RANGE),
        default=DEFAULT_PER_DAY,
        help=f"the worker's paid calls in one UTC day (default {DEFAULT_PER_DAY})",
    )

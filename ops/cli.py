"""The ``kexpr`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from spool.layout import DEFAULT_DATA_ROOT

USAGE = """kexpr <command> [options]

commands:
  run             the main job: supervised worker + sample presentations, printed as a table
  supervise       run the worker under supervision (explicit minimal environment)
  worker          run the worker in the foreground (normally started by `supervise`)
  contract check  judge a recorded model response against a capsule
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "worker":
        from worker.main import main as worker_main

        return worker_main(rest)
    if cmd == "supervise":
        from ops.supervisor import WorkerSpec, supervise

        p = argparse.ArgumentParser(prog="kexpr supervise")
        p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
        p.add_argument("--https-proxy", help="egress proxy for the worker (operator-configured)")
        p.add_argument("--ssl-cert-file", help="CA bundle for the worker (operator-configured)")
        a = p.parse_args(rest)
        return supervise(WorkerSpec(a.data_root, a.https_proxy, a.ssl_cert_file))
    if cmd == "contract":
        if not rest or rest[0] != "check":
            print("usage: kexpr contract check ...", file=sys.stderr)
            return 2
        from ops.contract_cli import run_contract_check

        return run_contract_check(rest[1:], sys.stdout, sys.stderr)
    if cmd == "run":
        from ops.demo import run_main_job

        p = argparse.ArgumentParser(prog="kexpr run")
        p.add_argument("--data-root", type=Path, default=DEFAULT_DATA_ROOT)
        p.add_argument("--https-proxy")
        p.add_argument("--ssl-cert-file")
        a = p.parse_args(rest)
        return run_main_job(a.data_root, https_proxy=a.https_proxy, ssl_cert_file=a.ssl_cert_file)
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

"""``kexpr systemd-units --instance NAME --dest DIR``: the production unit files,
from the installed package, for one host profile.

Writes the four files of ``ops/systemd/`` (the worker's template unit, the
sysusers and tmpfiles snippets, the gateway's drop-in) into ``DIR`` exactly as
shipped — except ``ExecStart=``'s program when ``--exec`` names another
``kexpr`` — and prints the steps that install them for the instance
(docs/systemd.md has the same steps with the reasons). A file already in ``DIR``
with other bytes is refused, never overwritten (exit 1); nothing is written then.

Exit codes (docs/cli.md): 0 written (or already identical), 1 refused, 2 usage.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import resources
from pathlib import Path
from typing import Final

WORKER_UNIT: Final = "kexpr-worker@.service"
# The status check and its timer (docs/systemd.md "Alerting").
STATUS_UNIT: Final = "kexpr-status@.service"
STATUS_TIMER: Final = "kexpr-status@.timer"
FILES: Final = (
    WORKER_UNIT,
    "kexpr.sysusers.conf",
    "kexpr.tmpfiles.conf",
    "gateway.dropin.conf",
    STATUS_UNIT,
    STATUS_TIMER,
)
SHIPPED_EXEC: Final = "/opt/kexpr/venv/bin/kexpr"
# A profile name as the host uses it: it becomes %i in paths, so no "/", "@",
# "\\" or leading dot (systemd would escape them; a path must not).
INSTANCE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def shipped(name: str) -> bytes:
    return resources.files("kexpr.ops").joinpath("systemd", name).read_bytes()


def render(name: str, exec_path: str | None) -> bytes:
    data = shipped(name)
    if exec_path is not None and name in (WORKER_UNIT, STATUS_UNIT):
        command = "worker" if name == WORKER_UNIT else "status"
        old = f"ExecStart={SHIPPED_EXEC} {command}".encode()
        assert data.count(old) == 1
        data = data.replace(old, f"ExecStart={exec_path} {command}".encode())
    return data


def steps(instance: str, dest: Path) -> str:
    root = f"/var/lib/kexpr/{instance}/korean-expression-v1"
    return "\n".join(
        [
            f"kexpr systemd-units: wrote {', '.join(FILES)} to {dest}",
            "install (as root; docs/systemd.md explains each step):",
            f"  install -m 0644 {dest}/kexpr.sysusers.conf /etc/sysusers.d/kexpr.conf && systemd-sysusers",
            f"  install -m 0644 {dest}/kexpr.tmpfiles.conf /etc/tmpfiles.d/kexpr.conf && systemd-tmpfiles --create kexpr.conf",
            f"  install -d -m 0750 -o root -g kexpr-spool /var/lib/kexpr/{instance}",
            f"  install -d -m 2770 -o <gateway-user> -g kexpr-spool {root}",
            f"  install -m 0600 -o root -g root /dev/null /etc/kexpr/{instance}.env   # then OPENAI_API_KEY=... only",
            f"  install -m 0644 {dest}/{WORKER_UNIT} /etc/systemd/system/",
            f"  install -D -m 0644 {dest}/gateway.dropin.conf /etc/systemd/system/<gateway unit>.d/kexpr.conf",
            f"  systemctl daemon-reload && systemctl enable --now kexpr-worker@{instance}",
            f"  kexpr status --data-root {root}",
            "alerting (optional): the status check every minute, failed while not healthy:",
            f"  install -m 0644 {dest}/{STATUS_UNIT} {dest}/{STATUS_TIMER} /etc/systemd/system/",
            f"  systemctl daemon-reload && systemctl enable --now kexpr-status@{instance}.timer",
        ]
    )


def cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="kexpr systemd-units",
        description="write the systemd unit files for one instance (host profile) from the installed package",
    )
    p.add_argument("--instance", required=True, help="the host profile, e.g. physique-coach")
    p.add_argument("--dest", required=True, type=Path, help="directory to write the files into")
    p.add_argument(
        "--exec",
        dest="exec_path",
        help=f"the kexpr program for ExecStart= (default {SHIPPED_EXEC}, as docs/systemd.md installs it)",
    )
    a = p.parse_args(argv)
    if not INSTANCE.fullmatch(a.instance):
        p.error(
            "--instance: letters, digits, '_', '.', '-' (at most 64, not starting with '.', '-' or '_')"
        )
    if a.exec_path is not None and not (
        a.exec_path.startswith("/")
        and a.exec_path.isprintable()
        and " " not in a.exec_path
        and "%" not in a.exec_path
    ):
        p.error("--exec must be an absolute path without spaces or %")
    from kexpr.ops.inputs import Problem, refuse

    try:
        a.dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        problem = (
            Problem.NOT_A_DIRECTORY
            if isinstance(e, FileExistsError | NotADirectoryError)
            else Problem.PERMISSION_DENIED
            if isinstance(e, PermissionError)
            else Problem.IO_ERROR
        )
        return refuse("kexpr systemd-units", "--dest", a.dest, problem)
    wanted = {name: render(name, a.exec_path) for name in FILES}
    conflicts = []
    try:
        for name, data in wanted.items():
            target = a.dest / name
            if target.is_symlink() or (
                target.exists() and (not target.is_file() or target.read_bytes() != data)
            ):
                conflicts.append(name)
        if conflicts:
            print(
                f"kexpr systemd-units: refused: {', '.join(conflicts)} already in --dest with other contents",
                file=sys.stderr,
            )
            return 1
        for name, data in wanted.items():
            (a.dest / name).write_bytes(data)
    except OSError as e:
        problem = Problem.PERMISSION_DENIED if isinstance(e, PermissionError) else Problem.IO_ERROR
        return refuse("kexpr systemd-units", "--dest", a.dest, problem)
    print(steps(a.instance, a.dest))
    return 0

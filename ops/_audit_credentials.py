"""Credential isolation for ``kexpr audit``: the key lives in one process (design §10).

Rules of `kexpr.ops.audit` that apply here: findings carry the *name* of a variable,
never a value; values are compared in memory and never printed or stored in a
result. Checks and why each is sound:

- ``--gateway-pid PID`` (repeatable): ``/proc/PID/environ`` is the environment the
  process received at ``execve``. Deleting a variable from ``os.environ`` later
  does not remove it there, which is exactly why it is the right evidence: a key
  that ever reached the gateway's start-up environment shows up (design §10).
  Findings: ``OPENAI_API_KEY`` present; another secret-like ``OPENAI_*`` variable
  (``…KEY``, ``…SECRET``, ``…TOKEN``, ``…PASSWORD``, ``OPENAI_CUSTOM_HEADERS`` which
  can carry ``Authorization``); or the *value* of a known key (the worker's, or one
  found in an ``--env-file``) under any other name. Values are compared in memory
  and never printed.
- ``--worker-pid PID``: the worker is non-dumpable and has no hazardous variables.
  Non-dumpable is read from the kernel's own rule (`environ_protected`: a
  non-dumpable process's ``/proc/PID/environ`` is root:root, which is also what keeps a
  same-UID process out). Reading the worker's environment for hazards needs
  CAP_SYS_PTRACE (run the audit as root); without it the check is unusable, not
  clean. A worker running as uid 0 *and* gid 0 cannot be told apart and is
  reported unusable (``dumpable_undetermined``), never clean.
- ``--env-file F`` (repeatable; e.g. the host's ``~/.hermes/.env``, which the host
  loads into the gateway process): ``OPENAI_API_KEY`` assigned, another secret-like
  ``OPENAI_*``, or a known key value under another name. Do not pass the worker's
  own ``EnvironmentFile=``: holding the key is its job.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kexpr.ops._audit_findings import AuditFinding, Check, CheckResult, Unusable
from kexpr.ops.readers import ReadProblem, ReadRefused, read_nofollow

KEY_VARIABLE: Final = "OPENAI_API_KEY"
MAX_ENVIRON_BYTES: Final = 1 << 20
MAX_ENV_FILE_BYTES: Final = 1 << 20
# A key value shorter than this is not compared (an empty or toy value would
# match unrelated variables and prove nothing).
MIN_KEY_VALUE_LEN: Final = 8
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_OPENAI_SECRETISH: Final = re.compile(
    r"OPENAI_[A-Z0-9_]*(KEY|SECRET|TOKEN|PASSWORD|CUSTOM_HEADERS)[A-Z0-9_]*"
)
# Variables that let someone run code inside the worker before it checks anything.
INJECTION_VARIABLES: Final = frozenset(
    {
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONINSPECT",
        "PYTHONUSERBASE",
        "PYTHONBREAKPOINT",
        "PYTHONWARNINGS",
    }
)


# ------------------------------------------------------------------ processes


def safe_name(name: str) -> str:
    """A variable name fit to print; anything else is not echoed."""
    return name if _NAME.fullmatch(name) else "<unprintable-name>"


def parse_environ(raw: bytes) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        if not item:
            continue
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return env


def read_environ(pid: int) -> dict[str, str]:
    """``/proc/PID/environ`` (the environment at execve). `ReadRefused` on failure."""
    return parse_environ(read_nofollow(f"/proc/{pid}/environ", max_bytes=MAX_ENVIRON_BYTES))


@dataclass(frozen=True, slots=True)
class Creds:
    uids: tuple[int, int, int]  # real, effective, saved
    gids: tuple[int, int, int]


def read_creds(pid: int) -> Creds:
    text = read_nofollow(f"/proc/{pid}/status", max_bytes=1 << 16).decode("ascii", "replace")
    fields: dict[str, tuple[int, int, int]] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("Uid", "Gid"):
            parts = [int(p) for p in rest.split()]
            fields[key] = (parts[0], parts[1], parts[2])
    return Creds(fields["Uid"], fields["Gid"])


def environ_protected(pid: int, creds: Creds) -> bool | None:
    """Is the worker's ``/proc/PID/environ`` closed to same-UID processes?

    proc(5): the files in ``/proc/PID`` are owned by the process's effective uid
    and gid, "however, as a security measure, the ownership is made root:root if
    the process's dumpable attribute is set to a value other than 1". That
    ownership is also the mechanism of the protection: ``environ`` is mode 0400,
    so a same-UID process (a compromised gateway running as the worker's user,
    anything else of that user) is refused by plain file permissions, and ptrace
    access is refused for a non-dumpable target (ptrace(2), "Ptrace access mode
    checking").

    True: ``environ`` is root:root while the worker's ids are not (non-dumpable). False:
    owned by the worker's ids (dumpable). None: the worker itself runs as
    uid 0 *and* gid 0, where both cases look alike — run it under its own user
    (the systemd unit does) or at least a non-root group.
    """
    try:
        # The file, not the directory: the kernel exempts the /proc/PID directory
        # itself and keeps it owned by the process's ids (task_dump_owner()).
        st = os.stat(f"/proc/{pid}/environ")
    except OSError:
        return None
    euid, egid = creds.uids[1], creds.gids[1]
    if (euid, egid) == (0, 0):
        return None
    if (st.st_uid, st.st_gid) == (0, 0):
        return True
    if (st.st_uid, st.st_gid) == (euid, egid):
        return False
    return None


def _secret_findings(
    env: Mapping[str, str],
    result: CheckResult,
    *,
    key_present: AuditFinding,
    openai_secret: AuditFinding,
    key_value: AuditFinding,
    known_values: Iterable[str],
) -> None:
    values = {v for v in known_values if len(v.strip()) >= MIN_KEY_VALUE_LEN}
    for name in sorted(env):
        value = env[name]
        if name == KEY_VARIABLE:
            result.add(key_present, KEY_VARIABLE)
        elif _OPENAI_SECRETISH.fullmatch(name):
            result.add(openai_secret, safe_name(name))
        elif value.strip() in values:
            result.add(key_value, safe_name(name))


def _process_unusable(refused: ReadRefused) -> Unusable:
    """Why a process could not be audited: gone, or not ours to read."""
    if refused.problem is ReadProblem.MISSING:
        return Unusable.NO_SUCH_PROCESS
    return Unusable.PROCESS_UNREADABLE


def audit_gateway(pid: int, known_values: Iterable[str]) -> CheckResult:
    result = CheckResult(Check.GATEWAY_ENVIRONMENT, f"pid {pid}")
    try:
        env = read_environ(pid)
    except ReadRefused as e:
        result.unusable = _process_unusable(e)
        return result
    _secret_findings(
        env,
        result,
        key_present=AuditFinding.GATEWAY_KEY_PRESENT,
        openai_secret=AuditFinding.GATEWAY_OPENAI_SECRET,
        key_value=AuditFinding.GATEWAY_KEY_VALUE_PRESENT,
        known_values=known_values,
    )
    return result


def audit_worker(pid: int) -> tuple[CheckResult, str | None]:
    """The worker check, and the worker's key value (in memory only) for the
    value comparisons of the other checks."""
    from kexpr.worker.environment import hazardous_environment

    result = CheckResult(Check.WORKER_PROCESS, f"pid {pid}")
    try:
        creds = read_creds(pid)
    except ReadRefused as e:
        result.unusable = _process_unusable(e)
        return result, None
    except (KeyError, ValueError, IndexError):
        result.unusable = Unusable.PROCESS_UNREADABLE
        return result, None
    result.info["uid"] = creds.uids[1]
    result.info.update(_sandbox_info(pid))
    protected = environ_protected(pid, creds)
    if protected is None:
        result.unusable = Unusable.DUMPABLE_UNDETERMINED
    elif not protected:
        result.add(AuditFinding.WORKER_DUMPABLE)
    result.info["environ_protected"] = protected
    try:
        env = read_environ(pid)
    except ReadRefused as e:
        result.unusable = _process_unusable(e)
        return result, None
    for name in sorted(env):
        if hazardous_environment({name: ""}):
            result.add(AuditFinding.WORKER_HAZARDOUS_VARIABLE, safe_name(name))
        elif name in INJECTION_VARIABLES:
            result.add(AuditFinding.WORKER_INJECTION_VARIABLE, name)
    key = env.get(KEY_VARIABLE)
    result.info["credential"] = "present" if key and key.strip() else "absent"
    result.info["egress_proxy"] = any(
        n in env for n in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
    )
    return result, key


def _sandbox_info(pid: int) -> dict[str, Any]:
    try:
        text = read_nofollow(f"/proc/{pid}/status", max_bytes=1 << 16).decode("ascii", "replace")
    except ReadRefused:
        return {}
    info: dict[str, Any] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key == "NoNewPrivs":
            info["no_new_privs"] = rest.strip() == "1"
        elif key == "Seccomp":
            info["seccomp"] = {"0": "disabled", "1": "strict", "2": "filter"}.get(
                rest.strip(), "unknown"
            )
        elif key == "CapEff":
            info["effective_capabilities"] = rest.strip() != "0000000000000000"
    return info


# ------------------------------------------------------------------ env files


def parse_env_file(text: str) -> list[tuple[int, str, str]]:
    """``(line, name, value)`` for each assignment of a dotenv file, read by
    python-dotenv as the host reads its ``.env`` (quotes, escapes, multi-line
    values, ``export``, ``${VAR}`` interpolation). The value is the one the host
    would get (the last assignment of a name); the line is where that assignment
    starts. `ImportError` without the ``ops`` extra."""
    import logging

    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    starts: dict[str, int] = {}
    for binding in parse_stream(io.StringIO(text)):
        if binding.key is not None and not binding.error:
            starts[binding.key] = binding.original.line
    # python-dotenv logs a WARNING per line it cannot parse; the audit reports on
    # assignments only, and its output is this command's, so they are silenced.
    quiet = logging.getLogger("dotenv.main")
    was_disabled, quiet.disabled = quiet.disabled, True
    try:
        values = dotenv_values(stream=io.StringIO(text), interpolate=True)
    finally:
        quiet.disabled = was_disabled
    out = [
        (starts[name], name, value or "")
        for name, value in values.items()
        if name in starts and _NAME.fullmatch(name)
    ]
    return sorted(out)


def read_env_text(path: Path) -> str:
    """An env file's text: a regular, non-empty, UTF-8 file (a binary file is not
    read as text with replacement characters: it is refused). `InputRefused`."""
    from kexpr.ops.inputs import read_file

    return read_file(path, max_bytes=MAX_ENV_FILE_BYTES).decode("utf-8")


def audit_env_file(path: Path, known_values: Iterable[str]) -> tuple[CheckResult, list[str]]:
    from kexpr.ops.inputs import InputRefused

    result = CheckResult(Check.ENV_FILE, str(path))
    try:
        text = read_env_text(path)
    except InputRefused as e:
        result.unusable = Unusable.ENV_FILE_UNREADABLE
        result.problem = e.problem.value
        return result, []
    try:
        assignments = parse_env_file(text)
    except ImportError:
        result.unusable = Unusable.ENV_FILE_PARSER_MISSING
        return result, []
    values = {v for v in known_values if len(v.strip()) >= MIN_KEY_VALUE_LEN}
    found_keys: list[str] = []
    for line, name, value in assignments:
        if name == KEY_VARIABLE:
            result.add(AuditFinding.ENV_FILE_KEY_PRESENT, f"{KEY_VARIABLE} (line {line})")
            found_keys.append(value)
        elif _OPENAI_SECRETISH.fullmatch(name):
            result.add(AuditFinding.ENV_FILE_OPENAI_SECRET, f"{safe_name(name)} (line {line})")
        elif value.strip() in values:
            result.add(AuditFinding.ENV_FILE_KEY_VALUE_PRESENT, f"{safe_name(name)} (line {line})")
    return result, found_keys

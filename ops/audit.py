"""``kexpr audit``: prove to an auditor that the key lives in one process (SPEC §10).

Each check runs when its input is given; findings are enum values (plus, where it
helps, the *name* of a variable or the product-generated relative path of a file —
never a value, never content). Exit 0 clean, 1 findings, 2 unusable input (a check
could not be completed; its findings so far are still printed).

Checks and why each is sound:

- ``--gateway-pid PID`` (repeatable): ``/proc/PID/environ`` is the environment the
  process received at ``execve``. Deleting a variable from ``os.environ`` later
  does not remove it there, which is exactly why it is the right evidence: a key
  that ever reached the gateway's start-up environment shows up (SPEC §10).
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
- ``--data-root D``: the sharing rules of `spool.fsio` (rule 3), checked for every
  entry whoever runs the audit: no symlink anywhere; only directories and regular
  files; *private* (root 0700: dirs without group/other bits, files 0600 or
  stricter) or *shared group* (root 02770: dirs exactly 02770, files
  0660/0640/0600, group = the root's group); nothing ever accessible to "other";
  owners are the root's owner, the owner of ``identity.key`` (the gateway), the
  audited processes' users, or (shared) members of the root's group;
  ``identity.key`` private to its owner; journal files writable by their owner
  only; the journal verified by its own rules as the root's owner
  (`ops.readers.verify_journal`); and a redaction scan of every spool and status
  file: no digit outside an ID, timestamp, token or version, and no Hangul word
  outside the style lexicon.
"""

from __future__ import annotations

import enum
import io
import json
import os
import re
import stat
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from spool.fsio import group_member_uids
from spool.layout import DataRoot

from ops.readers import ReadProblem, ReadRefused, read_nofollow, verify_journal
from ops.supervisor import STATUS_NAME as SUPERVISOR_STATUS_NAME

KEY_VARIABLE: Final = "OPENAI_API_KEY"
MAX_ENVIRON_BYTES: Final = 1 << 20
MAX_ENV_FILE_BYTES: Final = 1 << 20
MAX_SPOOL_FILE_BYTES: Final = 64 * 1024
# A key value shorter than this is not compared (an empty or toy value would
# match unrelated variables and prove nothing).
MIN_KEY_VALUE_LEN: Final = 8
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_OPENAI_SECRETISH: Final = re.compile(r"OPENAI_[A-Z0-9_]*(KEY|SECRET|TOKEN|PASSWORD|CUSTOM_HEADERS)[A-Z0-9_]*")
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


class Check(enum.StrEnum):
    GATEWAY_ENVIRONMENT = "gateway_environment"
    WORKER_PROCESS = "worker_process"
    ENV_FILE = "env_file"
    DATA_ROOT = "data_root"


class Finding(enum.StrEnum):
    GATEWAY_KEY_PRESENT = "gateway_key_present"
    GATEWAY_OPENAI_SECRET = "gateway_openai_secret"
    GATEWAY_KEY_VALUE_PRESENT = "gateway_key_value_present"
    WORKER_DUMPABLE = "worker_dumpable"
    WORKER_HAZARDOUS_VARIABLE = "worker_hazardous_variable"
    WORKER_INJECTION_VARIABLE = "worker_injection_variable"
    ENV_FILE_KEY_PRESENT = "env_file_key_present"
    ENV_FILE_OPENAI_SECRET = "env_file_openai_secret"
    ENV_FILE_KEY_VALUE_PRESENT = "env_file_key_value_present"
    SYMLINK = "symlink"
    UNEXPECTED_FILE_TYPE = "unexpected_file_type"
    UNEXPECTED_FILE = "unexpected_file"
    WORLD_ACCESSIBLE = "world_accessible"
    BAD_MODE = "bad_mode"
    GROUP_MISMATCH = "group_mismatch"
    WRONG_OWNER = "wrong_owner"
    SETID_BIT = "setid_bit"
    IDENTITY_KEY_SHARED = "identity_key_shared"
    JOURNAL_WRITABLE_BY_OTHERS = "journal_writable_by_others"
    JOURNAL_UNVERIFIED = "journal_unverified"
    SPOOL_MALFORMED = "spool_malformed"
    SPOOL_DIGITS = "spool_digits"
    SPOOL_UNEXPECTED_HANGUL = "spool_unexpected_hangul"


class Unusable(enum.StrEnum):
    NO_SUCH_PROCESS = "no_such_process"
    PROCESS_UNREADABLE = "process_unreadable"
    DUMPABLE_UNDETERMINED = "dumpable_undetermined"
    ENV_FILE_UNREADABLE = "env_file_unreadable"
    ENV_FILE_PARSER_MISSING = "env_file_parser_missing"  # python-dotenv: `kexpr[ops]`
    DATA_ROOT_MISSING = "data_root_missing"
    DATA_ROOT_UNREADABLE = "data_root_unreadable"
    JOURNAL_UNCHECKED = "journal_unchecked"


@dataclass(frozen=True, slots=True)
class Item:
    finding: Finding
    detail: str = ""


@dataclass(slots=True)
class CheckResult:
    check: Check
    subject: str
    findings: list[Item] = field(default_factory=list)
    unusable: Unusable | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def add(self, finding: Finding, detail: str = "") -> None:
        item = Item(finding, detail)
        if item not in self.findings:
            self.findings.append(item)

    @property
    def status(self) -> str:
        if self.unusable is not None:
            return "unusable"
        return "findings" if self.findings else "clean"

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check.value,
            "subject": self.subject,
            "status": self.status,
            "unusable": None if self.unusable is None else self.unusable.value,
            "findings": [{"finding": i.finding.value, "detail": i.detail} for i in self.findings],
            "info": self.info,
        }


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
    key_present: Finding,
    openai_secret: Finding,
    key_value: Finding,
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


def audit_gateway(pid: int, known_values: Iterable[str]) -> CheckResult:
    result = CheckResult(Check.GATEWAY_ENVIRONMENT, f"pid {pid}")
    try:
        env = read_environ(pid)
    except ReadRefused as e:
        result.unusable = Unusable.NO_SUCH_PROCESS if e.problem is ReadProblem.MISSING else Unusable.PROCESS_UNREADABLE
        return result
    _secret_findings(
        env,
        result,
        key_present=Finding.GATEWAY_KEY_PRESENT,
        openai_secret=Finding.GATEWAY_OPENAI_SECRET,
        key_value=Finding.GATEWAY_KEY_VALUE_PRESENT,
        known_values=known_values,
    )
    return result


def audit_worker(pid: int) -> tuple[CheckResult, str | None]:
    """The worker check, and the worker's key value (in memory only) for the
    value comparisons of the other checks."""
    from worker.environment import hazardous_environment

    result = CheckResult(Check.WORKER_PROCESS, f"pid {pid}")
    try:
        creds = read_creds(pid)
    except ReadRefused as e:
        result.unusable = Unusable.NO_SUCH_PROCESS if e.problem is ReadProblem.MISSING else Unusable.PROCESS_UNREADABLE
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
        result.add(Finding.WORKER_DUMPABLE)
    result.info["environ_protected"] = protected
    try:
        env = read_environ(pid)
    except ReadRefused as e:
        result.unusable = Unusable.NO_SUCH_PROCESS if e.problem is ReadProblem.MISSING else Unusable.PROCESS_UNREADABLE
        return result, None
    for name in sorted(env):
        if hazardous_environment({name: ""}):
            result.add(Finding.WORKER_HAZARDOUS_VARIABLE, safe_name(name))
        elif name in INJECTION_VARIABLES:
            result.add(Finding.WORKER_INJECTION_VARIABLE, name)
    key = env.get(KEY_VARIABLE)
    result.info["credential"] = "present" if key and key.strip() else "absent"
    result.info["egress_proxy"] = any(n in env for n in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"))
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
            info["seccomp"] = {"0": "disabled", "1": "strict", "2": "filter"}.get(rest.strip(), "unknown")
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
    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    starts: dict[str, int] = {}
    for binding in parse_stream(io.StringIO(text)):
        if binding.key is not None and not binding.error:
            starts[binding.key] = binding.original.line
    values = dotenv_values(stream=io.StringIO(text), interpolate=True)
    out = [
        (starts[name], name, value or "")
        for name, value in values.items()
        if name in starts and _NAME.fullmatch(name)
    ]
    return sorted(out)


def audit_env_file(path: Path, known_values: Iterable[str]) -> tuple[CheckResult, list[str]]:
    result = CheckResult(Check.ENV_FILE, str(path))
    try:
        text = read_nofollow(path, max_bytes=MAX_ENV_FILE_BYTES).decode("utf-8", "replace")
    except ReadRefused:
        result.unusable = Unusable.ENV_FILE_UNREADABLE
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
            result.add(Finding.ENV_FILE_KEY_PRESENT, f"{KEY_VARIABLE} (line {line})")
            found_keys.append(value)
        elif _OPENAI_SECRETISH.fullmatch(name):
            result.add(Finding.ENV_FILE_OPENAI_SECRET, f"{safe_name(name)} (line {line})")
        elif value.strip() in values:
            result.add(Finding.ENV_FILE_KEY_VALUE_PRESENT, f"{safe_name(name)} (line {line})")
    return result, found_keys


# ------------------------------------------------------------------ data root

_HEX32_JSON: Final = re.compile(r"[0-9a-f]{32}\.json")
_STAGING: Final = re.compile(r"\.[0-9a-z._]{1,80}\.[0-9]{1,10}\.[0-9a-f]{12}")
_TOP_LEVEL: Final = frozenset(
    {
        "identity.key",
        "spool",
        "journal.lock",
        "worker.lock",
        "outcomes",
        "quarantine",
        "worker.status.json",
        SUPERVISOR_STATUS_NAME,
        # The operator's dual glossary (gateway_shim.operator_glossary), optional.
        "operator-glossary.json",
    }
)
_SPOOL_DIRS: Final = frozenset({"requests", "claimed", "responses", "reports", "tmp"})
_SEGMENT: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\.jsonl")
_QUARANTINED: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\.[1-9][0-9]{0,5}\.jsonl")
SHARED_DIR_MODE: Final = 0o2770
SHARED_FILE_MODES: Final = frozenset({0o660, 0o640, 0o600})


def display_path(rel: tuple[str, ...]) -> str:
    """A relative path fit to print: product-generated names only; any other
    component (which could carry content) is replaced by ``<unrecognized>``."""
    shown = []
    for part in rel:
        ok = (
            part in _TOP_LEVEL
            or part in _SPOOL_DIRS
            or _HEX32_JSON.fullmatch(part)
            or _STAGING.fullmatch(part)
            or _SEGMENT.fullmatch(part)
            or _QUARANTINED.fullmatch(part)
        )
        shown.append(part if ok else "<unrecognized>")
    return "/".join(shown) or "."


def _expected_name(rel: tuple[str, ...]) -> bool:
    if len(rel) == 1:
        return rel[0] in _TOP_LEVEL
    if rel[0] == "spool":
        if len(rel) == 2:
            return rel[1] in _SPOOL_DIRS
        if len(rel) == 3:
            return bool(
                _STAGING.fullmatch(rel[2]) if rel[1] == "tmp" else _HEX32_JSON.fullmatch(rel[2])
            )
        return False
    if rel[0] == "outcomes":
        return len(rel) == 2 and bool(_SEGMENT.fullmatch(rel[1]))
    if rel[0] == "quarantine":
        return len(rel) == 2 and bool(_QUARANTINED.fullmatch(rel[1]))
    return False


def _walk(top: Path) -> Iterator[tuple[tuple[str, ...], os.stat_result]]:
    """Every entry under ``top`` (lstat; symlinks are reported, never followed)."""
    stack: list[tuple[str, ...]] = [()]
    while stack:
        rel = stack.pop()
        with os.scandir(top.joinpath(*rel)) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            sub = (*rel, entry.name)
            yield sub, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(sub)


def audit_data_root(path: Path, extra_owners: Iterable[int] = ()) -> CheckResult:
    result = CheckResult(Check.DATA_ROOT, str(path))
    root = DataRoot(path)
    try:
        top = os.lstat(root.root)
    except OSError:
        result.unusable = Unusable.DATA_ROOT_MISSING
        return result
    if stat.S_ISLNK(top.st_mode):
        result.add(Finding.SYMLINK, ".")
        return result
    if not stat.S_ISDIR(top.st_mode):
        result.unusable = Unusable.DATA_ROOT_MISSING
        return result
    perms = stat.S_IMODE(top.st_mode)
    shared = perms == SHARED_DIR_MODE
    result.info["sharing"] = "shared_group" if shared else "private"
    owners = {top.st_uid, *extra_owners}
    if shared:
        owners |= group_member_uids(top.st_gid)
    try:
        key_st = os.lstat(root.identity_key)
        if stat.S_ISREG(key_st.st_mode):
            owners.add(key_st.st_uid)  # the gateway: it creates identity.key (SPEC §3)
    except FileNotFoundError:
        pass
    rules = _Rules(owners=owners, gid=top.st_gid, shared=shared)
    rules.check(result, (), top)
    try:
        entries = list(_walk(root.root))
    except OSError:
        result.unusable = Unusable.DATA_ROOT_UNREADABLE
        return result
    for rel, st in entries:
        rules.check(result, rel, st)
        if stat.S_ISREG(st.st_mode) and (
            rel[0] == "spool" or rel[-1] in ("worker.status.json", SUPERVISOR_STATUS_NAME)
        ):
            _scan_file(result, root.root, rel)
    result.info["owners"] = sorted(owners)
    try:
        journal = verify_journal(root)
    except ReadRefused:
        result.unusable = Unusable.DATA_ROOT_UNREADABLE
        return result
    if journal.unusable is not None:
        result.unusable = Unusable.JOURNAL_UNCHECKED
    for finding, where in journal.findings:
        result.add(Finding.JOURNAL_UNVERIFIED, f"{_enum_text(finding)} in {display_path(tuple(where.split('/')))}")
    result.info["journal_segments"] = journal.segments
    result.info["journal_attempts"] = len(journal.records)
    result.info["journal_open_attempts"] = sum(1 for r in journal.records if r.outcome is None)
    if journal.quarantined:
        result.info["journal_quarantined"] = len(journal.quarantined)
    return result


def _enum_text(value: str) -> str:
    return value if re.fullmatch(r"[a-z_]{1,40}", value) else "unknown"


@dataclass(frozen=True, slots=True)
class _Rules:
    """`spool.fsio` rule 3, as a report instead of an exception."""

    owners: set[int]
    gid: int
    shared: bool

    def check(self, result: CheckResult, rel: tuple[str, ...], st: os.stat_result) -> None:
        shown = display_path(rel)
        mode = st.st_mode
        perms = stat.S_IMODE(mode)
        if stat.S_ISLNK(mode):
            result.add(Finding.SYMLINK, shown)
            return
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            result.add(Finding.UNEXPECTED_FILE_TYPE, shown)
            return
        if rel and not _expected_name(rel):
            result.add(Finding.UNEXPECTED_FILE, shown)
        if perms & 0o007:
            result.add(Finding.WORLD_ACCESSIBLE, shown)
        if stat.S_ISDIR(mode):
            bad = perms != SHARED_DIR_MODE if self.shared else bool(perms & 0o7077)
        else:
            bad = perms not in SHARED_FILE_MODES if self.shared else bool(perms & 0o7077)
            if perms & (stat.S_ISUID | stat.S_ISGID):
                result.add(Finding.SETID_BIT, shown)
        if bad and not perms & 0o007:
            result.add(Finding.BAD_MODE, shown)
        if perms & 0o070 and st.st_gid != self.gid:
            result.add(Finding.GROUP_MISMATCH, shown)
        if st.st_uid not in self.owners:
            result.add(Finding.WRONG_OWNER, shown)
        if rel == ("identity.key",) and perms & 0o077:
            result.add(Finding.IDENTITY_KEY_SHARED, shown)
        if len(rel) == 2 and rel[0] in ("outcomes", "quarantine") and stat.S_ISREG(mode) and perms & 0o022:
            result.add(Finding.JOURNAL_WRITABLE_BY_OTHERS, shown)


# The only shapes in which a digit may appear in a spool or status string.
_DIGIT_SHAPES: Final = (
    re.compile(r"[0-9a-f]{32}|[0-9a-f]{64}"),  # request/attempt IDs, artifact keys
    re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"),  # timestamps
    re.compile(r"[a-z][a-z._-]*-v[0-9]{1,2}"),  # schema versions (korean-expression-v4)
    re.compile(r"[a-z][a-z_]*(\.[a-z][a-z_]*)*\.v[0-9]{1,2}"),  # surfaces (daily.v1)
    re.compile(r"[a-z][a-z_]*(\.[a-z][a-z_]*)+\.[1-9]"),  # adaptive.dual.review.N
)
_TOKEN: Final = re.compile(r"\[\[[PA]:[0-9]{2}\]\]")
_HANGUL: Final = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_KEY_SHAPE: Final = re.compile(r"[a-z][a-z_]{0,40}")
_MESSAGE_DIRS: Final = frozenset(
    {("spool", "requests"), ("spool", "claimed"), ("spool", "responses"), ("spool", "reports")}
)


def _scan_file(result: CheckResult, root: Path, rel: tuple[str, ...]) -> None:
    from spool.contract.lexicon import SAFE_STYLE_LEXEMES

    shown = display_path(rel)
    try:
        data = read_nofollow(root.joinpath(*rel), max_bytes=MAX_SPOOL_FILE_BYTES)
    except ReadRefused as e:
        if e.problem is not ReadProblem.MISSING:  # consumed meanwhile: not a finding
            result.add(Finding.SPOOL_MALFORMED, shown)
        return
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        obj = None
        if rel[:2] != ("spool", "tmp"):  # a staging file may be half-written
            result.add(Finding.SPOOL_MALFORMED, shown)
        # Still scan the raw text: a half-written file can leak as well as a whole one.
        _scan_string(result, shown, data.decode("utf-8", "replace"), frozenset(SAFE_STYLE_LEXEMES))
        return
    if rel[:2] in _MESSAGE_DIRS and not _parses_as(rel[1], data):
        result.add(Finding.SPOOL_MALFORMED, shown)
    lexicon = frozenset(SAFE_STYLE_LEXEMES)
    for s in _strings(obj):
        _scan_string(result, shown, s, lexicon)


def _parses_as(folder: str, data: bytes) -> bool:
    from spool.messages import MessageError, parse_report, parse_request, parse_response

    parser = {
        "requests": parse_request,
        "claimed": parse_request,
        "responses": parse_response,
        "reports": parse_report,
    }[folder]
    try:
        parser(data)
    except (MessageError, ValueError):
        return False
    return True


def _strings(obj: object) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if not _KEY_SHAPE.fullmatch(str(k)):
                yield str(k)
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _scan_string(result: CheckResult, shown: str, s: str, lexicon: frozenset[str]) -> None:
    stripped = _TOKEN.sub(" ", s)
    has_digit = any(unicodedata.category(c) == "Nd" for c in stripped)
    if has_digit and not any(p.fullmatch(s) for p in _DIGIT_SHAPES):
        result.add(Finding.SPOOL_DIGITS, shown)
    if _HANGUL.search(stripped):
        words = re.split(r"[\s,.]+", stripped)
        if any(_HANGUL.search(w) and w not in lexicon for w in words):
            result.add(Finding.SPOOL_UNEXPECTED_HANGUL, shown)


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
            text = read_nofollow(f, max_bytes=MAX_ENV_FILE_BYTES).decode("utf-8", "replace")
        except ReadRefused:
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
        results.append(audit_data_root(data_root, pids_uids))
    return AuditReport(results)


def render(report: AuditReport) -> str:
    lines = ["kexpr audit"]
    for r in report.results:
        head = f"  {r.check.value:<20} {r.subject}"
        if r.unusable is not None:
            lines.append(f"{head}: UNUSABLE {r.unusable.value}")
        elif not r.findings:
            lines.append(f"{head}: clean")
        else:
            lines.append(f"{head}: {len(r.findings)} finding(s)")
        for item in r.findings:
            lines.append(f"      FINDING {item.finding.value}" + (f"  {item.detail}" if item.detail else ""))
        if r.info:
            lines.append("      info " + "  ".join(f"{k}={_info(v)}" for k, v in sorted(r.info.items())))
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

    from ops.argtypes import int_range

    p = argparse.ArgumentParser(
        prog="kexpr audit",
        description="credential isolation, permissions, journal chain and spool redaction "
        "(exit 0 clean, 1 findings, 2 unusable input)",
    )
    p.add_argument("--gateway-pid", type=int_range(1, 2**31 - 1), action="append", default=[], metavar="PID",
                   help="a gateway process: no OPENAI_API_KEY (or other OPENAI_* secret) in /proc/PID/environ")
    p.add_argument("--worker-pid", type=int_range(1, 2**31 - 1), metavar="PID",
                   help="the worker: non-dumpable, no hazardous variables (run as root)")
    p.add_argument("--env-file", type=Path, action="append", default=[], metavar="F",
                   help="a gateway-side .env file (e.g. ~/.hermes/.env): no key")
    p.add_argument("--data-root", type=Path, metavar="D",
                   help="modes, owners, symlinks, journal chain, spool redaction scan")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the report")
    a = p.parse_args(argv)
    if not (a.gateway_pid or a.worker_pid is not None or a.env_file or a.data_root is not None):
        p.print_usage(sys.stderr)
        print("kexpr audit: give at least one of --gateway-pid, --worker-pid, --env-file, --data-root",
              file=sys.stderr)
        return 2
    report = run_audit(
        gateway_pids=a.gateway_pid,
        worker_pid=a.worker_pid,
        env_files=a.env_file,
        data_root=a.data_root,
    )
    print(json.dumps(report.to_json(), sort_keys=True) if a.json else render(report))
    return report.exit_code

"""What ``kexpr audit`` reports: the checks, their findings and their unusable
reasons, as enum values (design §10).

Rule of `kexpr.ops.audit` that applies here: a finding is an enum value plus, where it
helps, the *name* of a variable or the product-generated relative path of a file —
never a value, never content. A check whose input cannot be read is *unusable*,
never clean.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Check(enum.StrEnum):
    GATEWAY_ENVIRONMENT = "gateway_environment"
    WORKER_PROCESS = "worker_process"
    ENV_FILE = "env_file"
    DATA_ROOT = "data_root"


class AuditFinding(enum.StrEnum):
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
    # The gateway refuses this data root's identity (its detail: why).
    IDENTITY_MISMATCH = "identity_mismatch"
    JOURNAL_WRITABLE_BY_OTHERS = "journal_writable_by_others"
    JOURNAL_UNVERIFIED = "journal_unverified"
    # A staging file older than `kexpr.ops._audit_staging.STAGING_MAX_AGE_S`:
    # no longer being written (a killed writer's, or put there).
    STALE_STAGING_FILE = "stale_staging_file"
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
    finding: AuditFinding
    detail: str = ""


@dataclass(slots=True)
class CheckResult:
    check: Check
    subject: str
    findings: list[Item] = field(default_factory=list)
    unusable: Unusable | None = None
    info: dict[str, Any] = field(default_factory=dict)
    # With ``unusable``: why the input could not be used (`kexpr.ops.inputs.Problem`).
    problem: str | None = None

    def add(self, finding: AuditFinding, detail: str = "") -> None:
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
            "problem": self.problem,
            "findings": [{"finding": i.finding.value, "detail": i.detail} for i in self.findings],
            "info": self.info,
        }

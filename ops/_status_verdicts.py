"""The verdicts of ``kexpr status`` (`HealthVerdict`) and their exit codes
(`EXIT`): the verdict the two validated status files make (`health_verdict`,
the first rule that matches wins) and the findings on its figures. Values in, a
verdict out: nothing here reads a file. `kexpr.ops._status_read.collect` reads
the state, asks here, and adds what only the data root can say (the journal's
file system, the glossary, the identity)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from kexpr.ops._status_figures import ProcessStatus

# `HealthVerdict.EXPIRING`: at least this many requests expired in the last minute, and
# more than half of those claimed. A floor, so that one or two stale requests (a
# restart's leftovers, a host that paused) do not flip the verdict; a burst in
# which most requests expire does (a measured burst of 1,000 artifacts from 20
# gateway processes: 204 start rows, 55 of them after the deadline).
EXPIRING_MIN: Final = 5


class HealthVerdict(enum.StrEnum):
    HEALTHY = "healthy"
    NO_STATUS = "no_status"
    STARTING = "starting"
    STOPPING = "stopping"
    STOPPED = "stopped"
    STALE_HEARTBEAT = "stale_heartbeat"
    WORKER_NOT_RUNNING = "worker_not_running"
    CRASH_LOOP = "crash_loop"
    FATAL = "fatal"
    # Up, but refusing every new attempt (journal unverified / quarantine):
    # each request is answered canonical until an operator acts (worker.daemon).
    QUARANTINED = "quarantined"
    # Up, journal verified, but refusing new attempts for a stated reason
    # (``segment_full``: today's journal segment is full; spool.journal rule 8).
    REFUSING = "refusing"
    # Up, but the gateway refuses to present: its identity key is missing or is
    # not the recorded one beside a journal with rows (gateway_shim.identity).
    IDENTITY_MISMATCH = "identity_mismatch"
    # Up, but a real worker without its key: every request credential_unavailable.
    NO_CREDENTIAL = "no_credential"
    # Up, but the journal cannot be appended (refused append; read-only or full).
    JOURNAL_UNWRITABLE = "journal_unwritable"
    # Up, but most requests of the last minute expired before the worker reached
    # them (at least EXPIRING_MIN): the host gets canonical answers for them.
    EXPIRING = "expiring"
    # Up, but a spend cap is reached: new artifacts get no call until the
    # rolling hour or the UTC day has room again (kexpr.worker.spend).
    SPEND_CAPPED = "spend_capped"
    # Up, but the last hour's start rows are far above the profile's history
    # (kexpr.worker.spend rule 6): a host presenting new artifacts in a loop.
    UNUSUAL_RATE = "unusual_rate"
    # Up, but the gateway cannot use the operator glossary (dual cards canonical).
    GLOSSARY_UNUSABLE = "glossary_unusable"
    STATUS_UNREADABLE = "status_unreadable"


EXIT: Final[Mapping[HealthVerdict, int]] = {
    v: (0 if v is HealthVerdict.HEALTHY else 2 if v is HealthVerdict.STATUS_UNREADABLE else 1)
    for v in HealthVerdict
}

# A worker that is up, serving or refusing for a stated reason: an identity finding
# outranks these (`kexpr.ops._status_read.collect`).
UP: Final = frozenset(
    {
        HealthVerdict.QUARANTINED,
        HealthVerdict.JOURNAL_UNWRITABLE,
        HealthVerdict.REFUSING,
        HealthVerdict.NO_CREDENTIAL,
        HealthVerdict.SPEND_CAPPED,
        HealthVerdict.EXPIRING,
        HealthVerdict.UNUSUAL_RATE,
        HealthVerdict.GLOSSARY_UNUSABLE,
        HealthVerdict.HEALTHY,
    }
)


def health_verdict(
    worker: ProcessStatus | None, supervisor: ProcessStatus | None, stale_after_s: float
) -> HealthVerdict:
    """The verdict the two validated status files make, before the data root's own
    findings."""
    # A supervisor that gave up explains everything else.
    if supervisor is not None and supervisor.state == "crash_loop":
        return HealthVerdict.CRASH_LOOP
    if supervisor is not None and supervisor.state == "fatal":
        return HealthVerdict.FATAL
    if worker is None:
        return HealthVerdict.NO_STATUS
    if worker.state == "stopped":
        return HealthVerdict.STOPPED
    if worker.alive is False or worker.pid is None:
        return HealthVerdict.WORKER_NOT_RUNNING
    if worker.heartbeat_age_s is None or worker.heartbeat_age_s > stale_after_s:
        return HealthVerdict.STALE_HEARTBEAT
    if worker.state == "starting":
        return HealthVerdict.STARTING
    if worker.state == "stopping":
        return HealthVerdict.STOPPING
    if worker.state != "ready":
        return HealthVerdict.STATUS_UNREADABLE
    if worker.fields["journal"] != "verified" or worker.fields["quarantine"] is not None:
        return HealthVerdict.QUARANTINED
    if worker.fields["refusing"] == "append_undone":
        return HealthVerdict.JOURNAL_UNWRITABLE
    if worker.fields["refusing"] is not None:
        return HealthVerdict.REFUSING
    if worker.fields["credential"] == "absent" and not worker.fields["rehearsal"]:
        return HealthVerdict.NO_CREDENTIAL
    spend = worker.fields["spend"]
    if spend.get("capped"):
        return HealthVerdict.SPEND_CAPPED
    recent = worker.fields["last_minute"]
    # Expired before the worker reached them, or reached too late to answer:
    # either way the host got canonical because the worker did not keep up.
    expired = recent.get("expired_requests", 0) + recent.get("no_time_to_answer", 0)
    if expired >= EXPIRING_MIN and 2 * expired > recent.get("claimed", 0):
        return HealthVerdict.EXPIRING
    if spend.get("unusual"):
        return HealthVerdict.UNUSUAL_RATE
    return HealthVerdict.HEALTHY

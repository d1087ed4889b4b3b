"""Environment checks the worker makes before it builds its one client (design §9).

The SDK and the standard library read configuration from the environment on their
own, behind the product's back:

* ``openai`` 2.24.0 reads ``OPENAI_BASE_URL`` (a different endpoint),
  ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID`` (sent as request headers),
  ``OPENAI_WEBHOOK_SECRET``, and ``OPENAI_LOG`` (at ``debug`` it logs request
  bodies, i.e. the capsule); from 2.34 ``OPENAI_CUSTOM_HEADERS`` replaces the
  ``Authorization`` header with one taken from the environment.
* Python's ``ssl`` honours ``SSLKEYLOGFILE`` and writes TLS session keys to a file,
  which makes the provider traffic decryptable.

The rule is a prefix, not a list of the variables known today, so a variable added
by a later SDK is refused too: **every** ``OPENAI_*`` name other than
``OPENAI_API_KEY`` is a hazard. The worker refuses to start on any finding (enum
diagnostic, zero calls); the supervisor never passes these variables.

Not hazards, on purpose: ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` /
``NO_PROXY`` and ``SSL_CERT_FILE`` are how the operator routes egress and how
black-box tests reach a loopback fake of the API; the supervisor's allow-list
decides whether they are present (design §9).

Findings are enum members only. A variable's *value* never leaves this module, and
neither does the name of an arbitrary ``OPENAI_*`` variable: all of them collapse
into :attr:`EnvHazard.OPENAI_VARIABLE`.
"""

from __future__ import annotations

import enum
import logging
import os
import sys
from collections.abc import Mapping
from typing import Final

from kexpr.spool import log

__all__ = [
    "EnvHazard",
    "RehearsalHazard",
    "hazardous_environment",
    "key_available",
    "rehearsal_hazards",
    "warn_if_root",
]

KEY_VARIABLE: Final = "OPENAI_API_KEY"
_OPENAI_PREFIX: Final = "OPENAI_"
_SSLKEYLOGFILE: Final = "SSLKEYLOGFILE"


class EnvHazard(enum.StrEnum):
    """Why the worker refuses to start. Declaration order is report order."""

    OPENAI_VARIABLE = "openai_variable"
    SSLKEYLOGFILE = "sslkeylogfile"


def hazardous_environment(environ: Mapping[str, str]) -> tuple[EnvHazard, ...]:
    """Return the distinct hazards present in ``environ``, in declaration order.

    Names are compared exactly as the SDK and ``ssl`` read them (POSIX environment
    names are case-sensitive; ``openai_log`` is read by nobody). Presence is what
    counts: an empty ``OPENAI_BASE_URL`` is still refused, because the SDK's own
    handling of an empty value is not part of this product's contract.
    """
    found: set[EnvHazard] = set()
    for name in environ:
        if name.startswith(_OPENAI_PREFIX) and name != KEY_VARIABLE:
            found.add(EnvHazard.OPENAI_VARIABLE)
        elif name == _SSLKEYLOGFILE:
            found.add(EnvHazard.SSLKEYLOGFILE)
    return tuple(hazard for hazard in EnvHazard if hazard in found)


def key_available(environ: Mapping[str, str]) -> bool:
    """True when ``OPENAI_API_KEY`` is present and not blank after ``strip()``.

    Missing or blank means ``credential_unavailable`` with zero HTTP (design §9). The
    key itself is neither returned nor inspected beyond this test.
    """
    return bool(environ.get(KEY_VARIABLE, "").strip())


# A rehearsal (`kexpr.worker.rehearsal`) refuses the key itself and every
# variable httpx or ssl would read to route or trust a real connection: a
# rehearsal is never one setting away from a real call.
_NETWORK_VARIABLES: Final = frozenset(
    {
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "https_proxy",
        "http_proxy",
        "all_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
    }
)


class RehearsalHazard(enum.StrEnum):
    """Why a rehearsal worker refuses to start. Declaration order is report order."""

    KEY_PRESENT = "rehearsal_key_present"
    PROXY_PRESENT = "rehearsal_proxy_present"


def rehearsal_hazards(environ: Mapping[str, str]) -> tuple[RehearsalHazard, ...]:
    """What a rehearsal worker refuses in ``environ``: ``OPENAI_API_KEY`` present
    at all (even blank), or any proxy or CA variable. Presence counts, never a value."""
    found: list[RehearsalHazard] = []
    if KEY_VARIABLE in environ:
        found.append(RehearsalHazard.KEY_PRESENT)
    if any(name in environ for name in _NETWORK_VARIABLES):
        found.append(RehearsalHazard.PROXY_PRESENT)
    return tuple(found)


def warn_if_root(euid: int | None = None) -> bool:
    """Said, not refused: a worker whose effective UID is 0. As root it owns what
    it creates in the data root as root, a compromise of it is the machine's, and
    ``kexpr audit`` cannot vouch for it. Not refused, because the main job
    (``make run``) and the test suite run as root on a fresh machine or in CI,
    and a container's only user is often root; the systemd unit runs it as
    ``kexpr-worker``. One stderr line and one WARNING on ``kexpr.worker`` once the
    worker is about to serve (`kexpr.worker.daemon.Worker.serve`: a refusal stays
    one line), and ``"running_as_root": true`` in the status file (``kexpr
    status`` says so)."""
    if (os.geteuid() if euid is None else euid) != 0:
        return False
    print(
        "kexpr worker: warning: running_as_root: run the worker as its own user (docs/systemd.md)",
        file=sys.stderr,
        flush=True,
    )
    log.event(log.logger("worker"), logging.WARNING, "running_as_root")
    return True

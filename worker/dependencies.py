"""The dependency versions the worker runs on, checked at start (design §9).

`kexpr.worker._transport` bounds every provider call by subclassing httpcore's
``NetworkStream``/``NetworkBackend`` and by reaching private places: httpx's
``HTTPTransport._pool._network_backend`` (with ``Client._init_transport`` /
``_init_proxy_transport``), and httpcore's pool's ``_connections``, each one's
``_connection`` / ``_network_stream`` and ``HTTP11Connection._h11_state`` (h11's
buffered bytes, read to never reuse an overrun connection; if that cannot be
read the connection is simply not reused). What that needs, read from the
releases' sources:

- httpcore >= 0.17.3: the first release whose sync backend takes
  ``socket_options`` and exports ``SOCKET_OPTION`` (0.16 and 0.17.0-0.17.2 have
  neither; 0.15 has no public ``NetworkStream`` at all: the worker died at import);
- httpx >= 0.24.0: the first release that accepts httpcore 0.17.3 (0.23 pins
  httpcore < 0.17);
- below httpx 0.29 and httpcore 1.1: the newest releases tested. A future
  release may move what the transport reaches; it is refused until tested.

`SUPPORTED` is the one statement of these ranges: ``pyproject.toml``'s worker
extra says the same (tests/packaging_tests/test_dependency_ranges.py checks it,
and installs the floor and the newest allowed into scratch environments). Outside
them the worker refuses to start with one line and `ExitCode.UNSUPPORTED_DEPENDENCY`,
which neither ``kexpr supervise`` nor the systemd unit restarts: a restart cannot
install another version. A light module: nothing here imports httpx or httpcore
(their installed metadata is read instead), so the check runs before either can
fail at import.
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import Final

__all__ = ["SUPPORTED", "requirement", "unsupported"]

Version = tuple[int, ...]

# name -> (lowest supported, first unsupported), release numbers only.
SUPPORTED: Final[dict[str, tuple[Version, Version]]] = {
    "httpx": ((0, 24, 0), (0, 29)),
    "httpcore": ((0, 17, 3), (1, 1)),
}

_RELEASE: Final = re.compile(r"(\d+(?:\.\d+)*)")


def _text(v: Version) -> str:
    return ".".join(str(n) for n in v)


def requirement(name: str) -> str:
    """``name``'s range as a requirement string (``httpx>=0.24.0,<0.29``)."""
    low, high = SUPPORTED[name]
    return f"{name}>={_text(low)},<{_text(high)}"


def _release(version: str) -> Version | None:
    """The release numbers of a version string; a pre-release counts as its
    release (``1.1.0rc1`` is 1.1.0: refused, never below the cap)."""
    m = _RELEASE.match(version.strip())
    if m is None:
        return None
    numbers = tuple(int(n) for n in m.group(1).split("."))
    return _padded(numbers)


def _padded(v: Version) -> Version:
    return (v + (0, 0, 0, 0))[: max(4, len(v))]


def unsupported() -> list[str]:
    """``"<name> <version>"`` (or ``"<name> missing"``) for every dependency
    outside `SUPPORTED`; empty when the worker can run."""
    found: list[str] = []
    for name, (low, high) in SUPPORTED.items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            found.append(f"{name} missing")
            continue
        release = _release(version)
        if release is None or not _padded(low) <= release < _padded(high):
            # Only digits, dots and letters: a version string, never content.
            shown = re.sub(r"[^0-9A-Za-z.+-]", "?", version)[:40]
            found.append(f"{name} {shown}")
    return found

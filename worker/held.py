"""What this worker process holds in memory of its attempts and entries.

``held``: attempt_id -> what *this* process holds of an open attempt (its own
call, or an answered attempt awaiting its report; spool.lifecycle). Rebuilt
from the journal and responses/ at start-up. ``answers``: attempt_id ->
request_id of its accepted response file (the attempt's durable
AWAITING_REPORT; removed once its terminal row is durable). Both are guarded
by the journal lock.

``busy``: the claimed entries dispatched to the call pool and not yet done.
``stuck``: refused entries whose file could not be removed (e.g. a directory
planted at ``claimed/<id>.json``): counted once, then skipped while they are
still listed, so one stuck entry is not re-handled every scan. Both are
guarded by ``lock``.
"""

from __future__ import annotations

import threading

from kexpr.spool.lifecycle import Held, Phase


class HeldAttempts:
    __slots__ = ("answers", "busy", "held", "lock", "stuck")

    def __init__(self) -> None:
        self.held: dict[str, Held] = {}
        self.answers: dict[str, str] = {}
        self.busy: set[str] = set()
        self.stuck: set[tuple[str, str]] = set()
        self.lock = threading.Lock()

    def phase(self, attempt_id: str) -> Phase:
        """The phase this process holds the attempt in (OPEN if not held)."""
        held = self.held.get(attempt_id)
        return held.phase if held is not None else Phase.OPEN

    def forget(self, attempt_id: str) -> str | None:
        """Forget an attempt; the request_id of its accepted answer, if any."""
        self.held.pop(attempt_id, None)
        return self.answers.pop(attempt_id, None)

    def left_open_by(self, rid: str) -> list[str]:
        """The attempts request ``rid`` started that its live owner still holds OPEN."""
        return [
            aid
            for aid, held in list(self.held.items())
            if held.live and held.phase is Phase.OPEN and held.starter == rid
        ]

    def take(self, name: str) -> bool:
        """Mark a claimed entry busy; False if it already is."""
        with self.lock:
            if name in self.busy:
                return False
            self.busy.add(name)
            return True

    def done(self, name: str) -> None:
        with self.lock:
            self.busy.discard(name)

    def mark_stuck(self, where: str, name: str) -> None:
        with self.lock:
            self.stuck.add((where, name))

    def live_names(self, where: str, names: list[str]) -> list[str]:
        """``names`` without the stuck entries of ``where``; a stuck entry that
        is no longer listed is forgotten."""
        listed = set(names)
        with self.lock:
            self.stuck = {s for s in self.stuck if s[0] != where or s[1] in listed}
            return [n for n in names if (where, n) not in self.stuck]

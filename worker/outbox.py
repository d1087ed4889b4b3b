"""What the worker writes into, and removes from, the spool (design §4):
responses published into ``responses/``, the responses nobody collected
(litter, after RESPONSE_TTL), and the refused files it drops. Every directory
comes from `DataRoot.route`, so the lifecycle's move table
(`kexpr.spool.lifecycle.SPOOL_FILE_MOVES`) gates each move.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from kexpr.spool.fsio import FileId, Reservation, UnsafePath, publish, unlink_if_same, unlink_quiet
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import RESPONSE_TTL, Actor, File, Move
from kexpr.spool.messages import SPOOL_VERSION, ResponseStatus, SpoolResponse, SpoolVersion
from kexpr.spool.outcomes import ResponseOutcome
from kexpr.worker.quarantine import Quarantine
from kexpr.worker.status import Counters, Fault


def source(root: DataRoot, file: File, move: Move) -> Path:
    """The directory the worker's ``move`` takes ``file`` from (table-gated)."""
    src, _ = root.route(file, move, Actor.WORKER)
    assert src is not None
    return src


def target(root: DataRoot, file: File, move: Move) -> Path:
    """The directory the worker's ``move`` puts ``file`` into (table-gated)."""
    _, dst = root.route(file, move, Actor.WORKER)
    assert dst is not None
    return dst


def quiet_unlink(path: Path) -> bool:
    """Best-effort removal of a spool file; an unsafe directory is caught by
    the tree check before the next scan. False if it failed."""
    try:
        unlink_quiet(path)
    except OSError:
        return False
    return True


class Outbox:
    """Publishes the worker's answers and removes what it must remove. Holds the
    memory of litter: request_id -> monotonic time after which its response
    file is removed (RESPONSE_TTL; `Move.UNCOLLECTED`)."""

    def __init__(
        self,
        root: DataRoot,
        counters: Counters,
        quarantine: Quarantine,
        monotonic: Callable[[], float],
    ) -> None:
        self._root = root
        self._counters = counters
        self._quarantine = quarantine
        self._mono = monotonic
        self._litter: dict[str, float] = {}
        self._litter_lock = threading.Lock()

    def respond(
        self,
        rid: str,
        attempt_id: str | None,
        status: ResponseStatus,
        outcome: ResponseOutcome,
        *,
        version: SpoolVersion = SPOOL_VERSION,
        reservation: Reservation | None = None,
    ) -> bool:
        """An answer without composition. ``version``: the request's own, so a
        shim of the older protocol can parse its answer (`kexpr.spool.messages`)."""
        return self.publish(
            SpoolResponse(
                spool_version=version,
                request_id=rid,
                attempt_id=attempt_id,
                status=status,
                outcome=outcome,
                composition=None,
            ),
            reservation=reservation,
        )

    def publish(
        self,
        resp: SpoolResponse,
        *,
        durable: bool = False,
        reservation: Reservation | None = None,
    ) -> bool:
        """``durable``: an accepted response is its attempt's AWAITING_REPORT
        (spool.lifecycle rule 3) and must survive a crash: fsynced, and removed
        by the worker once the terminal row is durable. Any other answer is
        only useful before its deadline (a torn one fails the shim's strict
        parse): not fsynced, and removed as litter after RESPONSE_TTL if the
        shim never collected it. ``reservation``: the staging file reserved
        before the call (`kexpr.worker.attempt`), used once.
        False if nothing was published."""
        file = File.ACCEPTED_ANSWER if durable else File.ANSWER
        final = target(self._root, file, Move.PUBLISH) / f"{resp.request_id}.json"
        if not durable:
            self.remember_litter(resp.request_id, self._mono())
        try:
            if reservation is not None and reservation.final_path == final:
                reservation.publish(resp.to_bytes(), durable=durable)
            else:
                publish(self._root.tmp, final, resp.to_bytes(), durable=durable)
        except (OSError, ValueError) as e:
            # UnsafePath: responses/ is not what it was (quarantine); the shim
            # times out canonical. Any other OSError, FileExistsError included:
            # the shim falls back to canonical. ValueError: the reservation was
            # already used (a caller bug).
            self._quarantine.failed(e, otherwise=Fault.RESPOND_FAILED)
            return False
        return True

    def remove_accepted(self, rid: str) -> None:
        """The accepted answer of an attempt whose terminal row is durable."""
        quiet_unlink(
            source(self._root, File.ACCEPTED_ANSWER, Move.TERMINAL_DURABLE) / f"{rid}.json"
        )

    def drop(self, path: Path, e: Exception) -> bool:
        """A spool file that could not be read or parsed: removed; an unsafe one
        is also counted by its reason (enum only). False if it is still there."""
        if isinstance(e, UnsafePath):
            self._counters.unsafe_file(e)
        return quiet_unlink(path)

    def remove_read(self, path: Path, fid: FileId) -> None:
        """Remove a handled file only if it is still the one that was read
        (fsio rule 4); a swapped one is left for the next scan. An unsafe one
        is counted by its reason."""
        try:
            unlink_if_same(path, fid)
        except UnsafePath as e:
            self._counters.unsafe_file(e)
        except OSError:
            pass

    def remember_litter(self, rid: str, mono: float) -> None:
        with self._litter_lock:
            self._litter.setdefault(rid, mono + RESPONSE_TTL.total_seconds())

    def remove_litter(self) -> None:
        """Responses nobody collected within RESPONSE_TTL (spool.lifecycle
        `Move.UNCOLLECTED`); a collected one is already gone."""
        mono = self._mono()
        with self._litter_lock:
            due = [rid for rid, t in self._litter.items() if mono >= t]
            for rid in due:
                del self._litter[rid]
        where = source(self._root, File.ANSWER, Move.UNCOLLECTED)
        for rid in due:
            quiet_unlink(where / f"{rid}.json")

"""The worker's content-free counters and faults (``worker.status.json``), and
`wait_ready` for ops and tests.

Besides the totals since start, the status file carries two content-free views
of the recent past and of the call's margin:

* ``last_minute``: the `ROLLING` counters over the last 60 s (`RollingCount`), so
  ``kexpr status`` can say how many requests expired per minute *now* and call a
  burst in which most requests expire what it is (`kexpr.ops.status_cli`), where
  the totals since start would dilute it.
* ``calls_by_surface`` and ``histogram_edges``: per surface, the calls made, how
  they failed, and the call-time and completion-token histograms
  (`kexpr.worker.histograms`; fixed edges, counts only).
* ``style_words_by_slot``: per slot of the accepted answers (a public manifest slot
  id), how many answers and how often each style word of the lexicon was used:
  what the model writes, without a word of content (`Counters.record_style`).
* ``tokens_by_surface``: per surface, the prompt and completion tokens the API
  reported for its calls (``usage``), summed since start: ``kexpr status`` turns
  them into a cost per day at the price the operator gives.
* ``running_as_root``: the worker's effective UID is 0 (said on stderr at start too).
* ``admission``: the cool-down's state (`kexpr.worker.cooldown`) and, per
  surface, the requests it refused before a start row. Numbers and enum words
  only. A file written by an earlier release also carries the retired speed
  figures (``speed``, ``too_slow_last``, ``last_ten_minutes``, the
  ``provider_too_slow`` counters): readers ignore them (docs/upgrade.md).
* ``spend``: the spend caps, the start rows of the rolling hour and of the UTC
  day against them, the requests refused at a cap, and the profile's hourly
  history (`kexpr.worker.spend`). Numbers only.
"""

from __future__ import annotations

import enum
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

from kexpr.spool.contract import SURFACES
from kexpr.spool.contract.lexicon import SAFE_STYLE_LEXEMES
from kexpr.spool.contract.manifest import manifest_for
from kexpr.spool.fsio import UnsafePath, replace_private
from kexpr.spool.journal import Finding, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import Outcome
from kexpr.spool.outcomes import ProviderFailure
from kexpr.spool.status import READY, STATUS_SCHEMA, StatusRefused, parse_status
from kexpr.worker.histograms import SurfaceCalls, edges_json, new_surfaces

if TYPE_CHECKING:
    from kexpr.spool.contract import Composition
    from kexpr.worker.parts import Parts


class Fault(enum.StrEnum):
    """Why one spool entry, or one scan, failed (`Counters.faults`; enum only).
    A fault harms only its own entry: that entry is answered canonical, or left
    untouched for the next scan, and every other request is still served."""

    LIST_FAILED = "list_failed"  # listing requests/ or claimed/ failed (this scan)
    CLAIM_FAILED = "claim_failed"  # the claim rename of one request failed
    READ_FAILED = "read_failed"  # reading one claimed request failed (not unsafe)
    ENTRY_STUCK = "entry_stuck"  # a refused entry could not be removed; skipped
    RESPOND_FAILED = "respond_failed"  # publishing one response failed
    RESOURCE_EXHAUSTED = "resource_exhausted"  # EMFILE/ENFILE/ENOMEM: backed off
    ENTRY_ERROR = "entry_error"  # any other OSError while handling one entry
    APPEND_UNDONE = "append_undone"  # a failed append was undone (spool.journal)
    SEGMENT_FULL = "segment_full"  # a new attempt refused: today's segment is full
    WATCH_FAILED = "watch_failed"  # no inotify watch: the rescan timer alone
    # The answer's staging file could not be reserved: no row, no call.
    RESERVE_FAILED = "reserve_failed"
    # Something unexpected was raised after a start row; the attempt
    # was ended (claim_expired_canonical), never left live.
    ATTEMPT_ERROR = "attempt_error"
    # A call thread could not be started (RLIMIT_NPROC, TasksMax=, memory): it is
    # taken before the start row, so the request is answered canonical
    # (answer_unpublishable) with no row and no call; the artifact is not spent.
    THREAD_START_FAILED = "thread_start_failed"
    # Anything else unexpected while handling one entry (the call pool's net).
    UNEXPECTED_ERROR = "unexpected_error"
    # A spool file of a protocol version this release does not know: refused,
    # a report kept for the worker that knows it (kexpr.spool.messages).
    UNKNOWN_SPOOL_VERSION = "unknown_spool_version"


# The journal's refusals of one append (`AppendRefused.finding`) as the worker's
# faults: explicit, total over the findings an append is refused with.
FAULT_FOR_REFUSED_APPEND: Final[Mapping[Finding, Fault]] = {
    Finding.APPEND_UNDONE: Fault.APPEND_UNDONE,
    Finding.SEGMENT_FULL: Fault.SEGMENT_FULL,
}


_LEXICON: Final = frozenset(SAFE_STYLE_LEXEMES)
_HANGUL_RUN: Final = re.compile("[\uac00-\ud7a3]+")

CounterName: TypeAlias = Literal[
    "claimed",
    "calls",
    "accepted",
    "canonical",
    "in_flight",
    "clock_skew",
    "lost_attempts",
    "already_attempted",
    "expired_requests",
    "no_time_to_answer",
    "provider_cooling_down",
    "spend_cap_reached",
    "identity_mismatch",
    "invalid_requests",
    "reports",
    "orphan_reports",
    "late_results",
    "late_for_publish",
    "retired_segments",
]


# Counters also kept over the last minute (``last_minute`` in the status file):
# the requests claimed, the calls made, the requests that had expired before the
# worker reached them, and those it reached with too little time left to answer
# (no_time_to_answer: refused before the start row). ``kexpr status``
# compares the last two with claimed, so that its status under load is truthful.
ROLLING: Final[tuple[CounterName, ...]] = (
    "claimed",
    "calls",
    "expired_requests",
    "no_time_to_answer",
)
ROLLING_WINDOW_S: Final = 60

# The refusals counted per surface as well (``admission.refused_by_surface``).
Refusal: TypeAlias = Literal["provider_cooling_down"]
REFUSALS: Final[tuple[Refusal, ...]] = get_args(Refusal)


@dataclass(slots=True)
class RollingCount:
    """A count over the last ``60 x slot_s`` seconds of a monotonic clock
    (`ROLLING_WINDOW_S` with the default one-second slots): constant memory
    whatever the rate (a burst of thousands of expiries a second is still 60
    integers), counts only. A slot holds the whole ``slot_s`` seconds it was
    stamped with; the sum counts the slots ``(now - 60 slots, now]``."""

    slot_s: int = 1
    stamps: list[int] = field(default_factory=lambda: [-1] * ROLLING_WINDOW_S)
    counts: list[int] = field(default_factory=lambda: [0] * ROLLING_WINDOW_S)

    def add(self, now: float, n: int = 1) -> None:
        slot = math.floor(now / self.slot_s)
        i = slot % ROLLING_WINDOW_S
        if self.stamps[i] != slot:
            self.stamps[i], self.counts[i] = slot, 0
        self.counts[i] += n

    def total(self, now: float) -> int:
        slot = math.floor(now / self.slot_s)
        return sum(
            c
            for t, c in zip(self.stamps, self.counts, strict=True)
            if slot - ROLLING_WINDOW_S < t <= slot
        )


@dataclass(slots=True)
class Counters:
    """Content-free counters for ``worker.status.json`` (trio-style statistics).

    The scan thread and the call threads both count: every change goes through a
    method that holds ``lock`` (``x += 1`` on an attribute is a read and a write
    another thread can interleave), and `StatusFile.write` reads under it."""

    claimed: int = 0
    calls: int = 0
    accepted: int = 0
    canonical: int = 0
    in_flight: int = 0
    clock_skew: int = 0
    # Open attempts a dead predecessor left whose call died with it (lifecycle rule 3).
    lost_attempts: int = 0
    already_attempted: int = 0
    expired_requests: int = 0
    # Refused under the lock before a start row: no time left for the minimal answer.
    no_time_to_answer: int = 0
    # Refused under the lock before a start row while the provider cools down
    # (kexpr.worker.cooldown).
    provider_cooling_down: int = 0
    # Refused under the lock before a start row: the spend cap of the rolling
    # hour or the UTC day is reached (kexpr.worker.spend).
    spend_cap_reached: int = 0
    # Refused under the lock before a start row: the request's key is not the
    # one the journal names (kexpr.spool._journal_identity).
    identity_mismatch: int = 0
    invalid_requests: int = 0
    reports: int = 0
    orphan_reports: int = 0
    late_results: int = 0
    # Answers that came back before the deadline but too close to it to be
    # published before the shim stops waiting (worker.attempt PUBLISH_MARGIN_S):
    # discarded as late, never delivered, never called again. Also in late_results.
    late_for_publish: int = 0
    retired_segments: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    # Unsafe spool files by `kexpr.spool.fsio.UnsafeReason` value (enum keys only).
    unsafe: dict[str, int] = field(default_factory=dict)
    # Entry and scan faults by `Fault` value (enum keys only).
    faults: dict[str, int] = field(default_factory=dict)
    # Per public surface: calls, failures and the margin's histograms.
    calls_by_surface: dict[str, SurfaceCalls] = field(default_factory=new_surfaces)
    # Per public surface, the admission's refusals by `REFUSALS` word (keys are
    # public constants only: a surface outside SURFACES is not recorded).
    refused_by_surface: dict[str, dict[str, int]] = field(
        default_factory=lambda: {s: {r: 0 for r in REFUSALS} for s in SURFACES}
    )
    # Per manifest slot id: accepted answers and each lexicon word's uses (words
    # of `SAFE_STYLE_LEXEMES` only: nothing else is ever counted).
    style_words_by_slot: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Per public surface: usage.prompt_tokens / usage.completion_tokens summed.
    tokens_by_surface: dict[str, dict[str, int]] = field(
        default_factory=lambda: {
            s: {"prompt": 0, "completion": 0, "calls_with_usage": 0} for s in SURFACES
        }
    )
    # The `ROLLING` counters over the last minute, on `clock`.
    last_minute: dict[str, RollingCount] = field(
        default_factory=lambda: {name: RollingCount() for name in ROLLING}
    )
    # The worker's monotonic clock (injected with the worker's own, so a test's
    # controllable clock drives the last minute too).
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bump(self, name: CounterName, n: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + n)
            rolling = self.last_minute.get(name)
            if rolling is not None:
                rolling.add(self.clock(), n)

    def record_call(
        self,
        surface: str,
        seconds: float,
        failure: ProviderFailure | None,
        completion_tokens: int | None,
    ) -> None:
        """One provider call's margin: its surface (a public name, else not
        recorded), its duration on the monotonic clock, how it failed (None: it
        returned content) and the answer's reported completion tokens."""
        with self.lock:
            calls = self.calls_by_surface.get(surface)
            if calls is not None:
                calls.record(seconds, failure, completion_tokens)

    def record_style(self, composition: Composition) -> None:
        """The style words of one accepted answer, per slot: only slots the
        manifest names and only words of the lexicon (the contract accepted the
        answer, so every word outside a token is one; the filter is the rule)."""
        with self.lock:
            for slot in composition.slots:
                if manifest_for(slot.slot_id) is None:
                    continue
                entry = self.style_words_by_slot.setdefault(
                    slot.slot_id, {"answers": 0, "words": {}}
                )
                entry["answers"] += 1
                words: dict[str, int] = entry["words"]
                for word in _HANGUL_RUN.findall(slot.generated_ko):
                    if word in _LEXICON:
                        words[word] = words.get(word, 0) + 1

    def record_tokens(self, surface: str, prompt: int | None, completion: int | None) -> None:
        """One call's reported usage (a public surface, else not recorded)."""
        with self.lock:
            entry = self.tokens_by_surface.get(surface)
            if entry is None or (prompt is None and completion is None):
                return
            entry["prompt"] += prompt or 0
            entry["completion"] += completion or 0
            entry["calls_with_usage"] += 1

    def refused(self, outcome: Outcome, surface: str) -> None:
        """One request refused before its start row for the provider's sake (a
        `REFUSALS` word): the total and its surface's count (a public name, else
        the total only)."""
        name = outcome.value
        assert name in REFUSALS
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)
            per = self.refused_by_surface.get(surface)
            if per is not None:
                per[name] += 1

    def recent(self) -> dict[str, int]:
        """The `ROLLING` counters over the last minute (caller holds ``lock``)."""
        now = self.clock()
        return {name: r.total(now) for name, r in self.last_minute.items()}

    def outcome(self, o: Outcome) -> None:
        with self.lock:
            self.by_outcome[o.value] = self.by_outcome.get(o.value, 0) + 1

    def unsafe_file(self, e: UnsafePath) -> None:
        with self.lock:
            self.unsafe[e.reason.value] = self.unsafe.get(e.reason.value, 0) + 1

    def fault(self, f: Fault) -> None:
        with self.lock:
            self.faults[f.value] = self.faults.get(f.value, 0) + 1


class StatusFile:
    """``worker.status.json``: heartbeat, state and counters; no content.
    ``state`` is the run loop's (starting, ready, stopping, stopped)."""

    def __init__(self, parts: Parts, *, rehearsal: bool) -> None:
        self._parts = parts
        self._rehearsal = rehearsal
        self._as_root = os.geteuid() == 0
        self._started_at = format_ts(parts.clock())
        self.state = "starting"

    def write(self) -> None:
        p = self._parts
        q = p.quarantine
        c = p.counters
        with c.lock:
            status = {
                "schema": STATUS_SCHEMA,
                "pid": os.getpid(),
                "state": self.state,
                "started_at_utc": self._started_at,
                "heartbeat_at_utc": format_ts(p.clock()),
                "journal": "verified" if q.journal_ok else "unverified",
                "quarantine": q.reason,
                "quarantine_clear": q.last_clear,
                "clock_step_observed": p.clockwatch.step,
                # Why retention removes nothing now (spool.journal rule 7a), or None.
                "retention_held": None if p.retention.hold is None else p.retention.hold.value,
                "refusing": q.refusing,
                "unsafe": dict(sorted(c.unsafe.items())),
                "faults": dict(sorted(c.faults.items())),
                # A rehearsal's client is the built-in model's: no key at all.
                "credential": "rehearsal"
                if self._rehearsal
                else ("present" if p.client is not None else "absent"),
                "rehearsal": self._rehearsal,
                "running_as_root": self._as_root,
                "counters": {
                    **{name: getattr(c, name) for name in get_args(CounterName)},
                    "by_outcome": dict(sorted(c.by_outcome.items())),
                },
                "last_minute": c.recent(),
                "calls_by_surface": {s: v.to_json() for s, v in c.calls_by_surface.items()},
                "histogram_edges": edges_json(),
                "style_words_by_slot": {
                    slot: {"answers": v["answers"], "words": dict(sorted(v["words"].items()))}
                    for slot, v in sorted(c.style_words_by_slot.items())
                },
                "tokens_by_surface": {s: dict(v) for s, v in sorted(c.tokens_by_surface.items())},
                "admission": {
                    "cooldown": p.cooldown.to_json(p.mono()),
                    "refused_by_surface": {
                        s: dict(v) for s, v in sorted(c.refused_by_surface.items())
                    },
                },
                "spend": p.spend.to_json(p.clock(), p.mono()),
            }
        try:
            replace_private(
                p.root.status_file,
                json.dumps(status, sort_keys=True).encode("utf-8"),
            )
        except OSError:
            pass  # a heartbeat, not evidence; the tree check reports the cause


def wait_ready(
    root: DataRoot, timeout_s: float, *, pid: int | None = None, poll_s: float = 0.05
) -> bool:
    """Block until ``worker.status.json`` says ready (ops and tests use this)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            status = parse_status(root.status_file.read_bytes())
            if status.state == READY and (pid is None or status.pid == pid):
                return True
        except (OSError, StatusRefused):
            pass
        time.sleep(poll_s)
    return False

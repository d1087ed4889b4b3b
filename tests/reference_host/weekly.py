"""Reference weekly host: a scheduled-delivery ledger and the weekly task branch.

Tests only. It does what the plan's Hermes-side section "Weekly pin-before-send
and restart" requires of the real host, with the shim as it ships:

    new task:   canonical report → apresent_weekly (candidate or canonical)
                → template_digest(final body) → reserve(final body) [prepared]
                → report "selected" (enabled, after the durable write)
                → sending → send → delivered
    restart:    an existing `prepared` receipt is read through
                load_prepared_customer_task_delivery BEFORE any rendering,
                revalidated, moved to `sending`, and its pinned bytes are sent.
                No report is rendered, no presentation made, no spool request.

``template_digest`` is the host's (T:`_nutrition_schedule_digest` at 4305027f): the
SHA-256 of the body JSON-quoted (``json.dumps(body, ensure_ascii=False,
sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)``), not of the
raw text; the ledger refuses a reservation whose digest does not pin the body that
way. ``body_digest`` is the ledger's own digest of the raw bytes.

The ledger is an append-only JSONL file with a hash chain (the same habits as
the product's journal: canonical JSON, one LF, previous digest); states move
only along ``TRANSITIONS``. ``sending``, ``delivered`` and ``unknown`` keep
their no-retry semantics: the task branch never sends again for them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gateway_shim import KoreanExpressionCoordinator, Outcome
from reference_host.host_render import render_weekly

GENESIS: Final = "0" * 64
# State machine as data (STYLE: h11): a missing key is an illegal transition.
TRANSITIONS: Final[dict[str, frozenset[str]]] = {
    "prepared": frozenset({"sending", "unknown"}),
    "sending": frozenset({"delivered", "unknown"}),
    "delivered": frozenset(),
    "unknown": frozenset(),
}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def schedule_digest(body: str) -> str:
    """The host's ``template_digest``: SHA-256 of the JSON-quoted body."""
    quoted = json.dumps(
        body,
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        allow_nan=False,
        default=str,
    )
    return sha256_text(quoted)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class PreparedMaterialUnavailable(Exception):
    """The prepared row cannot be read back exactly (digest, chain, state)."""


class LedgerCorrupt(Exception):
    """The ledger's chain is broken: hard stop, no append, no provider call."""


@dataclass(frozen=True, slots=True)
class ScheduledDeliveryReceipt:
    """Digests only (the plan: a receipt intentionally exposes no body)."""

    receipt_id: str
    schedule_key: str
    kind: str
    kst_day: str
    template_digest: str
    body_digest: str
    destination_digest: str


@dataclass(frozen=True, slots=True)
class PinnedScheduledDelivery:
    receipt: ScheduledDeliveryReceipt
    body: str
    destination: object


class ScheduledDeliveryLedger:
    """The host's durable owner of the selected weekly body."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writer_lock = threading.Lock()  # the schedule writer lock

    # -- reading ---------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """All rows, chain verified; raises LedgerCorrupt."""
        if not self.path.exists():
            return []
        rows: list[dict[str, Any]] = []
        previous = GENESIS
        for line in self.path.read_text("utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError as e:
                raise LedgerCorrupt("row") from e
            digest = row.pop("row_digest", None)
            if row.get("previous_row_digest") != previous or digest != sha256_text(_canonical(row)):
                raise LedgerCorrupt("chain")
            rows.append(row)
            previous = digest
        return rows

    def find(self, schedule_key: str, kind: str, kst_day: str) -> ScheduledDeliveryReceipt | None:
        for row in self.rows():
            if row["state"] == "prepared" and (
                row["schedule_key"],
                row["kind"],
                row["kst_day"],
            ) == (
                schedule_key,
                kind,
                kst_day,
            ):
                return _receipt(row)
        return None

    def state(self, receipt: ScheduledDeliveryReceipt) -> str:
        states = [r["state"] for r in self.rows() if r["receipt_id"] == receipt.receipt_id]
        return states[-1]

    def load_prepared_customer_task_delivery(
        self, receipt: ScheduledDeliveryReceipt
    ) -> PinnedScheduledDelivery:
        """Under the writer lock: chain, state ``prepared``, receipt identity and
        body/destination digests; returns the exact durable body. Read-only."""
        with self.writer_lock:
            rows = self.rows()
            mine = [r for r in rows if r["receipt_id"] == receipt.receipt_id]
            if not mine or mine[-1]["state"] != "prepared" or _receipt(mine[0]) != receipt:
                raise PreparedMaterialUnavailable("state")
            prepared = mine[0]
            body, destination = prepared["body"], prepared["destination"]
            if (
                sha256_text(body) != receipt.body_digest
                or schedule_digest(body) != receipt.template_digest
                or sha256_text(_canonical(destination)) != receipt.destination_digest
            ):
                raise PreparedMaterialUnavailable("digest")
            return PinnedScheduledDelivery(receipt=receipt, body=body, destination=destination)

    # -- writing ---------------------------------------------------------------

    def reserve_customer_task_delivery(
        self,
        final_body: str,
        *,
        schedule_key: str,
        kind: str,
        kst_day: str,
        destination: object,
        template_digest: str,
    ) -> ScheduledDeliveryReceipt:
        with self.writer_lock:
            if template_digest != schedule_digest(final_body):
                raise ValueError("template digest does not pin this body")
            if self.find(schedule_key, kind, kst_day) is not None:
                raise ValueError("already reserved")
            row = {
                "receipt_id": sha256_text(_canonical([schedule_key, kind, kst_day]))[:32],
                "state": "prepared",
                "reason": None,
                "schedule_key": schedule_key,
                "kind": kind,
                "kst_day": kst_day,
                "body": final_body,
                "destination": destination,
                "template_digest": template_digest,
                "body_digest": sha256_text(final_body),
                "destination_digest": sha256_text(_canonical(destination)),
            }
            self._append(row)
            return _receipt(row)

    def transition(
        self, receipt: ScheduledDeliveryReceipt, state: str, reason: str | None = None
    ) -> None:
        with self.writer_lock:
            current = self.state(receipt)
            if state not in TRANSITIONS[current]:
                raise ValueError("illegal transition")
            self._append({"receipt_id": receipt.receipt_id, "state": state, "reason": reason})

    def _append(self, row: dict[str, Any]) -> None:
        rows = self.rows()
        previous = GENESIS
        if rows:
            last = dict(rows[-1])
            previous = sha256_text(_canonical(last))
        row = {**row, "previous_row_digest": previous}
        row["row_digest"] = sha256_text(_canonical(row))
        with self.path.open("a", encoding="utf-8") as f:
            f.write(_canonical(row) + "\n")


def _receipt(row: dict[str, Any]) -> ScheduledDeliveryReceipt:
    return ScheduledDeliveryReceipt(
        receipt_id=row["receipt_id"],
        schedule_key=row["schedule_key"],
        kind=row["kind"],
        kst_day=row["kst_day"],
        template_digest=row["template_digest"],
        body_digest=row["body_digest"],
        destination_digest=row["destination_digest"],
    )


class SimulatedCrash(Exception):
    """The gateway died here (tests only)."""


# Produces the weekly summary the host renders its report from (a mapping of
# field name to value, as the profile returns it).
ReportRenderer = Callable[[], Mapping[str, object]]
Sender = Callable[[object, str], None]


class WeeklyTaskHost:
    """The weekly branch of the host's scheduled-delivery tick."""

    def __init__(
        self,
        ledger: ScheduledDeliveryLedger,
        coordinator: KoreanExpressionCoordinator,
        sender: Sender,
        render_report: ReportRenderer,
        *,
        crash_after_reserve: bool = False,
    ) -> None:
        self.ledger = ledger
        self.coordinator = coordinator
        self.sender = sender
        self.render_report = render_report
        self.crash_after_reserve = crash_after_reserve

    async def run(self, *, schedule_key: str, kind: str, kst_day: str, destination: object) -> str:
        # Top of the branch: an existing receipt is handled before ANY rendering.
        existing = self.ledger.find(schedule_key, kind, kst_day)
        if existing is not None:
            return self._resume(existing, destination)

        # The host renders its canonical report from the summary and tells the
        # shim which summary fields were present (explicit prose → ineligible).
        summary = self.render_report()
        body, _ = render_weekly(summary)
        cand = await self.coordinator.apresent_weekly(
            body,
            explicit_fields=tuple(summary),
            schedule_key=schedule_key,
            kind=kind,
            kst_day=kst_day,
        )
        if not cand.publication_permitted:
            return "deferred"  # another owner is in flight: no reservation, no send
        final_body = cand.body
        try:
            receipt = self.ledger.reserve_customer_task_delivery(
                final_body,
                schedule_key=schedule_key,
                kind=kind,
                kst_day=kst_day,
                destination=destination,
                template_digest=schedule_digest(final_body),
            )
        except BaseException:
            if cand.outcome is Outcome.ACCEPTED:
                self.coordinator.report(cand, Outcome.COMMIT_FAILED)
            raise
        if cand.outcome is Outcome.ACCEPTED:
            # `selected` only after the durable write (plan "Outcome journal").
            self.coordinator.report(cand, Outcome.SELECTED)
        if self.crash_after_reserve:
            raise SimulatedCrash
        self.ledger.transition(receipt, "sending")
        self.sender(destination, final_body)
        self.ledger.transition(receipt, "delivered")
        return "sent"

    def _resume(self, receipt: ScheduledDeliveryReceipt, destination: object) -> str:
        if self.ledger.state(receipt) != "prepared":
            return "no_retry"  # sending/delivered/unknown: never sent again
        try:
            pinned = self.ledger.load_prepared_customer_task_delivery(receipt)
            if sha256_text(_canonical(destination)) != receipt.destination_digest:
                raise PreparedMaterialUnavailable("destination pin")
        except PreparedMaterialUnavailable:
            self.ledger.transition(receipt, "unknown", "prepared_material_unavailable")
            return "unknown"
        self.ledger.transition(receipt, "sending")
        self.sender(pinned.destination, pinned.body)
        self.ledger.transition(receipt, "delivered")
        return "sent_pinned"

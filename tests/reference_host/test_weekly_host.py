"""Weekly pin-before-send and restart (plan "Weekly pin-before-send and
restart"; design §8 host integration contract), proven with the reference host."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from gateway_shim import (
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
)
from kexpr.spool.layout import DataRoot
from reference_host.hooks import NoPresentation
from reference_host.samples import (
    SCHEDULE,
    WEEKLY_BODY,
    WEEKLY_FIELDS,
    WEEKLY_SELECTED,
    WEEKLY_SUMMARY,
)
from reference_host.scripted_worker import ScriptedWorker, report_outcomes, spool_request_files
from reference_host.weekly import (
    LedgerCorrupt,
    ScheduledDeliveryLedger,
    SimulatedCrash,
    WeeklyTaskHost,
    schedule_digest,
    sha256_text,
)

DESTINATION = {"chat_id": "-100200300", "topic_id": 17}
MakeCoordinator = Callable[[Mode], KoreanExpressionCoordinator]


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[object, str]] = []

    def __call__(self, destination: object, body: str) -> None:
        self.sent.append((destination, body))


def renders(
    summary: Mapping[str, object] = WEEKLY_SUMMARY,
) -> Callable[[], Mapping[str, object]]:
    return lambda: summary


def must_not_render() -> Mapping[str, object]:
    raise AssertionError("a prepared receipt must be handled before any report rendering")


def restarted_coordinator(root: DataRoot) -> KoreanExpressionCoordinator:
    from gateway_shim import KoreanExpressionConfig, exact_block

    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    return NoPresentation(config, root.root)


def crash_after_reserving(path: Path, make_coordinator: MakeCoordinator) -> None:
    """A first gateway process that reserves the delivery (its ``prepared`` row)
    and dies before sending."""
    first = WeeklyTaskHost(
        ScheduledDeliveryLedger(path),
        make_coordinator(Mode.ENABLED),
        Recorder(),
        renders(),
        crash_after_reserve=True,
    )
    with pytest.raises(SimulatedCrash):
        asyncio.run(first.run(**SCHEDULE, destination=DESTINATION))


def test_new_task_pins_the_selected_body_before_sending(
    tmp_path: Path, root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    ledger = ScheduledDeliveryLedger(tmp_path / "ledger.jsonl")
    sender = Recorder()
    host = WeeklyTaskHost(ledger, make_coordinator(Mode.ENABLED), sender, renders())
    assert asyncio.run(host.run(**SCHEDULE, destination=DESTINATION)) == "sent"
    assert sender.sent == [(DESTINATION, WEEKLY_SELECTED)]
    # The reservation holds exactly the sent bytes, pinned by their digest.
    prepared, sending, delivered = ledger.rows()
    assert prepared["state"] == "prepared" and prepared["body"] == WEEKLY_SELECTED
    assert prepared["template_digest"] == schedule_digest(WEEKLY_SELECTED)
    assert prepared["body_digest"] == sha256_text(WEEKLY_SELECTED)
    assert (sending["state"], delivered["state"]) == ("sending", "delivered")
    assert report_outcomes(root) == ["selected"]
    assert worker.provider_calls == 1


def test_restart_with_a_prepared_row_sends_the_pinned_bytes_with_zero_requests(
    tmp_path: Path, root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    path = tmp_path / "ledger.jsonl"
    crash_after_reserving(path, make_coordinator)
    assert [r["state"] for r in ScheduledDeliveryLedger(path).rows()] == ["prepared"]
    requests_before = len(worker.requests)

    # A new gateway process: a fresh ledger handle, a coordinator that may not
    # present, and a renderer that may not run.
    sender = Recorder()
    coord = restarted_coordinator(root)
    try:
        restarted = WeeklyTaskHost(ScheduledDeliveryLedger(path), coord, sender, must_not_render)
        assert asyncio.run(restarted.run(**SCHEDULE, destination=DESTINATION)) == "sent_pinned"
        assert sender.sent == [(DESTINATION, WEEKLY_SELECTED)]  # the pinned bytes, exactly
        # `delivered` keeps its no-retry semantics: a later tick sends nothing.
        assert asyncio.run(restarted.run(**SCHEDULE, destination=DESTINATION)) == "no_retry"
        assert len(sender.sent) == 1
    finally:
        coord.close()
    assert len(worker.requests) == requests_before == 1
    assert worker.provider_calls == 1
    assert spool_request_files(root) == []
    assert [r["state"] for r in ScheduledDeliveryLedger(path).rows()] == [
        "prepared",
        "sending",
        "delivered",
    ]


def test_restart_after_sending_never_sends_again(
    tmp_path: Path, root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = ScheduledDeliveryLedger(path)

    def crash_while_sending(destination: object, body: str) -> None:
        raise SimulatedCrash

    host = WeeklyTaskHost(ledger, make_coordinator(Mode.ENABLED), crash_while_sending, renders())
    with pytest.raises(SimulatedCrash):
        asyncio.run(host.run(**SCHEDULE, destination=DESTINATION))
    sender = Recorder()
    coord = restarted_coordinator(root)
    try:
        again = WeeklyTaskHost(ScheduledDeliveryLedger(path), coord, sender, must_not_render)
        assert asyncio.run(again.run(**SCHEDULE, destination=DESTINATION)) == "no_retry"
    finally:
        coord.close()
    assert sender.sent == [] and worker.provider_calls == 1


def test_restart_with_a_changed_destination_pin_marks_unknown_without_sending(
    tmp_path: Path, root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    path = tmp_path / "ledger.jsonl"
    crash_after_reserving(path, make_coordinator)
    sender = Recorder()
    coord = restarted_coordinator(root)
    try:
        restarted = WeeklyTaskHost(ScheduledDeliveryLedger(path), coord, sender, must_not_render)
        moved = {**DESTINATION, "topic_id": 18}
        assert asyncio.run(restarted.run(**SCHEDULE, destination=moved)) == "unknown"
    finally:
        coord.close()
    rows = ScheduledDeliveryLedger(path).rows()
    assert [(r["state"], r["reason"]) for r in rows] == [
        ("prepared", None),
        ("unknown", "prepared_material_unavailable"),
    ]
    assert sender.sent == [] and worker.provider_calls == 1 and spool_request_files(root) == []


def test_corrupt_ledger_hard_stops_without_a_provider_call(
    tmp_path: Path, root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    path = tmp_path / "ledger.jsonl"
    crash_after_reserving(path, make_coordinator)
    row = json.loads(path.read_text("utf-8"))
    altered = row["body"].replace("다만 ", "잘 ")  # the pinned bytes altered on disk
    assert altered != row["body"]
    row["body"] = altered
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", "utf-8")
    sender = Recorder()
    coord = restarted_coordinator(root)
    try:
        restarted = WeeklyTaskHost(ScheduledDeliveryLedger(path), coord, sender, must_not_render)
        with pytest.raises(LedgerCorrupt):
            asyncio.run(restarted.run(**SCHEDULE, destination=DESTINATION))
    finally:
        coord.close()
    assert sender.sent == [] and worker.provider_calls == 1


@pytest.mark.parametrize(
    ("mode", "outcome"),
    [(Mode.SHADOW, "shadow_selected"), (Mode.DISABLED, None)],
)
def test_shadow_and_disabled_pin_the_canonical_body(
    tmp_path: Path,
    root: DataRoot,
    worker: ScriptedWorker,
    make_coordinator: MakeCoordinator,
    mode: Mode,
    outcome: str | None,
) -> None:
    ledger = ScheduledDeliveryLedger(tmp_path / "ledger.jsonl")
    sender = Recorder()
    host = WeeklyTaskHost(ledger, make_coordinator(mode), sender, renders())
    assert asyncio.run(host.run(**SCHEDULE, destination=DESTINATION)) == "sent"
    assert sender.sent == [(DESTINATION, WEEKLY_BODY)]
    assert ledger.rows()[0]["body"] == WEEKLY_BODY
    assert report_outcomes(root) == ([outcome] if outcome else [])
    assert worker.provider_calls == (1 if outcome else 0)


def test_untyped_weekly_report_is_pinned_canonical_with_zero_requests(
    tmp_path: Path, root: DataRoot, worker: ScriptedWorker, make_coordinator: MakeCoordinator
) -> None:
    # The summary carries an explicit prose field holding only a blank line: the
    # host still renders the typed branch (the same bytes as WEEKLY_BODY), but the
    # plan decides on the field's presence, so the report stays canonical.
    explicit = {**WEEKLY_SUMMARY, "trend_interpretation": "  "}
    ledger = ScheduledDeliveryLedger(tmp_path / "ledger.jsonl")
    sender = Recorder()
    coord = make_coordinator(Mode.ENABLED)
    cand = coord.present_weekly(
        WEEKLY_BODY, explicit_fields=(*WEEKLY_FIELDS, "trend_interpretation"), **SCHEDULE
    )
    assert cand.outcome is Outcome.INELIGIBLE
    host = WeeklyTaskHost(ledger, coord, sender, renders(explicit))
    assert asyncio.run(host.run(**SCHEDULE, destination=DESTINATION)) == "sent"
    assert sender.sent == [(DESTINATION, WEEKLY_BODY)]
    assert worker.requests == [] and worker.provider_calls == 0


def test_template_digest_is_the_sha256_of_the_json_quoted_body(tmp_path: Path) -> None:
    """The host's ``_nutrition_schedule_digest``: the body JSON-quoted, then hashed; a
    host that hashes the raw text pins nothing the ledger accepts."""
    quoted = json.dumps(WEEKLY_BODY, ensure_ascii=False, separators=(",", ":"))
    assert quoted.startswith('"이번 주 린매스업 리포트\\n') and quoted.endswith('"')
    assert schedule_digest(WEEKLY_BODY) == hashlib.sha256(quoted.encode("utf-8")).hexdigest()
    assert schedule_digest(WEEKLY_BODY) != sha256_text(WEEKLY_BODY)
    ledger = ScheduledDeliveryLedger(tmp_path / "ledger.jsonl")
    with pytest.raises(ValueError, match="template digest"):
        ledger.reserve_customer_task_delivery(
            WEEKLY_BODY,
            **SCHEDULE,
            destination=DESTINATION,
            template_digest=sha256_text(WEEKLY_BODY),
        )
    assert ledger.rows() == []
    receipt = ledger.reserve_customer_task_delivery(
        WEEKLY_BODY,
        **SCHEDULE,
        destination=DESTINATION,
        template_digest=schedule_digest(WEEKLY_BODY),
    )
    assert ledger.load_prepared_customer_task_delivery(receipt).body == WEEKLY_BODY

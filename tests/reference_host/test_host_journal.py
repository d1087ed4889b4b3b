"""The journal ends with what the host did, per surface ("docs/wiring.md's call
sites report"; docs/lifecycle.md §1 "Who sends the report, and when").

The reference hosts follow docs/wiring.md's call sites: daily reports after the edit,
weekly after the reservation, adaptive after ``mark_publish_pending``; a failed edit
is ``publication_failed``, a failed durable write ``commit_failed``. Here against
the real worker (``kexpr supervise`` and a loopback fake of the API, one stack for
the module), so the terminal row is the worker's own journal, not a report file.
Without the reports, each attempt would stay open and end
``claim_expired_canonical`` after COMMIT_GRACE.

The weekly report whose goal range is missing is the one styled message (design
§6.2), so the weekly host's attempt is the one that ends with a report; the daily
summary and the adaptive cards have nothing to style, and their host paths leave no
row at all (no request, no call, nothing to report), whatever the edit or the
write does.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from conftest import journal_rows, start_supervised_worker
from fakeapi import FakeOpenAI, compose_reply, default_style

from gateway_shim import KoreanExpressionConfig, KoreanExpressionCoordinator, Mode, exact_block
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot
from reference_host.adaptive import (
    AdaptiveGatewayHost,
    AdaptiveOperatorService,
    Session,
)
from reference_host.bot import RecordingQuery
from reference_host.daily import DailyHost, FinalizedCheckin
from reference_host.samples import (
    DUAL_SURFACE,
    SCHEDULE,
    WEEKLY_SELECTED,
    WEEKLY_SUMMARY,
    callback_data,
    dual_card,
    session,
)
from reference_host.test_daily_host import BODY as DAILY_BODY
from reference_host.weekly import ScheduledDeliveryLedger, WeeklyTaskHost

pytestmark = pytest.mark.e2e


class Stack:
    def __init__(self, root: Path, fake: FakeOpenAI) -> None:
        self.root, self.fake = root, fake


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    base = tmp_path_factory.mktemp("host-journal")
    (base / "data").mkdir(mode=0o700)
    root = base / "data" / "korean-expression-v1"
    with FakeOpenAI(base / "fake") as fake:
        fake.behaviour = compose_reply(default_style)
        worker = start_supervised_worker(root, fake)
        try:
            yield Stack(root, fake)
        finally:
            worker.stop()
        assert fake.errors == []
    Journal(DataRoot(root)).load()  # a verifiable journal


@pytest.fixture
def coord(stack: Stack) -> Iterator[KoreanExpressionCoordinator]:
    config = KoreanExpressionConfig.from_block(
        exact_block(Mode.ENABLED, daily=True, weekly=True, adaptive_operator=True)
    )
    c = KoreanExpressionCoordinator(config, stack.root)
    yield c
    c.close()


def ended_with(stack: Stack, before: set[str], timeout: float = 20.0) -> list[str]:
    """The outcomes of the one attempt started since ``before``, once it has its
    terminal row (the worker journals reports on its 1 s tick)."""
    end = time.monotonic() + timeout
    while True:
        rows = journal_rows(stack.root)
        new = {r["artifact_key"] for r in rows} - before
        if len(new) == 1:
            (key,) = new
            mine = [r["outcome"] for r in rows if r["artifact_key"] == key]
            if len(mine) == 2 or time.monotonic() > end:
                return mine
        elif time.monotonic() > end:
            return [f"{len(new)} new attempts"]
        time.sleep(0.05)


def keys(stack: Stack) -> set[str]:
    return {r["artifact_key"] for r in journal_rows(stack.root)}


def left_nothing(stack: Stack, before: set[str], requests: int) -> bool:
    """No attempt started, nothing on the wire, no request waiting in the spool."""
    waiting = list((stack.root / "spool" / "requests").glob("*.json"))
    return keys(stack) == before and len(stack.fake.requests) == requests and waiting == []


# ---------------------------------------------------------------------- daily


@pytest.mark.parametrize("edit_fails", [False, True])
def test_daily_leaves_no_row_whatever_the_edit(
    stack: Stack, coord: KoreanExpressionCoordinator, edit_fails: bool
) -> None:
    before, requests = keys(stack), len(stack.fake.requests)
    query = RecordingQuery("ck1:save", fail_edit=edit_fails)
    checkin = FinalizedCheckin(body=DAILY_BODY, finalized_event_id=f"evt-journal-{edit_fails}")
    asyncio.run(DailyHost(coord).first_save(query, checkin))  # a failed edit never raises
    assert query.edits == ([] if edit_fails else [DAILY_BODY])
    assert left_nothing(stack, before, requests)


# --------------------------------------------------------------------- weekly


class FailingLedger(ScheduledDeliveryLedger):
    def reserve_customer_task_delivery(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        raise OSError("ledger")


@pytest.mark.parametrize(
    ("reserve_fails", "expected"), [(False, "selected"), (True, "commit_failed")]
)
def test_weekly_ends_with_the_reservation(
    stack: Stack,
    coord: KoreanExpressionCoordinator,
    tmp_path: Path,
    reserve_fails: bool,
    expected: str,
) -> None:
    before = keys(stack)
    ledger_type = FailingLedger if reserve_fails else ScheduledDeliveryLedger
    sent: list[tuple[object, str]] = []
    host = WeeklyTaskHost(
        ledger_type(tmp_path / "ledger.jsonl"),
        coord,
        lambda d, b: sent.append((d, b)),
        lambda: WEEKLY_SUMMARY,
    )
    schedule = {**SCHEDULE, "schedule_key": f"sched-journal-{expected}"}
    if reserve_fails:
        with pytest.raises(OSError):
            asyncio.run(host.run(**schedule, destination={"chat_id": "-1"}))
        assert sent == []
    else:
        assert asyncio.run(host.run(**schedule, destination={"chat_id": "-1"})) == "sent"
        assert sent == [({"chat_id": "-1"}, WEEKLY_SELECTED)]
    assert ended_with(stack, before) == ["attempt_started", expected]


# ------------------------------------------------------------------- adaptive


class FailingStore(AdaptiveOperatorService):
    def _mark_publish_pending_unlocked(
        self, session: Session, payload: Mapping[str, object], origin_message_id: object
    ) -> Mapping[str, object]:
        raise OSError("store")


@pytest.mark.parametrize("write_fails", [False, True])
def test_adaptive_leaves_no_row_whatever_the_pending_write(
    stack: Stack, coord: KoreanExpressionCoordinator, write_fails: bool
) -> None:
    before, requests = keys(stack), len(stack.fake.requests)
    s = session(session_id=hashlib.sha256(f"journal-{write_fails}".encode()).hexdigest()[:24])
    service_type = FailingStore if write_fails else AdaptiveOperatorService
    svc = service_type(
        sessions={s.session_id: s},
        render_card=dual_card,
        surface=DUAL_SURFACE,
        glossary=coord.dual_glossary,
    )
    query = RecordingQuery(callback_data(s))
    asyncio.run(AdaptiveGatewayHost(svc, coord).handle_review_callback(query))
    if write_fails:
        assert query.edits == [] and svc.pending_rows == []
    else:
        (row,) = svc.pending_rows
        assert query.edits == [row.payload["text"]]
        assert row.payload["text"] == dual_card(s)["text"]  # the canonical text was persisted
    assert left_nothing(stack, before, requests)


# ------------------------------------------- the call sites of docs/wiring.md


def _call_site(surface: str) -> str:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "wiring.md").read_text("utf-8")
    section = doc[doc.index("**3. The call sites**") :]
    section = section[: section.index("\nEach surface's exact format")]
    start = section.index(f"- **{surface}**")
    end = section.find("\n- **", start + 1)
    return section[start : end if end >= 0 else len(section)]


@pytest.mark.parametrize(
    ("surface", "durable", "failure"),
    [
        ("daily", "edit_save_message(", "Outcome.PUBLICATION_FAILED"),
        ("weekly", "reserve_customer_task_delivery(", "Outcome.COMMIT_FAILED"),
        (
            "adaptive",
            "service.validate_and_mark_presented_card(",
            "Outcome.COMMIT_FAILED",
        ),
    ],
)
def test_the_readme_call_site_reports_after_the_durable_write(
    surface: str, durable: str, failure: str
) -> None:
    """What the reference hosts above do is what docs/wiring.md tells a host to do:
    ``selected`` after the durable write or edit, the failure word when it fails."""
    site = _call_site(surface)
    assert durable in site
    selected = site.rindex("Outcome.SELECTED")
    assert "coord.report(" in site[selected - 80 : selected]
    assert site.index(durable) < selected
    assert (
        failure in site and "coord.report(" in site[site.index(failure) - 80 : site.index(failure)]
    )

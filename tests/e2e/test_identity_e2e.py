"""The identity is part of the evidence, end to end: a real supervised worker, the
real shim in this process, the loopback fake API behind a real proxy.

Twenty artifacts of the one styled message (the goal-missing weekly report,
`kit.bodies.STYLED_BODY`, under twenty schedule keys) are served (twenty wire
requests). Then:

- ``identity.key`` deleted (a backup that could not read a 0600 file): the gateway
  refuses (``identity_mismatch``, canonical, no request written, one WARNING) and
  makes no key; zero new wire requests; ``kexpr status`` and ``kexpr audit`` name it;
  the key restored, every artifact is ``already_attempted``.
- ``identity.key`` replaced by another valid key (a staging key copied over): the
  same refusal, zero new wire requests.
- ``kexpr identity rotate``: re-presenting the twenty makes zero wire requests, by a
  gateway that ran across the rotation and by a restarted one, and after a worker
  restart; new artifacts are served under the new key.
- A data root as a release before the record left it (a key and rows, no record),
  with rows 30 days old and 40 days old: refused (``proof_missing``) until
  ``kexpr identity adopt``; then the 30-day-old attempt stays deduped through the
  upgrade, a rotation, the worker's retention run (which removes the 40-day-old
  segment) and a worker restart.
- The journal's own record of its key (``outcomes/identity.json``): written before
  the first start row; with it, deleting ``identity.fingerprint`` and putting in
  another key, or a restore that skipped every ``identity.*`` file and brought
  another key with its own record, is refused (``key_differs``), zero new wire
  requests (before: the other key was recorded and every artifact paid again).
- A directory swapped in at the data root's path while the gateway runs: the
  gateway makes no key there (``root_replaced``).

Before the record, the deleted key was minted anew and all twenty were paid again,
twenty more after a replacement (60 wire requests for 20 messages), with ``status``
``healthy`` and ``audit`` ``clean``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import RunningWorker, journal_rows, start_supervised_worker
from e2e.e2e_support import supervised
from fakeapi import FakeOpenAI, compose_reply, default_style
from kit.bodies import STYLED_BODY, STYLED_SURFACE, present_styled
from kit.poll import until
from ops_tests.ops_support import kexpr
from spool_tests.journal_support import hand_rows, write_segment

from gateway_shim import (
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    exact_block,
)
from gateway_shim.identity import artifact_key, fingerprint, load_or_create_key
from kexpr.spool import _journal_identity as journal_identity
from kexpr.spool.fsio import create_private_file
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot

pytestmark = pytest.mark.e2e

# Twenty artifacts: the styled weekly under twenty schedule keys (weekly's artifact
# is (surface, schedule_key, kind, kst_day); `present_styled` fixes the other two).
EVENTS = tuple(f"sched-identity-{n:04d}" for n in range(20))


def weekly_fields(schedule_key: str) -> tuple[str, ...]:
    """The artifact key's inputs of the styled weekly presented as ``schedule_key``."""
    return (STYLED_SURFACE, schedule_key, "weekly_report", "2025-11-30")


def coordinator(root: Path) -> KoreanExpressionCoordinator:
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.SHADOW, weekly=True))
    assert cfg.valid
    return KoreanExpressionCoordinator(cfg, root)


def present(coord: KoreanExpressionCoordinator, event: str) -> PresentationCandidate:
    return present_styled(coord, event)


def present_all(root: Path, events: Sequence[str]) -> list[PresentationCandidate]:
    """Each artifact once, by a gateway of its own (started, then closed)."""
    coord = coordinator(root)
    try:
        return [present(coord, e) for e in events]
    finally:
        coord.close()


def wait_terminal(root: Path, n: int, timeout: float = 20.0) -> None:
    """Until ``n`` attempts are terminal (shadow reports are journaled on the
    worker's tick): a re-presentation then meets a finished attempt."""

    def finalized() -> bool:
        return sum(r["state"] == "finalized" for r in journal_rows(root)) >= n

    assert until(finalized, timeout), "the shadow reports were not journaled"


def outcomes(cands: Sequence[PresentationCandidate]) -> set[Outcome]:
    return {c.outcome for c in cands}


def served_twenty(root: Path, fake: FakeOpenAI) -> list[PresentationCandidate]:
    first = present_all(root, EVENTS)
    assert outcomes(first) == {Outcome.SHADOW_SELECTED}
    assert len(fake.requests) == 20
    wait_terminal(root, 20)
    return first


def status_json(root: Path) -> tuple[int, dict[str, Any]]:
    r = kexpr("status", "--data-root", root, "--json")
    return r.returncode, json.loads(r.stdout)


def audit_json(root: Path) -> tuple[int, dict[str, Any]]:
    r = kexpr("audit", "--data-root", root, "--json")
    doc = json.loads(r.stdout)
    (check,) = [c for c in doc["checks"] if c["check"] == "data_root"]
    return r.returncode, check


def shim_said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kexpr.shim"]


def assert_refused(
    root: Path,
    fake: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    reason: str,
    key_after: Callable[[], bytes | None],
) -> None:
    """Every presentation refused: canonical, publishable, no request file, no
    wire request, no key minted, said once; status and audit name the reason."""
    before = key_after()
    caplog.clear()
    again = present_all(root, EVENTS)
    assert len(fake.requests) == 20  # zero new wire requests
    assert key_after() == before  # no key minted or changed
    assert list(DataRoot(root).requests.iterdir()) == []
    assert outcomes(again) == {Outcome.IDENTITY_MISMATCH}
    assert all(c.body == STYLED_BODY and c.publication_permitted for c in again)
    assert all(c.artifact_key is None for c in again)
    said = shim_said(caplog)
    assert said.count(f"identity_mismatch reason={reason}") == 1, said
    assert [r.levelno for r in caplog.records if r.getMessage().startswith("identity_")] == [
        logging.WARNING
    ]
    code, status = status_json(root)
    assert (code, status["verdict"]) == (1, "identity_mismatch")
    assert status["identity"]["state"] == reason
    code, check = audit_json(root)
    assert code == 1 and check["status"] == "findings"
    assert {"finding": "identity_mismatch", "detail": reason} in check["findings"]


def key_bytes(root: Path) -> bytes | None:
    try:
        return (root / "identity.key").read_bytes()
    except FileNotFoundError:
        return None


@pytest.fixture
def worker(data_root: Path, fake_api: FakeOpenAI) -> Iterator[RunningWorker]:
    fake_api.behaviour = compose_reply(default_style)
    yield from supervised(data_root, fake_api)


def test_a_deleted_key_is_refused_not_minted_and_nothing_is_paid_again(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kexpr")
    served_twenty(data_root, fake_api)
    saved = key_bytes(data_root)
    assert saved is not None
    (data_root / "identity.key").unlink()

    assert_refused(data_root, fake_api, caplog, "key_missing", lambda: key_bytes(data_root))
    assert not (data_root / "identity.key").exists()

    # The key back from where it was: nothing is new, nothing is paid.
    create_private_file(DataRoot(data_root).tmp, data_root / "identity.key", saved)
    restored = present_all(data_root, EVENTS)
    assert outcomes(restored) == {Outcome.ALREADY_ATTEMPTED}
    assert len(fake_api.requests) == 20
    code, status = status_json(data_root)
    assert (code, status["identity"]["state"]) == (0, "matches")


def test_a_replaced_key_is_refused_and_nothing_is_paid_again(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kexpr")
    served_twenty(data_root, fake_api)
    # Another valid key (a staging profile's), copied over with the right mode.
    (data_root / "identity.key").unlink()
    create_private_file(
        DataRoot(data_root).tmp, data_root / "identity.key", secrets.token_bytes(32)
    )
    assert_refused(data_root, fake_api, caplog, "key_differs", lambda: key_bytes(data_root))


def test_the_journal_records_its_key_before_the_first_start_row(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    (first,) = present_all(data_root, EVENTS[:1])
    assert first.outcome is Outcome.SHADOW_SELECTED
    key = key_bytes(data_root)
    assert key is not None
    assert journal_identity.read(DataRoot(data_root)) == fingerprint(key)
    out = json.loads(kexpr("identity", "check", "--data-root", data_root).stdout)
    assert (out["state"], out["journal_fingerprint"]) == ("matches", fingerprint(key))


def test_a_deleted_record_and_another_key_are_refused_and_nothing_is_paid_again(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case 2: with another key refused, the file that disagreed
    (``identity.fingerprint``) deleted. Before the journal's record, the other key
    was recorded at the next presentation and every artifact was paid again."""
    caplog.set_level(logging.INFO, logger="kexpr")
    served_twenty(data_root, fake_api)
    (data_root / "identity.key").unlink()
    create_private_file(
        DataRoot(data_root).tmp, data_root / "identity.key", secrets.token_bytes(32)
    )
    (data_root / "identity.fingerprint").unlink()
    assert_refused(data_root, fake_api, caplog, "key_differs", lambda: key_bytes(data_root))
    assert not (data_root / "identity.fingerprint").exists()  # nothing recorded on trust
    r = kexpr("identity", "check", "--data-root", data_root)
    assert (r.returncode, json.loads(r.stdout)["state"]) == (1, "key_differs")


def test_a_restore_without_the_identity_files_is_refused_and_nothing_is_paid_again(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker, caplog: pytest.LogCaptureFixture
) -> None:
    """A restore that skipped every ``identity.*`` file and put back another key
    (a staging profile's, with its own record): ``outcomes/`` came back with the
    journal's record, which names the key the rows were written under."""
    caplog.set_level(logging.INFO, logger="kexpr")
    served_twenty(data_root, fake_api)
    for name in ("identity.key", "identity.fingerprint", "identity.sealed"):
        (data_root / name).unlink(missing_ok=True)
    staging = data_root.parent / "staging"
    other = DataRoot(staging)
    other.ensure()
    load_or_create_key(other)
    for name in ("identity.key", "identity.fingerprint"):
        create_private_file(
            DataRoot(data_root).tmp, data_root / name, (staging / name).read_bytes()
        )
    assert_refused(data_root, fake_api, caplog, "key_differs", lambda: key_bytes(data_root))


def test_a_gateway_does_not_mint_in_a_root_swapped_in_while_it_runs(
    data_root: Path, fake_api: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case 5, the host's half: a directory swapped in at the data
    root's path while the gateway runs. Before, the gateway made a new key there
    at its next presentation (and a worker serving that directory paid every
    artifact again)."""
    caplog.set_level(logging.INFO, logger="kexpr")
    fake_api.behaviour = compose_reply(default_style)
    w = start_supervised_worker(data_root, fake_api)
    running = coordinator(data_root)
    try:
        first = [present(running, e) for e in EVENTS[:5]]
        assert outcomes(first) == {Outcome.SHADOW_SELECTED}
        wait_terminal(data_root, 5)
        w.stop()
        os.rename(data_root, data_root.parent / "kept")
        os.mkdir(data_root, 0o700)
        caplog.clear()
        again = [present(running, e) for e in EVENTS[:5]]
        assert outcomes(again) == {Outcome.IDENTITY_MISMATCH}
        assert not (data_root / "identity.key").exists()  # no key made in the swapped root
        assert shim_said(caplog).count("identity_mismatch reason=root_replaced") == 1
    finally:
        running.close()
    assert len(fake_api.requests) == 5


def test_a_rotation_on_purpose_keeps_every_earlier_attempt_deduped(
    data_root: Path, fake_api: FakeOpenAI, worker: RunningWorker
) -> None:
    running = coordinator(data_root)  # a gateway that runs across the rotation
    try:
        first = [present(running, e) for e in EVENTS[:10]] + present_all(data_root, EVENTS[10:])
        assert outcomes(first) == {Outcome.SHADOW_SELECTED}
        assert len(fake_api.requests) == 20
        wait_terminal(data_root, 20)
        old_key = key_bytes(data_root)

        r = kexpr("identity", "rotate", "--data-root", data_root)
        assert r.returncode == 0, r.stderr
        done = json.loads(r.stdout)
        assert (done["rotated"], done["sealed"], done["finished_earlier_rotation"]) == (
            True,
            1,
            False,
        )
        assert key_bytes(data_root) != old_key

        # The running gateway takes the new key at its next presentation.
        during = [present(running, e) for e in EVENTS]
    finally:
        running.close()
    assert outcomes(during) == {Outcome.ALREADY_ATTEMPTED}
    restarted = present_all(data_root, EVENTS)
    assert outcomes(restarted) == {Outcome.ALREADY_ATTEMPTED}
    assert len(fake_api.requests) == 20  # zero new wire requests
    # Under the new key every artifact has a new name: dedupe came from the sealed key.
    assert {c.artifact_key for c in restarted}.isdisjoint({c.artifact_key for c in first})

    # New artifacts are served, under the new key, once.
    fresh = present_all(data_root, ("sched-identity-new-1", "sched-identity-new-2"))
    assert outcomes(fresh) == {Outcome.SHADOW_SELECTED}
    assert len(fake_api.requests) == 22
    new_key = key_bytes(data_root)
    assert new_key is not None
    assert fresh[0].artifact_key == artifact_key(new_key, weekly_fields("sched-identity-new-1"))
    wait_terminal(data_root, 22)

    # A worker restart rebuilds its dedupe index from the journal: still nothing new.
    worker.stop()
    again = start_supervised_worker(data_root, fake_api)
    try:
        after_restart = present_all(data_root, (*EVENTS, "sched-identity-new-1"))
    finally:
        again.stop()
    assert outcomes(after_restart) == {Outcome.ALREADY_ATTEMPTED}
    assert len(fake_api.requests) == 22
    code, status = status_json(data_root)
    assert status["identity"]["state"] == "matches" and status["identity"]["sealed"] == 1
    Journal(DataRoot(data_root)).load()


def test_upgrade_retention_and_restart_keep_earlier_attempts_deduped(
    data_root: Path, fake_api: FakeOpenAI
) -> None:
    """A data root a release before the record wrote: a key and journal rows, no
    ``identity.fingerprint``; one attempt 30 days old (inside the 35-day window),
    one 40 days old (outside it), and yesterday's (a root in use: retention removes
    nothing while the journal's newest row is older than two days,
    `kexpr.spool.retention` rule 1)."""
    fake_api.behaviour = compose_reply(default_style)
    root = DataRoot(data_root)
    root.ensure()
    old_key = load_or_create_key(root)
    root.identity_record.unlink()  # what the release before the record leaves
    today = dt.datetime.now(dt.UTC).date()
    kept_day = (today - dt.timedelta(days=30)).isoformat()
    aged_day = (today - dt.timedelta(days=40)).isoformat()
    recent_day = (today - dt.timedelta(days=1)).isoformat()
    kept_key = artifact_key(old_key, weekly_fields("sched-kept"))
    aged_key = artifact_key(old_key, weekly_fields("sched-aged"))
    kept_rows = hand_rows(kept_key, "a" * 32, kept_day, ["shadow_selected"], surface=STYLED_SURFACE)
    aged_rows = hand_rows(aged_key, "b" * 32, aged_day, ["shadow_selected"], surface=STYLED_SURFACE)
    write_segment(root, f"{kept_day}.jsonl", kept_rows)
    write_segment(root, f"{aged_day}.jsonl", aged_rows)
    recent_key = artifact_key(old_key, weekly_fields("sched-recent"))
    recent_rows = hand_rows(
        recent_key, "c" * 32, recent_day, ["shadow_selected"], surface=STYLED_SURFACE
    )
    write_segment(root, f"{recent_day}.jsonl", recent_rows)

    w = start_supervised_worker(data_root, fake_api)
    try:
        # Nothing proves the key wrote those rows: refused until the operator attests it.
        (unproven,) = present_all(data_root, ("sched-kept",))
        assert unproven.outcome is Outcome.IDENTITY_MISMATCH
        r = kexpr("identity", "check", "--data-root", data_root)
        assert (r.returncode, json.loads(r.stdout)["state"]) == (1, "proof_missing")
        r = kexpr("identity", "adopt", "--data-root", data_root)
        assert r.returncode == 0, r.stderr
        # The upgrade: the key present is adopted (recorded), the old attempt deduped.
        (upgraded,) = present_all(data_root, ("sched-kept",))
        assert upgraded.outcome is Outcome.ALREADY_ATTEMPTED
        assert upgraded.artifact_key == kept_key
        assert root.identity_record.exists()
        assert json.loads(kexpr("identity", "check", "--data-root", data_root).stdout)["state"] == (
            "matches"
        )

        r = kexpr("identity", "rotate", "--data-root", data_root)
        assert r.returncode == 0, r.stderr
        # The aged-out artifact is outside the window: served (the first request
        # after the rotation runs the worker's retention, which removes its segment).
        (aged,) = present_all(data_root, ("sched-aged",))
        assert aged.outcome is Outcome.SHADOW_SELECTED
        assert len(fake_api.requests) == 1
        assert not (root.outcomes / f"{aged_day}.jsonl").exists()
        # After the upgrade, the rotation and the retention run: still deduped.
        (rotated,) = present_all(data_root, ("sched-kept",))
        assert rotated.outcome is Outcome.ALREADY_ATTEMPTED
        assert rotated.artifact_key != kept_key
        wait_terminal(data_root, 2)
    finally:
        w.stop()
    w = start_supervised_worker(data_root, fake_api)
    try:
        after = present_all(data_root, ("sched-kept", "sched-aged", "sched-recent"))
    finally:
        w.stop()
    assert outcomes(after) == {Outcome.ALREADY_ATTEMPTED}
    assert len(fake_api.requests) == 1
    Journal(root).load()

"""A rotation while the worker is busy pays once per artifact, end to end: a real
supervised worker, the real ``kexpr identity rotate``, the real shim in this
process, the loopback fake API behind a real proxy.

Eight artifacts (the styled weekly, `kit.bodies.STYLED_BODY`, under eight schedule
keys) are presented by a gateway while the worker is busy, so their requests are
written under the identity key of the time (the old key); then the operator
rotates the key, and a gateway presents the same eight again: under the new key,
each request carrying the artifact's old key in ``prior_artifact_keys``. Sixteen
requests for eight artifacts, in either order:

- The worker does not get to scan while the sixteen are written (it is stopped,
  as a loaded host's worker is not scheduled), so it meets them in one scan, and
  in one scan it takes them in name order, the request ids' (random) order. The
  test chooses the ids (`ordered_ids`) so that the order is not luck: every new-key
  request first, or the two orders interleaved.
- The old-key calls are on the wire when the rotation runs, and the new-key
  requests wait for the worker's call pool.

Whichever key meets the worker first, each artifact is paid for once: eight wire
requests, eight start rows of eight distinct artifacts (each row read back to its
artifact under the old and the new key), the old key found in the journal read
back from disk, ``kexpr journal verify`` clean, and every presentation's outcome
one a second presentation of an attempted artifact may have.

Before the worker linked an attempt to its request's prior keys
(`kexpr.spool._journal_prior`), it journaled only the new key; an old-key
request the worker took after it found nothing and was paid again: sixteen wire
requests for the eight new-key-first artifacts.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from conftest import RunningWorker, journal_rows, start_supervised_worker
from e2e.e2e_support import supervised
from fakeapi import FakeOpenAI, compose_reply, default_style
from kit.bodies import STYLED_SURFACE, present_styled
from kit.poll import until
from ops_tests.ops_support import kexpr

import gateway_shim._setup
from gateway_shim import (
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    exact_block,
)
from gateway_shim.identity import artifact_key, new_request_id
from kexpr.spool.journal import Journal
from kexpr.spool.layout import DataRoot

pytestmark = pytest.mark.e2e

EVENTS = tuple(f"sched-rotation-{n}" for n in range(8))

# What a presentation of an artifact that is (or is being) attempted may end
# with, whichever key it carries: the one paid presentation's answer, or none.
ALLOWED = frozenset(
    {
        Outcome.SHADOW_SELECTED,  # the one paid presentation
        Outcome.ALREADY_ATTEMPTED,
        Outcome.IN_FLIGHT,
        Outcome.TIMEOUT,
        Outcome.NO_TIME_TO_ANSWER,
        Outcome.CLAIM_EXPIRED_CANONICAL,
        Outcome.IDENTITY_MISMATCH,  # a request under a key the journal moved on from
    }
)


def weekly_fields(schedule_key: str) -> tuple[str, ...]:
    """The artifact key's inputs of the styled weekly presented as ``schedule_key``."""
    return (STYLED_SURFACE, schedule_key, "weekly_report", "2025-11-30")


def coordinator(root: Path) -> KoreanExpressionCoordinator:
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.SHADOW, weekly=True))
    assert cfg.valid
    return KoreanExpressionCoordinator(cfg, root)


def key_bytes(root: Path) -> bytes:
    return (root / "identity.key").read_bytes()


def request_files(root: Path) -> int:
    return len(list(DataRoot(root).requests.glob("*.json")))


def worker_pid(root: Path) -> int:
    return int(json.loads(DataRoot(root).status_file.read_bytes())["pid"])


# ------------------------------------------------------------ the order of the ids

_first_hex = threading.local()


@pytest.fixture
def ordered_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shim's request ids, random but for their first hex digit, which the
    presenting thread chooses (`_first_hex`): the order a worker's one scan takes
    the requests in (name order) is then the test's, not luck's."""

    def request_id() -> str:
        rid = new_request_id()
        first = getattr(_first_hex, "value", None)
        return rid if first is None else first + rid[1:]

    monkeypatch.setattr(gateway_shim._setup, "new_request_id", request_id)


class Gateway:
    """One gateway (a coordinator of its own) presenting each artifact in a thread
    of its own, all at once: each waits for its answer, as a host's delivery does."""

    def __init__(self, root: Path) -> None:
        self.coord = coordinator(root)
        self.pool = cf.ThreadPoolExecutor(max_workers=len(EVENTS))
        self.futures: dict[str, cf.Future[PresentationCandidate]] = {}

    def present(self, events: Sequence[str], first_hex: Callable[[int], str] | None) -> None:
        for n, event in enumerate(events):
            first = None if first_hex is None else first_hex(n)
            self.futures[event] = self.pool.submit(self._present, event, first)

    def _present(self, event: str, first: str | None) -> PresentationCandidate:
        _first_hex.value = first  # this thread's requests (`ordered_ids`)
        return present_styled(self.coord, event)

    def outcomes(self, timeout: float = 20.0) -> dict[str, Outcome]:
        """Each artifact's outcome, once every presentation has returned."""
        return {e: f.result(timeout).outcome for e, f in self.futures.items()}

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.coord.close()


@pytest.fixture
def gateways(data_root: Path) -> Iterator[Callable[[], Gateway]]:
    made: list[Gateway] = []

    def make() -> Gateway:
        made.append(Gateway(data_root))
        return made[-1]

    yield make
    for g in made:
        g.close()


@pytest.fixture
def worker(data_root: Path, fake_api: FakeOpenAI) -> Iterator[RunningWorker]:
    fake_api.behaviour = compose_reply(default_style)
    yield from supervised(data_root, fake_api)


# --------------------------------------------------------------------- the story


def rotate(root: Path) -> bytes:
    """``kexpr identity rotate``, as the operator runs it: the new key."""
    old = key_bytes(root)
    r = kexpr("identity", "rotate", "--data-root", root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rotated"] is True
    new = key_bytes(root)
    assert new != old
    return new


def artifacts_by_key(old: bytes, new: bytes) -> dict[str, str]:
    """Every key the eight artifacts have, under the old and the new identity key."""
    out = {}
    for event in EVENTS:
        out[artifact_key(old, weekly_fields(event))] = event
        out[artifact_key(new, weekly_fields(event))] = event
    assert len(out) == 2 * len(EVENTS)
    return out


def assert_paid_once(
    root: Path,
    fake: FakeOpenAI,
    old: bytes,
    new: bytes,
    presented: Sequence[Mapping[str, Outcome]],
) -> None:
    """Eight wire requests, one per artifact; eight start rows of eight distinct
    artifacts; every outcome allowed, at most one paid presentation an artifact;
    the old key of each artifact names its one attempt in the journal read back
    from disk (its row, or the link its new-key request left), and so does the new
    key where the journal knows it; ``kexpr journal verify`` clean."""
    named = artifacts_by_key(old, new)
    wire = collections.Counter(named.get(r.artifact_key or "", "?") for r in fake.requests)
    assert wire == dict.fromkeys(EVENTS, 1), wire
    started = [r for r in journal_rows(root) if r["state"] == "attempt_started"]
    started_artifacts = collections.Counter(named.get(r["artifact_key"], "?") for r in started)
    assert started_artifacts == dict.fromkeys(EVENTS, 1), started_artifacts
    for outcomes in presented:
        assert set(outcomes.values()) <= ALLOWED, outcomes
    for event in EVENTS:
        paid = [o[event] for o in presented if o[event] is Outcome.SHADOW_SELECTED]
        assert len(paid) <= 1, (event, presented)

    index = Journal(DataRoot(root)).load()
    for event in EVENTS:
        under_old = index.get(artifact_key(old, weekly_fields(event)))
        under_new = index.get(artifact_key(new, weekly_fields(event)))
        assert under_old is not None, event
        assert under_new is None or under_new.attempt_id == under_old.attempt_id, event
    verify = kexpr("journal", "verify", "--data-root", root)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def wait_terminal(root: Path, n: int, timeout: float = 20.0) -> None:
    def finalized() -> bool:
        return sum(r["state"] == "finalized" for r in journal_rows(root)) >= n

    assert until(finalized, timeout), "the shadow reports were not journaled"


# First hex digits: "0" sorts before "f" in the worker's one scan.
ORDERS: dict[str, tuple[Callable[[int], str], Callable[[int], str]]] = {
    # (old-key request's, new-key request's) first hex digit, by artifact
    "new_key_first": (lambda n: "f", lambda n: "0"),
    "interleaved": (lambda n: "f" if n % 2 else "0", lambda n: "0" if n % 2 else "f"),
}


@pytest.mark.parametrize("order", list(ORDERS))
def test_requests_under_both_keys_met_in_one_scan_pay_once_per_artifact(
    data_root: Path,
    fake_api: FakeOpenAI,
    worker: RunningWorker,
    gateways: Callable[[], Gateway],
    ordered_ids: None,
    order: str,
) -> None:
    old_first, new_first = ORDERS[order]
    # The calls take a while: the first eight fill the worker's call pool, the
    # rest wait for it.
    fake_api.behaviour = compose_reply(default_style, delay_s=0.3)
    pid = worker_pid(data_root)
    os.kill(pid, signal.SIGSTOP)
    try:
        before = gateways()
        before.present(EVENTS, old_first)
        assert until(lambda: request_files(data_root) == len(EVENTS), 10)
        old = key_bytes(data_root)
        new = rotate(data_root)
        after = gateways()  # a gateway started after the rotation: the new key
        after.present(EVENTS, new_first)
        assert until(lambda: request_files(data_root) == 2 * len(EVENTS), 10)
    finally:
        os.kill(pid, signal.SIGCONT)
    presented = [before.outcomes(), after.outcomes()]
    paid = sum(o is Outcome.SHADOW_SELECTED for p in presented for o in p.values())
    wait_terminal(data_root, paid)
    assert_paid_once(data_root, fake_api, old, new, presented)
    # The order this test is about happened: a new-key request met the worker
    # first (here every start row of a new-key-first artifact is under the new
    # key; at least one, whatever the machine's scheduling of the call pool).
    new_keys = {artifact_key(new, weekly_fields(e)) for e in EVENTS}
    assert any(r["artifact_key"] in new_keys for r in journal_rows(data_root))

    # A restarted worker loads the journal with its links (a link file it could
    # not read would fail it closed): every artifact is already attempted.
    worker.stop()
    again = start_supervised_worker(data_root, fake_api)
    try:
        g = gateways()
        g.present(EVENTS, None)
        assert set(g.outcomes().values()) == {Outcome.ALREADY_ATTEMPTED}
    finally:
        again.stop()
    assert len(fake_api.requests) == len(EVENTS)


def test_a_rotation_while_the_old_keys_calls_are_on_the_wire_pays_once_per_artifact(
    data_root: Path,
    fake_api: FakeOpenAI,
    worker: RunningWorker,
    gateways: Callable[[], Gateway],
) -> None:
    # Each call takes 2 s: the rotation and the new-key presentations happen
    # while all eight are on the wire and the worker's call pool is full.
    fake_api.behaviour = compose_reply(default_style, delay_s=2.0)
    before = gateways()
    before.present(EVENTS, None)
    assert fake_api.wait_for_requests(len(EVENTS), 10)
    old = key_bytes(data_root)
    new = rotate(data_root)
    after = gateways()
    after.present(EVENTS, None)
    presented = [before.outcomes(), after.outcomes()]
    paid = sum(o is Outcome.SHADOW_SELECTED for p in presented for o in p.values())
    wait_terminal(data_root, paid)
    assert_paid_once(data_root, fake_api, old, new, presented)

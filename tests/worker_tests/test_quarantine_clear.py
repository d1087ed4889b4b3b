"""Leaving quarantine without a restart (`kexpr.worker.resume`): once the operator
fixed the cause, ``kexpr quarantine clear`` asks the worker to run its start-up
checks again; it serves again only if they pass. Before, ``quarantined`` lasted
until a restart whatever the operator fixed."""

from __future__ import annotations

import json
import os

from worker_tests.worker_kit import Clock, make_worker, outcomes, response, rid, submit

from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import ResponseStatus
from kexpr.spool.outcomes import Outcome
from kexpr.worker import resume
from kexpr.worker.resume import ClearResult, clear_if_asked, request_bytes

NONCE = "0123456789abcdef" * 2


def ask(root: DataRoot, data: bytes | None = None) -> None:
    publish(root.tmp, root.quarantine_clear, request_bytes(NONCE) if data is None else data)


def test_a_fixed_mode_slip_is_cleared_and_the_worker_serves_again(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    os.chmod(root.outcomes, 0o755)  # the operator's slip
    w.parts.quarantine.check_tree(walk=True)
    assert w.quarantine == "bad_mode"
    w.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")
    assert response(root, rid(1)).outcome is Outcome.JOURNAL_UNAVAILABLE
    os.chmod(root.outcomes, 0o700)  # fixed: still quarantined, nothing asked yet
    assert clear_if_asked(w.parts) is None and w.quarantine == "bad_mode"
    ask(root)
    done = clear_if_asked(w.parts)
    assert done is not None and done.to_json() == {
        "nonce": NONCE,
        "result": ClearResult.CLEARED,
        "was": "bad_mode",
        "why": None,
    }
    assert w.quarantine is None and w.journal_ok
    assert not root.quarantine_clear.exists()
    w.handle_claimed(f"{submit(root, clock, akey='2' * 32, rid=rid(2))}.json")
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert [c["artifact_key"] for c in provider.calls] == ["2" * 32]
    # And the tree checks go on against the tree as it is now.
    w.parts.quarantine.check_tree(walk=False)
    assert w.quarantine is None


def test_a_cause_still_there_refuses_the_clear(root, provider, env) -> None:
    w = make_worker(root, provider, Clock(), env)
    os.chmod(root.reports, 0o755)
    w.parts.quarantine.check_tree(walk=True)
    ask(root)
    done = clear_if_asked(w.parts)
    assert done is not None and (done.result, done.why) == (ClearResult.REFUSED, "bad_mode")
    assert w.quarantine == "bad_mode" and not w.journal_ok
    assert not root.quarantine_clear.exists()  # one-shot: asked again after the fix


def test_a_journal_that_does_not_verify_refuses_the_clear(root, provider, env) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, akey='1' * 32, rid=rid(1))}.json")
    seg = root.outcomes / "2026-11-30.jsonl"
    data = bytearray(seg.read_bytes())
    data[data.index(b"attempt_started")] = ord("A")
    seg.write_bytes(bytes(data))
    w.parts.quarantine.enter("io_error")
    ask(root)
    done = clear_if_asked(w.parts)
    assert done is not None and done.result is ClearResult.REFUSED
    assert done.why is not None and done.why != "io_error"  # the journal's own finding
    assert w.quarantine == "io_error"


def test_no_clear_beside_a_call_in_flight(root, provider, env) -> None:
    w = make_worker(root, provider, Clock(), env)
    w.parts.quarantine.enter("inode_changed")
    assert w.parts.attempts.take("x.json")
    ask(root)
    done = clear_if_asked(w.parts)
    assert done is not None and (done.result, done.why) == (ClearResult.REFUSED, "calls_in_flight")
    assert w.quarantine == "inode_changed"


def test_a_malformed_ask_is_refused_and_removed(root, provider, env) -> None:
    w = make_worker(root, provider, Clock(), env)
    w.parts.quarantine.enter("inode_changed")
    ask(root, json.dumps({"schema": resume.CLEAR_SCHEMA, "nonce": "김민지"}).encode())
    done = clear_if_asked(w.parts)
    assert done is not None and (done.result, done.why) == (
        ClearResult.REFUSED,
        "malformed_request",
    )
    assert not root.quarantine_clear.exists() and w.quarantine == "inode_changed"


def test_outside_quarantine_the_ask_is_not_even_looked_at(root, provider, env) -> None:
    w = make_worker(root, provider, Clock(), env)
    ask(root)
    assert clear_if_asked(w.parts) is None
    assert root.quarantine_clear.exists() and outcomes(root) == []

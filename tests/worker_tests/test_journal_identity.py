"""The journal's record of its key, at the worker (`kexpr.spool._journal_identity`).

A request of this release names the fingerprint of the key its artifact key was
computed under, and those it continues from. Under the journal lock and before
dedupe, the worker adopts the fingerprint into an empty record, serves the one
recorded, moves the record on for a request that continues from it (a rotation),
and refuses anything else: canonical ``identity_mismatch``, no row, no call. The
record is on disk before the start row; a record not in its format fails the
journal closed; a request naming no fingerprint (an earlier release's shim)
changes nothing."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT
from worker_tests.worker_kit import Clock, Provider, make_worker, response, rid

from kexpr.spool import _journal_identity as journal_identity
from kexpr.spool.contract import Capsule
from kexpr.spool.fsio import publish
from kexpr.spool.journal import Journal, audit_journal, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.messages import (
    SPOOL_V2,
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    SpoolRequest,
    parse_request,
)
from kexpr.spool.outcomes import Outcome

FP = "a" * 32  # the key's fingerprint
OLD_FP = "b" * 32  # a key the identity continues from
OTHER_FP = "c" * 32


def _request(
    clock: Clock,
    n: int,
    fp: str | None = FP,
    earlier: tuple[str, ...] = (),
    akey: str | None = None,
) -> SpoolRequest:
    return SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=rid(n),
        submitted_at_utc=format_ts(clock.now),
        deadline_at_utc=format_ts(clock.now + dt.timedelta(seconds=4)),
        mode=SpoolMode.SHADOW,
        capsule=Capsule(
            schema_version="korean-expression-v4",
            surface=STYLED_SURFACE,
            artifact_key=akey or f"{n:032x}",
            slots=(STYLED_SLOT,),
        ),
        identity_fingerprint=fp,
        earlier_fingerprints=earlier,
    )


def _submit(root: DataRoot, req: SpoolRequest) -> str:
    publish(root.tmp, root.claimed / f"{req.request_id}.json", req.to_bytes())
    return f"{req.request_id}.json"


def _rows(root: DataRoot) -> list[str]:
    return [r.artifact_key for r in Journal(root).load().by_attempt.values()]


# -------------------------------------------------------------- the contract


def _doc(**fields: Any) -> bytes:
    obj = json.loads(_request(Clock(), 1, fp=None).to_bytes())
    obj.update(fields)
    return json.dumps(obj).encode()


def test_a_request_without_them_is_byte_for_byte_what_it_was() -> None:
    data = _request(Clock(), 1, fp=None).to_bytes()
    assert b"fingerprint" not in data
    req = parse_request(_request(Clock(), 1, earlier=(OLD_FP,)).to_bytes())
    assert (req.identity_fingerprint, req.earlier_fingerprints) == (FP, (OLD_FP,))


@pytest.mark.parametrize(
    "fields",
    [
        {"identity_fingerprint": None},  # one spelling: absent when empty
        {"identity_fingerprint": FP, "earlier_fingerprints": []},
        {"earlier_fingerprints": [OLD_FP]},  # never without the fingerprint
        {"identity_fingerprint": FP, "earlier_fingerprints": [FP]},  # never its own
        {"identity_fingerprint": FP, "earlier_fingerprints": [OLD_FP, OLD_FP]},
        {"identity_fingerprint": "A" * 32},
        {"identity_fingerprint": "a" * 31},
        {"identity_fingerprint": FP, "earlier_fingerprints": [f"{n:032x}" for n in range(9)]},
    ],
    ids=["null", "empty", "alone", "own", "twice", "upper", "short", "nine"],
)
def test_malformed_fingerprints_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(MessageError):
        parse_request(_doc(**fields))


def test_an_old_protocols_request_never_carries_them() -> None:
    obj = json.loads(_doc(identity_fingerprint=FP))
    obj["spool_version"] = SPOOL_V2
    obj["capsule"]["artifact_key"] = "1" * 64
    with pytest.raises(MessageError):
        parse_request(json.dumps(obj).encode())


def test_the_table() -> None:
    judge, v = journal_identity.judge, journal_identity.Verdict
    assert judge(None, FP, ()) is v.ADOPT
    assert judge(FP, FP, (OLD_FP,)) is v.SAME
    assert judge(OLD_FP, FP, (OLD_FP,)) is v.MOVE
    assert judge(OTHER_FP, FP, (OLD_FP,)) is v.REFUSE
    assert judge(OLD_FP, FP, ()) is v.REFUSE


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"{}",
        b'{"fingerprint":"' + b"a" * 32 + b'"}',
        b'{"schema":"kexpr-journal-identity-v1","fingerprint":"' + b"a" * 32 + b'"}',
        b'{"fingerprint":"' + b"a" * 32 + b'","schema":"kexpr-journal-identity-v1","x":1}',
        b'{"fingerprint":"' + b"A" * 32 + b'","schema":"kexpr-journal-identity-v1"}',
        b'{"fingerprint":"' + b"a" * 32 + b'","schema":"kexpr-journal-identity-v1"}\n',
    ],
    ids=["empty", "object", "no_schema", "unsorted", "extra", "upper", "newline"],
)
def test_a_record_not_exactly_its_format_is_refused(data: bytes) -> None:
    with pytest.raises(journal_identity.InvalidRecord):
        journal_identity.parse(data)


def test_the_record_round_trips() -> None:
    assert journal_identity.parse(journal_identity.render(FP)) == FP


# --------------------------------------------------------------- the worker


def test_the_first_request_is_adopted_before_its_start_row(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    assert journal_identity.read(root) is None
    w.handle_claimed(_submit(root, _request(clock, 1)))
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    assert journal_identity.read(root) == FP
    assert len(provider.calls) == 1
    # The same key again: served.
    w.handle_claimed(_submit(root, _request(clock, 2)))
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 2


@pytest.mark.parametrize("restart", [False, True])
def test_a_request_under_another_key_gets_no_row_and_no_call(
    root: DataRoot, provider: Provider, env: dict[str, str], restart: bool
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(_submit(root, _request(clock, 1)))
    if restart:
        w = make_worker(root, provider, clock, env)
    # Another key (a deleted record, a restored key): every artifact looks new.
    for n, earlier in ((2, ()), (3, (OTHER_FP,))):
        w.handle_claimed(_submit(root, _request(clock, n, fp=OTHER_FP[:-1] + "d", earlier=earlier)))
        r = response(root, rid(n))
        assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.IDENTITY_MISMATCH)
        assert r.attempt_id is None
    assert len(provider.calls) == 1
    assert _rows(root) == [f"{1:032x}"]
    assert journal_identity.read(root) == FP  # unchanged
    assert w.parts.counters.identity_mismatch == 2


def test_a_rotation_moves_the_record_on_and_the_old_key_is_refused_after(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(_submit(root, _request(clock, 1, fp=OLD_FP)))
    w.handle_claimed(_submit(root, _request(clock, 2, fp=FP, earlier=(OLD_FP,))))
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert journal_identity.read(root) == FP
    # A gateway still on the old key (it takes the new one at its next presentation).
    w.handle_claimed(_submit(root, _request(clock, 3, fp=OLD_FP)))
    assert response(root, rid(3)).outcome is Outcome.IDENTITY_MISMATCH
    assert len(provider.calls) == 2


def test_a_request_naming_no_fingerprint_changes_nothing(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(_submit(root, _request(clock, 1, fp=None)))
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    assert journal_identity.read(root) is None
    journal_identity.write(root, FP)
    w.handle_claimed(_submit(root, _request(clock, 2, fp=None)))
    assert response(root, rid(2)).status is ResponseStatus.ACCEPTED
    assert journal_identity.read(root) == FP


def test_a_record_not_in_its_format_fails_the_journal_closed(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    journal_identity.path(root).write_bytes(b"{}")
    journal_identity.path(root).chmod(0o600)
    w.handle_claimed(_submit(root, _request(clock, 1)))
    r = response(root, rid(1))
    assert (r.status, r.outcome) == (ResponseStatus.CANONICAL, Outcome.JOURNAL_UNAVAILABLE)
    assert provider.calls == []
    findings = audit_journal(root).findings
    assert [(f.finding, f.where) for f in findings] == [("field_format", "outcomes/identity.json")]

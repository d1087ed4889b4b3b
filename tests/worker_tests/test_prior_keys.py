"""A request's ``prior_artifact_keys``: the artifact's keys under identity keys a
rotation sealed (`gateway_shim.identity` rule 4). The message contract is strict
(one spelling, bounded, v3 only, none the capsule's own) and the worker dedupes on
every one of them: an artifact attempted under an old key is never attempted
again under the new one, in the live index, after a restart and from a sealed
(quarantined) segment."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT
from spool_tests.journal_support import hand_rows, write_segment
from worker_tests.worker_kit import Clock, Provider, make_worker, response, rid

from kexpr.spool.contract import Capsule
from kexpr.spool.fsio import publish
from kexpr.spool.journal import RETENTION_DAYS, Journal, JournalUnverified, format_ts
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.messages import (
    MAX_PRIOR_ARTIFACT_KEYS,
    SPOOL_V2,
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    SpoolRequest,
    parse_request,
)

NEW = "1" * 32  # the artifact under the current key
OLD = "2" * 32  # the same artifact under a sealed key
OLDER = "3" * 32
DAY = "2026-11-29"  # the day before the worker kit's clock


def _request(
    clock: Clock, request_id: str, akey: str = NEW, prior: tuple[str, ...] = (OLD,)
) -> SpoolRequest:
    return SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=request_id,
        submitted_at_utc=format_ts(clock.now),
        deadline_at_utc=format_ts(clock.now + dt.timedelta(seconds=4)),
        mode=SpoolMode.SHADOW,
        capsule=Capsule(
            schema_version="korean-expression-v4",
            surface=STYLED_SURFACE,
            artifact_key=akey,
            slots=(STYLED_SLOT,),
        ),
        prior_artifact_keys=prior,
    )


def _doc(**prior: Any) -> bytes:
    obj = json.loads(_request(Clock(), rid(1), prior=()).to_bytes())
    obj.update(prior)
    return json.dumps(obj).encode()


def _submit(root: DataRoot, clock: Clock, n: int, prior: tuple[str, ...] = (OLD,)) -> str:
    publish(
        root.tmp, root.claimed / f"{rid(n)}.json", _request(clock, rid(n), prior=prior).to_bytes()
    )
    return f"{rid(n)}.json"


# -------------------------------------------------------------- the contract


def test_without_prior_keys_a_request_is_byte_for_byte_what_it_was() -> None:
    data = _request(Clock(), rid(1), prior=()).to_bytes()
    assert b"prior_artifact_keys" not in data
    assert parse_request(data).prior_artifact_keys == ()


def test_prior_keys_round_trip() -> None:
    req = _request(Clock(), rid(1), prior=(OLD, OLDER))
    again = parse_request(req.to_bytes())
    assert again == req and again.dedupe_keys() == (NEW, OLD, OLDER)


@pytest.mark.parametrize(
    "value",
    [
        [],  # one spelling: absent when empty
        [OLD, OLD],  # distinct
        [NEW],  # never the capsule's own
        ["2" * 31],
        ["2" * 64],  # 32 hex in v3
        ["G" * 32],
        [2],
        OLD,  # a list, not a string
        None,
        [f"{n:032x}" for n in range(1, MAX_PRIOR_ARTIFACT_KEYS + 2)],  # bounded
    ],
    ids=["empty", "twice", "own", "short", "long", "upper", "number", "str", "null", "nine"],
)
def test_malformed_prior_keys_are_refused(value: object) -> None:
    with pytest.raises(MessageError):
        parse_request(_doc(prior_artifact_keys=value))


def test_eight_prior_keys_are_read() -> None:
    keys = [f"{n:032x}" for n in range(2, MAX_PRIOR_ARTIFACT_KEYS + 2)]
    assert len(parse_request(_doc(prior_artifact_keys=keys)).prior_artifact_keys) == 8


def test_an_old_protocols_request_never_carries_them() -> None:
    obj = json.loads(_doc(prior_artifact_keys=["2" * 64]))
    obj["spool_version"] = SPOOL_V2
    obj["capsule"]["artifact_key"] = "1" * 64
    with pytest.raises(MessageError):
        parse_request(json.dumps(obj).encode())


# --------------------------------------------------------------- the worker


@pytest.mark.parametrize("terminal", [["shadow_selected"], ["timeout"]])
def test_an_artifact_attempted_under_a_sealed_key_is_not_attempted_again(
    root: DataRoot, provider: Provider, env: dict[str, str], terminal: list[str]
) -> None:
    write_segment(root, f"{DAY}.jsonl", hand_rows(OLD, "4" * 32, DAY, terminal))
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(_submit(root, clock, 1, prior=(OLDER, OLD)))
    assert response(root, rid(1)).status is ResponseStatus.ALREADY_ATTEMPTED
    # After a restart (the index rebuilt from the journal) too.
    clock.advance(60)
    w2 = make_worker(root, provider, clock, env)
    w2.handle_claimed(_submit(root, clock, 2))
    assert response(root, rid(2)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert provider.calls == []
    assert not Journal(root).load().knows(NEW)  # no row under the new key


def test_an_open_attempt_under_a_sealed_key_is_answered_as_open_ones_are(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    write_segment(root, f"{DAY}.jsonl", hand_rows(OLD, "4" * 32, DAY, []))
    clock = Clock()
    w = make_worker(root, provider, clock, env)  # inherited, lost: expired at start-up
    w.handle_claimed(_submit(root, clock, 1))
    r = response(root, rid(1))
    assert r.status is not ResponseStatus.ACCEPTED
    assert provider.calls == []


def test_a_sealed_segments_artifact_stays_sealed_under_its_new_key(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    write_segment(root, f"{DAY}.jsonl", hand_rows(OLD, "4" * 32, DAY, ["timeout"]))
    with open(root.outcomes / f"{DAY}.jsonl", "ab") as f:
        f.write(b'{"artifact_key":"' + OLDER.encode() + b'","attempt_id":"')  # torn
    Journal(root).quarantine_torn(DAY, apply=True)
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(_submit(root, clock, 1, prior=(OLDER,)))
    assert response(root, rid(1)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert provider.calls == []


def test_an_artifact_none_of_whose_keys_is_known_is_attempted_once_under_its_own(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(_submit(root, clock, 1))
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    assert [c["artifact_key"] for c in provider.calls] == [NEW]
    # The prior keys never reach the model: the capsule is all it sees.
    assert OLD not in json.dumps(provider.calls)
    assert [r.artifact_key for r in Journal(root).load().by_attempt.values()] == [NEW]
    # Presented again (its keys as before): the attempt under its own key is found.
    w.handle_claimed(_submit(root, clock, 2))
    assert response(root, rid(2)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert len(provider.calls) == 1


# ------------------------------------------------------------- a rotation mid-way
# Eight artifacts; requests written under the old key before ``kexpr identity
# rotate``, and the same artifacts presented again under the new key carrying
# the old one. Whichever order the worker meets them in, and across a restart in
# between, the provider is asked once per artifact.

ARTIFACTS = 8


def _old(n: int) -> str:
    return f"{0xA0 + n:032x}"


def _new(n: int) -> str:
    return f"{0xB0 + n:032x}"


def _present(root: DataRoot, clock: Clock, n: int, akey: str, prior: tuple[str, ...]) -> str:
    publish(
        root.tmp,
        root.claimed / f"{rid(n)}.json",
        _request(clock, rid(n), akey=akey, prior=prior).to_bytes(),
    )
    return f"{rid(n)}.json"


def _old_key_requests(w: Any, root: DataRoot, clock: Clock, base: int) -> None:
    for n in range(ARTIFACTS):
        w.handle_claimed(_present(root, clock, base + n, _old(n), ()))


def _new_key_requests(w: Any, root: DataRoot, clock: Clock, base: int) -> None:
    for n in range(ARTIFACTS):
        w.handle_claimed(_present(root, clock, base + n, _new(n), (_old(n),)))


@pytest.mark.parametrize("restart", [False, True], ids=["live", "restarted"])
def test_old_key_requests_find_the_attempt_their_new_key_started(
    root: DataRoot, provider: Provider, env: dict[str, str], restart: bool
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    _new_key_requests(w, root, clock, 100)
    assert len(provider.calls) == ARTIFACTS
    if restart:
        clock.advance(60)
        w = make_worker(root, provider, clock, env)
    _old_key_requests(w, root, clock, 200)
    assert len(provider.calls) == ARTIFACTS  # one per artifact, not two
    for n in range(ARTIFACTS):
        assert response(root, rid(200 + n)).status is ResponseStatus.ALREADY_ATTEMPTED
    # The rows are what they were: one start row per artifact, under the new key.
    assert sorted(r.artifact_key for r in Journal(root).load().by_attempt.values()) == sorted(
        _new(n) for n in range(ARTIFACTS)
    )


@pytest.mark.parametrize("restart", [False, True], ids=["live", "restarted"])
def test_new_key_requests_find_the_attempt_their_old_key_started(
    root: DataRoot, provider: Provider, env: dict[str, str], restart: bool
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    _old_key_requests(w, root, clock, 100)
    assert len(provider.calls) == ARTIFACTS
    if restart:
        clock.advance(60)
        w = make_worker(root, provider, clock, env)
    _new_key_requests(w, root, clock, 200)
    assert len(provider.calls) == ARTIFACTS
    for n in range(ARTIFACTS):
        assert response(root, rid(200 + n)).status is ResponseStatus.ALREADY_ATTEMPTED


def test_interleaved_presentations_of_a_rotation_pay_once_per_artifact(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    # Half the artifacts meet the worker under the new key first, half under the
    # old; then each is presented again under the other, across a restart.
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    for n in range(ARTIFACTS):
        if n % 2:
            w.handle_claimed(_present(root, clock, 100 + n, _new(n), (_old(n),)))
        else:
            w.handle_claimed(_present(root, clock, 100 + n, _old(n), ()))
    clock.advance(60)
    w = make_worker(root, provider, clock, env)
    for n in range(ARTIFACTS):
        if n % 2:
            w.handle_claimed(_present(root, clock, 200 + n, _old(n), ()))
        else:
            w.handle_claimed(_present(root, clock, 200 + n, _new(n), (_old(n),)))
    assert len(provider.calls) == ARTIFACTS


def test_an_old_key_request_while_the_new_keys_call_runs_is_in_flight(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    seen: list[str] = []

    def during_the_call(capsule: dict[str, object]) -> Any:
        # The old-key request arrives while the new key's one call is out.
        w.handle_claimed(_present(root, clock, 2, OLD, ()))
        seen.append(response(root, rid(2)).status.value)
        return reply(capsule)

    reply = provider.reply
    provider.reply = during_the_call
    w.handle_claimed(_present(root, clock, 1, NEW, (OLD,)))
    assert seen == [ResponseStatus.IN_FLIGHT.value]
    assert len(provider.calls) == 1


def test_forged_prior_keys_neither_suppress_nor_add_a_call(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    # Prior keys nothing was ever attempted under: the artifact is paid once,
    # under its own key, and answered.
    forged = ("5" * 32, "6" * 32)
    w.handle_claimed(_present(root, clock, 1, NEW, forged))
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    assert len(provider.calls) == 1
    # A prior key naming an artifact attempted under its own key: that attempt
    # is found (no second call), and it stays the artifact's own.
    w.handle_claimed(_present(root, clock, 2, OLDER, ()))
    w.handle_claimed(_present(root, clock, 3, "7" * 32, (OLDER,)))
    assert response(root, rid(3)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert len(provider.calls) == 2
    # A link never hides a key's own attempt, after a restart too.
    clock.advance(60)
    w = make_worker(root, provider, clock, env)
    index = Journal(root).load()
    rec = index.get(OLDER)
    assert rec is not None and rec.artifact_key == OLDER
    assert len(provider.calls) == 2


# ------------------------------------------------- the links on disk (_journal_prior)


def test_links_are_on_disk_before_the_start_row_and_torn_lines_link_nothing(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    from kexpr.spool._journal_prior import append_link, prior_path, read_links

    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(_present(root, clock, 1, NEW, (OLD,)))
    (rec,) = Journal(root).load().by_attempt.values()
    path = prior_path(root, rec.segment)
    assert read_links(root, rec.segment) == [(rec.attempt_id, (OLD,))]
    # A link whose attempt has no start row (its append failed) links nothing,
    # and a torn last line (never acknowledged) is ignored, then cut off.
    append_link(root, rec.segment, "9" * 32, ("8" * 32,))
    with open(path, "ab") as f:
        f.write(b'{"attempt_id":"')
    index = Journal(root).load()
    assert index.get("8" * 32) is None and index.get(OLD) is not None
    append_link(root, rec.segment, "a" * 32, ("b" * 32,))
    assert [aid for aid, _ in read_links(root, rec.segment)] == [
        rec.attempt_id,
        "9" * 32,
        "a" * 32,
    ]
    # Any other line that is not exactly the format fails the journal closed.
    with open(path, "ab") as f:
        f.write(b'{"attempt_id":"' + b"c" * 32 + b'","prior_artifact_keys":[]}\n')
    with pytest.raises(JournalUnverified):
        Journal(root).load()


def test_retention_removes_the_links_with_their_segment(root: DataRoot) -> None:
    from kexpr.spool._journal_prior import append_link, prior_days

    aid = "4" * 32
    write_segment(root, f"{DAY}.jsonl", hand_rows(NEW, aid, DAY, ["timeout"]))
    later = dt.date.fromisoformat(DAY) + dt.timedelta(days=RETENTION_DAYS + 2)
    write_segment(root, f"{later}.jsonl", hand_rows("5" * 32, "6" * 32, str(later), ["timeout"]))
    append_link(root, DAY, aid, (OLD,))
    j = Journal(root)
    assert j.load().get(OLD) is not None
    with j.locked():
        removed, _ = j.remove_expired(later)
    assert removed == [DAY] and prior_days(root) == []
    assert j.index.get(OLD) is None and j.index.linked == {}
    assert Journal(root).load().get(OLD) is None

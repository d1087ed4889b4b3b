"""The artifact key is HMAC-SHA-256 truncated to 128 bits (32 hex),
and nothing attempted under the 64-hex key of the release before may be attempted
again.

The new key is the old key's first 32 hex; the journal's dedupe identity is the first
32 hex of whatever key a row carries, so a 64-hex row and a 32-hex request of one
artifact find each other: in the worker's live index, in the index rebuilt from the
journal at start-up, in a sealed (quarantined) file, until retention removes the row's
segment. The spool protocol version names the key's length (``kexpr-spool-v3``: 32;
v1/v2: 64) and the worker still serves an old shim's v2 request as it is: its capsule
with its 64-hex key, the echo checked against it."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json

import pytest
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT
from spool_tests.journal_support import hand_rows, write_segment
from worker_tests.worker_kit import (
    Clock,
    Provider,
    make_worker,
    outcomes,
    response,
    rid,
    submit,
)

from gateway_shim.identity import encode_fields
from kexpr.spool.contract import Capsule
from kexpr.spool.fsio import publish
from kexpr.spool.journal import Index, Journal, format_ts, verify_segment_bytes
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.messages import (
    KNOWN_SPOOL_VERSIONS,
    SPOOL_V1,
    SPOOL_V2,
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    SpoolRequest,
    parse_request,
)
from kexpr.spool.outcomes import Outcome

OLD_KEY = hashlib.sha256(b"an artifact journaled before the upgrade").hexdigest()  # 64 hex
NEW_KEY = OLD_KEY[:32]
OLD_DAY = "2026-11-29"  # the day before the tests' clock (T0, 2026-11-30)


def _request(akey: str, request_id: str, clock: Clock, version: str) -> SpoolRequest:
    return SpoolRequest(
        spool_version=version,  # type: ignore[arg-type]
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
    )


def _submit_old(root: DataRoot, clock: Clock, akey: str, request_id: str) -> str:
    """What an old (v2) shim writes: its capsule carries the whole 64-hex HMAC."""
    req = _request(akey, request_id, clock, SPOOL_V2)
    publish(root.tmp, root.claimed / f"{request_id}.json", req.to_bytes())
    return f"{request_id}.json"


def test_the_key_is_the_hmacs_first_128_bits() -> None:
    from gateway_shim.identity import ARTIFACT_KEY_HEX, artifact_key

    key, fields = b"k" * 32, ["daily", "evt-1"]
    full = hmac.new(key, encode_fields(fields), hashlib.sha256).hexdigest()
    assert ARTIFACT_KEY_HEX == 32
    assert artifact_key(key, fields) == full[:32]  # the old key's prefix IS the new key


def test_this_release_writes_v3_and_reads_every_earlier_version() -> None:
    assert SPOOL_VERSION == "kexpr-spool-v3"
    assert KNOWN_SPOOL_VERSIONS == {SPOOL_V1, SPOOL_V2, SPOOL_VERSION}


@pytest.mark.parametrize(
    ("version", "akey", "ok"),
    [
        (SPOOL_VERSION, NEW_KEY, True),
        (SPOOL_VERSION, OLD_KEY, False),  # a v3 request carries the 128-bit key only
        (SPOOL_V2, OLD_KEY, True),
        (SPOOL_V2, NEW_KEY, False),  # an old shim never wrote a 32-hex key
        (SPOOL_V1, OLD_KEY, True),
        (SPOOL_V1, NEW_KEY, False),
    ],
)
def test_the_keys_length_is_part_of_the_version(version: str, akey: str, ok: bool) -> None:
    good = _request("a" * (64 if version != SPOOL_VERSION else 32), rid(1), Clock(), version)
    obj = json.loads(good.to_bytes())
    obj["capsule"]["artifact_key"] = akey
    data = json.dumps(obj, ensure_ascii=False).encode()
    if ok:
        assert parse_request(data).capsule.artifact_key == akey
    else:
        with pytest.raises(MessageError):
            parse_request(data)


def test_an_old_shims_v2_request_is_served_with_its_own_64_hex_key(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(_submit_old(root, clock, OLD_KEY, rid(1)))
    r = response(root, rid(1))
    assert r.status is ResponseStatus.ACCEPTED and r.spool_version == SPOOL_V2
    # The model saw the capsule as the old shim wrote it, and the echo it wrote
    # (judged by the worker, then by the old shim against its own capsule) is it.
    assert [c["artifact_key"] for c in provider.calls] == [OLD_KEY]
    assert r.composition is not None and r.composition.artifact_key == OLD_KEY
    # Its row keeps the key as the request carried it.
    assert [rec.artifact_key for rec in Journal(root).load().by_attempt.values()] == [OLD_KEY]


@pytest.mark.parametrize("terminal", [["timeout"], ["shadow_selected"]])
def test_an_artifact_journaled_under_its_64_hex_key_is_never_attempted_again(
    root: DataRoot, provider: Provider, env: dict[str, str], terminal: list[str]
) -> None:
    write_segment(root, f"{OLD_DAY}.jsonl", hand_rows(OLD_KEY, "4" * 32, OLD_DAY, terminal))
    clock = Clock()
    w = make_worker(root, provider, clock, env)  # the index rebuilt from the journal
    w.handle_claimed(f"{submit(root, clock, akey=NEW_KEY, rid=rid(1))}.json")
    assert response(root, rid(1)).status is ResponseStatus.ALREADY_ATTEMPTED
    # After a restart, and from an old shim still running (its 64-hex key) too.
    clock.advance(60)
    w2 = make_worker(root, provider, clock, env)
    w2.handle_claimed(f"{submit(root, clock, akey=NEW_KEY, rid=rid(2))}.json")
    w2.handle_claimed(_submit_old(root, clock, OLD_KEY, rid(3)))
    assert response(root, rid(2)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert response(root, rid(3)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert provider.calls == []


def test_an_artifact_attempted_under_its_32_hex_key_is_not_attempted_by_an_old_shim(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, akey=NEW_KEY, rid=rid(1))}.json")
    assert response(root, rid(1)).status is ResponseStatus.ACCEPTED
    w.handle_claimed(_submit_old(root, clock, OLD_KEY, rid(2)))
    assert response(root, rid(2)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert len(provider.calls) == 1


def test_an_open_64_hex_attempt_is_finished_under_its_own_key_and_stays_attempted(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """An attempt the old worker left open (stopped for the upgrade): today's worker
    ends it claim_expired_canonical with a terminal row that copies its 64-hex key
    (the journal verifies), and the 32-hex request for it gets no call."""
    write_segment(root, f"{OLD_DAY}.jsonl", hand_rows(OLD_KEY, "4" * 32, OLD_DAY, []))
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    assert outcomes(root) == ["claim_expired_canonical"]
    rows = [json.loads(line) for line in (root.outcomes / f"{OLD_DAY}.jsonl").read_text().split()]
    assert [r["artifact_key"] for r in rows] == [OLD_KEY, OLD_KEY]
    w.handle_claimed(f"{submit(root, clock, akey=NEW_KEY, rid=rid(1))}.json")
    r = response(root, rid(1))
    assert r.status is not ResponseStatus.ACCEPTED and r.outcome is not Outcome.ACCEPTED
    assert provider.calls == []
    assert Journal(root).load().knows(NEW_KEY)


def test_a_sealed_64_hex_artifact_is_sealed_for_its_32_hex_key(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    write_segment(root, f"{OLD_DAY}.jsonl", hand_rows(OLD_KEY, "4" * 32, OLD_DAY, ["timeout"]))
    with open(root.outcomes / f"{OLD_DAY}.jsonl", "ab") as f:
        f.write(b'{"artifact_key":"' + ("e" * 64).encode() + b'","attempt_id":"')  # torn
    Journal(root).quarantine_torn(OLD_DAY, apply=True)
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    for n, akey in ((1, NEW_KEY), (2, "e" * 32)):
        w.handle_claimed(f"{submit(root, clock, akey=akey, rid=rid(n))}.json")
        assert response(root, rid(n)).status is ResponseStatus.ALREADY_ATTEMPTED
    assert provider.calls == []


def test_retention_forgets_a_64_hex_artifact_with_its_segment() -> None:
    """Dedupe is per retention window, whatever the key's length: dropping the
    segment removes the identity the 64-hex row held (no stale entry)."""
    index = Index()
    verify_segment_bytes(hand_rows(OLD_KEY, "4" * 32, OLD_DAY, ["timeout"]), OLD_DAY, index)
    assert index.knows(NEW_KEY) and index.knows(OLD_KEY)
    index.drop_segment(OLD_DAY)
    assert not index.knows(NEW_KEY) and index.by_artifact == {} and index.by_attempt == {}


@pytest.mark.parametrize(
    ("second", "ok"),
    [
        ("5" * 32, True),  # another artifact, this release's key
        (NEW_KEY, False),  # the same artifact as the 64-hex row: a second start
        ("5" * 48, False),  # neither length
    ],
)
def test_journal_verify_takes_both_key_lengths(
    root: DataRoot, capsys: pytest.CaptureFixture[str], second: str, ok: bool
) -> None:
    """`kexpr journal verify` on a journal with a 64-hex row (an earlier release's) and a
    32-hex one: both valid; one artifact twice is duplicate_artifact; any other length
    is field_format."""
    from kexpr.ops.journal_cli import cli

    write_segment(root, f"{OLD_DAY}.jsonl", hand_rows(OLD_KEY, "4" * 32, OLD_DAY, ["timeout"]))
    write_segment(root, "2026-11-30.jsonl", hand_rows(second, "6" * 32, "2026-11-30", ["timeout"]))
    code = cli(["verify", "--data-root", str(root.root), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert OLD_KEY not in json.dumps(out) and NEW_KEY not in json.dumps(out)
    if ok:
        assert (code, out["ok"], out["attempts"]) == (0, True, 2)
    else:
        assert code != 0 and out["ok"] is False
        expected = "duplicate_artifact" if len(second) == 32 else "field_format"
        assert [f["finding"] for f in out["findings"]] == [expected]

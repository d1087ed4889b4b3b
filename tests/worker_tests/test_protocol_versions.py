"""The spool protocol is versioned (`kexpr.spool.messages`).

A worker that finds files of an older protocol handles them (answers a request
in its own version, journals a report); files of a version it does not know are
refused closed with a finding that says so, and a report is never dropped."""

from __future__ import annotations

import json

import pytest
from worker_tests.worker_kit import (
    Clock,
    Provider,
    make_worker,
    outcomes,
    response,
    rid,
    submit,
)

from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import (
    KNOWN_SPOOL_VERSIONS,
    SPOOL_V1,
    SPOOL_V2,
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    UnknownSpoolVersion,
    parse_report,
)
from kexpr.worker import scan


def _rewrite_version(root: DataRoot, name: str, version: str) -> None:
    path = root.claimed / name
    obj = json.loads(path.read_bytes())
    obj["spool_version"] = version
    if version in (SPOOL_V1, SPOOL_V2):  # an old shim's key: the whole 64-hex HMAC
        obj["capsule"]["artifact_key"] *= 2
    path.unlink()
    publish(root.tmp, path, json.dumps(obj, ensure_ascii=False).encode())


def test_this_release_writes_v3_and_reads_v1_v2_and_v3() -> None:
    assert SPOOL_VERSION == "kexpr-spool-v3"
    assert KNOWN_SPOOL_VERSIONS == {SPOOL_V1, SPOOL_V2, SPOOL_VERSION}


def test_a_v1_request_is_answered_in_v1_and_its_v1_report_journaled(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    starter = submit(root, clock, rid=rid(1), mode="enabled")
    _rewrite_version(root, f"{starter}.json", SPOOL_V1)
    w.handle_claimed(f"{starter}.json")
    r = response(root, rid(1))
    assert r.status is ResponseStatus.ACCEPTED and r.spool_version == SPOOL_V1
    report = {"attempt_id": r.attempt_id, "outcome": "selected", "spool_version": SPOOL_V1}
    publish(root.tmp, root.reports / f"{r.attempt_id}.json", json.dumps(report).encode())
    scan.scan_reports(w.parts)
    assert outcomes(root) == ["selected"] and w.counters.orphan_reports == 0


def test_a_report_of_an_unknown_version_is_kept_and_counted_once(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    """Before: a newer shim's report was an orphan, removed unread."""
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    w.handle_claimed(f"{submit(root, clock, rid=rid(1), mode='enabled')}.json")
    attempt = response(root, rid(1)).attempt_id
    assert attempt is not None
    body = {"attempt_id": attempt, "outcome": "selected", "spool_version": "kexpr-spool-v4"}
    publish(root.tmp, root.reports / f"{attempt}.json", json.dumps(body).encode())
    with pytest.raises(UnknownSpoolVersion):
        parse_report((root.reports / f"{attempt}.json").read_bytes())
    scan.scan_reports(w.parts)
    scan.scan_reports(w.parts)
    assert (root.reports / f"{attempt}.json").exists()
    assert w.counters.orphan_reports == 0
    assert w.counters.faults == {"unknown_spool_version": 1}
    assert outcomes(root) == [None]  # not judged by a worker that cannot read it


def test_a_request_of_an_unknown_version_is_refused_closed_and_said_so(
    root: DataRoot, provider: Provider, env: dict[str, str]
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    starter = submit(root, clock, rid=rid(1))
    _rewrite_version(root, f"{starter}.json", "kexpr-spool-v9")
    w.handle_claimed(f"{starter}.json")
    assert response(root, rid(1)).status is ResponseStatus.CANONICAL
    assert provider.calls == [] and outcomes(root) == []
    assert w.counters.faults == {"unknown_spool_version": 1}


@pytest.mark.parametrize("version", ["kexpr-spool-v0x", "other", 2, None])
def test_a_version_not_of_the_protocols_shape_is_just_malformed(version: object) -> None:
    body = {"attempt_id": "a" * 32, "outcome": "selected", "spool_version": version}
    with pytest.raises(MessageError) as e:
        parse_report(json.dumps(body).encode())
    assert not isinstance(e.value, UnknownSpoolVersion)

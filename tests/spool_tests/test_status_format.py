"""``worker.status.json`` has one parser (`kexpr.spool.status`): what it refuses,
what it types, and that the worker's own document is what it reads.

The readers' verdicts on top of it are tested where they are made: the shim's in
``tests/shim/test_deadline_and_liveness.py``, ``kexpr status``'s in
``tests/ops_tests/test_status.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

from kexpr.spool.status import (
    MAX_STATUS_BYTES,
    STATUS_SCHEMA,
    StatusProblem,
    StatusRefused,
    parse_status,
)

NOW = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.UTC)
BEAT = "2026-12-03T11:59:58.000000Z"


def _doc(**fields: object) -> bytes:
    doc: dict[str, object] = {
        "schema": STATUS_SCHEMA,
        "state": "ready",
        "pid": 42,
        "started_at_utc": "2026-12-03T11:00:00.000000Z",
        "heartbeat_at_utc": BEAT,
    }
    doc.update(fields)
    return json.dumps(doc).encode("utf-8")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"{not json", StatusProblem.NOT_JSON),
        (b"", StatusProblem.NOT_JSON),
        (b'{"state": "\xff"}', StatusProblem.NOT_JSON),  # not UTF-8
        ('{"state":"ready"}'.encode("utf-16"), StatusProblem.NOT_JSON),
        (b"[]", StatusProblem.NOT_OBJECT),
        (b'"ready"', StatusProblem.NOT_OBJECT),
        (b"{" + b" " * MAX_STATUS_BYTES + b"}", StatusProblem.TOO_LARGE),
    ],
    ids=["bad_json", "empty", "not_utf8", "utf16", "array", "string", "oversize"],
)
def test_what_is_not_a_status_document_is_refused_with_its_reason(
    data: bytes, problem: StatusProblem
) -> None:
    with pytest.raises(StatusRefused) as e:
        parse_status(data)
    assert e.value.reason is problem and str(e.value) == problem.value


def _interpreter_reads(data: bytes) -> bool:
    """Whether this interpreter's JSON parser reads ``data`` or stops at its
    depth limit, which differs by version: 3.11's stops at the recursion
    limit (1,000 levels), 3.13's reads 5,000."""
    try:
        json.loads(data)
    except RecursionError:
        return False
    return True


@pytest.mark.parametrize(
    "depth",
    [5000, MAX_STATUS_BYTES // 2],
    ids=["5000_levels", "deepest_under_the_cap"],
)
def test_a_deeply_nested_document_is_refused_on_every_interpreter(depth: int) -> None:
    """The reader has no depth limit of its own: it is the parser's. A
    document deeper than the parser goes is ``not_json`` (a `RecursionError`
    refused, never raised); one it reads is a list, ``not_object``. Either
    way refused, and for the reason this interpreter's parser gives; the
    deepest document the size cap lets through is both checks' case."""
    data = b"[" * depth + b"]" * depth
    assert len(data) <= MAX_STATUS_BYTES
    expected = StatusProblem.NOT_OBJECT if _interpreter_reads(data) else StatusProblem.NOT_JSON
    with pytest.raises(StatusRefused) as e:
        parse_status(data)
    assert e.value.reason is expected


def test_a_parser_that_stops_at_its_depth_limit_is_not_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On an interpreter whose parser reads every document the cap lets
    through, the `RecursionError` branch is still proven: the parser is made
    to stop as 3.11's does, on a document that is otherwise a ready one."""

    def stops(*args: object, **kwargs: object) -> object:
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")

    monkeypatch.setattr(json, "loads", stops)
    with pytest.raises(StatusRefused) as e:
        parse_status(_doc())
    assert e.value.reason is StatusProblem.NOT_JSON


def test_a_document_of_the_cap_is_read() -> None:
    data = _doc()
    data = data[:-1] + b" " * (MAX_STATUS_BYTES - len(data)) + b"}"
    assert len(data) == MAX_STATUS_BYTES and parse_status(data).ready


def test_a_ready_document_is_typed() -> None:
    s = parse_status(_doc())
    assert (s.current, s.state, s.pid, s.ready) == (True, "ready", 42, True)
    assert s.heartbeat_age_s(NOW) == 2.0
    assert s.started_age_s(NOW) == 3600.0
    assert s.document["schema"] == STATUS_SCHEMA


@pytest.mark.parametrize(
    "fields",
    [
        {"schema": "kexpr-worker-status-v2"},
        {"schema": None},
        {"state": "stopped"},
        {"state": 1},
    ],
    ids=["other_schema", "no_schema", "not_ready", "state_not_a_word"],
)
def test_only_the_schema_and_ready_are_ready(fields: dict[str, object]) -> None:
    assert not parse_status(_doc(**fields)).ready


@pytest.mark.parametrize(
    ("pid", "expected"), [(7, 7), (-1, None), (True, None), ("7", None), (1.0, None)]
)
def test_a_pid_is_a_non_negative_int(pid: object, expected: int | None) -> None:
    assert parse_status(_doc(pid=pid)).pid == expected


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-02-30T00:00:00.000000Z",  # no such day
        "2026-12-03T11:60:00.000000Z",  # no such minute
        "2026-12-03T11:59:58Z",  # not the journal's exact format
        "2026-12-03 11:59:58.000000Z",
        1733227198,
        None,
    ],
)
def test_a_timestamp_is_the_exact_format_and_a_real_instant(stamp: object) -> None:
    s = parse_status(_doc(heartbeat_at_utc=stamp, started_at_utc=stamp))
    assert s.heartbeat_at_utc is None and s.heartbeat_age_s(NOW) is None
    assert s.started_at_utc is None and s.started_age_s(NOW) is None


def test_the_parser_stays_light() -> None:
    """The shim imports it: no journal, worker or ops module comes with it."""
    code = (
        "import sys, kexpr.spool.status\n"
        "bad = [m for m in sys.modules if m.startswith(('kexpr.worker', 'kexpr.ops'))"
        " or m.startswith('kexpr.spool.journal') or m.startswith('kexpr.spool._journal')]\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"

"""The outcome journal: exact rows, hash chain, segments, lifecycle table, fail closed."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import pytest

from spool.journal import (
    JOURNAL_SCHEMA,
    ROW_FIELDS,
    TRANSITIONS,
    ZERO_DIGEST,
    Event,
    Finding,
    IllegalTransition,
    Index,
    Journal,
    JournalUnverified,
    Mode,
    Outcome,
    Phase,
    canonical_json,
    format_ts,
    transition,
    verify_segment_bytes,
)
from spool.layout import DataRoot

T0 = dt.datetime(2026, 11, 30, 23, 59, 59, 500000, tzinfo=dt.UTC)
AKEY = "a" * 64
AID = "b" * 32


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    root = DataRoot(tmp_path / "root")
    root.ensure()
    j = Journal(root)
    j.load()
    return j


def start(j: Journal, akey: str = AKEY, aid: str = AID, mode: Mode = Mode.SHADOW, at: dt.datetime = T0):
    with j.locked():
        return j.append_start(
            artifact_key=akey,
            surface="daily.v1",
            mode=mode,
            attempt_id=aid,
            started_at=at,
            deadline_at_utc=format_ts(at + dt.timedelta(seconds=4)),
        )


def segment_lines(j: Journal, name: str) -> list[bytes]:
    return (j._root.outcomes / f"{name}.jsonl").read_bytes().split(b"\n")[:-1]


def test_rows_are_exact_canonical_and_chained(journal: Journal) -> None:
    rec = start(journal)
    with journal.locked():
        journal.append_terminal(
            rec, Phase.OPEN, Event.CALL_FAILED, Outcome.PROVIDER_ERROR, T0 + dt.timedelta(seconds=2)
        )
    lines = segment_lines(journal, "2026-11-30")
    assert len(lines) == 2
    first, second = (json.loads(x) for x in lines)
    assert set(first) == ROW_FIELDS and set(second) == ROW_FIELDS
    assert first["schema_version"] == JOURNAL_SCHEMA
    assert (first["sequence"], second["sequence"]) == (1, 2)
    assert first["previous_row_digest"] == ZERO_DIGEST
    assert second["previous_row_digest"] == first["row_digest"]
    for raw, row in ((lines[0], first), (lines[1], second)):
        assert raw.decode() == canonical_json(row)
        body = {k: v for k, v in row.items() if k != "row_digest"}
        expected = hashlib.sha256(
            json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
        ).hexdigest()
        assert row["row_digest"] == expected
    assert (first["state"], first["outcome"], first["finalized_at_utc"]) == (
        "attempt_started",
        "attempt_started",
        None,
    )
    assert first["started_at_utc"] == "2026-11-30T23:59:59.500000Z"
    assert second["state"] == "finalized" and second["outcome"] == "provider_error"
    assert second["started_at_utc"] == first["started_at_utc"]
    assert second["deadline_at_utc"] == first["deadline_at_utc"] == "2026-12-01T00:00:03.500000Z"
    assert second["finalized_at_utc"] == "2026-12-01T00:00:01.500000Z"
    mode = os.stat(journal._root.outcomes / "2026-11-30.jsonl").st_mode & 0o777
    assert mode == 0o600


def test_terminal_row_goes_to_the_start_segment_across_midnight(journal: Journal) -> None:
    rec = start(journal)
    with journal.locked():
        journal.append_terminal(
            rec, Phase.OPEN, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, T0 + dt.timedelta(hours=1)
        )
    assert journal.segments() == ["2026-11-30"]


def test_new_segment_per_utc_day_restarts_sequence(journal: Journal) -> None:
    start(journal)
    start(journal, akey="c" * 64, aid="d" * 32, at=T0 + dt.timedelta(seconds=1))
    assert journal.segments() == ["2026-11-30", "2026-12-01"]
    row = json.loads(segment_lines(journal, "2026-12-01")[0])
    assert row["sequence"] == 1 and row["previous_row_digest"] == ZERO_DIGEST


def test_reload_rebuilds_index(journal: Journal) -> None:
    rec = start(journal)
    j2 = Journal(journal._root)
    index = j2.load()
    assert index.by_artifact[AKEY] == rec
    assert list(index.open_attempts()) == [rec]


def test_one_attempt_per_artifact_ever(journal: Journal) -> None:
    start(journal)
    with pytest.raises(IllegalTransition):
        start(journal, aid="e" * 32)


def test_double_terminal_is_illegal(journal: Journal) -> None:
    rec = start(journal)
    with journal.locked():
        journal.append_terminal(rec, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT, T0)
        with pytest.raises(IllegalTransition):
            journal.append_terminal(rec, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT, T0)


@pytest.mark.parametrize(
    ("phase", "event", "outcome", "mode"),
    [
        (Phase.OPEN, Event.REPORT, Outcome.SHADOW_SELECTED, Mode.SHADOW),  # no report before acceptance
        (Phase.AWAITING_REPORT, Event.CALL_FAILED, Outcome.TIMEOUT, Mode.SHADOW),
        (Phase.FINALIZED, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, Mode.SHADOW),
        (Phase.AWAITING_REPORT, Event.REPORT, Outcome.SELECTED, Mode.SHADOW),  # shadow never "selected"
        (Phase.AWAITING_REPORT, Event.REPORT, Outcome.SHADOW_SELECTED, Mode.ENABLED),
        (Phase.OPEN, Event.CALL_FAILED, Outcome.SELECTED, Mode.ENABLED),
        (Phase.OPEN, Event.EXPIRE, Outcome.TIMEOUT, Mode.ENABLED),
        (None, Event.REPORT, Outcome.SELECTED, Mode.ENABLED),
    ],
)
def test_illegal_transitions(phase: Phase | None, event: Event, outcome: Outcome, mode: Mode) -> None:
    with pytest.raises(IllegalTransition):
        transition(phase, event, outcome, mode)


def test_finalized_has_no_outgoing_edge() -> None:
    assert not [k for k in TRANSITIONS if k[0] is Phase.FINALIZED]


def _segment(journal: Journal) -> bytes:
    rec = start(journal)
    with journal.locked():
        journal.append_terminal(rec, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT, T0)
    return (journal._root.outcomes / "2026-11-30.jsonl").read_bytes()


def _rewrite(data: bytes, mutate) -> bytes:  # type: ignore[no-untyped-def]
    rows = [json.loads(x) for x in data.split(b"\n")[:-1]]
    mutate(rows)
    return b"".join((canonical_json(r) + "\n").encode() for r in rows)


def _rechain(rows: list[dict[str, object]]) -> None:
    prev = ZERO_DIGEST
    for r in rows:
        r["previous_row_digest"] = prev
        body = {k: v for k, v in r.items() if k != "row_digest"}
        r["row_digest"] = hashlib.sha256(canonical_json(body).encode()).hexdigest()
        prev = str(r["row_digest"])


def _set(field: str, value: object, *, row: int = 0, rechain: bool = True):  # type: ignore[no-untyped-def]
    def m(rows: list[dict[str, object]]) -> None:
        rows[row][field] = value
        if rechain:
            _rechain(rows)

    return m


CORRUPTIONS = [
    ("torn_tail", lambda d: d[:-1], Finding.TORN_TAIL),
    ("truncated_row", lambda d: d[: len(d) // 2] + b"\n", Finding.MALFORMED_ROW),
    ("non_canonical", lambda d: d.replace(b'{"', b'{ "', 1), Finding.NON_CANONICAL_ROW),
    ("broken_chain", lambda d: _rewrite(d, _set("previous_row_digest", "f" * 64, row=1, rechain=False)), Finding.CHAIN_BROKEN),
    ("digest_mismatch", lambda d: _rewrite(d, _set("surface", "weekly.v1", row=1, rechain=False)), Finding.DIGEST_MISMATCH),
    ("sequence_gap", lambda d: _rewrite(d, _set("sequence", 3, row=1)), Finding.SEQUENCE_GAP),
    ("unknown_outcome", lambda d: _rewrite(d, _set("outcome", "repaired", row=1)), Finding.STATE_OUTCOME),
    ("bad_mode", lambda d: _rewrite(d, _set("mode", "disabled")), Finding.FIELD_FORMAT),
    ("upper_hex", lambda d: _rewrite(d, _set("artifact_key", "A" * 64)), Finding.FIELD_FORMAT),
    ("bad_ts", lambda d: _rewrite(d, _set("started_at_utc", "2026-11-30T23:59:59Z")), Finding.FIELD_FORMAT),
    ("extra_field", lambda d: _rewrite(d, _set("note", "x")), Finding.FIELD_SET),
    ("terminal_start_not_verbatim", lambda d: _rewrite(d, _set("deadline_at_utc", "2026-12-01T00:00:04.500000Z", row=1)), Finding.TERMINAL_MISMATCH),
    ("orphan_terminal", lambda d: _rewrite(d, lambda rows: (rows.pop(0), rows[0].update(sequence=1), _rechain(rows))), Finding.ORPHAN_TERMINAL),
    ("double_terminal", lambda d: _rewrite(d, lambda rows: (rows.append(dict(rows[1], sequence=3)), _rechain(rows))), Finding.DOUBLE_TERMINAL),
    ("start_with_outcome", lambda d: _rewrite(d, _set("outcome", "timeout", row=0)), Finding.STATE_OUTCOME),
    ("duplicate_key", lambda d: d.replace(b'{"artifact_key"', b'{"artifact_key":"x","artifact_key"', 1), Finding.MALFORMED_ROW),
]


@pytest.mark.parametrize(("name", "corrupt", "finding"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corruption_is_detected(journal: Journal, name: str, corrupt, finding: Finding) -> None:  # type: ignore[no-untyped-def]
    data = corrupt(_segment(journal))
    with pytest.raises(JournalUnverified) as e:
        verify_segment_bytes(data, "2026-11-30", Index())
    assert e.value.finding is finding


def test_intact_segment_verifies(journal: Journal) -> None:
    index = Index()
    seq, _ = verify_segment_bytes(_segment(journal), "2026-11-30", index)
    assert seq == 2 and index.by_artifact[AKEY].outcome is Outcome.TIMEOUT


def test_load_fails_closed_on_a_torn_segment(journal: Journal) -> None:
    path = journal._root.outcomes / "2026-11-30.jsonl"
    data = _segment(journal)
    os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, data[:-3])
    os.close(fd)
    with pytest.raises(JournalUnverified) as e:
        Journal(journal._root).load()
    assert e.value.finding is Finding.TORN_TAIL


def test_symlinked_segment_is_refused(journal: Journal, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(b"")
    (journal._root.outcomes / "2026-11-30.jsonl").symlink_to(target)
    with pytest.raises(JournalUnverified) as e:
        Journal(journal._root).load()
    assert e.value.finding is Finding.UNSAFE_FILE


def test_append_refuses_a_segment_changed_under_it(journal: Journal) -> None:
    rec = start(journal)
    with open(journal._root.outcomes / "2026-11-30.jsonl", "ab") as f:
        f.write(b"\n")
    with journal.locked(), pytest.raises(JournalUnverified) as e:
        journal.append_terminal(rec, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT, T0)
    assert e.value.finding is Finding.APPEND_CONFLICT


def test_unexpected_file_in_outcomes_is_refused(journal: Journal) -> None:
    (journal._root.outcomes / "notes.txt").write_text("x")
    with pytest.raises(JournalUnverified) as e:
        Journal(journal._root).load()
    assert e.value.finding is Finding.UNEXPECTED_FILE


def test_lock_file_is_never_unlinked(journal: Journal) -> None:
    start(journal)
    lock = journal._root.journal_lock
    ino = os.stat(lock).st_ino
    with journal.locked():
        pass
    assert os.stat(lock).st_ino == ino


def test_hand_built_journal_to_the_plans_schema_verifies(tmp_path: Path) -> None:
    """A journal written by hand from the plan's text (not by our writer) verifies."""
    root = DataRoot(tmp_path / "root")
    root.ensure()
    rows = []
    prev = "0" * 64
    for seq, (state, outcome, fin) in enumerate(
        [("attempt_started", "attempt_started", None), ("finalized", "shadow_selected", "2026-11-30T10:00:01.250000Z")],
        start=1,
    ):
        row = {
            "schema_version": "korean-expression-journal-v1",
            "sequence": seq,
            "artifact_key": "1" * 64,
            "surface": "daily.v1",
            "mode": "shadow",
            "attempt_id": "2" * 32,
            "state": state,
            "outcome": outcome,
            "started_at_utc": "2026-11-30T10:00:00.000000Z",
            "deadline_at_utc": "2026-11-30T10:00:04.000000Z",
            "finalized_at_utc": fin,
            "previous_row_digest": prev,
        }
        row["row_digest"] = hashlib.sha256(
            json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        ).hexdigest()
        prev = row["row_digest"]
        rows.append(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
    path = root.outcomes / "2026-11-30.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, ("\n".join(rows) + "\n").encode())
    os.close(fd)
    index = Journal(root).load()
    assert index.by_artifact["1" * 64].outcome is Outcome.SHADOW_SELECTED

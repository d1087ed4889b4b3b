"""The outcome journal: exact rows, hash chain, segments, lifecycle table, fail closed."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import pytest
from spool_tests.journal_support import hand_rows, start_attempt, write_segment

from kexpr.spool.journal import (
    JOURNAL_SCHEMA,
    ROW_FIELDS,
    TRANSITIONS,
    ZERO_DIGEST,
    AttemptRecord,
    Event,
    Finding,
    IllegalTransition,
    Index,
    Journal,
    JournalUnverified,
    Outcome,
    Phase,
    SpoolMode,
    canonical_json,
    transition,
    verify_segment_bytes,
)
from kexpr.spool.layout import DataRoot

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


def start(
    j: Journal,
    akey: str = AKEY,
    aid: str = AID,
    mode: SpoolMode = SpoolMode.SHADOW,
    at: dt.datetime = T0,
):
    return start_attempt(j, akey, aid, at, mode)


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
            rec,
            Phase.OPEN,
            Event.EXPIRE,
            Outcome.CLAIM_EXPIRED_CANONICAL,
            T0 + dt.timedelta(hours=1),
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
    assert index.get(AKEY) == rec
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
        (
            Phase.OPEN,
            Event.REPORT,
            Outcome.SHADOW_SELECTED,
            SpoolMode.SHADOW,
        ),  # no report before acceptance
        (Phase.AWAITING_REPORT, Event.CALL_FAILED, Outcome.TIMEOUT, SpoolMode.SHADOW),
        (Phase.FINALIZED, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL, SpoolMode.SHADOW),
        (
            Phase.AWAITING_REPORT,
            Event.REPORT,
            Outcome.SELECTED,
            SpoolMode.SHADOW,
        ),  # shadow never "selected"
        (Phase.AWAITING_REPORT, Event.REPORT, Outcome.SHADOW_SELECTED, SpoolMode.ENABLED),
        (Phase.OPEN, Event.CALL_FAILED, Outcome.SELECTED, SpoolMode.ENABLED),
        (Phase.OPEN, Event.EXPIRE, Outcome.TIMEOUT, SpoolMode.ENABLED),
        (None, Event.REPORT, Outcome.SELECTED, SpoolMode.ENABLED),
    ],
)
def test_illegal_transitions(
    phase: Phase | None, event: Event, outcome: Outcome, mode: SpoolMode
) -> None:
    with pytest.raises(IllegalTransition):
        transition(phase, event, outcome, mode)


def test_finalized_has_no_outgoing_edge() -> None:
    assert not [k for k in TRANSITIONS if k[0] is Phase.FINALIZED]


def _segment(journal: Journal) -> bytes:
    rec = start(journal)
    with journal.locked():
        journal.append_terminal(rec, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT, T0)
    return (journal._root.outcomes / "2026-11-30.jsonl").read_bytes()


def _rewrite(data: bytes, mutate) -> bytes:
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


def _set(field: str, value: object, *, row: int = 0, rechain: bool = True):
    def m(rows: list[dict[str, object]]) -> None:
        rows[row][field] = value
        if rechain:
            _rechain(rows)

    return m


CORRUPTIONS = [
    ("torn_tail", lambda d: d[:-1], Finding.TORN_TAIL),
    ("truncated_row", lambda d: d[: len(d) // 2] + b"\n", Finding.MALFORMED_ROW),
    ("non_canonical", lambda d: d.replace(b'{"', b'{ "', 1), Finding.NON_CANONICAL_ROW),
    (
        "broken_chain",
        lambda d: _rewrite(d, _set("previous_row_digest", "f" * 64, row=1, rechain=False)),
        Finding.CHAIN_BROKEN,
    ),
    (
        "digest_mismatch",
        lambda d: _rewrite(d, _set("surface", "weekly.v1", row=1, rechain=False)),
        Finding.DIGEST_MISMATCH,
    ),
    ("sequence_gap", lambda d: _rewrite(d, _set("sequence", 3, row=1)), Finding.SEQUENCE_GAP),
    (
        "unknown_outcome",
        lambda d: _rewrite(d, _set("outcome", "repaired", row=1)),
        Finding.STATE_OUTCOME,
    ),
    ("bad_mode", lambda d: _rewrite(d, _set("mode", "disabled")), Finding.FIELD_FORMAT),
    ("upper_hex", lambda d: _rewrite(d, _set("artifact_key", "A" * 64)), Finding.FIELD_FORMAT),
    (
        "bad_ts",
        lambda d: _rewrite(d, _set("started_at_utc", "2026-11-30T23:59:59Z")),
        Finding.FIELD_FORMAT,
    ),
    ("extra_field", lambda d: _rewrite(d, _set("note", "x")), Finding.FIELD_SET),
    (
        "terminal_start_not_verbatim",
        lambda d: _rewrite(d, _set("deadline_at_utc", "2026-12-01T00:00:04.500000Z", row=1)),
        Finding.TERMINAL_MISMATCH,
    ),
    (
        "orphan_terminal",
        lambda d: _rewrite(
            d, lambda rows: (rows.pop(0), rows[0].update(sequence=1), _rechain(rows))
        ),
        Finding.ORPHAN_TERMINAL,
    ),
    (
        "double_terminal",
        lambda d: _rewrite(
            d, lambda rows: (rows.append(dict(rows[1], sequence=3)), _rechain(rows))
        ),
        Finding.DOUBLE_TERMINAL,
    ),
    (
        "start_with_outcome",
        lambda d: _rewrite(d, _set("outcome", "timeout", row=0)),
        Finding.STATE_OUTCOME,
    ),
    (
        "duplicate_key",
        lambda d: d.replace(b'{"artifact_key"', b'{"artifact_key":"x","artifact_key"', 1),
        Finding.MALFORMED_ROW,
    ),
]


@pytest.mark.parametrize(
    ("name", "corrupt", "finding"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS]
)
def test_corruption_is_detected(journal: Journal, name: str, corrupt, finding: Finding) -> None:
    data = corrupt(_segment(journal))
    with pytest.raises(JournalUnverified) as e:
        verify_segment_bytes(data, "2026-11-30", Index())
    assert e.value.finding is finding


def test_intact_segment_verifies(journal: Journal) -> None:
    index = Index()
    seq, _ = verify_segment_bytes(_segment(journal), "2026-11-30", index)
    assert seq == 2 and index.by_artifact[AKEY[:32]].outcome is Outcome.TIMEOUT


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
        [
            ("attempt_started", "attempt_started", None),
            ("finalized", "shadow_selected", "2026-11-30T10:00:01.250000Z"),
        ],
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
        digest = hashlib.sha256(
            json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8"
            )
        ).hexdigest()
        row["row_digest"] = prev = digest
        rows.append(json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
    path = root.outcomes / "2026-11-30.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, ("\n".join(rows) + "\n").encode())
    os.close(fd)
    index = Journal(root).load()
    assert index.by_artifact["1" * 32].outcome is Outcome.SHADOW_SELECTED


# ------------------------------------------------------------- every finding

MORE_CORRUPTIONS = [
    (
        "missing_field",
        lambda d: _rewrite(d, lambda rows: (rows[0].pop("surface"), _rechain(rows))),
        Finding.FIELD_SET,
    ),
    (
        "impossible_date",
        lambda d: _rewrite(d, _set("started_at_utc", "2026-02-30T23:59:59.500000Z")),
        Finding.FIELD_FORMAT,
    ),
    (
        "bad_finalized_ts",
        lambda d: _rewrite(d, _set("finalized_at_utc", "2026-12-01T00:00:01.5Z", row=1)),
        Finding.FIELD_FORMAT,
    ),
    (
        "terminal_without_finalized",
        lambda d: _rewrite(d, _set("finalized_at_utc", None, row=1)),
        Finding.FIELD_FORMAT,
    ),
    (
        "start_with_finalized",
        lambda d: _rewrite(d, _set("finalized_at_utc", "2026-12-01T00:00:01.500000Z")),
        Finding.STATE_OUTCOME,
    ),
    (
        "unknown_state",
        lambda d: _rewrite(d, _set("state", "repaired", row=1)),
        Finding.STATE_OUTCOME,
    ),
    (
        "shadow_ends_selected",
        lambda d: _rewrite(d, _set("outcome", "selected", row=1)),
        Finding.STATE_OUTCOME,
    ),
    (
        "sequence_from_two",
        lambda d: _rewrite(
            d, lambda rows: (rows[0].update(sequence=2), rows[1].update(sequence=3), _rechain(rows))
        ),
        Finding.SEQUENCE_GAP,
    ),
    ("sequence_bool", lambda d: _rewrite(d, _set("sequence", True)), Finding.FIELD_FORMAT),
    (
        "first_predecessor_not_zero",
        lambda d: _rewrite(d, _set("previous_row_digest", "1" * 64, rechain=False)),
        Finding.CHAIN_BROKEN,
    ),
    (
        "upper_hex_attempt",
        lambda d: _rewrite(
            d, lambda rows: ([r.update(attempt_id="B" * 32) for r in rows], _rechain(rows))
        ),
        Finding.FIELD_FORMAT,
    ),
    (
        "upper_hex_digest",
        lambda d: d.replace(
            d[d.index(b'"row_digest":"') + 14 : d.index(b'"row_digest":"') + 78],
            d[d.index(b'"row_digest":"') + 14 : d.index(b'"row_digest":"') + 78].upper(),
            1,
        ),
        Finding.FIELD_FORMAT,
    ),
    (
        "short_artifact_key",
        lambda d: _rewrite(
            d, lambda rows: ([r.update(artifact_key="a" * 63) for r in rows], _rechain(rows))
        ),
        Finding.FIELD_FORMAT,
    ),
    (
        "unknown_surface",
        lambda d: _rewrite(
            d, lambda rows: ([r.update(surface="daily.v2") for r in rows], _rechain(rows))
        ),
        Finding.FIELD_FORMAT,
    ),
    (
        "wrong_schema",
        lambda d: _rewrite(
            d,
            lambda rows: (
                [r.update(schema_version="korean-expression-journal-v2") for r in rows],
                _rechain(rows),
            ),
        ),
        Finding.FIELD_FORMAT,
    ),
    (
        "start_in_wrong_segment",
        lambda d: _rewrite(
            d,
            lambda rows: (
                [r.update(started_at_utc="2026-12-01T00:00:00.000000Z") for r in rows],
                _rechain(rows),
            ),
        ),
        Finding.WRONG_SEGMENT,
    ),
    (
        "duplicate_start",
        lambda d: _rewrite(
            d,
            lambda rows: (
                rows.insert(1, dict(rows[0])),
                [r.update(sequence=i) for i, r in enumerate(rows, 1)],
                _rechain(rows),
            ),
        ),
        Finding.DUPLICATE_START,
    ),
    (
        "terminal_other_mode",
        lambda d: _rewrite(d, _set("mode", "enabled", row=1)),
        Finding.TERMINAL_MISMATCH,
    ),
    ("crlf", lambda d: d.replace(b"\n", b"\r\n"), Finding.NON_CANONICAL_ROW),
    ("bom", lambda d: b"\xef\xbb\xbf" + d, Finding.MALFORMED_ROW),
    ("nan", lambda d: d.replace(b'"sequence":1', b'"sequence":NaN', 1), Finding.MALFORMED_ROW),
    (
        "escaped_ascii",
        lambda d: d.replace(b'"daily.v1"', b'"daily\\u002ev1"', 1),
        Finding.NON_CANONICAL_ROW,
    ),
    ("blank_line", lambda d: d + b"\n", Finding.MALFORMED_ROW),
    ("array_row", lambda d: b"[]\n" + d, Finding.MALFORMED_ROW),
    ("invalid_utf8", lambda d: d.replace(b'"daily.v1"', b'"daily\xff1"', 1), Finding.MALFORMED_ROW),
    # Past CPython's 4,300-digit int limit json.loads raises a bare ValueError,
    # and deep nesting a RecursionError: both once escaped load() and crashed
    # the worker's start-up instead of quarantining.
    (
        "huge_sequence",
        lambda d: d.replace(b'"sequence":1', b'"sequence":1' + b"0" * 5000, 1),
        Finding.MALFORMED_ROW,
    ),
    (
        "deep_nesting",
        lambda d: d.replace(b'"sequence":1', b'"sequence":' + b"[" * 100_000 + b"]" * 100_000, 1),
        Finding.MALFORMED_ROW,
    ),
    # RFC3339 digits are ASCII: \d would have let fullwidth digits through.
    (
        "fullwidth_digits",
        lambda d: _rewrite(
            d, _set("deadline_at_utc", "２０２６-11-30T00:00:04.000000Z", row=0, rechain=True)
        ),
        Finding.FIELD_FORMAT,
    ),
]


@pytest.mark.parametrize(
    ("name", "corrupt", "finding"), MORE_CORRUPTIONS, ids=[c[0] for c in MORE_CORRUPTIONS]
)
def test_more_corruption_is_detected(
    journal: Journal, name: str, corrupt, finding: Finding
) -> None:
    data = corrupt(_segment(journal))
    with pytest.raises(JournalUnverified) as e:
        verify_segment_bytes(data, "2026-11-30", Index())
    assert e.value.finding is finding


def test_hand_built_multi_day_journal_verifies(root: DataRoot) -> None:
    write_segment(
        root, "2026-11-29.jsonl", hand_rows("1" * 64, "2" * 32, "2026-11-29", ["timeout"])
    )
    write_segment(
        root,
        "2026-11-30.jsonl",
        hand_rows("3" * 64, "4" * 32, "2026-11-30", ["selected"], mode="enabled"),
    )
    index = Journal(root).load()
    assert index.by_artifact["1" * 32].outcome is Outcome.TIMEOUT
    assert index.by_artifact["3" * 32].outcome is Outcome.SELECTED


def test_same_artifact_in_two_segments_is_a_duplicate(root: DataRoot) -> None:
    write_segment(
        root, "2026-11-29.jsonl", hand_rows("1" * 64, "2" * 32, "2026-11-29", ["timeout"])
    )
    write_segment(root, "2026-11-30.jsonl", hand_rows("1" * 64, "4" * 32, "2026-11-30", []))
    with pytest.raises(JournalUnverified) as e:
        Journal(root).load()
    assert (e.value.finding, e.value.segment) == (Finding.DUPLICATE_ARTIFACT, "2026-11-30")


@pytest.mark.parametrize(
    "name", ["2026-13-01.jsonl", "2026-11-30.jsonl.bak", "2026-11-30.JSONL", ".2026-11-30.jsonl"]
)
def test_unexpected_names_in_outcomes_are_refused(root: DataRoot, name: str) -> None:
    write_segment(root, name, b"")
    with pytest.raises(JournalUnverified) as e:
        Journal(root).load()
    assert e.value.finding is Finding.UNEXPECTED_FILE


@pytest.mark.parametrize("kind", ["mode", "fifo", "directory", "symlinked_outcomes"])
def test_unsafe_segment_files_are_refused(root: DataRoot, tmp_path: Path, kind: str) -> None:
    if kind == "mode":
        write_segment(
            root, "2026-11-30.jsonl", hand_rows("1" * 64, "2" * 32, "2026-11-30", []), mode=0o640
        )
    elif kind == "fifo":
        os.mkfifo(root.outcomes / "2026-11-30.jsonl", 0o600)
    elif kind == "directory":
        os.mkdir(root.outcomes / "2026-11-30.jsonl", 0o700)
    else:
        os.rename(root.outcomes, tmp_path / "real-outcomes")
        os.symlink(tmp_path / "real-outcomes", root.outcomes)
    with pytest.raises(JournalUnverified) as e:
        Journal(root).load()
    assert e.value.finding is Finding.UNSAFE_FILE


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_segment_of_another_owner_is_refused(root: DataRoot) -> None:
    p = write_segment(root, "2026-11-30.jsonl", hand_rows("1" * 64, "2" * 32, "2026-11-30", []))
    os.chown(p, 65534, -1)
    with pytest.raises(JournalUnverified) as e:
        Journal(root).load()
    assert e.value.finding is Finding.UNSAFE_FILE


def test_swapped_segment_inode_is_an_append_conflict(journal: Journal) -> None:
    rec = start(journal)
    path = journal._root.outcomes / "2026-11-30.jsonl"
    data = path.read_bytes()
    os.rename(path, journal._root.root / "aside")  # keep the old inode alive
    write_segment(journal._root, "2026-11-30.jsonl", data)  # same bytes, another inode
    with journal.locked(), pytest.raises(JournalUnverified) as e:
        journal.append_terminal(rec, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT, T0)
    assert e.value.finding is Finding.APPEND_CONFLICT
    assert path.read_bytes() == data  # nothing written


def test_swapped_lock_file_fails_closed(journal: Journal) -> None:
    start(journal)
    lock = journal._root.journal_lock
    os.rename(lock, journal._root.root / "old.lock")
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    with pytest.raises(JournalUnverified) as e, journal.locked():
        pass
    assert e.value.finding is Finding.LOCK_UNSAFE


# ------------------------------------------------------------------ retention


def test_retention_window_is_35_completed_days_plus_today() -> None:
    from kexpr.spool.journal import RETENTION_DAYS, retention_cutoff

    today = dt.date(2026, 11, 30)
    assert RETENTION_DAYS == 35
    assert retention_cutoff(today) == dt.date(2026, 10, 26)  # 35 completed days before today


def test_expired_segments_are_removed_whole_with_a_directory_fsync(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kexpr.spool import fsio

    write_segment(
        root, "2026-10-25.jsonl", hand_rows("1" * 64, "2" * 32, "2026-10-25", ["timeout"])
    )
    write_segment(
        root, "2026-10-26.jsonl", hand_rows("3" * 64, "4" * 32, "2026-10-26", ["timeout"])
    )
    write_segment(root, "2026-11-30.jsonl", hand_rows("5" * 64, "6" * 32, "2026-11-30", []))
    j = Journal(root)
    j.load()
    synced: list[int] = []
    real = fsio._Dir.fsync
    monkeypatch.setattr(
        fsio._Dir, "fsync", lambda self: (synced.append(self.st.st_ino), real(self))[1]
    )
    with j.locked():
        assert j.expired(dt.date(2026, 11, 30)) == ["2026-10-25"]
        removed, kept = j.remove_expired(dt.date(2026, 11, 30))
    assert (removed, kept) == (["2026-10-25"], [])
    assert sorted(os.listdir(root.outcomes)) == ["2026-10-26.jsonl", "2026-11-30.jsonl"]
    assert os.stat(root.outcomes).st_ino in synced
    assert not j.index.knows("1" * 64) and j.index.knows("3" * 64)
    Journal(root).load()  # what remains still verifies


def test_a_segment_with_an_open_attempt_is_kept(root: DataRoot) -> None:
    write_segment(root, "2026-10-01.jsonl", hand_rows("1" * 64, "2" * 32, "2026-10-01", []))
    j = Journal(root)
    j.load()
    with j.locked():
        assert j.remove_expired(dt.date(2026, 11, 30)) == ([], ["2026-10-01"])
    assert j.prune(dt.date(2026, 11, 30), apply=False) == ([], ["2026-10-01"])
    assert (root.outcomes / "2026-10-01.jsonl").exists()


# ---------------------------------------------------- torn tail: quarantine


def _torn(root: DataRoot) -> bytes:
    data = hand_rows("1" * 64, "2" * 32, "2026-11-30", ["timeout"]) + hand_rows(
        "3" * 64, "4" * 32, "2026-11-30", []
    ).replace(b'"sequence":1', b'"sequence":3', 1)
    # Re-chain the second attempt's start row after the first attempt's rows.
    rows = [json.loads(x) for x in data.split(b"\n")[:-1]]
    _rechain(rows)
    good = b"".join((canonical_json(r) + "\n").encode() for r in rows)
    torn_start = canonical_json({**rows[0], "artifact_key": "7" * 64, "sequence": 4})[:120]
    return good + torn_start.encode()


def test_torn_tail_is_quarantined_unchanged_and_still_dedupes(root: DataRoot) -> None:
    data = _torn(root)
    write_segment(root, "2026-11-30.jsonl", data)
    with pytest.raises(JournalUnverified) as e:
        Journal(root).load()
    assert e.value.finding is Finding.TORN_TAIL
    j = Journal(root)
    assert j.quarantine_torn("2026-11-30", apply=False) == "2026-11-30.1.jsonl"
    assert (root.outcomes / "2026-11-30.jsonl").read_bytes() == data  # dry run: untouched
    assert j.quarantine_torn("2026-11-30", apply=True) == "2026-11-30.1.jsonl"
    assert not (root.outcomes / "2026-11-30.jsonl").exists()
    assert (root.quarantine / "2026-11-30.1.jsonl").read_bytes() == data  # not one byte rewritten
    index = Journal(root).load()
    # Verified lines and the torn line's artifact are sealed: attempted, never again.
    assert set(index.sealed) == {"1" * 32, "3" * 32, "7" * 32}  # by identity (dedupe_key)
    assert index.sealed_open == 1 and index.by_artifact == {}
    j2 = Journal(root)
    j2.load()
    with pytest.raises(IllegalTransition):
        start(j2, akey="3" * 64, aid="9" * 32)
    # A fresh segment for the same day starts again at sequence 1 and verifies.
    start(j2, akey="8" * 64, aid="a" * 32, at=dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC))
    assert Journal(root).load().by_artifact["8" * 32].segment == "2026-11-30"


def test_quarantine_refuses_anything_but_a_torn_tail(root: DataRoot) -> None:
    j = Journal(root)
    write_segment(
        root, "2026-11-29.jsonl", hand_rows("1" * 64, "2" * 32, "2026-11-29", ["timeout"])
    )
    with pytest.raises(JournalUnverified) as e:
        j.quarantine_torn("2026-11-29", apply=True)
    assert e.value.finding is Finding.TORN_TAIL  # intact: nothing to quarantine
    bad = hand_rows("3" * 64, "4" * 32, "2026-11-30", ["timeout"]).replace(
        b'"sequence":2', b'"sequence":5'
    )
    write_segment(root, "2026-11-30.jsonl", bad + b'{"artifact_key":"')
    with pytest.raises(JournalUnverified) as e:
        j.quarantine_torn("2026-11-30", apply=True)
    assert e.value.finding is Finding.SEQUENCE_GAP  # torn *and* tampered: investigate
    assert (root.outcomes / "2026-11-30.jsonl").exists() and os.listdir(root.quarantine) == []
    with pytest.raises(JournalUnverified) as e:
        j.quarantine_torn("2026-11-28", apply=True)
    assert e.value.finding is Finding.UNEXPECTED_FILE


def test_tampered_quarantine_file_fails_verification(root: DataRoot) -> None:
    write_segment(root, "2026-11-30.jsonl", _torn(root))
    Journal(root).quarantine_torn("2026-11-30", apply=True)
    q = root.quarantine / "2026-11-30.1.jsonl"
    data = q.read_bytes()
    os.chmod(q, 0o600)
    q.write_bytes(data.replace(b'"timeout"', b'"selected"', 1))
    with pytest.raises(JournalUnverified):
        Journal(root).load()


def test_audit_collects_a_finding_per_file(root: DataRoot) -> None:
    from kexpr.spool.journal import audit_journal

    write_segment(
        root, "2026-11-28.jsonl", hand_rows("1" * 64, "2" * 32, "2026-11-28", ["timeout"])[:-1]
    )
    write_segment(
        root, "2026-11-29.jsonl", hand_rows("3" * 64, "4" * 32, "2026-11-29", ["timeout"])
    )
    write_segment(
        root, "2026-11-30.jsonl", hand_rows("5" * 64, "6" * 32, "2026-11-30", ["selected"])
    )  # shadow attempt "selected"
    audit = audit_journal(root)
    assert [(f.finding, f.where) for f in audit.findings] == [
        ("torn_tail", "outcomes/2026-11-28.jsonl"),
        ("state_outcome", "outcomes/2026-11-30.jsonl"),
    ]
    assert set(audit.index.by_artifact) == {"3" * 32}  # keyed by identity
    assert not root.journal_lock.exists()  # an audit never creates the lock file


# -- group commit (append_terminals) --------------------------------------------


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def _starts(
    j: Journal, n: int, at: dt.datetime = T0, mode: SpoolMode = SpoolMode.SHADOW
) -> list[AttemptRecord]:
    return [start(j, akey=f"{i + 1:032x}", aid=f"{i + 1:032x}", mode=mode, at=at) for i in range(n)]


def test_group_of_terminal_rows_is_one_write_and_one_fsync(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    recs = _starts(journal, 5)
    fsyncs = _count_fsyncs(monkeypatch)
    with journal.locked():
        done = journal.append_terminals(
            [(r, Phase.AWAITING_REPORT, Event.REPORT, Outcome.SHADOW_SELECTED) for r in recs], T0
        )
    assert len(fsyncs) == 1
    assert [d.attempt_id for d in done] == [r.attempt_id for r in recs]
    assert all(d.outcome is Outcome.SHADOW_SELECTED for d in done)
    # The rows chain on from the start rows exactly as single appends would,
    # and a fresh load verifies them and rebuilds the same index.
    rows = [json.loads(line) for line in segment_lines(journal, "2026-11-30")]
    assert [r["sequence"] for r in rows] == list(range(1, 11))
    assert [r["state"] for r in rows[5:]] == ["finalized"] * 5
    fresh = Journal(journal._root).load()
    assert fresh.by_attempt == journal.index.by_attempt
    assert not list(fresh.open_attempts())


def test_group_commit_writes_the_same_bytes_as_single_appends(tmp_path: Path) -> None:
    def build(name: str, grouped: bool) -> bytes:
        root = DataRoot(tmp_path / name)
        root.ensure()
        j = Journal(root)
        j.load()
        recs = _starts(j, 4)
        items = [(r, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT) for r in recs]
        with j.locked():
            if grouped:
                j.append_terminals(items, T0)
            else:
                for item in items:
                    j.append_terminal(*item, T0)
        return (root.outcomes / "2026-11-30.jsonl").read_bytes()

    assert build("grouped", True) == build("single", False)


def test_group_spanning_segments_syncs_each_segment_once(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    day1 = _starts(journal, 2)
    day2 = [
        start(journal, akey=f"{i + 10:032x}", aid=f"{i + 10:032x}", at=T0 + dt.timedelta(seconds=1))
        for i in range(2)
    ]
    fsyncs = _count_fsyncs(monkeypatch)
    with journal.locked():
        journal.append_terminals(
            [(r, Phase.OPEN, Event.EXPIRE, Outcome.CLAIM_EXPIRED_CANONICAL) for r in day2 + day1],
            T0,
        )
    assert len(fsyncs) == 2
    for seg in ("2026-11-30", "2026-12-01"):
        states = [json.loads(line)["state"] for line in segment_lines(journal, seg)]
        assert states == ["attempt_started"] * 2 + ["finalized"] * 2
    assert Journal(journal._root).load().by_attempt == journal.index.by_attempt


@pytest.mark.parametrize("bad", ["unknown", "terminal", "twice", "illegal"])
def test_one_illegal_item_rejects_the_whole_group_before_any_io(journal: Journal, bad: str) -> None:
    recs = _starts(journal, 3)
    items = [(r, Phase.AWAITING_REPORT, Event.REPORT, Outcome.SHADOW_SELECTED) for r in recs]
    if bad == "unknown":
        ghost = dataclasses.replace(recs[0], attempt_id="f" * 32)
        items.append((ghost, Phase.AWAITING_REPORT, Event.REPORT, Outcome.SHADOW_SELECTED))
    elif bad == "terminal":
        with journal.locked():
            journal.append_terminal(
                recs[2], Phase.AWAITING_REPORT, Event.REPORT, Outcome.VALIDATION_REJECTED, T0
            )
    elif bad == "twice":
        items.append(items[0])
    else:  # `selected` is an enabled-mode outcome; these attempts are shadow
        items[1] = (recs[1], Phase.AWAITING_REPORT, Event.REPORT, Outcome.SELECTED)
    before = (journal._root.outcomes / "2026-11-30.jsonl").read_bytes()
    index_before = dict(journal.index.by_attempt)
    with journal.locked(), pytest.raises(IllegalTransition):
        journal.append_terminals(items, T0)
    assert (journal._root.outcomes / "2026-11-30.jsonl").read_bytes() == before
    assert journal.index.by_attempt == index_before


def test_group_refuses_a_segment_changed_under_it(journal: Journal) -> None:
    recs = _starts(journal, 2)
    with open(journal._root.outcomes / "2026-11-30.jsonl", "ab") as f:
        f.write(b"\n")
    with journal.locked(), pytest.raises(JournalUnverified) as e:
        journal.append_terminals(
            [(r, Phase.OPEN, Event.CALL_FAILED, Outcome.TIMEOUT) for r in recs], T0
        )
    assert e.value.finding is Finding.APPEND_CONFLICT
    assert all(r.outcome is None for r in journal.index.by_attempt.values())

"""Redaction proofs over the whole path (plan acceptance gate 3).

Property: for random customer material put into canonical bodies and host inputs,
none of it — nor any substring of ≥ 3 characters of it that is not also the
product's own static text (``leaks.static_text``) — appears in anything the product
writes, sends or logs: request files, the capsule on the wire (the whole HTTPS
request body, and its headers), the provider's reply, response files, reports,
journal rows, any other file under the data root, telemetry events, and log lines
(this process's logging at DEBUG, and the supervisor's and worker's stdout/stderr).

The path is the real one: the shim in this process, ``kexpr supervise`` and its
worker as real processes with the key, a loopback HTTPS fake of the API reached only
through a real CONNECT proxy, the journal, the telemetry sink. One worker serves the
whole module (module-scoped fixture); Hypothesis runs many examples through it.

What the shim writes to and reads from the spool is observed by wrapping the
coordinator module's ``publish`` / ``read_private`` (test-side only; every byte the
shim exchanges with the worker passes through them), because the worker and the
shim remove those files within milliseconds.

Besides the substring scan, each artifact is also checked *positively* against its
whitelist (the capsule holds only manifest IDs, tokens, limits and the artifact key;
the wire request is the static instruction plus that capsule; headers never change;
journal rows and telemetry hold only enums, hex and timestamps): two independent
nets.

Each surface is one row of ``SURFACES``; a row whose coordinator method does not
exist yet is skipped with that reason. The fit table (design §6.1, §6.2) styles one
message, the weekly report whose goal range is missing: the weekly row draws it most of
the time (a real request, call and answer) and the other branches now and then; a daily
summary, a dual card and a physique card have nothing to style, and each of their
examples proves the strongest redaction result there is: the shim writes nothing (no
request, no report, no journal row), reads nothing and sends nothing.
"""

from __future__ import annotations

import json
import logging
import random
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from adversarial.hypothesis_profiles import REDACTION, STATS
from adversarial.strategies import composition_of
from fakeapi import FakeOpenAI, FakeReply, capsule_of, chat_completion, error_reply
from hypothesis import given
from hypothesis import strategies as st
from kit.poll import until
from kit.supervisor import start_supervisor, stop_supervisor

import gateway_shim._conclusion as shim_conclusion
import gateway_shim._setup as shim_setup
from gateway_shim import (
    DailyFacts,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    WeeklyInterpretation,
    WeeklyJudgment,
    exact_block,
    format_daily,
    format_weekly,
)
from gateway_shim.surfaces.daily import FACT_KEYS, MACROS_MISSING, MISSING_MARKER
from kexpr.spool.contract import CONTRACT_VERSION, Capsule, manifest_for, slot_policy
from kexpr.spool.contract.answers import answer_json
from kexpr.spool.contract.fit import compositions
from kexpr.spool.journal import JOURNAL_SCHEMA, ROW_FIELDS, Journal, Outcome
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import parse_report, parse_request, parse_response
from kexpr.spool.outcomes import CANDIDATE_OUTCOMES
from kexpr.worker.instruction import SYSTEM_INSTRUCTION
from redaction import material
from redaction.leaks import HEX32, find_leak, minimal_pieces, scan_text_of, static_text

pytestmark = pytest.mark.e2e

API_KEY = "sk-test-kexpr-redaction-0000"
TELEMETRY_FIELDS = {"event", "contract_version", "surface", "mode", "outcome", "latency_bucket"}
WIRE_PARAMETERS = {
    "model": "gpt-4.1-mini",
    "n": 1,
    "temperature": 0.7,
    "max_tokens": 384,
    "response_format": {"type": "json_object"},
    "store": False,
}
WIRE_KEYS = {"messages", *WIRE_PARAMETERS}


# ------------------------------------------------------------------------------ world


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "kexpr_fields", None)
        if isinstance(fields, dict):
            # A kexpr record (spool.log) is scanned as what it is made of, each part
            # apart: its formatted text joins enum words with spaces, and a random
            # value may hold such a join ("invalid_response surface" has "nse ").
            parts = [record.levelname, record.name, str(getattr(record, "kexpr_event", ""))]
            parts += [str(p) for kv in fields.items() for p in kv]
            self.lines.append("\0".join(parts))
            return
        self.lines.append(self.format(record))


@dataclass
class World:
    tmp: Path
    root: Path
    fake: FakeOpenAI
    supervisor: subprocess.Popen[bytes]
    logs: _Records
    coordinators: dict[Mode, KoreanExpressionCoordinator]
    telemetry: list[dict[str, str]] = field(default_factory=list)
    written: list[tuple[str, bytes]] = field(default_factory=list)  # shim → spool
    read: list[bytes] = field(default_factory=list)  # spool → shim
    replies: list[str] = field(default_factory=list)  # provider reply contents
    # The product's static text (leaks.static_text) plus what the probe showed of the
    # text the processes emit for input that holds no customer material: the keys
    # and states of the status files, the constant part of library DEBUG lines
    # (watchdog's inotify event reprs), product IDs and paths masked.
    static: str = ""
    probe_headers: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def process_output(self) -> str:
        return "".join(
            (self.tmp / name).read_text("utf-8", "replace") for name in ("stdout.txt", "stderr.txt")
        )


def _start_supervisor(tmp: Path, root: Path, fake: FakeOpenAI) -> subprocess.Popen[bytes]:
    """``kexpr supervise`` as an operator runs it (tests/conftest.py), with its stdout
    and stderr — and the worker's, which it inherits — captured to files."""
    DataRoot(root).ensure()
    # Hundreds of fresh artifacts in minutes: past the default spend bound,
    # which this proof is not about (tests/worker_tests/test_spend.py is).
    uncapped = ("--max-calls-per-hour", "100000", "--max-calls-per-day", "100000")
    with open(tmp / "stdout.txt", "wb") as out, open(tmp / "stderr.txt", "wb") as err:
        return start_supervisor(root, fake=fake, key=API_KEY, args=uncapped, stdout=out, stderr=err)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("redaction")
    (tmp / "data").mkdir(mode=0o700)
    root = tmp / "data" / "korean-expression-v1"
    logs = _Records()
    root_logger = logging.getLogger()
    old_level = root_logger.level
    root_logger.addHandler(logs)
    root_logger.setLevel(logging.DEBUG)
    with FakeOpenAI(tmp / "fake") as fake, pytest.MonkeyPatch.context() as mp:
        supervisor = _start_supervisor(tmp, root, fake)
        world = World(
            tmp=tmp, root=root, fake=fake, supervisor=supervisor, logs=logs, coordinators={}
        )

        original_publish = shim_setup.publish
        original_read = shim_conclusion.read_private

        def publish(tmp_dir: Path, dest: Path, data: bytes, *args: Any, **kwargs: Any) -> Any:
            with world.lock:
                world.written.append((Path(dest).parent.name, bytes(data)))
            return original_publish(tmp_dir, dest, data, *args, **kwargs)

        def read_private(path: Path, *args: Any, **kwargs: Any) -> bytes:
            data = original_read(path, *args, **kwargs)
            with world.lock:
                world.read.append(bytes(data))
            return data

        # Every file the shim writes (requests, its own and the host's reports) and
        # every answer it reads.
        mp.setattr(shim_setup, "publish", publish)
        mp.setattr(shim_conclusion, "publish", publish)
        mp.setattr(shim_conclusion, "read_private", read_private)

        def sink(event: Any) -> None:
            with world.lock:
                world.telemetry.append(dict(event))

        for mode in (Mode.ENABLED, Mode.SHADOW):
            config = KoreanExpressionConfig.from_block(
                exact_block(mode, daily=True, weekly=True, adaptive_operator=True)
            )
            assert config.valid
            world.coordinators[mode] = KoreanExpressionCoordinator(config, root, telemetry=sink)
        try:
            _probe(world)
            yield world
        finally:
            for coordinator in world.coordinators.values():
                coordinator.close()
            stop_supervisor(supervisor)
            root_logger.removeHandler(logs)
            root_logger.setLevel(old_level)
    # Every run leaves a journal that verifies (hash chain, schema, transitions).
    Journal(DataRoot(root)).load()
    assert fake.errors == []


PROBE_VALUES = ("프로브 체크인 요약", "프로브값", "프로브 행동")
# A host-shaped weekly report whose goal range is missing (the one styled message),
# whose values are probe text.
PROBE_BODY = format_weekly(
    recent=PROBE_VALUES[0],
    prior=PROBE_VALUES[1],
    change=PROBE_VALUES[1],
    rate=PROBE_VALUES[1],
    goal_range=PROBE_VALUES[1],
    interpretation=WeeklyInterpretation.GOAL_MISSING,
    judgment=WeeklyJudgment.RECORDS,
    actions=[PROBE_VALUES[2]],
)


def _probe(world: World) -> None:
    """One presentation with fixed, non-customer text: the wire's invariant parts
    (headers) that every later request must repeat exactly, and the constant text of
    the libraries' DEBUG log lines."""
    world.fake.behaviour = _reply(world, "valid", random.Random(0))
    before = Marks.now(world)
    candidate = world.coordinators[Mode.SHADOW].present_weekly(
        PROBE_BODY,
        explicit_fields=("goal_range", "actions"),
        schedule_key="probe",
        kind="weekly_report",
        kst_day="2025-11-30",
    )
    assert candidate.outcome is Outcome.SHADOW_SELECTED, candidate.outcome
    assert candidate.attempt_id is not None
    _wait_terminal(world.root, candidate.attempt_id)
    (request,) = world.fake.requests
    world.probe_headers = {k: v for k, v in request.headers.items() if k != "content-length"}
    ids = _product_ids(world, before)
    learned = [_mask(scan_text_of(blob), world, ids) for _, blob in _artifacts(world, before)]
    assert world.logs.lines, "DEBUG logging was captured"
    world.static = static_text(learned)
    for value in PROBE_VALUES:  # the probe's own "customer" text did not leak either
        assert find_leak(value, "\0".join(learned), static_text()) is None, value


# ------------------------------------------------------------------ provider replies

# "valid": a composition the contract accepts (the fit table's, design §6.1);
# "grammatical": any composition of the grammar, which the table mostly rejects.
REPLIES = (
    "valid", "valid", "valid", "grammatical", "invalid_style", "malformed", "http_500", "length",
)  # fmt: skip


def _reply(world: World, kind: str, rng: random.Random) -> Callable[[Any], FakeReply]:
    def behaviour(request: Any) -> FakeReply:
        capsule = capsule_of(request)
        if capsule is None or kind == "http_500":
            return error_reply(500)
        slots = {s["slot_id"]: s for s in capsule["slots"]}

        def generated(slot_id: str) -> str:
            s = slots[slot_id]
            if kind == "invalid_style":
                return "오늘은 " + " ".join(f"{t}." for t in s["required_placeholder_tokens"])
            ids = [*s["allowed_predicate_ids"], *s["allowed_action_ids"]]
            if kind == "grammatical":
                return composition_of(rng, slot_policy(slot_id, ids))
            return rng.choice(compositions(slot_id, ids))

        content = answer_json(capsule, generated, compact=False)
        if kind == "malformed":
            content = content[: len(content) // 2]
        with world.lock:
            world.replies.append(content)
        return FakeReply(
            body=chat_completion(content, finish_reason="length" if kind == "length" else "stop")
        )

    return behaviour


# ------------------------------------------------------------------- surface rows


@dataclass(frozen=True)
class Presentation:
    """One artifact: what the host passes, and the customer values inside it."""

    present: Callable[[KoreanExpressionCoordinator], Any]
    values: tuple[str, ...]
    # False: no slot of the body is asked (design §6.2: a daily summary, a dual or a
    # physique card, a weekly report but the goal-missing one): `nothing_to_style`,
    # and the shim writes, reads and sends nothing.
    styleable: bool = True


@dataclass(frozen=True)
class SurfaceRow:
    surface: str
    method: str  # the coordinator method this row needs
    draw: Callable[[random.Random, str], Presentation]

    def available(self) -> bool:
        return hasattr(KoreanExpressionCoordinator, self.method)


def _line(rng: random.Random, parts: int = 1) -> str:
    """One line of customer text that no grammar mistakes for a bullet."""
    text = material.mixed(rng, parts)
    return text.removeprefix("- ")


def _daily(rng: random.Random, nonce: str) -> Presentation:
    # A host-shaped daily body (docs/host-formats.md): the seven rendered values
    # and the water amount are customer text; title, labels, status and actions
    # are the host's fixed strings.
    missing = {key: MACROS_MISSING if key == "macros" else MISSING_MARKER for key in FACT_KEYS}
    values = {
        key: missing[key] if rng.random() < 0.15 else material.mixed(rng, rng.randint(1, 2))
        for key in FACT_KEYS
    }
    water = material.any_value(rng) if rng.random() < 0.7 else None
    event_id = f"{material.identifier(rng)}:{material.identifier(rng)}:{nonce}"
    body = format_daily(**values, water=water)
    complete = not any(v.endswith(MISSING_MARKER) for v in values.values())

    def present(coordinator: KoreanExpressionCoordinator) -> Any:
        return coordinator.present_daily(
            body, facts=DailyFacts(complete=complete), finalized_event_id=event_id
        )

    customer = [v for k, v in values.items() if v != missing[k]]
    if water is not None and complete:
        customer.append(water)
    # The fit table leaves no word for the daily status (design §6.2).
    return Presentation(present, (*customer, event_id), styleable=False)


def _weekly(rng: random.Random, nonce: str) -> Presentation:
    from gateway_shim.surfaces import weekly

    # A host-shaped weekly report (docs/host-formats.md): the fact values and the
    # action lines are customer text; the typed paragraphs are the host's.
    keys = ("recent", "prior", "change", "goal_range")
    values = {key: material.any_value(rng) for key in keys}
    rate = material.any_value(rng) if rng.random() < 0.5 else None
    actions = [_line(rng, rng.randint(1, 2)) for _ in range(rng.randint(1, 3))]
    # The goal-missing branch (I2) is the one styled message: drawn most of the
    # time, so most examples make a real request and call; the others are locked.
    goal_missing = rng.random() < 0.75
    others = [
        i for i in weekly.WeeklyInterpretation if i is not weekly.WeeklyInterpretation.GOAL_MISSING
    ]
    interpretation = (
        weekly.WeeklyInterpretation.GOAL_MISSING if goal_missing else rng.choice(others)
    )
    body = weekly.format_weekly(
        **values,
        rate=rate,
        interpretation=interpretation,
        judgment=rng.choice(list(weekly.WeeklyJudgment)),
        actions=actions,
    )
    fields = ("average_weight_kg", "prior_average_weight_kg", "goal_range", "actions")
    schedule_key = f"{material.identifier(rng)}:{nonce}"
    kind, kst_day = f"weekly_report:{material.identifier(rng)}", material.date(rng)

    def present(coordinator: KoreanExpressionCoordinator) -> Any:
        return coordinator.present_weekly(
            body, explicit_fields=fields, schedule_key=schedule_key, kind=kind, kst_day=kst_day
        )

    customer = (*values.values(), *(() if rate is None else (rate,)), *actions)
    return Presentation(present, (*customer, schedule_key, kind, kst_day), styleable=goal_missing)


def _card(rng: random.Random, body: str) -> tuple[dict[str, Any], dict[str, Any], tuple[str, ...]]:
    """The host's real payload around ``body``, the host's keyword arguments, and
    every customer-looking or identifying value in them."""
    from gateway_shim.surfaces.card import PROGRESS_LINES, card_payload, expected_buttons

    state = rng.choice((*PROGRESS_LINES, "delivery_pending"))
    schedule_confirm = rng.random() < 0.5
    n = len(expected_buttons(state, schedule_confirm=schedule_confirm))
    sessions = [f"{rng.getrandbits(96):024x}" for _ in range(n + 1)]
    y, m, d = rng.randint(2024, 2027), rng.randint(1, 12), rng.randint(1, 28)
    fields = {
        "customer_key": material.identifier(rng),
        "customer_label": material.korean_name(rng),
        "kst_day": f"{y}-{m:02d}-{d:02d}",
        "proposal_digest": f"{rng.getrandbits(256):064x}",
    }
    payload = card_payload(
        body=body, revision=rng.randint(1, 10**6), state=state, sessions=sessions[:n],
        schedule_confirm=schedule_confirm, **fields,
    )  # fmt: skip
    callback = f"an1:{sessions[n]}:{rng.choice(('create', 'hold', 'approve', 'release'))}"
    pins = (f"owner={material.identifier(rng)}", f"epoch={material.identifier(rng)}")
    kwargs = {"callback_data": callback, "authority_pins": pins}
    values = (*fields.values(), *sessions, callback, *pins)
    return payload, kwargs, values


def _dual(rng: random.Random, nonce: str) -> Presentation:
    from gateway_shim.surfaces import dual

    reasons = (
        "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다.",
        "최신 확정 기록을 기준으로 다시 계산해야 합니다.",
    )
    goal = _line(rng)
    head = [f"{material.korean_name(rng)} · {material.date(rng)}"]
    head += [_line(rng) for _ in range(rng.randint(0, 3))]
    recommendations = [_line(rng, rng.randint(1, 2)) for _ in range(rng.randint(1, 3))]
    details = [_line(rng) for _ in range(rng.randint(0, 2))]
    lines = tuple(rng.sample(reasons, rng.choice((0, 1, 2))))
    body = dual.format_dual_body(
        goal=goal, head=tuple(head), decision="순응도 근거 충돌로 조정 보류",
        recommendations=tuple(recommendations),
        reasons=lines,
        details="\n".join(details) if details else None,
    )  # fmt: skip
    payload, kwargs, ids = _card(rng, body)

    def present(coordinator: KoreanExpressionCoordinator) -> Any:
        return coordinator.present_adaptive(payload, surface=dual.SURFACE, **kwargs)

    # The decision and every review line are locked (the fit table, design §6.2).
    values = (goal, *head, *recommendations, *details, *ids)
    return Presentation(present, values, styleable=False)


def _physique(rng: random.Random, nonce: str) -> Presentation:
    from gateway_shim.surfaces import physique

    private = [_line(rng) for _ in range(rng.randint(0, 3))]
    decision, basis = _line(rng, 2), _line(rng, 2)
    after = [_line(rng) for _ in range(rng.randint(0, 3))]
    lines = [*private, "결정: " + decision, "근거: " + basis, *after]
    separator = "\n\n" if rng.random() < 0.5 else "\n"
    body = "\n".join(lines) + separator + physique.STATUS_LINE
    payload, kwargs, ids = _card(rng, body)

    def present(coordinator: KoreanExpressionCoordinator) -> Any:
        return coordinator.present_adaptive(payload, surface=physique.SURFACE, **kwargs)

    # The review instruction is locked (the fit table, design §6.2).
    return Presentation(present, (*private, decision, basis, *after, *ids), styleable=False)


SURFACES = [
    SurfaceRow("daily.v1", "present_daily", _daily),
    SurfaceRow("weekly.v1", "present_weekly", _weekly),
    SurfaceRow("adaptive.dualcoachtest.card.v1", "present_adaptive", _dual),
    SurfaceRow("adaptive.physique.card.v1", "present_adaptive", _physique),
]


# ------------------------------------------------------------------------- checks


def _journal_rows(root: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for segment in sorted((root / "outcomes").glob("*.jsonl")):
        # Read while the worker appends: a row exists once its LF is written, so a
        # partly written last line is not read yet (it was, in one full run).
        data = segment.read_bytes()
        complete = data[: data.rfind(b"\n") + 1].decode("utf-8")
        rows += [json.loads(line) for line in complete.splitlines() if line]
    return rows


def _wait_terminal(root: Path, attempt_id: str, timeout: float = 10.0) -> None:
    def terminal() -> bool:
        rows = _journal_rows(root)
        return any(r["attempt_id"] == attempt_id and r["state"] == "finalized" for r in rows)

    assert until(terminal, timeout, 0.01), "no terminal journal row for the attempt"


def _check_capsule(capsule: dict[str, Any], artifact_key: str | None) -> None:
    """Whitelist: the capsule is exactly manifest IDs, tokens, limits and the key."""
    parsed = Capsule.from_object(capsule)  # every manifest rule holds
    assert parsed.schema_version == CONTRACT_VERSION
    assert HEX32.fullmatch(parsed.artifact_key) and parsed.artifact_key == artifact_key
    for slot in parsed.slots:
        row = manifest_for(slot.slot_id)
        assert row is not None and row.surface == parsed.surface
        assert slot == slot_policy(
            slot.slot_id, slot.semantic_ids
        )  # limits, tokens: the manifest's


def _check_wire(world: World, request: Any, capsule_file: dict[str, Any]) -> None:
    payload = request.json
    assert isinstance(payload, dict) and set(payload) == WIRE_KEYS
    assert {k: v for k, v in payload.items() if k != "messages"} == WIRE_PARAMETERS  # design §9
    system, user = payload["messages"]
    assert system == {"role": "system", "content": SYSTEM_INSTRUCTION}
    assert set(user) == {"role", "content"} and user["role"] == "user"
    assert json.loads(user["content"]) == capsule_file  # the capsule and nothing else
    headers = {k: v for k, v in request.headers.items() if k != "content-length"}
    assert headers == world.probe_headers


def _check_journal_row(row: dict[str, Any]) -> None:
    assert set(row) == ROW_FIELDS and row["schema_version"] == JOURNAL_SCHEMA
    assert row["state"] in ("attempt_started", "finalized")
    assert row["outcome"] in {o.value for o in Outcome} | {"attempt_started"}
    assert row["mode"] in ("shadow", "enabled") and isinstance(row["sequence"], int)


def _check_status_figures(status: dict[str, Any]) -> None:
    """Whitelist of the status file's numbers that the scan does not read: the
    margin histograms and the last minute are exactly the product's keys (public surfaces, figure names, provider failure words, rolling counter
    names), this version's bucket edges, and non-negative integer counts that add
    up — so no value of a request or an answer can sit in them."""
    from kexpr.ops.status_cli import call_figures
    from kexpr.spool.contract import SURFACES
    from kexpr.spool.outcomes import PROVIDER_FAILURES
    from kexpr.worker.histograms import FIGURES, SURFACE_FIELDS, edges_json
    from kexpr.worker.status import ROLLING

    def count(v: object) -> bool:
        return type(v) is int and v >= 0

    assert status["histogram_edges"] == edges_json()
    recent = status["last_minute"]
    assert set(recent) == set(ROLLING) and all(count(v) for v in recent.values())
    figures = status["calls_by_surface"]
    assert set(figures) == set(SURFACES)
    for record in figures.values():
        assert set(record) == set(SURFACE_FIELDS)
        assert set(record["failures"]) <= {o.value for o in PROVIDER_FAILURES}
        assert all(count(v) for v in record["failures"].values())
        assert count(record["calls"]) and count(record["tokens_absent"])
        for name, edges in FIGURES.items():
            assert len(record[name]) == len(edges) + 1 and all(count(c) for c in record[name])
        assert sum(record["call_seconds"]) == record["calls"]
        assert sum(record["completion_tokens"]) + record["tokens_absent"] == record["calls"]
    # And `kexpr status` / `kexpr promotion-report` accept every record as is.
    assert set(call_figures(status)) == set(SURFACES)


def _check_telemetry(event: dict[str, str]) -> None:
    assert set(event) == TELEMETRY_FIELDS
    assert event["contract_version"] == CONTRACT_VERSION
    assert event["outcome"] in {o.value for o in CANDIDATE_OUTCOMES}


@dataclass
class Marks:
    requests: int
    replies: int
    written: int
    read: int
    telemetry: int
    logs: int
    journal: int

    @classmethod
    def now(cls, world: World) -> Marks:
        with world.lock:
            return cls(
                len(world.fake.requests), len(world.replies), len(world.written), len(world.read),
                len(world.telemetry), len(world.logs.lines), len(_journal_rows(world.root)),
            )  # fmt: skip


# A staging file (``.<final name>[.reserve].<pid>.<12 hex>``): a heartbeat or a
# message being written, which a reader can meet half-written (its JSON numbers and
# timestamps then read as raw text, where a short customer piece such as "2.2" is
# found by chance) or as a reservation's zeros before its text.
_STAGING = re.compile(r"\.[0-9a-z._-]+?(\.reserve)?\.[0-9]+\.[0-9a-f]{12}")


def _settled(path: Path, patience_s: float = 2.0) -> bytes | None:
    """``path``'s bytes, or None once it is gone. A staging file that is not JSON
    yet is read again until it is whole or moved into place (a writer needs
    microseconds); one still not whole after ``patience_s`` is scanned as it is."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if not _STAGING.fullmatch(path.name) or time.monotonic() >= deadline:
            return data
        try:
            json.loads(data.rstrip(b"\0"))
        except ValueError:
            time.sleep(0.01)
            continue
        return data.rstrip(b"\0")


def _artifacts(world: World, before: Marks) -> list[tuple[str, bytes | str]]:
    """Everything the product wrote, sent or logged since ``before``, by kind."""
    with world.lock:
        out: list[tuple[str, bytes | str]] = []
        out += [("wire request", r.body) for r in world.fake.requests[before.requests :]]
        out += [("provider reply", c) for c in world.replies[before.replies :]]
        out += [(f"{kind} file", data) for kind, data in world.written[before.written :]]
        out += [("response file", data) for data in world.read[before.read :]]
        out += [
            ("telemetry", json.dumps(e, ensure_ascii=False))
            for e in world.telemetry[before.telemetry :]
        ]
        out += [("log line", line) for line in world.logs.lines[before.logs :]]
    for path in world.root.rglob("*"):
        if path.is_file() and path.name != "identity.key":
            data = _settled(path)
            if data is not None:  # None: a spool file the worker or the shim consumed meanwhile
                out.append((f"data root file {path.relative_to(world.root)}", data))
    out.append(("process output", world.process_output()))
    return out


def _product_ids(world: World, before: Marks) -> set[str]:
    """The product's own random identifiers seen since ``before`` (request, attempt
    and artifact IDs, journal digests): masked in raw text such as log lines, where
    they appear inside file names."""
    ids: set[str] = set()
    with world.lock:
        blobs = [data for _, data in world.written[before.written :]] + world.read[before.read :]
    for blob in blobs:
        doc = json.loads(blob)
        ids.update(str(doc[k]) for k in ("request_id", "attempt_id") if doc.get(k))
        capsule = doc.get("capsule") or doc.get("composition") or {}
        if capsule.get("artifact_key"):
            ids.add(capsule["artifact_key"])
    for row in _journal_rows(world.root):
        ids.update(
            str(row[k]) for k in ("attempt_id", "artifact_key", "row_digest", "previous_row_digest")
        )
    return ids


# A whole product-format identifier in raw text (a spool file name in a library's
# DEBUG line: request IDs are 32 lowercase hex, keys and digests 64). The IDs the
# test saw are masked by value; this also masks one it did not see (a file another
# path named), so that a short customer piece such as "42d" cannot "leak" by chance
# into random hex (a flaky failure seen as a regular user). Whole runs only:
# customer text is never 32 or 64 bare hex digits in these tests.
_HEX_ID = re.compile(r"(?<![0-9a-f])(?:[0-9a-f]{64}|[0-9a-f]{32})(?![0-9a-f])")


# The kernel's inotify move cookie in watchdog's DEBUG lines (``cookie=165748``): a
# counter the kernel gives each rename, never product or customer material. A
# published answer is moved into place by rename, so its IN_MOVED_TO line carries
# one, and a short customer piece such as "574" or "9, " would "leak" into it by
# chance.
_INOTIFY_COOKIE = re.compile(r"\bcookie=[0-9]+")


def _mask(text: str, world: World, ids: set[str]) -> str:
    text = text.replace(str(world.tmp), "<tmp>")  # the host-chosen data root path
    for product_id in ids:
        text = text.replace(product_id, "<id>")
    return _INOTIFY_COOKIE.sub("cookie=<n>", _HEX_ID.sub("<id>", text))


def _assert_no_leak(
    world: World, values: tuple[str, ...], artifacts: list[tuple[str, bytes | str]], ids: set[str]
) -> None:
    pieces = [minimal_pieces(value, world.static) for value in values]
    for kind, blob in artifacts:
        text = _mask(scan_text_of(blob), world, ids)
        for value_pieces in pieces:
            leaked = [piece for piece in value_pieces if piece in text]
            assert not leaked, f"customer text {min(leaked, key=len)!r} leaked into a {kind}"


# --------------------------------------------------------------------------- tests

_nonce = iter(range(10**9))


@pytest.mark.parametrize("row", SURFACES, ids=[r.surface for r in SURFACES])
def test_no_customer_material_leaves_the_gateway(world: World, row: SurfaceRow) -> None:
    if not row.available():
        pytest.skip(f"KoreanExpressionCoordinator has no {row.method} yet")

    @REDACTION
    @given(
        seed=st.integers(0, 2**64 - 1),
        mode=st.sampled_from((Mode.ENABLED, Mode.SHADOW)),
        reply=st.sampled_from(REPLIES),
        host=st.sampled_from(("selected", "commit_failed", "publication_failed")),
    )
    def example(seed: int, mode: Mode, reply: str, host: str) -> None:
        rng = random.Random(seed)
        presentation = row.draw(rng, f"n{next(_nonce)}")
        world.fake.behaviour = _reply(world, reply, rng)
        before = Marks.now(world)
        candidate = presentation.present(world.coordinators[mode])
        if candidate.outcome is Outcome.ACCEPTED:
            world.coordinators[mode].report(candidate, host)
        if candidate.attempt_id is not None:
            _wait_terminal(world.root, candidate.attempt_id)
        deadline = time.monotonic() + 5
        while Marks.now(world).telemetry <= before.telemetry and time.monotonic() < deadline:
            time.sleep(0.005)

        # Positive whitelists, artifact by artifact.
        with world.lock:
            requests = world.fake.requests[before.requests :]
            written = world.written[before.written :]
            read = world.read[before.read :]
            events = world.telemetry[before.telemetry :]
        request_files = [parse_request(data) for kind, data in written if kind == "requests"]
        if presentation.styleable:
            assert candidate.outcome is not Outcome.NOTHING_TO_STYLE
            assert len(request_files) == 1, "the shim wrote one request per styleable presentation"
            capsule_file = json.loads(request_files[0].capsule.to_json())
            _check_capsule(capsule_file, candidate.artifact_key)
            assert len(requests) <= 1
            for request in requests:
                _check_wire(world, request, capsule_file)
        else:
            # Nothing to style: the shim wrote, read and sent nothing, and no row.
            assert candidate.outcome is Outcome.NOTHING_TO_STYLE, candidate.outcome
            assert candidate.artifact_key is None and candidate.attempt_id is None
            assert written == [] and read == [] and requests == []
            assert _journal_rows(world.root)[before.journal :] == []
        for kind, data in written:
            if kind == "reports":
                parse_report(data)
        for data in read:
            parse_response(data)
        for row_ in _journal_rows(world.root)[before.journal :]:
            _check_journal_row(row_)
        assert len(events) == 1
        _check_telemetry(events[0])
        _check_status_figures(json.loads((world.root / "worker.status.json").read_bytes()))

        # Headers are not scanned: _check_wire proved them byte-equal to the probe's.
        _assert_no_leak(
            world, presentation.values, _artifacts(world, before), _product_ids(world, before)
        )
        STATS.add(f"redaction {row.surface}", "redaction_examples")
        STATS.add(f"redaction {row.surface}", f"outcome_{candidate.outcome.value}")

    example()


def test_the_scanner_finds_a_planted_leak(world: World) -> None:
    # The proof is only as good as its scanner: plant customer text in each kind of
    # artifact and in each encoding the product could use, and it must be found.
    value = "김민지 서울특별시 마포구 월드컵북로 17"
    static = world.static
    for blob in (
        json.dumps({"x": value}, ensure_ascii=True),  # escaped JSON
        json.dumps({"messages": [{"content": json.dumps({"v": value[4:12]})}]}),  # nested
        f"DEBUG watchdog {value[:5]}",  # a log line
        ("{}\n" + json.dumps({"note": "마포구 월드"}, ensure_ascii=False) + "\n").encode(),  # JSONL
    ):
        assert find_leak(value, scan_text_of(blob), static) is not None, blob
    # Static product text and short pieces are not leaks.
    assert (
        find_leak("저장된 오늘 기록을 확인했습니다", "저장된 오늘 기록을 확인했습니다", static)
        is None
    )
    assert find_leak("72kg", "ab 72 cd", static) is None


def test_the_status_figures_check_catches_planted_content(world: World) -> None:
    # Numbers are not scanned, so the status whitelist must refuse anything but the
    # product's keys and counts in the margin figures.
    good = json.loads((world.root / "worker.status.json").read_bytes())
    _check_status_figures(good)
    daily = good["calls_by_surface"]["daily.v1"]
    for planted in (
        {**good, "calls_by_surface": {**good["calls_by_surface"], "김민지": daily}},
        {
            **good,
            "calls_by_surface": {
                **good["calls_by_surface"],
                "daily.v1": {**daily, "failures": {"evt-secret": 1}},
            },
        },
        {
            **good,
            "calls_by_surface": {**good["calls_by_surface"], "daily.v1": {**daily, "note": "x"}},
        },
        {
            **good,
            "calls_by_surface": {
                **good["calls_by_surface"],
                "daily.v1": {**daily, "calls": "72.4kg"},
            },
        },
        {**good, "last_minute": {**good["last_minute"], "claimed": 73.1}},
        {**good, "histogram_edges": {"call_seconds": [73.1], "completion_tokens": []}},
    ):
        with pytest.raises(AssertionError):
            _check_status_figures(planted)


def test_product_identifier_fields_must_have_their_format(world: World) -> None:
    # Identifier fields are not scanned, so a leak hidden in one must fail the format.
    with pytest.raises(AssertionError):
        scan_text_of(json.dumps({"attempt_id": "evt-secret-1234"}))


def test_a_planted_leak_in_a_log_line_or_a_file_is_caught(world: World) -> None:
    # The whole net, not just the scanner: text that reaches this process's logging
    # at DEBUG, or any file under the data root, is found by the same assertion the
    # property uses.
    value = "박서연 010-2345-6789 evt-planted"
    before = Marks.now(world)
    logging.getLogger("some.library").debug("processing %s", value[4:17])
    with pytest.raises(AssertionError, match="leaked into a log line"):
        _assert_no_leak(world, (value,), _artifacts(world, before), set())
    planted = world.root / "spool" / "tmp" / "planted.txt"
    planted.write_text(value[:6], "utf-8")
    try:
        with pytest.raises(AssertionError, match="leaked into a data root file"):
            _assert_no_leak(world, (value,), _artifacts(world, Marks.now(world)), set())
    finally:
        planted.unlink()

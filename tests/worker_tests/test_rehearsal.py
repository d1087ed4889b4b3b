"""kexpr.worker.rehearsal and kexpr.spool.rehearsal: the built-in
model behind the SDK's client, its pace, its answers, the marker's rules, and the
supervisor's and the ops tools' side. Time is an injected clock: no timed test."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakeapi.generation import count_tokens
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT

from kexpr.ops import promotion
from kexpr.ops.supervisor import WorkerSpec, worker_command, worker_environment
from kexpr.spool.contract import (
    CONTRACT_VERSION,
    MANIFEST,
    Capsule,
    Verdict,
    check_generated,
    judge,
    slot_policy,
)
from kexpr.spool.contract.budget import text_token_bound
from kexpr.spool.contract.fit import (
    FIT,
    OPEN_FAMILY_FIT,
    Style,
    compositions,
    slot_styleable,
)
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import Outcome
from kexpr.spool.rehearsal import (
    MARKER_NAME,
    MarkerRefusal,
    is_rehearsal_root,
    mark_rehearsal_root,
    rehearsal_refusal,
)
from kexpr.worker._transport import Call
from kexpr.worker.environment import RehearsalHazard, rehearsal_hazards
from kexpr.worker.provider import (
    REHEARSAL_API_KEY,
    SDK_TIMEOUT_S,
    build_rehearsal_client,
    call_once,
)
from kexpr.worker.rehearsal import Pace, RehearsalTransport, compose


class Clock:
    """The transport's monotonic clock; its sleep advances it."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.t += seconds


class Counting(RehearsalTransport):
    def __init__(self, pace: Pace, clock: Clock) -> None:
        super().__init__(pace, monotonic=clock.now, sleep=clock.sleep)
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return super().handle_request(request)


# A style run in a composition: its word, then "," or nothing, then the token.
_RUN = re.compile(r"([\uac00-\ud7a3]+)(,?) \[\[")


# The one capsule the fit table leaves to ask (design §6.1): the goal-missing weekly
# interpretation. Every other slot is locked, and a capsule with one cannot be built.
STYLED = Capsule(
    schema_version=CONTRACT_VERSION,
    surface=STYLED_SURFACE,
    artifact_key="0123456789abcdef" * 2,
    slots=(STYLED_SLOT,),
)


def _styleable_shapes() -> list[Capsule]:
    """Every styleable (slot, branch) of the manifest alone, as its capsule."""
    return [
        Capsule(
            schema_version=CONTRACT_VERSION,
            surface=row.surface,
            artifact_key="0123456789abcdef" * 2,
            slots=(slot_policy(slot_id, branch),),
        )
        for row in MANIFEST.values()
        for slot_id in row.slot_ids
        for branch in row.branches
        if slot_styleable(slot_id, branch)
    ]


def keyed(cap: Capsule, key: str) -> Capsule:
    return Capsule.from_object({**json.loads(cap.to_json()), "artifact_key": key})


def test_the_default_pace_is_the_published_median() -> None:
    assert Pace() == Pace(77.0, 0.5)
    assert Pace().seconds(154) == pytest.approx(2.5)
    for bad in ({"tokens_per_s": 0.0}, {"tokens_per_s": float("nan")}, {"first_token_s": -1.0}):
        with pytest.raises(ValueError):
            Pace(**bad)


def test_every_answer_is_accepted_and_the_lexemes_vary() -> None:
    """Rule 3: each slot's text is one of the fit table's compositions for it,
    stable for one artifact and varied across artifacts: over the shapes, every
    word of the table is used, with its join, and a slot that accepts several
    compositions gets more than one. The table leaves one slot to ask: every
    styleable (slot, branch) is the styled weekly's."""
    used: set[Style] = set()
    styleable = _styleable_shapes()
    assert [json.loads(c.to_json()) for c in styleable] == [json.loads(STYLED.to_json())]
    shapes = [STYLED, *styleable]
    for n, cap in enumerate(shapes):
        # Fixed keys (the variety below is a fact of them, not of chance), then random.
        keys = [hashlib.sha256(f"{n}:{i}".encode()).hexdigest() for i in range(8)]
        keys += [os.urandom(32).hex() for _ in range(2)]
        picked: dict[str, set[str]] = {p.slot_id: set() for p in cap.slots}
        for i, key in enumerate(keys):
            c = keyed(cap, key)
            answer = compose(c)
            assert judge(c, answer).verdict is Verdict.ACCEPTED, answer
            assert compose(c) == answer  # stable for one artifact
            # Its own style, not the minimal answer it falls back to: every slot's
            # text is a composition of the table, with at least one word.
            doc = json.loads(answer)
            for slot, out in zip(c.slots, doc["slots"], strict=True):
                text = out["generated_ko"]
                assert text in compositions(slot.slot_id, slot.semantic_ids), text
                assert check_generated(slot, text) is None
                runs = _RUN.findall(text)
                assert 1 <= len(runs) <= slot.max_style_lexemes
                if i < 8:
                    picked[slot.slot_id].add(text)
                    used |= {Style(word, comma=comma == ",") for word, comma in runs}
        for slot in cap.slots:
            if len(compositions(slot.slot_id, slot.semantic_ids)) > 1:
                assert len(picked[slot.slot_id]) > 1, slot.slot_id
    table = {
        style
        for cells in (*FIT.values(), *OPEN_FAMILY_FIT.values())
        for styles in cells.values()
        for style in styles
    }
    assert used == table and len(table) == 2


def test_the_budget_bound_never_counts_fewer_tokens_than_the_encoding() -> None:
    for cap in (STYLED,):
        for _ in range(20):
            answer = compose(keyed(cap, os.urandom(32).hex()))
            bound = text_token_bound(answer)
            assert bound is not None and bound >= count_tokens(answer)
    assert text_token_bound("\u00e9") is None  # outside the answer's alphabet


def test_an_answer_arrives_after_the_pace_through_the_real_call() -> None:
    clock = Clock()
    transport = Counting(Pace(), clock)
    client = build_rehearsal_client(transport)
    result = call_once(client, STYLED.to_json())
    assert result.outcome is None and result.sent
    assert result.content == compose(STYLED)
    tokens = text_token_bound(result.content)
    assert tokens is not None and result.completion_tokens == tokens
    assert clock.t == pytest.approx(0.5 + tokens / 77.0)
    # Exactly production's request, once: the endpoint, the plan's parameters.
    (request,) = transport.requests
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {REHEARSAL_API_KEY}"
    body = json.loads(request.content)
    assert body["model"] == "gpt-4.1-mini" and body["max_tokens"] == 384
    assert body["messages"][1]["content"] == STYLED.to_json()


def test_a_slower_answer_is_a_read_timeout_once() -> None:
    clock = Clock()
    transport = Counting(Pace(tokens_per_s=10.0), clock)
    result = call_once(build_rehearsal_client(transport), STYLED.to_json())
    assert result.outcome is Outcome.TIMEOUT and result.sent
    assert clock.t == pytest.approx(SDK_TIMEOUT_S)  # the SDK's per-phase read timeout
    assert len(transport.requests) == 1  # max_retries=0: never a second request


def test_the_call_deadline_ends_the_wait() -> None:
    clock = Clock()

    class Deadline(Call):
        __slots__ = ()

        def remaining(self) -> float:
            return 1.0 - clock.t

    transport = Counting(Pace(), clock)
    result = call_once(build_rehearsal_client(transport), STYLED.to_json(), call=Deadline(10.0))
    assert result.outcome is Outcome.TIMEOUT and result.sent
    assert clock.t == pytest.approx(1.0)
    assert len(transport.requests) == 1


def test_no_socket_is_ever_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: Any, **k: Any) -> None:
        raise AssertionError("a rehearsal opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    clock = Clock()
    result = call_once(build_rehearsal_client(Counting(Pace(), clock)), STYLED.to_json())
    assert result.outcome is None


def test_what_is_not_a_capsule_request_is_refused() -> None:
    transport = RehearsalTransport(Pace(), monotonic=Clock().now, sleep=Clock().sleep)
    url = "https://api.openai.com/v1/chat/completions"
    for request in (
        httpx.Request("POST", url, content=b"not json"),
        httpx.Request("POST", url, json={"messages": [{"role": "user", "content": "{}"}]}),
        httpx.Request("POST", url, json={"messages": "x"}),
    ):
        assert transport.handle_request(request).status_code == 400
    assert transport.handle_request(httpx.Request("GET", url)).status_code == 404
    other = httpx.Request("POST", "https://example.com/v1/chat/completions", json={})
    assert transport.handle_request(other).status_code == 404


def test_the_rehearsal_refuses_a_key_and_every_proxy() -> None:
    assert rehearsal_hazards({"PATH": "/usr/bin"}) == ()
    assert rehearsal_hazards({"OPENAI_API_KEY": ""}) == (RehearsalHazard.KEY_PRESENT,)
    for name in ("HTTPS_PROXY", "http_proxy", "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        assert rehearsal_hazards({name: "x"}) == (RehearsalHazard.PROXY_PRESENT,)
    assert rehearsal_hazards({"OPENAI_API_KEY": "sk-x", "HTTPS_PROXY": "x"}) == (
        RehearsalHazard.KEY_PRESENT,
        RehearsalHazard.PROXY_PRESENT,
    )


def test_the_marker_rules(root: DataRoot) -> None:
    assert not is_rehearsal_root(root)
    assert rehearsal_refusal(root, rehearsal=False) is None
    assert rehearsal_refusal(root, rehearsal=True) is None
    (root.outcomes / "2025-11-30.jsonl").write_bytes(b"{}\n")
    assert rehearsal_refusal(root, rehearsal=True) is MarkerRefusal.REAL_EVIDENCE
    (root.outcomes / "2025-11-30.jsonl").unlink()
    (root.quarantine / "2025-11-30.1.jsonl").write_bytes(b"")
    assert rehearsal_refusal(root, rehearsal=True) is MarkerRefusal.REAL_EVIDENCE
    (root.quarantine / "2025-11-30.1.jsonl").unlink()
    mark_rehearsal_root(root)
    mark_rehearsal_root(root)  # idempotent
    marker = root.root / MARKER_NAME
    assert json.loads(marker.read_bytes())["schema"] == "kexpr-rehearsal-v1"
    assert marker.stat().st_mode & 0o777 == 0o600
    assert is_rehearsal_root(root)
    assert rehearsal_refusal(root, rehearsal=True) is None
    assert rehearsal_refusal(root, rehearsal=False) is MarkerRefusal.REHEARSAL_ROOT
    # A marked root keeps its rehearsal rows: evidence under the marker is its own.
    (root.outcomes / "2025-11-30.jsonl").write_bytes(b"{}\n")
    assert rehearsal_refusal(root, rehearsal=True) is None
    marker.unlink()
    marker.mkdir()  # anything at the name marks the root; a rehearsal wants a file
    assert is_rehearsal_root(root)
    assert rehearsal_refusal(root, rehearsal=True) is MarkerRefusal.UNSAFE_MARKER
    assert rehearsal_refusal(root, rehearsal=False) is MarkerRefusal.REHEARSAL_ROOT


def test_the_supervisor_never_gives_a_rehearsal_the_key(tmp_path: Path) -> None:
    spec = WorkerSpec(tmp_path / "r", rehearsal=True, tokens_per_s=110.0, first_token_s=0.3)
    env = worker_environment(spec, {"OPENAI_API_KEY": "sk-x", "HTTPS_PROXY": "x"})
    assert "OPENAI_API_KEY" not in env and "HTTPS_PROXY" not in env
    cmd = worker_command(spec)
    assert cmd[-5:] == [
        "--rehearsal",
        "--tokens-per-second",
        "110.0",
        "--first-token-seconds",
        "0.3",
    ]
    assert "--rehearsal" not in worker_command(WorkerSpec(tmp_path / "r"))
    with pytest.raises(ValueError):
        WorkerSpec(tmp_path / "r", https_proxy="http://127.0.0.1:9", rehearsal=True)
    with pytest.raises(ValueError):
        WorkerSpec(tmp_path / "r", tokens_per_s=77.0)


def test_promotion_report_refuses_a_rehearsal_root(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    assert promotion.cli(["--data-root", str(root.root)]) == 0  # a real (empty) root reports
    capsys.readouterr()
    mark_rehearsal_root(root)
    assert promotion.cli(["--data-root", str(root.root)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == (
        f"kexpr promotion-report: {root.root} is a rehearsal data root (rehearsal.marker): "
        "rehearsal evidence is never counted\n"
    )
    assert promotion.cli(["--json", "--data-root", str(root.root)]) == 2
    assert json.loads(capsys.readouterr().out) == {
        "schema": "kexpr-promotion-report-v1",
        "rehearsal": True,
    }


def test_the_live_proof_never_counts_a_rehearsal(
    root: DataRoot, capsys: pytest.CaptureFixture[str]
) -> None:
    from live.shadow_harness import rehearsal_evidence

    assert rehearsal_evidence(root.root, {}) is False
    assert rehearsal_evidence(root.root, {"rehearsal": True}) is True
    mark_rehearsal_root(root)
    assert rehearsal_evidence(root.root, {}) is True
    assert (
        capsys.readouterr().err.splitlines()
        == ["live proof: rehearsal data root: rehearsal evidence is never counted"] * 2
    )


@pytest.mark.parametrize(
    ("pace", "arrives"),
    [
        # The default, the published median: what docs/cli.md says a rehearsal shows.
        (Pace(), True),
        # The budget's fastest (what `kexpr run` rehearses with).
        (Pace(110.0, 0.3), True),
        # A provider at 40 tokens/s: past the client's 3 s.
        (Pace(40.0, 0.5), False),
    ],
)
def test_whether_the_styled_weekly_arrives_at_which_pace(pace: Pace, arrives: bool) -> None:
    for _ in range(3):
        c = keyed(STYLED, os.urandom(32).hex())
        result = call_once(build_rehearsal_client(Counting(pace, Clock())), c.to_json())
        assert result.outcome is (None if arrives else Outcome.TIMEOUT)

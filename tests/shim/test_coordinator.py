"""The coordinator against a scripted stand-in for the worker (a thread that
answers the spool), so each shim-side rule can be forced: disabled, ineligible
and nothing to style write nothing, a compromised worker cannot get text past
re-validation, the wait is bounded, asyncio hosts are not blocked.

The presentation that asks the worker is the one message the fit table styles
(design §6.1): the weekly report whose goal range is missing (`kit.bodies`);
daily, dual and physique bodies have nothing to style."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kit.bodies import (
    DAILY_BODY,
    DAILY_FACTS,
    STYLED_BODY,
    STYLED_HOLD,
    STYLED_SELECTED,
    STYLED_SURFACE,
    apresent_styled,
    present_styled,
)
from reference_host.samples import (
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    callback_data,
    dual_card,
    physique_card,
    session,
)
from reference_host.scripted_worker import ScriptedWorker as ReferenceWorker

from gateway_shim import (
    CandidateStatus,
    DailyFacts,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)
from kexpr.spool.contract.answers import answer_document
from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import parse_report
from kexpr.spool.outcomes import HOST_OUTCOMES

# A daily body and its facts: eligible, with nothing to style.
BODY = DAILY_BODY
FACTS = DAILY_FACTS
# What the fake API writes for the styled slot (`STYLED_SELECTED` is its body).
STYLED = "[[P:01]]. 다만 [[A:01]]."

Answer = Callable[[dict[str, object]], dict[str, object] | bytes | None]


def composition(req: dict[str, object], generated: str) -> dict[str, object]:
    """The request's capsule echoed with ``generated`` in every slot."""
    capsule = req["capsule"]
    assert isinstance(capsule, dict)
    return answer_document(capsule, lambda _slot_id: generated)


def accepted(generated: str = STYLED) -> Answer:
    def answer(req: dict[str, object]) -> dict[str, object]:
        return {
            "spool_version": "kexpr-spool-v1",
            "request_id": req["request_id"],
            "attempt_id": "e" * 32,
            "status": "accepted",
            "outcome": "accepted",
            "composition": composition(req, generated),
        }

    return answer


def status(st: str, outcome: str) -> Answer:
    return lambda req: {
        "spool_version": "kexpr-spool-v1",
        "request_id": req["request_id"],
        "attempt_id": None,
        "status": st,
        "outcome": outcome,
        "composition": None,
    }


class ScriptedWorker(ReferenceWorker):
    """The reference host's scripted worker (its claim loop and heartbeat), answering
    each request with ``answer(request)`` as given, to the byte, after ``delay``."""

    def __init__(self, root: DataRoot, answer: Answer, delay: float = 0.0) -> None:
        super().__init__(root, delay=delay)
        self.answer = answer

    def _claimed(self, request: dict[str, Any]) -> None:
        self.requests.append(request)

    def _answer(self, request: dict[str, Any]) -> None:
        out = self.answer(request)
        if out is None:
            return
        data = out if isinstance(out, bytes) else json.dumps(out, ensure_ascii=False).encode()
        publish(self.root.tmp, self.root.responses / f"{request['request_id']}.json", data)


def coordinator(
    root: Path, mode: Mode = Mode.ENABLED, **surfaces: bool
) -> KoreanExpressionCoordinator:
    surfaces = surfaces or {"daily": True, "weekly": True}
    return KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(mode, **surfaces)), root
    )


def files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


@pytest.mark.parametrize(
    "config",
    [
        KoreanExpressionConfig.from_extra(None),
        KoreanExpressionConfig.from_block(exact_block(Mode.DISABLED, daily=True)),
        KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True)),  # daily off
        KoreanExpressionConfig.from_block(
            {**exact_block(Mode.ENABLED, daily=True), "api_key": "x"}
        ),
    ],
    ids=["absent", "disabled", "surface_off", "invalid"],
)
def test_disabled_is_canonical_and_writes_nothing(
    root: DataRoot, config: KoreanExpressionConfig
) -> None:
    coord = KoreanExpressionCoordinator(config, root.root)
    cand = coord.present_daily(BODY, facts=FACTS, finalized_event_id="evt")
    assert cand.outcome is Outcome.DISABLED
    assert (cand.body, cand.status, cand.publication_permitted) == (
        BODY,
        CandidateStatus.CANONICAL,
        True,
    )
    assert cand.attempt_id is None and cand.artifact_key is None
    assert not root.root.exists()


def test_ineligible_body_is_canonical_and_writes_nothing(root: DataRoot) -> None:
    coord = coordinator(root.root)
    cand = coord.present_daily(BODY, facts=DailyFacts(complete=False), finalized_event_id="evt")
    assert cand.outcome is Outcome.INELIGIBLE and cand.body == BODY
    # The pinned host's partial fallback on complete facts: a pre-cutover body.
    pre_cutover = BODY.replace(
        "저장된 오늘 기록을 확인했습니다.", "일부 항목이 기록되지 않아 저장된 내용만 안내합니다."
    )
    cand = coord.present_daily(pre_cutover, finalized_event_id="evt")
    assert cand.outcome is Outcome.INELIGIBLE and cand.body == pre_cutover
    cand = coord.present_daily(BODY + "\n", facts=FACTS, finalized_event_id="evt")
    assert cand.outcome is Outcome.INELIGIBLE and cand.body == BODY + "\n"
    assert not root.root.exists()


def _written(root: DataRoot) -> set[Path]:
    """Every file under the data root but a serving worker's heartbeat (and its
    staging file): what the coordinator wrote."""
    beat = root.status_file.name
    return {
        p for p in files_under(root.root) if p.name != beat and not p.name.startswith(f".{beat}.")
    }


SESSION = session()
PHYSIQUE_CARD = physique_card(SESSION)
# The physique card's canonical projection: the code-owned review block before its
# status line (what the host persists with the feature on).
_STATUS_LINE = "상태: 운영자 승인 전 · 고객에게 자동 전달하지 않음"
PHYSIQUE_PROJECTION = (
    str(PHYSIQUE_CARD["text"])[: -len(_STATUS_LINE)]
    + "검토 안내\n제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.\n"
    + _STATUS_LINE
)
# surface -> (present it, its surface version, the canonical body the host gets).
SURFACES: dict[str, tuple[Callable[[KoreanExpressionCoordinator], Any], str, str]] = {
    "daily": (
        lambda c: c.present_daily(BODY, facts=FACTS, finalized_event_id="evt"),
        "daily.v1",
        BODY,
    ),
    "dual": (
        lambda c: c.present_adaptive(
            dual_card(SESSION), callback_data=callback_data(SESSION), surface=DUAL_SURFACE
        ),
        DUAL_SURFACE,
        str(dual_card(SESSION)["text"]),
    ),
    "physique": (
        lambda c: c.present_adaptive(
            PHYSIQUE_CARD, callback_data=callback_data(SESSION), surface=PHYSIQUE_SURFACE
        ),
        PHYSIQUE_SURFACE,
        PHYSIQUE_PROJECTION,
    ),
    "weekly_goal_missing": (lambda c: present_styled(c, "evt"), STYLED_SURFACE, STYLED_BODY),
}


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_only_the_goal_missing_weekly_is_asked_every_other_surface_is_nothing_to_style(
    root: DataRoot, surface: str
) -> None:
    """design §6.2: daily, dual and physique bodies are eligible but have nothing
    to style: canonical, `nothing_to_style`, zero files (no key, no request, no
    report) with a worker serving. The weekly report whose goal range is missing
    writes its request: one slot, the interpretation, its rationale locked."""
    present, version, canonical = SURFACES[surface]
    coord = coordinator(root.root, Mode.ENABLED, daily=True, weekly=True, adaptive_operator=True)
    with ScriptedWorker(root, accepted()) as w:
        assert root.status_file.is_file()  # a worker is serving
        cand = present(coord)
        styled = surface == "weekly_goal_missing"
        if styled:
            assert coord.report(cand, Outcome.SELECTED)
        else:
            assert _written(root) == set()
            with pytest.raises(ValueError, match="^report_not_expected$"):
                coord.report(cand, Outcome.SELECTED)
    coord.close()
    assert cand.surface_version == version and cand.publication_permitted
    if not styled:
        assert cand.outcome is Outcome.NOTHING_TO_STYLE
        assert (cand.status, cand.body) == (CandidateStatus.CANONICAL, canonical)
        assert cand.attempt_id is None and cand.artifact_key is None and cand.generated == ()
        assert w.requests == []  # no request reached the worker
        assert _written(root) == set()  # no key, no request, no report
        return
    assert cand.outcome is Outcome.ACCEPTED and cand.body == STYLED_SELECTED != canonical
    [req] = w.requests  # the one request file the worker claimed from requests/
    capsule = req["capsule"]
    assert capsule["surface"] == STYLED_SURFACE
    assert [
        (s["slot_id"], s["allowed_predicate_ids"], s["allowed_action_ids"])
        for s in capsule["slots"]
    ] == [
        (
            "weekly.interpretation",
            ["P_WEEKLY_TREND_OBSERVED"],
            ["A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
        )
    ]
    wire = json.dumps(w.requests, ensure_ascii=False)
    assert "weekly.rationale" not in wire and "P_WEEKLY_RECORDS_INSUFFICIENT" not in wire
    written = {p.parent.name for p in _written(root)}
    assert "reports" in written  # the host's report, after the request


def test_enabled_selected_then_report(root: DataRoot) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()) as w:
        cand = present_styled(coord, "evt")
        coord.report(cand, "selected")
    coord.close()
    assert cand.outcome is Outcome.ACCEPTED and cand.body == STYLED_SELECTED
    assert cand.status is CandidateStatus.SELECTED and cand.attempt_id == "e" * 32
    assert cand.generated == (("weekly.interpretation", STYLED),)
    # Locked spans: same texts in both bodies, offsets shifted after the slot.
    assert cand.canonical_locked_spans_utf16[0] == cand.locked_spans_utf16[0]
    assert cand.locked_spans_utf16[1][0] - cand.canonical_locked_spans_utf16[1][0] == len("다만 ")
    report = parse_report((root.reports / f"{'e' * 32}.json").read_bytes())
    assert report.outcome.value == "selected"
    req = w.requests[0]
    assert req["mode"] == "enabled" and set(req) == {
        "spool_version",
        "request_id",
        "submitted_at_utc",
        "deadline_at_utc",
        "mode",
        "capsule",
        "identity_fingerprint",  # the key's fingerprint, for the journal (no sealed keys)
    }
    with pytest.raises(ValueError, match="^report_not_expected$"):
        coord.report(cand, Outcome.SELECTED)  # exactly once


@pytest.mark.parametrize(
    "outcome",
    [
        *sorted(set(Outcome) - HOST_OUTCOMES),
        "shadow_selected",
        "SELECTED",
        "",
        None,
        1,
    ],
    ids=str,
)
def test_report_refuses_what_is_not_a_host_outcome(root: DataRoot, outcome: object) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()):
        cand = present_styled(coord, "evt")
        with pytest.raises(ValueError) as refused:
            coord.report(cand, outcome)  # type: ignore[arg-type]
        assert refused.value.args == ("not_host_outcome",)  # an enum reason, never the input
        assert not (root.reports / f"{'e' * 32}.json").exists()
        coord.report(cand, Outcome.PUBLICATION_FAILED)  # the refusal did not use the report up
    coord.close()
    report = parse_report((root.reports / f"{'e' * 32}.json").read_bytes())
    assert report.outcome is Outcome.PUBLICATION_FAILED


def test_daily_facts_are_optional(root: DataRoot) -> None:
    # The host may pass no typed facts: completeness comes from the rendered facts,
    # and the body is eligible (nothing to style), not refused; facts that
    # disagree with the rendered ones are (test_ineligible_body_...).
    coord = coordinator(root.root, Mode.SHADOW)
    with ScriptedWorker(root, accepted()) as w:
        bare = coord.present_daily(BODY, finalized_event_id="evt")
        typed = coord.present_daily(BODY, facts=FACTS, finalized_event_id="evt")
    coord.close()
    for cand in (bare, typed):
        assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.body == BODY
    assert w.requests == [] and _written(root) == set()


def test_shadow_reports_shadow_selected_and_publishes_canonical(root: DataRoot) -> None:
    coord = coordinator(root.root, Mode.SHADOW)
    with ScriptedWorker(root, accepted()):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome is Outcome.SHADOW_SELECTED
    assert (cand.body, cand.status) == (STYLED_BODY, CandidateStatus.CANONICAL)
    assert (
        parse_report((root.reports / f"{'e' * 32}.json").read_bytes()).outcome.value
        == "shadow_selected"
    )
    with pytest.raises(ValueError):
        coord.report(cand, "selected")  # nothing to report in shadow


@pytest.mark.parametrize(
    "generated",
    [
        "[[P:01]]. 오늘은 [[A:01]].",  # outside the lexicon
        "[[P:01]]. 다만 [[A:01]]. 잘 하셨습니다.",
        "[[P:01]]. [[A:01]].",  # canonical-only
        "[[P:01]]. 다만 " + STYLED_HOLD,  # literal expansion instead of the token
        "[[P:01]]. 그리고 [[A:01]].",  # grammatical, but the word is outside the sentence's cell
        "다만 [[P:01]]. [[A:01]].",  # grammatical, but 다만 is in the later sentence's cell only
        "[[P:01]]. 그리고 다만 [[A:01]].",  # grammatical, but two words before one sentence
    ],
)
def test_compromised_worker_cannot_get_text_past_revalidation(
    root: DataRoot, generated: str
) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted(generated)):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome is Outcome.VALIDATION_REJECTED
    assert cand.body == STYLED_BODY and cand.status is CandidateStatus.CANONICAL
    assert (
        parse_report((root.reports / f"{'e' * 32}.json").read_bytes()).outcome.value
        == "validation_rejected"
    )


def test_compromised_worker_echoing_another_capsule_is_rejected(root: DataRoot) -> None:
    def answer(req: dict[str, object]) -> dict[str, object]:
        out = accepted()(req)
        assert isinstance(out, dict)
        comp = out["composition"]
        assert isinstance(comp, dict)
        comp["artifact_key"] = "f" * 64
        return out

    coord = coordinator(root.root)
    with ScriptedWorker(root, answer):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome is Outcome.VALIDATION_REJECTED and cand.body == STYLED_BODY


@pytest.mark.parametrize(
    "raw",
    [b"not json", b'{"spool_version":"kexpr-spool-v1"}', b"\xef\xbb\xbf{}"],
)
def test_malformed_response_is_canonical(root: DataRoot, raw: bytes) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, lambda req: raw):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome is Outcome.INVALID_RESPONSE and cand.body == STYLED_BODY


def test_response_with_a_control_character_is_refused_before_parsing(root: DataRoot) -> None:
    # The spool reader is the contract's strict JSON reader: a newline inside a
    # string value fails the whole file before any model is built.
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted("[[P:01]]. 다만\n[[A:01]].")):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome is Outcome.INVALID_RESPONSE and cand.body == STYLED_BODY


def test_response_for_another_request_is_canonical(root: DataRoot) -> None:
    def answer(req: dict[str, object]) -> dict[str, object]:
        out = accepted()(req)
        assert isinstance(out, dict)
        publish(
            root.tmp,
            root.responses / f"{req['request_id']}.json",
            json.dumps({**out, "request_id": "0" * 32}, ensure_ascii=False).encode(),
        )
        return None  # type: ignore[return-value]

    coord = coordinator(root.root)
    with ScriptedWorker(root, answer):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome is Outcome.INVALID_RESPONSE


@pytest.mark.parametrize(
    ("st", "outcome", "permitted"),
    [
        ("in_flight", "in_flight", False),
        ("already_attempted", "already_attempted", True),
        ("canonical", "provider_error", True),
        ("canonical", "credential_unavailable", True),
        ("canonical", "journal_unavailable", True),
    ],
)
def test_non_accepted_statuses(root: DataRoot, st: str, outcome: str, permitted: bool) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, status(st, outcome)):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome.value == outcome and cand.body == STYLED_BODY
    assert cand.publication_permitted is permitted


def test_no_response_times_out_at_the_deadline(root: DataRoot) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, lambda req: None):
        t0 = time.monotonic()
        cand = present_styled(coord, "evt")
        elapsed = time.monotonic() - t0
    coord.close()
    assert cand.outcome is Outcome.TIMEOUT and cand.body == STYLED_BODY
    assert 3.9 <= elapsed < 5.5  # the 4 s wait, bounded (correctness, not a benchmark)


def test_late_response_is_ignored(root: DataRoot) -> None:
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted(), delay=4.3):
        cand = present_styled(coord, "evt")
    coord.close()
    assert cand.outcome is Outcome.TIMEOUT and cand.body == STYLED_BODY
    assert not list(root.reports.glob("*.json"))


def test_artifact_key_is_stable_and_opaque(root: DataRoot) -> None:
    coord = coordinator(root.root, Mode.SHADOW)
    with ScriptedWorker(root, status("canonical", "provider_error")) as w:
        a = present_styled(coord, "evt-1")
        b = present_styled(coord, "evt-1")
        c = present_styled(coord, "evt-2")
    coord.close()
    assert a.artifact_key == b.artifact_key != c.artifact_key
    assert len(a.artifact_key or "") == 32  # 128 bits
    assert b"evt-1" not in json.dumps(w.requests).encode()


def test_unsafe_data_root_is_canonical(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    coord = coordinator(link)
    cand = present_styled(coord, "evt")
    assert cand.outcome is Outcome.SPOOL_UNAVAILABLE and cand.body == STYLED_BODY
    assert list(real.iterdir()) == []


def test_telemetry_exact_fields_and_sink_failure_ignored(root: DataRoot) -> None:
    events: list[dict[str, str]] = []
    got = threading.Event()

    def sink(ev):
        events.append(dict(ev))
        got.set()
        raise RuntimeError("sink broken")

    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.SHADOW, weekly=True))
    coord = KoreanExpressionCoordinator(cfg, root.root, telemetry=sink)
    with ScriptedWorker(root, accepted()):
        cand = present_styled(coord, "evt-secret")
    coord.close()  # delivers what is queued, then joins the sink's thread
    assert cand.outcome is Outcome.SHADOW_SELECTED
    assert got.wait(5)
    assert coord._telemetry.sink_faults == 1  # swallowed, and counted
    assert events[0] == {
        "event": "korean_expression.presentation",
        "contract_version": "korean-expression-v4",
        "surface": "weekly.v1",
        "mode": "shadow",
        "outcome": "shadow_selected",
        "latency_bucket": events[0]["latency_bucket"],
    }


def test_async_presentation_does_not_block_the_event_loop(root: DataRoot) -> None:
    coord = coordinator(root.root)

    async def main() -> tuple[Any, int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        cand = await apresent_styled(coord, "evt")
        stop.set()
        await t
        return cand, ticks

    with ScriptedWorker(root, accepted(), delay=0.6):
        cand, ticks = asyncio.run(main())
    coord.close()
    assert cand.outcome is Outcome.ACCEPTED
    # ~60 ticks in 0.6 s if the loop ran freely; a blocked loop gives ~1.
    assert ticks >= 20


def test_gateway_side_never_imports_openai() -> None:
    code = (
        "import sys, gateway_shim, kexpr.spool, kexpr.spool.contract, kexpr.spool.journal, kexpr.spool.messages;"
        "import gateway_shim.coordinator;"
        "assert 'openai' not in sys.modules, 'openai imported';"
        "assert 'httpx' not in sys.modules, 'httpx imported'"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_gateway_side_source_never_names_the_key() -> None:
    repo = Path(__file__).resolve().parents[2]
    for pkg in ("gateway_shim", "queue/spool"):
        for src in (repo / pkg).rglob("*.py"):
            assert "OPENAI_API_KEY" not in src.read_text("utf-8"), src
            assert "import openai" not in src.read_text("utf-8"), src

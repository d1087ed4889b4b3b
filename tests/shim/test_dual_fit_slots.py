"""A dual card through a real coordinator under the contract's fit table (design
§6.1): the decision label and the first review line may take no style word, so
they are locked host text, never slots.

Rules checked: a card with one review line has nothing to ask — `nothing_to_style`,
the host's card, zero files in the data root and no request even with a serving
worker; a card with two reasons sends a capsule of exactly one slot,
`adaptive.dual.review.2`, and the decision and the first line come back
byte-identical (inside the first locked span)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reference_host.samples import (
    DUAL_REASONS,
    DUAL_SURFACE,
    callback_data,
    dual_body,
    dual_card,
    session,
)
from reference_host.scripted_worker import ScriptedWorker

from gateway_shim import (
    CandidateStatus,
    CardOrigin,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    exact_block,
    revalidate,
)
from kexpr.spool.layout import DataRoot

SESSION = session()
TWO_REASONS = dual_card(SESSION)
ONE_REASON = dual_card(SESSION, dual_body(DUAL_REASONS[:1]))
DECISION_LINE = "현재 판단: 순응도 근거 충돌로 조정 보류\n"
FIRST_LINE = "\n\n검토 필요\n\n" + DUAL_REASONS[0] + "\n"


def bind() -> dict[str, Any]:
    return {
        "callback_data": callback_data(SESSION),
        "origin": CardOrigin.FRESH,
        "surface": DUAL_SURFACE,
        "authority_pins": ("owner=coach-1",),
    }


class Events:
    """The coordinator's telemetry events, as the host's sink receives them."""

    def __init__(self) -> None:
        self.seen: list[dict[str, object]] = []
        self.got = threading.Event()

    def __call__(self, event: Any) -> None:
        self.seen.append(dict(event))
        self.got.set()


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def coord(root: DataRoot, events: Events) -> Iterator[KoreanExpressionCoordinator]:
    c = KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, adaptive_operator=True)),
        root.root,
        telemetry=events,
    )
    yield c
    c.close()


def files_under(path: Path) -> set[Path]:
    return {p for p in path.rglob("*") if p.is_file()} if path.exists() else set()


def utf16(text: str, span: tuple[int, int]) -> str:
    units = text.encode("utf-16-le")
    return units[2 * span[0] : 2 * span[1]].decode("utf-16-le")


def assert_the_hosts_card(cand: PresentationCandidate) -> None:
    assert cand.outcome is Outcome.NOTHING_TO_STYLE
    assert cand.status is CandidateStatus.CANONICAL and cand.publication_permitted
    assert cand.surface_version == DUAL_SURFACE
    assert cand.body == ONE_REASON["text"]
    assert cand.attempt_id is None and cand.artifact_key is None and cand.generated == ()


def test_the_sample_cards_review_blocks() -> None:
    # The premise: the samples differ in their review block alone.
    two, one = str(TWO_REASONS["text"]), str(ONE_REASON["text"])
    assert DECISION_LINE in one and FIRST_LINE + "\n상세 근거\n" in one
    assert two == one.replace(FIRST_LINE, FIRST_LINE + DUAL_REASONS[1] + "\n", 1)


def test_one_review_line_is_nothing_to_style_with_zero_files(
    root: DataRoot, coord: KoreanExpressionCoordinator, events: Events
) -> None:
    cand = coord.present_adaptive(ONE_REASON, **bind())
    assert_the_hosts_card(cand)
    assert not root.root.exists()  # not even the data root: no key, no spool
    assert events.got.wait(5)
    assert [(e["surface"], e["mode"], e["outcome"]) for e in events.seen] == [
        (DUAL_SURFACE, "enabled", "nothing_to_style")
    ]
    # The host persists the card it rendered; there is nothing to report.
    assert revalidate(cand, ONE_REASON, **bind()) == ONE_REASON
    with pytest.raises(ValueError, match="^report_not_expected$"):
        coord.report(cand, Outcome.SELECTED)
    assert not root.root.exists()


def test_one_review_line_asks_a_serving_worker_nothing(
    root: DataRoot, coord: KoreanExpressionCoordinator
) -> None:
    def written() -> set[Path]:
        # All but the scripted worker's own heartbeat (and its staging file).
        beat = root.status_file.name
        return {
            p
            for p in files_under(root.root)
            if p.name != beat and not p.name.startswith(f".{beat}.")
        }

    with ScriptedWorker(root) as w:
        assert root.status_file.is_file()  # a worker is serving
        cand = coord.present_adaptive(ONE_REASON, **bind())
        acand = asyncio.run(coord.apresent_adaptive(ONE_REASON, **bind()))
        assert written() == set()
    assert_the_hosts_card(cand)
    assert_the_hosts_card(acand)
    assert w.requests == [] and w.provider_calls == 0


@pytest.mark.parametrize("mode", [Mode.ENABLED, Mode.SHADOW], ids=str)
def test_two_reasons_send_exactly_the_second_review_line(root: DataRoot, mode: Mode) -> None:
    coord = KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(mode, adaptive_operator=True)), root.root
    )
    try:
        with ScriptedWorker(root) as w:
            cand = coord.present_adaptive(TWO_REASONS, **bind())
    finally:
        coord.close()
    assert len(w.requests) == 1
    capsule = w.requests[0]["capsule"]
    assert capsule["surface"] == DUAL_SURFACE
    assert [
        (
            s["slot_id"],
            s["allowed_predicate_ids"],
            s["allowed_action_ids"],
            s["required_placeholder_tokens"],
        )
        for s in capsule["slots"]
    ] == [("adaptive.dual.review.2", ["P_DUAL_REASON_LATEST"], [], ["[[P:01]]"])]
    wire = json.dumps(w.requests, ensure_ascii=False)
    for locked in ("adaptive.dual.judgment", "adaptive.dual.review.1"):
        assert locked not in wire
    for semantic_id in ("P_DUAL_DECISION_HOLD", "P_DUAL_REASON_EDIT"):
        assert semantic_id not in wire

    canonical = str(TWO_REASONS["text"])
    if mode is Mode.SHADOW:
        assert cand.outcome is Outcome.SHADOW_SELECTED and cand.body == canonical
        return
    assert cand.outcome is Outcome.ACCEPTED and cand.status is CandidateStatus.SELECTED
    assert cand.generated == (("adaptive.dual.review.2", "그리고 [[P:01]]."),)
    styled = FIRST_LINE + "그리고 " + DUAL_REASONS[1] + "\n"
    assert cand.body == canonical.replace(FIRST_LINE + DUAL_REASONS[1] + "\n", styled, 1)
    # The decision and the first review line lie in the first locked span, which is
    # byte-identical in both bodies and ends right where the second line starts.
    first = cand.locked_spans_utf16[0]
    assert first == cand.canonical_locked_spans_utf16[0]
    head = utf16(cand.body, first)
    assert head == utf16(canonical, first)
    assert head.endswith(DECISION_LINE + "\n권장안\n\n- 하루 탄수화물 20g 줄이기" + FIRST_LINE)
    second = len(DUAL_REASONS[1].encode("utf-16-le")) // 2
    assert utf16(canonical, (first[1], first[1] + second)) == DUAL_REASONS[1]
    assert revalidate(cand, TWO_REASONS, **bind())["text"] == cand.body

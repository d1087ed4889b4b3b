"""A dual card through a real coordinator under the contract's fit table (design
§6.1, §6.2): the decision label and the first review line may take no style word,
and every later review line read worse with any word to the blind readers, so
every line is locked host text, never a slot.

Rules checked: a card with one review line, or with two, has nothing to ask —
`nothing_to_style`, the host's card, zero files in the data root and no request
even with a serving worker, in enabled and shadow mode; the whole card is one
locked span, byte-identical; and a capsule for any review line, the later ones
included, cannot be built (`slot_unstyleable`)."""

from __future__ import annotations

import asyncio
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
from kexpr.spool.contract import (
    CONTRACT_VERSION,
    Capsule,
    CapsuleError,
    CapsuleReason,
    slot_policy,
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
def test_two_reasons_are_nothing_to_style_too(root: DataRoot, mode: Mode) -> None:
    """The second review line (once `그리고`) is locked as well: the card with two
    reasons is the host's, every byte in one locked span, and nothing is asked."""
    coord = KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(mode, adaptive_operator=True)), root.root
    )
    beat = root.status_file.name
    try:
        with ScriptedWorker(root) as w:
            cand = coord.present_adaptive(TWO_REASONS, **bind())
            written = {
                p
                for p in files_under(root.root)
                if p.name != beat and not p.name.startswith(f".{beat}.")
            }
    finally:
        coord.close()
    assert w.requests == [] and w.provider_calls == 0 and written == set()
    canonical = str(TWO_REASONS["text"])
    assert cand.outcome is Outcome.NOTHING_TO_STYLE and cand.surface_version == DUAL_SURFACE
    assert cand.status is CandidateStatus.CANONICAL and cand.body == canonical
    assert cand.attempt_id is None and cand.artifact_key is None and cand.generated == ()
    whole = (0, len(canonical.encode("utf-16-le")) // 2)
    assert cand.locked_spans_utf16 == cand.canonical_locked_spans_utf16 == (whole,)
    assert utf16(cand.body, whole) == canonical
    assert revalidate(cand, TWO_REASONS, **bind()) == TWO_REASONS


@pytest.mark.parametrize("line", [1, 2, 3, 5])
def test_no_review_line_can_be_asked(line: int) -> None:
    """Whatever its position, a review line's slot (the shipped reasons, or an
    operator's reason) is refused in a capsule: the worker is never asked for one."""
    for reason in ("P_DUAL_REASON_EDIT", "P_DUAL_REASON_LATEST", "P_DUAL_REASON_TREND_SHORT"):
        policy = slot_policy(f"adaptive.dual.review.{line}", [reason])  # a valid policy
        with pytest.raises(CapsuleError) as info:
            Capsule(
                schema_version=CONTRACT_VERSION,
                surface=DUAL_SURFACE,
                artifact_key="a" * 32,
                slots=(policy,),
            )
        assert info.value.reason is CapsuleReason.SLOT_UNSTYLEABLE

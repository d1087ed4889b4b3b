"""The attack list against the gateway shim, as if the worker were compromised.

design §1: "a compromised worker still cannot make the gateway publish anything outside
the grammar". Here the worker is a scripted thread that answers every request with
an ``accepted`` spool response carrying an attack composition. The shim must publish
the canonical body, report ``validation_rejected`` when it could read the response,
and never expand the attack.

Two layers, both from the same attack table:

- every generated_ko attack on the one styled message (the goal-missing weekly
  report, design §6.2) goes through the shim's pure re-validation and render
  (``parse_weekly(...).render``), which must refuse it;
- every one of them again, plus echo attacks a compromised worker would try (another
  artifact's key, another branch's predicate, another surface), goes through the whole
  ``KoreanExpressionCoordinator`` with a real spool.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.bodies import STYLED_BODY, STYLED_SELECTED, present_styled
from reference_host.scripted_worker import ScriptedWorker

from adversarial.builders import STYLED, capsule_dict, response
from adversarial.oracle import slot_ok
from adversarial.test_adversarial_attacks import ATTACKS
from gateway_shim import (
    CandidateStatus,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)
from gateway_shim.surfaces import RenderError
from gateway_shim.surfaces.weekly import parse_weekly
from kexpr.spool.contract.answers import answer_document
from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import parse_report

BODY = STYLED_BODY
SLOT = STYLED.slots[0].slot_id
GOOD_TEXT = "[[P:01]]. 다만 [[A:01]]."  # the fit table's one word, before the hold
ATTEMPT = "a" * 32


def _generated_attacks() -> list[tuple[str, str]]:
    """(name, generated_ko) of every attack on STYLED that differs from the valid
    response only in its generated_ko, where that generated_ko is itself outside the
    contract: the grammar or the fit table (by the independent oracle: a duplicate-key
    attack whose surviving value is valid does not count)."""
    out: list[tuple[str, str]] = []
    policy = capsule_dict(STYLED)["slots"][0]
    valid_slot = response(STYLED)["slots"][0]
    for attack in ATTACKS:
        if attack.capsule != STYLED or attack.reason is None or isinstance(attack.content, bytes):
            continue
        try:
            doc = json.loads(attack.content)
        except (ValueError, RecursionError):
            continue
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("slots"), list)
            or len(doc["slots"]) != 1
        ):
            continue
        slot = doc["slots"][0]
        text = slot.get("generated_ko") if isinstance(slot, dict) else None
        if (
            isinstance(text, str)
            and not slot_ok(policy, text)
            and {k: v for k, v in slot.items() if k != "generated_ko"}
            == {k: v for k, v in valid_slot.items() if k != "generated_ko"}
            and {k: v for k, v in doc.items() if k != "slots"}
            == {k: v for k, v in response(STYLED).items() if k != "slots"}
        ):
            out.append((f"{attack.category}: {attack.name}", text))
    return out


GENERATED = _generated_attacks()


def test_the_attack_table_yields_generated_ko_attacks() -> None:
    assert len(GENERATED) >= 300
    # The fit table's attacks among them: a compromised worker's meaning-changing
    # words are refused by the shim's own re-validation too (design §6.1).
    assert sum(name.startswith("fit_table: ") for name, _ in GENERATED) >= 15


@pytest.mark.parametrize(("name", "text"), GENERATED, ids=[n for n, _ in GENERATED])
def test_shim_render_refuses_every_generated_attack(name: str, text: str) -> None:
    surface = parse_weekly(BODY)
    with pytest.raises(RenderError):
        surface.render({SLOT: text})


# -- the whole coordinator with a compromised worker ---------------------------------------

Answer = Callable[[dict[str, Any]], dict[str, Any]]


class CompromisedWorker(ScriptedWorker):
    """The scripted worker turned hostile: it answers every request (no dedupe)
    with ``answer(capsule)`` as an *accepted* spool response, sent as raw bytes —
    possibly malformed, possibly with lone surrogates (``surrogatepass``)."""

    def __init__(self, root: DataRoot) -> None:
        super().__init__(root, poll=0.002)
        self.answer: Answer = lambda req: {}

    def _answer(self, request: dict[str, Any]) -> None:
        out = {
            "spool_version": "kexpr-spool-v1",
            "request_id": request["request_id"],
            "attempt_id": ATTEMPT,
            "status": "accepted",
            "outcome": "accepted",
            "composition": self.answer(request["capsule"]),
        }
        data = json.dumps(out, ensure_ascii=False).encode("utf-8", "surrogatepass")
        publish(self.root.tmp, self.root.responses / f"{request['request_id']}.json", data)


def echo(capsule: dict[str, Any], generated: str) -> dict[str, Any]:
    return answer_document(capsule, lambda _slot_id: generated)


def _with(generated: str) -> Answer:
    return lambda capsule: echo(capsule, generated)


def _edit(change: Callable[[dict[str, Any]], None]) -> Answer:
    def answer(capsule: dict[str, Any]) -> dict[str, Any]:
        comp = echo(capsule, GOOD_TEXT)
        change(comp)
        return comp

    return answer


def _set(key: str, value: object, slot: bool = False) -> Callable[[dict[str, Any]], None]:
    def change(comp: dict[str, Any]) -> None:
        (comp["slots"][0] if slot else comp)[key] = value

    return change


COORDINATOR_CASES: list[tuple[str, Answer]] = [
    *[(name, _with(text)) for name, text in GENERATED],
    ("echo: another artifact's key", _edit(_set("artifact_key", "f" * 64))),
    (
        "echo: the other branch's predicate",
        _edit(_set("predicate_ids", ["P_WEEKLY_IN_GOAL"], slot=True)),
    ),
    ("echo: another surface", _edit(_set("surface", "daily.v1"))),
    ("echo: the locked rationale", _edit(_set("slot_id", "weekly.rationale", slot=True))),
    (
        "echo: an added action",
        _edit(
            _set(
                "action_ids",
                ["A_WEEKLY_HOLD_FOR_MISSING_GOAL", "A_OPERATOR_REVIEW_DECISION"],
                slot=True,
            )
        ),
    ),
    ("echo: a second slot", _edit(lambda c: c["slots"].append(dict(c["slots"][0])))),
]


@pytest.fixture(scope="module")
def shim(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[KoreanExpressionCoordinator, CompromisedWorker]]:
    root = DataRoot(Path(tmp_path_factory.mktemp("compromised")) / "root")
    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    coordinator = KoreanExpressionCoordinator(config, root.root)
    with CompromisedWorker(root) as worker:
        yield coordinator, worker
    coordinator.close()


def test_the_compromised_worker_can_get_a_valid_composition_selected(
    shim: tuple[KoreanExpressionCoordinator, CompromisedWorker],
) -> None:
    # Control: the same scripted worker with a valid composition is selected, so the
    # rejections below are the attacks' doing.
    coordinator, worker = shim
    worker.answer = _with(GOOD_TEXT)
    candidate = present_styled(coordinator, "control")
    assert candidate.outcome is Outcome.ACCEPTED
    assert candidate.body == STYLED_SELECTED


@pytest.mark.parametrize(
    ("name", "answer"), COORDINATOR_CASES, ids=[c[0] for c in COORDINATOR_CASES]
)
def test_compromised_worker_cannot_get_an_attack_published(
    shim: tuple[KoreanExpressionCoordinator, CompromisedWorker], name: str, answer: Answer
) -> None:
    coordinator, worker = shim
    worker.answer = answer
    report = worker.root.reports / f"{ATTEMPT}.json"
    report.unlink(missing_ok=True)
    candidate = present_styled(coordinator, f"attack-{name}")
    assert candidate.body == BODY
    assert candidate.status is CandidateStatus.CANONICAL and candidate.publication_permitted
    # The spool reader refuses what the contract's reader refuses (a zero-width
    # character, a lone surrogate, ...): invalid_response, nothing to report. Anything
    # it can read is re-validated and reported validation_rejected.
    assert candidate.outcome in (
        Outcome.VALIDATION_REJECTED,
        Outcome.INVALID_RESPONSE,
    )
    if candidate.outcome is Outcome.VALIDATION_REJECTED:
        assert parse_report(report.read_bytes()).outcome.value == "validation_rejected"
    else:
        assert not report.exists()

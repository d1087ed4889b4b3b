"""The host's adaptive card payload (both schemas): only a fresh, well-formed
``status == "card"`` payload with the host's exact envelope lines and buttons
is eligible; every other payload has its own reason (HOST-FORMATS §5)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from adaptive_support import (
    CALLBACK,
    OPERATOR_GLOSSARY,
    PHYSIQUE_BODY,
    STATES,
    TH_ADAPTIVE_BODY,
    dual_bodies,
    host_examples,
    host_payloads,
    payload,
    physique_bodies,
)
from hypothesis import given
from hypothesis import strategies as st

from gateway_shim.surfaces import Ineligible, IneligibleReason
from gateway_shim.surfaces.adaptive import parse_adaptive, presented_host_text, resolve_surface
from gateway_shim.surfaces.card import (
    CALLBACK_RE,
    DUAL_SURFACE,
    PHYSIQUE_SURFACE,
    PROGRESS_LINES,
    STATE_BUTTONS,
    CardOrigin,
    card_payload,
    expected_buttons,
    fresh_card,
    parse_callback,
    progress_line,
)

R = IneligibleReason
FRESH = CardOrigin.FRESH


def reason_of(
    p: object, *, callback: object = CALLBACK, origin: Any = FRESH, surface: str | None = None
) -> R:
    with pytest.raises(Ineligible) as e:
        parse_adaptive(p, callback_data=callback, origin=origin, surface=surface)  # type: ignore[arg-type]
    assert str(e.value) == e.value.reason.value  # the enum, never content
    return e.value.reason


# --- the host's own examples (goldens/host-examples.jsonl, A1-A4) -----------------------


@pytest.mark.parametrize("row", host_examples(), ids=lambda r: r["example"])
def test_host_examples_have_their_expected_verdict(row: dict[str, Any]) -> None:
    request = row["request"]
    kwargs = {
        "callback_data": request["callback_data"],
        "origin": CardOrigin(request["origin"]),
        "surface": request["surface"],
    }
    if row["expected"] == "eligible":
        surface = parse_adaptive(request["payload"], **kwargs)
        assert presented_host_text(surface) == request["payload"]["text"]
        assert surface.canonical().body == request["payload"]["text"]
    else:
        with pytest.raises(Ineligible):
            parse_adaptive(request["payload"], **kwargs)


def test_a3_menu_and_a4_terminal_have_their_own_reasons() -> None:
    rows = {r["example"]: r["request"] for r in host_examples()}
    assert reason_of(rows["HOST-FORMATS.md A3"]["payload"]) is R.STATUS_MENU
    assert reason_of(rows["HOST-FORMATS.md A4"]["payload"]) is R.STATUS_TERMINAL


# --- every state and its buttons ----------------------------------------------------------


@pytest.mark.parametrize("schedule_confirm", [False, True])
@pytest.mark.parametrize("state", [*PROGRESS_LINES, "delivery_pending"])
@pytest.mark.parametrize("body", [TH_ADAPTIVE_BODY, PHYSIQUE_BODY], ids=["dual", "physique"])
def test_every_state_with_its_buttons_is_eligible(
    state: str, schedule_confirm: bool, body: str
) -> None:
    p = payload(body, state=state, schedule_confirm=schedule_confirm)
    surface = parse_adaptive(p, callback_data=CALLBACK, origin=FRESH)
    assert presented_host_text(surface) == p["text"]
    header, progress = p["text"].split("\n")[:2]
    assert header.endswith(f"· state: {state}")
    assert progress == PROGRESS_LINES.get(state, f"현재 상태: {state}")


def test_progress_lines_are_the_hosts() -> None:
    assert progress_line("proposed") == "진행 1/4 · 제안 검토 중 · 다음: 승인하기"
    assert progress_line("held") == "검토 보류 중 · 다음: 검토 다시 시작"
    assert (
        progress_line("delivery_revoked")
        == "안전 잠금 · 고객 전송 비활성화 · 다음: 고객 전송 다시 허용"
    )
    assert progress_line("anything") == "현재 상태: anything"


def test_buttons_are_the_hosts() -> None:
    assert [label for label, _ in expected_buttons("proposed", schedule_confirm=True)] == [
        "일정 확정",
        "1/4 승인하기",
        "고급 · 내용 보기",
        "고급 · 메모 수정",
        "고급 · 보류",
        "이전",
    ]
    # schedule_confirm only ever leads the three pre-approval states.
    assert expected_buttons("approved", schedule_confirm=True) == STATE_BUTTONS["approved"]
    assert expected_buttons("unknown") == (("고급 · 내용 보기", "view"), ("이전", "back"))


def test_callback_data_gives_the_session() -> None:
    assert parse_callback("an1:0123456789abcdef01234567:hold") == (
        "0123456789abcdef01234567",
        "hold",
    )
    for bad in (
        "an1:0123456789ABCDEF01234567:hold",
        "an1:0123:hold",
        "an1:0123456789abcdef01234567:nope",
        "an2:0123456789abcdef01234567:hold",
        "an1:0123456789abcdef01234567:hold\n",
        7,
    ):
        with pytest.raises(Ineligible) as e:
            parse_callback(bad)
        assert e.value.reason is R.CALLBACK_MALFORMED
    assert CALLBACK_RE.pattern.startswith("an1:")


# --- statuses other than a fresh card ----------------------------------------------------


@pytest.mark.parametrize(
    ("status", "extra", "reason"),
    [
        ("menu", {}, R.STATUS_MENU),
        ("view", {}, R.STATUS_VIEW),
        ("selected", {}, R.STATUS_SELECTED),
        ("operator_input_required", {}, R.STATUS_OPERATOR_INPUT),
        ("view", {"terminal_state": "sent_audited"}, R.STATUS_TERMINAL),
        ("delivery_unknown", {}, R.STATUS_TERMINAL),
        ("card", {"event_type": "success"}, R.STATUS_TERMINAL),
        ("duplicate", {}, R.STATUS_DUPLICATE),
        ("rejected", {}, R.STATUS_REJECTED),
        ("delivery_pending", {}, R.STATUS_NOT_CARD),
        ("published", {}, R.STATUS_NOT_CARD),
    ],
)
def test_other_statuses_are_ineligible_with_their_reason(
    status: str, extra: dict[str, Any], reason: R
) -> None:
    p = {**payload(TH_ADAPTIVE_BODY), "status": status, **extra}
    assert reason_of(p) is reason


def test_recovery_is_ineligible_before_anything_else() -> None:
    assert reason_of(payload(TH_ADAPTIVE_BODY), origin=CardOrigin.RECOVERY) is R.RECOVERY_PAYLOAD
    assert reason_of({"status": "menu"}, origin=CardOrigin.RECOVERY) is R.RECOVERY_PAYLOAD
    assert reason_of(payload(TH_ADAPTIVE_BODY), origin="fresh") is R.FACTS_INVALID
    assert CardOrigin("fresh") is FRESH and CardOrigin("recovery") is CardOrigin.RECOVERY


Edit = Callable[[dict[str, Any]], None]


def _set(path: tuple[str | int, ...], value: Any) -> Edit:
    def edit(p: dict[str, Any]) -> None:
        target: Any = p
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _delete(key: str) -> Edit:
    return lambda p: p.pop(key)


MALFORMED: list[tuple[str, Edit, R]] = [
    ("status not str", _set(("status",), 1), R.PAYLOAD_MALFORMED),
    ("extra key", _set(("schema_version",), "x"), R.PAYLOAD_MALFORMED),
    ("missing customer_key", _delete("customer_key"), R.PAYLOAD_MALFORMED),
    ("empty customer_key", _set(("customer_key",), ""), R.PAYLOAD_MALFORMED),
    ("digest upper hex", _set(("proposal_digest",), "C" * 64), R.PAYLOAD_MALFORMED),
    ("digest short", _set(("proposal_digest",), "c" * 63), R.PAYLOAD_MALFORMED),
    ("revision 0", _set(("revision",), 0), R.PAYLOAD_MALFORMED),
    ("revision bool", _set(("revision",), True), R.PAYLOAD_MALFORMED),
    ("revision str", _set(("revision",), "1"), R.PAYLOAD_MALFORMED),
    ("text not str", _set(("text",), None), R.PAYLOAD_MALFORMED),
    ("envelope not object", _set(("envelope",), []), R.ENVELOPE_MALFORMED),
    (
        "old envelope",
        _set(
            ("envelope",),
            {
                "schema_version": DUAL_SURFACE,
                "session_id": "s",
                "proposal_digest": "p",
                "revision": 1,
                "card_kind": "k",
            },
        ),
        R.ENVELOPE_MALFORMED,
    ),
    ("marker", _set(("envelope", "marker"), "테스트"), R.ENVELOPE_MALFORMED),
    ("label empty", _set(("envelope", "customer_label"), ""), R.ENVELOPE_MALFORMED),
    ("label newline", _set(("envelope", "customer_label"), "a\nb"), R.ENVELOPE_MALFORMED),
    ("day format", _set(("envelope", "kst_day"), "2026-7-28"), R.ENVELOPE_MALFORMED),
    ("day invalid", _set(("envelope", "kst_day"), "2026-02-30"), R.ENVELOPE_MALFORMED),
    ("envelope revision differs", _set(("envelope", "revision"), 2), R.ENVELOPE_MALFORMED),
    ("envelope revision bool", _set(("envelope", "revision"), True), R.ENVELOPE_MALFORMED),
    ("state empty", _set(("envelope", "state"), ""), R.ENVELOPE_MALFORMED),
    ("buttons not list", _set(("buttons",), {}), R.BUTTONS_MALFORMED),
    (
        "button rows",
        _set(("buttons",), [[{"label": "1/4 승인하기", "callback_data": CALLBACK}]]),
        R.BUTTONS_MALFORMED,
    ),
    (
        "button text key",
        _set(("buttons", 0), {"text": "1/4 승인하기", "callback_data": CALLBACK}),
        R.BUTTONS_MALFORMED,
    ),
    (
        "button bad callback",
        _set(("buttons", 0, "callback_data"), "adaptive:approve"),
        R.BUTTONS_MALFORMED,
    ),
    ("button label padded", _set(("buttons", 0, "label"), " 1/4 승인하기"), R.BUTTONS_MALFORMED),
    ("button label too long", _set(("buttons", 0, "label"), "가" * 65), R.BUTTONS_MALFORMED),
    ("button label other", _set(("buttons", 0, "label"), "승인하고 보내기"), R.BUTTONS_MISMATCH),
    (
        "button action other",
        _set(("buttons", 0, "callback_data"), "an1:000000000000000000000000:send"),
        R.BUTTONS_MISMATCH,
    ),
    ("buttons missing", _set(("buttons",), []), R.BUTTONS_MISMATCH),
    ("buttons reordered", lambda p: p["buttons"].reverse(), R.BUTTONS_MISMATCH),
    (
        "header label",
        _set(
            ("text",),
            "테스트 전용 · 고객: 다른 고객 · KST day: 2026-07-28 · revision: 1 · state: proposed\n진행 1/4 · 제안 검토 중 · 다음: 승인하기\n\n"
            + TH_ADAPTIVE_BODY,
        ),
        R.HEADER_MISMATCH,
    ),
    ("no header", _set(("text",), TH_ADAPTIVE_BODY), R.HEADER_MISMATCH),
    (
        "old title",
        _set(("text",), "[듀얼코치] 적응형 영양 제안\n━━━━━━━━━━━━\n" + TH_ADAPTIVE_BODY),
        R.HEADER_MISMATCH,
    ),
    (
        "progress",
        lambda p: p.update(text=p["text"].replace("제안 검토 중", "검토 중", 1)),
        R.PROGRESS_MISMATCH,
    ),
    (
        "no blank after progress",
        lambda p: p.update(text=p["text"].replace("승인하기\n\n", "승인하기\n", 1)),
        R.BODY_SEPARATOR_MISSING,
    ),
    (
        "two blanks after progress",
        lambda p: p.update(text=p["text"].replace("승인하기\n\n", "승인하기\n\n\n", 1)),
        R.BODY_SEPARATOR_MISSING,
    ),
    (
        "empty body",
        lambda p: p.update(text=p["text"].split("\n\n")[0] + "\n\n"),
        R.BODY_SEPARATOR_MISSING,
    ),
]


@pytest.mark.parametrize(("name", "edit", "reason"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_payloads_are_ineligible(name: str, edit: Edit, reason: R) -> None:
    p = copy.deepcopy(payload(TH_ADAPTIVE_BODY))
    edit(p)
    assert reason_of(p) is reason


def test_not_a_mapping() -> None:
    assert reason_of(["status", "card"]) is R.PAYLOAD_MALFORMED


def test_pressed_callback_must_be_the_hosts() -> None:
    assert (
        reason_of(payload(TH_ADAPTIVE_BODY), callback="adaptive:approve:s:1")
        is R.CALLBACK_MALFORMED
    )
    assert reason_of(payload(TH_ADAPTIVE_BODY), callback=None) is R.CALLBACK_MALFORMED


def test_surface_decides_the_grammar() -> None:
    dual = payload(TH_ADAPTIVE_BODY)
    physique = payload(PHYSIQUE_BODY)
    assert parse_adaptive(dual, callback_data=CALLBACK, origin=FRESH).surface == DUAL_SURFACE
    assert (
        parse_adaptive(physique, callback_data=CALLBACK, origin=FRESH).surface == PHYSIQUE_SURFACE
    )
    # The deployed profile's surface is authoritative: the other grammar fails.
    assert reason_of(dual, surface=PHYSIQUE_SURFACE) is R.STATUS_LINE_MISSING
    assert reason_of(physique, surface=DUAL_SURFACE) is R.CARD_TITLE_INVALID
    assert reason_of(dual, surface="adaptive.unknown.card.v1") is R.UNKNOWN_SURFACE
    neither = payload("어떤 본문\n마지막 줄")
    assert reason_of(neither) is R.BODY_GRAMMAR_UNKNOWN


def test_resolve_surface_refuses_an_unknown_surface_itself() -> None:
    """`resolve_surface` is public: its own unknown-surface path, not only the one
    `adaptive_card` checks first."""
    card = fresh_card(payload(TH_ADAPTIVE_BODY), callback_data=CALLBACK, origin=FRESH)
    assert resolve_surface(card, None) == DUAL_SURFACE
    assert resolve_surface(card, PHYSIQUE_SURFACE) == PHYSIQUE_SURFACE
    for surface in ("adaptive.unknown.card.v1", "daily.v1", ""):
        with pytest.raises(Ineligible) as e:
            resolve_surface(card, surface)
        assert e.value.reason is R.UNKNOWN_SURFACE


def test_fresh_card_splits_envelope_and_body() -> None:
    p = payload(TH_ADAPTIVE_BODY, revision=4, state="held")
    card = fresh_card(p, callback_data="an1:abcdefabcdefabcdefabcdef:hold", origin=FRESH)
    assert card.session_id == "abcdefabcdefabcdefabcdef" and card.action == "hold"
    assert card.envelope_text + card.body == p["text"]
    assert card.body == TH_ADAPTIVE_BODY
    assert card.revision == 4 and card.envelope.state == "held"


def test_card_payload_refuses_what_the_reader_refuses() -> None:
    with pytest.raises(ValueError):
        card_payload(
            body=TH_ADAPTIVE_BODY,
            customer_key="c",
            customer_label="l",
            kst_day="2026-13-01",
            revision=1,
            state="proposed",
            proposal_digest="c" * 64,
            sessions=["0" * 24] * 5,
        )
    with pytest.raises(ValueError):
        card_payload(
            body=TH_ADAPTIVE_BODY,
            customer_key="c",
            customer_label="l",
            kst_day="2026-01-01",
            revision=1,
            state="proposed",
            proposal_digest="c" * 64,
            sessions=["0" * 24],
        )


COVERED_REASONS = {m[2] for m in MALFORMED} | {
    R.STATUS_MENU,
    R.STATUS_VIEW,
    R.STATUS_SELECTED,
    R.STATUS_OPERATOR_INPUT,
    R.STATUS_TERMINAL,
    R.STATUS_DUPLICATE,
    R.STATUS_REJECTED,
    R.STATUS_NOT_CARD,
    R.RECOVERY_PAYLOAD,
    R.FACTS_INVALID,
    R.CALLBACK_MALFORMED,
    R.UNKNOWN_SURFACE,
    R.BODY_GRAMMAR_UNKNOWN,
}


# --- properties: host-shaped payloads and their near misses --------------------------------


@given(host_payloads(dual_bodies() | physique_bodies()), STATES)
def test_another_states_buttons_or_progress_are_refused(p: dict[str, Any], other: str) -> None:
    state = p["envelope"]["state"]
    surface = parse_adaptive(p, callback_data=CALLBACK, origin=FRESH, glossary=OPERATOR_GLOSSARY)
    assert presented_host_text(surface) == p["text"]
    allowed = (expected_buttons(state), expected_buttons(state, schedule_confirm=True))
    if expected_buttons(other) not in allowed:
        swapped = copy.deepcopy(p)
        swapped["buttons"] = [
            {"label": label, "callback_data": f"an1:{'0' * 24}:{action}"}
            for label, action in expected_buttons(other)
        ]
        assert reason_of(swapped) is R.BUTTONS_MISMATCH
    if progress_line(other) != progress_line(state):  # (other states' buttons may be equal)
        lines = p["text"].split("\n")
        lines[1] = progress_line(other)
        assert reason_of({**p, "text": "\n".join(lines)}) is R.PROGRESS_MISMATCH


@given(host_payloads(dual_bodies()), st.text(min_size=1, max_size=12))
def test_any_other_status_is_ineligible(p: dict[str, Any], status: str) -> None:
    if status != "card":
        with pytest.raises(Ineligible):
            parse_adaptive({**p, "status": status}, callback_data=CALLBACK, origin=FRESH)

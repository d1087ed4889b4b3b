"""The card's locked envelope lines and buttons, as the host lays them out. Pure.

The host (Hermes gateway, pinned at ``Carrie111998/Hermes@4305027f``;
docs/host-formats-adaptive.md) renders a card's text as
``HEADER "\\n" PROGRESS "\\n\\n" BODY`` (the payload and its eligibility are
`gateway_shim.surfaces.card`'s), where::

    HEADER   = "테스트 전용 · 고객: {customer_label} · KST day: {kst_day}
                · revision: {revision} · state: {state}"          (one line)
    PROGRESS = PROGRESS_LINES[state], or "현재 상태: {state}"

The buttons are the state's exact (label, action) list (``STATE_BUTTONS``); the
``일정 확정``/``schedule_confirm`` button may lead the list of ``proposed``,
``edited`` and ``released`` (the host shows it only when schedule confirmation is
enabled). A button's ``callback_data`` is ``an1:<24 hex session>:<action>``
(``CALLBACK_RE``): the session id is in the callback data of the button the
operator pressed (``parse_callback``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from gateway_shim.surfaces._model import Ineligible, IneligibleReason

__all__ = [
    "CALLBACK_RE",
    "ENVELOPE_MARKER",
    "PROGRESS_LINES",
    "SCHEDULE_CONFIRM_BUTTON",
    "STATE_BUTTONS",
    "expected_buttons",
    "header_line",
    "parse_callback",
    "progress_line",
]

ENVELOPE_MARKER: Final = "테스트 전용"

# N:_ADAPTIVE_CALLBACK_RE at the pin.
CALLBACK_RE: Final = re.compile(
    r"an1:([a-f0-9]{24}):(select|create|view|edit_note|hold|release|approve|"
    r"schedule_confirm|activate|delivery_enable|delivery_revoke|send|reconcile|back)"
)

# N:_operator_card_envelope, progress line per state.
PROGRESS_LINES: Final[Mapping[str, str]] = {
    "proposed": "진행 1/4 · 제안 검토 중 · 다음: 승인하기",
    "edited": "진행 1/4 · 메모 수정됨 · 다음: 승인하기",
    "released": "진행 1/4 · 보류 해제됨 · 다음: 승인하기",
    "held": "검토 보류 중 · 다음: 검토 다시 시작",
    "approved": "진행 2/4 · 승인 완료 · 다음: 활성화하기",
    "activated": "진행 3/4 · 활성화 완료 · 다음: 고객 전송 허용",
    "delivery_enabled": "진행 4/4 · 전송 허용됨 · 다음: 고객에게 전송",
    "delivery_revoked": "안전 잠금 · 고객 전송 비활성화 · 다음: 고객 전송 다시 허용",
}
_OTHER_STATE_PREFIX: Final = "현재 상태: "

_VIEW: Final = ("고급 · 내용 보기", "view")
_BACK: Final = ("이전", "back")
# N:_card_buttons: (label, action) per state, in display order.
STATE_BUTTONS: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    **{
        state: (
            ("1/4 승인하기", "approve"),
            _VIEW,
            ("고급 · 메모 수정", "edit_note"),
            ("고급 · 보류", "hold"),
            _BACK,
        )
        for state in ("proposed", "edited", "released")
    },
    "held": (("검토 다시 시작", "release"), _VIEW, _BACK),
    "approved": (("2/4 활성화하기", "activate"), _VIEW, _BACK),
    "activated": (("3/4 고객 전송 허용", "delivery_enable"), _VIEW, _BACK),
    "delivery_enabled": (
        ("4/4 고객에게 전송", "send"),
        ("고급 · 전송 권한 회수", "delivery_revoke"),
        ("고급 · 전송 기록 확인", "reconcile"),
        _VIEW,
        _BACK,
    ),
    "delivery_revoked": (("고객 전송 다시 허용", "delivery_enable"), _VIEW, _BACK),
}
_OTHER_STATE_BUTTONS: Final = (_VIEW, _BACK)
SCHEDULE_CONFIRM_BUTTON: Final = ("일정 확정", "schedule_confirm")
_SCHEDULE_CONFIRM_STATES: Final = frozenset({"proposed", "edited", "released"})


def header_line(label: str, kst_day: str, revision: int, state: str) -> str:
    return (
        f"{ENVELOPE_MARKER} · 고객: {label} · KST day: {kst_day} · revision: {revision}"
        f" · state: {state}"
    )


def progress_line(state: str) -> str:
    return PROGRESS_LINES.get(state, _OTHER_STATE_PREFIX + state)


def expected_buttons(state: str, *, schedule_confirm: bool = False) -> tuple[tuple[str, str], ...]:
    """The (label, action) list the host renders for ``state``."""
    buttons = STATE_BUTTONS.get(state, _OTHER_STATE_BUTTONS)
    if schedule_confirm and state in _SCHEDULE_CONFIRM_STATES:
        return (SCHEDULE_CONFIRM_BUTTON, *buttons)
    return buttons


def parse_callback(callback_data: object) -> tuple[str, str]:
    """``an1:<session>:<action>`` → (session id, action), else ``Ineligible``."""
    if not isinstance(callback_data, str):
        raise Ineligible(IneligibleReason.CALLBACK_MALFORMED)
    match = CALLBACK_RE.fullmatch(callback_data)
    if match is None:
        raise Ineligible(IneligibleReason.CALLBACK_MALFORMED)
    return match.group(1), match.group(2)

"""Host-shaped adaptive card payloads for the surface tests: the golden samples,
a builder, and Hypothesis strategies over every envelope state, its buttons
(with and without ``일정 확정``), labels, days, revisions and bodies.

The payload shape, envelope lines and buttons are the host's at
``Carrie111998/Hermes@4305027f`` (docs/host-formats-adaptive.md).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, Final

from hypothesis import strategies as st

from gateway_shim.operator_glossary import DualGlossary, parse_operator_glossary
from gateway_shim.surfaces.card import PROGRESS_LINES, card_payload, expected_buttons
from gateway_shim.surfaces.dual import JUDGMENT_LABEL, format_dual_body
from gateway_shim.surfaces.physique import REVIEW_HEADING, STATUS_LINE

GOLDENS: Final = Path(__file__).parent / "goldens"

# The dual sample body, verbatim: Carrie111998/Hermes@4305027f67e404cddc634cbd7da5c1825ac7920d,
# tests/gateway/test_korean_humanizer.py, the ADAPTIVE fixture (it has no envelope;
# in a real payload it follows the two envelope lines and a blank line).
TH_ADAPTIVE_BODY: Final = (
    "적응형 영양 검토 · 린매스업\n\n가상 테스트 고객 · 2026-07-28\n"
    "현재 판단: 순응도 근거 충돌로 조정 보류\n\n권장안\n\n- 칼로리와 매크로를 변경하지 않음"
    "\n\n검토 필요\n\n같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다.\n"
    "최신 확정 기록을 기준으로 다시 계산해야 합니다.\n\n고객에게는 아직 전달되지 않았습니다."
)
PUBLIC_DECISION: Final = "순응도 근거 충돌로 조정 보류"
PUBLIC_REASONS: Final = (
    "같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다.",
    "최신 확정 기록을 기준으로 다시 계산해야 합니다.",
)

# A physique body in the plan's described shape. NOT a host text: nothing of the
# physique-coach body is public; only "결정: ", "근거: " and the status line are
# given (by the plan). The other lines are made up to stand for private lines.
PHYSIQUE_BODY: Final = (
    "가상 피지크 고객 · 2026-07-28 · D+12\n결정: 칼로리 유지\n근거: 주간 변화가 목표 범위 안\n"
    "목표 체중 범위 유지\n\n" + STATUS_LINE
)

CALLBACK: Final = "an1:0123456789abcdef01234567:create"
DIGEST: Final = "c" * 64


def sessions(n: int, seed: int = 0) -> list[str]:
    return [f"{seed + i:024x}" for i in range(n)]


def payload(
    body: str,
    *,
    state: str = "proposed",
    schedule_confirm: bool = False,
    label: str = "가상 테스트 고객",
    day: str = "2026-07-28",
    revision: int = 1,
    customer_key: str = "client_001",
    digest: str = DIGEST,
) -> dict[str, Any]:
    n = len(expected_buttons(state, schedule_confirm=schedule_confirm))
    return card_payload(
        body=body,
        customer_key=customer_key,
        customer_label=label,
        kst_day=day,
        revision=revision,
        state=state,
        proposal_digest=digest,
        sessions=sessions(n),
        schedule_confirm=schedule_confirm,
    )


def host_examples() -> list[dict[str, Any]]:
    """The adaptive rows of goldens/host-examples.jsonl (HOST-FORMATS A1-A4)."""
    rows = []
    for line in (GOLDENS / "host-examples.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if "payload" in row["request"]:
                rows.append(row)
    return rows


# An operator glossary with several private-looking texts (made up for the tests).
OPERATOR_FILE: Final = {
    "version": "kexpr-dual-glossary-v1",
    "decisions": {
        "P_DUAL_DECISION_KEEP_TARGET": "현재 목표 섭취량 유지",
        "P_DUAL_DECISION_CARB_SHIFT": "탄수화물 배분 조정 후보",
    },
    "reasons": {
        "P_DUAL_REASON_TREND_SHORT": "체중 추세를 판단할 기간이 짧습니다.",
        "P_DUAL_REASON_INTAKE_GAP": "섭취 기록과 계획의 차이가 큽니다.",
        "P_DUAL_REASON_COOLDOWN": "직전 조정 이후 대기 기간입니다.",
    },
}


def operator_glossary() -> DualGlossary:
    return parse_operator_glossary(json.dumps(OPERATOR_FILE, ensure_ascii=False).encode())


OPERATOR_GLOSSARY: Final = operator_glossary()
_DECISION_TEXTS: Final = tuple(OPERATOR_GLOSSARY.decisions.values())
_REASON_LINES: Final = tuple(t + "." for t in OPERATOR_GLOSSARY.reasons.values())

# --- strategies ------------------------------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=24)
STATES = st.sampled_from((*PROGRESS_LINES, "delivery_pending", "reviewing"))
LABELS = _TEXT
DAYS = st.dates(dt.date(2020, 1, 1), dt.date(2035, 12, 31)).map(dt.date.isoformat)
REVISIONS = st.integers(1, 10**6)
HEAD_LINES = st.lists(
    _TEXT.filter(lambda t: not t.startswith(JUDGMENT_LABEL)), min_size=1, max_size=3
)
_PRIVATE = _TEXT.filter(
    lambda t: (
        not t.startswith(("결정: ", "근거: ", JUDGMENT_LABEL))
        and t not in (REVIEW_HEADING, STATUS_LINE)
    )
)


@st.composite
def dual_bodies(draw: st.DrawFn) -> str:
    reasons = draw(st.lists(st.sampled_from(_REASON_LINES), unique=True, max_size=3))
    details = draw(st.none() | st.lists(_PRIVATE, min_size=1, max_size=3).map("\n".join))
    return format_dual_body(
        goal=draw(_TEXT),
        head=tuple(draw(HEAD_LINES)),
        decision=draw(st.sampled_from(_DECISION_TEXTS)),
        recommendations=tuple(draw(st.lists(_TEXT, min_size=1, max_size=3))),
        reasons=tuple(reasons),
        details=details,
    )


@st.composite
def physique_bodies(draw: st.DrawFn) -> str:
    before = draw(st.lists(_PRIVATE, max_size=3))
    after = draw(st.lists(_PRIVATE, max_size=3))
    lines = [
        *before,
        "결정: " + draw(_TEXT),
        "근거: " + draw(_TEXT),
        *after,
    ]
    blank = draw(st.booleans())
    return "\n".join(lines) + ("\n\n" if blank else "\n") + STATUS_LINE


@st.composite
def host_payloads(draw: st.DrawFn, bodies: st.SearchStrategy[str]) -> dict[str, Any]:
    return payload(
        draw(bodies),
        state=draw(STATES),
        schedule_confirm=draw(st.booleans()),
        label=draw(LABELS),
        day=draw(DAYS),
        revision=draw(REVISIONS),
    )

"""A test-only model of the real host's daily and weekly renderers.

Our own code, written from the description of the host's behaviour in
docs/host-formats.md (Hermes@4305027f ``gateway/platforms/telegram.py``:
``TelegramAdapter._nutrition_daily_text`` and ``_nutrition_report_text`` and
their helpers), with the plan's daily cutover status. It turns random *facts*
(check-in answers, a weekly summary) into the bodies the host would render, so
property tests can assert eligibility and the round trip on host-shaped bodies.
It deliberately shares no code with the adapters it tests (no import of
``gateway_shim.surfaces``): the layout and every fixed string are written out
again here.

Nothing here is product code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

MISSING: Final = "기록 없음"

# --- shared helpers (the host's number and text rules) -------------------------------

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_INTERNAL_TOKENS: Final = (
    "reason_code",
    "insufficient_data",
    "missing_data",
    "safety_hold",
    "provider_",
)


def collapse(value: object) -> str:
    """Whitespace-collapsed ``str()``."""
    return " ".join(str(value).split())


def first_number(text: str) -> float | None:
    match = _NUMBER.search(text.replace(",", ""))
    return float(match.group()) if match else None


def number_text(n: float, digits: int = 2) -> str:
    """≤ ``digits`` decimals, trailing zeros dropped, thousands separators.

    The host builds the integer part from the truncated value and the decimals
    from the rounded one: 77.999 → "77", -0.5 → "0.5" (docs/host-formats.md).
    """
    whole = f"{int(n):,}"
    decimals = f"{n:.{digits}f}".split(".")[1].rstrip("0")
    return whole + ("." + decimals if decimals else "")


def _text_number(text: str) -> str:
    n = first_number(text)
    return text if n is None else number_text(n)


# --- daily ---------------------------------------------------------------------------

DIGESTION: Final[Mapping[str, str]] = {
    "normal": "정상",
    "none": "정상",
    "정상": "정상",
    "gas_bloating": "가스·복부 팽만",
    "bristol_1": "브리스톨 1형 · 딱딱한 알갱이",
    "bristol_2": "브리스톨 2형 · 울퉁불퉁한 소시지",
    "bristol_3": "브리스톨 3형 · 표면이 갈라진 소시지",
    "bristol_4": "브리스톨 4형 · 매끈하고 부드러운 형태",
    "bristol_5": "브리스톨 5형 · 가장자리가 뚜렷한 부드러운 덩어리",
    "bristol_6": "브리스톨 6형 · 가장자리가 흐리고 묽게 풀어진 변",
    "bristol_7": "브리스톨 7형 · 고형물 없는 완전한 물변",
}
SKIP_WORDS: Final = frozenset({"skip", "none", "n/a", "na"})
_MACRO_KEYS: Final = (
    ("carbohydrate", "carbohydrates", "탄수화물", "탄수"),
    ("protein", "단백질"),
    ("fat", "지방"),
)
_MACRO_PATTERNS: Final = tuple(
    re.compile(rf"(?:{names})\s*[:：]?\s*([-+]?\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)
    for names in ("탄수화물|탄수|carb(?:ohydrate)?s?", "단백질|protein", "지방|fat")
)


def _value(answers: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = answers.get(key)
        if isinstance(value, Mapping) and value.get("value") is not None:
            value = value["value"]
        if value is None:
            continue
        text = collapse(value)
        if text:
            return text[:500]
    return ""


def _with_unit(text: str, unit: str, marker: str) -> str:
    if marker.lower() in text.lower():
        return text
    return _text_number(text) + unit


def _scaled(text: str) -> str:
    if "/" in text:
        return text
    n = first_number(text)
    return text if n is None else number_text(n) + "/5"


def _macros(raw: object) -> str:
    def triple(c: str, p: str, f: str) -> str:
        return f"탄수화물 {c}g · 단백질 {p}g · 지방 {f}g"

    if isinstance(raw, Mapping):
        found = []
        for names in _MACRO_KEYS:
            value = next((raw[k] for k in names if raw.get(k) is not None), None)
            if value is None or not collapse(value):
                return "탄수화물·단백질·지방: " + MISSING
            found.append(_text_number(collapse(value)))
        return triple(*found)
    text = collapse(raw) if raw is not None else ""
    if not text:
        return "탄수화물·단백질·지방: " + MISSING
    matches = [p.search(text) for p in _MACRO_PATTERNS]
    if all(matches):
        return triple(*(number_text(float(m.group(1).replace(",", ""))) for m in matches if m))
    return text


def _training(answers: Mapping[str, Any]) -> str:
    summary = _value(answers, "training_summary", "training_plan")
    parts = []
    if summary and summary.lower() not in SKIP_WORDS:
        parts.append("휴식" if summary.lower() == "rest" else summary)
    for key in ("performance", "intensity", "workout_quality"):
        detail = _value(answers, key)
        if detail and detail.lower() not in SKIP_WORDS:
            parts.append(detail)
    return " · ".join(parts) if parts else MISSING


def daily_facts(answers: Mapping[str, Any]) -> list[str]:
    """The seven rendered fact strings (the text after ``"- "``)."""
    weight = _value(answers, "bodyweight")
    calories = _value(answers, "calories")
    duration = _value(answers, "sleep_duration")
    quality = _value(answers, "sleep_quality")
    condition = _value(answers, "condition")
    digestion = _value(answers, "digestion")
    sleep = MISSING
    if duration:
        sleep = _with_unit(duration, "시간", "시간")
        if quality:
            sleep += " · 수면 질 " + _scaled(quality)
    return [
        "체중: " + (_with_unit(weight, "kg", "kg") if weight else MISSING),
        "섭취: " + (_with_unit(calories, "kcal", "kcal") if calories else MISSING),
        _macros(answers.get("macros")),
        "운동: " + _training(answers),
        "수면: " + sleep,
        "컨디션: " + (_scaled(condition) if condition else MISSING),
        "소화: " + (DIGESTION.get(digestion.lower(), digestion) if digestion else MISSING),
    ]


def render_daily(answers: Mapping[str, Any]) -> str:
    """The host's daily body after the plan's cutover (no feedback)."""
    facts = daily_facts(answers)
    missing = any(f.endswith(MISSING) for f in facts)
    status = (
        "일부 항목이 기록되지 않아 저장된 내용만 안내합니다."
        if missing
        else "저장된 오늘 기록을 확인했습니다."
    )
    if missing:
        actions = ["다음 체크인에서 빠진 항목을 함께 기록해 주세요."]
    else:
        actions = []
        if _value(answers, "calories"):
            actions.append("현재 식사량 유지")
        water = _value(answers, "water")
        if water:
            amount = water if "l" in water.lower() else _text_number(water) + "L"
            actions.append(f"수분 {amount} 이상 유지")
        if _value(answers, "bodyweight"):
            actions.append("내일 아침 같은 조건으로 체중 측정")
        if not actions:
            actions = ["다음 체크인에서도 같은 항목을 기록해 주세요."]
    return (
        "오늘 체크인 완료\n\n"
        + "\n".join("- " + f for f in facts)
        + "\n\n"
        + status
        + "\n\n오늘 할 일\n\n"
        + "\n".join("- " + a for a in actions)
    )


# --- weekly --------------------------------------------------------------------------

RECENT_FIELDS: Final = (
    "recent_average_weight_kg",
    "recent_7d_average_weight_kg",
    "recent_average_weight",
    "current_average_weight_kg",
    "average_weight_kg",
    "average_weight",
)
PRIOR_FIELDS: Final = (
    "prior_average_weight_kg",
    "prior_7d_average_weight_kg",
    "prior_average_weight",
    "previous_average_weight_kg",
    "previous_7d_average_weight_kg",
    "previous_average_weight",
)
CHANGE_FIELDS: Final = (
    "weekly_change_percent",
    "weight_change_percent",
    "change_percent",
    "weekly_weight_change_percent",
)
RATE_FIELDS: Final = (
    "checkin_rate_percent",
    "completion_rate_percent",
    "rate_percent",
    "checkin_rate",
)
GOAL_FIELDS: Final = ("goal_range", "target_range", "weight_goal_range", "weight_change_goal_range")
INTERPRETATION_FIELDS: Final = ("interpretation", "trend_interpretation", "summary_text")
RATIONALE_FIELDS: Final = ("rationale", "judgment_rationale", "reason")
JUDGMENT_FIELDS: Final = ("judgment", "weekly_judgment", "decision", "current_judgment")

BRANCH_TEXT: Final[Mapping[str, str]] = {
    "I1": "최근 7일 평균과 이전 7일 평균을 확인할 수 없어 추세를 판단하지 않습니다.\n"
    "기록이 보완된 뒤 유지·조정 여부를 다시 확인합니다.",
    "I2": "최근 7일 평균과 이전 7일 평균의 차이를 확인했습니다.\n"
    "목표 범위가 없어 이번 주 조정 판단은 보류합니다.",
    "I3": "체중은 린매스업 목표 범위 안에서 안정적으로 증가했습니다.\n"
    "현재 속도라면 이번 주에는 기준을 유지합니다.",
    "I4": "주간 체중 변화가 린매스업 목표 범위를 벗어났습니다.\n"
    "다음 기록에서 섭취와 체중 추세를 함께 확인합니다.",
}
RATIONALE_TEXT: Final[Mapping[str, str]] = {
    "유지": "급격한 증량이나 정체가 없어 이번 주에는 기준을 유지합니다.",
    "조정 검토": "목표 범위를 벗어난 변화가 확인되어 다음 기록에서 조정을 검토합니다.",
    "기록 보완": "기록이 충분하지 않아 이번 주 판단을 확정하지 않습니다.",
}
DEFAULT_ACTION: Final[Mapping[str, str]] = {
    "유지": "다음 주에도 같은 조건으로 체중 추세를 확인합니다.",
    "조정 검토": "다음 기록에서 섭취량과 체중 변화를 함께 확인합니다.",
    "기록 보완": "다음 체크인에서 체중과 섭취 기록을 보완합니다.",
}


def _field(summary: Mapping[str, Any], names: Sequence[str]) -> object:
    for name in names:
        value = summary.get(name)
        if value is not None and collapse(value):
            return value
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return first_number(str(value))


def _pct(n: float) -> str:
    return "0.00%" if n == 0 else f"{n:+.2f}%"


def _kg(n: float | None) -> str:
    return MISSING if n is None else f"{n:,.2f}kg"


def _bounds(raw: object) -> tuple[float, float] | None:
    pair: list[float | None]
    if isinstance(raw, Mapping):
        low = next((raw[k] for k in ("min", "low", "start", "minimum") if k in raw), None)
        high = next((raw[k] for k in ("max", "high", "end", "maximum") if k in raw), None)
        pair = [_number(low), _number(high)]
    elif isinstance(raw, (list, tuple)) and len(raw) == 2:
        pair = [_number(raw[0]), _number(raw[1])]
    elif isinstance(raw, str):
        found = _NUMBER.findall(raw.replace(",", ""))
        pair = [float(x) for x in found[:2]] if len(found) >= 2 else [None, None]
    else:
        return None
    if pair[0] is None or pair[1] is None:
        return None
    return (min(pair[0], pair[1]), max(pair[0], pair[1]))


def _goal_text(raw: object) -> str:
    if raw is None:
        return MISSING
    if isinstance(raw, (Mapping, list, tuple)):
        bounds = _bounds(raw)
        if bounds is not None:
            # The host keeps the given order for the text.
            if isinstance(raw, Mapping):
                low = next(raw[k] for k in ("min", "low", "start", "minimum") if k in raw)
                high = next(raw[k] for k in ("max", "high", "end", "maximum") if k in raw)
            else:
                low, high = raw[0], raw[1]
            return f"{_pct(_number(low) or 0.0)}~{_pct(_number(high) or 0.0)}"
    return collapse(raw)[:200]


def copy_lines(value: object, limit: int) -> list[str]:
    items = list(value) if isinstance(value, (list, tuple)) else str(value).split("\n")
    out = []
    for item in items:
        text = collapse(item).strip(" -•\t")
        if not text or any(t in text.lower() for t in _INTERNAL_TOKENS):
            continue
        out.append(text)
        if len(out) == limit:
            break
    return out


def render_weekly(summary: Mapping[str, Any]) -> tuple[str, frozenset[str]]:
    """The host's weekly body and the names of the explicit prose fields present."""
    recent = _number(_field(summary, RECENT_FIELDS))
    prior = _number(_field(summary, PRIOR_FIELDS))
    change_raw = _field(summary, CHANGE_FIELDS)
    change = _number(change_raw)
    if change is None and recent is not None and prior is not None and prior != 0:
        change = (recent - prior) / prior * 100
    if change is not None:
        change_text = _pct(change)
    else:
        change_text = MISSING if change_raw is None else collapse(change_raw)
    rate_raw = _field(summary, RATE_FIELDS)
    rate = _number(rate_raw)
    goal_raw = _field(summary, GOAL_FIELDS)
    bounds = _bounds(goal_raw)

    facts = [
        "최근 7일 평균 체중: " + _kg(recent),
        "이전 7일 평균 체중: " + _kg(prior),
        "주간 변화: " + change_text,
    ]
    if rate_raw is not None:
        facts.append(
            "체크인율: " + (number_text(rate) + "%" if rate is not None else collapse(rate_raw))
        )
    facts.append("목표 범위: " + _goal_text(goal_raw))

    explicit = [
        line for f in INTERPRETATION_FIELDS if f in summary for line in copy_lines(summary[f], 2)
    ]
    if explicit:
        interpretation = "\n".join(explicit[:2])
    elif recent is None or prior is None or change is None:
        interpretation = BRANCH_TEXT["I1"]
    elif bounds is None:
        interpretation = BRANCH_TEXT["I2"]
    elif bounds[0] <= change <= bounds[1]:
        interpretation = BRANCH_TEXT["I3"]
    else:
        interpretation = BRANCH_TEXT["I4"]

    judgment = None
    judgment_raw = _field(summary, JUDGMENT_FIELDS)
    if judgment_raw is not None:
        text = collapse(judgment_raw)
        judgment = next((j for j in ("조정 검토", "기록 보완", "유지") if j in text), None)
    if judgment is None:
        if (
            recent is None
            or prior is None
            or change is None
            or bounds is None
            or (rate is not None and rate < 80)
        ):
            judgment = "기록 보완"
        else:
            judgment = "유지" if bounds[0] <= change <= bounds[1] else "조정 검토"

    actions: list[str] = []
    for name in ("actions", "next_actions", "recommended_actions"):
        if summary.get(name) is not None:
            actions = copy_lines(summary[name], 6)
            if actions:
                break
    if not actions:
        for name in ("keep_behaviors", "change_behaviors"):
            if summary.get(name) is not None:
                actions += copy_lines(summary[name], 6)
        actions = actions[:6]
    if not actions:
        for name in ("next_decision", "next_action"):
            if summary.get(name) is not None:
                actions = copy_lines(summary[name], 1)
                if actions:
                    break
    if not actions:
        actions = [DEFAULT_ACTION[judgment]]

    rationale_lines = [
        line for f in RATIONALE_FIELDS if f in summary for line in copy_lines(summary[f], 1)
    ]
    rationale = rationale_lines[0] if rationale_lines else RATIONALE_TEXT[judgment]

    body = (
        "이번 주 린매스업 리포트\n\n"
        + "\n".join("- " + f for f in facts)
        + "\n\n"
        + interpretation
        + "\n\n이번 주 판단: "
        + judgment
        + "\n\n"
        + "\n".join("- " + a for a in actions)
        + "\n\n"
        + rationale
    )
    present = frozenset(f for f in (*INTERPRETATION_FIELDS, *RATIONALE_FIELDS) if f in summary)
    return body, present

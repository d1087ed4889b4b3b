"""The test-only model of the host's renderers (host_render.py) on the host's value
quirks, each read from Hermes@4305027f ``gateway/platforms/telegram.py`` (behaviour
described in our words; no host code here). The surface properties draw their
bodies from this model, so where it differs from the host they prove less."""

from __future__ import annotations

from typing import Any

import pytest

from reference_host.host_render import copy_lines, daily_facts, render_weekly

_W3: dict[str, Any] = {
    "average_weight_kg": 78.47,
    "prior_average_weight_kg": 78.34,
    "goal_range": "+0.10~+0.25%",
}


def _weekly_lines(**changes: Any) -> list[str]:
    body, _ = render_weekly({**_W3, **changes})
    return body.split("\n")


def _fact(lines: list[str], label: str) -> str | None:
    prefix = f"- {label}: "
    return next((line[len(prefix) :] for line in lines if line.startswith(prefix)), None)


@pytest.mark.parametrize(
    ("rate", "text"),
    [
        # TelegramAdapter._nutrition_rate_text: two decimals, zeros stripped, no
        # thousands separator; the rounded value, not the truncated one.
        (99.999, "100%"),
        (92.857, "92.86%"),
        (100, "100%"),
        (1234.5, "1234.5%"),
        (-0.5, "-0.5%"),
        ("약 71.4", "71.4%"),
        ("모름", "모름"),
    ],
)
def test_weekly_rate_text(rate: object, text: str) -> None:
    assert _fact(_weekly_lines(checkin_rate_percent=rate), "체크인율") == text


@pytest.mark.parametrize(
    ("goal", "text", "branch_first_line"),
    [
        # _nutrition_goal_range_text / _nutrition_goal_bounds: a mapping's first bound
        # that is not None; text bounds stay text (and give no bounds).
        ({"min": None, "low": 0.1, "max": 0.25}, "+0.10%~+0.25%", "체중은 린매스업"),
        ({"min": "약간", "max": "조금"}, "약간~조금", "최근 7일 평균과 이전 7일 평균의 차이"),
        ((0.1, 0.25), "+0.10%~+0.25%", "체중은 린매스업"),
        # Bounds from text keep separators: "1,000~2,000" reads 1 and 0, so the
        # bounds are (0, 1) and the change +0.17% lies inside them.
        ("1,000~2,000", "1,000~2,000", "체중은 린매스업"),
        ("+0.20~+0.25%", "+0.20~+0.25%", "주간 체중 변화가"),
    ],
)
def test_weekly_goal_range(goal: object, text: str, branch_first_line: str) -> None:
    body, _ = render_weekly({**_W3, "goal_range": goal})
    assert _fact(body.split("\n"), "목표 범위") == text
    assert body.split("\n\n")[2].startswith(branch_first_line)


def test_weekly_tiers_read_only_their_first_present_field() -> None:
    # _nutrition_report_field then _nutrition_copy_lines: "actions" is present (its
    # text is not blank) but yields no line, so "next_actions" is never read and the
    # behaviours tier is next; with none of them, the judgment's default.
    lines = _weekly_lines(actions=["-", "•"], next_actions=["읽히지 않음"])
    assert "- 읽히지 않음" not in lines
    assert "- 다음 주에도 같은 조건으로 체중 추세를 확인합니다." in lines


def test_copy_lines_limit_rules() -> None:
    assert copy_lines("가\r나\u2028다", 6) == ["가", "나", "다"]  # str.splitlines
    assert copy_lines(["a" * 600], 1) == ["a" * 500]
    # A token is found casefolded ("ſ" folds to "s"), and the skipped line does not count.
    assert copy_lines(["reaſon_code x", "가"], 1) == ["가"]
    # A limit of 0: a blank first item stops at once; a kept first item never stops.
    assert copy_lines(["", "가", "나"], 0) == []
    assert copy_lines(["가", "", "나", "다"], 0) == ["가", "나", "다"]


@pytest.mark.parametrize(
    ("macros", "line"),
    [
        # _nutrition_macro_text: an unsigned number without separators after each name.
        ("탄수 1,200 단백질 100 지방 50", "탄수화물 1g · 단백질 100g · 지방 50g"),
        ("탄수 -5 단백질 100 지방 50", "탄수 -5 단백질 100 지방 50"),
        ("carbs: 300.55 protein 160 fat 70", "탄수화물 300.55g · 단백질 160g · 지방 70g"),
        (
            {"탄수": "1,200", "단백질": 100, "지방": "약간"},
            "탄수화물 1,200g · 단백질 100g · 지방 약간g",
        ),
    ],
)
def test_daily_macro_line(macros: object, line: str) -> None:
    assert daily_facts({"macros": macros})[2] == line

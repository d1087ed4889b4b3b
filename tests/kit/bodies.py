"""Host-shaped bodies a test presents when the body's content is not what it tests.

- `STYLED_BODY` and `present_styled`/`apresent_styled`: the one message the fit table
  styles (design §6.1): a weekly report whose goal range is missing (branch I2), whose
  interpretation slot is the one asked; a presentation of it writes a request, and the
  worker makes its one call. `STYLED_SELECTED` is that body with the composition the
  fake API and the rehearsal model write by default (the table's first, sorted).
- `DAILY_BODY`, `DAILY_FACTS`: a daily body (docs/host-formats.md): eligible, but with
  nothing to style, so presenting it is `nothing_to_style` with zero files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway_shim import (
    DailyFacts,
    WeeklyInterpretation,
    WeeklyJudgment,
    format_daily,
    format_weekly,
)

if TYPE_CHECKING:
    from gateway_shim import KoreanExpressionCoordinator, PresentationCandidate

DAILY_BODY = format_daily(
    weight="70kg",
    intake="2,000kcal",
    macros="탄수화물 250g · 단백질 120g · 지방 60g",
    training="걷기",
    sleep="7시간",
    condition="3/5",
    digestion="정상",
    water="2L",
)
DAILY_FACTS = DailyFacts(complete=True)

STYLED_BODY = format_weekly(
    recent="72.40kg",
    prior="72.10kg",
    change="+0.42%",
    rate="85.71%",
    goal_range="기록 없음",
    interpretation=WeeklyInterpretation.GOAL_MISSING,
    judgment=WeeklyJudgment.RECORDS,
)
STYLED_SURFACE = "weekly.v1"
STYLED_HOLD = "목표 범위가 없어 이번 주 조정 판단은 보류합니다."
# The fake API's and the rehearsal model's default: the first composition, sorted.
STYLED_SELECTED = STYLED_BODY.replace("\n" + STYLED_HOLD, "\n다만 " + STYLED_HOLD, 1)
assert STYLED_SELECTED != STYLED_BODY


def present_styled(coord: KoreanExpressionCoordinator, key: str) -> PresentationCandidate:
    """Present `STYLED_BODY` as artifact ``key`` (its schedule key: one artifact a key)."""
    return coord.present_weekly(
        STYLED_BODY,
        explicit_fields=(),
        schedule_key=key,
        kind="weekly_report",
        kst_day="2025-11-30",
    )


async def apresent_styled(coord: KoreanExpressionCoordinator, key: str) -> PresentationCandidate:
    """`present_styled` through the coordinator's asyncio entry point."""
    return await coord.apresent_weekly(
        STYLED_BODY,
        explicit_fields=(),
        schedule_key=key,
        kind="weekly_report",
        kst_day="2025-11-30",
    )

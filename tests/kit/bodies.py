"""The host-shaped daily body (docs/host-formats.md, the daily layout) that a test
presents when the body's content is not what it tests, and its facts."""

from __future__ import annotations

from gateway_shim import DailyFacts, format_daily

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

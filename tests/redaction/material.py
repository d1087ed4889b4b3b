"""Random customer material for the redaction proofs.

Korean and Latin names, numbers with units, dates, free notes, chat / session /
event / schedule / proposal / message IDs and addresses — the kinds of value the
plan says must never leave the gateway. Everything is one line of printable text,
so a host could render it into a canonical body. Drawn from one seeded ``Random``
per example (an end-to-end example is dominated by the real processes, not by
Hypothesis' draws; a seed keeps failures reproducible).
"""

from __future__ import annotations

import random
import string
from typing import Final

_SURNAMES: Final = (
    "김이박최정강조윤장임한오서신권황안송류홍전고문양손배백허유남심노하곽성차주우구민진나"
)
_GIVEN: Final = (
    "민지서연하준도윤지호예린수아현우은서시우채원태희준영혜진동현소율재민유나건우다은성훈보람"
)
_LATIN_FIRST: Final = (
    "Minji",
    "Daniel",
    "Sophie",
    "José",
    "O'Brien",
    "Zoë",
    "Liam",
    "Hana",
    "Jae-won",
    "Aiko",
)
_WORDS_KO: Final = (
    "아침", "저녁", "점심", "샐러드", "닭가슴살", "현미밥", "스쿼트", "데드리프트", "러닝", "요가",
    "두통", "감기", "생리", "출장", "회식", "야근", "무릎", "허리", "통증", "복용", "영양제",
    "수면부족", "컨디션난조", "단백질쉐이크", "고구마", "김치찌개", "라면", "치킨", "맥주",
)  # fmt: skip
_WORDS_EN: Final = ("protein", "shake", "knee", "pain", "travel", "party", "deadline", "run", "gym")
_UNITS: Final = (
    "kg",
    "kcal",
    "g",
    "L",
    "ml",
    "보",
    "회",
    "세트",
    "분",
    "시간",
    "%",
    "bpm",
    "cm",
    "잔",
    "끼",
    "개",
)
_CITIES: Final = (
    "서울특별시",
    "부산광역시",
    "인천광역시",
    "대구광역시",
    "경기도 성남시",
    "제주특별자치도 제주시",
)
_DISTRICTS: Final = ("강남구", "마포구", "해운대구", "분당구", "연수구", "수성구", "중구")
_ROADS: Final = (
    "테헤란로",
    "월드컵북로",
    "해운대해변로",
    "판교역로",
    "센트럴로",
    "동대구로",
    "중앙로",
)


def _syllable(rng: random.Random) -> str:
    return chr(rng.randrange(0xAC00, 0xD7A4))


def korean_name(rng: random.Random) -> str:
    given = "".join(
        rng.choice(_GIVEN) if rng.random() < 0.7 else _syllable(rng)
        for _ in range(rng.randint(1, 2))
    )
    return rng.choice(_SURNAMES) + given


def latin_name(rng: random.Random) -> str:
    first = rng.choice(_LATIN_FIRST) if rng.random() < 0.5 else _latin_word(rng).capitalize()
    return f"{first} {_latin_word(rng).capitalize()}"


def _latin_word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))


def number_with_unit(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        number = f"{rng.randint(30, 150)}.{rng.randint(0, 9)}"
    elif kind == 1:
        number = f"{rng.randint(1, 9)},{rng.randint(0, 999):03d}"
    elif kind == 2:
        number = str(rng.randint(100, 99999))
    else:
        number = "".join(chr(0xFF10 + int(d)) for d in str(rng.randint(10, 9999)))  # fullwidth
    return number + rng.choice(_UNITS) + (f" {rng.choice(_WORDS_KO)}" if rng.random() < 0.3 else "")


def date(rng: random.Random) -> str:
    y, m, d = rng.randint(2024, 2027), rng.randint(1, 12), rng.randint(1, 28)
    hh, mm = rng.randint(0, 23), rng.randint(0, 59)
    return rng.choice(
        (
            f"{y}-{m:02d}-{d:02d}",
            f"{m}월 {d}일",
            f"{y}.{m:02d}.{d:02d}",
            f"{m}/{d} {hh:02d}:{mm:02d}",
            f"{y}년 {m}월 {d}일 {hh}시 {mm}분",
        )
    )


def note(rng: random.Random) -> str:
    words = [
        rng.choice(_WORDS_KO)
        if rng.random() < 0.6
        else (rng.choice(_WORDS_EN) if rng.random() < 0.5 else _syllable(rng) + _syllable(rng))
        for _ in range(rng.randint(2, 6))
    ]
    return " ".join(words)


def identifier(rng: random.Random) -> str:
    hexs = "".join(rng.choice("0123456789abcdef") for _ in range(rng.randint(6, 12)))
    alnum = "".join(
        rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(8, 16))
    )
    return rng.choice(
        (
            f"-100{rng.randint(10**9, 10**10 - 1)}",  # Telegram chat
            f"chat:{rng.randint(10**8, 10**10)}:topic:{rng.randint(1, 999)}",
            f"sess_{alnum}",
            f"evt-{hexs}",
            f"sched:weekly:{rng.randint(2024, 2027)}-W{rng.randint(1, 52):02d}:{alnum}",
            f"prop_{hexs}-{rng.randint(1, 99)}",
            f"msg#{rng.randint(10**4, 10**7)}",
            f"@{_latin_word(rng)}_{rng.randint(1, 999)}",
        )
    )


def address(rng: random.Random) -> str:
    return (
        f"{rng.choice(_CITIES)} {rng.choice(_DISTRICTS)} {rng.choice(_ROADS)} "
        f"{rng.randint(1, 500)}길 {rng.randint(1, 99)}, {rng.randint(101, 2505)}호"
    )


KINDS: Final = (korean_name, latin_name, number_with_unit, date, note, identifier, address)


def any_value(rng: random.Random) -> str:
    return rng.choice(KINDS)(rng)


def mixed(rng: random.Random, parts: int) -> str:
    """A line mixing ``parts`` values of different kinds (a title, an action)."""
    return " ".join(any_value(rng) for _ in range(parts))

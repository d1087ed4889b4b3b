"""The style lexicon and the forbidden vocabulary (design §6: the style grammar,
prohibited claims, and deterministic rejection).

Rules for this module:

Rule 1: `SAFE_STYLE_LEXEMES` is the *only* Korean the model may write outside a token.
        It is a reviewed code constant, never prompt-only policy: a change needs review
        and golden updates (design §6).
Rule 2: no lexeme contains a forbidden substring (vocabulary, negation/modality,
        evidential claim) and none is a number, unit or date word; no concatenation of
        lexemes forms an evidential claim (the evidential check joins the words of a
        segment). `tests/contract/test_contract_lexicon.py` proves this.
Rule 3: the forbidden lists exist to give a *precise reason*; they are not what keeps
        the output safe. Anything not in the lexicon is rejected as `unknown_word`
        anyway, so extending a forbidden list can only change a rejection's reason,
        never turn a rejection into an acceptance.
Rule 4: whole-word lists are matched against a whole word (a maximal run between space,
        comma, period and token), because lexemes contain number syllables: 하나씩
        contains 하나, 이제/이어서 contain 이, 함께 contains 함. Substring lists are
        matched inside words.
"""

from __future__ import annotations

from typing import Final

SAFE_STYLE_LEXEMES: Final[tuple[str, ...]] = (
    "차분히",
    "천천히",
    "가볍게",
    "우선",
    "먼저",
    "이어서",
    "또",
    "그리고",
    "하나씩",
    "순서대로",
    "함께",
    "지금",
    "이제",
    "여기서",
    "아래",
    "바로",
    "그대로",
    "특히",
    "잠시",
    "다시",
    # Beyond the plan's twenty (its "code/golden review" route): the one word blind
    # readers preferred to the host's text (design §6.2, reading/verdicts.json).
    "다만",
)

# Whole words. Native and Sino-Korean numerals, their determiner forms (한/두/세/네),
# ordinals, and day counts (하루 이틀 …) — a count of days is a number and a date.
NUMBER_WORDS: Final[frozenset[str]] = frozenset(
    {
        # native
        "하나", "둘", "셋", "넷", "다섯", "여섯", "일곱", "여덟", "아홉", "열",
        "스물", "서른", "마흔", "쉰", "예순", "일흔", "여든", "아흔",
        "한", "두", "세", "네", "스무",
        # Sino-Korean
        "영", "공", "일", "이", "삼", "사", "오", "육", "칠", "팔", "구",
        "십", "백", "천", "만", "억", "조",
        # ordinals
        "첫", "첫째", "둘째", "셋째", "넷째", "다섯째", "여섯째", "일곱째", "여덟째",
        "아홉째", "열째", "첫번째", "두번째", "세번째",
        # halves and day counts
        "반", "절반", "하루", "이틀", "사흘", "나흘", "닷새", "엿새", "이레", "여드레",
        "아흐레", "열흘", "보름",
    }
)  # fmt: skip

# Hanja numerals are single characters; they are reported as number words too.
HANJA_NUMERALS: Final[frozenset[str]] = frozenset("〇零一二三四五六七八九十百千万萬億兆")

# Whole words that are a unit or a date (일 is listed as a number word and wins by
# precedence). Latin units (kg, kcal, g, L) are caught earlier as `latin`.
UNIT_DATE_WORDS: Final[frozenset[str]] = frozenset(
    {
        "주", "월", "년", "시간", "분", "초", "일간", "주간", "월간", "연간", "년간",
        "주일", "개월", "요일", "오늘", "어제", "내일", "모레", "그제", "올해", "작년",
        "내년", "이번주", "지난주", "다음주", "매일", "매주", "매월", "매년",
        "킬로", "킬로그램", "그램", "칼로리", "킬로칼로리", "리터", "밀리리터", "센티",
        "미터", "퍼센트", "프로", "원",
    }
)  # fmt: skip

# Word endings that are unambiguously a unit or a date (no Korean style word ends
# with them, and none of the lexemes does).
UNIT_DATE_SUFFIXES: Final[tuple[str, ...]] = (
    "시간", "주일", "개월", "요일", "칼로리", "킬로그램", "퍼센트",
)  # fmt: skip

# Single characters that are a unit or date symbol (㎏ ㎉ ℃ …). Currency signs
# (Unicode category Sc) are classified with them in `_grammar`.
UNIT_SYMBOLS: Final[frozenset[str]] = frozenset(
    "℃℉ℓ№㏂㏘"
    + "".join(chr(c) for c in range(0x3358, 0x3371))  # ideographic telegraph hours
    + "".join(chr(c) for c in range(0x3380, 0x33E0))  # squared units (㎏ ㎉ ㎖ …)
    + "".join(chr(c) for c in range(0x33E0, 0x33FF))  # ideographic telegraph days
    + "".join(chr(c) for c in range(0x32C0, 0x32CC))  # ideographic telegraph months
)

# Substrings, matched against the words of one between-token segment joined without
# separators (so 확인 결과 / 확인, 결과 / 확인결과 all match 확인결과). An evidential
# claim smuggles a completed-verification proposition (`확인 결과, [[A:01]].`).
EVIDENTIAL_CLAIMS: Final[tuple[str, ...]] = (
    "확인결과", "확인한결과", "확인된결과", "기록상", "분석", "데이터상", "수치상",
    "결과상", "살펴보니", "확인해보니", "보아하니",
)  # fmt: skip

# Substrings inside a word: evaluation, completeness, health/medical, safety, action,
# approval and delivery vocabulary (the product owner's list first, then the same classes).
FORBIDDEN_VOCABULARY: Final[tuple[str, ...]] = (
    # the product owner's list (design, "Where the constants come from"), verbatim
    "잘", "충분", "성공", "좋", "안전", "위험", "진단", "치료", "약", "유지", "조정",
    "측정", "기록", "승인", "전달", "전송", "보내",
    # the same classes, written out
    "완료", "완벽", "훌륭", "최고", "건강", "의료", "의학", "처방", "부상", "통증",
    "질환", "병원", "확정", "결정", "허가", "발송", "검토", "확인", "목표", "체중",
    "섭취", "식단", "운동",
)  # fmt: skip

# Negation and modality change what a proposition says (adding "not", "must", "never").
NEGATION_MODALITY_SUBSTRINGS: Final[tuple[str, ...]] = (
    "않", "없", "아니", "아닌", "말고", "마세요", "말아", "해야", "하세요", "금지",
    "불가", "절대", "반드시", "필수", "꼭", "무조건",
)  # fmt: skip
NEGATION_MODALITY_WORDS: Final[frozenset[str]] = frozenset({"안", "못", "말", "못해", "안돼"})

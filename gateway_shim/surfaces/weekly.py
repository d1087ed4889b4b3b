"""The ``weekly.v1`` surface: the host's weekly report, byte for byte.

The host (Hermes@4305027f, ``gateway/platforms/telegram.py``:
``TelegramAdapter._nutrition_report_text``; docs/host-formats.md §weekly)
renders, LF line ends, no trailing newline::

    body           ::= TITLE BLANK facts BLANK interpretation BLANK judgment
                       BLANK actions BLANK rationale END
    TITLE          ::= "이번 주 린매스업 리포트"
    facts          ::= "- 최근 7일 평균 체중: " VALUE "\\n- 이전 7일 평균 체중: " VALUE
                       "\\n- 주간 변화: " VALUE ("\\n- 체크인율: " VALUE)?
                       "\\n- 목표 범위: " VALUE
    interpretation ::= TYPED(branch)             ; one of the four typed branches
    judgment       ::= "이번 주 판단: " ("유지" | "조정 검토" | "기록 보완")
    actions        ::= "- " TEXT ("\\n- " TEXT)*      ; no upper bound (see Rule 3)
    rationale      ::= GLOSSARY[RATIONALE_OF[judgment]] "."
    TYPED(branch)  ::= GLOSSARY[id1] "." "\\n" GLOSSARY[id2] "."   ; branch order
    BLANK          ::= "\\n\\n"
    VALUE, TEXT    ::= non-empty customer text, no control or line-break character

Rules of this module:

Rule 1 — eligibility is decided by the host's summary first (plan manifest,
"Ineligible conditions"; HOST-FORMATS §4.8): the caller passes the NAMES of the
summary fields present (``explicit_fields``). Any explicit prose field
(``EXPLICIT_PROSE_FIELDS``) → ``EXPLICIT_SOURCE_FIELD``, decided on presence
alone, even when the host fell back to the typed text. Any other name is
ignored: the host's other free-text fields (``actions``, ``keep_behaviors``,
``next_decision``, an explicit ``judgment`` …) only change locked lines, which
come back byte for byte. A non-str name, or a bare str instead of a collection,
is ``FACTS_INVALID``.

Rule 2 — the interpretation and the rationale must be the host's typed text
exactly (two lines; one line). The interpretation branch and the judgment are
independent (an explicit judgment, a low check-in rate), so any branch goes with
any judgment; the typed rationale is keyed by the judgment line
(``_nutrition_weekly_rationale``), so a rationale that is another judgment's
sentence is ``RATIONALE_JUDGMENT_MISMATCH``.

Rule 3 — the action bullets are locked customer material with no count limit.
The host usually renders 1 to 6, but ``_nutrition_weekly_actions`` reads
``change_behaviors`` with the limit ``6 - len(keep)``; when ``keep_behaviors``
filled six, that limit is 0, which ``_nutrition_copy_lines`` never reaches, and
every usable change line is added: seven or more bullets are a real host body.
Only the Telegram limit bounds them.

Two slots, in body order: ``weekly.interpretation`` (two tokens; its canonical
text is two lines, one sentence each, ``_slots`` Rule 4a) and
``weekly.rationale`` (one token, the last paragraph). Everything else is locked.
The weekly host pins the final body in its scheduled-delivery ledger before
sending; a restart never re-presents it (plan "Weekly pin-before-send and
restart").
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from gateway_shim.surfaces._model import (
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    sentence_separator,
)
from gateway_shim.surfaces._text import (
    BLANK,
    BULLET,
    LABEL_SEPARATOR,
    SegmentBuilder,
    bullet_value,
    check_body,
    check_labels,
    is_line_text,
    paragraphs,
    sentences,
    typed_slot,
)
from kexpr.spool.contract import MANIFEST

__all__ = [
    "EXPLICIT_PROSE_FIELDS",
    "FACT_LABELS",
    "INTERPRETATION_SLOT",
    "JUDGMENT_LABEL",
    "MISSING_MARKER",
    "OPTIONAL_FACT_LABELS",
    "RATIONALE_SLOT",
    "SURFACE",
    "TITLE",
    "WeeklyInterpretation",
    "WeeklyJudgment",
    "WeeklyRationale",
    "format_weekly",
    "parse_weekly",
]

SURFACE: Final = "weekly.v1"
INTERPRETATION_SLOT: Final = "weekly.interpretation"
RATIONALE_SLOT: Final = "weekly.rationale"
TITLE: Final = "이번 주 린매스업 리포트"
FACT_LABELS: Final[tuple[str, ...]] = (
    "최근 7일 평균 체중",
    "이전 7일 평균 체중",
    "주간 변화",
    "체크인율",
    "목표 범위",
)
# Rendered only when the summary has a check-in rate.
OPTIONAL_FACT_LABELS: Final[frozenset[str]] = frozenset({"체크인율"})
JUDGMENT_LABEL: Final = "이번 주 판단: "
MISSING_MARKER: Final = "기록 없음"
# The plan's explicit unstructured source fields (Rule 1).
EXPLICIT_PROSE_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "interpretation",
        "trend_interpretation",
        "summary_text",
        "rationale",
        "judgment_rationale",
        "reason",
    }
)
_REQUIRED_FACT_LABELS: Final = tuple(x for x in FACT_LABELS if x not in OPTIONAL_FACT_LABELS)
# title, facts, interpretation, judgment, actions, rationale.
_PARAGRAPHS: Final = 6


class _TypedSentences(enum.Enum):
    """A typed branch: its value is the semantic IDs of its sentences, in order."""

    @property
    def ids(self) -> tuple[str, ...]:
        ids: tuple[str, ...] = self.value
        return ids


class WeeklyInterpretation(_TypedSentences):
    """The host's four typed interpretation branches, in the manifest's order.

    Each value is the branch's IDs in canonical branch order (I1-I4 of
    docs/host-formats.md).
    """

    TREND_UNAVAILABLE = ("P_WEEKLY_TREND_UNAVAILABLE", "A_WEEKLY_RECHECK_AFTER_RECORD")
    GOAL_MISSING = ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL")
    IN_GOAL = ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS")
    OUT_OF_GOAL = ("P_WEEKLY_OUT_OF_GOAL", "A_WEEKLY_RECHECK_INPUT")

    @property
    def text(self) -> str:
        """The host's two lines for this branch."""
        return sentences(self.ids, sentence_separator(INTERPRETATION_SLOT))


class WeeklyRationale(_TypedSentences):
    """The host's three typed rationale sentences, in the manifest's order."""

    KEEP_BASELINE = ("A_WEEKLY_KEEP_BASELINE",)
    REVIEW_ADJUSTMENT = ("A_WEEKLY_REVIEW_ADJUSTMENT",)
    RECORDS_INSUFFICIENT = ("P_WEEKLY_RECORDS_INSUFFICIENT",)

    @property
    def text(self) -> str:
        return sentences(self.ids)


class WeeklyJudgment(enum.Enum):
    """The host's ``이번 주 판단:`` values; each keys one typed rationale."""

    KEEP = "유지"
    REVIEW = "조정 검토"
    RECORDS = "기록 보완"

    @property
    def rationale(self) -> WeeklyRationale:
        return _RATIONALE_OF[self]

    @property
    def default_action(self) -> str:
        """The host's one action when the summary gives none."""
        return _DEFAULT_ACTION[self]


_RATIONALE_OF: Final[Mapping[WeeklyJudgment, WeeklyRationale]] = {
    WeeklyJudgment.KEEP: WeeklyRationale.KEEP_BASELINE,
    WeeklyJudgment.REVIEW: WeeklyRationale.REVIEW_ADJUSTMENT,
    WeeklyJudgment.RECORDS: WeeklyRationale.RECORDS_INSUFFICIENT,
}
_DEFAULT_ACTION: Final[Mapping[WeeklyJudgment, str]] = {
    WeeklyJudgment.KEEP: "다음 주에도 같은 조건으로 체중 추세를 확인합니다.",
    WeeklyJudgment.REVIEW: "다음 기록에서 섭취량과 체중 변화를 함께 확인합니다.",
    WeeklyJudgment.RECORDS: "다음 체크인에서 체중과 섭취 기록을 보완합니다.",
}
_INTERPRETATION_BY_TEXT: Final = {b.text: b for b in WeeklyInterpretation}
_RATIONALE_BY_TEXT: Final = {r.text: r for r in WeeklyRationale}
_JUDGMENT_BY_TEXT: Final = {j.value: j for j in WeeklyJudgment}


def _check_branches_match_manifest() -> None:
    # The enums are the manifest's branches, same order: an edit to one without
    # the other fails at import instead of producing unconstructible slots.
    if tuple(b.ids for b in WeeklyInterpretation) != MANIFEST[INTERPRETATION_SLOT].branches:
        raise AssertionError("WeeklyInterpretation differs from the manifest")
    if tuple(b.ids for b in WeeklyRationale) != MANIFEST[RATIONALE_SLOT].branches:
        raise AssertionError("WeeklyRationale differs from the manifest")


_check_branches_match_manifest()


# --- the reference renderer (layout only) ------------------------------------------


def format_weekly(
    *,
    recent: str,
    prior: str,
    change: str,
    goal_range: str,
    interpretation: WeeklyInterpretation,
    judgment: WeeklyJudgment,
    rate: str | None = None,
    actions: Sequence[str] | None = None,
) -> str:
    """Lay out a canonical ``weekly.v1`` body from RENDERED values and typed branches.

    Values are the text after each label (``recent="78.47kg"``, ``MISSING_MARKER``
    when absent); ``rate`` ``None`` omits the ``체크인율`` line; ``actions`` ``None``
    is the host's default action for ``judgment``; at least one (Rule 3: no upper
    bound). The rationale is the judgment's.
    This is the layout, not the host's value formatting (docs/host-formats.md).
    Raises ``ValueError`` on input the grammar cannot carry.
    """
    values = [("최근 7일 평균 체중", recent), ("이전 7일 평균 체중", prior), ("주간 변화", change)]
    if rate is not None:
        values.append(("체크인율", rate))
    values.append(("목표 범위", goal_range))
    if not all(is_line_text(v) for _, v in values):
        raise ValueError("each fact value must be one non-empty line")
    if not isinstance(interpretation, WeeklyInterpretation) or not isinstance(
        judgment, WeeklyJudgment
    ):
        raise ValueError("interpretation and judgment must be typed")
    lines_of_actions = [judgment.default_action] if actions is None else list(actions)
    if (
        isinstance(actions, str)
        or not lines_of_actions
        or not all(is_line_text(a) for a in lines_of_actions)
    ):
        raise ValueError("actions must be one or more non-empty lines")
    lines = [
        TITLE,
        "",
        *(f"{BULLET}{label}{LABEL_SEPARATOR}{value}" for label, value in values),
        "",
        interpretation.text,
        "",
        JUDGMENT_LABEL + judgment.value,
        "",
        *(BULLET + a for a in lines_of_actions),
        "",
        judgment.rationale.text,
    ]
    return "\n".join(lines)


# --- the adapter --------------------------------------------------------------------


def parse_weekly(body: str, *, explicit_fields: Collection[str] = ()) -> CanonicalSurface:
    """Parse a canonical ``weekly.v1`` body into locked segments and two slots.

    ``explicit_fields``: the names of the fields present in the host's summary
    (Rule 1). Raises ``Ineligible`` (the enum only, never content) unless no
    explicit prose field is present and ``body`` is exactly the grammar above.
    """
    _check_explicit_fields(explicit_fields)
    check_body(body)
    parts = paragraphs(body)
    if len(parts) != _PARAGRAPHS:
        raise Ineligible(IneligibleReason.PARAGRAPH_COUNT_MISMATCH)
    title, fact_block, interpretation_text, judgment_line, actions, rationale_text = parts
    if title != TITLE:
        raise Ineligible(IneligibleReason.TITLE_INVALID)
    _parse_facts(fact_block)
    interpretation = _INTERPRETATION_BY_TEXT.get(interpretation_text)
    if interpretation is None:
        raise Ineligible(IneligibleReason.INTERPRETATION_TEXT_MISMATCH)
    judgment = _parse_judgment(judgment_line)
    _parse_actions(actions)
    rationale = _RATIONALE_BY_TEXT.get(rationale_text)
    if rationale is None:
        raise Ineligible(IneligibleReason.RATIONALE_TEXT_MISMATCH)
    if rationale is not judgment.rationale:
        raise Ineligible(IneligibleReason.RATIONALE_JUDGMENT_MISMATCH)

    # Both slots are located by paragraph position, never by searching.
    built = SegmentBuilder()
    built.lock(title + BLANK + fact_block + BLANK)
    built.slot(typed_slot(INTERPRETATION_SLOT, interpretation.ids))
    built.lock(BLANK + judgment_line + BLANK + actions + BLANK)
    built.slot(typed_slot(RATIONALE_SLOT, rationale.ids))
    slots, segments = built.build()
    return CanonicalSurface(surface=SURFACE, body=body, slots=slots, segments=segments)


def _check_explicit_fields(explicit_fields: object) -> None:
    """Rule 1: a collection of str names; any explicit prose field is ineligible."""
    if isinstance(explicit_fields, (str, bytes)) or not isinstance(explicit_fields, Collection):
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    names = list(explicit_fields)
    if not all(isinstance(name, str) for name in names):
        raise Ineligible(IneligibleReason.FACTS_INVALID)
    if any(name in EXPLICIT_PROSE_FIELDS for name in names):
        raise Ineligible(IneligibleReason.EXPLICIT_SOURCE_FIELD)


def _parse_facts(paragraph: str) -> None:
    """facts ::= ("- " LABEL ": " VALUE){4,5}: FACT_LABELS in order, 체크인율 optional."""
    labels: list[str] = []
    values: list[str] = []
    for line in paragraph.split("\n"):
        if not line.startswith(BULLET) or LABEL_SEPARATOR not in line:
            raise Ineligible(IneligibleReason.FACT_LINE_MALFORMED)
        label, value = line[len(BULLET) :].split(LABEL_SEPARATOR, 1)
        labels.append(label)
        values.append(value)
    check_labels(labels, FACT_LABELS, required=_REQUIRED_FACT_LABELS)
    if any(value.strip() == "" for value in values):
        raise Ineligible(IneligibleReason.FACT_VALUE_EMPTY)


def _parse_judgment(line: str) -> WeeklyJudgment:
    """judgment ::= "이번 주 판단: " ("유지" | "조정 검토" | "기록 보완")."""
    if not line.startswith(JUDGMENT_LABEL):
        raise Ineligible(IneligibleReason.JUDGMENT_LINE_MISSING)
    judgment = _JUDGMENT_BY_TEXT.get(line[len(JUDGMENT_LABEL) :])
    if judgment is None:
        raise Ineligible(IneligibleReason.JUDGMENT_UNKNOWN)
    return judgment


def _parse_actions(paragraph: str) -> None:
    """actions ::= "- " TEXT ("\\n- " TEXT)*, any count (Rule 3)."""
    lines = paragraph.split("\n")
    if any(bullet_value(line) is None for line in lines):
        raise Ineligible(IneligibleReason.ACTION_LINE_MALFORMED)

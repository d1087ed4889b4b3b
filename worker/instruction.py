"""The static system instruction sent with every provider call (design §6, §9).

Invariants (tests pin each one):

* Static and deterministic: built once at import from the contract's constants,
  with no clock, randomness, environment or capsule input. Every request carries
  the same bytes, so nothing about an artifact can leak through the instruction.
* It mentions JSON. JSON mode (``response_format={"type": "json_object"}``)
  requires the word in the messages, otherwise the model may emit whitespace until
  ``max_tokens`` (design §9).
* It lists the enum glossary's shipped **IDs only**, sorted, never their Korean
  expansions: an expansion is customer-visible canonical text, and the model must
  neither see nor imitate it. Each ID comes with its kind of sentence and its cells
  of the fit table (`kexpr.spool.contract.fit`, design §6.1): the words that may
  stand before its token, first in its run and later. The only Hangul in the
  instruction is those words (and the examples' lexemes, all from the lexicon).
* The dual card's decision and reason IDs are open families
  (``kexpr.spool.contract.manifest`` Rule 5): an operator adds IDs of the form
  ``P_DUAL_DECISION_<NAME>`` / ``P_DUAL_REASON_<NAME>`` in the shim's operator
  glossary. The worker never reads that file or its texts: the IDs a request
  uses travel in its capsule (each slot's allowed IDs), and the instruction
  names the two families by their patterns, so it stays static.
* The grammar is design §6's, resolved form (a style run ends in ``", "`` or a plain
  ``" "``). The instruction only asks; the contract check decides — anything the
  model returns is validated again by ``kexpr.spool.contract`` in the worker and again in
  the shim.
"""

from __future__ import annotations

from typing import Final

from kexpr.spool.contract import ALL_SEMANTIC_IDS, CONTRACT_VERSION
from kexpr.spool.contract.fit import (
    FIT,
    MAX_LEXEMES_PER_SENTENCE,
    OPEN_FAMILY_FIT,
    OPEN_FAMILY_KINDS,
    SENTENCE_KINDS,
    Position,
    SentenceKind,
    Style,
)
from kexpr.spool.contract.manifest import (
    DUAL_DECISION_ID_PATTERN,
    DUAL_REASON_ID_PATTERN,
    OPEN_ID_MAX_CHARS,
)

__all__ = ["INVALID_EXAMPLES", "SYSTEM_INSTRUCTION", "VALID_EXAMPLES"]


# The instruction's examples, as data: tests/worker_tests/
# test_instruction.py judges every one with the contract, so each rule the
# instruction states is pinned to what `judge` really does. (slot_id, IDs, text).
VALID_EXAMPLES: Final[tuple[tuple[str, tuple[str, ...], str], ...]] = (
    (
        "weekly.interpretation",
        ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"),
        "[[P:01]]. 다만 [[A:01]].",
    ),
    (
        "weekly.interpretation",
        ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"),
        "[[P:01]]. 다만, [[A:01]].",
    ),
)
# (slot_id, IDs, text, the contract's reason code). They show no word the table
# does not offer: only its own word, misplaced, doubled or with a particle.
_HOLD: Final = ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL")
INVALID_EXAMPLES: Final[tuple[tuple[str, tuple[str, ...], str, str], ...]] = (
    ("weekly.interpretation", _HOLD, "다만 [[P:01]]. [[A:01]].", "style_misfit"),
    ("weekly.interpretation", _HOLD, "[[P:01]]. 다만 다만 [[A:01]].", "stacked_style"),
    ("weekly.interpretation", _HOLD, "[[P:01]]. 다만은 [[A:01]].", "unknown_word"),
    ("weekly.interpretation", _HOLD, "[[P:01]]. [[A:01]].", "no_style_lexeme"),
)
# The compact form the instruction shows (one slot; the key elided).
_COMPACT_SHAPE: Final = (
    '{"schema_version":"...","surface":"...","artifact_key":"...","slots":[{"slot_id":"...",'
    '"predicate_ids":[...],"action_ids":[],"placeholder_tokens":[...],"generated_ko":"..."}]}'
)


def _examples(texts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"  {text}" for text in texts)


def _runs(styles: frozenset[Style]) -> str:
    return " or ".join(f'"{s.text}"' for s in sorted(styles)) if styles else "nothing"


def _fit_line(
    name: str, kind: SentenceKind, first: frozenset[Style], later: frozenset[Style]
) -> str:
    return f"  {name}: {kind.value}. First: {_runs(first)}. Later: {_runs(later)}."


def _fit_lines() -> tuple[str, ...]:
    shipped = tuple(
        _fit_line(i, SENTENCE_KINDS[i], FIT[i][Position.FIRST], FIT[i][Position.LATER])
        for i in sorted(ALL_SEMANTIC_IDS)
    )
    families = tuple(
        _fit_line(
            f"{pattern} (operator IDs)",
            OPEN_FAMILY_KINDS[pattern],
            cells[Position.FIRST],
            cells[Position.LATER],
        )
        for pattern, cells in OPEN_FAMILY_FIT.items()
    )
    return shipped + families


def _build() -> str:
    lines = (
        f"You compose Korean style for the presentation contract {CONTRACT_VERSION}.",
        "",
        (
            "INPUT: the user message is one JSON object, a capsule, with the keys"
            " schema_version, surface, artifact_key and slots. Each capsule slot has"
            " slot_id, allowed_predicate_ids, allowed_action_ids,"
            " required_placeholder_tokens, max_generated_chars and max_style_lexemes."
        ),
        "",
        (
            "OUTPUT: reply with exactly one JSON object and nothing else: no Markdown,"
            " no code fence, no commentary. The JSON object has exactly the keys"
            " schema_version, surface, artifact_key and slots. Copy schema_version,"
            " surface and artifact_key from the capsule unchanged. slots is a JSON array"
            " with one object per capsule slot, in capsule order, and each of these"
            " objects has exactly the keys slot_id, predicate_ids, action_ids,"
            " placeholder_tokens and generated_ko:"
        ),
        "- slot_id: the capsule slot's slot_id.",
        "- predicate_ids: the capsule slot's allowed_predicate_ids, exactly, same order.",
        "- action_ids: the capsule slot's allowed_action_ids, exactly, same order.",
        "- An empty list in the capsule stays an empty list, [], in the answer.",
        (
            "- placeholder_tokens: the capsule slot's required_placeholder_tokens,"
            " exactly, same order."
        ),
        "- generated_ko: a string you compose in the grammar below.",
        (
            "Write the JSON compactly, in the key order above: no space, tab or line"
            " break anywhere outside string values, like this:"
        ),
        f"  {_COMPACT_SHAPE}",
        (
            "The answer must arrive within a short time limit: a compact answer with"
            " brief style is the one that arrives."
        ),
        "",
        "GRAMMAR of generated_ko:",
        '  generated_ko = sentence (" " sentence)*',
        '  sentence     = style? TOKEN "."',
        '  style        = LEXEME (", " | " ")',
        (
            "TOKEN is the slot's next placeholder token: write one sentence per token,"
            " every token exactly once, in the given order, copied character for"
            " character, with the period directly after it. LEXEME is one word that the"
            " table WORDS BEFORE A TOKEN below allows before that token."
        ),
        "RULES:",
        (
            "- Outside the tokens write only lexicon words, single spaces, commas and"
            " periods: no other word, no digit or number word, no Latin letter, no"
            " quote, no bracket, no other punctuation, no emoji, no line break."
        ),
        ("- Write each lexeme exactly as listed: never attach a particle or an ending to it."),
        (
            "- A comma may only end a style run: directly after its lexeme, then one"
            " space, then the token. A comma anywhere else is invalid."
        ),
        (
            "- Use at least one lexeme in each generated_ko as a whole; a sentence may"
            " have none, and every lexeme counts toward max_style_lexemes."
        ),
        (
            f"- Before one token write at most {MAX_LEXEMES_PER_SENTENCE} lexeme, and only"
            " one that the table WORDS BEFORE A TOKEN below allows for that token's ID at"
            " that sentence's position, joined exactly as shown there (with the comma"
            " or with a plain space). Any other word, a second word or the other join is"
            " invalid: the words are not neutral, and in Korean a word before a sentence"
            " changes what the sentence says."
        ),
        (
            "- Position: First is the slot's first sentence, Later any other. The review"
            " lines adaptive.dual.review.N are one list: the line with N greater than 1"
            " counts as Later even though it is its slot's only sentence."
        ),
        (
            "- A token stands for a sentence the application writes itself; do not"
            " state, repeat or guess its meaning. Its kind in the table says what sort"
            " of sentence it is."
        ),
        (
            "- max_generated_chars counts Unicode code points of generated_ko: every"
            " Hangul syllable, space, comma, period and every character of a token"
            " counts as one."
        ),
        "Valid generated_ko (two tokens):",
        *_examples(tuple(text for _, _, text in VALID_EXAMPLES)),
        (
            "Invalid generated_ko for P_WEEKLY_TREND_OBSERVED with"
            " A_WEEKLY_HOLD_FOR_MISSING_GOAL (a word where the table allows none; two"
            " words before one token; a particle on a lexeme; no lexeme at all):"
        ),
        *_examples(tuple(text for _, _, text, _ in INVALID_EXAMPLES)),
        "",
        "WORDS BEFORE A TOKEN, per ID (kind; what may stand before its token; nothing = no word):",
        *_fit_lines(),
        "",
        (
            "The IDs above are every ID a capsule may contain; capsules for"
            " adaptive.dualcoachtest.card.v1 may also carry operator IDs of the two"
            f" families ({DUAL_DECISION_ID_PATTERN} and {DUAL_REASON_ID_PATTERN}, at most"
            f" {OPEN_ID_MAX_CHARS} characters). Echo every ID, never expand it."
        ),
    )
    return "\n".join(lines)


SYSTEM_INSTRUCTION: Final[str] = _build()

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
  neither see nor imitate it. The only Hangul in the instruction is the style
  lexicon, which the model is allowed to write.
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

from kexpr.spool.contract import ALL_SEMANTIC_IDS, CONTRACT_VERSION, SAFE_STYLE_LEXEMES
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
    ("daily.status", ("P_DAILY_COMPLETE",), "차분히, [[P:01]]."),
    ("daily.status", ("P_DAILY_COMPLETE",), "지금 [[P:01]]."),
    ("daily.status", ("P_DAILY_COMPLETE",), "또 다시, [[P:01]]."),
    ("daily.status", ("P_DAILY_COMPLETE",), "다시 다시 [[P:01]]."),
    (
        "weekly.interpretation",
        ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"),
        "우선 [[P:01]]. 이어서 [[P:02]].",
    ),
    (
        "weekly.interpretation",
        ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"),
        "[[P:01]]. 이어서 [[P:02]].",
    ),
)
# (slot_id, IDs, text, the contract's reason code).
INVALID_EXAMPLES: Final[tuple[tuple[str, tuple[str, ...], str, str], ...]] = (
    ("daily.status", ("P_DAILY_COMPLETE",), "또, 다시 [[P:01]].", "grammar"),
    ("daily.status", ("P_DAILY_COMPLETE",), "지금은 [[P:01]].", "unknown_word"),
    (
        "weekly.interpretation",
        ("P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"),
        "[[P:01]]. [[P:02]].",
        "no_style_lexeme",
    ),
)
# The compact form the instruction shows (one daily slot; the key elided).
_COMPACT_SHAPE: Final = (
    '{"schema_version":"...","surface":"...","artifact_key":"...","slots":[{"slot_id":"...",'
    '"predicate_ids":[...],"action_ids":[],"placeholder_tokens":[...],"generated_ko":"..."}]}'
)


def _examples(texts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"  {text}" for text in texts)


def _build() -> str:
    lexicon = " ".join(SAFE_STYLE_LEXEMES)
    semantic_ids = " ".join(sorted(ALL_SEMANTIC_IDS))
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
        '  style        = LEXEME (" " LEXEME)* (", " | " ")',
        (
            "TOKEN is the slot's next placeholder token: write one sentence per token,"
            " every token exactly once, in the given order, copied character for"
            " character, with the period directly after it. LEXEME is exactly one word of"
            " this lexicon:"
        ),
        f"  {lexicon}",
        "RULES:",
        (
            "- Outside the tokens write only lexicon words, single spaces, commas and"
            " periods: no other word, no digit or number word, no Latin letter, no"
            " quote, no bracket, no other punctuation, no emoji, no line break."
        ),
        ("- Write each lexeme exactly as listed: never attach a particle or an ending to it."),
        (
            "- A comma may only end a style run: directly after the run's last lexeme,"
            " then one space, then the token. A comma anywhere else is invalid."
        ),
        (
            "- Use at least one lexeme in each generated_ko as a whole; a sentence may"
            " have none. A lexeme may repeat, and every occurrence counts toward"
            " max_style_lexemes."
        ),
        (
            "- A style run may mix different lexemes or repeat one, and may end with"
            ' ", " or with " ": both are valid. The lexemes say nothing about the'
            " token: any of them fits any token."
        ),
        (
            "- Keep the style brief: one or two lexemes before a token, or none. This is"
            " for speed; the hard limit is max_style_lexemes."
        ),
        (
            "- max_generated_chars counts Unicode code points of generated_ko: every"
            " Hangul syllable, space, comma, period and every character of a token"
            " counts as one."
        ),
        (
            "- A token stands for a sentence the application writes itself; do not"
            " state, repeat or guess its meaning."
        ),
        "Valid generated_ko (one token, or two tokens):",
        *_examples(tuple(text for _, _, text in VALID_EXAMPLES)),
        "Invalid generated_ko (a comma between lexemes; a particle on a lexeme; no lexeme at all):",
        *_examples(tuple(text for _, _, text, _ in INVALID_EXAMPLES)),
        "",
        "SEMANTIC IDS that capsules may contain (echo them, never expand them):",
        f"  {semantic_ids}",
        (
            "Capsules for adaptive.dualcoachtest.card.v1 may also carry operator IDs"
            f" matching {DUAL_DECISION_ID_PATTERN} or {DUAL_REASON_ID_PATTERN}"
            f" (at most {OPEN_ID_MAX_CHARS} characters); treat them exactly like the IDs above."
        ),
    )
    return "\n".join(lines)


SYSTEM_INSTRUCTION: Final[str] = _build()

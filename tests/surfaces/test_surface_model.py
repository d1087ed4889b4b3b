"""The surface-independent model: construction invariants, render, locked proof."""

from __future__ import annotations

import unicodedata
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from gateway_shim import surfaces
from gateway_shim.glossary import GLOSSARY
from gateway_shim.surfaces import (
    TELEGRAM_MAX_UTF16,
    CanonicalSurface,
    Ineligible,
    IneligibleReason,
    Locked,
    Placeholder,
    ProseSlot,
    RenderedBody,
    RenderError,
    RenderReason,
    SlotRef,
    utf16_len,
)
from kexpr.spool.contract import CapsuleError, Reason, check_grammar

COMPLETE_ID = "P_DAILY_COMPLETE"
COMPLETE = GLOSSARY[COMPLETE_ID] + "."


def _placeholder(token: str = "[[P:01]]", semantic_id: str = COMPLETE_ID) -> Placeholder:
    return Placeholder(token=token, semantic_id=semantic_id, expansion=GLOSSARY[semantic_id])


def _daily_slot() -> ProseSlot:
    return ProseSlot(
        slot_id="daily.status", placeholders=(_placeholder(),), canonical_text=COMPLETE
    )


def _weekly_slots() -> tuple[ProseSlot, ProseSlot]:
    interpretation = ProseSlot(
        slot_id="weekly.interpretation",
        placeholders=(
            _placeholder("[[P:01]]", "P_WEEKLY_IN_GOAL"),
            _placeholder("[[P:02]]", "P_WEEKLY_KEEP_BASIS"),
        ),
        # The host's two lines (Rule 4a): one sentence per line.
        canonical_text=GLOSSARY["P_WEEKLY_IN_GOAL"] + ".\n" + GLOSSARY["P_WEEKLY_KEEP_BASIS"] + ".",
    )
    rationale = ProseSlot(
        slot_id="weekly.rationale",
        placeholders=(_placeholder("[[A:01]]", "A_WEEKLY_KEEP_BASELINE"),),
        canonical_text=GLOSSARY["A_WEEKLY_KEEP_BASELINE"] + ".",
    )
    return interpretation, rationale


def _two_slot_surface() -> CanonicalSurface:
    """A synthetic two-slot body: three locked segments around two slots."""
    interpretation, rationale = _weekly_slots()
    head, middle, tail = "🔥 주간 리포트\n\n", "\n\n근거\n", "\n\n- 끝 ✅"
    return CanonicalSurface(
        surface="weekly.v1",
        body=head + interpretation.canonical_text + middle + rationale.canonical_text + tail,
        slots=(interpretation, rationale),
        segments=(Locked(head), SlotRef(0), Locked(middle), SlotRef(1), Locked(tail)),
    )


def _styled_slot() -> ProseSlot:
    """The one slot the fit table leaves a choice (design §6.2): the goal-missing
    interpretation, [[P:01]] then [[A:01]], one sentence per line."""
    return ProseSlot(
        slot_id="weekly.interpretation",
        placeholders=(
            _placeholder("[[P:01]]", "P_WEEKLY_TREND_OBSERVED"),
            _placeholder("[[A:01]]", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"),
        ),
        canonical_text=GLOSSARY["P_WEEKLY_TREND_OBSERVED"]
        + ".\n"
        + GLOSSARY["A_WEEKLY_HOLD_FOR_MISSING_GOAL"]
        + ".",
    )


STYLED_HEAD = "🔥 주간 리포트\n\n"
STYLED_TAIL = "\n\n근거\n" + GLOSSARY["A_WEEKLY_KEEP_BASELINE"] + ".\n\n- 끝 ✅"


def _styled_surface(head: str = STYLED_HEAD, tail: str = STYLED_TAIL) -> CanonicalSurface:
    """A synthetic body around the styled slot; the rationale is locked text, as the
    builder makes it (its cell is empty)."""
    slot = _styled_slot()
    return CanonicalSurface(
        surface="weekly.v1",
        body=head + slot.canonical_text + tail,
        slots=(slot,),
        segments=(Locked(head), SlotRef(0), Locked(tail)),
    )


def _one_slot_surface(head: str = "제목\n\n", tail: str = "\n\n끝") -> CanonicalSurface:
    return CanonicalSurface(
        surface="daily.v1",
        body=head + COMPLETE + tail,
        slots=(_daily_slot(),),
        segments=(Locked(head), SlotRef(0), Locked(tail)),
    )


# --- public API pin (httpx test_exported_members) ----------------------------------


def test_exported_members() -> None:
    assert set(surfaces.__all__) == {
        "SENTENCE_SEPARATORS",
        "TELEGRAM_MAX_UTF16",
        "CanonicalSurface",
        "Ineligible",
        "IneligibleReason",
        "Locked",
        "Placeholder",
        "ProseSlot",
        "RenderError",
        "RenderReason",
        "RenderedBody",
        "SlotRef",
        "sentence_separator",
        "utf16_len",
    }
    assert TELEGRAM_MAX_UTF16 == 4096
    assert {r.value for r in RenderReason} == {
        "missing_slot",
        "unknown_slot",
        "composition_rejected",
        "token_mismatch",
        "layout_changed",
        "locked_bytes_changed",
        "too_long_utf16",
    }


# --- utf16_len --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("", 0),
        ("a", 1),
        ("가", 1),
        ("\n", 1),
        ("💪", 2),
        ("🏋️", 3),  # U+1F3CB plus VARIATION SELECTOR-16
        ("👍🏽", 4),  # emoji plus skin-tone modifier, both astral
        ("한글 💪 kg", 8),
        ("\ud800", 1),  # a lone surrogate counts as the one unit it is
    ],
)
def test_utf16_len(text: str, units: int) -> None:
    assert utf16_len(text) == units


# --- Placeholder -----------------------------------------------------------------


def test_placeholder_valid_and_frozen() -> None:
    p = _placeholder()
    assert (p.token, p.semantic_id, p.expansion) == ("[[P:01]]", COMPLETE_ID, GLOSSARY[COMPLETE_ID])
    with pytest.raises(FrozenInstanceError):
        p.token = "[[P:02]]"  # type: ignore[misc]
    assert not hasattr(p, "__dict__")


BAD_PLACEHOLDERS: list[tuple[str, dict[str, Any]]] = [
    ("one_digit", {"token": "[[P:1]]"}),
    ("lower_case", {"token": "[[p:01]]"}),
    ("triple_bracket", {"token": "[[[P:01]]]"}),
    ("zero", {"token": "[[P:00]]"}),
    ("three_digits", {"token": "[[P:001]]"}),
    ("padded", {"token": " [[P:01]]"}),
    ("wrong_family", {"token": "[[A:01]]"}),
    ("unknown_id", {"semantic_id": "P_DAILY_UNKNOWN", "expansion": "무엇"}),
    ("expansion_with_period", {"expansion": COMPLETE}),
    ("expansion_nfd", {"expansion": unicodedata.normalize("NFD", GLOSSARY[COMPLETE_ID])}),
    ("other_expansion", {"expansion": GLOSSARY["P_DAILY_PARTIAL"]}),
]


@pytest.mark.parametrize(
    ("name", "override"), BAD_PLACEHOLDERS, ids=[c[0] for c in BAD_PLACEHOLDERS]
)
def test_placeholder_rejects(name: str, override: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {
        "token": "[[P:01]]",
        "semantic_id": COMPLETE_ID,
        "expansion": GLOSSARY[COMPLETE_ID],
    }
    kwargs.update(override)
    with pytest.raises(ValueError):
        Placeholder(**kwargs)


# --- ProseSlot ----------------------------------------------------------------------


def test_prose_slot_policy_comes_from_the_manifest() -> None:
    policy = _daily_slot().policy()
    assert policy.slot_id == "daily.status"
    assert tuple(policy.allowed_predicate_ids) == (COMPLETE_ID,)
    assert tuple(policy.allowed_action_ids) == ()
    assert tuple(policy.required_placeholder_tokens) == ("[[P:01]]",)
    assert (policy.max_generated_chars, policy.max_style_lexemes) == (96, 8)
    interpretation, rationale = _weekly_slots()
    assert tuple(interpretation.policy().required_placeholder_tokens) == ("[[P:01]]", "[[P:02]]")
    assert tuple(rationale.policy().allowed_action_ids) == ("A_WEEKLY_KEEP_BASELINE",)


def test_prose_slot_rejects_bad_canonical_text() -> None:
    for text in (
        GLOSSARY[COMPLETE_ID],
        COMPLETE + " ",
        unicodedata.normalize("NFD", COMPLETE),
        "차분히, " + COMPLETE,
    ):
        with pytest.raises(ValueError):
            ProseSlot(slot_id="daily.status", placeholders=(_placeholder(),), canonical_text=text)


def test_prose_slot_rejects_no_placeholders() -> None:
    with pytest.raises(ValueError):
        ProseSlot(slot_id="daily.status", placeholders=(), canonical_text="")


def test_prose_slot_rejects_tokens_the_contract_does_not_issue() -> None:
    with pytest.raises(ValueError):
        ProseSlot(
            slot_id="daily.status",
            placeholders=(_placeholder("[[P:02]]"),),
            canonical_text=COMPLETE,
        )
    interpretation, _ = _weekly_slots()
    swapped = (interpretation.placeholders[0], _placeholder("[[P:01]]", "P_WEEKLY_KEEP_BASIS"))
    with pytest.raises(ValueError):
        ProseSlot(
            slot_id="weekly.interpretation",
            placeholders=swapped,
            canonical_text=" ".join(p.expansion + "." for p in swapped),
        )


def test_prose_slot_rejects_ids_the_manifest_does_not_allow() -> None:
    weekly = _placeholder("[[P:01]]", "P_WEEKLY_IN_GOAL")
    with pytest.raises(CapsuleError):
        ProseSlot(
            slot_id="daily.status", placeholders=(weekly,), canonical_text=weekly.expansion + "."
        )
    with pytest.raises(CapsuleError):
        ProseSlot(slot_id="daily.nope", placeholders=(_placeholder(),), canonical_text=COMPLETE)
    # Both daily statuses at once are not one branch.
    both = (_placeholder(), _placeholder("[[P:02]]", "P_DAILY_PARTIAL"))
    with pytest.raises(CapsuleError):
        ProseSlot(
            slot_id="daily.status",
            placeholders=both,
            canonical_text=" ".join(p.expansion + "." for p in both),
        )


def test_prose_slot_requires_canonical_branch_order() -> None:
    # The branch as a set is allowed, but token i must stand for the i-th ID of
    # the manifest's branch order, as in the capsule.
    reordered = (
        _placeholder("[[P:01]]", "P_WEEKLY_KEEP_BASIS"),
        _placeholder("[[P:02]]", "P_WEEKLY_IN_GOAL"),
    )
    with pytest.raises(ValueError):
        ProseSlot(
            slot_id="weekly.interpretation",
            placeholders=reordered,
            canonical_text="\n".join(p.expansion + "." for p in reordered),
        )


def test_expand_replaces_each_issued_token() -> None:
    interpretation, _ = _weekly_slots()
    # Rule 4a: the space after the first sentence becomes the slot's line break.
    assert interpretation.expand("먼저, [[P:01]]. 이어서, [[P:02]].") == (
        "먼저, "
        + GLOSSARY["P_WEEKLY_IN_GOAL"]
        + ".\n이어서, "
        + GLOSSARY["P_WEEKLY_KEEP_BASIS"]
        + "."
    )


def test_sentence_separator_is_per_slot() -> None:
    assert dict(surfaces.SENTENCE_SEPARATORS) == {"weekly.interpretation": "\n"}
    assert surfaces.sentence_separator("weekly.interpretation") == "\n"
    for slot_id in ("daily.status", "weekly.rationale", "adaptive.dual.judgment", "x"):
        assert surfaces.sentence_separator(slot_id) == " "
    interpretation, rationale = _weekly_slots()
    assert (interpretation.sentence_separator, interpretation.line_count) == ("\n", 2)
    assert (rationale.sentence_separator, rationale.line_count) == (" ", 1)
    assert (_daily_slot().sentence_separator, _daily_slot().line_count) == (" ", 1)


def test_multi_line_slot_rejects_the_one_line_canonical_text() -> None:
    interpretation, _ = _weekly_slots()
    with pytest.raises(ValueError):
        ProseSlot(
            slot_id="weekly.interpretation",
            placeholders=interpretation.placeholders,
            canonical_text=interpretation.canonical_text.replace("\n", " "),
        )


@pytest.mark.parametrize(
    "generated",
    ["[[P:01]].[[P:02]].", "차분히 [[P:02]]. [[P:01]].", "[[P:01]]. [[P:01]]. [[P:02]]."],
)
def test_multi_line_expand_needs_one_sentence_boundary_per_line(generated: str) -> None:
    interpretation, _ = _weekly_slots()
    with pytest.raises(RenderError) as info:
        interpretation.expand(generated)
    assert info.value.reason is RenderReason.TOKEN_MISMATCH


@pytest.mark.parametrize("generated", ["차분히.", "[[P:01]] [[P:01]].", "[[P:01]] [[P:02]]."])
def test_expand_refuses_a_composition_the_contract_would_not_accept(generated: str) -> None:
    with pytest.raises(RenderError) as info:
        _daily_slot().expand(generated)
    assert info.value.reason is RenderReason.TOKEN_MISMATCH


# --- Locked, SlotRef, RenderedBody ---------------------------------------------------


def test_segment_validation() -> None:
    with pytest.raises(ValueError):
        Locked("")
    for index in (-1, True, 1.0):
        with pytest.raises(ValueError):
            SlotRef(index)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spans",
    [((0, 0),), ((2, 1),), ((0, 3), (2, 4)), ((0, 5),), ((-1, 2),)],
)
def test_rendered_body_rejects_bad_spans(spans: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ValueError):
        RenderedBody(body="💪ab", locked_spans_utf16=spans)


# --- CanonicalSurface construction ----------------------------------------------------


def test_canonical_surface_rejects_inconsistent_parts() -> None:
    slot = _daily_slot()
    head, tail = Locked("제목\n\n"), Locked("\n\n끝")
    good = "제목\n\n" + COMPLETE + "\n\n끝"
    CanonicalSurface(
        surface="daily.v1", body=good, slots=(slot,), segments=(head, SlotRef(0), tail)
    )
    bad: list[dict[str, Any]] = [
        {"body": good + " "},  # does not reassemble
        {"body": good.replace("끝", "끗")},
        {"segments": (head, tail)},  # slot never referenced
        {"segments": (head, SlotRef(0), SlotRef(0), tail)},  # referenced twice
        {"segments": (head, SlotRef(1), tail)},  # dangling reference
        {"segments": (head, "x", SlotRef(0), tail)},  # not a segment
        {"surface": ""},
        {"slots": (slot, slot), "segments": (head, SlotRef(0), SlotRef(1), tail)},  # duplicate ids
    ]
    for override in bad:
        kwargs: dict[str, Any] = {
            "surface": "daily.v1",
            "body": good,
            "slots": (slot,),
            "segments": (head, SlotRef(0), tail),
        }
        kwargs.update(override)
        with pytest.raises((ValueError, TypeError)):
            CanonicalSurface(**kwargs)


def test_canonical_surface_rejects_slots_out_of_order() -> None:
    interpretation, rationale = _weekly_slots()
    body = interpretation.canonical_text + "\n" + rationale.canonical_text
    with pytest.raises(ValueError):
        CanonicalSurface(
            surface="weekly.v1",
            body=rationale.canonical_text + "\n" + interpretation.canonical_text,
            slots=(interpretation, rationale),
            segments=(SlotRef(1), Locked("\n"), SlotRef(0)),
        )
    ok = CanonicalSurface(
        surface="weekly.v1",
        body=body,
        slots=(interpretation, rationale),
        segments=(SlotRef(0), Locked("\n"), SlotRef(1)),
    )
    assert ok.canonical().locked_spans_utf16 == (
        (len(interpretation.canonical_text), len(interpretation.canonical_text) + 1),
    )


def test_canonical_surface_rejects_over_4096_utf16_units() -> None:
    # 2040 emoji are 2040 code points but 4080 UTF-16 units.
    room = TELEGRAM_MAX_UTF16 - utf16_len("\n\n" + COMPLETE)
    _one_slot_surface(head="a" * room, tail="\n\n")
    with pytest.raises(ValueError):
        _one_slot_surface(head="💪" * (room // 2 + 1), tail="\n\n")


# --- render ------------------------------------------------------------------------


def test_render_offsets_and_locked_bytes() -> None:
    surface = _styled_surface()
    canonical = surface.canonical()
    # "🔥 주간 리포트\n\n" is 10 code points, 11 UTF-16 units.
    assert canonical.locked_spans_utf16[0] == (0, 11)
    selected = surface.render({"weekly.interpretation": "[[P:01]]. 다만, [[A:01]]."})
    assert selected.locked_texts() == canonical.locked_texts() == (STYLED_HEAD, STYLED_TAIL)
    interpretation = (
        GLOSSARY["P_WEEKLY_TREND_OBSERVED"]
        + ".\n다만, "
        + GLOSSARY["A_WEEKLY_HOLD_FOR_MISSING_GOAL"]
        + "."
    )
    # Each sentence on its own line, as in the canonical text; nothing else moved.
    assert selected.body == STYLED_HEAD + interpretation + STYLED_TAIL
    assert selected.body.count("\n") == canonical.body.count("\n")
    tail_start = 11 + utf16_len(interpretation)
    assert selected.locked_spans_utf16 == (
        (0, 11),
        (tail_start, tail_start + utf16_len(STYLED_TAIL)),
    )
    assert utf16_len(selected.body) == tail_start + utf16_len(STYLED_TAIL)
    # "다만, " added four units: the tail moved by exactly that.
    assert tail_start - canonical.locked_spans_utf16[1][0] == 4


def test_a_two_slot_body_renders_nothing_once_its_cells_are_empty() -> None:
    # The model carries any number of slots; the fit table (design §6.1, §6.2) gives
    # the in-goal interpretation and the rationale no word, so the answer that used
    # to render this body is refused whole.
    surface = _two_slot_surface()
    with pytest.raises(RenderError) as info:
        surface.render(
            {
                "weekly.rationale": "그리고 [[A:01]].",
                "weekly.interpretation": "먼저, [[P:01]]. 이어서, [[P:02]].",
            }
        )
    assert info.value.reason is RenderReason.COMPOSITION_REJECTED
    assert info.value.contract_reason is Reason.STYLE_MISFIT


@pytest.mark.parametrize(
    ("generated", "reason"),
    [
        ({}, RenderReason.MISSING_SLOT),
        (
            {"weekly.interpretation": "먼저, [[P:01]]. 이어서, [[P:02]]."},
            RenderReason.MISSING_SLOT,
        ),
        (
            {
                "weekly.interpretation": "먼저, [[P:01]]. 이어서, [[P:02]].",
                "weekly.rationale": "그리고 [[A:01]].",
                "daily.status": "그리고 [[P:01]].",
            },
            RenderReason.UNKNOWN_SLOT,
        ),
        # One failed slot fails the whole body: no partial selection.
        (
            {
                "weekly.interpretation": "먼저, [[P:01]]. 이어서, [[P:02]].",
                "weekly.rationale": "확인 결과, [[A:01]].",
            },
            RenderReason.COMPOSITION_REJECTED,
        ),
        (
            {
                "weekly.interpretation": "[[P:01]]. [[P:02]].",
                "weekly.rationale": "그리고 [[A:01]].",
            },
            RenderReason.COMPOSITION_REJECTED,
        ),
        (
            {
                "weekly.interpretation": "먼저, [[P:02]]. 이어서, [[P:01]].",
                "weekly.rationale": "그리고 [[A:01]].",
            },
            RenderReason.COMPOSITION_REJECTED,
        ),
        (
            {"weekly.interpretation": None, "weekly.rationale": "그리고 [[A:01]]."},
            RenderReason.COMPOSITION_REJECTED,
        ),
    ],
)
def test_render_errors(generated: dict[str, Any], reason: RenderReason) -> None:
    surface = _two_slot_surface()
    with pytest.raises(RenderError) as info:
        surface.render(generated)
    assert info.value.reason is reason
    assert str(info.value) == reason.value
    if reason is RenderReason.COMPOSITION_REJECTED and all(
        isinstance(v, str) for v in generated.values()
    ):
        assert info.value.contract_reason is not None
    else:
        assert info.value.contract_reason is None


@pytest.mark.parametrize(
    ("interpretation", "rationale", "reason"),
    [
        # The texts the grammar accepted before the fit table: a manner word and an
        # order word without its comma stand outside their sentences' cells.
        ("차분히, [[P:01]]. 이어서 [[P:02]].", "그리고 [[A:01]].", Reason.STYLE_MISFIT),
        ("먼저, [[P:01]]. 이어서 [[P:02]].", "그리고 [[A:01]].", Reason.STYLE_MISFIT),
        ("먼저, [[P:01]]. 이어서, [[P:02]].", "그대로, [[A:01]].", Reason.STYLE_MISFIT),
        ("먼저, [[P:01]]. 이어서, [[P:02]].", "그리고, [[A:01]].", Reason.STYLE_MISFIT),
        ("먼저 그리고, [[P:01]]. [[P:02]].", "그리고 [[A:01]].", Reason.STACKED_STYLE),
    ],
)
def test_render_applies_the_fit_table_after_the_grammar(
    interpretation: str, rationale: str, reason: Reason
) -> None:
    surface = _two_slot_surface()
    generated = {"weekly.interpretation": interpretation, "weekly.rationale": rationale}
    for slot in surface.slots:
        assert check_grammar(slot.policy(), generated[slot.slot_id]) is None
    with pytest.raises(RenderError) as info:
        surface.render(generated)
    assert info.value.reason is RenderReason.COMPOSITION_REJECTED
    assert info.value.contract_reason is reason


def test_render_rejects_a_non_mapping() -> None:
    with pytest.raises(RenderError) as info:
        _one_slot_surface().render([("daily.status", "그리고 [[P:01]].")])  # type: ignore[arg-type]
    assert info.value.reason is RenderReason.MISSING_SLOT


def test_render_rejects_result_over_4096_utf16_units() -> None:
    room = TELEGRAM_MAX_UTF16 - utf16_len(_styled_slot().canonical_text + "\n\n")
    surface = _styled_surface(head="💪" * (room // 2) + "a" * (room % 2), tail="\n\n")
    assert utf16_len(surface.body) == TELEGRAM_MAX_UTF16
    with pytest.raises(RenderError) as info:
        surface.render({"weekly.interpretation": "[[P:01]]. 다만 [[A:01]]."})
    assert info.value.reason is RenderReason.TOO_LONG_UTF16


def test_locked_proof_catches_a_tampered_body() -> None:
    """The proof does not trust how a rendered body was built."""
    surface = _styled_surface()
    selected = surface.render({"weekly.interpretation": "[[P:01]]. 다만 [[A:01]]."})
    surface._prove_locked(selected)  # the genuine body passes
    tampered_cases = [
        # one locked character changed, same length and offsets
        RenderedBody(
            body=selected.body.replace("근거", "근가"),
            locked_spans_utf16=selected.locked_spans_utf16,
        ),
        # offsets shifted by one unit
        RenderedBody(
            body="x" + selected.body,
            locked_spans_utf16=selected.locked_spans_utf16,
        ),
        # an offset that splits the title emoji's surrogate pair
        RenderedBody(
            body=selected.body, locked_spans_utf16=((1, 10), *selected.locked_spans_utf16[1:])
        ),
        # a locked span dropped
        RenderedBody(body=selected.body, locked_spans_utf16=selected.locked_spans_utf16[:1]),
    ]
    for tampered in tampered_cases:
        with pytest.raises(RenderError) as info:
            surface._prove_locked(tampered)
        assert info.value.reason is RenderReason.LOCKED_BYTES_CHANGED


def test_locked_proof_catches_a_moved_line_break() -> None:
    surface = _two_slot_surface()
    canonical = surface.canonical()
    spans = canonical.locked_spans_utf16
    # Same locked bytes at the same offsets, but a slot now holds a line break.
    start, end = spans[0][1], spans[1][0]
    body = canonical.body[:start] + "\n" + canonical.body[start + 1 : end] + canonical.body[end:]
    with pytest.raises(RenderError) as info:
        surface._prove_locked(RenderedBody(body=body, locked_spans_utf16=spans))
    assert info.value.reason is RenderReason.LAYOUT_CHANGED


def test_exceptions_carry_only_the_enum() -> None:
    error = Ineligible(IneligibleReason.TITLE_INVALID)
    assert error.args == ("title_invalid",)
    assert error.reason is IneligibleReason.TITLE_INVALID
    render_error = RenderError(RenderReason.UNKNOWN_SLOT)
    assert render_error.args == ("unknown_slot",)
    assert render_error.contract_reason is None

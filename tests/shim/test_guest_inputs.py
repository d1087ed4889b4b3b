"""Nothing escapes into the host, for every input type and value
(coordinator rule 9).

Property tests over arbitrary Python strings (lone surrogates included: Python
strings carry them and JSON decodes ``"\\ud800"``), wrong types and arbitrary
payload objects, for every argument of ``present_*``, ``apresent_*``, ``report``,
``revalidate`` and ``binding_digest``. Each presentation here is ineligible (an
argument is not UTF-8 text, or the payload is not a card), so each must come
back canonical at once with zero files; ``report``/``revalidate`` may only raise
their documented ``ValueError`` whose message is an enum word, never the input.
Hypothesis runs derandomized: the same examples every run.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit.bodies import present_styled
from reference_host.samples import (
    DUAL_SURFACE,
    SCHEDULE,
    WEEKLY_BODY,
    WEEKLY_FIELDS,
    callback_data,
    dual_card,
    session,
)

from gateway_shim import (
    CandidateStatus,
    CardOrigin,
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    PresentationCandidate,
    RevalidationError,
    RevalidationReason,
    binding_digest,
    exact_block,
    revalidate,
)
from gateway_shim.surfaces import Ineligible, IneligibleReason
from kexpr.spool.layout import DataRoot
from kexpr.spool.outcomes import HOST_OUTCOMES
from shim.test_coordinator import BODY, FACTS, ScriptedWorker, accepted

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ASYNC_SETTINGS = settings(SETTINGS, max_examples=20)

SURROGATE = "\ud800"
# Every code point, surrogates included (Hypothesis leaves out category Cs by default).
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
ANY_TEXT = st.text(ANY_CHAR, max_size=40)
# Text UTF-8 cannot encode: at least one lone surrogate somewhere.
BAD_TEXT = st.builds(
    lambda a, s, b: a + s + b,
    ANY_TEXT,
    st.sampled_from([SURROGATE, "\udfff", "\udc80"]),
    ANY_TEXT,
)
WRONG_TYPE: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.tuples(ANY_TEXT),
    st.builds(object),
    st.just(CardOrigin.FRESH),
)
NOT_TEXT = st.one_of(BAD_TEXT, WRONG_TYPE)
ANY_VALUE: st.SearchStrategy[object] = st.recursive(
    st.one_of(ANY_TEXT, WRONG_TYPE),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(ANY_TEXT, inner, max_size=3)
    ),
    max_leaves=8,
)
REASON_WORDS = {r.value for r in RevalidationReason}
INELIGIBLE_WORDS = {r.value for r in IneligibleReason}


def coordinator(root: Path) -> KoreanExpressionCoordinator:
    config = KoreanExpressionConfig.from_block(
        exact_block(Mode.ENABLED, daily=True, weekly=True, adaptive_operator=True)
    )
    return KoreanExpressionCoordinator(config, root)


def assert_canonical_no_files(cand: object, root: Path, body: object) -> None:
    assert isinstance(cand, PresentationCandidate)
    assert cand.outcome is Outcome.INELIGIBLE
    assert cand.status is CandidateStatus.CANONICAL and cand.publication_permitted
    assert cand.attempt_id is None and cand.artifact_key is None
    assert cand.body == (body if isinstance(body, str) else "")
    assert not root.exists()  # zero files: the data root was never created


def inject(payload: dict[str, Any], where: str, value: object) -> dict[str, Any]:
    """``payload`` with one field (dotted path into the card) replaced by ``value``."""
    out: dict[str, Any] = {
        **payload,
        "envelope": dict(payload["envelope"]),
        "buttons": [dict(b) for b in payload["buttons"]],
    }
    head, _, tail = where.partition(".")
    if head == "envelope":
        out["envelope"][tail] = value
    elif head == "button":
        out["buttons"][0][tail] = value
    else:
        out[head] = value
    return out


CARD_FIELDS = [
    "text",
    "customer_key",
    "proposal_digest",
    "status",
    "revision",
    "envelope.marker",
    "envelope.customer_label",
    "envelope.kst_day",
    "envelope.state",
    "button.label",
    "button.callback_data",
]


# ------------------------------------------------------------------- daily / weekly


@SETTINGS
@given(event_id=NOT_TEXT)
def test_daily_event_id_of_any_type_or_value(tmp_path: Path, event_id: object) -> None:
    root = tmp_path / f"r{abs(hash(repr(event_id))) % 10**9}"
    cand = coordinator(root).present_daily(BODY, finalized_event_id=event_id, facts=FACTS)  # type: ignore[arg-type]
    assert_canonical_no_files(cand, root, BODY)


@SETTINGS
@given(cut=st.integers(0, len(BODY)), bad=BAD_TEXT)
def test_daily_body_with_a_lone_surrogate_anywhere(tmp_path: Path, cut: int, bad: str) -> None:
    root = tmp_path / f"r{cut}"
    body = BODY[:cut] + bad + BODY[cut:]
    cand = coordinator(root).present_daily(body, finalized_event_id="evt", facts=FACTS)
    assert_canonical_no_files(cand, root, body)


@SETTINGS
@given(body=st.one_of(ANY_TEXT, WRONG_TYPE), facts=ANY_VALUE)
def test_daily_body_and_facts_of_any_type(tmp_path: Path, body: object, facts: object) -> None:
    root = tmp_path / "r"
    cand = coordinator(root).present_daily(body, finalized_event_id="evt", facts=facts)  # type: ignore[arg-type]
    assert_canonical_no_files(cand, root, body)


@SETTINGS
@given(field=st.sampled_from(sorted(SCHEDULE)), value=NOT_TEXT)
def test_weekly_schedule_key_kind_day_of_any_type_or_value(
    tmp_path: Path, field: str, value: object
) -> None:
    root = tmp_path / "r"
    args: dict[str, Any] = {**SCHEDULE, field: value}
    cand = coordinator(root).present_weekly(WEEKLY_BODY, explicit_fields=WEEKLY_FIELDS, **args)
    assert_canonical_no_files(cand, root, WEEKLY_BODY)


@SETTINGS
@given(cut=st.integers(0, len(WEEKLY_BODY)), explicit=ANY_VALUE)
def test_weekly_body_and_explicit_fields_of_any_value(
    tmp_path: Path, cut: int, explicit: object
) -> None:
    root = tmp_path / "r"
    body = WEEKLY_BODY[:cut] + SURROGATE + WEEKLY_BODY[cut:]
    cand = coordinator(root).present_weekly(body, explicit_fields=explicit, **SCHEDULE)  # type: ignore[arg-type]
    assert_canonical_no_files(cand, root, body)


# ------------------------------------------------------------------------ adaptive


@SETTINGS
@given(where=st.sampled_from(CARD_FIELDS), value=NOT_TEXT)
def test_adaptive_card_field_of_any_type_or_value(
    tmp_path: Path, where: str, value: object
) -> None:
    root = tmp_path / "r"
    s = session()
    payload = inject(dual_card(s), where, value)
    if where == "revision" and isinstance(value, int) and not isinstance(value, bool):
        payload["revision"] = SURROGATE  # an int revision is a valid card: keep it ineligible
    cand = coordinator(root).present_adaptive(
        payload, callback_data=callback_data(s), surface=DUAL_SURFACE
    )
    text = payload["text"]
    assert_canonical_no_files(cand, root, text)
    # Whatever the payload was, the candidate never revalidates.
    with pytest.raises(RevalidationError):
        revalidate(cand, payload, callback_data=callback_data(s), surface=DUAL_SURFACE)


@SETTINGS
@given(
    payload=ANY_VALUE,
    cb=st.one_of(ANY_TEXT, WRONG_TYPE),
    surface=st.one_of(st.none(), ANY_TEXT, WRONG_TYPE),
    pins=st.one_of(st.tuples(ANY_TEXT), WRONG_TYPE),
    origin=st.one_of(st.sampled_from(list(CardOrigin)), WRONG_TYPE),
)
def test_adaptive_arbitrary_payload_objects(
    tmp_path: Path, payload: object, cb: object, surface: object, pins: object, origin: object
) -> None:
    root = tmp_path / "r"
    cand = coordinator(root).present_adaptive(
        payload,  # type: ignore[arg-type]
        callback_data=cb,  # type: ignore[arg-type]
        origin=origin,  # type: ignore[arg-type]
        surface=surface,  # type: ignore[arg-type]
        authority_pins=pins,  # type: ignore[arg-type]
    )
    text = payload.get("text") if isinstance(payload, dict) else None
    assert_canonical_no_files(cand, root, text)


@SETTINGS
@given(cb=BAD_TEXT, pins=st.tuples(ANY_TEXT, ANY_TEXT))
def test_adaptive_callback_with_a_surrogate(tmp_path: Path, cb: str, pins: tuple[str, str]) -> None:
    root = tmp_path / "r"
    s = session()
    cand = coordinator(root).present_adaptive(
        dual_card(s), callback_data=callback_data(s) + cb, surface=DUAL_SURFACE, authority_pins=pins
    )
    assert_canonical_no_files(cand, root, dual_card(s)["text"])


# ------------------------------------------------------------------------- asyncio


Present = Callable[[KoreanExpressionCoordinator, object], Any]
ASYNC_CASES: dict[str, Present] = {
    "daily_event_id": lambda c, v: c.apresent_daily(BODY, finalized_event_id=v, facts=FACTS),  # type: ignore[arg-type]
    "daily_body": lambda c, v: c.apresent_daily(v, finalized_event_id="evt"),  # type: ignore[arg-type]
    "weekly_key": lambda c, v: c.apresent_weekly(
        WEEKLY_BODY,
        explicit_fields=WEEKLY_FIELDS,
        **{**SCHEDULE, "schedule_key": v},  # type: ignore[arg-type]
    ),
    "adaptive_customer_key": lambda c, v: c.apresent_adaptive(
        inject(dual_card(session()), "customer_key", v),
        callback_data=callback_data(session()),
        surface=DUAL_SURFACE,
    ),
}


@ASYNC_SETTINGS
@given(case=st.sampled_from(sorted(ASYNC_CASES)), value=NOT_TEXT)
def test_apresent_never_raises_either(tmp_path: Path, case: str, value: object) -> None:
    root = tmp_path / "r"
    coord = coordinator(root)
    cand = asyncio.run(ASYNC_CASES[case](coord, value))
    assert isinstance(cand, PresentationCandidate)
    assert cand.outcome is Outcome.INELIGIBLE and cand.status is CandidateStatus.CANONICAL
    assert not root.exists()
    coord.close()


# ----------------------------------------------------- report, revalidate, digest


def foreign_candidate(attempt_id: object) -> PresentationCandidate:
    """An accepted candidate this coordinator never handed out."""
    return PresentationCandidate(
        surface_version="daily.v1",
        attempt_id=attempt_id,  # type: ignore[arg-type]
        artifact_key=None,
        binding_digest="0" * 64,
        status=CandidateStatus.SELECTED,
        body=BODY,
        publication_permitted=True,
        outcome=Outcome.ACCEPTED,
    )


@SETTINGS
@given(attempt_id=st.one_of(ANY_TEXT, WRONG_TYPE, st.just("e" * 32)))
def test_report_of_an_attempt_not_ours_is_the_documented_value_error(
    tmp_path: Path, attempt_id: object
) -> None:
    root = tmp_path / "r"
    coord = coordinator(root)
    with pytest.raises(ValueError) as e:
        coord.report(foreign_candidate(attempt_id), Outcome.SELECTED)
    assert type(e.value) is ValueError and str(e.value) == "report_not_expected"
    assert not root.exists()


@SETTINGS
@given(candidate=st.one_of(ANY_VALUE, st.builds(foreign_candidate, ANY_TEXT)), outcome=ANY_VALUE)
def test_report_with_arbitrary_arguments(
    tmp_path: Path, candidate: object, outcome: object
) -> None:
    root = tmp_path / "r"
    with pytest.raises(ValueError) as e:
        coordinator(root).report(candidate, outcome)  # type: ignore[arg-type]
    assert type(e.value) is ValueError
    assert str(e.value) in {"not_host_outcome", "report_not_expected"}
    assert not root.exists()


class RaisingStr(str):
    """A forged id: a ``str`` subclass whose hash and equality raise."""

    __slots__ = ()

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")


class EqualStr(str):
    """A ``str`` subclass equal to (and hashing like) the id it copies."""

    __slots__ = ()


STR_SUBCLASS: st.SearchStrategy[object] = st.one_of(
    st.builds(RaisingStr, st.one_of(ANY_TEXT, st.just("e" * 32))),
    st.builds(EqualStr, st.one_of(ANY_TEXT, st.just("e" * 32))),
)


@SETTINGS
@given(attempt_id=STR_SUBCLASS, outcome=st.sampled_from(sorted(HOST_OUTCOMES)))
def test_report_of_a_str_subclass_id_is_the_documented_value_error(
    tmp_path: Path, attempt_id: object, outcome: Outcome
) -> None:
    """Only an exact ``str`` id; a subclass never reaches the table."""
    root = tmp_path / "r"
    with pytest.raises(ValueError) as e:
        coordinator(root).report(foreign_candidate(attempt_id), outcome)
    assert type(e.value) is ValueError and str(e.value) == "report_not_expected"
    assert not root.exists()


def test_a_str_subclass_copy_of_an_awaited_id_is_refused_and_the_real_one_stays(
    tmp_path: Path,
) -> None:
    root = DataRoot(tmp_path / "r")
    coord = coordinator(root.root)
    with ScriptedWorker(root, accepted()):
        cand = present_styled(coord, "evt-sub")
    assert cand.outcome is Outcome.ACCEPTED and cand.attempt_id is not None
    for forged in (EqualStr(cand.attempt_id), RaisingStr(cand.attempt_id)):
        with pytest.raises(ValueError, match="^report_not_expected$"):
            coord.report(dataclasses.replace(cand, attempt_id=forged), Outcome.SELECTED)
    coord.report(cand, Outcome.SELECTED)  # the handed-out id is still awaited, once
    coord.close()


def odd_candidate(**changes: object) -> PresentationCandidate:
    return dataclasses.replace(foreign_candidate("e" * 32), **changes)  # type: ignore[arg-type]


@SETTINGS
@given(
    candidate=st.one_of(
        ANY_VALUE,
        st.builds(lambda v: odd_candidate(generated=v), ANY_VALUE),
        st.builds(lambda v: odd_candidate(status=v, outcome=Outcome.DISABLED), ANY_VALUE),
    ),
    where=st.sampled_from(CARD_FIELDS),
    value=st.one_of(NOT_TEXT, ANY_VALUE),
    cb=st.one_of(st.just("an1:7f3a9c0b1d2e3f4a5b6c7d8e:create"), ANY_TEXT, WRONG_TYPE),
    glossary=st.one_of(st.none(), WRONG_TYPE),
)
def test_revalidate_raises_only_its_refusal(
    candidate: object, where: str, value: object, cb: object, glossary: object
) -> None:
    payload = inject(dual_card(session()), where, value)
    with pytest.raises(RevalidationError) as e:
        revalidate(
            candidate,  # type: ignore[arg-type]
            payload,
            callback_data=cb,  # type: ignore[arg-type]
            surface=DUAL_SURFACE,
            glossary=glossary,  # type: ignore[arg-type]
        )
    assert isinstance(e.value, ValueError)  # the documented misuse error
    assert str(e.value) in REASON_WORDS


@SETTINGS
@given(where=st.sampled_from(CARD_FIELDS), value=NOT_TEXT, pins=st.tuples(ANY_TEXT))
def test_binding_digest_raises_only_ineligible(where: str, value: object, pins: tuple[str]) -> None:
    s = session()
    payload = inject(dual_card(s), where, value)
    try:
        digest = binding_digest(
            payload, callback_data=callback_data(s), surface=DUAL_SURFACE, authority_pins=pins
        )
    except Ineligible as e:
        assert str(e) in INELIGIBLE_WORDS
    else:
        # Only a field the digest reads as a plain value may pass (an int revision).
        assert isinstance(digest, str) and len(digest) == 64


@SETTINGS
@given(payload=ANY_VALUE, cb=st.one_of(BAD_TEXT, WRONG_TYPE), pins=ANY_VALUE)
def test_binding_digest_of_arbitrary_objects(payload: object, cb: object, pins: object) -> None:
    with pytest.raises((Ineligible, TypeError)) as e:
        binding_digest(payload, callback_data=cb, authority_pins=pins)  # type: ignore[arg-type]
    if isinstance(e.value, Ineligible):
        assert str(e.value) in INELIGIBLE_WORDS
    else:
        assert str(e.value) == "authority_pins must be a tuple of str"


def test_the_regression_cases_of_the_issue(tmp_path: Path) -> None:
    """The issue's own examples, spelled out (each raised before the fix)."""
    root = tmp_path / "r"
    coord = coordinator(root)
    s = session()
    cases = [
        coord.present_daily(BODY, finalized_event_id="evt" + SURROGATE, facts=FACTS),
        coord.present_daily(BODY, finalized_event_id=12345, facts=FACTS),  # type: ignore[arg-type]
        coord.present_weekly(
            WEEKLY_BODY, explicit_fields=WEEKLY_FIELDS, **{**SCHEDULE, "schedule_key": SURROGATE}
        ),
        coord.present_adaptive(
            inject(dual_card(s), "customer_key", "client" + SURROGATE),
            callback_data=callback_data(s),
            surface=DUAL_SURFACE,
        ),
        asyncio.run(coord.apresent_daily(BODY + SURROGATE, finalized_event_id="evt")),
    ]
    assert [c.outcome for c in cases] == [Outcome.INELIGIBLE] * len(cases)
    assert not root.exists()
    with pytest.raises(ValueError, match="^report_not_expected$"):
        coord.report(foreign_candidate("not-ours"), Outcome.SELECTED)

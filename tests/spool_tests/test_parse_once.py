"""Spool messages are parsed once: strict reader -> Python object ->
``model_validate`` in strict Python mode. The old path (strict reader, then pydantic
``model_validate_json`` on the same bytes) is kept HERE ONLY, as a reference oracle: for
a corpus of valid messages, every one-field mutation of them, and a Hypothesis property
over arbitrary mutations, both paths accept the same files (with equal models) and
reject the same files (with the same reason).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT

from kexpr.spool.contract import Capsule, Composition
from kexpr.spool.contract._models import composition_from_object
from kexpr.spool.contract.answers import answer_document
from kexpr.spool.journal import canonical_json
from kexpr.spool.lifecycle import SpoolMode
from kexpr.spool.messages import (
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    SpoolReport,
    SpoolRequest,
    SpoolResponse,
    _load,
    parse_report,
    parse_request,
    parse_response,
)
from kexpr.spool.outcomes import REPORT_OUTCOMES, RESPONSE_OUTCOMES, Outcome

RID = "0123456789abcdef0123456789abcdef"
AID = "fedcba9876543210fedcba9876543210"
AKEY = "a" * 32
TS = "2026-12-01T05:00:00.000000Z"
TS2 = "2026-12-01T05:00:04.000000Z"


def _capsule() -> Capsule:
    return Capsule(
        schema_version="korean-expression-v4",
        surface=STYLED_SURFACE,
        artifact_key=AKEY,
        slots=(STYLED_SLOT,),
    )


def _composition() -> Composition:
    return composition_from_object(
        answer_document(_capsule(), {"weekly.interpretation": "[[P:01]]. 다만 [[A:01]]."})
    )


def _valid() -> list[tuple[str, dict[str, Any]]]:
    req = SpoolRequest(
        spool_version=SPOOL_VERSION,
        request_id=RID,
        submitted_at_utc=TS,
        deadline_at_utc=TS2,
        mode=SpoolMode.ENABLED,
        capsule=_capsule(),
    )
    accepted = SpoolResponse(
        spool_version=SPOOL_VERSION,
        request_id=RID,
        attempt_id=AID,
        status=ResponseStatus.ACCEPTED,
        outcome=Outcome.ACCEPTED,
        composition=_composition(),
    )
    canonical = SpoolResponse(
        spool_version=SPOOL_VERSION,
        request_id=RID,
        attempt_id=None,
        status=ResponseStatus.CANONICAL,
        outcome=Outcome.CLOCK_SKEW,
        composition=None,
    )
    report = SpoolReport(spool_version=SPOOL_VERSION, attempt_id=AID, outcome=Outcome.SELECTED)
    return [
        ("request", json.loads(req.to_bytes())),
        ("response", json.loads(accepted.to_bytes())),
        ("response", json.loads(canonical.to_bytes())),
        ("report", json.loads(report.to_bytes())),
    ]


_NEW: dict[str, Callable[[bytes], Any]] = {
    "request": parse_request,
    "response": parse_response,
    "report": parse_report,
}


def _old(kind: str, data: bytes) -> Any:
    """The two-parse path as it was (reference oracle only)."""
    _load(data)
    model: Any = {"request": SpoolRequest, "response": SpoolResponse, "report": SpoolReport}[kind]
    try:
        msg = model.model_validate_json(data)
    except ValueError as e:
        raise MessageError("schema") from e
    if kind == "response" and (msg.status is ResponseStatus.ACCEPTED) != (
        msg.composition is not None
    ):
        raise MessageError("schema")
    return msg


def _verdict(fn: Callable[[bytes], Any], data: bytes) -> tuple[str, Any]:
    try:
        msg = fn(data)
    except MessageError as e:
        return ("rejected", str(e))
    return ("accepted", msg.model_dump(mode="json"))


def _assert_same(kind: str, data: bytes) -> tuple[str, Any]:
    old = _verdict(lambda d: _old(kind, d), data)
    new = _verdict(_NEW[kind], data)
    assert new == old
    return new


def _encode(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


# Replacement values for any field: every JSON type, the enum spellings strict JSON
# mode accepts and the near misses it refuses, and other vocabularies' values.
_ALTERNATIVES: list[object] = [
    None,
    True,
    False,
    0,
    1,
    1.0,
    -1,
    "",
    "x",
    [],
    {},
    ["accepted"],
    {"value": "accepted"},
    RID,
    RID.upper(),
    AKEY,
    TS,
    TS + " ",
    "accepted",
    "ACCEPTED",
    "Accepted",
    " accepted",
    "canonical",
    "in_flight",
    "selected",
    "shadow_selected",
    "commit_failed",
    "clock_skew",
    "timeout",
    "Outcome.ACCEPTED",
    "shadow",
    "enabled",
    "kexpr-spool-v1",
    "kexpr-spool-v2",
    "kexpr-spool-v3",
]


def _mutations(obj: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [dict(obj, extra=1)]
    for key in obj:
        out.append({k: v for k, v in obj.items() if k != key})
        out.extend(dict(obj, **{key: alt}) for alt in _ALTERNATIVES)
        if isinstance(obj[key], dict):
            out.extend(dict(obj, **{key: sub}) for sub in _mutations(obj[key]))
    return out


def test_valid_messages_parse_alike_and_round_trip() -> None:
    for kind, obj in _valid():
        data = _encode(obj)
        verdict, _ = _assert_same(kind, data)
        assert verdict == "accepted"
        assert _NEW[kind](data).to_bytes() == canonical_json(obj).encode("utf-8")


def test_every_one_field_mutation_is_judged_alike() -> None:
    seen = {"accepted": 0, "rejected": 0}
    for kind, obj in _valid():
        for mutated in _mutations(obj):
            seen[_assert_same(kind, _encode(mutated))[0]] += 1
    # The corpus exercises both sides (e.g. another valid outcome is accepted).
    assert seen["accepted"] > 10 and seen["rejected"] > 500


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"[]",
        b'"accepted"',
        b'{"a":1,"a":1}',
        b'{"x":NaN}',
        b"\xef\xbb\xbf{}",
        b'{"x":"\xff"}',
        b'{"x":"A\\u0301"}',
        b"{" + b" " * (64 * 1024) + b"}",
    ],
)
def test_malformed_files_are_refused_alike(raw: bytes) -> None:
    for kind in _NEW:
        assert _assert_same(kind, raw) == ("rejected", "malformed")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
_ENUM_TEXT = st.sampled_from(
    sorted(m.value for m in RESPONSE_OUTCOMES)
    + [m.value for m in ResponseStatus]
    + sorted(m.value for m in REPORT_OUTCOMES)
    + ["shadow", "enabled", SPOOL_VERSION, RID, TS]
)


def _paths(obj: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _replace(obj: Any, path: tuple[object, ...], value: object) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {k: (_replace(v, rest, value) if k == head else v) for k, v in obj.items()}
    return [(_replace(v, rest, value) if i == head else v) for i, v in enumerate(obj)]


@given(
    which=st.integers(min_value=0, max_value=3),
    picks=st.lists(st.tuples(st.integers(min_value=0), _json | _ENUM_TEXT), min_size=1, max_size=3),
)
def test_mutated_valid_messages_are_judged_alike(
    which: int, picks: list[tuple[int, object]]
) -> None:
    kind, obj = _valid()[which]
    for index, value in picks:
        paths = _paths(obj)
        obj = _replace(obj, paths[index % len(paths)], value)
    _assert_same(kind, _encode(obj))

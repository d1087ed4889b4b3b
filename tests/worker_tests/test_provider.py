"""kexpr.worker.provider: the one provider call, over an injected httpx.MockTransport.

No real network: every request ends in a handler in this file. Each failure case
asserts the handler ran exactly once (max_retries=0, no application retry).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import openai
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kit.bodies import STYLED_SURFACE
from kit.spool import STYLED_SLOT

from kexpr.spool.contract import (
    ALL_SEMANTIC_IDS,
    SAFE_STYLE_LEXEMES,
    Capsule,
    Verdict,
    judge,
)
from kexpr.spool.outcomes import Outcome, ProviderFailure
from kexpr.worker import _transport, provider
from kexpr.worker.instruction import SYSTEM_INSTRUCTION
from kexpr.worker.provider import (
    ENDPOINT,
    MODEL,
    SDK_TIMEOUT_S,
    ProviderResult,
    build_client,
    call_once,
    call_with_deadline,
    request_kwargs,
    wire_kwargs,
)

URL = "https://api.openai.com/v1/chat/completions"
CAPSULE_OBJ = Capsule(
    schema_version="korean-expression-v4",
    surface=STYLED_SURFACE,
    artifact_key="0123456789abcdef" * 2,
    slots=(STYLED_SLOT,),
)
CAPSULE = CAPSULE_OBJ.to_json()
CONTENT = json.dumps(
    {
        "schema_version": "korean-expression-v4",
        "surface": "weekly.v1",
        "artifact_key": "0123456789abcdef" * 2,
        "slots": [
            {
                "slot_id": "weekly.interpretation",
                "predicate_ids": ["P_WEEKLY_TREND_OBSERVED"],
                "action_ids": ["A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
                "placeholder_tokens": ["[[P:01]]", "[[A:01]]"],
                "generated_ko": "[[P:01]]. 다만 [[A:01]].",
            }
        ],
    },
    ensure_ascii=False,
    indent=2,
)

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """Counts and keeps requests, answers with `respond`."""

    def __init__(self, respond: Handler) -> None:
        self.respond = respond
        self.requests: list[httpx.Request] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.requests.append(request)
        return self.respond(request)


@pytest.fixture(autouse=True)
def worker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("OPENAI_") or name == "SSLKEYLOGFILE":
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


@pytest.fixture
def connect() -> Iterator[Callable[[Recorder], openai.OpenAI]]:
    opened: list[httpx.Client] = []

    def make(recorder: Recorder) -> openai.OpenAI:
        http_client = httpx.Client(transport=httpx.MockTransport(recorder))
        opened.append(http_client)
        client = build_client(http_client=http_client)
        assert client is not None
        return client

    yield make
    for http_client in opened:
        http_client.close()


def completion_body(
    *,
    content: object = CONTENT,
    finish_reason: str = "stop",
    refusal: str | None = None,
    n_choices: int = 1,
    **message_extra: object,
) -> dict[str, object]:
    message = {"role": "assistant", "content": content, "refusal": refusal, **message_extra}
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {"index": i, "message": message, "finish_reason": finish_reason, "logprobs": None}
            for i in range(n_choices)
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def ok(body: object) -> Handler:
    return lambda request: httpx.Response(200, json=body)


def raw(status: int, content: bytes, content_type: str) -> Handler:
    return lambda request: httpx.Response(
        status, content=content, headers={"content-type": content_type}
    )


def raises(exc: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


# --- the exact request ------------------------------------------------------------


def test_the_exact_request(connect: Callable[[Recorder], openai.OpenAI]) -> None:
    recorder = Recorder(ok(completion_body()))
    result = call_once(connect(recorder), CAPSULE)
    assert result == ProviderResult(None, CONTENT, sent=True)

    (request,) = recorder.requests
    assert request.method == "POST"
    assert str(request.url) == URL
    assert request.headers["authorization"] == "Bearer sk-test"
    for header in ("openai-organization", "openai-project"):
        assert header not in request.headers
    body = json.loads(request.content)
    assert body == {
        "model": "gpt-4.1-mini",
        "n": 1,
        "temperature": 0.7,
        "max_tokens": 384,
        "response_format": {"type": "json_object"},
        "store": False,
        "messages": [
            {"role": "system", "content": SYSTEM_INSTRUCTION},
            {"role": "user", "content": CAPSULE},
        ],
    }
    system, user = body["messages"]
    assert user["content"].encode("utf-8") == CAPSULE.encode("utf-8")
    assert "JSON" in system["content"]
    assert "저장된 오늘 기록을 확인했습니다" not in system["content"]


def test_capsule_passes_through_unchanged(connect: Callable[[Recorder], openai.OpenAI]) -> None:
    # Whitespace and non-ASCII the SDK must not re-serialise away.
    capsule = '{ "surface" :\t"daily.v1",\n"x": "차분히\\u0041" }'
    recorder = Recorder(ok(completion_body()))
    call_once(connect(recorder), capsule)
    (request,) = recorder.requests
    assert json.loads(request.content)["messages"][1]["content"] == capsule


def test_request_kwargs_are_literal() -> None:
    assert request_kwargs(CAPSULE) == {
        "model": "gpt-4.1-mini",
        "n": 1,
        "temperature": 0.7,
        "max_tokens": 384,
        "response_format": {"type": "json_object"},
        "store": False,
        "messages": [
            {"role": "system", "content": SYSTEM_INSTRUCTION},
            {"role": "user", "content": CAPSULE},
        ],
    }
    assert (ENDPOINT, MODEL, SDK_TIMEOUT_S) == ("https://api.openai.com/v1", "gpt-4.1-mini", 3.0)


def test_client_construction_is_literal() -> None:
    client = build_client()
    assert client is not None
    try:
        assert str(client.base_url) == "https://api.openai.com/v1/"
        assert client.max_retries == 0
        assert client.timeout == 3.0
        assert client.api_key == "sk-test"
        assert client.organization is None and client.project is None
    finally:
        client.close()


def test_endpoint_is_not_taken_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, connect: Callable[[Recorder], openai.OpenAI]
) -> None:
    # The worker refuses to start with OPENAI_BASE_URL set (worker.environment);
    # independently, the endpoint is passed explicitly and wins.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://attacker.invalid/v1")
    recorder = Recorder(ok(completion_body()))
    call_once(connect(recorder), CAPSULE)
    (request,) = recorder.requests
    assert str(request.url) == URL


# --- the wire kwargs: byte-identical to the plain typed call ---------------------------

LARGE_CAPSULE = json.dumps(
    {
        "schema_version": "korean-expression-v4",
        "slots": [
            {"slot_id": f"s{i}", "generated_ko": '차분히 "인용" \\ 역슬래시\u2028\t끝', "i": i}
            for i in range(4000)
        ],
    },
    ensure_ascii=False,
)
WIRE_CAPSULES = [
    pytest.param(CAPSULE, id="capsule"),
    pytest.param('{"generated_ko": "차분히, 오늘 기록을 확인했습니다."}', id="korean"),
    pytest.param(json.dumps({"ko": "차분히 [[P:01]]."}, ensure_ascii=True), id="korean-escaped"),
    pytest.param('{"x": "\\u0041\\n\\t\\"\\\\\\/\\ud83d\\ude00"}', id="json-escapes"),
    pytest.param('say "hi" \\ back\\slash \\\\ "" \'', id="quotes-backslashes"),
    pytest.param("\x00\x01\x1f\x7f\x80\u2028\u2029\ufeff", id="control-and-separators"),
    pytest.param("😀𝄞 \U0010ffff", id="non-bmp"),
    pytest.param("", id="empty"),
    pytest.param(' { "surface" :\t"daily.v1",\n"x": "차분히\\u0041" }\r\n', id="whitespace"),
    pytest.param(LARGE_CAPSULE, id="large"),
]


def _on_the_wire(request: httpx.Request) -> tuple[object, ...]:
    """Everything of a request that reaches the transport, headers in order.

    openai 2.24.0 puts no per-request random header on this call (this client sends
    no idempotency key), so every header is compared; should one ever appear, this
    comparison fails and says so rather than silently skipping it.
    """
    return (
        request.method,
        str(request.url),
        request.headers.multi_items(),
        request.content,
        request.extensions,
    )


def _assert_wire_identical(client: openai.OpenAI, recorder: Recorder, capsule: str) -> None:
    """call_once's request == the plain typed ``create(**request_kwargs(...))``'s."""
    before = len(recorder.requests)
    assert call_once(client, capsule).outcome is None
    assert len(recorder.requests) == before + 1  # exactly one request per call_once
    # Outside call_once the client refuses to send (fail closed): bind a call for the
    # reference request, as call_once does.
    with _transport.bound(_transport.Call(math.inf)):
        client.chat.completions.create(**request_kwargs(capsule))  # type: ignore[call-overload]
    assert len(recorder.requests) == before + 2
    ours, typed = recorder.requests[before:]
    assert _on_the_wire(ours) == _on_the_wire(typed)
    assert json.loads(ours.content)["messages"][1]["content"] == capsule


@pytest.fixture
def wire_client(
    connect: Callable[[Recorder], openai.OpenAI],
) -> tuple[openai.OpenAI, Recorder]:
    recorder = Recorder(ok(completion_body()))
    return connect(recorder), recorder


@pytest.mark.parametrize("capsule", WIRE_CAPSULES)
def test_wire_request_is_byte_identical_to_the_typed_call(
    wire_client: tuple[openai.OpenAI, Recorder], capsule: str
) -> None:
    _assert_wire_identical(*wire_client, capsule)


def test_wire_body_keeps_the_sdk_key_order(wire_client: tuple[openai.OpenAI, Recorder]) -> None:
    # The placeholder holds messages' place: it is first, as in the SDK's own literal.
    client, recorder = wire_client
    call_once(client, CAPSULE)
    (request,) = recorder.requests
    assert list(json.loads(request.content)) == [
        "messages",
        "model",
        "max_tokens",
        "n",
        "response_format",
        "store",
        "temperature",
    ]
    assert request.content.startswith(b'{"messages":[{"role":"system","content":')


_TEXT = st.text(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(list('가나다차분히했습니다 "\\/{}[]:,\n\t\r\x00\u2028😀')),
    )
)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
_CAPSULES = st.one_of(
    _TEXT,
    st.builds(
        lambda value, ascii_only, indent: json.dumps(value, ensure_ascii=ascii_only, indent=indent),
        _JSON_VALUES,
        st.booleans(),
        st.sampled_from([None, 2]),
    ),
)


# Modest and fixed (two MockTransport calls an example): not tied to the fuzz profile.
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # one client, reused
)
@given(capsule=_CAPSULES)
def test_wire_request_is_byte_identical_for_arbitrary_capsules(
    wire_client: tuple[openai.OpenAI, Recorder], capsule: str
) -> None:
    _assert_wire_identical(*wire_client, capsule)


def test_an_unencodable_capsule_fails_alike_with_zero_requests(
    wire_client: tuple[openai.OpenAI, Recorder],
) -> None:
    # A lone surrogate cannot be UTF-8 encoded: both forms fail before any request.
    client, recorder = wire_client
    for kwargs in (wire_kwargs("\ud800"), request_kwargs("\ud800")):
        with pytest.raises(UnicodeEncodeError):
            client.chat.completions.create(**kwargs)  # type: ignore[call-overload]
    assert recorder.requests == []


def test_wire_kwargs_are_request_kwargs_with_messages_moved() -> None:
    wire = wire_kwargs(CAPSULE)
    expected = request_kwargs(CAPSULE)
    assert wire == {**expected, "messages": [], "extra_body": {"messages": expected["messages"]}}
    assert list(wire) == [*expected, "extra_body"]


def test_wire_kwargs_share_nothing_between_calls() -> None:
    first, second = wire_kwargs(CAPSULE), wire_kwargs(CAPSULE)
    documented = request_kwargs(CAPSULE)

    def containers(kwargs: dict[str, object]) -> list[object]:
        extra = kwargs["extra_body"]
        assert isinstance(extra, dict)
        messages = extra["messages"]
        assert isinstance(messages, list)
        return [kwargs, extra, messages, *messages, kwargs["messages"], kwargs["response_format"]]

    ids_first = {id(c) for c in containers(first)}
    assert ids_first.isdisjoint(id(c) for c in containers(second))
    assert ids_first.isdisjoint(
        id(c) for c in [documented, documented["messages"], documented["response_format"]]
    )

    # Mutating everything one call was given alters neither the next call nor the
    # documented parameters.
    for container in containers(first):
        if isinstance(container, dict):
            container.clear()
        elif isinstance(container, list):
            container.append({"role": "user", "content": "injected"})
    assert wire_kwargs(CAPSULE) == second
    assert request_kwargs(CAPSULE) == documented
    assert second["messages"] == []


# --- one request per outcome --------------------------------------------------------


def _status(code: int) -> Handler:
    return lambda request: httpx.Response(
        code,
        json={"error": {"message": "nope", "type": "x", "code": None}},
        headers={"retry-after": "0", "x-should-retry": "true"},
    )


CASES: list[tuple[str, Handler, ProviderFailure | None]] = [
    ("read-timeout", raises(httpx.ReadTimeout("slow")), Outcome.TIMEOUT),
    ("connect-timeout", raises(httpx.ConnectTimeout("slow")), Outcome.TIMEOUT),
    ("429", _status(429), Outcome.PROVIDER_ERROR),
    ("500", _status(500), Outcome.PROVIDER_ERROR),
    ("503", _status(503), Outcome.PROVIDER_ERROR),
    ("401", _status(401), Outcome.PROVIDER_ERROR),
    ("400", _status(400), Outcome.PROVIDER_ERROR),
    ("connect-error", raises(httpx.ConnectError("refused")), Outcome.PROVIDER_ERROR),
    ("remote-protocol", raises(httpx.RemoteProtocolError("eof")), Outcome.PROVIDER_ERROR),
    (
        "invalid-json",
        raw(200, b'{"id": "x", "choices": [', "application/json"),
        Outcome.INVALID_RESPONSE,
    ),
    (
        "text-html",
        raw(200, b"<html><body>gateway</body></html>", "text/html"),
        Outcome.INVALID_RESPONSE,
    ),
    ("empty-object", ok({}), Outcome.INVALID_RESPONSE),
    ("json-null", raw(200, b"null", "application/json"), Outcome.INVALID_RESPONSE),
    ("json-array", ok([completion_body()]), Outcome.INVALID_RESPONSE),
    (
        "choices-not-list",
        ok({**completion_body(), "choices": {"0": "x"}}),
        Outcome.INVALID_RESPONSE,
    ),
    ("zero-choices", ok(completion_body(n_choices=0)), Outcome.INVALID_RESPONSE),
    ("two-choices", ok(completion_body(n_choices=2)), Outcome.INVALID_RESPONSE),
    (
        "finish-length",
        ok(completion_body(finish_reason="length")),
        Outcome.INVALID_RESPONSE,
    ),
    (
        "finish-content-filter",
        ok(completion_body(finish_reason="content_filter")),
        Outcome.INVALID_RESPONSE,
    ),
    (
        "refusal",
        ok(completion_body(content=None, refusal="I can't help with that.")),
        Outcome.INVALID_RESPONSE,
    ),
    ("refusal-with-content", ok(completion_body(refusal="no")), Outcome.INVALID_RESPONSE),
    ("content-null", ok(completion_body(content=None)), Outcome.INVALID_RESPONSE),
    ("content-number", ok(completion_body(content=7)), Outcome.INVALID_RESPONSE),
    (
        "content-list",
        ok(completion_body(content=[{"type": "text", "text": "x"}])),
        Outcome.INVALID_RESPONSE,
    ),
    (
        "message-missing",
        ok({**completion_body(), "choices": [{"index": 0, "finish_reason": "stop"}]}),
        Outcome.INVALID_RESPONSE,
    ),
    (
        "tool-calls",
        ok(
            completion_body(
                tool_calls=[
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ]
            )
        ),
        Outcome.INVALID_RESPONSE,
    ),
    (
        "function-call",
        ok(completion_body(function_call={"name": "f", "arguments": "{}"})),
        Outcome.INVALID_RESPONSE,
    ),
    ("valid", ok(completion_body()), None),
    ("valid-empty-tool-calls", ok(completion_body(tool_calls=[])), None),
]


@pytest.mark.parametrize(
    ("handler", "expected"),
    [pytest.param(h, e, id=name) for name, h, e in CASES],
)
def test_one_request_and_its_outcome(
    connect: Callable[[Recorder], openai.OpenAI], handler: Handler, expected: ProviderFailure | None
) -> None:
    recorder = Recorder(handler)
    result = call_once(connect(recorder), CAPSULE)
    assert len(recorder.requests) == 1
    assert result.outcome is expected
    if expected is None:
        assert result.content == CONTENT
    else:
        assert result.content is None


def test_base_exceptions_propagate(connect: Callable[[Recorder], openai.OpenAI]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise SystemExit(3)

    recorder = Recorder(handler)
    with pytest.raises(SystemExit):
        call_once(connect(recorder), CAPSULE)
    assert len(recorder.requests) == 1


# --- credentials --------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "", "   ", "\t\n "])
def test_no_client_without_a_key(monkeypatch: pytest.MonkeyPatch, key: str | None) -> None:
    if key is None:
        monkeypatch.delenv("OPENAI_API_KEY")
    else:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    recorder = Recorder(ok(completion_body()))
    with httpx.Client(transport=httpx.MockTransport(recorder)) as http_client:
        assert build_client(http_client=http_client) is None
        assert build_client() is None
    assert recorder.requests == []


# --- the deadline -------------------------------------------------------------------


def _join_call_threads() -> None:
    """Wait until no call runs any more (kept threads park as ``-idle``)."""
    end = time.monotonic() + 5
    while any(t.name == "kexpr-provider-call" for t in threading.enumerate()):
        assert time.monotonic() < end, "a provider call is still running"
        time.sleep(0.01)
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("kexpr-provider"))


def test_call_threads_are_kept_and_a_hung_call_never_delays_another(
    connect: Callable[[Recorder], openai.OpenAI],
) -> None:
    release = threading.Event()
    threads: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        threads.append(threading.get_ident())
        if len(threads) == 2:
            release.wait(timeout=10)  # the second call hangs
        return httpx.Response(200, json=completion_body())

    client = connect(Recorder(handler))
    assert call_with_deadline(client, CAPSULE, seconds=5.0).outcome is None
    _join_call_threads()
    try:
        # The hung one times out; the next starts at once on another thread.
        assert call_with_deadline(client, CAPSULE, seconds=0.2).outcome is Outcome.TIMEOUT
        started = time.monotonic()
        assert call_with_deadline(client, CAPSULE, seconds=5.0).outcome is None
        # A correctness bound, not a benchmark: far below the hung call's 10 s.
        assert time.monotonic() - started < 5.0
    finally:
        release.set()
        _join_call_threads()
    assert threads[0] == threads[1]  # the first thread was kept and reused
    assert threads[2] != threads[1]  # the hung one was busy: a new thread, no waiting


def test_deadline_returns_timeout_and_discards_the_late_result(
    connect: Callable[[Recorder], openai.OpenAI],
) -> None:
    release = threading.Event()
    entered = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        entered.set()
        release.wait(timeout=10)
        return httpx.Response(200, json=completion_body())

    recorder = Recorder(handler)
    client = connect(recorder)
    try:
        started = time.monotonic()
        result = call_with_deadline(client, CAPSULE, seconds=0.3)
        elapsed = time.monotonic() - started
        # A correctness bound (the caller is not held by the slow call's 10 s), not a
        # benchmark.
        assert result == ProviderResult(Outcome.TIMEOUT, sent=True)
        assert elapsed < 5.0
        assert entered.is_set()
        assert len(recorder.requests) == 1
    finally:
        release.set()
        _join_call_threads()
    # The late answer arrived and was dropped; still only one request.
    assert len(recorder.requests) == 1


def test_deadline_passes_a_timely_result_through(
    connect: Callable[[Recorder], openai.OpenAI],
) -> None:
    recorder = Recorder(ok(completion_body()))
    result = call_with_deadline(connect(recorder), CAPSULE, seconds=5.0)
    assert result == ProviderResult(None, CONTENT, sent=True)
    assert len(recorder.requests) == 1
    _join_call_threads()


def test_deadline_maps_failures_like_call_once(
    connect: Callable[[Recorder], openai.OpenAI],
) -> None:
    recorder = Recorder(_status(503))
    result = call_with_deadline(connect(recorder), CAPSULE, seconds=5.0)
    assert result == ProviderResult(Outcome.PROVIDER_ERROR, sent=True)
    assert len(recorder.requests) == 1
    _join_call_threads()


def test_deadline_reraises_a_timely_base_exception_in_the_caller(
    connect: Callable[[Recorder], openai.OpenAI],
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        call_with_deadline(connect(Recorder(handler)), CAPSULE, seconds=5.0)
    _join_call_threads()


@pytest.mark.parametrize("seconds", [0.0, -0.0, -1.0, float("-inf")])
def test_no_time_left_is_timeout_with_zero_requests(
    connect: Callable[[Recorder], openai.OpenAI], seconds: float
) -> None:
    recorder = Recorder(ok(completion_body()))
    result = call_with_deadline(connect(recorder), CAPSULE, seconds=seconds)
    assert result == ProviderResult(Outcome.TIMEOUT)
    assert recorder.requests == []
    assert not any(t.name == "kexpr-provider-call" for t in threading.enumerate())


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), 1e300])
def test_unbounded_deadline_is_a_caller_bug(
    connect: Callable[[Recorder], openai.OpenAI], seconds: float
) -> None:
    recorder = Recorder(ok(completion_body()))
    with pytest.raises(ValueError):
        call_with_deadline(connect(recorder), CAPSULE, seconds=seconds)
    assert recorder.requests == []


# --- the mapping function and the result type ----------------------------------------

_REQ = httpx.Request("POST", URL)


def _validation_error() -> pydantic.ValidationError:
    class M(pydantic.BaseModel):
        x: int

    try:
        M.model_validate({"x": "nope"})
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (openai.APITimeoutError(request=_REQ), Outcome.TIMEOUT),
        (openai.APIConnectionError(request=_REQ), Outcome.PROVIDER_ERROR),
        (
            openai.RateLimitError("x", response=httpx.Response(429, request=_REQ), body=None),
            Outcome.PROVIDER_ERROR,
        ),
        (
            openai.InternalServerError("x", response=httpx.Response(500, request=_REQ), body=None),
            Outcome.PROVIDER_ERROR,
        ),
        (
            openai.APIResponseValidationError(
                response=httpx.Response(200, request=_REQ), body=None
            ),
            Outcome.INVALID_RESPONSE,
        ),
        (openai.OpenAIError("x"), Outcome.PROVIDER_ERROR),
        (httpx.ReadTimeout("x"), Outcome.TIMEOUT),
        (TimeoutError(), Outcome.TIMEOUT),
        (httpx.ConnectError("x"), Outcome.PROVIDER_ERROR),
        (json.JSONDecodeError("x", "{", 1), Outcome.INVALID_RESPONSE),
        (_validation_error(), Outcome.INVALID_RESPONSE),
        (TypeError(), Outcome.INVALID_RESPONSE),
        (ValueError(), Outcome.INVALID_RESPONSE),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "x"), Outcome.INVALID_RESPONSE),
        (RuntimeError(), Outcome.PROVIDER_ERROR),
        (OSError(), Outcome.PROVIDER_ERROR),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_map_failure(exc: BaseException, expected: ProviderFailure) -> None:
    assert provider._map_failure(exc) is expected


def test_extract_content_accepts_only_a_completion() -> None:
    from openai.types.chat import ChatCompletion

    good = ChatCompletion.model_validate(completion_body())
    assert provider._extract_content(good) == CONTENT
    for other in (CONTENT, None, {}, completion_body(), ChatCompletion.construct()):
        assert provider._extract_content(other) is None


def test_result_never_shows_its_content() -> None:
    result = ProviderResult(None, "차분히, [[P:01]].", sent=True)
    assert "차분히" not in repr(result)
    assert "[[P:01]]" not in str(result)


@pytest.mark.parametrize(
    ("outcome", "content", "error"),
    [
        (None, None, TypeError),
        (Outcome.TIMEOUT, "x", ValueError),
        ("content", "x", TypeError),
        ("timeout", None, TypeError),  # the word, not the member
        (Outcome.SELECTED, None, TypeError),  # an outcome, but not a provider failure
        (Outcome.ACCEPTED, "x", TypeError),
    ],
)
def test_result_validates_on_construction(
    outcome: object, content: str | None, error: type[Exception]
) -> None:
    with pytest.raises(error):
        ProviderResult(outcome, content)  # type: ignore[arg-type]


# --- the system instruction -------------------------------------------------------------


def test_instruction_is_static_and_mentions_json() -> None:
    from kexpr.worker import instruction

    assert instruction._build() == SYSTEM_INSTRUCTION
    assert "JSON" in SYSTEM_INSTRUCTION
    for key in (
        "schema_version",
        "surface",
        "artifact_key",
        "slots",
        "slot_id",
        "predicate_ids",
        "action_ids",
        "placeholder_tokens",
        "generated_ko",
    ):
        assert key in SYSTEM_INSTRUCTION


def test_instruction_lists_ids_and_lexicon_but_no_expansion() -> None:
    from gateway_shim.glossary import GLOSSARY
    from kexpr.spool.contract.fit import FIT, OPEN_FAMILY_FIT
    from kexpr.worker.instruction import INVALID_EXAMPLES

    # Every shipped ID, sorted, heads one line of the fit table the instruction lists.
    listed = re.findall(r"^  ([A-Z][A-Z0-9_]+): ", SYSTEM_INSTRUCTION, flags=re.MULTILINE)
    assert listed == sorted(ALL_SEMANTIC_IDS)
    # The only Korean the model is shown is the table's words and the words of the
    # invalid examples (a lexicon word the table excludes there, a lexeme with a
    # particle): every Hangul run is one of those, so no glossary expansion
    # (customer-visible canonical text) can be in there.
    table = {
        style.lexeme
        for cells in (*FIT.values(), *OPEN_FAMILY_FIT.values())
        for styles in cells.values()
        for style in styles
    }
    runs = re.findall(r"[\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f]+", SYSTEM_INSTRUCTION)
    assert table and table <= set(runs) and table <= set(SAFE_STYLE_LEXEMES)
    wrong = {w for _, _, text, _ in INVALID_EXAMPLES for w in re.findall(r"[\uac00-\ud7a3]+", text)}
    assert wrong - set(SAFE_STYLE_LEXEMES) == {"다만은"}
    assert set(runs) <= table | wrong
    assert "저장된 오늘 기록을 확인했습니다" not in SYSTEM_INSTRUCTION
    assert set(GLOSSARY) == set(ALL_SEMANTIC_IDS)
    for expansion in GLOSSARY.values():
        assert expansion not in SYSTEM_INSTRUCTION


def test_fixture_content_is_what_the_contract_accepts() -> None:
    # The CONTENT the fake provider returns is a well-formed answer to CAPSULE, so
    # the CONTENT outcome tests exercise a realistic, pretty-printed response.
    assert judge(CAPSULE_OBJ, CONTENT).verdict is Verdict.ACCEPTED


def test_instruction_names_the_open_dual_families_not_operator_texts() -> None:
    # Operator IDs travel in each capsule; the static instruction names their two
    # families (manifest Rule 5). The worker never reads the operator glossary.
    from pathlib import Path

    from kexpr.spool.contract.manifest import DUAL_DECISION_ID_PATTERN, DUAL_REASON_ID_PATTERN

    assert DUAL_DECISION_ID_PATTERN in SYSTEM_INSTRUCTION
    assert DUAL_REASON_ID_PATTERN in SYSTEM_INSTRUCTION
    worker_sources = "".join(
        p.read_text() for p in Path(__file__).resolve().parents[2].joinpath("worker").glob("*.py")
    )
    assert "operator_glossary" not in worker_sources
    assert "gateway_shim" not in worker_sources

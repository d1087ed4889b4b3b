"""The worker's one provider call: the only seam between kexpr and the network.

design §9 fixes every parameter; this module holds them as literals so a reviewer can
read the whole wire contract in one place. It is a small seam in the filelock sense:
:func:`build_client` (construction, once per process), :func:`call_once` (exactly
one request) and :func:`call_with_deadline` (the real time bound). The SDK, httpx
and everything else that can go wrong below them is folded into one
:class:`ProviderResult` (content, or a ``ProviderFailure`` outcome) by exactly two
functions, :func:`_map_failure` (things that raised) and :func:`_extract_content`
(things that returned) — except what the transport itself decided (a refused answer,
a cut call), which :func:`call_once` reads off the call's state first.

Rules of this module:

* Exactly one ``chat.completions.create`` per :func:`call_once`, and the client is
  built with ``max_retries=0``: a 429, a 5xx, a transport error, a timeout, a
  cancellation, a malformed answer or a late result never causes a second request.
* Nothing here logs, and no exception, outcome or ``repr`` carries the prompt, the
  capsule, the response content or the key. Outcomes are enum members; the content
  of a content result is kept out of its ``repr``.
* The call is made with :func:`wire_kwargs`, not :func:`request_kwargs` as such:
  the same parameters with ``messages`` handed to the SDK through ``extra_body``,
  so the SDK does not walk them against its TypedDicts. The body on the wire is
  byte-identical (see :func:`wire_kwargs`).
* Every call is bounded in time, bytes and truth by :mod:`kexpr.worker._transport`:
  a total deadline at which the call's sockets are shut down and its
  thread returns (a call that overstays is cut, not abandoned), a response body
  read with a hard cap of ``BODY_CAP_BYTES`` = 48 KiB (the contract's 16 KiB
  content limit, twice for JSON-string escaping, plus 16 KiB of envelope; the
  derivation is in that module) with ``Accept-Encoding: identity`` and any
  encoded body refused (so nothing is ever inflated), no redirects (a redirect
  would be a second request), and :attr:`ProviderResult.sent`: whether the
  request was handed to the transport at all (``calls`` counts only those).
  An over-cap or encoded answer is ``invalid_response``.
* ``OPENAI_API_KEY`` is the only credential read, only in :func:`build_client`.
  The SDK's other environment variables are refused before this module is used
  (:mod:`kexpr.worker.environment`); the endpoint is passed explicitly, so
  ``OPENAI_BASE_URL`` could not redirect the call even if it slipped through.

Outcome mapping (measured against openai 2.24.0 over ``httpx.MockTransport``)::

    BaseException
     ├── KeyboardInterrupt, SystemExit ............. propagate (call_once catches
     │                                               only Exception; a stray one
     │                                               given to _map_failure is a
     │                                               cancellation: PROVIDER_ERROR)
     └── Exception
          ├── openai.OpenAIError
          │    ├── APIError
          │    │    ├── APIConnectionError ........ PROVIDER_ERROR
          │    │    │    └── APITimeoutError ...... TIMEOUT  (httpx timeout, any phase)
          │    │    ├── APIStatusError ............ PROVIDER_ERROR  (4xx, 429, 5xx)
          │    │    └── APIResponseValidationError  INVALID_RESPONSE (malformed 200)
          │    ├── LengthFinishReasonError ....... INVALID_RESPONSE (truncated 200)
          │    ├── ContentFilterFinishReasonError  INVALID_RESPONSE (filtered 200)
          │    └── (any other OpenAIError) ....... PROVIDER_ERROR
          ├── httpx.TimeoutException, TimeoutError  TIMEOUT  (if one ever escapes the SDK)
          ├── httpx.HTTPError ..................... PROVIDER_ERROR
          ├── ValueError .......................... INVALID_RESPONSE
          │    ├── json.JSONDecodeError              (200 whose body is not JSON)
          │    └── pydantic.ValidationError
          ├── TypeError ........................... INVALID_RESPONSE
          └── (anything else) ..................... PROVIDER_ERROR

    create() returned (no exception) -> _extract_content:
     ├── ChatCompletion, exactly one Choice, finish_reason == "stop",
     │   message.refusal is None, no tool/function call,
     │   message.content is a str .................. content (outcome None)
     └── anything else ............................. INVALID_RESPONSE
          (a str for a 200 text/html body; None for a 200 "null"; choices=None
           for "{}"; finish_reason "length" with silently truncated content;
           a refusal; two choices; content null)

    refused by the transport (_transport.AnswerRefused) .. INVALID_RESPONSE
          (an encoded body, or a body over BODY_CAP_BYTES; checked
           before the exception the SDK wrapped it in)

    call_with_deadline: not finished within `seconds` ... TIMEOUT
          (the call is cut: its sockets shut down, its thread
           returns; whatever it produced is discarded)
"""

from __future__ import annotations

import math
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeAlias

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice

from kexpr.spool.contract.budget import MAX_COMPLETION_TOKENS, SDK_TIMEOUT_S
from kexpr.spool.outcomes import PROVIDER_FAILURES, Outcome, ProviderFailure
from kexpr.worker._transport import (
    BODY_CAP_BYTES,
    Call,
    bound,
    bounded_http_client,
    install_bounds,
)
from kexpr.worker.environment import key_available
from kexpr.worker.instruction import SYSTEM_INSTRUCTION

__all__ = [
    "BODY_CAP_BYTES",
    "CallThread",
    "ENDPOINT",
    "MODEL",
    "SDK_TIMEOUT_S",
    "ProviderResult",
    "build_client",
    "build_rehearsal_client",
    "call_once",
    "call_with_deadline",
    "request_kwargs",
    "take_call_thread",
    "wire_kwargs",
]

# design §9, literally. A change to any of these is a reviewed contract change.
ENDPOINT: Final = "https://api.openai.com/v1"
MODEL: Final = "gpt-4.1-mini"
# The client's ``timeout=`` (SDK_TIMEOUT_S) and ``max_tokens=``
# (MAX_COMPLETION_TOKENS) are the budget's (kexpr.spool.contract.budget). The
# timeout is per phase (connect/read/write/pool), NOT per call: a server that
# drips bytes faster than it never trips it. The total bound is
# call_with_deadline's, which the transport applies to every socket operation.
# After the cut at the deadline, how long the caller waits for the call thread
# to return (it normally does within milliseconds: its sockets are shut down).
# Only a DNS lookup cannot be cut; then the thread is left to end on its own.
_CUT_GRACE_S: Final = 0.5
_MAX_RETRIES: Final = 0
_TEMPERATURE: Final = 0.7


@dataclass(frozen=True, slots=True)
class ProviderResult:
    """One call's result: content (``outcome`` None), or how it failed.

    ``content`` is the raw message content. A call that returned content has no
    outcome word: whether the content is acceptable is the contract's verdict.

    The content is still untrusted model output: the caller runs the contract's
    strict parse on it. It is excluded from ``repr`` so that logging a result can
    never log a response.
    """

    outcome: ProviderFailure | None
    content: str | None = field(default=None, repr=False)
    # The answer's ``usage.completion_tokens`` as the API reported it (a non-negative
    # int), or None when absent or not an int. Read for the
    # worker's content-free histogram only (`kexpr.worker.histograms`): never for
    # judging, never trusted as a bound, never part of ``content``; not part of a
    # result's equality either (what a call produced is its outcome and content).
    completion_tokens: int | None = field(default=None, compare=False)
    # ``usage.prompt_tokens`` likewise (for the status file's token totals, from
    # which ``kexpr status`` estimates a cost at the operator's price): a count only.
    prompt_tokens: int | None = field(default=None, compare=False)
    # Whether the request was handed to the transport (with time left): the one
    # fact `calls` in the worker status counts. A content result was
    # sent; a timeout may or may not have been.
    sent: bool = False

    def __post_init__(self) -> None:
        if type(self.sent) is not bool:
            raise TypeError("sent is a bool")
        if self.outcome is None:
            if type(self.content) is not str:
                raise TypeError("a content result carries its content as a str")
            if not self.sent:
                raise ValueError("a content result was sent")
        elif not isinstance(self.outcome, Outcome) or self.outcome not in PROVIDER_FAILURES:
            raise TypeError("outcome must be a ProviderFailure or None")
        elif self.content is not None:
            raise ValueError("only a content result carries content")
        elif self.outcome is Outcome.CREDENTIAL_UNAVAILABLE and self.sent:
            raise ValueError("no key, no request")
        for tokens in (self.completion_tokens, self.prompt_tokens):
            if tokens is not None and (type(tokens) is not int or tokens < 0):
                raise TypeError("token counts are non-negative ints or None")


def build_client(*, http_client: httpx.Client | None = None) -> openai.OpenAI | None:
    """Build the one client, or ``None`` when the key is missing or blank.

    ``None`` means ``credential_unavailable`` with zero HTTP. The caller builds the
    client once per process. ``http_client`` is the unit tests' injection point for
    an ``httpx.MockTransport``; production never passes it (black-box tests reach a
    loopback fake through ``HTTPS_PROXY`` and ``SSL_CERT_FILE`` instead). Either
    way the client gets the transport's byte cap, identity encoding and ``sent``
    hooks; production's own client (`_transport.bounded_http_client`) adds the
    socket deadline and reads ``HTTPS_PROXY``/``SSL_CERT_FILE`` through httpx,
    as the SDK's default client did, with the SDK's connection limits.
    """
    if not key_available(os.environ):
        return None
    if http_client is None:
        http_client = bounded_http_client(
            timeout=SDK_TIMEOUT_S, limits=openai.DEFAULT_CONNECTION_LIMITS
        )
    else:
        install_bounds(http_client)
    return openai.OpenAI(
        api_key=os.environ["OPENAI_API_KEY"],
        base_url=ENDPOINT,
        max_retries=_MAX_RETRIES,
        timeout=SDK_TIMEOUT_S,
        http_client=http_client,
    )


# The client of a rehearsal is built with this placeholder instead of a key: the
# SDK requires a value, and this one is no credential (no request leaves the
# process: the transport is the built-in model).
REHEARSAL_API_KEY: Final = "rehearsal-without-a-key"


def build_rehearsal_client(transport: httpx.BaseTransport) -> openai.OpenAI:
    """The one client of a rehearsal (`kexpr.worker.rehearsal`): production's
    parameters (endpoint, ``max_retries=0``, timeout, the transport's bounds),
    with ``transport`` — the built-in model — in place of the network. Reads no
    environment variable: never the key (the rehearsal worker refuses to start
    with one present), never a proxy (``trust_env=False``)."""
    http_client = install_bounds(
        httpx.Client(
            transport=transport,
            timeout=SDK_TIMEOUT_S,
            follow_redirects=False,
            trust_env=False,
        )
    )
    return openai.OpenAI(
        api_key=REHEARSAL_API_KEY,
        base_url=ENDPOINT,
        max_retries=_MAX_RETRIES,
        timeout=SDK_TIMEOUT_S,
        http_client=http_client,
    )


def request_kwargs(capsule_json: str) -> dict[str, object]:
    """The keyword arguments of the one ``chat.completions.create`` call.

    Non-streaming (``stream`` is absent), no tools, ``store=False``. The capsule
    JSON is the only user message, passed through as given. :func:`call_once`
    passes them as :func:`wire_kwargs`, which sends the same bytes.
    """
    return {
        "model": MODEL,
        "n": 1,
        "temperature": _TEMPERATURE,
        "max_tokens": MAX_COMPLETION_TOKENS,
        "response_format": {"type": "json_object"},
        "store": False,
        "messages": [
            {"role": "system", "content": SYSTEM_INSTRUCTION},
            {"role": "user", "content": capsule_json},
        ],
    }


def wire_kwargs(capsule_json: str) -> dict[str, object]:
    """:func:`request_kwargs` as the one call passes them: ``messages`` moved to
    ``extra_body``, with ``messages=[]`` left in its place.

    Why: openai 2.24.0's ``create`` runs ``maybe_transform`` over its typed
    arguments, which walks every message against the ``CompletionCreateParams``
    TypedDict union graph — GIL-holding CPU on every call to return our plain
    ``{"role": str, "content": str}`` dicts unchanged (measured: docs/performance.md,
    "The figures behind the code's comments").
    ``extra_body`` is not transformed: ``_base_client._build_request`` merges it
    into the transformed body afterwards, ``{**json_data, **extra_json}``, a
    shallow merge in which a key already present keeps its position and takes
    the new value. The empty placeholder satisfies ``@required_args`` and holds
    ``messages``' place, so the JSON body on the wire is byte-identical to the
    plain typed call — method, URL, headers and body, proven for fixed and
    Hypothesis-generated capsules in tests/worker_tests/test_provider.py. The same
    fix as the host project's (NousResearch/hermes-agent PR #112231, issue #111723).

    ``response_format`` stays typed: moving it too (same bytes) saves next to
    nothing (the same table) and needs a placeholder the
    SDK's types do not allow (``None`` or ``{}``), which a lost merge would send as
    a plausible request without JSON mode, where a lost ``messages`` sends an empty
    conversation the API refuses.

    Built fresh from :func:`request_kwargs` on every call: nothing is shared
    between calls.
    """
    kwargs = request_kwargs(capsule_json)
    kwargs["extra_body"] = {"messages": kwargs["messages"]}
    kwargs["messages"] = []
    return kwargs


def call_once(
    client: openai.OpenAI, capsule_json: str, *, call: Call | None = None
) -> ProviderResult:
    """Make exactly one request and fold whatever happens into a result.

    ``call`` carries the total deadline (:func:`call_with_deadline` passes it);
    without one the call is bounded per phase by ``SDK_TIMEOUT_S`` only, and by
    the byte cap.
    """
    # Typed as returning `object` on purpose: the SDK's annotation says
    # ChatCompletion, but it returns a str for a text/html 200 and None for "null".
    create: Callable[..., object] = client.chat.completions.create
    with bound(call or Call(math.inf)) as current:
        try:
            completion = create(**wire_kwargs(capsule_json))
        except Exception as exc:  # noqa: BLE001 -- every Exception is folded into an outcome
            if current.was_cut:
                return ProviderResult(Outcome.TIMEOUT, sent=current.sent)
            return ProviderResult(current.refused or _map_failure(exc), sent=current.sent)
        content = _extract_content(completion)
        tokens = _completion_tokens(completion)
        prompt = _usage_count(completion, "prompt_tokens")
        if content is None:
            return ProviderResult(
                Outcome.INVALID_RESPONSE,
                sent=current.sent,
                completion_tokens=tokens,
                prompt_tokens=prompt,
            )
        return ProviderResult(
            None, content, sent=True, completion_tokens=tokens, prompt_tokens=prompt
        )


def call_with_deadline(
    client: openai.OpenAI,
    capsule_json: str,
    *,
    seconds: float,
    thread: CallThread | None = None,
) -> ProviderResult:
    """:func:`call_once` in a daemon thread (a kept one if idle, see
    `_CallThreads`), waited on for at most ``seconds``.

    Not finished in time: TIMEOUT, and the call is cut (`_transport.Call.cut`):
    its sockets are shut down, so the thread returns (every socket operation is
    also clamped to the deadline in the thread itself); the caller waits up to
    ``_CUT_GRACE_S`` for that, and nothing reads what the thread produced. There
    is never a second request. A BaseException raised in the thread in time (none
    is expected: call_once folds every Exception) is re-raised here, in the
    caller's thread; a late one is discarded with the result.

    ``sent`` on the result says whether the request was handed to the transport;
    after the cut it never can be, so the answer is final.

    ``seconds <= 0`` (the deadline has already passed) is TIMEOUT with **zero**
    requests (``sent`` False): a result could only arrive late and be discarded.
    NaN, +inf or more than ``threading.TIMEOUT_MAX`` is a caller bug (the worker's
    deadline is a few seconds) and raises ValueError. A thread that cannot be
    started raises here (RuntimeError) with nothing sent. ``thread``: a call
    thread taken beforehand (`take_call_thread`, the worker takes it before the
    attempt's start row, so a thread that cannot start spends nothing); it is
    used (or given back) here in every case.
    """
    if math.isnan(seconds) or seconds > threading.TIMEOUT_MAX or seconds <= 0:
        if thread is not None:
            thread.give_back()
        if seconds <= 0:
            return ProviderResult(Outcome.TIMEOUT)
        raise ValueError("seconds must be a finite, waitable number")
    done = threading.Event()
    box: list[ProviderResult | BaseException] = []
    call = Call(seconds)

    def run() -> None:
        try:
            box.append(call_once(client, capsule_json, call=call))
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller below, not swallowed
            box.append(exc)
        finally:
            done.set()

    (thread or _CALL_THREADS.take()).run(run)
    if not done.wait(seconds):
        sent = call.cut()
        done.wait(_CUT_GRACE_S)
        return ProviderResult(Outcome.TIMEOUT, sent=sent)
    (result,) = box
    if isinstance(result, BaseException):
        raise result
    return result


# A call thread's inbox: its next call, or None (end).
_Inbox: TypeAlias = "queue.SimpleQueue[Callable[[], None] | None]"


class CallThread:
    """One call thread, running and waiting for its call: taken with
    `take_call_thread` (an idle kept one, or a new one started now), then either
    given its one call (`run`) or given back unused (`give_back`); exactly one
    of the two, once (a second is ignored). Taking it is what can fail at a
    thread limit (``RuntimeError``), so the worker takes it before the start
    row: an artifact is never spent on a call whose thread cannot start."""

    __slots__ = ("_inbox", "_owner", "_thread", "_used")

    def __init__(self, owner: _CallThreads, inbox: _Inbox, thread: threading.Thread) -> None:
        self._owner = owner
        self._inbox = inbox
        self._thread = thread
        self._used = False

    def run(self, fn: Callable[[], None]) -> None:
        if self._used:
            raise ValueError("call thread already used")
        self._used = True
        self._inbox.put(fn)

    def give_back(self) -> None:
        if self._used:
            return
        self._used = True
        self._owner.park(self._inbox, self._thread)


class _CallThreads:
    """Daemon threads kept for the next call.

    Starting a thread per call costs hand-offs on every artifact under load
    (``Thread.start`` waits for the new thread to run; measured by ``make bench``,
    docs/performance.md, "The figures behind the code's comments"). The
    semantics are those of a new daemon thread per call: a call *never* waits
    for a thread — with none idle, a new one is started at once — so a hung call
    cannot delay another, and a thread still running a late call is simply not
    idle. At most `KEEP` threads are kept idle; the others end. A thread is named
    ``kexpr-provider-call`` while it is taken or runs a call and
    ``kexpr-provider-idle`` while parked. A thread is taken (`take`) before its
    call is known; one given back unused parks again (or ends, past `KEEP`).
    """

    KEEP: Final = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[tuple[_Inbox, threading.Thread]] = []

    def take(self) -> CallThread:
        """An idle thread, or a new one started now (``RuntimeError`` if it
        cannot start: then nothing is left behind)."""
        with self._lock:
            idle = self._idle.pop() if self._idle else None
        if idle is not None:
            return CallThread(self, *idle)
        inbox: _Inbox = queue.SimpleQueue()
        thread = threading.Thread(
            target=self._serve, args=(inbox,), name="kexpr-provider-call", daemon=True
        )
        thread.start()
        return CallThread(self, inbox, thread)

    def run(self, fn: Callable[[], None]) -> None:
        self.take().run(fn)

    def park(self, inbox: _Inbox, thread: threading.Thread) -> None:
        """A taken thread given back unused: idle again, or told to end."""
        with self._lock:
            if len(self._idle) < self.KEEP:
                thread.name = "kexpr-provider-idle"
                self._idle.append((inbox, thread))
                return
        inbox.put(None)

    def _serve(self, inbox: _Inbox) -> None:
        me = threading.current_thread()
        while True:
            fn = inbox.get()
            if fn is None:
                return  # given back unused with KEEP threads idle already
            me.name = "kexpr-provider-call"
            fn()  # never raises: call_with_deadline's `run` hands everything over
            with self._lock:
                if len(self._idle) >= self.KEEP:
                    return
                self._idle.append((inbox, me))
                # Renamed under the lock, once parked: a thread named -idle is
                # one `run` can hand the next call to.
                me.name = "kexpr-provider-idle"


_CALL_THREADS: Final = _CallThreads()


def take_call_thread() -> CallThread:
    """A call thread for one later `call_with_deadline` (see `CallThread`).
    Raises ``RuntimeError`` when no thread can be started (RLIMIT_NPROC,
    TasksMax=, memory): nothing is sent and nothing is left behind."""
    return _CALL_THREADS.take()


def _map_failure(exc: BaseException) -> ProviderFailure:
    """Map anything ``create()`` raised to an outcome. The tree is in the module
    docstring; order matters where classes nest (a timeout is a connection error,
    a JSONDecodeError is a ValueError)."""
    if isinstance(exc, openai.OpenAIError):
        if isinstance(exc, openai.APITimeoutError):
            return Outcome.TIMEOUT
        if isinstance(
            exc,
            (
                openai.APIResponseValidationError,
                openai.LengthFinishReasonError,
                openai.ContentFilterFinishReasonError,
            ),
        ):
            return Outcome.INVALID_RESPONSE
        return Outcome.PROVIDER_ERROR
    if isinstance(exc, (httpx.TimeoutException, TimeoutError)):
        return Outcome.TIMEOUT
    if isinstance(exc, httpx.HTTPError):
        return Outcome.PROVIDER_ERROR
    if isinstance(exc, (ValueError, TypeError)):
        # json.JSONDecodeError and pydantic.ValidationError are ValueErrors.
        return Outcome.INVALID_RESPONSE
    return Outcome.PROVIDER_ERROR


def _completion_tokens(completion: object) -> int | None:
    """``usage.completion_tokens`` of a returned completion when it is a
    non-negative int, else None. Checked like `_extract_content`: the SDK does not
    validate, so a missing attribute or a wrong type reads as None."""
    return _usage_count(completion, "completion_tokens")


def _usage_count(completion: object, name: str) -> int | None:
    """``usage.<name>`` when it is a non-negative int, else None."""
    if not isinstance(completion, ChatCompletion):
        return None
    n: object = getattr(getattr(completion, "usage", None), name, None)
    return n if type(n) is int and n >= 0 else None


def _extract_content(completion: object) -> str | None:
    """The message content of a well-formed single-choice completion, else None.

    The SDK builds response models without validation, so every attribute is
    checked for its type here rather than trusted from the annotations; a missing
    attribute reads as a mismatch, never as an AttributeError.
    """
    if not isinstance(completion, ChatCompletion):
        return None
    choices: object = getattr(completion, "choices", None)
    if not isinstance(choices, list) or len(choices) != 1:
        return None
    (choice,) = choices
    if not isinstance(choice, Choice) or getattr(choice, "finish_reason", None) != "stop":
        return None
    message: object = getattr(choice, "message", None)
    if not isinstance(message, ChatCompletionMessage):
        return None
    if getattr(message, "refusal", None) is not None:
        return None
    tool_calls: object = getattr(message, "tool_calls", None)
    if tool_calls is not None and tool_calls != []:
        return None
    if getattr(message, "function_call", None) is not None:
        return None
    content: object = getattr(message, "content", None)
    if type(content) is not str:
        return None
    return content

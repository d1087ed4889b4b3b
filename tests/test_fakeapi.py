"""The fake-API fixture itself works exactly the way black-box tests will use it:
the real SDK, configured like the worker, reaches it through HTTPS_PROXY (CONNECT)
and trusts it only through SSL_CERT_FILE."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import quicktok
from fakeapi import (
    FakeModel,
    FakeOpenAI,
    FakeReply,
    brief_style,
    chat_completion,
    compose,
    compose_reply,
    default_style,
)

from kexpr.spool.contract import Capsule, Verdict, judge

TESTS_DIR = Path(__file__).resolve().parent

# The one message the fit table styles (design §6.1): a weekly report whose goal
# range is missing (branch I2), its interpretation the one slot asked.
CAPSULE: dict[str, Any] = {
    "schema_version": "korean-expression-v4",
    "surface": "weekly.v1",
    "artifact_key": "ab" * 32,
    "slots": [
        {
            "slot_id": "weekly.interpretation",
            "allowed_predicate_ids": ["P_WEEKLY_TREND_OBSERVED"],
            "allowed_action_ids": ["A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
            "required_placeholder_tokens": ["[[P:01]]", "[[A:01]]"],
            "max_generated_chars": 220,
            "max_style_lexemes": 16,
        },
    ],
}

# Counted in the tests with quicktok directly, not through fakeapi.generation, so a
# miscount there cannot agree with itself.
O200K = quicktok.get_encoding("o200k_base")
SYSTEM = "Answer with one JSON object."

# The worker's exact call shape (design §9), run in a clean child process.
WORKER_LIKE_CALL = r"""
import json, os, sys
import openai

client = openai.OpenAI(
    api_key=os.environ["OPENAI_API_KEY"],
    base_url="https://api.openai.com/v1",
    max_retries=0,
    timeout=3.0,
)
try:
    completion = client.chat.completions.create(
        model="gpt-4.1-mini",
        n=1,
        temperature=0.7,
        max_tokens=384,
        response_format={"type": "json_object"},
        store=False,
        messages=[
            {"role": "system", "content": "Answer with one JSON object."},
            {"role": "user", "content": sys.argv[1]},
        ],
    )
    choice = completion.choices[0]
    out = {"ok": True, "content": choice.message.content, "finish_reason": choice.finish_reason}
except Exception as exc:
    chain, cur = [], exc
    while cur is not None and len(chain) < 10:
        chain.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    out = {"ok": False, "type": type(exc).__name__, "chain": chain}
finally:
    client.close()
print(json.dumps(out))
"""


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeOpenAI]:
    with FakeOpenAI(tmp_path / "fake") as server:
        yield server
    assert server.errors == []


def run_worker_like_call(env: dict[str, str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", WORKER_LIKE_CALL, json.dumps(CAPSULE, ensure_ascii=False)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Only what the supervisor would pass; never os.environ as a whole."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **extra}


@pytest.fixture
def proxied_env(fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """For in-process SDK clients: httpx reads these at client construction."""
    for name in (
        "HTTP_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "SSL_CERT_DIR",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in fake.env().items():
        monkeypatch.setenv(name, value)


def worker_like_client(timeout: float = 3.0) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="sk-test", base_url="https://api.openai.com/v1", max_retries=0, timeout=timeout
    )


def create(client: openai.OpenAI) -> Any:
    return client.chat.completions.create(
        model="gpt-4.1-mini",
        messages=[{"role": "user", "content": json.dumps(CAPSULE)}],
        response_format={"type": "json_object"},
    )


# 1 -------------------------------------------------------------------------------
def test_sdk_in_clean_subprocess_reaches_fake_through_connect_and_tls(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    env = clean_env(tmp_path, OPENAI_API_KEY="sk-test", **fake.env())
    result = run_worker_like_call(env)

    assert result["ok"], result
    assert result["finish_reason"] == "stop"
    assert json.loads(result["content"]) == compose(CAPSULE, default_style(CAPSULE))
    assert fake.tunnels == ["api.openai.com:443"]
    [req] = fake.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.headers["host"] == "api.openai.com"
    assert req.json is not None and req.json["store"] is False
    assert req.capsule == CAPSULE
    assert fake.artifact_keys_seen() == [CAPSULE["artifact_key"]]
    assert fake.count_for(CAPSULE["artifact_key"]) == 1
    assert fake.refused_connects == []


# 2 -------------------------------------------------------------------------------
def test_fake_is_not_trusted_without_ssl_cert_file(fake: FakeOpenAI, tmp_path: Path) -> None:
    env = clean_env(tmp_path, OPENAI_API_KEY="sk-test", HTTPS_PROXY=fake.proxy_url)
    result = run_worker_like_call(env)

    assert not result["ok"]
    assert result["type"] == "APIConnectionError"
    assert any("CERTIFICATE_VERIFY_FAILED" in link for link in result["chain"]), result
    assert fake.tunnels == ["api.openai.com:443"]  # the proxy hop worked
    assert fake.wait_until(lambda: len(fake.tls_failures) == 1, timeout=5.0)
    assert fake.requests == []


# 3 -------------------------------------------------------------------------------
def raw_proxy_exchange(fake: FakeOpenAI, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", fake.port), timeout=5.0) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    return data


def test_connect_to_other_host_is_refused_and_recorded(fake: FakeOpenAI) -> None:
    reply = raw_proxy_exchange(
        fake, b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n"
    )
    assert reply.startswith(b"HTTP/1.1 403 ")
    reply = raw_proxy_exchange(
        fake, b"CONNECT api.openai.com:80 HTTP/1.1\r\nHost: api.openai.com:80\r\n\r\n"
    )
    assert reply.startswith(b"HTTP/1.1 403 ")
    assert fake.refused_connects == ["evil.example:443", "api.openai.com:80"]

    # A plain (non-CONNECT) proxy request is not served at all.
    reply = raw_proxy_exchange(
        fake, b"GET http://api.openai.com/v1/models HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"
    )
    assert reply.startswith(b"HTTP/1.1 405 ")
    assert fake.tunnels == [] and fake.requests == []


def test_httpx_through_proxy_refused_and_unknown_path(fake: FakeOpenAI) -> None:
    verify = ssl.create_default_context(cafile=str(fake.ca_file))
    with httpx.Client(proxy=fake.proxy_url, verify=verify, trust_env=False) as client:
        with pytest.raises(httpx.ProxyError):
            client.get("https://example.com/")
        response = client.get("https://api.openai.com/v1/models")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "unknown_url"
    assert fake.refused_connects == ["example.com:443"]
    assert [(r.method, r.path) for r in fake.requests] == [("GET", "/v1/models")]


# 4 -------------------------------------------------------------------------------
@pytest.mark.usefixtures("proxied_env")
def test_slow_reply_times_out_client_and_shutdown_stays_quick(fake: FakeOpenAI) -> None:
    fake.behaviour = lambda req: FakeReply(body=chat_completion("{}"), delay_s=5.0)
    started = time.monotonic()
    with worker_like_client(timeout=1.0) as client, pytest.raises(openai.APITimeoutError):
        create(client)
    # Bounds against the 5 s reply, not timing targets (a loaded machine is slow):
    # the client gave up at its own timeout, and close did not wait the reply out.
    assert 0.9 <= time.monotonic() - started < 4.5
    assert len(fake.requests) == 1  # recorded on arrival, before the delay

    started = time.monotonic()
    fake.close()  # the delayed reply is still pending: close must interrupt it
    assert time.monotonic() - started < 4.0


# 5 -------------------------------------------------------------------------------
@pytest.mark.usefixtures("proxied_env")
def test_keep_alive_two_calls_one_connection(fake: FakeOpenAI) -> None:
    with worker_like_client() as client:
        first = create(client)
        second = create(client)
    assert first.choices[0].message.content == second.choices[0].message.content
    requests = fake.requests
    assert len(requests) == 2
    assert requests[0].connection_id == requests[1].connection_id
    assert fake.tunnels == ["api.openai.com:443"]
    assert fake.wait_for_requests(2, timeout=0.1)
    assert not fake.wait_for_requests(3, timeout=0.05)
    assert fake.count_for(CAPSULE["artifact_key"]) == 2


# reply shapes ----------------------------------------------------------------------
@pytest.mark.usefixtures("proxied_env")
def test_reply_knobs_reach_the_sdk(fake: FakeOpenAI) -> None:
    fake.behaviour = compose_reply(lambda capsule: {s["slot_id"]: "x" for s in capsule["slots"]})
    with worker_like_client() as client:
        content = create(client).choices[0].message.content
        assert [s["generated_ko"] for s in json.loads(content)["slots"]] == ["x"]

        fake.behaviour = lambda req: FakeReply(
            body=chat_completion("y", finish_reason="length", n_choices=2)
        )
        completion = create(client)
        assert [c.finish_reason for c in completion.choices] == ["length", "length"]

        body = chat_completion("z" * 200)
        fake.behaviour = lambda req: FakeReply(body=body, drip_bytes_per_s=2000.0)
        started = time.monotonic()
        assert create(client).choices[0].message.content == "z" * 200
        assert time.monotonic() - started >= 0.2

        fake.behaviour = lambda req: FakeReply(status=500, body={"error": {"message": "boom"}})
        with pytest.raises(openai.InternalServerError):
            create(client)

        fake.behaviour = lambda req: FakeReply(close_without_reply=True)
        with pytest.raises(openai.APIConnectionError):
            create(client)
    assert len(fake.requests) == 5


def test_default_style_shapes() -> None:
    # The fit table's composition with the most words, the first in sorted order
    # (design §6.1: 다만 before the hold, without or with its comma), and a valid one.
    assert default_style(CAPSULE) == {"weekly.interpretation": "[[P:01]]. 다만 [[A:01]]."}
    capsule = Capsule.from_object(CAPSULE)
    assert judge(capsule, json.dumps(compose(CAPSULE, default_style(CAPSULE)))).verdict is (
        Verdict.ACCEPTED
    )


def test_brief_style_shapes() -> None:
    # ... and with the fewest, the last in sorted order: the slot's other composition.
    assert brief_style(CAPSULE) == {"weekly.interpretation": "[[P:01]]. 다만, [[A:01]]."}
    assert brief_style(CAPSULE) != default_style(CAPSULE)
    capsule = Capsule.from_object(CAPSULE)
    assert judge(capsule, json.dumps(compose(CAPSULE, brief_style(CAPSULE)))).verdict is (
        Verdict.ACCEPTED
    )
    # A slot no word fits gets no style at all: the empty text, which the contract
    # rejects, never an invented word. IDs the table does not know, and a slot the
    # table locks (the weekly rationale, another interpretation branch).
    unknown = {
        **CAPSULE,
        "slots": [
            {**CAPSULE["slots"][0], "allowed_predicate_ids": ["X"], "allowed_action_ids": ["Y"]}
        ],
    }
    assert brief_style(unknown) == default_style(unknown) == {"weekly.interpretation": ""}
    locked = {
        **CAPSULE,
        "slots": [
            {
                "slot_id": "weekly.rationale",
                "allowed_predicate_ids": ["P_WEEKLY_RECORDS_INSUFFICIENT"],
                "allowed_action_ids": [],
                "required_placeholder_tokens": ["[[P:01]]"],
                "max_generated_chars": 144,
                "max_style_lexemes": 10,
            },
            {
                **CAPSULE["slots"][0],
                "allowed_predicate_ids": ["P_WEEKLY_IN_GOAL", "P_WEEKLY_KEEP_BASIS"],
                "allowed_action_ids": [],
                "required_placeholder_tokens": ["[[P:01]]", "[[P:02]]"],
            },
        ],
    }
    assert (
        brief_style(locked)
        == default_style(locked)
        == {
            "weekly.rationale": "",
            "weekly.interpretation": "",
        }
    )


# CLI mode ---------------------------------------------------------------------------
def started_info(proc: subprocess.Popen[bytes], directory: Path) -> dict[str, Any]:
    """The ``fake.json`` the fake's CLI writes once it serves (within 20 s)."""
    deadline = time.monotonic() + 20.0
    while not (directory / "fake.json").exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    info: dict[str, Any] = json.loads((directory / "fake.json").read_text())
    return info


def test_cli_mode_serves_logs_and_stops_on_sigterm(tmp_path: Path) -> None:
    directory = tmp_path / "cli"
    env = clean_env(tmp_path, PYTHONPATH=str(TESTS_DIR))
    with subprocess.Popen(
        [sys.executable, "-m", "fakeapi", "--dir", str(directory), "--mode", "invalid"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        try:
            info = started_info(proc, directory)
            assert info["pid"] == proc.pid
            verify = ssl.create_default_context(cafile=str(directory / "ca.pem"))
            with httpx.Client(proxy=info["proxy_url"], verify=verify, trust_env=False) as client:
                response = client.post(
                    "https://api.openai.com/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": json.dumps(CAPSULE)}]},
                )
            assert response.status_code == 200
            content = json.loads(response.json()["choices"][0]["message"]["content"])
            assert content["slots"][0]["generated_ko"] == "오늘은 [[P:01]]. [[A:01]]."
            [line] = (directory / "requests.jsonl").read_text().splitlines()
            assert json.loads(line)["artifact_key"] == CAPSULE["artifact_key"]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# the realistic model -------------------------------------------------
def expected_prompt_tokens(capsule: dict[str, Any]) -> int:
    """OpenAI's cookbook count for this call's two messages: 3 per message, the
    role and the content, then 3 that prime the reply."""
    messages = (("system", SYSTEM), ("user", json.dumps(capsule, ensure_ascii=False)))
    return sum(3 + len(O200K.encode(r)) + len(O200K.encode(c)) for r, c in messages) + 3


def worker_call(client: openai.OpenAI, max_tokens: int = 384) -> Any:
    """The worker's parameters (design §9) and the capsule as it sends it."""
    return client.chat.completions.create(
        model="gpt-4.1-mini",
        n=1,
        temperature=0.7,
        max_tokens=max_tokens,
        response_format={"type": "json_object"},
        store=False,
        messages=[
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": json.dumps(CAPSULE, ensure_ascii=False)},
        ],
    )


@pytest.mark.usefixtures("proxied_env")
def test_compact_answer_is_paced_by_its_real_token_count_with_honest_usage(
    fake: FakeOpenAI,
) -> None:
    fake.model = FakeModel(first_token_s=0.2, tokens_per_s=400.0)
    with worker_like_client() as client:
        started = time.monotonic()
        completion = worker_call(client)
        elapsed = time.monotonic() - started
    content = completion.choices[0].message.content
    document = compose(CAPSULE, default_style(CAPSULE))
    # Compact: no whitespace outside strings, Hangul as written (never \\u-escaped).
    assert content == json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    assert completion.choices[0].finish_reason == "stop"
    n = len(O200K.encode(content))
    assert completion.usage is not None
    assert completion.usage.completion_tokens == n
    assert completion.usage.prompt_tokens == expected_prompt_tokens(CAPSULE)
    assert completion.usage.total_tokens == n + expected_prompt_tokens(CAPSULE)
    [answered] = fake.model_answers
    assert answered.artifact_key == CAPSULE["artifact_key"]
    assert (answered.completion_tokens, answered.finish_reason) == (n, "stop")
    assert answered.seconds == pytest.approx(0.2 + n / 400.0)
    # A lower bound only: the fake waited at least that long before its first byte.
    assert elapsed >= 0.2 + n / 400.0


@pytest.mark.usefixtures("proxied_env")
def test_pretty_answer_is_longer_and_slower_than_the_compact_one(fake: FakeOpenAI) -> None:
    document = compose(CAPSULE, default_style(CAPSULE))
    with worker_like_client() as client:
        fake.model = FakeModel(first_token_s=0.0, tokens_per_s=1000.0, layout="pretty")
        pretty = worker_call(client)
        fake.model = FakeModel(first_token_s=0.0, tokens_per_s=1000.0)
        compact = worker_call(client)
    assert pretty.choices[0].message.content == json.dumps(document, ensure_ascii=False, indent=2)
    assert json.loads(pretty.choices[0].message.content) == document
    assert pretty.usage is not None and compact.usage is not None
    assert pretty.usage.completion_tokens > compact.usage.completion_tokens
    first, second = fake.model_answers
    assert first.seconds == pretty.usage.completion_tokens / 1000.0
    assert second.seconds == compact.usage.completion_tokens / 1000.0


@pytest.mark.usefixtures("proxied_env")
def test_answer_longer_than_max_tokens_is_cut_with_finish_reason_length(
    fake: FakeOpenAI,
) -> None:
    fake.model = FakeModel(first_token_s=0.1, tokens_per_s=500.0)
    full = json.dumps(
        compose(CAPSULE, default_style(CAPSULE)), ensure_ascii=False, separators=(",", ":")
    )
    with worker_like_client() as client:
        completion = worker_call(client, max_tokens=20)
    assert len(O200K.encode(full)) > 20
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == O200K.decode(O200K.encode(full)[:20])
    assert completion.usage is not None and completion.usage.completion_tokens == 20
    [answered] = fake.model_answers
    assert (answered.completion_tokens, answered.finish_reason) == (20, "length")
    assert answered.seconds == pytest.approx(0.1 + 20 / 500.0)


@pytest.mark.usefixtures("proxied_env")
def test_a_model_still_writing_does_not_hold_up_another_connection(fake: FakeOpenAI) -> None:
    """Each connection has its own thread: while the model writes one answer (a
    first token an hour away), another connection is served."""
    fake.model = FakeModel(first_token_s=3600.0, tokens_per_s=100.0)
    quick = FakeReply(body=chat_completion("{}"))
    written = compose_reply(default_style)
    fake.behaviour = lambda req: written(req) if req.capsule == CAPSULE else quick
    errors: list[BaseException] = []

    def slow_call() -> None:
        try:
            with worker_like_client(timeout=60.0) as client:
                worker_call(client)
        except BaseException as exc:  # noqa: BLE001 - the fake's close ends it
            errors.append(exc)

    thread = threading.Thread(target=slow_call, daemon=True)
    thread.start()
    assert fake.wait_for_requests(1, timeout=30.0)
    with worker_like_client() as client:
        other = client.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": "{}"}]
        )
    assert other.choices[0].message.content == "{}"
    assert thread.is_alive() and errors == []  # the first answer is still being written
    [pending] = fake.model_answers
    assert pending.artifact_key == CAPSULE["artifact_key"] and pending.seconds > 3600.0
    assert len(fake.tunnels) == 2
    fake.close()  # interrupts the hour-long answer
    thread.join(30.0)
    assert not thread.is_alive()
    assert [type(e) for e in errors] == [openai.APIConnectionError]


def test_fake_model_refuses_impossible_speeds() -> None:
    for kwargs in (
        {"first_token_s": -0.1, "tokens_per_s": 77.0},
        {"tokens_per_s": 0.0},
        {"tokens_per_s": -5.0},
        {"layout": "spaced"},
    ):
        with pytest.raises(ValueError):
            FakeModel(**kwargs)
    assert FakeModel().seconds(10_000) == 0.0  # the instant model
    assert FakeModel(first_token_s=0.3, tokens_per_s=110.0).seconds(297) == pytest.approx(3.0)


def test_cli_model_flags_pace_the_answer_and_log_it(tmp_path: Path) -> None:
    directory = tmp_path / "cli"
    env = clean_env(tmp_path, PYTHONPATH=str(TESTS_DIR))
    argv = ["--rate", "500", "--first-token", "0.05", "--layout", "pretty"]
    with subprocess.Popen(
        [sys.executable, "-m", "fakeapi", "--dir", str(directory), *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        try:
            info = started_info(proc, directory)
            assert info["model"] == {
                "first_token_s": 0.05,
                "tokens_per_s": 500.0,
                "layout": "pretty",
            }
            verify = ssl.create_default_context(cafile=str(directory / "ca.pem"))
            with httpx.Client(proxy=info["proxy_url"], verify=verify, trust_env=False) as client:
                response = client.post(
                    "https://api.openai.com/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": json.dumps(CAPSULE)}]},
                )
            content = response.json()["choices"][0]["message"]["content"]
            assert content == json.dumps(
                compose(CAPSULE, default_style(CAPSULE)), ensure_ascii=False, indent=2
            )
            n = len(O200K.encode(content))
            [line] = Path(info["answers_log"]).read_text().splitlines()
            logged = json.loads(line)
            assert logged["artifact_key"] == CAPSULE["artifact_key"]
            assert (logged["completion_tokens"], logged["finish_reason"]) == (n, "stop")
            assert logged["seconds"] == pytest.approx(0.05 + n / 500.0)
            assert response.headers["openai-processing-ms"] == str(round(logged["seconds"] * 1000))
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

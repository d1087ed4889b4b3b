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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fakeapi import (
    FakeOpenAI,
    FakeReply,
    chat_completion,
    compose,
    compose_reply,
    default_style,
)

TESTS_DIR = Path(__file__).resolve().parent

CAPSULE: dict[str, Any] = {
    "schema_version": "korean-expression-v4",
    "surface": "weekly.v1",
    "artifact_key": "ab" * 32,
    "slots": [
        {
            "slot_id": "weekly.interpretation",
            "allowed_predicate_ids": ["P_WEEKLY_A", "P_WEEKLY_B"],
            "allowed_action_ids": ["A_WEEKLY_C"],
            "required_placeholder_tokens": ["[[P:01]]", "[[P:02]]", "[[A:01]]"],
            "max_generated_chars": 220,
            "max_style_lexemes": 16,
        },
        {
            "slot_id": "weekly.rationale",
            "allowed_predicate_ids": ["P_WEEKLY_D"],
            "allowed_action_ids": [],
            "required_placeholder_tokens": ["[[P:01]]"],
            "max_generated_chars": 144,
            "max_style_lexemes": 10,
        },
    ],
}

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
    assert 0.9 <= time.monotonic() - started < 3.0
    assert len(fake.requests) == 1  # recorded on arrival, before the delay

    started = time.monotonic()
    fake.close()  # the delayed reply is still pending: close must interrupt it
    assert time.monotonic() - started < 1.0


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
        assert [s["generated_ko"] for s in json.loads(content)["slots"]] == ["x", "x"]

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
    assert default_style(CAPSULE) == {
        "weekly.interpretation": "차분히, [[P:01]]. 이어서 [[P:02]]. 그리고 [[A:01]].",
        "weekly.rationale": "차분히, [[P:01]].",
    }


# CLI mode ---------------------------------------------------------------------------
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
            deadline = time.monotonic() + 20.0
            while not (directory / "fake.json").exists():
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                assert time.monotonic() < deadline
                time.sleep(0.05)
            info = json.loads((directory / "fake.json").read_text())
            assert info["pid"] == proc.pid
            verify = ssl.create_default_context(cafile=str(directory / "ca.pem"))
            with httpx.Client(proxy=info["proxy_url"], verify=verify, trust_env=False) as client:
                response = client.post(
                    "https://api.openai.com/v1/chat/completions",
                    json={"messages": [{"role": "user", "content": json.dumps(CAPSULE)}]},
                )
            assert response.status_code == 200
            content = json.loads(response.json()["choices"][0]["message"]["content"])
            assert content["slots"][1]["generated_ko"] == "오늘은 [[P:01]]."
            [line] = (directory / "requests.jsonl").read_text().splitlines()
            assert json.loads(line)["artifact_key"] == CAPSULE["artifact_key"]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

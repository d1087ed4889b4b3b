"""A scripted stand-in for the worker: a thread that answers the spool.

Tests only. It behaves like the real worker where the host-side guarantees
depend on it: it claims each request (removes it from ``requests/``), counts a
*provider call* only for an artifact key it has not seen, and answers a repeat
of a key ``already_attempted`` with no call (design §4 dedupe). Each request it
ever saw stays in ``requests`` so tests can count spool traffic.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self

from fakeapi import default_style

from kexpr.spool.contract.answers import answer_document
from kexpr.spool.fsio import publish, replace_private
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import parse_request

# capsule -> generated_ko per slot id (accepted), a canonical outcome such as
# "provider_error" (answered canonical, no composition), or None (no answer).
Compose = Callable[[Mapping[str, Any]], Mapping[str, str] | str | None]


def provider_error(capsule: Mapping[str, Any]) -> str:
    return "provider_error"


def style(capsule: Mapping[str, Any]) -> dict[str, str]:
    """A valid composition per slot, as the fake API's `default_style` writes it:
    the fit table's first, sorted. The one slot the table styles is the weekly
    goal-missing interpretation: "[[P:01]]. 다만 [[A:01]]."."""
    return default_style(capsule)


def invalid(capsule: Mapping[str, Any]) -> dict[str, str]:
    """Well-typed but outside the lexicon: rejected by the shim's re-validation."""
    return {
        slot["slot_id"]: "오늘은 " + " ".join(f"{t}." for t in slot["required_placeholder_tokens"])
        for slot in capsule["slots"]
    }


def composition(capsule: Mapping[str, Any], generated: Mapping[str, str]) -> dict[str, Any]:
    return answer_document(capsule, generated)


def heartbeat(root: DataRoot, state: str = "ready", *, age_s: float = 0.0) -> None:
    """A worker's ``worker.status.json`` as the shim reads it (coordinator rule 13):
    its schema and ``state``, written ``age_s`` ago (its mtime)."""
    root.ensure()
    doc = {"schema": "kexpr-worker-status-v1", "state": state, "pid": os.getpid()}
    replace_private(root.status_file, json.dumps(doc).encode())
    if age_s:
        then = time.time() - age_s
        os.utime(root.status_file, (then, then))


class ScriptedWorker:
    """Answers each request in ``requests/`` after ``delay`` seconds; keeps a
    ``ready`` heartbeat while it runs, like the worker (coordinator rule 13)."""

    def __init__(
        self, root: DataRoot, compose: Compose = style, delay: float = 0.0, poll: float = 0.01
    ) -> None:
        self.root, self.compose, self.delay, self.poll = root, compose, delay, poll
        self.requests: list[dict[str, Any]] = []
        self.provider_calls = 0
        self._seen: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # Held through each pass (heartbeat, listing, answers): `quiet` takes it, so
        # a test counting the process's descriptors never counts one of this thread's.
        self._io = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Self:
        heartbeat(self.root)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """No pass runs (no file of this thread open) until the block ends."""
        with self._io:
            yield

    def calls_for(self, artifact_key: str | None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r["capsule"]["artifact_key"] == artifact_key)

    def _loop(self) -> None:
        beat = time.monotonic()
        while not self._stop.wait(self.poll):
            with self._io:
                if time.monotonic() - beat >= 1.0:
                    heartbeat(self.root)
                    beat = time.monotonic()
                for path in sorted(self.root.requests.glob("*.json")):
                    raw = path.read_bytes()
                    parse_request(raw)  # the shim only ever writes valid requests
                    request = json.loads(raw)
                    path.unlink()
                    self._claimed(request)
                    if self._stop.wait(self.delay):
                        return
                    self._answer(request)

    def _claimed(self, request: dict[str, Any]) -> None:
        """Called as each request is claimed, before ``delay``: nothing here."""

    def _answer(self, request: dict[str, Any]) -> None:
        capsule = request["capsule"]
        key = capsule["artifact_key"]
        with self._lock:
            self.requests.append(request)
            repeat = key in self._seen
            self._seen.add(key)
            if not repeat:
                self.provider_calls += 1
        if repeat:
            response: dict[str, Any] = {
                "status": "already_attempted",
                "outcome": "already_attempted",
                "attempt_id": None,
                "composition": None,
            }
        else:
            generated = self.compose(capsule)
            if generated is None:
                return
            if isinstance(generated, str):
                response = {
                    "status": "canonical",
                    "outcome": generated,
                    "attempt_id": os.urandom(16).hex(),
                    "composition": None,
                }
            else:
                response = {
                    "status": "accepted",
                    "outcome": "accepted",
                    "attempt_id": os.urandom(16).hex(),
                    "composition": composition(capsule, generated),
                }
        response |= {"spool_version": "kexpr-spool-v1", "request_id": request["request_id"]}
        data = json.dumps(response, ensure_ascii=False).encode("utf-8")
        publish(self.root.tmp, self.root.responses / f"{request['request_id']}.json", data)


def report_outcomes(root: DataRoot) -> list[str]:
    """The outcomes of the shim's reports (which the worker would journal), sorted."""
    if not root.reports.exists():
        return []
    return sorted(json.loads(p.read_bytes())["outcome"] for p in root.reports.glob("*.json"))


def spool_request_files(root: DataRoot) -> list[Path]:
    """Request files still waiting in the spool (none once the worker claimed them)."""
    return list(root.requests.glob("*")) if root.requests.exists() else []

"""The worker's accepted path parses each document once and judges once
(a composition was once JSON-parsed four times and built three times).

Counted from the outside: every JSON decode (the strict reader's decoder and
``json.loads``), every validation by the request and composition models, and every
``judge`` call, while one request is handled to an accepted answer and its report
is journaled. Nothing in product code is patched but these counters.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from worker_tests.worker_kit import (
    STYLED_GENERATED,
    Clock,
    Provider,
    composition_for,
    make_worker,
    rid,
    submit,
)

from kexpr.spool.contract import Composition, _strictjson
from kexpr.spool.fsio import publish
from kexpr.spool.layout import DataRoot
from kexpr.spool.messages import (
    SPOOL_VERSION,
    ResponseStatus,
    SpoolReport,
    SpoolRequest,
    SpoolResponse,
)
from kexpr.spool.outcomes import Outcome
from kexpr.worker import attempt as attempt_module
from kexpr.worker import reports


class _CountingValidator:
    """Stands in for a model's ``__pydantic_validator__``, counting validations;
    a ``validate_json`` is a JSON parse too, so its text joins ``decoded``."""

    def __init__(self, inner: Any, counts: Counter[str], name: str, decoded: list[str]) -> None:
        self._inner, self._counts, self._name, self._decoded = inner, counts, name, decoded

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._inner, attr)
        if attr.startswith("validate_"):

            def counted(*a: Any, **kw: Any) -> Any:
                self._counts[self._name] += 1
                if attr == "validate_json":
                    data = a[0]
                    self._decoded.append(data.decode() if isinstance(data, bytes) else data)
                return target(*a, **kw)

            return counted
        return target


class _CountingDecoder:
    def __init__(self, inner: json.JSONDecoder, decoded: list[str]) -> None:
        self._inner, self._decoded = inner, decoded

    def decode(self, text: str) -> Any:
        self._decoded.append(text)
        return self._inner.decode(text)


def test_accepted_path_parses_each_document_once_and_judges_once(
    monkeypatch: pytest.MonkeyPatch,
    root: DataRoot,
    provider: Provider,  # noqa: F811
    env: dict[str, str],  # noqa: F811
) -> None:
    clock = Clock()
    w = make_worker(root, provider, clock, env)
    request_id = submit(root, clock, rid=rid(1), mode="enabled")
    request_text = (root.claimed / f"{request_id}.json").read_text("utf-8")

    counts: Counter[str] = Counter()
    decoded: list[str] = []
    real_loads = json.loads

    def loads(s: Any, *a: Any, **kw: Any) -> Any:
        decoded.append(s.decode("utf-8") if isinstance(s, (bytes, bytearray)) else s)
        return real_loads(s, *a, **kw)

    real_judge = attempt_module.judge

    def judge(*a: Any, **kw: Any) -> Any:
        counts["judge"] += 1
        return real_judge(*a, **kw)

    monkeypatch.setattr(json, "loads", loads)
    monkeypatch.setattr(_strictjson, "_DECODER", _CountingDecoder(_strictjson._DECODER, decoded))
    monkeypatch.setattr(attempt_module, "judge", judge)
    for model in (SpoolRequest, SpoolReport, Composition):
        monkeypatch.setattr(
            model,
            "__pydantic_validator__",
            _CountingValidator(model.__pydantic_validator__, counts, model.__name__, decoded),
        )

    w.handle_claimed(f"{request_id}.json")
    worker_counts, worker_decoded = Counter(counts), list(decoded)
    resp = SpoolResponse.model_validate_json((root.responses / f"{request_id}.json").read_bytes())
    assert resp.status is ResponseStatus.ACCEPTED and resp.composition is not None
    composition_text = composition_for(provider.calls[-1], STYLED_GENERATED)

    # The request file: decoded once, validated once. The model's composition:
    # decoded once (inside judge), built once, judged once; the accepted response
    # carries that same Composition (no rebuild).
    assert worker_decoded.count(request_text) == 1
    assert worker_decoded.count(composition_text) == 1
    assert worker_counts == Counter({"SpoolRequest": 1, "Composition": 1, "judge": 1})

    attempt_id = resp.attempt_id
    assert attempt_id is not None
    report = SpoolReport(
        spool_version=SPOOL_VERSION, attempt_id=attempt_id, outcome=Outcome.SELECTED
    )
    counts.clear()
    decoded.clear()
    publish(root.tmp, root.reports / f"{attempt_id}.json", report.to_bytes())
    report_text = report.to_bytes().decode("utf-8")
    reports.handle_reports(w.parts, [f"{attempt_id}.json"])
    assert not (root.reports / f"{attempt_id}.json").exists()  # journaled, then removed
    assert decoded.count(report_text) == 1
    assert counts == Counter({"SpoolReport": 1})

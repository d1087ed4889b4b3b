"""The Korean operator guide carries every point the plan requires of it."""

from __future__ import annotations

import re
from pathlib import Path

from gateway_shim.config import ALLOWED_PROVIDER

GUIDE = Path(__file__).parents[2] / "docs" / "operator-guide.ko.md"
ATTRIBUTION_LINKS = (
    "https://github.com/Gaeduck-0908/im-not-ai-kiro/tree/901e378ae7f77035d17a491067343ac3f83d0214",
    "https://github.com/epoko77-ai/im-not-ai/tree/53e24e8f92cf344efcb812103f7c2b203e7efffc",
)
STATEMENT = (
    "These repositories were consulted only for a high-level meaning-preservation goal; "
    "no source code, prompts, rules, workflow, or artifacts were copied."
)


def _section(text: str, heading: str) -> str:
    m = re.search(
        rf"^## [0-9]+\. {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL
    )
    assert m is not None, heading
    return m.group(1)


def test_operator_guide_korean_expression_contract() -> None:
    text = GUIDE.read_text("utf-8")
    # Written in Korean.
    assert sum("\uac00" <= c <= "\ud7a3" for c in text) > 1500
    # Disabled by default, and never derived from the legacy key.
    default = _section(text, "기본값은 비활성")
    assert "mode: disabled" in default and "coaching_feedback_enabled" in default
    # The exact allow-list and no retry.
    allow = _section(text, "정확한 허용 목록과 재시도 없음")
    assert "(openai-direct, chat_completions, https://api.openai.com/v1, gpt-4.1-mini)" in allow
    assert tuple(ALLOWED_PROVIDER.values()) == (
        "openai-direct",
        "chat_completions",
        "https://api.openai.com/v1",
        "gpt-4.1-mini",
    )
    assert "max_retries=0" in allow and "최대 한 번" in allow and "PR_SET_DUMPABLE" in allow
    # The redacted capsule; telemetry without content (exactly the six fields).
    assert "비식별 캡슐" in text and "HMAC" in _section(text, "비식별 캡슐")
    assert "{event, contract_version, surface, mode, outcome, latency_bucket}" in _section(
        text, "내용 없는 텔레메트리"
    )
    # The four surfaces, both adaptive schemas on the one shared flag.
    surfaces = _section(text, "네 가지 표면")
    for surface in (
        "daily.v1",
        "weekly.v1",
        "adaptive.dualcoachtest.card.v1",
        "adaptive.physique.card.v1",
    ):
        assert f"`{surface}`" in surfaces
    # Shadow gate and promotion order.
    gate = _section(text, "섀도 게이트와 승격 순서")
    assert "10/10" in gate and "14일" in gate and "실패 0건" in gate and "48/48" in gate
    assert "daily → weekly → adaptive" in gate and "각각 따로" in gate
    assert "kexpr promotion-report" in gate
    # Migration: preflight, migrate-config, the legacy key, the order.
    migration = _section(text, "설정 마이그레이션(순서가 있는 이전)")
    for needle in (
        "kexpr preflight",
        "kexpr migrate-config",
        "--write",
        "legacy_coaching_feedback_enabled",
        "--extra-path",
    ):
        assert needle in migration
    # Rollback: config first, stop, wait past the claim deadline, restart; keep evidence.
    rollback = _section(text, "롤백(설정 먼저)")
    steps = [
        rollback.index(s)
        for s in ("mode: disabled", "멈춥니다", "4초 청구 마감", "다시 시작합니다")
    ]
    assert steps == sorted(steps)
    for evidence in ("저널", "원장(ledger)", "카드 기록", "증거는 보존합니다"):
        assert evidence in rollback
    # The audit, with the inputs of `kexpr audit`.
    audit = _section(text, "감사(audit)")
    for flag in ("--gateway-pid", "--worker-pid", "--env-file", "--data-root", "/proc/PID/environ"):
        assert flag in audit
    # systemd, with the measured exposure (tests/ops_tests/test_systemd.py keeps it true).
    assert "1.2 OK" in _section(text, "배포: systemd")
    # The non-copy attribution: both immutable links and the exact statement.
    attribution = _section(text, "출처 표기(비복제)")
    for link in ATTRIBUTION_LINKS:
        assert link in attribution
    assert STATEMENT in attribution
    assert "소스 코드, 프롬프트,\n규칙, 워크플로, 산출물은 전혀 복사하지 않았습니다" in attribution

"""The Korean operator guide stands alone and every statement in it is true of the
tools: its terms (one word per concept), its tables of the words the tools print,
its figures (each against the constant it names), its commands (each against the
command's own options), its config block, its modes and its runbook. Its host
snippet runs in tests/e2e/test_guide_host.py."""

from __future__ import annotations

import contextlib
import io
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from gateway_shim.config import ALLOWED_PROVIDER, KoreanExpressionConfig, Mode
from kexpr.ops.cli import COMMANDS, main
from kexpr.spool.outcomes import Outcome

REPO = Path(__file__).resolve().parents[2]
GUIDE_PATH = REPO / "docs" / "operator-guide.ko.md"
GUIDE = GUIDE_PATH.read_text("utf-8")
ATTRIBUTION_LINKS = (
    "https://github.com/Gaeduck-0908/im-not-ai-kiro/tree/901e378ae7f77035d17a491067343ac3f83d0214",
    "https://github.com/epoko77-ai/im-not-ai/tree/53e24e8f92cf344efcb812103f7c2b203e7efffc",
)
STATEMENT = (
    "These repositories were consulted only for a high-level meaning-preservation goal; "
    "no source code, prompts, rules, workflow, or artifacts were copied."
)
SECTIONS = (
    "한눈에 보기",
    "용어와 도구가 출력하는 영어 단어",
    "설치: 휠 하나, 가상환경 둘",
    "사용자, 그룹, 데이터 루트",
    "설정 블록",
    "최소 호스트: 그대로 실행되는 예",
    "키 없이 리허설",
    "섀도, 활성, 승격 순서",
    "메시지 유형 네 가지",
    "시간 여유: 어떤 메시지 유형이 어떤 속도에서 위험한가",
    "systemd로 운영하기",
    "상태 보기, 경보, 로그",
    "업그레이드",
    "롤백(설정 먼저)",
    "보존 기간과 증거",
    "감사(audit)",
    "문제 해결",
    "라이브 섀도 증명",
    "출처 표기(비복제)",
)


def section(heading: str) -> str:
    m = re.search(
        rf"^## [0-9]+\. {re.escape(heading)}\n(.*?)(?=^## |\Z)", GUIDE, re.MULTILINE | re.DOTALL
    )
    assert m is not None, heading
    return m.group(1)


def prose(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


def code_blocks(lang: str, text: str = GUIDE) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def table_words(text: str) -> set[str]:
    """The backticked words in the first column of the tables in ``text``."""
    words: set[str] = set()
    for line in text.splitlines():
        if line.startswith("| `"):
            words |= set(re.findall(r"`([a-z_]+)`", line.split(" | ")[0]))
    return words


# ------------------------------------------------------------------ shape and words


def test_the_guide_is_korean_and_has_every_section_in_order() -> None:
    assert sum("\uac00" <= c <= "\ud7a3" for c in GUIDE) > 8000
    headings = re.findall(r"^## [0-9]+\. (.*)$", GUIDE, re.MULTILINE)
    assert tuple(headings) == SECTIONS
    numbers = [int(n) for n in re.findall(r"^## ([0-9]+)\. ", GUIDE, re.MULTILINE)]
    assert numbers == list(range(1, len(SECTIONS) + 1))


@pytest.mark.parametrize(
    "calque",
    [
        "정본",  # one word for the canonical text: 원문
        "정형 문구",
        "공급자",  # one word for the provider: 제공자
        "표면",  # a surface is a 메시지 유형
        "청구",  # billing, never the claim deadline (처리 기한)
        "크게 알립니다",
        "실행할 수 없는",
        "pip install 'kexpr",  # kexpr is on no index
        "pip install kexpr",
    ],
)
def test_one_word_per_concept_and_no_calque(calque: str) -> None:
    assert calque not in GUIDE


def test_the_chosen_words_are_used() -> None:
    for word in ("원문", "제공자", "메시지 유형", "처리 기한", "데이터 루트", "격리"):
        assert GUIDE.count(word) >= 3, word


def test_the_glossary_names_every_word_the_tools_print() -> None:
    from gateway_shim._data_root import SpoolProblem
    from kexpr.ops.status_cli import HealthVerdict
    from kexpr.spool.fsio import UnsafeReason
    from kexpr.worker.histograms import Margin
    from kexpr.worker.resume import ClearRefusal, ClearResult

    glossary = section("용어와 도구가 출력하는 영어 단어")
    shown = set(re.findall(r"`([a-z0-9_]+)`", glossary))
    for enum in (HealthVerdict, SpoolProblem, Margin, ClearResult, UnsafeReason):
        missing = {m.value for m in enum} - shown
        assert not missing, (enum.__name__, missing)
    assert {ClearRefusal.CALLS_IN_FLIGHT.value, "not_quarantined", "no_worker"} <= shown
    for word in (
        "yaml11_boolean",
        "legacy_coaching_feedback_enabled",
        "physique_checkin_not_read",
        "config_inexact",
        "glossary_unusable",
        "unknown_surface",
        "journal_writable_by_others",
        "unexpected_entry",
        "stale_staging_file",
        "running_as_root",
    ):
        assert word in shown, word


def test_the_runbook_has_a_row_for_every_outcome_word() -> None:
    """Every outcome word an operator can meet: the candidate's, the journal's."""
    runbook = section("문제 해결")
    assert table_words(runbook) >= {o.value for o in Outcome}


def test_the_quarantine_clear_words_are_the_commands() -> None:
    from kexpr.ops import quarantine_cli

    source = Path(quarantine_cli.__file__).read_text("utf-8")
    for word in ("not_quarantined", "no_worker", "no_answer", "cleared", "refused"):
        assert f'"{word}"' in source
    assert "quarantine clear: cleared (was bad_mode)" in section("문제 해결")


# ------------------------------------------------------------------ install and modes


def test_the_install_builds_the_wheel_the_project_makes() -> None:
    install = section("설치: 휠 하나, 가상환경 둘")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wheel = f"kexpr-{project['version']}-py3-none-any.whl"
    assert f"dist/{wheel}" in install
    assert "python3 -m pip wheel --no-deps --wheel-dir dist ." in install
    assert f"'dist/{wheel}[worker,ops]'" in install
    assert "/opt/kexpr/venv" in install
    extras = project["optional-dependencies"]
    assert "openai==2.24.0" in extras["worker"] and "openai==2.24.0" in install
    assert not any(d.startswith("openai") for d in project["dependencies"])
    # The httpx/httpcore ranges quoted are the worker extra's.
    assert "httpx >= 0.24.0, < 0.29" in install and "httpx>=0.24.0,<0.29" in extras["worker"]
    assert "httpcore >= 0.17.3, < 1.1" in install and "httpcore>=0.17.3,<1.1" in extras["worker"]


def test_the_users_group_and_modes_are_the_products() -> None:
    from kexpr.spool._sharing import PRIVATE_FILE_MODE, SHARED_FILE_MODE
    from kexpr.spool.fsio import Sharing

    layout = section("사용자, 그룹, 데이터 루트")
    sysusers = (REPO / "ops/systemd/kexpr.sysusers.conf").read_text()
    assert "u kexpr-worker -:kexpr-spool" in sysusers and "g kexpr-spool" in sysusers
    assert (
        "d /var/lib/kexpr 0750 root kexpr-spool -"
        in (REPO / "ops/systemd/kexpr.tmpfiles.conf").read_text()
    )
    assert "install -d -m 0750 -o root -g kexpr-spool /var/lib/kexpr" in layout
    assert Sharing(1).dir_mode == 0o2770 and SHARED_FILE_MODE == 0o660
    assert PRIVATE_FILE_MODE == 0o600
    assert (
        "install -d -m 2770 -o hermes -g kexpr-spool /var/lib/kexpr/staging/korean-expression-v1"
        in layout
    )
    assert "| 2770, 그룹 `kexpr-spool` |" in layout and "| 0660, 그룹 `kexpr-spool` |" in layout
    assert "| `identity.key` | 0600" in layout


# ------------------------------------------------------------------ config


def _guide_block() -> str:
    (block,) = code_blocks("yaml", section("설정 블록"))
    return block


def test_the_config_block_is_exact_and_disabled_as_the_host_reads_it() -> None:
    from kexpr.ops.preflight import preflight_text

    extra = yaml.safe_load(_guide_block())["platforms"]["telegram"]["extra"]
    config = KoreanExpressionConfig.from_extra(extra)
    assert config.valid and config.mode is Mode.DISABLED
    assert preflight_text(_guide_block()).passed
    allow = section("설정 블록")
    assert f"({', '.join(ALLOWED_PROVIDER.values())})" in allow


@pytest.mark.parametrize(
    ("value", "passes", "daily"),
    [("yes", True, True), ("true", True, True), ('"true"', False, False), ("y", False, False)],
)
def test_what_the_guide_says_of_yes_true_and_y(value: str, passes: bool, daily: bool) -> None:
    from kexpr.ops.preflight import preflight_text

    text = _guide_block().replace("mode: disabled ", "mode: shadow   ")
    text = text.replace("daily: false", f"daily: {value}")
    extra = yaml.safe_load(text)["platforms"]["telegram"]["extra"]
    host = KoreanExpressionConfig.from_extra(extra)
    result = preflight_text(text)
    assert result.passed is passes and host.valid is passes
    assert host.enabled_for("daily.v1") is daily
    if value == "yes":
        assert [n.text() for n in result.notes] == [
            "yaml11_boolean:true at platforms.telegram.extra.korean_expression_postprocessor"
            ".surfaces.daily"
        ]
    assert "`daily: yes`는\n  Hermes에게 `true`이고" in section("설정 블록")


def test_the_inexact_warning_shown_is_the_one_logged() -> None:
    import logging

    from gateway_shim.config import exact_block, inexact_warning

    (line,) = code_blocks("text", section("설정 블록"))
    config = KoreanExpressionConfig.from_block({**exact_block(), "timeout_seconds": 3.0})
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("kexpr.test-guide")
    logger.addHandler(Keep())
    logger.setLevel(logging.WARNING)
    assert inexact_warning(config, logger)
    assert records == [line.strip()]


# ------------------------------------------------------------------ figures


def test_every_figure_is_the_constant_it_names() -> None:
    from kexpr.ops import demo, promotion, status_cli
    from kexpr.ops.supervisor import CRASH_LOOP_EXIT
    from kexpr.spool.journal import RETENTION_DAYS
    from kexpr.spool.lifecycle import COMMIT_GRACE, MAX_WAIT
    from kexpr.spool.rehearsal import DEFAULT_FIRST_TOKEN_S, DEFAULT_TOKENS_PER_S
    from kexpr.worker import cooldown
    from kexpr.worker.exitcodes import ExitCode

    assert (status_cli.STALE_AFTER_S, MAX_WAIT.total_seconds()) == (10.0, 4.0)
    assert "하트비트가 10초 넘게" in section("상태 보기, 경보, 로그")
    assert "4초 처리 기한보다 **오래**" in section("롤백(설정 먼저)")
    assert COMMIT_GRACE.total_seconds() == 600 and "10분 안에" in section(
        "최소 호스트: 그대로 실행되는 예"
    )
    assert (DEFAULT_TOKENS_PER_S, DEFAULT_FIRST_TOKEN_S) == (77.0, 0.5)
    assert "초당 77토큰, 첫 토큰 0.5초" in section("키 없이 리허설")
    assert (demo.REHEARSAL_TOKENS_PER_S, demo.REHEARSAL_FIRST_TOKEN_S) == (110.0, 0.3)
    assert "(초당 110토큰, 첫 토큰\n0.3초)" in section("키 없이 리허설")
    assert RETENTION_DAYS == 35 and "**35일**" in section("보존 기간과 증거")
    assert (promotion.WINDOW_DAYS, promotion.REQUIRED_SELECTED) == (14, 10)
    assert "**14일**" in section("섀도, 활성, 승격 순서")
    assert "**10/10 선택(`shadow_selected`), 실패 0건**" in section("섀도, 활성, 승격 순서")
    assert status_cli.EXPIRING_MIN == 5
    assert "5건 이상이고 가져간 요청의\n  절반" in section("상태 보기, 경보, 로그")
    assert (cooldown.FAILURES_IN_A_ROW, cooldown.COOL_DOWN_S) == (5, 30.0)
    budget = section("시간 여유: 어떤 메시지 유형이 어떤 속도에서 위험한가")
    assert "5번 연속" in budget and "30초 동안" in budget
    from kexpr.spool.contract import SAFE_STYLE_LEXEMES
    from kexpr.spool.contract.fit import FIT, OPEN_FAMILY_FIT
    from kexpr.worker._transport import BODY_CAP_BYTES

    # The fit table's words (design §6.1, §6.2): 다만 alone, and the twenty others never.
    used = {
        s.lexeme
        for cells in (*FIT.values(), *OPEN_FAMILY_FIT.values())
        for c in cells.values()
        for s in c
    }
    assert used == {"다만"} and len(SAFE_STYLE_LEXEMES) - len(used) == 20
    words = section("메시지 유형 네 가지")
    assert "쓰이는 말은 `다만` 하나뿐입니다" in words and "나머지 스무 단어" in words
    assert BODY_CAP_BYTES == 48 * 1024 and "48 KiB를 넘음" in section("문제 해결")
    codes = {c.name: c.value for c in ExitCode}
    assert (codes["UNSUPPORTED_DEPENDENCY"], codes["NOT_UNDUMPABLE"]) == (69, 71)
    assert (codes["UNSAFE_DATA_ROOT"], codes["HAZARDOUS_ENVIRONMENT"]) == (74, 78)
    assert CRASH_LOOP_EXIT == 70
    systemd = section("systemd로 운영하기")
    assert "종료 코드 69(의존성 범위 밖), 71(덤프 불가 실패), 74(데이터 루트 거부), 78" in systemd
    assert "크래시 루프(종료 코드 70)" in systemd


def test_the_crash_loop_numbers_are_the_supervisors_and_the_units() -> None:
    text = " ".join(_help(["supervise"]).split())
    assert "(default 5)" in text and "(default 300" in text
    unit = (REPO / "ops/systemd/kexpr-worker@.service").read_text()
    assert "StartLimitBurst=5" in unit and "StartLimitIntervalSec=300" in unit
    assert "MemoryMax=256M" in unit and "TasksMax=64" in unit
    assert "300초 안에 5번" in section("systemd로 운영하기")


# ------------------------------------------------------------------ commands


def _help(command: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*command, "--help"])
    return out.getvalue()


def _kexpr_lines() -> list[list[str]]:
    lines = []
    for block in code_blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#")[0]
            m = re.search(r"(?:^|\s|/)kexpr (\S.*)", line)
            if m and "kexpr_host_example" not in line:
                lines.append(m.group(1).split())
    return lines


def test_every_kexpr_command_in_the_guide_exists_with_those_options() -> None:
    lines = _kexpr_lines()
    assert len(lines) >= 20
    for words in lines:
        name = words[0]
        assert name in COMMANDS, words
        sub = [words[1]] if len(words) > 1 and not words[1].startswith(("-", "<", "~", "/")) else []
        if name in ("preflight", "migrate-config", "status", "audit", "promotion-report"):
            sub = []
        if name == "supervise" or name == "run":
            sub = []
        helptext = _help([name, *sub])
        assert helptext, words
        for flag in (w for w in words if w.startswith("--")):
            assert flag in helptext, (words, flag)


def test_the_surfaces_check_statement_is_what_each_form_prints(tmp_path: Path) -> None:
    """The human single-message form prices each ID; the --jsonl line does not."""
    import json

    from kit.bodies import DAILY_BODY, STYLED_BODY

    text = tmp_path / "body.txt"
    text.write_text(STYLED_BODY, "utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["surfaces", "check", "--surface", "weekly.v1", str(text)]) == 0
    assert "P_WEEKLY_TREND_OBSERVED (" in out.getvalue() and "tokens" in out.getvalue()
    assert "answer: at most" in out.getvalue()
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text(json.dumps({"surface": "daily.v1", "body": DAILY_BODY}) + "\n", "utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["surfaces", "check", "--jsonl", str(jsonl)])
    (line,) = out.getvalue().splitlines()
    assert "tokens" not in line and json.loads(line)["eligible"] is True
    assert "`--jsonl`과 `--json` 줄에는 판정, 사유, 슬롯과 ID만" in section("메시지 유형 네 가지")


# ------------------------------------------------------------------ order and evidence


def test_rollback_is_config_first_and_keeps_the_evidence() -> None:
    rollback = section("롤백(설정 먼저)")
    steps = [
        rollback.index(s)
        for s in ("mode: disabled", "멈춥니다", "4초 처리 기한", "다시 시작합니다")
    ]
    assert steps == sorted(steps)
    for evidence in ("저널", "원장(ledger)", "카드 기록", "**증거는 보존합니다**"):
        assert evidence in rollback


def test_shadow_then_enabled_on_one_message_is_already_attempted_as_the_guide_says() -> None:
    gate = section("섀도, 활성, 승격 순서")
    assert "daily → weekly → adaptive" in gate and "각각 따로" in gate and "48건" in gate
    assert "`already_attempted`이고 원문이 나갑니다" in gate
    # The e2e host test presents one event in shadow, then enabled: already_attempted.
    e2e = (REPO / "tests/e2e/test_guide_host.py").read_text("utf-8")
    assert '== "outcome already_attempted"' in e2e


def test_a_spoiled_window_clears_when_the_last_failure_is_older_than_the_window() -> None:
    import datetime as dt

    from kexpr.ops.promotion import evaluate
    from kexpr.ops.readers import JournalRecord

    now = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)

    def rec(days_ago: float, outcome: str) -> JournalRecord:
        t = (now - dt.timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        # weekly: the one surface with something to style (design §6.2).
        return JournalRecord("weekly.v1", "shadow", t, outcome)

    def weekly(records: list[JournalRecord]) -> str:
        (s,) = [s for s in evaluate(records, now=now).surfaces if s.surface == "weekly.v1"]
        return s.gate.value

    good = [rec(1 + i / 10, "shadow_selected") for i in range(10)]
    assert weekly([*good, rec(13, "timeout")]) == "failures_present"
    assert weekly([*good, rec(15, "timeout")]) == "held"
    assert "**마지막 실패가 14일을 넘긴 날**" in section("문제 해결")


def test_the_attribution_is_kept_verbatim() -> None:
    attribution = section("출처 표기(비복제)")
    for link in ATTRIBUTION_LINKS:
        assert link in attribution
    assert STATEMENT in attribution
    assert "소스 코드, 프롬프트,\n규칙, 워크플로, 산출물은 전혀 복사하지 않았습니다" in attribution


def test_the_guide_links_what_it_leans_on() -> None:
    for doc in ("docs/upgrade.md", "docs/systemd.md", "docs/cli.md", "docs/hermes-integration.md"):
        assert doc in GUIDE and (REPO / doc).is_file(), doc
    assert "1.2 OK" in section("systemd로 운영하기")

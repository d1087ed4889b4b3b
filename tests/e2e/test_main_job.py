"""`kexpr run` (what `make run` runs): the main job end to end."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakeapi import FakeOpenAI

from kexpr.spool.contract import SAFE_STYLE_LEXEMES
from kexpr.spool.outcomes import CANDIDATE_OUTCOMES

pytestmark = pytest.mark.e2e


def run_job(data_root: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "run", "--data-root", str(data_root), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


SURFACES = ("daily.v1", "weekly.v1", "adaptive.dualcoachtest.card.v1", "adaptive.physique.card.v1")
# The samples, one row each: every surface, the dual card with two review reasons.
EXPECTED_SAMPLES = [
    ("daily.v1", "daily complete"),
    ("daily.v1", "daily partial"),
    ("weekly.v1", "weekly, goal missing"),
    ("adaptive.dualcoachtest.card.v1", "dual card, 2 reasons"),
    ("adaptive.physique.card.v1", "physique card"),
]
# The one sample with a slot to ask: the goal-missing weekly report (design §6.2).
STYLED = 2
NOTHING = ["nothing_to_style", "canonical"]
# The host's own text of each sample with nothing to style, as its row shows it.
CANONICAL_EXCERPTS = {
    0: "저장된 오늘 기록을 확인했습니다.",
    1: "일부 항목이 기록되지 않아 저장된 내용만 안내합니다.",
    3: "현재 판단: 순응도 근거 충돌로 조정 보류",
    4: "제안의 구조화된 항목을 확인한 뒤 승인 여부를 결정하세요.",
}
WEEKLY_FIRST = "최근 7일 평균과 이전 7일 평균의 차이를 확인했습니다."
WEEKLY_HOLD = "목표 범위가 없어 이번 주 조정 판단은 보류합니다."
NOTHING_LEGEND = [
    "nothing_to_style",
    "no style word reads at least as well as the host's own text here: the host's text, no request",
]


def assert_nothing_to_style_rows(got: list[list[str]]) -> None:
    """Every sample but the weekly one: the host's text, no request, its excerpt."""
    for i, excerpt in CANONICAL_EXCERPTS.items():
        assert got[i][2:] == [*NOTHING, excerpt], got[i]


def rows(stdout: str) -> list[list[str]]:
    """The table's data rows as columns, cut at the dashed rule's column starts."""
    lines = stdout.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("---"))
    starts = [0] + [m.end() for m in re.finditer(r"  (?=-)", lines[rule])]
    out = []
    for line in lines[rule + 1 :]:
        if line.startswith(SURFACES):
            cuts = [*starts, len(line)]
            out.append([line[a:b].strip() for a, b in itertools.pairwise(cuts)])
    return out


def samples(got: list[list[str]]) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in got]


def test_main_job_without_key_is_canonical(data_root: Path) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = run_job(data_root, env, "--no-rehearsal")
    assert out.returncode == 0, out.stderr
    got = rows(out.stdout)
    assert samples(got) == EXPECTED_SAMPLES
    assert_nothing_to_style_rows(got)
    assert got[STYLED][2:] == ["credential_unavailable", "canonical", WEEKLY_FIRST]
    legend = out.stdout.split("\noutcome:\n", 1)[1].splitlines()
    assert legend[0].split(None, 1) == NOTHING_LEGEND
    assert legend[1].split(None, 1) == [
        "credential_unavailable",
        "the worker has no OPENAI_API_KEY: no request was made, canonical body",
    ]
    assert (
        "live call: `OPENAI_API_KEY=sk-... make run` (only the worker receives the key)" in legend
    )
    # Then the example answers, replayed through the shim, each labelled as such.
    examples = [line for line in out.stdout.splitlines() if line.startswith("[example, replayed] ")]
    assert [line.split(" · ")[0].removeprefix("[example, replayed] ") for line in examples] == list(
        SURFACES
    )
    # The weekly example is accepted; the others have nothing to style, and say why.
    assert [line.rsplit(" · ", 1)[1] for line in examples] == [
        "nothing_to_style",
        "accepted",
        "nothing_to_style",
        "nothing_to_style",
    ]
    assert "not a live call" in out.stdout and out.stdout.count("  styled:") == 1
    assert out.stdout.count("  the host's text, no request: no style word reads") == 3
    assert "⟦" + WEEKLY_FIRST + "\n    다만, " + WEEKLY_HOLD + "⟧" in out.stdout


def test_main_job_with_key_reaches_the_provider(data_root: Path, fake_api: FakeOpenAI) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": "sk-demo"}
    out = run_job(
        data_root,
        env,
        "--https-proxy",
        fake_api.proxy_url,
        "--ssl-cert-file",
        str(fake_api.ca_file),
    )
    assert out.returncode == 0, out.stderr
    got = rows(out.stdout)
    assert samples(got) == EXPECTED_SAMPLES
    # Enabled: the terminal is the demo's publication, so the model's words show,
    # on the one sample with a slot to ask; the others are the host's text.
    assert_nothing_to_style_rows(got)
    # The fake's default (the table's first composition, sorted): 다만 before the
    # hold, the interpretation's second line; its two lines joined in the excerpt.
    assert got[STYLED][2:] == [
        "accepted",
        "selected",
        "⟦" + WEEKLY_FIRST + " / 다만 " + WEEKLY_HOLD + "⟧",
    ]
    legend = out.stdout.split("\noutcome:\n", 1)[1].splitlines()
    assert legend[0].split(None, 1) == NOTHING_LEGEND and legend[1].split()[0] == "accepted"
    assert "live call:" not in out.stdout and "rehearsal" not in out.stdout  # a real call
    assert "[example, replayed]" not in out.stdout  # the live rows show the point
    assert [str(r["outcome"]) for r in terminal_rows(data_root)] == ["selected"]
    # One call, for the weekly report's interpretation alone (nothing_to_style makes
    # no request, and the rationale is locked).
    assert len(fake_api.requests) == 1
    (capsule,) = [r.capsule for r in fake_api.requests]
    assert capsule is not None and capsule["surface"] == "weekly.v1"
    assert [s["slot_id"] for s in capsule["slots"]] == ["weekly.interpretation"]
    assert all(r.headers["authorization"] == "Bearer sk-demo" for r in fake_api.requests)


def terminal_rows(root: Path) -> list[dict[str, object]]:
    from conftest import journal_rows

    return [r for r in journal_rows(root) if r["state"] == "finalized"]


FAST = ("--tokens-per-second", "100000", "--first-token-seconds", "0")


def test_main_job_without_key_rehearses_and_shows_the_words(data_root: Path) -> None:
    """Issue 24 items 1 and 5: no key, no network, and the model's words marked."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = run_job(data_root, env, *FAST)
    assert out.returncode == 0, out.stderr
    rehearsal = data_root.parent / "korean-expression-v1-rehearsal"
    head = out.stdout.splitlines()[0]
    assert head.startswith("kexpr run: rehearsal (no OPENAI_API_KEY): ") and str(rehearsal) in head
    got = rows(out.stdout)
    assert samples(got) == EXPECTED_SAMPLES
    assert_nothing_to_style_rows(got)
    # The weekly report's slot, marked: the host's two sentences, one of the table's
    # two words before the hold (the rehearsal picks among its compositions).
    assert got[STYLED][2:4] == ["accepted", "selected"]
    assert got[STYLED][4] in (
        "⟦" + WEEKLY_FIRST + " / 다만 " + WEEKLY_HOLD + "⟧",
        "⟦" + WEEKLY_FIRST + " / 다만, " + WEEKLY_HOLD + "⟧",
    )
    assert "⟦…⟧ marks the slot text" in out.stdout
    assert "rehearsal: the built-in model answered (100000 tokens/s after 0 s" in out.stdout
    assert "[example, replayed]" not in out.stdout
    # What the model wrote, content-free: the same style view as `kexpr status`.
    tail = out.stdout[out.stdout.index("style words the accepted answers used, per slot") :]
    style = [line for line in tail.splitlines()[1:] if line.strip()]
    assert style[0].startswith("style       ") and "weekly.interpretation" in tail
    assert "daily.status" not in tail
    for line in style:
        words = re.findall(r"([가-힣]+) [0-9]+", line.split("answers:")[1])
        assert words and set(words) <= set(SAFE_STYLE_LEXEMES), line
    # What it wrote is marked, in its own root (the given root is untouched), and
    # every selected body was reported.
    assert not data_root.exists()
    assert (rehearsal / "rehearsal.marker").is_file()
    assert [str(r["outcome"]) for r in terminal_rows(rehearsal)] == ["selected"]
    report = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "promotion-report", "--data-root", str(rehearsal)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 2 and "rehearsal evidence is never counted" in report.stderr
    # Twice in a row: the marked root is reused.
    again = run_job(data_root, env, *FAST)
    assert again.returncode == 0, again.stderr
    again_rows = rows(again.stdout)
    assert_nothing_to_style_rows(again_rows)
    assert again_rows[STYLED][2:4] == ["accepted", "selected"]


def test_the_legend_takes_its_numbers_from_the_config() -> None:
    """Issue 24 item 5: "4 s" where the config says 3 was the bug."""
    from gateway_shim import exact_block
    from kexpr.ops.demo import OUTCOME_LEGEND, outcome_legend
    from kexpr.spool.lifecycle import MAX_WAIT

    timeout = exact_block()["timeout_seconds"]
    assert timeout == 3 and MAX_WAIT.total_seconds() == 4
    assert OUTCOME_LEGEND["timeout"].startswith("no valid answer within the call's 3 s ")
    assert "waits 4 s in all" in OUTCOME_LEGEND["timeout"]
    assert "request's 4 s" in OUTCOME_LEGEND["no_time_to_answer"]
    other = outcome_legend(timeout_s=7, wait_s=9)
    assert "call's 7 s" in other["timeout"] and "waits 9 s" in other["timeout"]
    assert "request's 9 s" in other["no_time_to_answer"]
    assert all(
        re.search(r"\d", v) is None
        for k, v in other.items()
        if k
        not in (
            "timeout",
            "no_time_to_answer",
        )
    )


def test_the_legend_explains_every_outcome() -> None:
    from kexpr.ops.demo import OUTCOME_LEGEND

    assert set(OUTCOME_LEGEND) == {o.value for o in CANDIDATE_OUTCOMES}
    assert all(OUTCOME_LEGEND.values())

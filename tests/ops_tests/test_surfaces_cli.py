"""`kexpr surfaces check`: the batch interface, its exit codes and its input rules
(ops/surfaces_cli.py Rules 1-5). The host's own examples are judged in
tests/surfaces/test_host_examples.py."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kexpr.ops import surfaces_cli
from kexpr.ops.surfaces_cli import (
    EXIT_ELIGIBLE,
    EXIT_INELIGIBLE,
    EXIT_UNUSABLE,
    INVALID_REQUEST,
    MAX_INPUT_BYTES,
    run_check,
)

HOST_EXAMPLES = Path(__file__).parents[1] / "surfaces" / "goldens" / "host-examples.jsonl"


def _examples() -> list[dict[str, object]]:
    return [json.loads(line) for line in HOST_EXAMPLES.read_text("utf-8").splitlines()]


def _run(argv: list[str], stdin: bytes = b"") -> tuple[int, list[dict[str, Any]], str]:
    stdin_stream = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = run_check(argv, stdin_stream, out, err)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def _jsonl(requests: list[object]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests).encode()


def _eligible_request() -> dict[str, object]:
    for example in _examples():
        if example["expected"] == "eligible" and example["request"]["surface"] == "daily.v1":  # type: ignore[index]
            request = example["request"]
            assert isinstance(request, dict)
            return request
    raise AssertionError("no eligible daily example")


INVALID_LINES: list[bytes] = [
    b"not json",
    b"[]",
    b'"daily.v1"',
    b"{}",
    b'{"surface": "daily.v2", "body": "x"}',
    b'{"surface": "daily.v1"}',
    b'{"surface": "daily.v1", "body": 7}',
    b'{"surface": "daily.v1", "body": "x", "extra": 1}',
    b'{"surface": "daily.v1", "body": "x", "explicit_fields": []}',
    b'{"surface": "daily.v1", "body": "x", "body": "y"}',
    b'{"surface": "weekly.v1", "body": "x", "explicit_fields": "interpretation"}',
    b'{"surface": "weekly.v1", "body": "x", "explicit_fields": [1]}',
    b'{"surface": "weekly.v1", "body": NaN}',
    b'{"surface": "adaptive.physique.card.v1", "payload": {}, "callback_data": "x"}',
    b'{"surface": "adaptive.physique.card.v1", "payload": [], "callback_data": "x", "origin": "fresh"}',
    b'{"surface": "adaptive.physique.card.v1", "payload": {}, "callback_data": 1, "origin": "fresh"}',
    b'{"surface": "adaptive.physique.card.v1", "payload": {}, "callback_data": "x", "origin": "stale"}',
    b'{"surface": "daily.v1", "body": "\xff"}',
    b"",
]


@pytest.mark.parametrize("line", INVALID_LINES)
def test_an_invalid_request_line_answers_invalid_request_and_makes_the_input_unusable(
    line: bytes,
) -> None:
    good = _jsonl([_eligible_request()])
    code, answers, err = _run(["--jsonl", "-"], good + line + b"\n" + good)
    assert code == EXIT_UNUSABLE
    assert len(answers) == 3  # one answer per line, in order
    assert answers[1] == {
        "line": 2,
        "eligible": False,
        "reason": INVALID_REQUEST,
        "slots": [],
        "roundtrip": None,
        "nothing_to_style": None,
        "nothing_to_style_reason": None,
    }
    assert [a.pop("line") for a in answers] == [1, 2, 3]
    assert answers[0] == answers[2]
    assert f"line 2: {INVALID_REQUEST}" in err


def test_a_final_newline_does_not_start_a_line_but_an_empty_line_is_a_line() -> None:
    request = _jsonl([_eligible_request()])
    assert len(_run(["--jsonl", "-"], request)[1]) == 1
    assert len(_run(["--jsonl", "-"], request.rstrip(b"\n"))[1]) == 1
    assert len(_run(["--jsonl", "-"], request + b"\n")[1]) == 2


def test_an_adapter_error_is_reported_as_ineligible_without_hiding_other_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_: object, **__: object) -> object:
        raise KeyError("customer text must not be printed")

    monkeypatch.setattr("gateway_shim.surfaces.daily.parse_daily", broken)
    weekly = {"surface": "weekly.v1", "body": "x"}
    code, answers, err = _run(["--jsonl", "-"], _jsonl([_eligible_request(), weekly]))
    assert code == EXIT_INELIGIBLE
    assert answers[0]["reason"] == surfaces_cli.ADAPTER_ERROR
    assert answers[1]["eligible"] is False and answers[1]["reason"] != INVALID_REQUEST
    assert "KeyError" in err and "customer" not in err


def test_unreadable_inputs_are_unusable_with_one_line_and_no_answers(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(HOST_EXAMPLES)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    for path, problem in (
        (tmp_path / "missing", "missing"),
        (tmp_path, "is_directory"),
        (fifo, "not_regular_file"),
        (link, "symlink"),
        (empty, "empty"),
    ):
        code, answers, err = _run(["--jsonl", str(path)])
        assert (code, answers) == (EXIT_UNUSABLE, [])
        assert err.count("\n") == 1 and err.startswith(f"kexpr surfaces check: --jsonl {path}: ")
        assert err.endswith(f" ({problem})\n")


def test_empty_input_is_unusable_not_silently_eligible() -> None:
    # An empty input once printed nothing and exited 0.
    code, answers, err = _run(["--jsonl", "-"], b"")
    assert (code, answers) == (EXIT_UNUSABLE, [])
    assert err == "kexpr surfaces check: standard input is empty (no request to check)\n"


def test_every_batch_answer_carries_its_input_line_number() -> None:
    good = _jsonl([_eligible_request()])
    code, answers, _ = _run(["--jsonl", "-"], good + b"\n" + good + b"nope\n")
    assert code == EXIT_UNUSABLE
    assert [a["line"] for a in answers] == [1, 2, 3, 4]
    assert [a["reason"] for a in answers] == [None, INVALID_REQUEST, None, INVALID_REQUEST]


def test_the_recorded_examples_are_accepted_as_they_are_and_meet_their_expectation() -> None:
    # The goldens' README calls these lines requests; the checker once answered
    # 14 x invalid_request on them. An example line is {"request", "expected", "example"}.
    code, answers, err = _run(["--jsonl", str(HOST_EXAMPLES)])
    assert (code, err) == (EXIT_ELIGIBLE, "")
    examples = _examples()
    assert len(answers) == len(examples) == 14
    for number, (answer, example) in enumerate(zip(answers, examples, strict=True), start=1):
        assert answer["line"] == number
        assert answer["expected"] == example["expected"]
        assert answer["as_expected"] is True
        assert answer["eligible"] is (example["expected"] == "eligible")
        # The label is never printed.
        assert "example" not in answer


def test_an_example_that_misses_its_expectation_is_ineligible_for_the_exit_code() -> None:
    request = _eligible_request()
    wrong = {"example": "x", "expected": "ineligible", "request": request}
    code, answers, _ = _run(["--jsonl", "-"], _jsonl([wrong]))
    assert code == EXIT_INELIGIBLE
    assert (answers[0]["eligible"], answers[0]["as_expected"]) == (True, False)
    bare = {"request": request}  # no expectation: judged as the request itself
    code, answers, _ = _run(["--jsonl", "-"], _jsonl([bare]))
    assert code == EXIT_ELIGIBLE and "expected" not in answers[0]


@pytest.mark.parametrize(
    "line",
    [
        {"request": {"surface": "daily.v1", "body": "x"}, "expected": "maybe"},
        {"request": {"surface": "daily.v1", "body": "x"}, "other": 1},
        {"request": {"surface": "daily.v1", "body": "x"}, "example": 7},
        {"request": "daily.v1"},
    ],
)
def test_a_malformed_example_line_is_an_invalid_request(line: dict[str, object]) -> None:
    code, answers, _ = _run(["--jsonl", "-"], _jsonl([line]))
    assert code == EXIT_UNUSABLE and answers[0]["reason"] == INVALID_REQUEST


def test_standard_input_is_bounded() -> None:
    code, answers, err = _run(["--jsonl", "-"], b" " * (MAX_INPUT_BYTES + 1))
    assert (code, answers) == (EXIT_UNUSABLE, [])
    assert "larger than" in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--jsonl", "-", "--surface", "daily.v1"],
        ["--surface", "daily.v1"],
        ["--surface", "daily.v9", "x"],
        ["--origin", "stale", "--surface", "daily.v1", "x"],
        ["--bogus"],
    ],
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    code, answers, _ = _run(argv)
    assert (code, answers) == (EXIT_UNUSABLE, [])


def test_single_form_adaptive_needs_callback_data(tmp_path: Path) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text("{}")
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(b""))
    argv = ["--surface", "adaptive.physique.card.v1", str(payload)]
    assert run_check(argv, stdin, out, err) == EXIT_UNUSABLE
    assert "--callback-data" in err.getvalue() and out.getvalue() == ""


def test_single_form_rejects_a_body_that_is_not_utf8(tmp_path: Path) -> None:
    body = tmp_path / "body.txt"
    body.write_bytes(b"\xff\xfe")
    code, answers, err = _run(["--surface", "daily.v1", str(body)])
    assert (code, answers) == (EXIT_UNUSABLE, [])
    assert "not UTF-8" in err


SENTINEL = "고객비밀문장"


@given(st.text(min_size=0, max_size=60), st.sampled_from(["daily.v1", "weekly.v1"]))
def test_answers_never_carry_the_message_text(text: str, surface: str) -> None:
    body = f"{SENTINEL}{text}"
    code, answers, err = _run(["--jsonl", "-"], _jsonl([{"surface": surface, "body": body}]))
    assert code in (EXIT_INELIGIBLE, EXIT_ELIGIBLE)
    assert SENTINEL not in json.dumps(answers, ensure_ascii=False) and SENTINEL not in err


def test_the_console_script_runs_the_command(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_jsonl([example["request"] for example in _examples()]))
    kexpr = Path(sys.executable).with_name("kexpr")
    proc = subprocess.run(
        [str(kexpr), "surfaces", "check", "--jsonl", str(requests)],
        capture_output=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        timeout=120,
        check=False,
    )
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == len(_examples())
    # The examples hold eligible and ineligible lines: exit 1.
    assert proc.returncode == EXIT_INELIGIBLE, proc.stderr
    for number, raw in enumerate(lines, start=1):
        answer = json.loads(raw)
        assert set(answer) == {
            "line",
            "eligible",
            "reason",
            "slots",
            "roundtrip",
            "nothing_to_style",
            "nothing_to_style_reason",
        }
        assert answer["line"] == number
        # Eligible with nothing to ask: said, with its reason; otherwise not.
        if answer["eligible"]:
            assert answer["nothing_to_style"] is (answer["slots"] == [])
            assert (answer["nothing_to_style_reason"] is None) is (answer["slots"] != [])
        else:
            assert answer["nothing_to_style"] is answer["nothing_to_style_reason"] is None


@pytest.mark.parametrize("argv", [["surfaces"], ["surfaces", "bogus"]])
def test_kexpr_surfaces_without_check_is_a_usage_error(argv: list[str]) -> None:
    from kexpr.ops.cli import main

    assert main(argv) == EXIT_UNUSABLE


def test_kexpr_surfaces_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    from kexpr.ops.cli import main

    assert main(["surfaces", "--help"]) == EXIT_ELIGIBLE
    assert "check" in capsys.readouterr().out
    assert main(["surfaces", "check", "--help"]) == EXIT_ELIGIBLE


def _a1_with_decision(decision: str) -> dict[str, object]:
    a1 = next(e for e in _examples() if e["example"] == "HOST-FORMATS.md A1")
    request = json.loads(json.dumps(a1["request"]))
    payload = request["payload"]
    payload["text"] = payload["text"].replace("순응도 근거 충돌로 조정 보류", decision)
    return request


def test_a_dual_decision_only_the_operator_glossary_maps_needs_that_glossary(
    tmp_path: Path,
) -> None:
    request = _a1_with_decision("체중 추세 확인 전까지 조정 보류")
    glossary = tmp_path / "operator-glossary.json"
    glossary.write_text(
        json.dumps(
            {
                "version": "kexpr-dual-glossary-v1",
                "decisions": {"P_DUAL_DECISION_TREND_HOLD": "체중 추세 확인 전까지 조정 보류"},
                "reasons": {},
            },
            ensure_ascii=False,
        ),
        "utf-8",
    )
    code, answers, _ = _run(["--jsonl", "-"], _jsonl([request]))
    assert (code, answers[0]["eligible"], answers[0]["reason"]) == (
        EXIT_INELIGIBLE,
        False,
        "decision_unmapped",
    )
    code, answers, _ = _run(["--jsonl", "-", "--glossary", str(glossary)], _jsonl([request]))
    assert (code, answers[0]["eligible"], answers[0]["roundtrip"]) == (EXIT_ELIGIBLE, True, True)
    # The decision is mapped (else ineligible, above), but no slot of the card is
    # asked: no style word fits a label's value (design §6.1), and none reads at
    # least as well as the host's text before a review line (§6.2). Eligible, with
    # nothing to style, and why.
    assert (answers[0]["slots"], answers[0]["nothing_to_style"]) == ([], True)
    assert answers[0]["nothing_to_style_reason"] == surfaces_cli.NOTHING_TO_STYLE_REASON


@pytest.mark.parametrize(
    "content",
    [
        b"{}",
        b"not json",
        b'{"version": "kexpr-dual-glossary-v1", "decisions": {"X": "y"}, "reasons": {}}',
    ],
)
def test_an_invalid_glossary_makes_the_input_unusable(tmp_path: Path, content: bytes) -> None:
    glossary = tmp_path / "g.json"
    glossary.write_bytes(content)
    code, answers, err = _run(
        ["--jsonl", "-", "--glossary", str(glossary)], _jsonl([_eligible_request()])
    )
    assert (code, answers) == (EXIT_UNUSABLE, [])
    assert err.startswith("kexpr surfaces check: --glossary") and err.count("\n") == 1


# --- the single-message form (human-readable, and --json) -------------


def _request_of(example_name: str) -> dict[str, object]:
    example = next(e for e in _examples() if e["example"] == example_name)
    request = example["request"]
    assert isinstance(request, dict)
    return request


def _single(argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    stdin_stream = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = run_check(argv, stdin_stream, out, err)
    return code, out.getvalue(), err.getvalue()


def _write_single_input(tmp_path: Path, request: dict[str, object]) -> Path:
    path = tmp_path / "message"
    if "body" in request:
        body = request["body"]
        assert isinstance(body, str)
        path.write_bytes(body.encode("utf-8"))
    else:
        path.write_text(json.dumps(request["payload"], ensure_ascii=False), "utf-8")
    return path


def _single_argv(request: dict[str, object], path: str) -> list[str]:
    argv = ["--surface", str(request["surface"]), path]
    for name in request.get("explicit_fields", []):  # type: ignore[attr-defined]
        argv += ["--explicit-field", name]
    if "callback_data" in request:
        argv += [
            "--callback-data",
            str(request["callback_data"]),
            "--origin",
            str(request["origin"]),
        ]
    return argv


@pytest.mark.parametrize("example", _examples(), ids=[str(e["example"]) for e in _examples()])
def test_single_form_json_answers_exactly_as_the_batch_line(
    tmp_path: Path, example: dict[str, object]
) -> None:
    request = example["request"]
    assert isinstance(request, dict)
    batch_code, batch_answers, _ = _run(["--jsonl", "-"], _jsonl([request]))
    path = _write_single_input(tmp_path, request)
    code, out, err = _single([*_single_argv(request, str(path)), "--json"])
    assert (code, err) == (batch_code, "")
    assert out.endswith("\n") and out.count("\n") == 1
    assert {"line": 1, **json.loads(out)} == batch_answers[0]
    expected_code = EXIT_ELIGIBLE if example["expected"] == "eligible" else EXIT_INELIGIBLE
    assert code == expected_code


def test_single_form_human_readable_eligible_names_the_slots_and_the_roundtrip(
    tmp_path: Path,
) -> None:
    # W5: the goal range missing (branch I2), the one message with a slot to ask.
    request = _request_of("HOST-FORMATS.md W5")
    path = _write_single_input(tmp_path, request)
    code, out, err = _single(_single_argv(request, str(path)))
    assert (code, err) == (EXIT_ELIGIBLE, "")
    # Each ID's price and the minimal answer against the budget.
    from kexpr.spool.contract import slot_policy
    from kexpr.spool.contract.budget import slots_token_bound

    bound = slots_token_bound(
        "weekly.v1",
        (
            slot_policy(
                "weekly.interpretation",
                ("P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"),
            ),
        ),
    )
    assert out.splitlines() == [
        "weekly.v1: eligible",
        "  slot weekly.interpretation: P_WEEKLY_TREND_OBSERVED (9 tokens)"
        " A_WEEKLY_HOLD_FOR_MISSING_GOAL (10 tokens)",
        "    words before each sentence: -; '다만'|'다만,' (2 compositions)",
        "  roundtrip: yes",
        f"  answer: at most {bound} tokens (o200k_base) of the 297-token budget: fits",
    ]


def test_single_form_human_readable_nothing_to_style_says_why(tmp_path: Path) -> None:
    # W3: goal in range (branch I3): the host's format, every slot locked.
    request = _request_of("HOST-FORMATS.md W3")
    path = _write_single_input(tmp_path, request)
    code, out, err = _single(_single_argv(request, str(path)))
    assert (code, err) == (EXIT_ELIGIBLE, "")
    lines = out.splitlines()
    assert lines[:2] == [
        "weekly.v1: eligible, nothing to style: no style word reads at least as well as the"
        " host's text before any of its sentences (docs/design.md §6.2) — the host's"
        " canonical text is used, no request",
        "  roundtrip: yes",
    ]
    assert not any(line.startswith("  slot ") for line in lines)


def test_single_form_human_readable_ineligible_names_the_reason_never_the_text(
    tmp_path: Path,
) -> None:
    request = _request_of("HOST-FORMATS.md W3")
    path = _write_single_input(tmp_path, request)
    code, out, err = _single([*_single_argv(request, str(path)), "--explicit-field", "reason"])
    assert (code, err) == (EXIT_INELIGIBLE, "")
    assert out.startswith("weekly.v1: ineligible (explicit_source_field)")
    assert out.count("\n") == 1
    body = request["body"]
    assert isinstance(body, str)
    assert not any(line in out for line in body.split("\n") if line)


def test_single_form_adaptive_origin_and_callback_reach_the_adapter(tmp_path: Path) -> None:
    request = _request_of("HOST-FORMATS.md A1")
    path = _write_single_input(tmp_path, request)
    argv = _single_argv(request, str(path))
    assert _single([*argv, "--json"])[0] == EXIT_ELIGIBLE
    code, out, _ = _single([*argv, "--origin", "recovery", "--json"])
    assert (code, json.loads(out)["reason"]) == (EXIT_INELIGIBLE, "recovery_payload")
    code, out, _ = _single([*argv, "--callback-data", "an1:zz:create", "--json"])
    assert (code, json.loads(out)["reason"]) == (EXIT_INELIGIBLE, "callback_malformed")


def test_single_form_reads_standard_input(tmp_path: Path) -> None:
    request = _request_of("HOST-FORMATS.md D4")
    body = request["body"]
    assert isinstance(body, str)
    code, out, _ = _single(["--surface", "daily.v1", "-", "--json"], body.encode("utf-8"))
    assert (code, json.loads(out)["eligible"]) == (EXIT_ELIGIBLE, True)


@pytest.mark.parametrize("surface", ["daily.v1", "weekly.v1", "adaptive.physique.card.v1"])
def test_single_form_unreadable_file_is_unusable(tmp_path: Path, surface: str) -> None:
    argv = ["--surface", surface, str(tmp_path / "missing"), "--callback-data", "x"]
    code, out, err = _single(argv)
    assert (code, out) == (EXIT_UNUSABLE, "")
    assert err == (
        f"kexpr surfaces check: FILE {tmp_path / 'missing'}: no such file or directory (missing)\n"
    )


@pytest.mark.parametrize("content", [b"not json", b"[]", b'{"a": 1, "a": 2}', b"\xff"])
def test_single_form_payload_that_is_not_a_json_object_is_unusable(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "payload.json"
    path.write_bytes(content)
    argv = ["--surface", "adaptive.dualcoachtest.card.v1", str(path)]
    argv += ["--callback-data", "an1:" + "a" * 24 + ":create"]
    code, out, err = _single(argv)
    assert (code, out) == (EXIT_UNUSABLE, "")
    assert err.count("\n") == 1


def test_single_form_drops_exactly_one_final_newline_an_editor_adds(tmp_path: Path) -> None:
    body = str(_eligible_request()["body"])
    saved = tmp_path / "body.txt"
    saved.write_text(body + "\n", "utf-8")
    code, answers, _ = _run(["--surface", "daily.v1", "--json", str(saved)])
    assert (code, answers[0]["eligible"], answers[0]["roundtrip"]) == (EXIT_ELIGIBLE, True, True)
    saved.write_text(body + "\n\n", "utf-8")
    code, answers, _ = _run(["--surface", "daily.v1", "--json", str(saved)])
    assert (code, answers[0]["reason"]) == (EXIT_INELIGIBLE, "trailing_newline")


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "a": 2}',
        b'{"a": {"b": 1, "b": 1}}',
        b"NaN",
        b'{"a": Infinity}',
        b"\xff",
        b"[" * 100000,
    ],
)
def test_the_tools_share_one_strict_line_reader(raw: bytes) -> None:
    """`kexpr surfaces check` and `kexpr contract check` refuse the same lines."""
    from kexpr.ops._strict_json import NotStrictJson, loads_strict
    from kexpr.ops.contract_cli import _parse_line

    with pytest.raises(NotStrictJson):
        loads_strict(raw)
    assert _parse_line(raw) is None
    code, answers, _ = _run(["--jsonl", "-"], raw + b"\n")
    assert (code, answers[0]["reason"]) == (EXIT_UNUSABLE, INVALID_REQUEST)

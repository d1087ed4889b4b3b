"""`kexpr contract check` (ops/contract_cli.py): verdict JSON, exit codes, no content."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from contract_support import KEY, LOCKED_POLICIES, STYLED, doc, mutated, response

from kexpr.ops.contract_cli import run_contract_check

SECRET = "다만"  # appears in content; must never be printed
MISFIT = "그리고"  # a lexicon word the fit table refuses before the goal-missing hold
# The one styled capsule's slot: [[P:01]] then [[A:01]] (design §6.2).
ACCEPTED = f"[[P:01]]. {SECRET} [[A:01]]."
BARE = "[[P:01]]. [[A:01]]."


def _run(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_contract_check([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def capsule_file(tmp_path: Path) -> Path:
    path = tmp_path / "capsule.json"
    path.write_text(STYLED.to_json(), encoding="utf-8")
    return path


def _response_file(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "response.txt"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize(
    ("content", "code", "stdout"),
    [
        (doc(STYLED, ACCEPTED), 0, '{"reason":null,"verdict":"accepted"}\n'),
        (
            doc(STYLED, f"[[P:01]]. {MISFIT} [[A:01]]."),
            1,
            '{"reason":"style_misfit","verdict":"validation_rejected"}\n',
        ),
        (
            doc(STYLED, "오늘은 " + ACCEPTED),
            1,
            '{"reason":"unknown_word","verdict":"validation_rejected"}\n',
        ),
        (
            b"\xef\xbb\xbf" + doc(STYLED, ACCEPTED).encode(),
            1,
            '{"reason":"bom","verdict":"invalid_response"}\n',
        ),
        (
            json.dumps(response(STYLED, ACCEPTED), indent=2),
            0,
            '{"reason":null,"verdict":"accepted"}\n',
        ),
    ],
)
def test_single(
    tmp_path: Path, capsule_file: Path, content: str | bytes, code: int, stdout: str
) -> None:
    result = _run("--capsule", capsule_file, "--response", _response_file(tmp_path, content))
    assert result == (code, stdout, "")
    assert SECRET not in result[1] + result[2] and MISFIT not in result[1] + result[2]


def test_single_missing_files(tmp_path: Path, capsule_file: Path) -> None:
    response = _response_file(tmp_path, doc(STYLED))
    code, out, err = _run("--capsule", tmp_path / "nope.json", "--response", response)
    assert (code, out) == (2, "")
    # The path it tried and the same words as every command, not the
    # OS error's class name.
    assert err == (
        f"kexpr contract check: --capsule {tmp_path / 'nope.json'}: "
        "no such file or directory (missing)\n"
    )
    code, out, err = _run("--capsule", capsule_file, "--response", tmp_path / "nope.txt")
    assert (code, out) == (2, "")
    assert err == (
        f"kexpr contract check: --response {tmp_path / 'nope.txt'}: "
        "no such file or directory (missing)\n"
    )


def test_single_invalid_capsule(tmp_path: Path) -> None:
    bad = tmp_path / "capsule.json"
    bad.write_text(STYLED.to_json().replace('"max_style_lexemes":16', '"max_style_lexemes":17'))
    code, out, err = _run("--capsule", bad, "--response", _response_file(tmp_path, doc(STYLED)))
    assert (code, out, err) == (
        2,
        "",
        f"kexpr contract check: --capsule {bad}: invalid capsule (limits_mismatch)\n",
    )


@pytest.mark.parametrize("name", list(LOCKED_POLICIES))
def test_single_capsule_of_a_locked_slot_is_invalid(tmp_path: Path, name: str) -> None:
    # A slot the fit table locks is never asked (design §6.1): its capsule is refused
    # before any response is read.
    surface, policy = LOCKED_POLICIES[name]
    locked = json.loads(STYLED.to_json()) | {
        "surface": surface,
        "slots": [json.loads(policy.model_dump_json())],
    }
    bad = tmp_path / "capsule.json"
    bad.write_text(json.dumps(locked))
    code, out, err = _run("--capsule", bad, "--response", _response_file(tmp_path, doc(STYLED)))
    assert (code, out, err) == (
        2,
        "",
        f"kexpr contract check: --capsule {bad}: invalid capsule (slot_unstyleable)\n",
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--capsule", "c.json"],
        ["--response", "r.txt"],
        ["--jsonl", "x.jsonl", "--capsule", "c.json"],
        ["--unknown"],
        ["check"],
    ],
)
def test_usage_errors_exit_2(argv: list[str]) -> None:
    code, out, err = _run(*argv)
    assert (code, out) == (2, "")
    assert err.startswith("usage: kexpr contract check")


def test_help_exits_0_on_stdout() -> None:
    code, out, err = _run("--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: kexpr contract check")


def _line(capsule: object, response_text: str) -> str:
    # ensure_ascii: a lone surrogate in the raw content travels as a \\ud800 escape.
    return json.dumps({"capsule": capsule, "response": response_text}, ensure_ascii=True)


def test_jsonl_in_order_and_all_judged(tmp_path: Path) -> None:
    styled = json.loads(STYLED.to_json())
    lines = [
        _line(styled, doc(STYLED, ACCEPTED)),
        _line(styled, doc(STYLED, "[[P:01]]. 다만, [[A:01]].")),
        _line(styled, doc(STYLED, BARE)),
        _line(styled, "\ufeff" + doc(STYLED)),
        _line(styled, doc(STYLED, "\ud800")),  # JSON-escaped lone surrogate in the raw content
        _line(styled, mutated(STYLED, lambda d: d.update(surface="daily.v1"))),
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")
    code, out, err = _run("--jsonl", path)
    assert code == 0 and err == ""
    assert [json.loads(x) for x in out.splitlines()] == [
        {"verdict": "accepted", "reason": None},
        {"verdict": "accepted", "reason": None},
        {"verdict": "validation_rejected", "reason": "no_style_lexeme"},
        {"verdict": "invalid_response", "reason": "bom"},
        {"verdict": "invalid_response", "reason": "not_utf8"},
        {"verdict": "validation_rejected", "reason": "surface_mismatch"},
    ]
    assert SECRET not in out


def test_jsonl_invalid_lines_and_capsules_exit_2(tmp_path: Path) -> None:
    daily = json.loads(STYLED.to_json())
    _, locked = LOCKED_POLICIES["daily"]
    lines = [
        _line(daily, doc(STYLED)),
        "not json",
        "",
        json.dumps([daily, doc(STYLED)]),
        json.dumps({"capsule": daily}),
        json.dumps({"capsule": daily, "response": doc(STYLED), "extra": 1}),
        json.dumps({"capsule": daily, "response": 1}),
        '{"capsule": {}, "capsule": {}, "response": ""}',
        _line(daily | {"artifact_key": KEY.upper()}, doc(STYLED)),
        _line({**daily, "slots": []}, doc(STYLED)),
        _line(
            {**daily, "surface": "daily.v1", "slots": [json.loads(locked.model_dump_json())]},
            doc(STYLED),
        ),
        _line(daily, doc(STYLED, BARE)),
    ]
    path = tmp_path / "cases.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\n")
    code, out, err = _run("--jsonl", path)
    assert code == 2
    reasons = [json.loads(x) for x in out.splitlines()]
    assert reasons == [
        {"verdict": "accepted", "reason": None},
        *[{"verdict": None, "reason": "invalid_line"}] * 7,
        *[{"verdict": None, "reason": "invalid_capsule"}] * 3,
        {"verdict": "validation_rejected", "reason": "no_style_lexeme"},
        {"verdict": None, "reason": "invalid_line"},
    ]
    assert "line 9: invalid_capsule (malformed_artifact_key)" in err
    assert "line 10: invalid_capsule (no_slots)" in err
    assert "line 11: invalid_capsule (slot_unstyleable)" in err
    assert out.count("\n") == len(lines) + 1


def test_jsonl_missing_file(tmp_path: Path) -> None:
    assert _run("--jsonl", tmp_path / "nope.jsonl") == (
        2,
        "",
        f"kexpr contract check: --jsonl {tmp_path / 'nope.jsonl'}: "
        "no such file or directory (missing)\n",
    )


def test_jsonl_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    # Nothing to judge is unusable input, not a silent success.
    assert _run("--jsonl", path) == (
        2,
        "",
        f"kexpr contract check: --jsonl {path}: an empty file (empty)\n",
    )


def test_cli_entry_for_ops_cli(
    tmp_path: Path, capsule_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kexpr.ops.contract_cli import cli

    response_file = _response_file(tmp_path, doc(STYLED))
    assert cli(["check", "--capsule", str(capsule_file), "--response", str(response_file)]) == 0
    assert capsys.readouterr().out == '{"reason":null,"verdict":"accepted"}\n'
    assert cli([]) == 2
    assert cli(["verify"]) == 2
    assert capsys.readouterr().err.startswith("usage: kexpr contract check")

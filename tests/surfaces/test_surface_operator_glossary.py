"""The operator's dual glossary file: every rule, every rejection with its enum,
the file checks of a data-root file, and the digest."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from adaptive_support import OPERATOR_FILE
from hypothesis import given
from hypothesis import strategies as st

from gateway_shim.operator_glossary import (
    GLOSSARY_FILE_NAME,
    SHIPPED_DUAL_GLOSSARY,
    DualGlossary,
    GlossaryError,
    GlossaryProblem,
    audit_text,
    glossary_for_data_root,
    load_operator_glossary,
    parse_operator_glossary,
)

P = GlossaryProblem


def encode(document: Any) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def with_entries(**changes: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(OPERATOR_FILE))
    doc.update(changes)
    return doc


def test_valid_file_adds_to_the_shipped_texts() -> None:
    g = parse_operator_glossary(encode(OPERATOR_FILE))
    assert g.operator and not SHIPPED_DUAL_GLOSSARY.operator
    assert set(SHIPPED_DUAL_GLOSSARY.entries) < set(g.entries)
    assert (
        g.reasons["P_DUAL_REASON_COOLDOWN"] == "직전 조정 이후 대기 기간입니다"
    )  # stored without "."
    assert g.reason_id("직전 조정 이후 대기 기간입니다.") == "P_DUAL_REASON_COOLDOWN"
    assert g.reason_id("직전 조정 이후 대기 기간입니다") is None
    assert g.decision_id("현재 목표 섭취량 유지") == "P_DUAL_DECISION_KEEP_TARGET"
    assert g.ids() == tuple(sorted(g.entries))
    assert len(g.digest()) == 64 and g.digest() != SHIPPED_DUAL_GLOSSARY.digest()
    # The digest is a function of the entries, not of the file's bytes.
    reordered = {
        "reasons": OPERATOR_FILE["reasons"],
        "decisions": OPERATOR_FILE["decisions"],
        "version": OPERATOR_FILE["version"],
    }
    assert parse_operator_glossary(encode(reordered)).digest() == g.digest()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\xff", P.NOT_UTF8),
        (b"{", P.NOT_JSON),
        (b"[]", P.NOT_OBJECT),
        (
            b'{"version": "kexpr-dual-glossary-v1", "version": "x", "decisions": {}, "reasons": {}}',
            P.DUPLICATE_KEY,
        ),
        (encode({"version": "kexpr-dual-glossary-v1", "decisions": {}}), P.WRONG_KEYS),
        (encode(with_entries(version="v2")), P.WRONG_VERSION),
        (encode(with_entries(decisions=[])), P.NOT_OBJECT),
        (encode(with_entries(decisions={"P_DUAL_REASON_X": "가나"})), P.ID_MALFORMED),
        (encode(with_entries(decisions={"P_DUAL_DECISION_lower": "가나"})), P.ID_NOT_UPPER_WORDS),
        # IDs are generic types, never fields: each rule of the grammar by name.
        (
            encode(with_entries(decisions={"P_DUAL_DECISION_KIM_MINJI_01012345678": "가나"})),
            P.ID_DIGIT,
        ),
        (encode(with_entries(reasons={"P_DUAL_REASON_DAY2": "가나."})), P.ID_DIGIT),
        (encode(with_entries(decisions={"P_DUAL_DECISION_" + "A" * 4000: "가나"})), P.ID_TOO_LONG),
        (
            encode(with_entries(decisions={"P_DUAL_DECISION_" + "_".join(["ABCD"] * 7): "가나"})),
            P.ID_TOO_LONG,
        ),
        (encode(with_entries(reasons={"P_DUAL_REASON_A__B": "가나."})), P.ID_NOT_UPPER_WORDS),
        (encode(with_entries(reasons={"P_DUAL_REASON_AB_": "가나."})), P.ID_NOT_UPPER_WORDS),
        (encode(with_entries(reasons={"P_DUAL_REASON_": "가나."})), P.ID_NOT_UPPER_WORDS),
        (encode(with_entries(reasons={"P_DUAL_REASON_KIM-MINJI": "가나."})), P.ID_NOT_UPPER_WORDS),
        (
            encode(with_entries(reasons={"P_DUAL_REASON_ABCDEFGHIJKLM": "가나."})),
            P.ID_WORD_TOO_LONG,
        ),
        (
            encode(
                with_entries(
                    reasons={"P_DUAL_REASON_X": "가나다."},
                    decisions={
                        "P_DUAL_DECISION_ADHERENCE_CONFLICT_HOLD": "가나"
                    },  # retired: reserved
                )
            ),
            P.ID_DUPLICATE,
        ),
        (encode(with_entries(decisions={"P_DUAL_DECISION_X": 1})), P.TEXT_NOT_STRING),
        (encode(with_entries(decisions={"P_DUAL_DECISION_X": "가나."})), P.TEXT_FINAL_PERIOD),
        (encode(with_entries(reasons={"P_DUAL_REASON_X": "가나"})), P.TEXT_FINAL_PERIOD),
        (encode(with_entries(decisions={"P_DUAL_DECISION_X": "\u1100\u1161"})), P.TEXT_NOT_NFC),
        (
            encode(with_entries(decisions={"P_DUAL_DECISION_X": "칼로리 2500"})),
            P.TEXT_FORBIDDEN_CHARACTER,
        ),
        (
            encode(with_entries(decisions={"P_DUAL_DECISION_X": "칼로리 kcal"})),
            P.TEXT_FORBIDDEN_CHARACTER,
        ),
        (
            encode(with_entries(decisions={"P_DUAL_DECISION_X": "가나\n다라"})),
            P.TEXT_FORBIDDEN_CHARACTER,
        ),
        (
            encode(with_entries(decisions={"P_DUAL_DECISION_X": "[[P:01]]"})),
            P.TEXT_FORBIDDEN_CHARACTER,
        ),
        (
            encode(with_entries(decisions={"P_DUAL_DECISION_X": "가나,  다라"})),
            P.TEXT_FORBIDDEN_CHARACTER,
        ),
        (
            encode(with_entries(reasons={"P_DUAL_REASON_X": "가나. 다라."})),
            P.TEXT_FORBIDDEN_CHARACTER,
        ),
        (encode(with_entries(decisions={"P_DUAL_DECISION_X": "가" * 121})), P.TEXT_TOO_LONG),
        (encode(with_entries(decisions={"P_DUAL_DECISION_X": "차분히"})), P.TEXT_ONLY_STYLE_WORDS),
        (
            encode(with_entries(decisions={"P_DUAL_DECISION_X": "순응도 근거 충돌로 조정 보류"})),
            P.TEXT_DUPLICATE,
        ),
        (
            encode(
                with_entries(decisions={f"P_DUAL_DECISION_X{i}": "가" * (i + 1) for i in range(65)})
            ),
            P.TOO_MANY_ENTRIES,
        ),
        (b" " * (64 * 1024 + 1), P.TOO_LARGE),
    ],
    ids=lambda v: v.value if isinstance(v, P) else "",
)
def test_invalid_files_are_refused_with_their_problem(
    data: bytes, problem: GlossaryProblem
) -> None:
    with pytest.raises(GlossaryError) as e:
        parse_operator_glossary(data)
    assert e.value.problem is problem
    assert str(e.value) == problem.value  # the enum, never content


def _distinct_texts(n: int) -> list[str]:
    """n distinct audited texts (two Hangul syllables each)."""
    return [chr(0xAC00 + 2 * i) + chr(0xAC01 + 2 * i) for i in range(n)]


def test_a_file_may_hold_64_decisions_and_64_reasons_besides_the_shipped_texts() -> None:
    """Rule 3's "at most 64 of each" is the file's own entries: the shipped public
    texts do not eat into the operator's budget (one boundary, in both checks)."""
    texts = _distinct_texts(128)
    names = [f"X_{chr(65 + i // 26)}{chr(65 + i % 26)}" for i in range(64)]
    decisions = {f"P_DUAL_DECISION_{n}": texts[i] for i, n in enumerate(names)}
    reasons = {f"P_DUAL_REASON_{n}": texts[64 + i] + "." for i, n in enumerate(names)}
    g = parse_operator_glossary(encode(with_entries(decisions=decisions, reasons=reasons)))
    assert len(g.decisions) == 64 + len(SHIPPED_DUAL_GLOSSARY.decisions)
    assert len(g.reasons) == 64 + len(SHIPPED_DUAL_GLOSSARY.reasons)
    for family in ("decisions", "reasons"):
        over = {"decisions": dict(decisions), "reasons": dict(reasons)}
        prefix = "P_DUAL_DECISION_" if family == "decisions" else "P_DUAL_REASON_"
        over[family][prefix + "EXTRA"] = "추가 항목" + ("." if family == "reasons" else "")
        with pytest.raises(GlossaryError) as e:
            parse_operator_glossary(encode(with_entries(**over)))
        assert e.value.problem is P.TOO_MANY_ENTRIES
    # The same boundary when a glossary is built directly (shipped + 64, not more).
    merged = {**SHIPPED_DUAL_GLOSSARY.decisions, **decisions}
    assert len(DualGlossary(decisions=merged, reasons={}).decisions) == len(merged)
    with pytest.raises(GlossaryError) as e:
        DualGlossary(decisions={**merged, "P_DUAL_DECISION_EXTRA": "추가 항목"}, reasons={})
    assert e.value.problem is P.TOO_MANY_ENTRIES


def test_audit_allows_the_hosts_middle_dot() -> None:
    assert audit_text("같은 날짜의 수정 전·후 기록이 함께 감지되어 확인이 필요합니다") is None
    assert audit_text("·가나") is GlossaryProblem.TEXT_FORBIDDEN_CHARACTER


def _install(root: Path, data: bytes, mode: int = 0o600) -> Path:
    root.mkdir(mode=0o700, exist_ok=True)
    path = root / GLOSSARY_FILE_NAME
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_data_root_file_is_loaded(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert glossary_for_data_root(root) is SHIPPED_DUAL_GLOSSARY  # no root, no file: shipped
    root.mkdir(mode=0o700)
    assert glossary_for_data_root(root) is SHIPPED_DUAL_GLOSSARY
    _install(root, encode(OPERATOR_FILE))
    assert glossary_for_data_root(root).operator


def test_data_root_file_symlink_and_mode_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path = _install(root, encode(OPERATOR_FILE), mode=0o644)
    with pytest.raises(GlossaryError) as e:
        glossary_for_data_root(root)
    assert e.value.problem is P.UNSAFE_FILE
    path.unlink()
    real = tmp_path / "elsewhere.json"
    real.write_bytes(encode(OPERATOR_FILE))
    real.chmod(0o600)
    os.symlink(real, path)
    with pytest.raises(GlossaryError) as e:
        glossary_for_data_root(root)
    assert e.value.problem is P.UNSAFE_FILE
    with pytest.raises(GlossaryError) as e:
        load_operator_glossary(path)
    assert e.value.problem is P.UNSAFE_FILE


def test_load_any_file(tmp_path: Path) -> None:
    draft = tmp_path / "draft.json"
    draft.write_bytes(encode(OPERATOR_FILE))
    draft.chmod(0o644)  # an operator's draft: any owner and mode, never a symlink
    assert load_operator_glossary(draft).operator
    with pytest.raises(GlossaryError) as e:
        load_operator_glossary(tmp_path / "absent.json")
    assert e.value.problem is P.MISSING
    with pytest.raises(GlossaryError) as e:
        load_operator_glossary(tmp_path)
    assert e.value.problem in (P.UNSAFE_FILE, P.UNREADABLE)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (64 * 1024 + 1))
    with pytest.raises(GlossaryError) as e:
        load_operator_glossary(big)
    assert e.value.problem is P.TOO_LARGE


def test_invalid_data_root_file_raises(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _install(root, b"{")
    with pytest.raises(GlossaryError) as e:
        glossary_for_data_root(root)
    assert e.value.problem is P.NOT_JSON


def test_a_path_the_kernel_cannot_open_or_read_is_unreadable(tmp_path: Path) -> None:
    """The two OSError paths of `load_operator_glossary` (open, then read) and the
    one of `glossary_for_data_root`: ``UNREADABLE``, never a crash or content."""
    too_long = tmp_path / ("a" * 300)  # ENAMETOOLONG, as root and as a user
    with pytest.raises(GlossaryError) as e:
        load_operator_glossary(too_long)
    assert e.value.problem is P.UNREADABLE
    with pytest.raises(GlossaryError) as e:
        glossary_for_data_root(too_long)
    assert e.value.problem is P.UNREADABLE
    # A regular file whose read fails (EIO at offset 0): the caller's own memory file.
    with pytest.raises(GlossaryError) as e:
        load_operator_glossary("/proc/self/mem")
    assert e.value.problem is P.UNREADABLE


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_0129a-", min_size=0, max_size=60))
def test_the_glossary_grammar_is_the_capsules(rest: str) -> None:
    """An ID the glossary accepts is exactly one the capsule accepts (manifest
    Rule 6): the operator learns every refusal at ``glossary check``, never at
    the worker."""
    from gateway_shim.operator_glossary import id_problem
    from kexpr.spool.contract.manifest import MANIFEST

    for prefix, row in (
        ("P_DUAL_DECISION_", MANIFEST["adaptive.dual.judgment"]),
        ("P_DUAL_REASON_", MANIFEST["adaptive.dual.review.N"]),
    ):
        semantic_id = prefix + rest
        assert (id_problem(semantic_id, prefix) is None) == (
            row.open_branch([semantic_id]) is not None
        )

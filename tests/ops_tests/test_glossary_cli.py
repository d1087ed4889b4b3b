"""`kexpr glossary check | install` and the glossary line of `kexpr status`:
digests, counts and enum problems only — never a text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ops_support import kexpr

from gateway_shim.operator_glossary import SHIPPED_DUAL_GLOSSARY, glossary_for_data_root
from kexpr.ops.status_cli import collect, render
from kexpr.spool.layout import DataRoot

GLOSSARY = {
    "version": "kexpr-dual-glossary-v1",
    "decisions": {"P_DUAL_DECISION_KEEP_TARGET": "현재 목표 섭취량 유지"},
    "reasons": {"P_DUAL_REASON_TREND_SHORT": "체중 추세를 판단할 기간이 짧습니다."},
}


def _file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "glossary.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path


def test_check_valid_file(tmp_path: Path) -> None:
    done = kexpr("glossary", "check", _file(tmp_path, GLOSSARY))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    # Each ID's price (the budget module's bound) and, per number of review
    # reasons, the costliest card. The fit table locks every line of a dual card
    # (design §6.1, §6.2: the readers preferred the host's text): no card is ever
    # asked, so each is nothing_to_style, with no bound, and fits (nothing is sent).
    # The tests below hold the prices of a table that asks review lines again.
    from gateway_shim.surfaces.dual import MAX_REVIEW_REASONS
    from kexpr.spool.contract.budget import id_token_bound

    ids = ["P_DUAL_DECISION_HOLD", "P_DUAL_DECISION_KEEP_TARGET", "P_DUAL_REASON_EDIT"]
    ids += ["P_DUAL_REASON_LATEST", "P_DUAL_REASON_TREND_SHORT"]
    by_cost = ["P_DUAL_REASON_TREND_SHORT", "P_DUAL_REASON_LATEST", "P_DUAL_REASON_EDIT"]
    assert [id_token_bound(i) for i in by_cost] == [13, 6, 5]
    cards = [
        {"reasons": n, "nothing_to_style": True, "bound": None, "fits": True}
        for n in range(MAX_REVIEW_REASONS + 1)
    ]
    style_words: dict[str, dict[str, list[str]]] = {
        "adaptive.dual.judgment": {i: [] for i in ids[:2]},
        "adaptive.dual.review.1": {i: [] for i in ids[2:]},
        "adaptive.dual.review.N (N > 1)": {i: [] for i in ids[2:]},
    }
    assert out == {
        "valid": True,
        "problem": None,
        "decisions": 2,
        "reasons": 3,
        # The shipped entries and the file's own, apart.
        "shipped_decisions": len(SHIPPED_DUAL_GLOSSARY.decisions),
        "shipped_reasons": len(SHIPPED_DUAL_GLOSSARY.reasons),
        "operator_decisions": 1,
        "operator_reasons": 1,
        "digest": out["digest"],
        "id_tokens": {i: id_token_bound(i) for i in ids},
        "dual_cards": cards,
        "answer_budget_tokens": 297,
        "style_words": style_words,
    }
    assert out["shipped_decisions"] + out["operator_decisions"] == out["decisions"]
    assert out["shipped_reasons"] + out["operator_reasons"] == out["reasons"]
    assert out["id_tokens"]["P_DUAL_REASON_EDIT"] == 5
    assert len(out["digest"]) == 64 and out["digest"] != SHIPPED_DUAL_GLOSSARY.digest()
    assert "현재 목표" not in done.stdout and "체중" not in done.stdout  # never a text


def test_check_invalid_file_says_the_problem_only(tmp_path: Path) -> None:
    bad = {**GLOSSARY, "decisions": {"P_DUAL_DECISION_X": "칼로리 2500kcal 유지"}}
    done = kexpr("glossary", "check", _file(tmp_path, bad))
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"valid": False, "problem": "text_forbidden_character"}
    assert "2500" not in done.stdout + done.stderr
    missing = kexpr("glossary", "check", tmp_path / "absent.json")
    assert missing.returncode == 2
    assert json.loads(missing.stdout) == {"valid": False, "problem": "file_missing"}


def test_install_publishes_into_the_data_root_and_status_shows_the_digest(
    tmp_path: Path, data_root: Path
) -> None:
    root = DataRoot(data_root)
    root.ensure()
    assert render(collect(root)).count(f"glossary    shipped {SHIPPED_DUAL_GLOSSARY.digest()}") == 1
    source = _file(tmp_path, GLOSSARY)
    done = kexpr("glossary", "install", source, "--data-root", data_root)
    assert done.returncode == 0, done.stderr
    digest = json.loads(done.stdout)["digest"]
    installed = data_root / "operator-glossary.json"
    assert installed.stat().st_mode & 0o777 == 0o600
    assert glossary_for_data_root(data_root).digest() == digest
    assert collect(root).glossary == f"operator {digest}"
    # Never silently replaced; --replace does.
    again = kexpr("glossary", "install", source, "--data-root", data_root)
    assert again.returncode == 1 and json.loads(again.stdout)["problem"] == "already_installed"
    assert (
        kexpr("glossary", "install", source, "--data-root", data_root, "--replace").returncode == 0
    )
    installed.unlink()
    installed.write_text("{", encoding="utf-8")
    installed.chmod(0o600)
    assert collect(root).glossary == "invalid not_json"
    status = kexpr("status", "--data-root", data_root, "--json")
    assert json.loads(status.stdout)["glossary"] == "invalid not_json"


def test_audit_knows_the_installed_glossary(tmp_path: Path, data_root: Path) -> None:
    from kexpr.ops.audit import AuditFinding, audit_data_root

    root = DataRoot(data_root)
    root.ensure()
    assert (
        kexpr("glossary", "install", _file(tmp_path, GLOSSARY), "--data-root", data_root).returncode
        == 0
    )
    findings = [item.finding for item in audit_data_root(data_root).findings]
    assert AuditFinding.UNEXPECTED_FILE not in findings
    (data_root / "other.json").write_text("{}")
    findings = [item.finding for item in audit_data_root(data_root).findings]
    assert AuditFinding.UNEXPECTED_FILE in findings


# ------------------------------------------- IDs are generic types, not fields


def _glossary_with(decisions: dict[str, str] | None = None, reasons: dict[str, str] | None = None):
    return {
        "version": "kexpr-dual-glossary-v1",
        "decisions": decisions or {},
        "reasons": reasons or {},
    }


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        # The ID: a name and a phone number, which would go to the model.
        (
            _glossary_with({"P_DUAL_DECISION_KIM_MINJI_01012345678": "현재 목표 섭취량 유지"}),
            "id_digit",
        ),
        # 4,000 characters: every dual card would have gone ineligible, silently.
        (_glossary_with({"P_DUAL_DECISION_" + "A" * 4000: "현재 목표 섭취량 유지"}), "id_too_long"),
        (_glossary_with(reasons={"P_DUAL_REASON_Trend": "짧습니다."}), "id_not_upper_words"),
        (_glossary_with(reasons={"P_DUAL_REASON_ABCDEFGHIJKLM": "짧습니다."}), "id_word_too_long"),
    ],
    ids=["digits", "4000_chars", "lower_case", "long_word"],
)
@pytest.mark.parametrize("command", ["check", "install"])
def test_an_id_outside_the_grammar_is_refused_with_one_line_naming_the_rule(
    tmp_path: Path, data_root: Path, document: dict[str, object], problem: str, command: str
) -> None:
    DataRoot(data_root).ensure()
    source = _file(tmp_path, document)
    extra = ["--data-root", str(data_root)] if command == "install" else []
    done = kexpr("glossary", command, source, *extra)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"valid": False, "problem": problem}
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"kexpr glossary {command}: FILE {source}: ")
    assert line.endswith(f" ({problem})")
    assert "KIM" not in done.stdout + done.stderr and "0101" not in done.stdout + done.stderr
    assert not (data_root / "operator-glossary.json").exists()


def _table_asking_review_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fit table that asks the review lines after the first again (two words
    before each reason there, as before the readers' verdicts): what the budget
    check guards against if the table ever opens a dual line."""
    from types import MappingProxyType

    from kexpr.spool.contract import fit

    later = frozenset({fit.Style("그리고", comma=False), fit.Style("다만", comma=True)})
    reason = MappingProxyType({fit.Position.FIRST: frozenset(), fit.Position.LATER: later})
    shipped = {i: reason for i in fit.FIT if i.startswith("P_DUAL_REASON_")}
    monkeypatch.setattr(fit, "FIT", MappingProxyType({**fit.FIT, **shipped}))
    monkeypatch.setattr(
        fit,
        "OPEN_FAMILY_FIT",
        MappingProxyType({**fit.OPEN_FAMILY_FIT, fit.DUAL_REASON_ID_PATTERN: reason}),
    )


def test_a_table_that_asks_review_lines_prices_the_costliest_cards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prices are the budget's own for what is asked: with review lines 2..n
    asked, the costliest card puts the dearest IDs there; a card of 0 or 1 reason
    has nothing to style; the first card over the budget ends the list."""
    from kexpr.ops import glossary_cli
    from kexpr.spool.contract import slot_policy
    from kexpr.spool.contract.budget import slots_token_bound

    _table_asking_review_lines(monkeypatch)
    assert glossary_cli.cli(["check", str(_file(tmp_path, GLOSSARY))]) == 0
    out = json.loads(capsys.readouterr().out)
    by_cost = ["P_DUAL_REASON_TREND_SHORT", "P_DUAL_REASON_LATEST", "P_DUAL_REASON_EDIT"]

    def card(n: int) -> dict[str, object]:
        if n < 2:
            return {"reasons": n, "nothing_to_style": True, "bound": None, "fits": True}
        asked = [by_cost[k] if k < 3 else by_cost[0] for k in range(n - 1)]
        bound = slots_token_bound(
            "adaptive.dualcoachtest.card.v1",
            tuple(slot_policy(f"adaptive.dual.review.{k + 2}", (r,)) for k, r in enumerate(asked)),
        )
        assert bound is not None
        return {"reasons": n, "nothing_to_style": False, "bound": bound, "fits": bound <= 297}

    cards = [card(n) for n in range(7)]
    assert [c["fits"] for c in cards] == [True] * 6 + [False]
    assert out["dual_cards"] == cards
    assert [c["bound"] for c in cards[2:4]] == [114, 160]  # TREND_SHORT on line 2
    assert out["style_words"]["adaptive.dual.review.N (N > 1)"] == {
        i: ["그리고", "다만,"] for i in sorted(by_cost)
    }


def test_ids_that_would_make_small_cards_ineligible_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grammar's length keeps a card of its decision and two reasons within
    the budget (tests/contract/test_budget.py); the command checks the budget
    itself too, so a budget that moved could not let such a glossary through. A
    smaller budget stands in for one that moved: the same file is then refused,
    not merely reported ``"fits": false``. With the table as it is no dual line is
    asked, so no budget refuses it (nothing is sent); with a table that asks review
    lines again, the check refuses."""
    from kexpr.ops import glossary_cli
    from kexpr.spool.contract import budget

    source = _file(tmp_path, GLOSSARY)
    monkeypatch.setattr(budget, "ANSWER_BUDGET_TOKENS", 80)
    assert glossary_cli.cli(["check", str(source)]) == 0
    cards = json.loads(capsys.readouterr().out)["dual_cards"]
    assert all(c["nothing_to_style"] and c["bound"] is None for c in cards)
    _table_asking_review_lines(monkeypatch)
    monkeypatch.setattr(budget, "ANSWER_BUDGET_TOKENS", 297)
    assert glossary_cli.cli(["check", str(source)]) == 0
    capsys.readouterr()
    # Only review line 2 of a two-reason card is asked: ~110 tokens.
    monkeypatch.setattr(budget, "ANSWER_BUDGET_TOKENS", 80)
    assert glossary_cli.cli(["check", str(source)]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"valid": False, "problem": "id_over_budget"}
    assert err.endswith("(id_over_budget)\n") and err.count("\n") == 1


# ------------------------------------------- install writes what the gateway reads


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid)
    for sub in path.rglob("*"):
        os.chown(sub, uid, gid, follow_symlinks=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a data root another user owns needs root")
@pytest.mark.parametrize("sharing", ["private", "shared_group"])
def test_root_installs_as_the_data_roots_gateway_user(tmp_path: Path, sharing: str) -> None:
    """Run as root on a data root its gateway (another user) owns: the file is
    that user's, in the root's mode, and reads as the gateway reads it. Before,
    a shared-group root got a root-owned 0660 file the gateway refused
    (``wrong_owner``): every dual card silently canonical, ``status`` all well."""
    from kexpr.ops._gateway_view import gateway_user, read_as_gateway

    gateway, group = 65534, 65534
    parent = tmp_path / "pub"
    parent.mkdir(mode=0o755)
    parent.chmod(0o755)
    root = DataRoot(parent / "root")
    if sharing == "shared_group":
        root.root.mkdir(mode=0o700)
        os.chown(root.root, gateway, group)
        root.root.chmod(0o2770)
    root.ensure()
    _chown_tree(root.root, gateway, group)
    done = kexpr("glossary", "install", _file(tmp_path, GLOSSARY), "--data-root", root.root)
    assert done.returncode == 0, done.stderr
    installed = root.root / "operator-glossary.json"
    st = installed.stat()
    assert st.st_uid == gateway
    assert st.st_mode & 0o7777 == (0o600 if sharing == "private" else 0o660)
    if sharing == "shared_group":
        assert st.st_gid == group
    user = gateway_user(DataRoot(root.root))
    assert user.uid == gateway
    assert read_as_gateway(DataRoot(root.root), user).digest() == json.loads(done.stdout)["digest"]


def test_another_user_is_refused_with_one_line_and_nothing_left(
    tmp_path: Path,
    data_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A user who is neither the gateway's nor root, on a private root: the
    shim would refuse the file, so install refuses (one line, exit 2)."""
    from kexpr.ops import glossary_cli

    DataRoot(data_root).ensure()
    real = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real + 4242)
    code = glossary_cli.cli(
        ["install", str(_file(tmp_path, GLOSSARY)), "--data-root", str(data_root)]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert json.loads(out)["problem"] == "wrong_owner" and json.loads(out)["installed"] is False
    (line,) = err.splitlines()
    assert line.startswith(f"kexpr glossary install: --data-root {data_root}: ")
    assert line.endswith("(wrong_owner)")
    assert not (data_root / "operator-glossary.json").exists()


def test_a_file_the_gateway_cannot_read_back_is_removed_and_refused(
    tmp_path: Path,
    data_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gateway_shim.operator_glossary import GlossaryError, GlossaryProblem
    from kexpr.ops import glossary_cli

    DataRoot(data_root).ensure()
    calls = []
    real = glossary_cli.read_as_gateway

    def read(root: DataRoot, user: object):
        calls.append(1)
        if len(calls) > 1:  # the read-back after the install
            raise GlossaryError(GlossaryProblem.UNSAFE_FILE)
        return real(root, user)  # type: ignore[arg-type]

    monkeypatch.setattr(glossary_cli, "read_as_gateway", read)
    code = glossary_cli.cli(
        ["install", str(_file(tmp_path, GLOSSARY)), "--data-root", str(data_root)]
    )
    out, err = capsys.readouterr()
    assert code == 2 and json.loads(out)["problem"] == "gateway_cannot_read"
    assert err.endswith("(gateway_cannot_read)\n")
    assert not (data_root / "operator-glossary.json").exists()


def test_every_refusal_has_its_words() -> None:
    from gateway_shim.operator_glossary import GlossaryProblem
    from kexpr.ops.glossary_cli import INSTALL_WORDS, WORDS, InstallProblem

    assert set(WORDS) == set(GlossaryProblem)
    assert set(INSTALL_WORDS) == set(InstallProblem)

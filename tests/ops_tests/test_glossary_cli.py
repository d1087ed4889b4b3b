"""`kexpr glossary check | install` and the glossary line of `kexpr status`:
digests, counts and enum problems only — never a text."""

from __future__ import annotations

import json
from pathlib import Path

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
    # reasons, the costliest card's minimal answer against the budget. The fit
    # table locks the decision and the first review line (design §6.1): they are
    # never asked and cost nothing, so the costliest card puts the dearest IDs on
    # lines 2..n, and a card of 0 or 1 reason is not styled at all.
    from kexpr.spool.contract import slot_policy
    from kexpr.spool.contract.budget import id_token_bound, slots_token_bound

    ids = ["P_DUAL_DECISION_HOLD", "P_DUAL_DECISION_KEEP_TARGET", "P_DUAL_REASON_EDIT"]
    ids += ["P_DUAL_REASON_LATEST", "P_DUAL_REASON_TREND_SHORT"]
    by_cost = ["P_DUAL_REASON_TREND_SHORT", "P_DUAL_REASON_LATEST", "P_DUAL_REASON_EDIT"]
    assert [id_token_bound(i) for i in by_cost] == [13, 6, 5]

    def card(n: int) -> dict[str, object]:
        if n < 2:
            return {"reasons": n, "styled": False, "bound": None, "fits": True}
        asked = [by_cost[k] if k < 3 else by_cost[0] for k in range(n - 1)]
        bound = slots_token_bound(
            "adaptive.dualcoachtest.card.v1",
            tuple(slot_policy(f"adaptive.dual.review.{k + 2}", (r,)) for k, r in enumerate(asked)),
        )
        assert bound is not None
        return {"reasons": n, "styled": True, "bound": bound, "fits": bound <= 297}

    cards = [card(n) for n in range(7)]
    assert [c["fits"] for c in cards] == [True] * 6 + [False]
    assert [c["bound"] for c in cards[2:4]] == [114, 160]  # TREND_SHORT on line 2
    style_words = {
        "adaptive.dual.judgment": {i: [] for i in ids[:2]},
        "adaptive.dual.review.1": {i: [] for i in ids[2:]},
        "adaptive.dual.review.N (N > 1)": {i: ["그리고"] for i in ids[2:]},
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

"""`kexpr preflight` and `kexpr migrate-config` on both profile shapes of the plan
(physique-coach: `physique_checkin.enabled: true`; dualcoachtest), the shim's strict
block rules, fail-closed refusals, and byte-exact layout preservation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ops_support import CLEAN_ENV, kexpr

from gateway_shim.config import exact_block
from kexpr.ops.preflight import Diagnostic, plan_migration, preflight_text

FIXTURES = Path(__file__).parent / "fixtures"
PROFILES = ("physique-coach", "dualcoachtest")
LEGACY = "legacy_coaching_feedback_enabled"
SECRET = "7734921:AAF-fixture-bot-token-not-real"


@pytest.fixture(params=PROFILES)
def profile(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    name = request.param
    path = tmp_path / name / "config.yaml"
    path.parent.mkdir()
    shutil.copy(FIXTURES / f"{name}.config.yaml", path)
    os.chmod(path, 0o640)
    return name, path


def _provider(**changes: object) -> dict[str, object]:
    """The exact block's provider mapping with ``changes``."""
    provider = exact_block()["provider"]
    assert isinstance(provider, dict)
    return {**provider, **changes}


def block_yaml(indent: str = "      ", **overrides: object) -> str:
    block = exact_block()
    block.update(overrides)
    return f"{indent}korean_expression_postprocessor: {json.dumps(block)}\n"  # flow JSON is YAML


def config_with(block_line: str = "", *, legacy: str | None = None, extra_keys: str = "") -> str:
    """A small host config; ``block_line`` goes under the extras."""
    legacy_line = f"        coaching_feedback_enabled: {legacy}\n" if legacy is not None else ""
    return (
        "platforms:\n"
        "  telegram:\n"
        f"    token: {SECRET}\n"
        "    extra:\n"
        "      physique_checkin:\n"
        "        enabled: true\n"
        f"{legacy_line}"
        f"{block_line}{extra_keys}"
    )


# ------------------------------------------------------------------ preflight


def test_preflight_fails_both_legacy_profiles_naming_the_key(profile: tuple[str, Path]) -> None:
    name, path = profile
    out = kexpr("preflight", path)
    assert out.returncode == 1
    assert (
        f"FAIL {LEGACY} at platforms.telegram.extra.physique_checkin.coaching_feedback_enabled"
        in out.stdout
    )
    report = json.loads(kexpr("preflight", path, "--json").stdout)
    (result,) = report["results"]
    assert result["verdict"] == "fail"
    assert [p["diagnostic"] for p in result["problems"]] == [LEGACY]
    assert result["physique_checkin_enabled"] == ("true" if name == "physique-coach" else "absent")


@pytest.mark.parametrize("value", ["true", "false"])
def test_the_legacy_key_fails_whatever_its_value(value: str) -> None:
    result = preflight_text(config_with(legacy=value))
    assert [p.diagnostic for p in result.problems] == [Diagnostic.LEGACY_COACHING_FEEDBACK_ENABLED]


def test_the_legacy_key_is_found_outside_the_extra_path_too() -> None:
    text = "profiles:\n  - physique_checkin: {coaching_feedback_enabled: false}\n" + config_with()
    assert problem_texts(preflight_text(text)) == [
        "legacy_coaching_feedback_enabled at profiles.0.physique_checkin.coaching_feedback_enabled"
    ]


def problem_texts(result: object) -> list[str]:
    return [p.text() for p in result.problems]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("block", "verdict", "detail"),
    [
        ("", "pass", None),  # absent: disabled
        (block_yaml(), "pass", None),  # exact, disabled
        (
            block_yaml(
                mode="shadow", surfaces={"daily": True, "weekly": False, "adaptive_operator": False}
            ),
            "pass",
            None,
        ),
        (block_yaml(mode="enabled"), "pass", None),
        (block_yaml(api_key="sk-in-config-000000"), "fail", "unknown_key"),
        (block_yaml(base_url="https://proxy.invalid/v1"), "fail", "unknown_key"),
        (block_yaml(timeout_seconds=5), "fail", "timeout_seconds"),
        (block_yaml(timeout_seconds=3.0), "fail", "timeout_seconds"),
        (block_yaml(schema_version="korean-expression-v3"), "fail", "schema_version"),
        (block_yaml(mode="on"), "fail", "mode"),
        (
            block_yaml(surfaces={"daily": "yes", "weekly": False, "adaptive_operator": False}),
            "fail",
            "surfaces",
        ),
        (
            block_yaml(provider=_provider(model="gpt-4o")),
            "fail",
            "provider_disallowed",
        ),
        (
            block_yaml(provider=_provider(endpoint="https://api.openai.com/v1/")),
            "fail",
            "provider_disallowed",
        ),
    ],
)
def test_the_block_is_judged_by_the_shims_own_parser(
    block: str, verdict: str, detail: str | None
) -> None:
    result = preflight_text(config_with(block))
    assert ("pass" if result.passed else "fail") == verdict
    if detail is not None:
        (problem,) = result.problems
        assert problem.diagnostic is Diagnostic.POSTPROCESSOR_INVALID and problem.detail == detail
        assert problem.where == "platforms.telegram.extra.korean_expression_postprocessor"


def test_shadow_block_is_reported_as_intentional() -> None:
    result = preflight_text(
        config_with(
            block_yaml(
                mode="shadow", surfaces={"daily": True, "weekly": False, "adaptive_operator": False}
            )
        )
    )
    assert result.postprocessor == {
        "block": "exact",
        "mode": "shadow",
        "surfaces": {"daily": True, "weekly": False, "adaptive_operator": False},
    }


def test_misplaced_block_fails() -> None:
    text = block_yaml(indent="") + config_with()
    assert problem_texts(preflight_text(text)) == [
        "postprocessor_misplaced at korean_expression_postprocessor"
    ]


@pytest.mark.parametrize(
    "text",
    [
        "platforms: [unclosed\n",
        "platforms:\n  telegram: {}\nplatforms: {}\n",  # duplicate key
        "a: !!python/object:os.system x\n",
        "a: 1\n---\nb: 2\n",
    ],
)
def test_yaml_errors_fail(text: str) -> None:
    (problem,) = preflight_text(text).problems
    assert problem.diagnostic is Diagnostic.YAML_ERROR and problem.where.startswith("line ")


def test_extra_path(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("adapters:\n  tg:\n    physique_checkin: {enabled: true}\n")
    assert kexpr("preflight", path).returncode == 1  # the default path is missing
    assert "extra_path_missing at platforms.telegram.extra" in kexpr("preflight", path).stdout
    assert kexpr("preflight", path, "--extra-path", "adapters.tg").returncode == 0


def test_preflight_output_holds_no_config_values(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(config_with(block_yaml(api_key="sk-in-config-000000"), legacy="true"))
    for args in ((), ("--json",)):
        out = kexpr("preflight", path, *args)
        assert out.returncode == 1
        assert SECRET not in out.stdout and "sk-in-config" not in out.stdout


def test_unreadable_inputs_exit_2(tmp_path: Path) -> None:
    assert kexpr("preflight", tmp_path / "missing.yaml").returncode == 2
    target = tmp_path / "real.yaml"
    target.write_text(config_with())
    (tmp_path / "link.yaml").symlink_to(target)
    assert kexpr("preflight", tmp_path / "link.yaml").returncode == 2
    assert kexpr("migrate-config", tmp_path / "link.yaml", "--write").returncode == 2


# ------------------------------------------------------------------ migration


def test_dry_run_writes_nothing(profile: tuple[str, Path]) -> None:
    _, path = profile
    before = path.read_bytes()
    out = kexpr("migrate-config", path)
    assert out.returncode == 0
    assert "would migrate (dry run" in out.stdout
    assert "- line" in out.stdout and "+ line" in out.stdout
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.yaml"]


def test_write_migrates_byte_exactly_with_a_backup_and_then_passes_preflight(
    profile: tuple[str, Path],
) -> None:
    name, path = profile
    original = path.read_bytes()
    out = kexpr("migrate-config", path, "--write")
    assert out.returncode == 0, out.stdout
    # Byte-exact golden: the legacy line out, the block in; every other byte kept.
    assert path.read_bytes() == (FIXTURES / f"{name}.migrated.yaml").read_bytes()
    (backup,) = [p for p in path.parent.iterdir() if p.name.startswith("config.yaml.kexpr-backup-")]
    assert backup.read_bytes() == original
    assert os.stat(path).st_mode & 0o7777 == 0o640 == os.stat(backup).st_mode & 0o7777
    # Every original line except the legacy one is still there, in order (comments included).
    old = [ln for ln in original.decode().splitlines() if "coaching_feedback_enabled" not in ln]
    new = path.read_text().splitlines()
    it = iter(new)
    assert all(any(ln == n for n in it) for ln in old)
    # The gate now passes; the check-in keeps its runtime shape.
    pre = json.loads(kexpr("preflight", path, "--json").stdout)["results"][0]
    assert pre["verdict"] == "pass"
    assert pre["postprocessor"]["block"] == "exact" and pre["postprocessor"]["mode"] == "disabled"
    assert pre["physique_checkin_enabled"] == ("true" if name == "physique-coach" else "absent")
    # Idempotent.
    again = kexpr("migrate-config", path, "--write")
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert len(list(path.parent.iterdir())) == 2


def test_the_migrated_physique_profile_still_enables_the_check_in() -> None:
    """Plan step 1: physique-coach still parses an enabled check-in, the postprocessor
    is disabled and the legacy key is gone — old code reads the absent key as false."""
    from ruamel.yaml import YAML

    data = YAML(typ="safe", pure=True).load((FIXTURES / "physique-coach.migrated.yaml").read_text())
    extra = data["platforms"]["telegram"]["extra"]
    assert extra["physique_checkin"]["enabled"] is True
    assert "coaching_feedback_enabled" not in extra["physique_checkin"]
    assert extra["korean_expression_postprocessor"] == exact_block()


def test_diff_shows_only_the_changed_lines(profile: tuple[str, Path]) -> None:
    _, path = profile
    out = kexpr("migrate-config", path, "--diff")
    changed = [
        ln
        for ln in out.stdout.splitlines()
        if ln[:1] in "+-" and not ln.startswith(("+++", "---", "  "))
    ]
    assert [ln for ln in changed if ln.startswith("-")] == [
        ln
        for ln in ("-" + x for x in path.read_text().splitlines())
        if "coaching_feedback_enabled" in ln
    ]
    assert len([ln for ln in changed if ln.startswith("+")]) == 14


def test_existing_exact_block_is_kept_and_only_the_key_removed() -> None:
    text = config_with(block_yaml(mode="shadow"), legacy="true")
    plan = plan_migration(text)
    assert plan.ok and [c.action for c in plan.changes] == ["remove"]
    assert plan.new_text == text.replace("        coaching_feedback_enabled: true\n", "")


@pytest.mark.parametrize(
    ("text", "diagnostic"),
    [
        (config_with(block_yaml(api_key="sk-x"), legacy="true"), Diagnostic.POSTPROCESSOR_INVALID),
        (
            "platforms: {telegram: {extra: {physique_checkin: {enabled: true, coaching_feedback_enabled: true}}}}\n",
            Diagnostic.NOT_LINE_EDITABLE,
        ),
        (
            "platforms:\n  telegram:\n    extra:\n      physique_checkin:\n        coaching_feedback_enabled: true\n",
            Diagnostic.LEGACY_KEY_SOLE_ENTRY,
        ),
        (
            "platforms:\n  telegram:\n    extra:\n      physique_checkin:\n        enabled: true\n        coaching_feedback_enabled:\n          true\n",
            Diagnostic.NOT_LINE_EDITABLE,
        ),
        ("platforms: [\n", Diagnostic.YAML_ERROR),
        ("other: 1\n", Diagnostic.EXTRA_PATH_MISSING),
    ],
)
def test_migration_refuses_what_it_cannot_prove(
    text: str, diagnostic: Diagnostic, tmp_path: Path
) -> None:
    plan = plan_migration(text)
    assert not plan.ok and plan.new_text is None
    assert diagnostic in [p.diagnostic for p in plan.problems]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    out = kexpr("migrate-config", path, "--write")
    assert out.returncode == 1 and "REFUSED (nothing written)" in out.stdout
    assert path.read_text() == text and len(list(tmp_path.iterdir())) == 1


def test_crlf_and_a_missing_final_newline_are_preserved() -> None:
    text = (
        config_with(legacy="false", extra_keys="      other: 1\n")
        .replace("\n", "\r\n")
        .rstrip("\r\n")
    )
    plan = plan_migration(text)
    assert plan.ok and plan.new_text is not None
    assert "\n" not in plan.new_text.replace("\r\n", "")
    assert plan.new_text.startswith("platforms:\r\n") and plan.new_text.endswith("      other: 1")


def test_migrate_output_holds_no_config_values(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(config_with(legacy="true"))
    for args in ((), ("--json",), ("--write",)):
        out = kexpr("migrate-config", path, *args)
        assert out.returncode == 0 and SECRET not in out.stdout


def test_a_config_changed_under_the_migration_is_not_overwritten(tmp_path: Path) -> None:
    from kexpr.ops.preflight import MigrationRefused, write_migration

    path = tmp_path / "c.yaml"
    path.write_text(config_with(legacy="true"))
    plan = plan_migration(path.read_text())
    assert plan.new_text is not None
    path.write_text(config_with(legacy="false"))
    with pytest.raises(MigrationRefused) as e:
        write_migration(path, config_with(legacy="true").encode(), plan.new_text)
    assert e.value.diagnostic is Diagnostic.CONFIG_CHANGED
    assert len(list(tmp_path.iterdir())) == 1


# ------------------------------------------------------------------ packaging


def test_kexpr_works_without_ruamel_except_for_the_yaml_commands(tmp_path: Path) -> None:
    """The gateway-side install has no ruamel.yaml: every other command still runs,
    and the YAML commands say which extra they need (exit 2)."""
    code = (
        "import sys\n"
        "sys.modules['ruamel'] = None\n"
        "sys.modules['ruamel.yaml'] = None\n"
        "from kexpr.ops.cli import main\n"
        "rc_status = main(['status', '--data-root', sys.argv[1]])\n"
        "rc_pre = main(['preflight', sys.argv[2]])\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('ruamel', 'openai')) and sys.modules[m] is not None)\n"
        "print('RESULT', rc_status, rc_pre, loaded)\n"
    )
    cfg = tmp_path / "c.yaml"
    cfg.write_text("a: 1\n")
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "root"), str(cfg)],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "RESULT 2 2 []" in out.stdout, out.stdout + out.stderr
    assert "kexpr[ops]" in out.stderr


def test_the_gateway_side_install_stays_light() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert [d.split(">")[0].split("=")[0].split("<")[0] for d in project["dependencies"]] == [
        "pydantic",
        "watchdog",
    ]
    extras = project["optional-dependencies"]
    assert any(d.startswith("ruamel.yaml") for d in extras["ops"])
    assert "kexpr[ops]" in extras["test"]


# ------------------------------------------------------------------ as the host loads it

HOST_BLOCK = (
    "      korean_expression_postprocessor:\n"
    "        schema_version: korean-expression-v4\n"
    "        mode: shadow\n"
    "        surfaces: {{daily: {daily}, weekly: false, adaptive_operator: false}}\n"
    "        timeout_seconds: 3\n"
    "        provider:\n"
    "          provider_id: openai-direct\n"
    "          transport: chat_completions\n"
    "          endpoint: https://api.openai.com/v1\n"
    "          model: gpt-4.1-mini\n"
)


def _host_decision(text: str) -> tuple[bool, str, bool]:
    """What the gateway decides: the shim's parser on the host's PyYAML data."""
    import yaml

    from gateway_shim.config import KoreanExpressionConfig

    extra = yaml.safe_load(text)["platforms"]["telegram"]["extra"]
    config = KoreanExpressionConfig.from_extra(extra)
    return config.valid, config.mode.value, config.daily


# Every spelling PyYAML's SafeLoader resolves to a boolean, and ones it does not.
@pytest.mark.parametrize(
    "word",
    ["yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"]
    + ["true", "True", "TRUE", "false", "False", "FALSE", "y", "n", "Y", "N", "1", "0"],
)
def test_preflight_judges_a_value_as_the_hosts_yaml_loader_reads_it(word: str) -> None:
    """Hermes loads config.yaml with PyYAML (YAML 1.1): `daily: yes` is true there,
    and the gateway runs daily; preflight must not say FAIL for it (it did: its
    YAML 1.2 reading made `yes` a string)."""
    text = config_with(HOST_BLOCK.format(daily=word))
    valid, mode, daily = _host_decision(text)
    result = preflight_text(text)
    assert result.passed is valid, (word, result.problems)
    if valid:
        assert result.postprocessor["mode"] == mode == "shadow"
        assert result.postprocessor["surfaces"]["daily"] is daily
    else:
        assert result.postprocessor["block"] == "invalid"


def test_preflight_says_what_the_host_reads_for_a_yaml11_boolean(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(config_with(HOST_BLOCK.format(daily="yes")))
    out = kexpr("preflight", path)
    assert out.returncode == 0, out.stdout
    assert "PyYAML safe_load, YAML 1.1" in out.stdout
    assert "surfaces daily" in out.stdout
    assert (
        "NOTE yaml11_boolean:true at platforms.telegram.extra.korean_expression_postprocessor"
        ".surfaces.daily (the host reads this value as true" in out.stdout
    )
    report = json.loads(kexpr("preflight", path, "--json").stdout)
    assert report["loader"] == "pyyaml-safe_load-yaml-1.1"
    (result,) = report["results"]
    assert result["verdict"] == "pass"
    assert result["notes"] == [
        {
            "diagnostic": "yaml11_boolean",
            "where": "platforms.telegram.extra.korean_expression_postprocessor.surfaces.daily",
            "detail": "true",
        }
    ]
    # A spelled-out true says nothing.
    assert preflight_text(config_with(HOST_BLOCK.format(daily="true"))).notes == []


def test_a_repeated_key_still_fails_though_the_host_would_read_the_last() -> None:
    text = config_with(HOST_BLOCK.format(daily="true")) + "platforms: {}\n"
    (problem,) = preflight_text(text).problems
    assert problem.diagnostic is Diagnostic.YAML_ERROR

"""kexpr.worker.environment: the environment hazards the worker refuses to start with (design §9)."""

from __future__ import annotations

import pytest

from kexpr.worker.environment import EnvHazard, hazardous_environment, key_available

CLEAN = {
    "OPENAI_API_KEY": "sk-test",
    "PATH": "/usr/bin:/bin",
    "HTTPS_PROXY": "http://127.0.0.1:3128",
    "SSL_CERT_FILE": "/etc/kexpr/ca.pem",
}


def test_clean_environment_has_no_findings() -> None:
    assert hazardous_environment(CLEAN) == ()


def test_empty_environment_has_no_findings() -> None:
    assert hazardous_environment({}) == ()


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "OPENAI_LOG",
        "OPENAI_CUSTOM_HEADERS",
        "OPENAI_WEBHOOK_SECRET",
        "OPENAI_API_TYPE",
        "OPENAI_API_VERSION",
        # The rule is the prefix: a variable a future SDK starts reading is refused too.
        "OPENAI_SOMETHING_NEW",
    ],
)
def test_any_openai_variable_but_the_key_is_a_hazard(name: str) -> None:
    assert hazardous_environment({**CLEAN, name: "x"}) == (EnvHazard.OPENAI_VARIABLE,)


def test_presence_not_value_decides() -> None:
    assert hazardous_environment({**CLEAN, "OPENAI_BASE_URL": ""}) == (EnvHazard.OPENAI_VARIABLE,)
    assert hazardous_environment({**CLEAN, "SSLKEYLOGFILE": ""}) == (EnvHazard.SSLKEYLOGFILE,)


def test_sslkeylogfile_is_a_hazard() -> None:
    assert hazardous_environment({**CLEAN, "SSLKEYLOGFILE": "/tmp/keys"}) == (
        EnvHazard.SSLKEYLOGFILE,
    )


def test_findings_are_distinct_enum_members_in_declaration_order() -> None:
    env = {
        "SSLKEYLOGFILE": "/tmp/keys",
        "OPENAI_LOG": "debug",
        "OPENAI_ORG_ID": "org-secret-value",
        **CLEAN,
    }
    findings = hazardous_environment(env)
    assert findings == (EnvHazard.OPENAI_VARIABLE, EnvHazard.SSLKEYLOGFILE)
    assert all(type(f) is EnvHazard for f in findings)
    # Values never appear in a finding.
    assert not any("org-secret-value" in str(f) or "/tmp/keys" in str(f) for f in findings)


def test_enum_values_are_fixed() -> None:
    assert [m.value for m in EnvHazard] == ["openai_variable", "sslkeylogfile"]


@pytest.mark.parametrize(
    "name",
    [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "AZURE_OPENAI_API_KEY",
        "MY_OPENAI_THING",
        "openai_log",
    ],
)
def test_what_the_spec_does_not_list_is_not_reported(name: str) -> None:
    # Proxies and CA bundles are the supervisor's allow-list decision (design §9);
    # environment names are case-sensitive and only exact OPENAI_* names are read.
    assert hazardous_environment({**CLEAN, name: "x"}) == ()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OPENAI_API_KEY": "sk-test"}, True),
        ({"OPENAI_API_KEY": "  sk-test\n"}, True),
        ({}, False),
        ({"OPENAI_API_KEY": ""}, False),
        ({"OPENAI_API_KEY": "   "}, False),
        ({"OPENAI_API_KEY": " \t\r\n"}, False),
        ({"openai_api_key": "sk-test"}, False),
    ],
)
def test_key_available(env: dict[str, str], expected: bool) -> None:
    assert key_available(env) is expected

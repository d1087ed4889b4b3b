"""The systemd units in ops/systemd/: `systemd-analyze verify` passes and
`systemd-analyze security --offline=true` rates the worker unit's overall exposure
<= 2.0 (a bare unit rates 9.0 "UNSAFE"), and the figure recorded in the docs is
the measured one.

`systemd-analyze` comes from Debian's `systemd` package; `make test-tools` installs it
when missing (tests/ops_tests/ensure-systemd-analyze.sh). It needs no running
systemd: the units are verified in a scratch root (``--root``) holding a copy of
the system's unit directory, the units exactly as shipped, and a stub at the
install path of ``ExecStart=`` (verify checks that the binary exists)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
UNITS = REPO / "ops" / "systemd"
WORKER_UNIT = "kexpr-worker@.service"
INSTANCE = "kexpr-worker@physique-coach.service"
EXEC = "/opt/kexpr/venv/bin/kexpr"
MAX_EXPOSURE = 2.0
ANALYZE = shutil.which("systemd-analyze")
SYSTEM_UNITS = next(
    (p for p in (Path("/usr/lib/systemd/system"), Path("/lib/systemd/system")) if p.is_dir()), None
)

needs_analyze = pytest.mark.skipif(
    ANALYZE is None or SYSTEM_UNITS is None,
    reason="systemd-analyze not installed (Debian package `systemd`; `make test-tools` installs it as root with apt)",
)


@pytest.fixture
def scratch_root(tmp_path: Path) -> Path:
    assert SYSTEM_UNITS is not None
    root = tmp_path / "root"
    shutil.copytree(SYSTEM_UNITS, root / "usr/lib/systemd/system", symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNITS / WORKER_UNIT, root / "etc/systemd/system" / WORKER_UNIT)
    stub = root / EXEC.lstrip("/")
    stub.parent.mkdir(parents=True)
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    return root


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    return subprocess.run(
        [ANALYZE, *args], capture_output=True, text=True, timeout=120, check=False
    )


@needs_analyze
def test_worker_unit_verifies(scratch_root: Path) -> None:
    out = analyze("verify", f"--root={scratch_root}", INSTANCE)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == "", out.stderr  # not even a warning


@needs_analyze
def test_gateway_dropin_verifies_on_a_gateway_unit(scratch_root: Path) -> None:
    unit = scratch_root / "etc/systemd/system/hermes-gateway.service"
    unit.write_text("[Service]\nExecStart=/opt/kexpr/venv/bin/kexpr run\n")
    dropin = scratch_root / "etc/systemd/system/hermes-gateway.service.d"
    dropin.mkdir()
    shutil.copy(UNITS / "gateway.dropin.conf", dropin / "kexpr.conf")
    out = analyze("verify", f"--root={scratch_root}", "hermes-gateway.service")
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr


def measured_exposure(scratch_root: Path) -> float:
    out = analyze("security", "--offline=true", f"--root={scratch_root}", "--no-pager", INSTANCE)
    assert out.returncode == 0, out.stderr
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d) (\w+)", out.stdout)
    assert m is not None, out.stdout
    return float(m.group(1))


@needs_analyze
def test_worker_unit_exposure_is_at_most_2_and_matches_the_docs(scratch_root: Path) -> None:
    exposure = measured_exposure(scratch_root)
    assert exposure <= MAX_EXPOSURE
    recorded = f"{exposure:.1f}"
    for doc in (
        REPO / "docs" / "systemd.md",
        REPO / "docs" / "operator-guide.ko.md",
        UNITS / WORKER_UNIT,
    ):
        assert f"{recorded} OK" in doc.read_text("utf-8"), doc


def test_worker_unit_has_every_sandbox_setting_the_issue_lists() -> None:
    text = (UNITS / WORKER_UNIT).read_text()
    pairs = (ln.partition("=") for ln in text.splitlines() if "=" in ln and not ln.startswith("#"))
    settings = {k: v for k, _, v in pairs}
    assert settings["NoNewPrivileges"] == "yes"
    assert settings["ProtectSystem"] == "strict"
    assert settings["ReadWritePaths"] == "/var/lib/kexpr/%i/korean-expression-v1"
    assert settings["ProtectHome"] == settings["PrivateTmp"] == settings["PrivateDevices"] == "yes"
    assert settings["RestrictAddressFamilies"] == "AF_INET AF_INET6 AF_UNIX"
    assert settings["CapabilityBoundingSet"] == ""
    assert "SystemCallFilter=@system-service" in text
    assert settings["UMask"] == "0077"
    assert settings["EnvironmentFile"] == "/etc/kexpr/%i.env"
    assert (settings["User"], settings["Group"]) == ("kexpr-worker", "kexpr-spool")
    # The spend bound is stated in the unit, and it is the worker's own default.
    from kexpr.worker.spend import DEFAULT_PER_DAY, DEFAULT_PER_HOUR

    assert settings["ExecStart"] == (
        f"{EXEC} worker --data-root /var/lib/kexpr/%i/korean-expression-v1"
        f" --max-calls-per-hour {DEFAULT_PER_HOUR} --max-calls-per-day {DEFAULT_PER_DAY}"
    )
    # Restart, crash loop and graceful stop mirror `kexpr supervise`.
    assert settings["Restart"] == "on-failure"
    # Every exit `kexpr supervise` does not restart (69 included:
    # an unsupported httpx/httpcore), and no other.
    from kexpr.ops.supervisor import FATAL_EXITS

    assert settings["RestartPreventExitStatus"] == "69 71 74 78"
    assert {int(c) for c in settings["RestartPreventExitStatus"].split()} == FATAL_EXITS
    assert (settings["StartLimitBurst"], settings["StartLimitIntervalSec"]) == ("5", "300")
    assert int(settings["TimeoutStopSec"]) > 4  # the call deadline
    # The key reaches the worker through EnvironmentFile= only.
    assert "OPENAI" not in text.replace("OPENAI_API_KEY (design", "")


def test_worker_unit_bounds_memory_and_tasks_as_the_docs_say() -> None:
    # an OOM must take the worker, not the machine; the sizes are
    # justified in docs/systemd.md, and `kexpr supervise` applies the rlimits.
    from kexpr.ops.supervisor import WORKER_TASKS_HEADROOM

    text = (UNITS / WORKER_UNIT).read_text()
    pairs = (ln.partition("=") for ln in text.splitlines() if "=" in ln and not ln.startswith("#"))
    settings = {k: v for k, _, v in pairs}
    assert (settings["MemoryMax"], settings["TasksMax"]) == ("256M", "64")
    doc = (REPO / "docs" / "systemd.md").read_text()
    assert "`MemoryMax=256M`" in doc and "`TasksMax=64`" in doc
    assert "RLIMIT_AS" in doc and "RLIMIT_NPROC" in doc
    assert WORKER_TASKS_HEADROOM == 2 * int(settings["TasksMax"])


def test_sysusers_and_tmpfiles_name_the_same_user_and_group() -> None:
    sysusers = (UNITS / "kexpr.sysusers.conf").read_text()
    assert "g kexpr-spool -" in sysusers and "u kexpr-worker -:kexpr-spool" in sysusers
    assert "d /var/lib/kexpr 0750 root kexpr-spool -" in (UNITS / "kexpr.tmpfiles.conf").read_text()
    dropin = (UNITS / "gateway.dropin.conf").read_text()
    assert (
        "SupplementaryGroups=kexpr-spool" in dropin and "UnsetEnvironment=OPENAI_API_KEY" in dropin
    )


@needs_analyze
def test_the_status_check_timer_and_its_service_verify(scratch_root: Path) -> None:
    for name in ("kexpr-status@.service", "kexpr-status@.timer"):
        shutil.copy(UNITS / name, scratch_root / "etc/systemd/system" / name)
    for unit in ("kexpr-status@physique-coach.service", "kexpr-status@physique-coach.timer"):
        out = analyze("verify", f"--root={scratch_root}", unit)
        assert out.returncode == 0 and out.stderr.strip() == "", (unit, out.stderr)


def test_the_status_check_runs_status_json_on_the_instances_data_root() -> None:
    """docs/systemd.md "Alerting": the unit fails exactly when `kexpr status` exits
    non-zero (a oneshot's failure), on the same data root the worker serves."""
    service = (UNITS / "kexpr-status@.service").read_text()
    worker = (UNITS / WORKER_UNIT).read_text()
    (exec_start,) = [ln for ln in service.splitlines() if ln.startswith("ExecStart=")]
    root = "/var/lib/kexpr/%i/korean-expression-v1"
    assert exec_start == f"ExecStart={EXEC} status --data-root {root} --json"
    assert f"--data-root {root}" in worker
    assert "Type=oneshot" in service and "User=kexpr-worker" in service
    timer = (UNITS / "kexpr-status@.timer").read_text()
    assert "OnUnitActiveSec=1min" in timer
    docs = (REPO / "docs" / "systemd.md").read_text("utf-8")
    assert "kexpr-status@.service" in docs and "kexpr-status@.timer" in docs

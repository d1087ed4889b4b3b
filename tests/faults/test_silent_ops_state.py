"""No silent ops state, as real processes: a real worker without its key says
so and ``kexpr status`` is not ``healthy``; a journal that cannot be appended is
not ``healthy``; a glossary the gateway cannot read is not ``healthy``; a
rehearsal refuses an unsupported httpx/httpcore with the real worker's one line
and exit 69. Before, each of these was ``healthy`` (or a traceback)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import mounted_tmpfs, start_supervised_worker
from fakeapi import FakeOpenAI
from kit.spool import await_answer, write_request

from gateway_shim.identity import load_or_create_key
from kexpr.spool.layout import DataRoot

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def status(data_root: Path) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-m", "kexpr.ops.cli", "status", "--data-root", str(data_root), "--json"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, json.loads(done.stdout)


@pytest.mark.e2e
def test_a_real_worker_without_its_key_is_not_healthy(data_root: Path) -> None:
    w = start_supervised_worker(data_root, None, key=None)
    try:
        code, report = status(data_root)
        assert (code, report["verdict"], report["problem"]) == (
            1,
            "no_credential",
            "credential_absent",
        )
    finally:
        assert w.stop() == 0


@pytest.mark.e2e
def test_a_real_worker_with_its_key_is_healthy(data_root: Path, fake_api: FakeOpenAI) -> None:
    """The counterpart: the same checks pass on a good root (so the verdicts
    above are the conditions', not the test's)."""
    w = start_supervised_worker(data_root, fake_api)
    try:
        code, report = status(data_root)
        assert (code, report["verdict"], report["problem"]) == (0, "healthy", None)
    finally:
        assert w.stop() == 0


@pytest.mark.e2e
def test_a_journal_that_cannot_be_appended_is_not_healthy(data_root: Path) -> None:
    """The worker's file-size limit makes the kernel refuse the next row (as a
    full disk does): the append is undone, and status says so until an append
    succeeds again."""
    w = start_supervised_worker(data_root, None, key=None)
    root = w.root
    # The gateway's identity key, as the gateway holds it beside these rows
    # (without it status would name the identity first: gateway_shim.identity).
    load_or_create_key(root)
    try:
        assert await_answer(root, write_request(root, 1))["outcome"] == "credential_unavailable"
        pid = json.loads(root.status_file.read_bytes())["pid"]
        (segment,) = root.outcomes.iterdir()
        limit = segment.stat().st_size + 200
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        try:
            assert await_answer(root, write_request(root, 2))["outcome"] == "journal_unavailable"
        finally:
            # Lifted at once: the status file (larger than the limit) is written
            # again, and says what the worker met.
            resource.prlimit(
                pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
            )
        end = time.monotonic() + 10
        while (
            json.loads(root.status_file.read_bytes()).get("refusing") != "append_undone"
            and time.monotonic() < end
        ):
            time.sleep(0.05)
        code, report = status(data_root)
        assert (code, report["verdict"], report["problem"]) == (
            1,
            "journal_unwritable",
            "journal_append_undone",
        )
        assert await_answer(root, write_request(root, 3))["outcome"] == "credential_unavailable"
        end = time.monotonic() + 10
        while (
            json.loads(root.status_file.read_bytes()).get("refusing") is not None
            and time.monotonic() < end
        ):
            time.sleep(0.05)
        assert json.loads(root.status_file.read_bytes())["refusing"] is None
    finally:
        w.stop()


@pytest.mark.e2e
def test_a_full_journal_file_system_is_not_healthy(tmp_path: Path, fake_api: FakeOpenAI) -> None:
    with mounted_tmpfs(tmp_path / "tiny", "size=1m", "the refused-append test covers it") as mnt:
        data_root = mnt / "root"
        w = start_supervised_worker(data_root, fake_api)
        try:
            assert status(data_root)[1]["verdict"] == "healthy"
            filler = mnt / "filler"
            with open(filler, "wb") as f:
                try:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
                except OSError:
                    pass
            code, report = status(data_root)
            assert (code, report["verdict"], report["problem"]) == (
                1,
                "journal_unwritable",
                "journal_no_space",
            )
            filler.unlink()
        finally:
            w.stop()


@pytest.mark.e2e
def test_a_glossary_the_gateway_cannot_read_is_not_healthy(
    data_root: Path, fake_api: FakeOpenAI
) -> None:
    w = start_supervised_worker(data_root, fake_api)
    try:
        installed = data_root / "operator-glossary.json"
        document = {
            "version": "kexpr-dual-glossary-v1",
            "decisions": {"P_DUAL_DECISION_KEEP_TARGET": "현재 목표 섭취량 유지"},
            "reasons": {},
        }
        installed.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
        # Group-readable in a private root: the shim refuses it (bad_mode).
        installed.chmod(0o640)
        code, report = status(data_root)
        assert (code, report["verdict"], report["problem"]) == (
            1,
            "glossary_unusable",
            "glossary_bad_mode",
        )
        assert report["glossary"] == "unreadable bad_mode"
        installed.chmod(0o600)
        if os.geteuid() == 0:
            # Owned by someone else than the gateway (root installed it by hand).
            assert data_root.stat().st_uid == 0  # the gateway: the root's owner
            os.chown(installed, 65534, 65534)
            code, report = status(data_root)
            assert (report["verdict"], report["glossary"]) == (
                "glossary_unusable",
                "unreadable wrong_owner",
            )
            os.chown(installed, 0, 0)
        assert status(data_root)[1]["verdict"] == "healthy"
        installed.write_text("{", encoding="utf-8")
        assert status(data_root)[1]["problem"] == "glossary_not_json"
    finally:
        w.stop()


def _unsupported_httpcore(tmp_path: Path) -> dict[str, str]:
    """An environment whose httpcore is 0.15.0 for real: its metadata says so and
    importing it gives what httpx needs none of (the import of httpx fails)."""
    site = tmp_path / "old-site"
    pkg = site / "httpcore"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "0.15.0"\n')
    info = site / "httpcore-0.15.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: httpcore\nVersion: 0.15.0\n")
    return {**ENV, "PYTHONPATH": str(site)}


@pytest.mark.e2e
def test_a_rehearsal_refuses_an_unsupported_dependency_like_the_real_worker(
    tmp_path: Path, data_root: Path
) -> None:
    env = _unsupported_httpcore(tmp_path)
    expected = (
        "kexpr worker: refusing to start: unsupported_dependency: httpcore 0.15.0"
        " (supported: httpx>=0.24.0,<0.29, httpcore>=0.17.3,<1.1)"
    )
    for extra in ([], ["--rehearsal"], ["--rehearsal", "--tokens-per-second", "50"]):
        done = subprocess.run(
            [sys.executable, "-m", "kexpr.worker", *extra, "--data-root", str(data_root)],
            env={**env, "OPENAI_API_KEY": "sk-test"} if not extra else env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr.splitlines()) == (69, [expected]), extra
    assert not data_root.exists()  # nothing was started


@pytest.mark.e2e
def test_a_real_worker_without_its_key_says_so_once(data_root: Path) -> None:
    from kexpr.worker.daemon import wait_ready

    root = DataRoot(data_root)
    root.ensure()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kexpr.worker", "--data-root", str(data_root)],
        env=ENV,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_ready(root, 30.0)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    # Run as root, the worker also says that (its own line, kexpr.worker.main).
    lines = [line for line in err.splitlines() if "running_as_root" not in line]
    assert lines == [
        "kexpr worker: no credential: OPENAI_API_KEY is not set;"
        " every request is answered credential_unavailable"
    ]


def test_a_read_only_or_full_journal_file_system_is_named(
    root: DataRoot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`journal_space_problem`'s two answers (the full one is also produced for
    real on a tmpfs above; a read-only mount needs one made for the test)."""
    from kexpr.ops import status_cli

    real = os.statvfs(root.outcomes)

    def fake(flag: int, blocks: int):
        values = list(real)
        values[4] = blocks  # f_bavail
        values[8] = flag  # f_flag
        return os.statvfs_result(values)

    assert status_cli.journal_space_problem(root) is None
    monkeypatch.setattr(os, "statvfs", lambda _p: fake(os.ST_RDONLY, real.f_bavail))
    assert status_cli.journal_space_problem(root) == "read_only"
    monkeypatch.setattr(os, "statvfs", lambda _p: fake(0, 0))
    assert status_cli.journal_space_problem(root) == "no_space"

"""``kexpr quarantine clear`` against a real supervised worker: a mode slip on
``outcomes/`` quarantines it; the clear is refused while the slip is there, and
once it is fixed the same worker (no restart) serves the next presentation."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fakeapi import FakeOpenAI, compose_reply, default_style
from kit.bodies import present_styled
from ops_support import kexpr, start_supervisor, wait_for

from gateway_shim import (
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)
from kexpr.spool.layout import DataRoot


def _status(root: DataRoot) -> dict[str, object]:
    doc: dict[str, object] = json.loads(root.status_file.read_bytes())
    return doc


def test_clear_after_the_fix_serves_again_without_a_restart(
    data_root: Path, fake_api: FakeOpenAI
) -> None:
    fake_api.behaviour = compose_reply(default_style)
    sup = start_supervisor(data_root, fake=fake_api)
    root = sup.root
    coord = KoreanExpressionCoordinator(
        KoreanExpressionConfig.from_block(exact_block(Mode.SHADOW, weekly=True)), data_root
    )
    try:
        pid = sup.worker_pid()
        out = kexpr("quarantine", "clear", "--data-root", data_root, "--json")
        assert out.returncode == 0 and json.loads(out.stdout)["result"] == "not_quarantined"
        os.chmod(root.outcomes, 0o755)
        assert wait_for(lambda: _status(root).get("quarantine") == "bad_mode")
        assert kexpr("status", "--data-root", data_root).returncode == 1
        cand = present_styled(coord, "evt-q-1")
        assert cand.outcome is Outcome.SPOOL_UNAVAILABLE  # the shim checks the same modes
        out = kexpr("quarantine", "clear", "--data-root", data_root)
        assert out.returncode == 1, out.stdout + out.stderr
        assert "quarantine clear: refused: bad_mode (was bad_mode)" in out.stdout
        os.chmod(root.outcomes, 0o700)
        out = kexpr("quarantine", "clear", "--data-root", data_root, "--json")
        assert out.returncode == 0, out.stdout + out.stderr
        assert json.loads(out.stdout) == {"result": "cleared", "was": "bad_mode", "why": None}
        assert kexpr("status", "--data-root", data_root).returncode == 0
        cand = present_styled(coord, "evt-q-2")
        assert cand.outcome is Outcome.SHADOW_SELECTED
        assert sup.worker_pid() == pid  # the same worker: no restart
        assert kexpr("journal", "verify", "--data-root", data_root).returncode == 0
    finally:
        coord.close()
        sup.stop()


def test_no_worker_is_said_and_nothing_is_written(data_root: Path) -> None:
    DataRoot(data_root).ensure()
    (data_root / "identity.key").write_bytes(b"k" * 32)
    os.chmod(data_root / "identity.key", 0o600)
    out = kexpr("quarantine", "clear", "--data-root", data_root)
    assert out.returncode == 1 and "quarantine clear: no_worker" in out.stdout
    assert not (data_root / "quarantine-clear.request").exists()

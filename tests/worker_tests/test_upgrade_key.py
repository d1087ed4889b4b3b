"""The upgrade to the 128-bit artifact key keeps every earlier attempt
deduped, and an old shim is served by the new worker.

The release before the change (`PREVIOUS`, ``f24e0c6``: 64-hex keys, spool protocol
v2) is built from this repository's history like tests/worker_tests/test_upgrade.py
builds its release (``git archive`` into a scratch venv that holds the old code and
this venv's third-party packages). That release installs under the ``kexpr``
namespace by a ``package-dir`` map; the scratch venv reproduces the map with
symbolic links (``kexpr/spool`` -> ``queue/spool`` ...), so no build backend runs.

Its worker and its shim journal artifacts under their 64-hex keys: terminal ones
(reported ``selected``, ``shadow_selected``) and one answered and still open (its
report not written yet). Then today's worker runs on the same root: the old shim,
still running, reports the open one, journaled; and presents a new artifact, which
today's worker refuses before any row or call (the old shim's weekly capsule carries
the rationale, a slot today's fit table locks: design §6.1). Today's shim presents the
same artifacts again: each journaled one is ``already_attempted`` and the fake API
sees no new request for it; the refused one, never attempted, gets its one call under
its 32-hex key.

The shims present the styled weekly body (``upgrade_kit.SHIM``); the old worker gets
answers its contract (no fit table) accepts, today's worker the fit table's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeapi import FakeOpenAI, compose_reply, default_style
from kit.poll import until
from worker_tests.upgrade_kit import (
    SHIM,
    OldRelease,
    Shim,
    final_outcomes,
    imports,
    previous_release_style,
    release_source,
    scratch_venv,
    start_worker,
    stop_worker,
)

from kexpr.spool.layout import DataRoot

# main before the 128-bit key: 64-hex keys, kexpr-spool-v2.
PREVIOUS = "f24e0c6"


@pytest.fixture(scope="module")
def release_before_the_key(tmp_path_factory: pytest.TempPathFactory) -> OldRelease:
    scratch, src = release_source(PREVIOUS, tmp_path_factory, "release-before-the-key")
    # The release's package-dir map, as links: only its import names are visible.
    names = scratch / "names"
    (names / "kexpr").mkdir(parents=True)
    (names / "gateway_shim").symlink_to(src / "gateway_shim")
    for name, folder in (("spool", "queue/spool"), ("worker", "worker"), ("ops", "ops")):
        (names / "kexpr" / name).symlink_to(src / folder)
    python = scratch_venv(scratch, names)
    out = imports(
        python,
        scratch,
        "import kexpr.worker.daemon, gateway_shim, kexpr.spool.messages as m;"
        " print(m.__file__, m.SPOOL_VERSION)",
    )
    assert out.startswith(str(names)) and "kexpr-spool-v2" in out
    return OldRelease(python, scratch)


class NewShim(Shim):
    """Today's shim in its own process (the host restarted after the upgrade)."""

    def __init__(self, cwd: Path, root: DataRoot) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SHIM, str(root.root)],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )


@pytest.fixture
def old_shim_and_root(
    release_before_the_key: OldRelease, data_root: Path
) -> Iterator[tuple[Shim, DataRoot]]:
    root = DataRoot(data_root)
    root.ensure()
    shim = Shim(release_before_the_key, root)
    try:
        yield shim, root
    finally:
        shim.close()


def _either_release(capsule: dict[str, Any]) -> dict[str, str]:
    """Today's capsule (the one slot the fit table styles) gets the table's
    composition; the old release's (with the rationale, which today's table locks)
    what its own contract accepts."""
    today = default_style(capsule)
    return today if all(today.values()) else previous_release_style(capsule)


def _keys(root: DataRoot) -> dict[str, str]:
    """attempt_id -> the artifact_key its start row carries."""
    from conftest import journal_rows

    return {
        row["attempt_id"]: row["artifact_key"]
        for row in journal_rows(root.root)
        if row["outcome"] == "attempt_started"
    }


@pytest.mark.e2e
def test_attempts_journaled_under_64_hex_keys_are_never_attempted_again(
    release_before_the_key: OldRelease,
    old_shim_and_root: tuple[Shim, DataRoot],
    fake_api: FakeOpenAI,
) -> None:
    shim, root = old_shim_and_root
    fake_api.behaviour = compose_reply(_either_release)
    cwd = release_before_the_key.cwd
    old = start_worker(release_before_the_key.python, "kexpr.worker", root, fake_api, cwd)
    try:
        a = shim.ask("present a enabled")  # accepted, then reported selected
        assert shim.ask("report a selected") == {"reported": "selected"}
        b = shim.ask("present b shadow")  # the shim reports shadow_selected itself
        c = shim.ask("present c enabled")  # answered, its report not written yet
        assert [x["outcome"] for x in (a, b, c)] == ["accepted", "shadow_selected", "accepted"]
        assert until(lambda: final_outcomes(root).get(a["attempt_id"]) == "selected")
        assert until(lambda: final_outcomes(root).get(b["attempt_id"]) == "shadow_selected")
    finally:
        stop_worker(old)  # stopped for the upgrade
    keys = _keys(root)
    assert {len(k) for k in keys.values()} == {64}  # the old release's whole HMAC
    assert final_outcomes(root)[c["attempt_id"]] is None  # open: answered, not reported
    assert len(fake_api.requests) == 3

    new = start_worker(Path(sys.executable), "kexpr.worker", root, fake_api, cwd)
    try:
        # The old shim still runs (the host not restarted yet): its report of the
        # answered attempt is journaled. A new artifact of its carries the weekly
        # rationale, a slot the fit table locks: refused before any row or call,
        # in today's protocol (a request it cannot read), which the old shim
        # cannot read either; it publishes its own text.
        assert shim.ask("report c selected") == {"reported": "selected"}
        assert until(lambda: final_outcomes(root).get(c["attempt_id"]) == "selected")
        rows = len(final_outcomes(root))
        d = shim.ask("present d enabled")
        assert d == {"outcome": "invalid_response", "attempt_id": None}
        assert len(final_outcomes(root)) == rows
        assert len(fake_api.requests) == 3
        shim.close()
        # The host restarts with today's shim: the same artifacts, 32-hex keys.
        # That release wrote no record of its key: nothing proves the key present
        # wrote its rows, so today's shim refuses it (no request, no call) until
        # the operator attests it (docs/upgrade.md).
        today = NewShim(cwd, root)
        try:
            unproven = today.ask("present a enabled")
            assert unproven == {"outcome": "identity_mismatch", "attempt_id": None}
            adopted = subprocess.run(
                [sys.executable, "-m", "kexpr.ops.cli", "identity", "adopt"]
                + ["--data-root", str(root.root)],
                capture_output=True,
                text=True,
                check=False,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
            assert adopted.returncode == 0, adopted.stderr
            again = [today.ask(f"present {name} enabled") for name in ("a", "b", "c")]
            assert [x["outcome"] for x in again] == ["already_attempted"] * 3, again
            assert all(x["attempt_id"] is None for x in again)
            # The refused artifact was never attempted: its one call, under its
            # 32-hex key, is today's.
            d = today.ask("present d enabled")
            assert d["outcome"] == "accepted"
            assert len(_keys(root)[d["attempt_id"]]) == 32
            assert today.ask("present d enabled")["outcome"] == "already_attempted"
        finally:
            today.close()
        # One wire request per attempted artifact, ever: four artifacts, four requests.
        assert len(fake_api.requests) == 4
    finally:
        stop_worker(new)
    # Every row of both releases verifies together.
    from kexpr.spool.journal import Journal

    index = Journal(root).load()
    assert {len(r.artifact_key) for r in index.by_attempt.values()} == {32, 64}

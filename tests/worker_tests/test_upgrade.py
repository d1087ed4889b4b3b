"""An upgrade in place keeps what the host published.

Observed: a data root from the release before the attempt lifecycle (an
accepted attempt, the host published the styled body, its report written while
the worker was stopped for the upgrade), then today's worker: the attempt was
journaled ``claim_expired_canonical`` and the host's ``selected`` report
dropped as an orphan. That release's shim deleted the accepted response when it
read it, so today's "answered" test (an accepted response on disk) called the
attempt lost, and lost attempts were expired before reports were read.

The previous release is built from this repository's own history: `PREVIOUS`
is the last commit of ``main`` before the lifecycle merge (``fe706e7``), taken
with ``git archive`` into a scratch venv (this venv's dependencies, the old
release's own code; its import names are the old top-level ``worker``,
``gateway_shim``, ``spool``). Its worker and its shim run as real processes
against the loopback fake API; then today's worker runs on the same root, with
the old shim still running (the host not restarted yet).

That release's shim presents the styled weekly body (a weekly report whose goal
range is missing); its contract had no fit table, and the fake API answers it with
``그리고``, a lexicon word its grammar accepts. Its capsule carries the weekly
rationale too, a slot today's fit table locks (design §6.1): today's worker refuses
it (``slot_unstyleable``), canonical with no row and no call.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeapi import FakeOpenAI, compose_reply
from worker_tests import upgrade_kit as up

from kexpr.spool.layout import DataRoot

# main before the lifecycle merge: its shim deletes every response it reads.
PREVIOUS = "e598171"


@pytest.fixture(scope="module")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> up.OldRelease:
    scratch, src = up.release_source(PREVIOUS, tmp_path_factory, "previous-release")
    # Its import names are the old top-level worker, gateway_shim and spool.
    python = up.scratch_venv(scratch, src, src / "queue")
    out = up.imports(
        python, scratch, "import worker.daemon, gateway_shim, spool; print(spool.__file__)"
    )
    assert out.startswith(str(src))
    return up.OldRelease(python, scratch)


@pytest.fixture
def shim_and_root(
    old_release: up.OldRelease, data_root: Path
) -> Iterator[tuple[up.Shim, DataRoot]]:
    root = DataRoot(data_root)
    root.ensure()
    shim = up.Shim(old_release, root)
    try:
        yield shim, root
    finally:
        shim.close()


@pytest.mark.e2e
def test_the_previous_release_then_todays_worker_journals_what_the_host_published(
    old_release: up.OldRelease,
    shim_and_root: tuple[up.Shim, DataRoot],
    fake_api: FakeOpenAI,
) -> None:
    shim, root = shim_and_root
    # What the previous release's contract accepts for its slots.
    fake_api.behaviour = compose_reply(up.previous_release_style)
    old = up.start_worker(old_release.python, "worker", root, fake_api, old_release.cwd)
    try:
        # A: accepted; the host publishes it during the upgrade (below).
        a = shim.ask("present a enabled")
        # B: accepted; the host fails to publish it, also reported during the upgrade.
        b = shim.ask("present b enabled")
        # C: shadow; its shim reports at once and the old worker journals it.
        c = shim.ask("present c shadow")
        # D: accepted; the host never reports (it crashed before its write).
        d = shim.ask("present d enabled")
        assert [x["outcome"] for x in (a, b, d)] == ["accepted"] * 3, (a, b, d)
        assert c["outcome"] == "shadow_selected"
        # The old shim deleted the accepted responses on read.
        assert not any(
            (root.responses / n).exists() for n in os.listdir(root.responses) if n.endswith(".json")
        )
    finally:
        up.stop_worker(old)  # stopped for the upgrade
    # The host's reports land while no worker runs.
    assert shim.ask("report a selected") == {"reported": "selected"}
    assert shim.ask("report b publication_failed") == {"reported": "publication_failed"}
    assert up.final_outcomes(root)[c["attempt_id"]] == "shadow_selected"

    new = up.start_worker(Path(sys.executable), "kexpr.worker", root, fake_api, old_release.cwd)
    try:
        final = up.final_outcomes(root)
        # What the host really published, not claim_expired_canonical + an orphan.
        assert final[a["attempt_id"]] == "selected"
        assert final[b["attempt_id"]] == "publication_failed"
        assert final[c["attempt_id"]] == "shadow_selected"
        # D: no response (deleted on read) and no report: the host never
        # published it, and no owner can finish it.
        assert final[d["attempt_id"]] == "claim_expired_canonical"
        assert sorted(os.listdir(root.reports)) == []
        status = json.loads(root.status_file.read_bytes())
        assert status["counters"]["orphan_reports"] == 0
        # The old shim still runs (Hermes not restarted): its capsule carries the
        # weekly rationale, a slot the fit table locks, so today's worker refuses it (invalid_request)
        # before any row or call. A request it cannot read is answered in today's
        # protocol version, which the old shim cannot read either: it ends
        # canonical as invalid_response, and the host publishes its own text.
        rows = len(up.final_outcomes(root))
        e = shim.ask("present e enabled")
        assert e == {"outcome": "invalid_response", "attempt_id": None}
        assert len(up.final_outcomes(root)) == rows
        # One wire request per artifact, ever, and none for the refused one.
        assert len(fake_api.requests) == 4
    finally:
        up.stop_worker(new)

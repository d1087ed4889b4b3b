"""Issue 26 item 9a, as a real process: a worker at its RLIMIT_NPROC.

Under ``kexpr supervise`` the worker's process limit is the user's task count at
start + 128; a gateway of the same user that grows threads later leaves the next
call thread unable to start. The kernel's own refusal here (``clone`` fails with
EAGAIN, Python raises ``RuntimeError("can't start new thread")``), in a child
process whose soft RLIMIT_NPROC is set to 0 after its worker is built: the
presentation is canonical ``answer_unpublishable`` with no start row and no call,
and once the limit is lifted the same artifact gets its one attempt.

Root is not bound by RLIMIT_NPROC (CAP_SYS_RESOURCE), and this interpreter cannot
be run as another user here: as root the test skips; the injected start failure
(tests/faults/test_attempt_never_live.py) covers it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CHILD = """
import json, os, resource, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from worker_tests.worker_kit import Clock, Provider, make_worker, outcomes, response, rid, submit
import kexpr.worker.provider as provider_mod
from kexpr.spool.layout import DataRoot

os.environ["OPENAI_API_KEY"] = "sk-test"
root = DataRoot(Path(sys.argv[2]))
root.ensure()
provider, clock = Provider(), Clock()
w = make_worker(root, provider, clock, {"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin"})
provider_mod._CALL_THREADS._idle.clear()  # no kept thread: one must start
soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
resource.setrlimit(resource.RLIMIT_NPROC, (0, hard))
w.handle_claimed(submit(root, clock, "d" * 32, rid=rid(1)) + ".json")
first = response(root, rid(1))
rows_after_first = outcomes(root)
calls_after_first = len(provider.calls)
resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
w.handle_claimed(submit(root, clock, "d" * 32, rid=rid(2)) + ".json")
print(json.dumps({
    "first": [first.status.value, first.outcome.value],
    "rows_after_first": rows_after_first,
    "calls_after_first": calls_after_first,
    "faults": w.counters.faults,
    "second": response(root, rid(2)).status.value,
    "calls": len(provider.calls),
}))
"""


@pytest.mark.e2e
def test_a_worker_at_its_process_limit_spends_nothing(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root is not bound by RLIMIT_NPROC (the injected failure covers root)")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(TESTS), str(tmp_path / "root")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["first"] == ["canonical", "answer_unpublishable"]
    assert got["rows_after_first"] == [] and got["calls_after_first"] == 0
    assert got["faults"] == {"thread_start_failed": 1}
    assert got["second"] == "accepted" and got["calls"] == 1

"""The bench talks ("`make bench QUICK=1` prints nothing for a
minute"): its entry points say what they run as each phase starts, on stderr,
flushed, and the first line comes before the heavy imports.

Order, never time: ``python -X importtime`` writes one stderr line per finished
import, so the first bench line standing before the ``gateway_shim`` import line
proves that it was printed before the seconds-long imports, whatever the load."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _announce() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_announce", REPO / "bench" / "announce.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_phase_says_what_it_runs_and_the_previous_ones_real_duration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    announce = _announce()
    announce.start("bench/run.py", "quick profile", "1.5 min")
    announce.phase("validation", "judge() 2,000 calls", "2 s")
    announce.phase("floor", "fsync 50 times", "1 s")
    announce.done()
    out, err = capsys.readouterr()
    assert out == ""  # stdout keeps the figures only (the JSON object stays the last line)
    lines = err.splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "bench/run.py (quick profile): about 1.5 min in all; figures print at the end (stdout)",
        "validation: judge() 2,000 calls (about 2 s)",
        lines[2].split("] ", 1)[1],
        "floor: fsync 50 times (about 1 s)",
        lines[4].split("] ", 1)[1],
        "all phases done; printing the figures",
    ]
    assert lines[2].split("] ", 1)[1].startswith("  validation: done in ")
    assert lines[4].split("] ", 1)[1].startswith("  floor: done in ")
    assert all(line.startswith("[bench +") for line in lines)


def _imported(line: str) -> str | None:
    """The module an ``-X importtime`` line reports (``import time: self | cumulative | name``)."""
    if not line.startswith("import time:"):
        return None
    return line.rsplit("|", 1)[-1].strip()


@pytest.mark.parametrize(
    ("script", "args", "first"),
    [
        ("run.py", ["--quick"], "bench/run.py (quick profile)"),
        ("guest.py", [], "bench/guest.py (four scenarios"),
    ],
)
def test_the_first_line_comes_before_the_heavy_imports(
    script: str, args: list[str], first: str, tmp_path: Path
) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp_path),  # nothing is made before the kill, and never in /tmp
    }
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", str(REPO / "bench" / script), *args],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if _imported(line) == "gateway_shim":
                break  # the bench is still importing: nothing measured, nothing started
    finally:
        proc.kill()
        proc.wait(30)
        proc.stderr.close()
    bench = [i for i, line in enumerate(seen) if line.startswith("[bench +")]
    shim = [i for i, line in enumerate(seen) if _imported(line) == "gateway_shim"]
    assert shim, seen[-5:]  # the import really happened after the lines read
    assert bench and bench[0] < shim[0], seen[:5]
    assert first in seen[bench[0]]
    assert "import: " in "".join(seen[i] for i in bench)  # the import phase is announced

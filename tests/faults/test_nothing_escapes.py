"""Issue 14 item 1: nothing escapes into the host.

For every state of the data root and every OS error, `present_*`,
`apresent_*` and `report` return a candidate (canonical unless fully
validated) within the wait plus a small bound, and never raise.

- The regression: after the coordinator has started, a process with the
  gateway's UID makes ``spool/responses`` 0755, or replaces it with a symlink
  or a file; the next presentation used to raise `UnsafePath` into the host.
- The property: a real mutator process changes the data root at random —
  modes, symlinks, file↔directory swaps, FIFOs, removal, things planted where
  responses go, and (as root, on a tiny tmpfs) a full or read-only file
  system — before and *during* calls served by the real worker
  (`kexpr.worker.daemon.Worker`, its provider behind an ``httpx.MockTransport``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kit.bodies import STYLED_BODY, STYLED_SELECTED, apresent_styled, present_styled
from shim.test_coordinator import ScriptedWorker, accepted, coordinator
from worker_tests.worker_kit import Provider, completion, composition_for

import gateway_shim._setup as setup_mod
from gateway_shim import CandidateStatus, Mode, Outcome, PresentationCandidate
from kexpr.spool.layout import DataRoot
from kexpr.worker.daemon import Worker
from kexpr.worker.provider import build_client

# The wait is patched down for these tests (the worker accepts any deadline up
# to 4 s); the bound is generous: a 2-core machine shared with other suites.
WAIT_S = 1.0
BOUND_S = 3.0
# The composition `STYLED_SELECTED` carries: what the scripted worker and the
# provider answer for the styled weekly's one slot.
GENERATED = "[[P:01]]. 다만 [[A:01]]."


@pytest.fixture
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    monkeypatch.setattr(setup_mod, "MAX_WAIT", dt.timedelta(seconds=WAIT_S))


def _check(cand: object, t0: float) -> None:
    assert isinstance(cand, PresentationCandidate)
    assert time.monotonic() - t0 <= WAIT_S + BOUND_S
    if cand.status is CandidateStatus.SELECTED:
        assert cand.outcome is Outcome.ACCEPTED and cand.body == STYLED_SELECTED
    else:
        assert cand.body == STYLED_BODY


def _swap(path: Path, kind: str) -> None:
    if kind == "chmod_0755":
        os.chmod(path, 0o755)
        return
    os.rename(path, path.with_name(path.name + ".moved"))
    if kind == "symlink":
        os.symlink(path.with_name(path.name + ".moved"), path)
    else:
        path.write_bytes(b"x")


@pytest.mark.parametrize("kind", ["chmod_0755", "symlink", "file"])
def test_an_unsafe_responses_folder_after_start_is_canonical_not_an_exception(
    tmp_path: Path, short_wait: None, kind: str
) -> None:
    root = DataRoot(tmp_path / "root")
    coord = coordinator(root.root, weekly=True)
    with ScriptedWorker(root, accepted(GENERATED)):
        first = present_styled(coord, "evt-1")
    assert first.outcome is Outcome.ACCEPTED
    coord.report(first, "selected")
    _swap(root.responses, kind)
    # The planted response the shim will find unsafe (its removal used to raise).
    t0 = time.monotonic()
    cand = present_styled(coord, "evt-2")  # old code: UnsafePath
    _check(cand, t0)
    assert cand.status is CandidateStatus.CANONICAL
    t0 = time.monotonic()
    cand = asyncio.run(apresent_styled(coord, "evt-3"))
    _check(cand, t0)
    coord.close()


def test_a_fifo_planted_as_the_response_under_an_unsafe_folder_is_canonical(
    tmp_path: Path, short_wait: None
) -> None:
    root = DataRoot(tmp_path / "root")
    coord = coordinator(root.root, weekly=True)

    def plant_fifo(req: dict[str, object]) -> None:
        os.mkfifo(root.responses / f"{req['request_id']}.json", 0o600)
        os.chmod(root.responses, 0o755)  # and the folder turns unsafe

    with ScriptedWorker(root, plant_fifo):
        t0 = time.monotonic()
        cand = present_styled(coord, "evt-1")
    _check(cand, t0)
    assert cand.status is CandidateStatus.CANONICAL
    coord.close()


# ------------------------------------------------------------------ property

_TARGETS = (
    ".",
    "spool",
    "spool/requests",
    "spool/responses",
    "spool/tmp",
    "spool/reports",
    "spool/claimed",
    "identity.key",
)
_DIR_KINDS = ("chmod_0755", "chmod_0000", "symlink", "to_file", "to_fifo", "remove")
_PLANT_KINDS = ("plant_fifo", "plant_dir", "plant_symlink", "plant_garbage")
_FS_KINDS = ("fill", "readonly")

# The mutator: a separate process, as an attacker with the gateway's UID (or
# an operator's mistake) would be. argv: root, tmpfs mount (or ""), plan JSON.
_MUTATOR = r"""
import json, os, shutil, subprocess, sys, time
root, mnt, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def swap(p, kind):
    moved = p + ".moved"
    os.rename(p, moved)
    if kind == "symlink":
        os.symlink(moved, p)
    elif kind == "to_file":
        with open(p, "wb") as f:
            f.write(b"{}")
    elif kind == "to_fifo":
        os.mkfifo(p, 0o600)
    elif kind == "remove":
        shutil.rmtree(moved) if os.path.isdir(moved) else os.unlink(moved)
start = time.monotonic()
for delay, target, kind in plan:
    time.sleep(max(0.0, start + delay - time.monotonic()))
    p = os.path.normpath(os.path.join(root, target))
    try:
        if kind == "chmod_0755":
            os.chmod(p, 0o755)
        elif kind == "chmod_0000":
            os.chmod(p, 0)
        elif kind in ("symlink", "to_file", "to_fifo", "remove"):
            swap(p, kind)
        elif kind.startswith("plant_"):
            # Whatever goes where responses are read, for every request seen
            # in the next 1.5 s.
            end = time.monotonic() + 1.5
            done = set()
            while time.monotonic() < end:
                for d in ("spool/requests", "spool/claimed"):
                    try:
                        names = os.listdir(os.path.join(root, d))
                    except OSError:
                        names = []
                    for n in names:
                        if n in done or not n.endswith(".json"):
                            continue
                        done.add(n)
                        q = os.path.join(root, "spool/responses", n)
                        try:
                            if kind == "plant_fifo":
                                os.mkfifo(q, 0o600)
                            elif kind == "plant_dir":
                                os.mkdir(q, 0o700)
                            elif kind == "plant_symlink":
                                os.symlink("/dev/zero", q)
                            else:
                                fd = os.open(q, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                                os.write(fd, b'{"spool_version": 1, "status": "accepted"')
                                os.close(fd)
                        except OSError:
                            pass
                time.sleep(0.005)
        elif kind == "fill" and mnt:
            fd = os.open(os.path.join(mnt, "filler"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                while os.write(fd, b"\0" * 65536):
                    pass
            except OSError:
                pass
            os.close(fd)
        elif kind == "readonly" and mnt:
            subprocess.run(["mount", "-o", "remount,ro", mnt], check=False)
    except OSError:
        pass
print("done", flush=True)
"""


def _tmpfs() -> Iterator[str]:
    if os.geteuid() != 0:
        yield ""
        return
    mnt = tempfile.mkdtemp(prefix="kexpr-faults-")
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", mnt],
            capture_output=True,
            check=False,
        ).returncode
        != 0
    ):
        os.rmdir(mnt)
        yield ""
        return
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], check=False)
        os.rmdir(mnt)


@pytest.fixture(scope="module")
def tmpfs() -> Iterator[str]:
    yield from _tmpfs()


_KINDS = _DIR_KINDS + _PLANT_KINDS + (_FS_KINDS if os.geteuid() == 0 else ())
_mutation = st.tuples(
    st.sampled_from((0.0, 0.05, 0.2, 0.5, 0.9)),
    st.sampled_from(_TARGETS),
    st.sampled_from(_KINDS),
)


def _start_worker(root: DataRoot) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    provider = Provider()
    provider.reply = lambda capsule: httpx.Response(
        200, json=completion(composition_for(capsule, GENERATED))
    )
    client = build_client(http_client=httpx.Client(transport=httpx.MockTransport(provider.handler)))
    w = Worker(
        root,
        environ={"OPENAI_API_KEY": "sk-test", "PATH": "/usr/bin"},
        client_factory=lambda: client,
        rescan_interval_s=0.1,
    )
    stop, errors = threading.Event(), []

    def run() -> None:
        try:
            w.run(stop)
        except BaseException as e:  # noqa: BLE001 - the worker must not die of it (item 2)
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, stop, errors


def _restore(base: Path, mnt: str) -> None:
    if mnt:
        subprocess.run(["mount", "-o", "remount,rw", mnt], check=False)
        try:
            os.unlink(os.path.join(mnt, "filler"))
        except FileNotFoundError:
            pass
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            try:
                os.chmod(os.path.join(dirpath, d), 0o700, follow_symlinks=False)
            except (OSError, NotImplementedError):
                pass
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.e2e
@settings(
    max_examples=16,
    deadline=None,
    derandomize=True,
    suppress_health_check=(HealthCheck.function_scoped_fixture, HealthCheck.too_slow),
)
@given(
    phase=st.sampled_from(("before", "during")),
    plan=st.lists(_mutation, min_size=1, max_size=3),
    mode=st.sampled_from((Mode.ENABLED, Mode.SHADOW)),
    use_async=st.booleans(),
)
# The issue's own findings, always run (the old code raised on both).
@example(
    phase="before",
    plan=[(0.0, "spool/responses", "chmod_0755")],
    mode=Mode.ENABLED,
    use_async=False,
)
@example(
    phase="during", plan=[(0.05, "spool/responses", "symlink")], mode=Mode.SHADOW, use_async=True
)
def test_property_nothing_escapes_whatever_happens_to_the_data_root(
    tmp_path: Path,
    tmpfs: str,
    short_wait: None,
    phase: str,
    plan: list[tuple[float, str, str]],
    mode: Mode,
    use_async: bool,
) -> None:
    base = Path(tempfile.mkdtemp(dir=tmpfs or tmp_path))
    os.chmod(base, 0o700)
    root = DataRoot(base / "root")
    root.ensure()
    t, stop, errors = _start_worker(root)
    coord = coordinator(root.root, mode, weekly=True)
    try:
        # Started: the coordinator has its key, pin and observer.
        t0 = time.monotonic()
        first = present_styled(coord, "evt-0")
        _check(first, t0)
        if first.outcome is Outcome.ACCEPTED:
            coord.report(first, "selected")
        mutator = subprocess.Popen(
            [sys.executable, "-c", _MUTATOR, str(root.root), tmpfs, json.dumps(plan)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            if phase == "before":
                assert mutator.stdout is not None
                assert mutator.stdout.readline().strip() == "done"
            for n in range(2):
                t0 = time.monotonic()
                if use_async:
                    cand = asyncio.run(apresent_styled(coord, f"evt-{n + 1}"))
                else:
                    cand = present_styled(coord, f"evt-{n + 1}")
                _check(cand, t0)
                if cand.outcome is Outcome.ACCEPTED:
                    coord.report(cand, "selected")  # never raises for an OS state
        finally:
            mutator.wait(30)
            if mutator.stdout is not None:
                mutator.stdout.close()
    finally:
        coord.close()
        stop.set()
        t.join(30)
        _restore(base, tmpfs)
    assert not t.is_alive() and errors == []

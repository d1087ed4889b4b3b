"""The shim as a guest of an asyncio host: figures, never a timed test.

Runs N concurrent ``apresent_weekly`` calls on one event loop (the goal-missing
weekly report, the one message the fit table styles: the one that writes a
request), the way the Hermes
gateway would, and meanwhile issues what an unrelated part of the host would: a
``loop.getaddrinfo("localhost")`` and an ``asyncio.to_thread`` every 100 ms
(both use the loop's default executor), and a 10 ms ticker that measures the
loop's own lag. Two scenarios:

- ``worker_down``: the data root is set up and its worker has stopped (its
  heartbeat says ``stopped``): every presentation is ``worker_unavailable`` at
  once, no request written.
- ``worker_silent``: a ``ready`` heartbeat, but nothing answers: every
  presentation waits its whole 4 s and ends ``timeout`` (the worst wait: the
  shared re-check and the watcher). Bound: each returns
  within the wait + 0.5 s counted from the host's call; the host's calls
  complete in < 100 ms.
- ``slow_provider``: the real supervised worker and the loopback fake of the API
  (its own process, through the real CONNECT proxy), the fake answering after
  ``--delay`` seconds (2 s). Same bounds.

``--baseline`` adds the old shape (``asyncio.to_thread(present_weekly)``, each
wait holding a default-executor thread) with the silent worker, for comparison.

``-n`` defaults to 2,000 concurrent presentations.

Prints a table, then as its LAST line one JSON object with the figures.
``make bench-guest`` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the fake API is a test fixture
sys.path.insert(0, str(REPO / "bench"))

import announce  # noqa: E402  (bench/: imports nothing heavy, so it speaks first)

if __name__ == "__main__":  # before the imports below, which take seconds on a loaded machine
    announce.start("bench/guest.py", "four scenarios, 4 s waits", "30 s (40 s with --baseline)")
    announce.phase("import", "kexpr and the bench's round-trip module", "2-5 s")

from figures import apresent, pct, present  # noqa: E402
from kit.poll import wait_file  # noqa: E402  (tests/)
from run import supervised_worker  # noqa: E402

from gateway_shim import (  # noqa: E402
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    PresentationCandidate,
    exact_block,
)
from kexpr.spool.layout import DataRoot  # noqa: E402
from kexpr.spool.lifecycle import MAX_WAIT as WAIT  # noqa: E402

WAIT_S = WAIT.total_seconds()
PROBE_EVERY_S = 0.1
TICK_S = 0.01

# The fake API in its own process, answering after a delay (the CLI's modes have
# no 2 s one; this is the same server with the same composition).
_FAKE = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path
    from kexpr.worker.signalstop import SignalStop
    from fakeapi.replies import compose_reply, default_style
    from fakeapi.server import FakeOpenAI
    d, delay = Path(sys.argv[1]), float(sys.argv[2])
    stop = SignalStop()  # set by the handler: no lock
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    log = d / "requests.jsonl"
    log.touch()
    with FakeOpenAI(d, behaviour=compose_reply(default_style, delay_s=delay), request_log=log) as f:
        info = {"proxy_url": f.proxy_url, "ca_file": str(f.ca_file), "requests_log": str(log)}
        (d / "fake.tmp").write_text(json.dumps(info))
        os.replace(d / "fake.tmp", d / "fake.json")
        while not stop.wait(1.0):
            pass
    """
)


@contextmanager
def slow_fake(workdir: Path, delay: float) -> Iterator[dict[str, Any]]:
    d = workdir / "fake"
    d.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO / "tests")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _FAKE, str(d), str(delay)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_file(d / "fake.json", 10.0, 0.025)
        yield json.loads((d / "fake.json").read_text())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


@contextmanager
def heartbeat(root: Path, state: str) -> Iterator[None]:
    """A worker's heartbeat as the shim reads it, rewritten every second."""
    from kexpr.spool.fsio import replace_private

    doc = json.dumps({"schema": "kexpr-worker-status-v1", "state": state, "pid": os.getpid()})
    stop = threading.Event()

    def beat() -> None:
        while True:
            replace_private(DataRoot(root).status_file, doc.encode())
            if stop.wait(1.0):
                return

    t = threading.Thread(target=beat, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def coordinator(root: Path) -> KoreanExpressionCoordinator:
    config = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    return KoreanExpressionCoordinator(config, root)


Present = Callable[[KoreanExpressionCoordinator, str], Awaitable[PresentationCandidate]]


def native(coord: KoreanExpressionCoordinator, event_id: str) -> Awaitable[PresentationCandidate]:
    return apresent(coord, event_id)


def old_shape(
    coord: KoreanExpressionCoordinator, event_id: str
) -> Awaitable[PresentationCandidate]:
    """The old shape: the blocking call on the loop's default executor."""
    return asyncio.to_thread(present, coord, event_id)


async def host_under_load(
    coord: KoreanExpressionCoordinator, n: int, present: Present, tag: str
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    outcomes: dict[str, int] = {}
    probes: dict[str, list[float]] = {"getaddrinfo": [], "to_thread": []}
    lag: list[float] = []
    done = asyncio.Event()

    async def one(i: int) -> None:
        t0 = time.monotonic()
        cand = await present(coord, f"{tag}-{i}")
        latencies.append(time.monotonic() - t0)
        outcomes[cand.outcome.value] = outcomes.get(cand.outcome.value, 0) + 1

    async def prober() -> None:
        while not done.is_set():
            t0 = time.monotonic()
            await loop.getaddrinfo("localhost", 80)
            probes["getaddrinfo"].append(time.monotonic() - t0)
            t0 = time.monotonic()
            await asyncio.to_thread(lambda: None)
            probes["to_thread"].append(time.monotonic() - t0)
            await asyncio.sleep(PROBE_EVERY_S)

    async def ticker() -> None:
        while not done.is_set():
            t0 = time.monotonic()
            await asyncio.sleep(TICK_S)
            lag.append(time.monotonic() - t0 - TICK_S)

    threads_before = threading.active_count()
    side = [asyncio.create_task(prober()), asyncio.create_task(ticker())]
    await asyncio.sleep(0.2)  # the probes' own warm-up (the default executor's first thread)
    for p in probes.values():
        p.clear()
    peak = 0

    async def peak_threads() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, threading.active_count() - threads_before)
            await asyncio.sleep(0.05)

    side.append(asyncio.create_task(peak_threads()))
    t0 = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(n)))
    wall = time.monotonic() - t0
    done.set()
    await asyncio.gather(*side)
    return {
        "n": n,
        "wall_s": wall,
        "presentation_max_s": max(latencies),
        "presentation_p50_s": pct(latencies, 50),
        "within_wait_plus_0_5": sum(1 for x in latencies if x <= WAIT_S + 0.5),
        "outcomes": outcomes,
        "getaddrinfo_max_ms": 1000 * max(probes["getaddrinfo"]),
        "to_thread_max_ms": 1000 * max(probes["to_thread"]),
        "probes": len(probes["to_thread"]),
        "loop_lag_max_ms": 1000 * max(lag),
        "extra_threads_peak": peak,
    }


def scenario_without_answers(
    workdir: Path, n: int, present: Present, tag: str, state: str
) -> dict[str, Any]:
    """No worker answers; the heartbeat says ``state`` (``stopped``: down)."""
    root = workdir / f"{state}-{tag}" / "korean-expression-v1"
    root.parent.mkdir(mode=0o700)
    DataRoot(root).ensure()
    coord = coordinator(root)
    try:
        with heartbeat(root, state):
            return asyncio.run(host_under_load(coord, n, present, tag))
    finally:
        coord.close()


def scenario_stopped_one_at_a_time(workdir: Path, n: int) -> dict[str, Any]:
    """What a stopped worker costs ONE presentation (the target: < 50 ms p99):
    ``n`` presentations in turn, the heartbeat saying ``stopped``; each is answered
    at once (``worker_unavailable``) and writes no request."""
    root = workdir / "stopped-serial" / "korean-expression-v1"
    root.parent.mkdir(mode=0o700)
    DataRoot(root).ensure()
    coord = coordinator(root)
    seconds: list[float] = []
    outcomes: dict[str, int] = {}
    try:
        with heartbeat(root, "stopped"):
            time.sleep(0.1)  # the first beat is written
            for i in range(n):
                t0 = time.monotonic()
                cand = present(coord, f"serial-{i}")
                seconds.append(time.monotonic() - t0)
                outcomes[cand.outcome.value] = outcomes.get(cand.outcome.value, 0) + 1
    finally:
        coord.close()
    return {
        "n": n,
        "presentation_p50_ms": round(pct(seconds, 50) * 1000, 2),
        "presentation_p99_ms": round(pct(seconds, 99) * 1000, 2),
        "presentation_max_ms": round(max(seconds) * 1000, 2),
        "request_files": len(list(DataRoot(root).requests.iterdir())),
        "outcomes": outcomes,
    }


def scenario_slow_provider(workdir: Path, n: int, delay: float) -> dict[str, Any]:
    root = workdir / "slow" / "korean-expression-v1"
    root.parent.mkdir(mode=0o700)
    with slow_fake(workdir, delay) as fake, supervised_worker(root, fake):
        coord = coordinator(root)
        try:
            return asyncio.run(host_under_load(coord, n, native, "slow"))
        finally:
            coord.close()


def main() -> int:
    p = argparse.ArgumentParser(prog="bench/guest.py")
    p.add_argument("-n", type=int, default=2000, help="concurrent presentations")
    p.add_argument("--delay", type=float, default=2.0, help="the slow provider's delay (s)")
    p.add_argument("--baseline", action="store_true", help="also the old to_thread shape")
    p.add_argument("--baseline-n", type=int, default=24)
    args = p.parse_args()
    figures: dict[str, Any] = {"wait_s": WAIT_S, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="kexpr-bench-guest-") as tmp:
        workdir = Path(tmp)
        announce.phase(
            "stopped worker, one at a time",
            "300 present_weekly in turn, the heartbeat says stopped: each answered at once",
            "2 s",
        )
        figures["stopped_one_at_a_time"] = scenario_stopped_one_at_a_time(workdir, 300)
        print(json.dumps({"stopped_one_at_a_time": figures["stopped_one_at_a_time"]}), flush=True)
        announce.phase(
            "worker down",
            f"{args.n} concurrent apresent_weekly, the worker's heartbeat says stopped: "
            "each is answered at once (worker_unavailable)",
            "5 s",
        )
        figures["worker_down"] = scenario_without_answers(
            workdir, args.n, native, "down", "stopped"
        )
        announce.phase(
            "worker silent",
            f"{args.n} concurrent apresent_weekly, a ready heartbeat but no answer: "
            f"each waits out its {WAIT_S:.0f} s",
            f"{WAIT_S + 1:.0f} s",
        )
        figures["worker_silent"] = scenario_without_answers(
            workdir, args.n, native, "silent", "ready"
        )
        announce.phase(
            "slow provider",
            f"the fake API ({args.delay:g} s per answer) and a supervised worker start, "
            f"then {args.n} concurrent apresent_weekly",
            f"{WAIT_S + 6:.0f} s",
        )
        figures["slow_provider"] = scenario_slow_provider(workdir, args.n, args.delay)
        if args.baseline:
            announce.phase(
                "baseline",
                f"{args.baseline_n} asyncio.to_thread(present_weekly), a silent worker",
                f"{WAIT_S + 1:.0f} s",
            )
            figures["baseline_to_thread_worker_silent"] = scenario_without_answers(
                workdir, args.baseline_n, old_shape, "old", "ready"
            )
        announce.done()
    cols = (
        "n",
        "presentation_max_s",
        "presentation_p50_s",
        "within_wait_plus_0_5",
        "getaddrinfo_max_ms",
        "to_thread_max_ms",
        "loop_lag_max_ms",
        "extra_threads_peak",
    )
    print(f"{'scenario':<32}" + "".join(f"{c:>22}" for c in cols))
    for name, f in figures.items():
        if isinstance(f, dict) and all(c in f for c in cols):
            cells = "".join(
                f"{f[c]:>22.3f}" if isinstance(f[c], float) else f"{f[c]:>22}" for c in cols
            )
            print(f"{name:<32}{cells}")
            print(f"{'':<32}outcomes: {f['outcomes']}")
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

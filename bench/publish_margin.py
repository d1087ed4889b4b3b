"""The publish margin: what delivering an accepted answer costs
after the worker has decided it is in time, and whether any is paid and unused.

Two phases, figures only (this machine is shared and noisy; nothing is asserted):

1. **chain**: the worker's side of an accepted answer after its lateness check —
   the contract's judge of the content, the response built and published into
   its reservation (write, fsync, the no-replace move, directory fsync) — and
   the shim's side through the real watcher path (`gateway_shim._responses`:
   its watchdog observer on ``responses/``, the waiter's wake-up, the checked
   read and the strict parse). Sequential, then 8 publishers at once (the
   worker's call pool). p50/p99/p99.9/max in ms: the source of
   ``kexpr.worker.attempt.PUBLISH_MARGIN_S``.
2. **burst**: 1,000 artifacts (the goal-missing weekly report, the one message
   the fit table styles) from 20 gateway processes at once (enabled
   mode, real shims in real processes), the real supervised worker, the
   loopback fake answering after a random 0-300 ms. Paid-and-unused: accepted
   answers the worker published (its ``accepted`` counter) that no shim took
   (their ``accepted`` candidates): each one a billed call whose answer was
   published after its shim had stopped waiting. Also the worker's
   ``late_for_publish`` (answers back in time but inside the margin,
   discarded) and the wire requests per artifact (never more than one).

``python bench/publish_margin.py [--quick]``; the LAST line is one JSON object.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the fake API is a test fixture

from fakeapi import FakeOpenAI, FakeReply  # noqa: E402
from fakeapi.replies import capsule_of, compose, default_style, error_reply  # noqa: E402
from figures import SURFACE, UNCAPPED, present, summary  # noqa: E402  (bench/)
from kit.supervisor import supervised  # noqa: E402  (tests/)

from gateway_shim import (  # noqa: E402
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    Outcome,
    exact_block,
)
from gateway_shim._responses import ResponseWaiters, stop_watching, watch_responses  # noqa: E402
from kexpr.spool.contract import Capsule, judge, slot_policy  # noqa: E402
from kexpr.spool.fsio import read_private, reserve  # noqa: E402
from kexpr.spool.layout import DataRoot  # noqa: E402
from kexpr.spool.messages import (  # noqa: E402
    MAX_MESSAGE_BYTES,
    SPOOL_VERSION,
    ResponseStatus,
    SpoolResponse,
    parse_response,
)
from kexpr.worker.attempt import PUBLISH_MARGIN_S  # noqa: E402

KEY = "sk-bench-publish-margin"


def summary_ms(xs: list[float]) -> dict[str, float]:
    return summary(xs, (50, 99, 99.9), scale=1000)


# ------------------------------------------------------------------- 1. the chain


def _capsule(i: int) -> Capsule:
    return Capsule(
        schema_version="korean-expression-v4",
        surface=SURFACE,
        artifact_key=f"{i:064x}",
        # The goal-missing weekly's slot (branch I2): the one slot the fit table asks.
        slots=(
            slot_policy(
                "weekly.interpretation",
                ["P_WEEKLY_TREND_OBSERVED", "A_WEEKLY_HOLD_FOR_MISSING_GOAL"],
            ),
        ),
    )


def chain(work: Path, n: int, publishers: int) -> list[float]:
    """Seconds from the lateness check to the shim's parsed answer, ``n`` times."""
    root = DataRoot(work / f"chain-{publishers}" / "korean-expression-v1")
    root.root.parent.mkdir(mode=0o700)
    root.ensure()
    waiters = ResponseWaiters(root.responses)
    observer = watch_responses(waiters, root.responses)
    out: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        rid = f"{i:032x}"
        capsule = _capsule(i)
        content = json.dumps(
            compose(json.loads(capsule.to_json()), default_style(json.loads(capsule.to_json()))),
            ensure_ascii=False,
        )
        final = root.responses / f"{rid}.json"
        reservation = reserve(root.tmp, final, 512)  # before the call, as the worker does
        arrived = threading.Event()
        waiters.register(rid, arrived.set, time.monotonic() + 5)
        try:
            t0 = time.perf_counter()
            verdict = judge(capsule, content)  # worker: the contract's verdict
            resp = SpoolResponse(
                spool_version=SPOOL_VERSION,
                request_id=rid,
                attempt_id=f"{i:032x}",
                status=ResponseStatus.ACCEPTED,
                outcome=Outcome.ACCEPTED,
                composition=verdict.composition,
            )
            reservation.publish(resp.to_bytes(), durable=True)
            if not arrived.wait(5):  # shim: the watcher's wake-up
                raise SystemExit("no wake-up within 5 s")
            got = parse_response(read_private(final, max_bytes=MAX_MESSAGE_BYTES))
            t1 = time.perf_counter()
            assert got.request_id == rid
        finally:
            waiters.forget(rid)
        final.unlink()
        with lock:
            out.append(t1 - t0)

    try:
        with cf.ThreadPoolExecutor(max_workers=publishers) as pool:
            list(pool.map(one, range(n)))
    finally:
        stop_watching(observer)
        waiters.close()
    return out


# ------------------------------------------------------------------- 2. the burst


def shim_process(root: Path, n: int, tag: str, start_at: float) -> None:
    """One gateway process: ``n`` presentations at once at ``start_at`` (epoch)."""
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    coord = KoreanExpressionCoordinator(cfg, root)
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(n)

    def one(i: int) -> None:
        barrier.wait()
        cand = present(coord, f"pm-{tag}-{i}")
        if cand.outcome is Outcome.ACCEPTED:
            coord.report(cand, Outcome.SELECTED)
        with lock:
            outcomes[cand.outcome.value] += 1

    time.sleep(max(0.0, start_at - time.time()))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    coord.close()
    print(json.dumps(dict(outcomes)))


def supervised_worker(root: Path, fake: FakeOpenAI) -> AbstractContextManager[object]:
    """``kexpr supervise`` with the bench's key, the fake's proxy and the widest caps."""
    return supervised(root, fake=fake, key=KEY, args=UNCAPPED, stop_timeout=30)


def _random_delay(req: Any) -> FakeReply:
    capsule = capsule_of(req)
    if capsule is None:
        return error_reply(400, "no capsule in request", type_="invalid_request_error")
    return FakeReply(
        answer=compose(capsule, default_style(capsule)), delay_s=random.uniform(0.0, 0.3)
    )


def _worker_counters(root: Path) -> dict[str, Any]:
    status = json.loads((root / "worker.status.json").read_bytes())
    counters: dict[str, Any] = status["counters"]
    return counters


def burst(work: Path, processes: int, per_process: int) -> dict[str, Any]:
    root = work / "burst" / "korean-expression-v1"
    root.parent.mkdir(mode=0o700)
    with FakeOpenAI(work / "fake", behaviour=_random_delay) as fake, supervised_worker(root, fake):
        start_at = time.time() + 3.0  # every process imported and set up by then
        env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--shim", str(root), str(per_process), f"p{i}"]
                + [str(start_at)],
                env=env,
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
            )
            for i in range(processes)
        ]
        shim: Counter[str] = Counter()
        for p in procs:
            out, _ = p.communicate(timeout=120)
            shim.update(json.loads(out.decode().strip().splitlines()[-1]))
        # Two rescan ticks: the status file is the worker's heartbeat.
        time.sleep(2.5)
        counters = _worker_counters(root)
        per_artifact = Counter(fake.artifact_keys_seen()).values()
        unused = _unused_answers(root)
    accepted_published = int(counters["accepted"])
    return {
        "artifacts": processes * per_process,
        "processes": processes,
        "shim_outcomes": dict(shim),
        "worker_accepted": accepted_published,
        "shim_accepted": shim[Outcome.ACCEPTED.value],
        "paid_and_unused": accepted_published - shim[Outcome.ACCEPTED.value],
        "late_for_publish": int(counters.get("late_for_publish", 0)),
        "late_results": int(counters["late_results"]),
        "calls": int(counters["calls"]),
        "max_requests_per_artifact": max(per_artifact, default=0),
        # Of the paid-and-unused: published before deadline - margin (the worker
        # kept its side; the shim had stopped waiting earlier than the request's
        # deadline says) and after it.
        "unused_published_in_time": sum(1 for late in unused if late < -PUBLISH_MARGIN_S),
        "unused_published_late": sum(1 for late in unused if late >= -PUBLISH_MARGIN_S),
        "unused_publish_minus_deadline_ms": sorted(round(x * 1000, 1) for x in unused),
    }


def _unused_answers(root: Path) -> list[float]:
    """For every accepted answer still in responses/ (a taken one is reported and
    removed): its publication time (the file's mtime) minus its request's
    deadline (the journal's start row), in seconds."""
    from kexpr.spool.journal import parse_ts

    deadlines: dict[str, float] = {}
    for seg in sorted((root / "outcomes").glob("*.jsonl")):
        for line in seg.read_text().splitlines():
            row = json.loads(line)
            if "deadline_at_utc" in row:
                deadlines[row["attempt_id"]] = parse_ts(row["deadline_at_utc"]).timestamp()
    out: list[float] = []
    for f in (root / "spool" / "responses").glob("*.json"):
        try:
            resp = parse_response(f.read_bytes())
            mtime = f.stat().st_mtime
        except FileNotFoundError:
            continue  # its report was journaled meanwhile: it was taken
        if resp.status is ResponseStatus.ACCEPTED and resp.attempt_id in deadlines:
            out.append(mtime - deadlines[resp.attempt_id])
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--shim":
        _, _, root, per_process, tag, start_at = sys.argv
        shim_process(Path(root), int(per_process), tag, float(start_at))
        return 0
    p = argparse.ArgumentParser(prog="bench/publish_margin.py")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    n = 200 if a.quick else 1000
    figures: dict[str, Any] = {"quick": a.quick, "nproc": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="kexpr-margin-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        figures["chain_sequential_ms"] = summary_ms(chain(work, n, 1))
        figures["chain_8_publishers_ms"] = summary_ms(chain(work, n, 8))
        figures["burst"] = burst(work, 20, 10 if a.quick else 50)
    for name in ("chain_sequential_ms", "chain_8_publishers_ms"):
        s = figures[name]
        print(
            f"{name:<24} p50 {s['p50']:.2f}  p99 {s['p99']:.2f}  p99.9 {s['p999']:.2f}"
            f"  max {s['max']:.2f}  (n {s['n']:.0f})"
        )
    b = figures["burst"]
    print(
        f"burst {b['artifacts']} artifacts / {b['processes']} processes: paid-and-unused "
        f"{b['paid_and_unused']}  (worker accepted {b['worker_accepted']}, shims took "
        f"{b['shim_accepted']})  late_for_publish {b['late_for_publish']}  calls {b['calls']}"
        f"  max requests/artifact {b['max_requests_per_artifact']}"
    )
    print(
        f"  of the unused: published before deadline - margin {b['unused_published_in_time']},"
        f" later {b['unused_published_late']}  (publish - deadline, ms:"
        f" {b['unused_publish_minus_deadline_ms']})"
    )
    print(f"shim outcomes {json.dumps(b['shim_outcomes'], sort_keys=True)}")
    print(json.dumps(figures, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""kexpr benchmark harness: what the two-process isolation costs.

Runs, in one invocation on this machine, against the loopback fake of the API
(run in its own process, answering instantly, through the real CONNECT proxy):

- spool round trip: shim ``present_weekly`` (the goal-missing weekly report, the
  one message the fit table styles) + ``report`` -> accepted candidate,
  through the real supervised worker process;
- in-process baseline: the same durable work (journal start row with fsync, the
  call to the same fake, validation, render, terminal row with fsync) in one
  process without the spool;
- floor: the primitive costs on this disk (fsync of a small file, directory fsync,
  rename, one watchdog notification) and their sum for one accepted artifact;
- validation: µs per response (accepted / rejected) and render µs per surface;
- throughput: artifacts per second for a fixed time with 8 concurrent shims;
- start-up: worker start to ready with 36 daily segments x 1,000 attempts;
- time budget (`bench/time_budget.py`): the real worker against the fake
  whose model writes at published gpt-4.1-mini speeds, every surface with real host
  bodies (dual cards with 1..9 reasons): eligible or not (``nothing_to_style`` but
  the goal-missing weekly), share answered in time,
  p50/p95 presentation time, completion tokens;

Prints a table, then as its LAST line one JSON object with the figures.
Timing targets live here, never in unit tests: this machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the fake API is a test fixture

import announce  # noqa: E402  (bench/: imports nothing heavy, so it speaks first)

if __name__ == "__main__":  # before the imports below, which take seconds on a loaded machine
    announce.start(
        "bench/run.py",
        "quick profile" if "--quick" in sys.argv[1:] else "full profile",
        "1.5 min" if "--quick" in sys.argv[1:] else "5.5 min",
    )
    announce.phase("import", "kexpr, the OpenAI SDK and the fake API's modules", "2-5 s")

import time_budget  # noqa: E402
from figures import (  # noqa: E402  (bench/, this script's own directory)
    BODY,
    SURFACE,
    UNCAPPED,
    present,
    summary,
)
from kit.poll import wait_file  # noqa: E402  (tests/)
from kit.supervisor import Proxy, supervised  # noqa: E402

from gateway_shim import (  # noqa: E402
    KoreanExpressionConfig,
    KoreanExpressionCoordinator,
    Mode,
    exact_block,
)
from gateway_shim.surfaces.weekly import parse_weekly  # noqa: E402
from kexpr.spool.contract import Capsule, judge  # noqa: E402
from kexpr.spool.contract.answers import answer_json  # noqa: E402
from kexpr.spool.journal import (  # noqa: E402
    JOURNAL_SCHEMA,
    ZERO_DIGEST,
    Event,
    Journal,
    Outcome,
    Phase,
    canonical_json,
    format_ts,
)
from kexpr.spool.journal import (
    SpoolMode as JMode,
)
from kexpr.spool.layout import DataRoot  # noqa: E402

KEY = "sk-bench"


# --------------------------------------------------------------------- processes


@contextmanager
def fake_api(workdir: Path) -> Iterator[dict[str, Any]]:
    d = workdir / "fake"
    d.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO / "tests")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fakeapi", "--dir", str(d), "--mode", "accept"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    try:
        info_path = d / "fake.json"
        wait_file(info_path, 10.0, 0.025)
        info = json.loads(info_path.read_text())
        info["requests_log"] = str(d / "requests.jsonl")
        info["pid"] = proc.pid
        yield info
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


@contextmanager
def supervised_worker(root: Path, fake: dict[str, Any]) -> Iterator[subprocess.Popen[Any]]:
    """``kexpr supervise`` with the bench's key, the fake's proxy and the widest caps."""
    egress = Proxy(fake["proxy_url"], Path(fake["ca_file"]))
    with supervised(root, fake=egress, key=KEY, args=UNCAPPED, stop_timeout=30) as proc:
        yield proc


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads, dead ones included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_pid(root: Path) -> int:
    return int(json.loads((root / "worker.status.json").read_bytes())["pid"])


def requests_per_artifact(fake: dict[str, Any]) -> Counter[str]:
    counts: Counter[str] = Counter()
    path = Path(fake["requests_log"])
    if path.exists():
        for line in path.read_text().splitlines():
            key = json.loads(line).get("artifact_key")
            if key:
                counts[key] += 1
    return counts


# ------------------------------------------------------------------ measurements


def spool_round_trip(
    root: Path, n: int, tag: str, cpu: dict[str, float] | None = None, fake_pid: int | None = None
) -> list[float]:
    """``cpu``: filled with CPU ms per artifact of the shim (this process), the
    worker and the fake API, over the measured artifacts."""
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    coord = KoreanExpressionCoordinator(cfg, root)
    out: list[float] = []
    start: dict[str, float] = {}
    try:
        for i in range(-10, n):  # 10 warm-up artifacts
            if i == 0 and cpu is not None:
                start = {"shim": time.process_time(), "worker": proc_cpu_s(worker_pid(root))}
                if fake_pid is not None:
                    start["fake"] = proc_cpu_s(fake_pid)
            t0 = time.perf_counter()
            cand = present(coord, f"{tag}-{i}")
            if cand.outcome is not Outcome.ACCEPTED:
                raise SystemExit(f"spool round trip: unexpected outcome {cand.outcome}")
            coord.report(cand, Outcome.SELECTED)
            if i >= 0:
                out.append((time.perf_counter() - t0) * 1000)
        if cpu is not None:
            now = {"shim": time.process_time(), "worker": proc_cpu_s(worker_pid(root))}
            if fake_pid is not None:
                now["fake"] = proc_cpu_s(fake_pid)
            for k, v in now.items():
                cpu[f"cpu_{k}_ms_per_artifact"] = (v - start[k]) * 1000 / n
    finally:
        coord.close()
    return out


def in_process(
    root: Path, fake: dict[str, Any], n: int, cpu: dict[str, float] | None = None, tag: str = ""
) -> list[float]:
    """The same durable work without the spool: one process does it all."""
    os.environ.update(
        {"OPENAI_API_KEY": KEY, "HTTPS_PROXY": fake["proxy_url"], "SSL_CERT_FILE": fake["ca_file"]}
    )
    from gateway_shim.identity import artifact_key
    from kexpr.worker.provider import build_client, call_once

    client = build_client()
    assert client is not None
    data = DataRoot(root)
    data.ensure()
    journal = Journal(data)
    journal.load()
    key = os.urandom(32)
    out: list[float] = []
    c0 = 0.0
    for i in range(-10, n):
        if i == 0:
            c0 = time.process_time()
        t0 = time.perf_counter()
        surface = parse_weekly(BODY, explicit_fields=())
        akey = artifact_key(key, (SURFACE, f"inproc-{tag}-{i}"))
        capsule = Capsule(
            schema_version="korean-expression-v4",
            surface=SURFACE,
            artifact_key=akey,
            slots=tuple(s.policy() for s in surface.slots),
        )
        now = dt.datetime.now(dt.UTC)
        with journal.locked() as j:
            rec = j.append_start(
                artifact_key=akey,
                surface=SURFACE,
                mode=JMode.ENABLED,
                attempt_id=os.urandom(16).hex(),
                started_at=now,
                deadline_at_utc=format_ts(now + dt.timedelta(seconds=4)),
            )
        result = call_once(client, capsule.to_json())
        assert result.outcome is None and result.content is not None
        verdict = judge(capsule, result.content)
        assert verdict.composition is not None
        surface.render({s.slot_id: s.generated_ko for s in verdict.composition.slots})
        with journal.locked() as j:
            j.append_terminal(
                rec, Phase.AWAITING_REPORT, Event.REPORT, Outcome.SELECTED, dt.datetime.now(dt.UTC)
            )
        if i >= 0:
            out.append((time.perf_counter() - t0) * 1000)
    if cpu is not None:
        cpu["cpu_inproc_ms_per_artifact"] = (time.process_time() - c0) * 1000 / n
    for k in ("OPENAI_API_KEY", "HTTPS_PROXY", "SSL_CERT_FILE"):
        os.environ.pop(k, None)
    return out


def floor(workdir: Path, reps: int) -> dict[str, float]:
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    d = workdir / "floor"
    d.mkdir()
    (d / "w").mkdir()
    fsync_file, fsync_dir, rename, notify = [], [], [], []
    got = threading.Event()
    stamp: list[float] = [0.0]

    class H(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            if not stamp[0]:
                stamp[0] = time.perf_counter()
                got.set()

    obs = Observer()
    obs.schedule(H(), str(d / "w"), recursive=True)
    obs.start()
    try:
        for i in range(reps):
            p = d / f"f{i}"
            t0 = time.perf_counter()
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, b"x" * 512)
            os.fsync(fd)
            os.close(fd)
            fsync_file.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(dfd)
            os.close(dfd)
            fsync_dir.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            os.rename(p, d / f"g{i}")
            rename.append((time.perf_counter() - t0) * 1000)
            got.clear()
            stamp[0] = 0.0
            t0 = time.perf_counter()
            fd = os.open(d / "w" / f"n{i}", os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
            if got.wait(2):
                notify.append((stamp[0] - t0) * 1000)
    finally:
        obs.stop()
        obs.join(5)
    f = {
        "fsync_file_ms": statistics.median(fsync_file),
        "fsync_dir_ms": statistics.median(fsync_dir),
        "rename_ms": statistics.median(rename),
        "watchdog_notify_ms": statistics.median(notify),
    }
    # One accepted artifact on the spool path beyond what in-process also does
    # (2 journal fsyncs, the call, validation, render): the report published
    # durably (file fsync + directory fsync), the request and the response
    # published without fsync (one link each, counted as a rename), one claim
    # rename, and two notifications (worker wake, shim wake).
    f["floor_ms"] = (
        f["fsync_file_ms"] + f["fsync_dir_ms"] + 3 * f["rename_ms"] + 2 * f["watchdog_notify_ms"]
    )
    return f


def validation(reps: int) -> dict[str, float]:
    surface = parse_weekly(BODY, explicit_fields=())
    capsule = Capsule(
        schema_version="korean-expression-v4",
        surface=SURFACE,
        artifact_key="a" * 64,
        slots=tuple(s.policy() for s in surface.slots),
    )

    def doc(generated: str) -> str:
        return answer_json(capsule, lambda _slot_id: generated, compact=False)

    # One of the slot's two compositions, and a word the table does not allow there.
    good, bad = doc("[[P:01]]. 다만 [[A:01]]."), doc("[[P:01]]. 그리고 [[A:01]].")
    assert judge(capsule, good).composition is not None and judge(capsule, bad).composition is None

    def per_call(fn: Callable[[], object]) -> float:
        for _ in range(200):
            fn()
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn()
        return (time.perf_counter_ns() - t0) / reps / 1000

    return {
        "validate_accept_us": per_call(lambda: judge(capsule, good)),
        "validate_reject_us": per_call(lambda: judge(capsule, bad)),
        "render_weekly_us": per_call(
            lambda: surface.render({"weekly.interpretation": "[[P:01]]. 다만 [[A:01]]."})
        ),
        "parse_weekly_us": per_call(lambda: parse_weekly(BODY, explicit_fields=())),
    }


def throughput(
    root: Path, fake: dict[str, Any], seconds: float, shims: int = 8
) -> dict[str, float]:
    cfg = KoreanExpressionConfig.from_block(exact_block(Mode.ENABLED, weekly=True))
    before = requests_per_artifact(fake)
    stop = time.monotonic() + seconds
    keys: list[str] = []
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def shim(n: int) -> None:
        coord = KoreanExpressionCoordinator(cfg, root)
        i = 0
        try:
            while time.monotonic() < stop:
                cand = present(coord, f"tp-{n}-{i}")
                if cand.outcome is Outcome.ACCEPTED:
                    coord.report(cand, Outcome.SELECTED)
                with lock:
                    outcomes[cand.outcome.value] += 1
                    if cand.artifact_key:
                        keys.append(cand.artifact_key)
                i += 1
        finally:
            coord.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=shim, args=(n,)) for n in range(shims)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    time.sleep(0.5)
    after = requests_per_artifact(fake)
    counts = {k: after[k] - before.get(k, 0) for k in keys}
    lost = sum(1 for k in keys if counts.get(k, 0) == 0) + sum(
        v for o, v in outcomes.items() if o != "accepted"
    )
    duplicated = sum(1 for v in counts.values() if v > 1)
    return {
        "throughput_per_s": outcomes["accepted"] / elapsed,
        "presented": float(len(keys)),
        "lost": float(lost),
        "duplicated": float(duplicated),
        "tp_outcomes": dict(outcomes),  # type: ignore[dict-item]
    }


def build_journal(root: DataRoot, days: int, per_day: int) -> None:
    """Write `days` verified segments of `per_day` attempts each, by hand."""
    root.ensure()
    today = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    for d in range(days):
        day = today - dt.timedelta(days=d)
        lines = []
        prev, seq = ZERO_DIGEST, 0
        for a in range(per_day):
            start = day + dt.timedelta(seconds=a)
            base = {
                "schema_version": JOURNAL_SCHEMA,
                "artifact_key": hashlib.sha256(f"{d}-{a}".encode()).hexdigest(),
                "surface": SURFACE,
                "mode": "shadow",
                "attempt_id": hashlib.md5(f"{d}-{a}".encode()).hexdigest(),
                "started_at_utc": format_ts(start),
                "deadline_at_utc": format_ts(start + dt.timedelta(seconds=4)),
            }
            for state, outcome, fin in (
                ("attempt_started", "attempt_started", None),
                ("finalized", "shadow_selected", format_ts(start + dt.timedelta(seconds=1))),
            ):
                seq += 1
                row = {
                    **base,
                    "sequence": seq,
                    "state": state,
                    "outcome": outcome,
                    "finalized_at_utc": fin,
                    "previous_row_digest": prev,
                }
                prev = hashlib.sha256(canonical_json(row).encode()).hexdigest()
                row["row_digest"] = prev
                lines.append(canonical_json(row))
        path = root.outcomes / f"{day:%Y-%m-%d}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, ("\n".join(lines) + "\n").encode())
        os.close(fd)


def worker_ready_s(root: DataRoot) -> float:
    """Process start -> ``ready``, with a key (the SDK is imported and its
    resources loaded before ready), polled every 10 ms."""
    from kexpr.worker.daemon import wait_ready

    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OPENAI_API_KEY": KEY}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kexpr.worker", "--data-root", str(root.root)], env=env
    )
    try:
        ok = wait_ready(root, 60, pid=proc.pid, poll_s=0.01)
        ready_s = time.perf_counter() - t0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    if not ok:
        raise SystemExit("worker did not become ready")
    status = json.loads(root.status_file.read_bytes())
    assert status["journal"] == "verified"
    return ready_s


def startup(workdir: Path, days: int, per_day: int) -> dict[str, float]:
    empty = DataRoot(workdir / "startup-empty" / "korean-expression-v1")
    empty.root.parent.mkdir(mode=0o700)
    empty.ensure()
    root = DataRoot(workdir / "startup" / "korean-expression-v1")
    root.root.parent.mkdir(mode=0o700)
    build_journal(root, days, per_day)
    t0 = time.perf_counter()
    idx = Journal(root).load()
    load_s = time.perf_counter() - t0
    assert len(idx.by_attempt) == days * per_day
    # Median of 3 each: one start is one sample of a noisy machine.
    empty_s = statistics.median(worker_ready_s(empty) for _ in range(3))
    ready_s = statistics.median(worker_ready_s(root) for _ in range(3))
    return {"startup_s": ready_s, "startup_empty_s": empty_s, "index_rebuild_s": load_s}


def main() -> int:
    p = argparse.ArgumentParser(prog="bench/run.py")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    n = 200 if a.quick else 1000
    tp_s = 10.0 if a.quick else 30.0
    figures: dict[str, Any] = {"quick": a.quick, "nproc": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="kexpr-bench-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        announce.phase(
            "validation",
            f"judge() accept/reject, render and parse, {2000 if a.quick else 10000:,} calls each",
            "2 s" if a.quick else "8 s",
        )
        figures.update(validation(2000 if a.quick else 10000))
        announce.phase(
            "floor",
            f"file fsync, directory fsync, rename, one watchdog notification, "
            f"{50 if a.quick else 200} times each",
            "1 s" if a.quick else "3 s",
        )
        figures.update(floor(work, 50 if a.quick else 200))
        cpu: dict[str, float] = {}
        cpu_blocks: list[dict[str, float]] = []
        inproc: list[float] = []
        spool: list[float] = []
        announce.phase(
            "round trip",
            f"the fake API and a supervised worker start, then {n} artifacts through the "
            f"spool and {n} in one process, in alternating blocks",
            "10 s" if a.quick else "40 s",
        )
        with fake_api(work) as fake:
            root = work / "spool" / "korean-expression-v1"
            root.parent.mkdir(mode=0o700)
            with supervised_worker(root, fake):
                # Alternating blocks, so that both paths see the same machine:
                # on a shared host the load drifts within a minute, and one
                # block of each measured minutes apart moved the ratio by ±40 %.
                blocks = 2 if a.quick else 5
                for b in range(blocks):
                    block: dict[str, float] = {}
                    inproc += in_process(
                        work / "inproc" / "korean-expression-v1",
                        fake,
                        n // blocks,
                        block,
                        tag=f"b{b}",
                    )
                    spool += spool_round_trip(root, n // blocks, f"rt{b}", block, fake["pid"])
                    cpu_blocks.append(block)
                cpu = {k: statistics.mean(bl[k] for bl in cpu_blocks) for k in cpu_blocks[0]}
                announce.phase(
                    "throughput",
                    f"8 concurrent shims for {tp_s:.0f} s against the same worker",
                    f"{tp_s + 2:.0f} s",
                )
                figures.update(throughput(root, fake, tp_s))
        figures.update(cpu)
        # What one Python process doing the in-process work could sustain at
        # best (its CPU per artifact, one core: the GIL): the bar for the
        # throughput figure, which adds the spool's own CPU on top.
        figures["inproc_ceiling_per_s"] = 1000 / cpu["cpu_inproc_ms_per_artifact"]
        announce.phase(
            "start-up",
            "a 36-day x 1,000-attempt journal written, then 3 worker starts on it "
            "and 3 on an empty one",
            "15 s",
        )
        figures.update(startup(work, 36, 1000))
        # Last: its worker and fake are its own, and its calls mostly sleep.
        # (bench/time_budget.py announces itself.)
        figures["time_budget"] = time_budget.run(work, a.quick)
        announce.done()
    s, i = summary(spool), summary(inproc)
    figures.update(
        {
            "spool_p50_ms": s["p50"],
            "spool_p90_ms": s["p90"],
            "spool_p99_ms": s["p99"],
            "spool_max_ms": s["max"],
            "inproc_p50_ms": i["p50"],
            "inproc_p90_ms": i["p90"],
            "inproc_p99_ms": i["p99"],
            "inproc_max_ms": i["max"],
            "ratio_p50": s["p50"] / i["p50"],
            "ratio_p99": s["p99"] / i["p99"],
            "overhead_p50_ms": s["p50"] - i["p50"],
            "artifacts": n,
        }
    )
    rows = [
        (
            "spool round trip (ms)",
            f"p50 {s['p50']:.2f}  p90 {s['p90']:.2f}  p99 {s['p99']:.2f}  max {s['max']:.2f}",
        ),
        (
            "in-process baseline (ms)",
            f"p50 {i['p50']:.2f}  p90 {i['p90']:.2f}  p99 {i['p99']:.2f}  max {i['max']:.2f}",
        ),
        (
            "ratio spool/in-process",
            f"p50 {figures['ratio_p50']:.2f}  p99 {figures['ratio_p99']:.2f}  overhead p50 {figures['overhead_p50_ms']:.2f} ms",
        ),
        (
            "floor (ms)",
            f"fsync {figures['fsync_file_ms']:.3f}  dir fsync {figures['fsync_dir_ms']:.3f}  rename {figures['rename_ms']:.3f}  notify {figures['watchdog_notify_ms']:.3f}  sum {figures['floor_ms']:.2f}",
        ),
        (
            "validation (µs)",
            f"accept {figures['validate_accept_us']:.1f}  reject {figures['validate_reject_us']:.1f}  render weekly {figures['render_weekly_us']:.1f}  parse weekly {figures['parse_weekly_us']:.1f}",
        ),
        (
            "throughput (8 shims)",
            f"{figures['throughput_per_s']:.1f}/s  presented {figures['presented']:.0f}  lost {figures['lost']:.0f}  duplicated {figures['duplicated']:.0f}  (in-process ceiling {figures['inproc_ceiling_per_s']:.0f}/s)",
        ),
        (
            "cpu per artifact (ms)",
            f"in-process {figures['cpu_inproc_ms_per_artifact']:.2f}  spool: shim {figures['cpu_shim_ms_per_artifact']:.2f}  worker {figures['cpu_worker_ms_per_artifact']:.2f}  fake API {figures['cpu_fake_ms_per_artifact']:.2f}",
        ),
        (
            "start-up (36 x 1000)",
            f"worker ready {figures['startup_s']:.2f} s  (empty journal {figures['startup_empty_s']:.2f} s)  index rebuild alone {figures['index_rebuild_s']:.2f} s",
        ),
    ]
    w = max(len(r[0]) for r in rows)
    for name, val in rows:
        print(f"{name:<{w}}  {val}")
    print(time_budget.render(figures["time_budget"]))
    print(json.dumps(figures, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

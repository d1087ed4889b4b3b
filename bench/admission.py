"""The bench's admission phase: does the speed model refuse what would arrive?

A SIMULATION, not a run of processes: the worker's own speed model
(`kexpr.worker.speed.SpeedModel`, the code the worker runs) is driven by a
simulated paced provider on an injected monotonic clock, so the figures are
deterministic for a seed and take seconds, where the same presentations through the
real processes would take hours. What is simulated, and from where:

- the shapes: every eligible shape of the time-budget phase (`bench/time_budget.py`:
  real host bodies through the shim's parsers, so the shim's own budget bounds), and
  each answer's completion tokens counted with the real encoding (o200k_base) on the
  brief-style compact answer the fake's model writes (`fakeapi.brief_style`), each
  presentation a fresh random 128-bit key;
- a call's time: ``first_token + completion_tokens / rate`` (the fake's model,
  `tests/fakeapi/generation.py` Rule 2) plus the host's part of a call, drawn from
  0.01-0.06 s; a first token drawn for every call from 0.3 / 0.5 / 0.7 / 0.9 s
  (seeded): the published spread, interleaved call to call;
- one artifact at a time: each request has the shim's 4 s from its submission, is
  judged by ``SpeedModel.admit`` 20 ms later with ``deadline - publish margin - now``
  left, as `kexpr.worker.attempt` does, and a call that takes longer than the
  client's 3 s timeout (or than the time left) ends ``timeout`` and is observed as
  one; the next presentation follows its answer by ``gap`` seconds.

Printed, per phase: presentations, the **arrivable calls refused** (a presentation
whose answer would have arrived with the first token drawn for it, refused
``provider_too_slow``) and the **calls made that could not arrive**, each also
without the *draw-decided* presentations (a shape that arrives at some of the
spread's first tokens and not at others: no admission that cannot see the call's
own first token gets those right), and the targets as met or not (figures, never
asserted). Then the calls needed to re-admit after 77 -> 110 tokens/s (successful
calls of any shape after the switch until a shape refused at 77 that arrives at
110 whatever the first token is admitted), over many seeded trials; a low-traffic
phase (one call every 3 minutes, so calls expire); and the two measured sequences
of the regression tests.

``python bench/admission.py [--quick] [--seed N]`` runs this phase alone;
``bench/run.py`` runs it too.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the fake API's model is a test fixture

import announce  # noqa: E402  (bench/)

from kexpr.spool.contract.budget import SDK_TIMEOUT_S  # noqa: E402
from kexpr.worker.attempt import PUBLISH_MARGIN_S  # noqa: E402
from kexpr.worker.speed import SpeedModel  # noqa: E402

FIRST_TOKENS = (0.3, 0.5, 0.7, 0.9)
RATES = (77.0, 110.0)
DEADLINE_S = 4.0
CLAIM_S = 0.02  # the request's way through the spool to the worker's admission
OVERHEAD_S = (0.01, 0.06)  # the host's part of a call
TARGET_REFUSED = 0.01  # arrivable calls refused, at most
TARGET_DOOMED_77 = 0.05  # calls made that could not arrive at 77 tokens/s, at most
TARGET_READMIT = 4  # successful calls to re-admit after 77 -> 110, at most


@dataclass(frozen=True)
class Shape:
    label: str
    bound: int
    tokens: tuple[int, ...]  # completion tokens of the brief compact answer, per key


def shapes(keys: int, seed: int) -> list[Shape]:
    """The time-budget phase's eligible shapes, with their answers' real token
    counts over ``keys`` random keys, seeded (the shim's bound is key-independent)."""
    import time_budget
    from fakeapi import brief_style
    from fakeapi.generation import count_tokens, render_answer
    from fakeapi.replies import compose

    from kexpr.spool.contract import Capsule

    rng = random.Random(seed)
    out = []
    for case in time_budget.cases():
        if time_budget.eligibility(case) != "eligible":
            continue
        surface = case.parse()
        slots = tuple(s.policy() for s in surface.slots)
        if not slots:
            continue  # nothing to style (a card whose every line is locked): never sent
        counts = []
        for _ in range(keys):
            capsule = Capsule(
                schema_version="korean-expression-v4",
                surface=case.surface,
                artifact_key=f"{rng.getrandbits(128):032x}",
                slots=slots,
            )
            raw = json.loads(capsule.to_json())
            counts.append(count_tokens(render_answer(compose(raw, brief_style(raw)), "compact")))
        bound = surface.answer_token_bound()
        assert bound is not None
        out.append(Shape(case.label, bound, tuple(sorted(counts))))
    return out


def seconds_left() -> float:
    return DEADLINE_S - CLAIM_S - PUBLISH_MARGIN_S


def call_limit() -> float:
    return min(SDK_TIMEOUT_S, seconds_left())


def draw_decided(shape: Shape, rate: float) -> bool:
    """Whether the shape's arrival depends on the first token drawn: it arrives at
    the fastest draw and not at the slowest."""
    fast = FIRST_TOKENS[0] + shape.tokens[-1] / rate + OVERHEAD_S[1] <= call_limit()
    slow = FIRST_TOKENS[-1] + shape.tokens[0] / rate + OVERHEAD_S[0] <= call_limit()
    return fast != slow or (
        FIRST_TOKENS[0] + shape.tokens[0] / rate <= call_limit()
        and not FIRST_TOKENS[-1] + shape.tokens[-1] / rate + OVERHEAD_S[1] <= call_limit()
    )


@dataclass
class Tally:
    presentations: int = 0
    arrivable: int = 0
    refused_arrivable: int = 0
    called: int = 0
    called_doomed: int = 0
    # the same without the draw-decided presentations
    decided_arrivable: int = 0
    decided_refused_arrivable: int = 0
    decided_called: int = 0
    decided_called_doomed: int = 0
    by_shape: dict[str, list[int]] = field(default_factory=dict)  # [n, arrivable, called, arrived]

    def add(self, shape: Shape, arrivable: bool, called: bool, decided: bool) -> None:
        self.presentations += 1
        self.arrivable += arrivable
        self.refused_arrivable += arrivable and not called
        self.called += called
        self.called_doomed += called and not arrivable
        if not decided:
            self.decided_arrivable += arrivable
            self.decided_refused_arrivable += arrivable and not called
            self.decided_called += called
            self.decided_called_doomed += called and not arrivable
        row = self.by_shape.setdefault(shape.label, [0, 0, 0, 0])
        row[0] += 1
        row[1] += arrivable
        row[2] += called
        row[3] += called and arrivable

    def json(self) -> dict[str, Any]:
        def share(a: int, b: int) -> float | None:
            return None if not b else a / b

        # The floor: a rule that cannot see a call's own first token but knows each
        # shape's true arrival share, admitting a shape iff most of its calls arrive.
        floor_refused = floor_doomed = floor_called = 0
        for n, arrivable, _, _ in self.by_shape.values():
            if 2 * arrivable > n:
                floor_called += n
                floor_doomed += n - arrivable
            else:
                floor_refused += arrivable
        return {
            "floor_refused_arrivable_share": share(floor_refused, self.arrivable),
            "floor_called_doomed_share": share(floor_doomed, floor_called),
            "presentations": self.presentations,
            "arrivable": self.arrivable,
            "refused_arrivable": self.refused_arrivable,
            "refused_arrivable_share": share(self.refused_arrivable, self.arrivable),
            "called": self.called,
            "called_doomed": self.called_doomed,
            "called_doomed_share": share(self.called_doomed, self.called),
            "decided_refused_arrivable_share": share(
                self.decided_refused_arrivable, self.decided_arrivable
            ),
            "decided_called_doomed_share": share(self.decided_called_doomed, self.decided_called),
            "by_shape": self.by_shape,
        }


class Simulation:
    """The model, a clock, and a paced provider (module docstring)."""

    def __init__(self, seed: int, noise: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.noise = noise  # each call's rate within +-noise of the provider's
        self.model = SpeedModel()
        self.now = 1000.0

    def present(
        self, shape: Shape, rate: float, first: float | None = None, gap: float = 1.0
    ) -> tuple[bool, bool]:
        """One presentation: (arrivable, called)."""
        first = self.rng.choice(FIRST_TOKENS) if first is None else first
        tokens = self.rng.choice(shape.tokens)
        if self.noise:
            rate *= self.rng.uniform(1 - self.noise, 1 + self.noise)
        took = first + tokens / rate + self.rng.uniform(*OVERHEAD_S)
        self.now += CLAIM_S
        left = seconds_left()
        limit = min(SDK_TIMEOUT_S, left)
        arrivable = took <= limit
        called = self.model.admit(self.now, shape.bound, left).admitted
        if called:
            if arrivable:
                self.now += took
                self.model.observe(self.now, took, tokens, shape.bound)
            else:
                self.now += limit
                self.model.timed_out(self.now, limit, shape.bound)
        self.now += gap
        return arrivable, called


def steady(
    all_shapes: list[Shape], rate: float, n: int, seed: int, gap: float = 1.0, noise: float = 0.0
) -> Tally:
    """``n`` presentations at ``rate``, the shapes in seeded random order (each as
    often), first tokens drawn per call, from a cold model."""
    sim = Simulation(seed, noise)
    order = random.Random(seed + 1)
    tally = Tally()
    deck: list[Shape] = []
    for _ in range(n):
        if not deck:
            deck = list(all_shapes)
            order.shuffle(deck)
        shape = deck.pop()
        arrivable, called = sim.present(shape, rate, gap=gap)
        tally.add(shape, arrivable, called, draw_decided(shape, rate))
    return tally


def readmission(all_shapes: list[Shape], trials: int, warm: int, seed: int) -> dict[str, Any]:
    """77 -> 110 tokens/s after ``warm`` presentations at 77: the successful calls
    (any shape) after the switch until every shape the model refused at the end of
    the 77 phase that arrives at 110 whatever the draw is admitted again."""
    needed: list[int] = []
    never = 0
    for trial in range(trials):
        sim = Simulation(seed + 1000 + trial)
        order = random.Random(seed + 2000 + trial)
        for _ in range(warm):
            sim.present(order.choice(all_shapes), 77.0)
        refused = [
            s
            for s in all_shapes
            if not sim.model.fits(sim.now, s.bound, seconds_left())
            and not draw_decided(s, 110.0)
            and FIRST_TOKENS[-1] + s.tokens[-1] / 110.0 + OVERHEAD_S[1] <= call_limit()
        ]
        if not refused:
            continue
        successes = 0
        for _ in range(200):
            if all(sim.model.fits(sim.now, s.bound, seconds_left()) for s in refused):
                needed.append(successes)
                break
            shape = order.choice(all_shapes)
            arrivable, called = sim.present(shape, 110.0)
            successes += arrivable and called
        else:
            never += 1
    return {
        "trials": trials,
        "with_a_refused_shape": len(needed) + never,
        "never_readmitted": never,
        "median": statistics.median(needed) if needed else None,
        "p90": sorted(needed)[max(0, round(0.9 * len(needed)) - 1)] if needed else None,
        "max": max(needed) if needed else None,
    }


def slowdown(all_shapes: list[Shape], trials: int, warm: int, seed: int) -> dict[str, Any]:
    """110 -> 77 tokens/s after ``warm`` presentations at 110: the calls made after
    the switch that could not arrive, over the next 30 presentations."""
    doomed: list[int] = []
    for trial in range(trials):
        sim = Simulation(seed + 3000 + trial)
        order = random.Random(seed + 4000 + trial)
        for _ in range(warm):
            sim.present(order.choice(all_shapes), 110.0)
        n = 0
        for _ in range(30):
            arrivable, called = sim.present(order.choice(all_shapes), 77.0)
            n += called and not arrivable
        doomed.append(n)
    return {
        "trials": trials,
        "median": statistics.median(doomed),
        "max": max(doomed),
        "steady_77_per_30": None,
    }


STEPS = (
    (110.0, 0.3),
    (77.0, 0.5),
    (55.0, 0.3),
    (77.0, 0.3),
    (110.0, 0.9),
    (55.0, 0.5),
    (110.0, 0.3),
)


def stepped(all_shapes: list[Shape], trials: int, per_step: int, seed: int) -> dict[str, Any]:
    """The provider's speed in steps, each with one constant first token (the
    time-budget phase's kind of change: a slower provider whose first token
    happens to hide it), ``per_step`` presentations each: per step, the calls
    made that could not arrive and the arrivable calls refused."""
    rows = []
    for rate, first in STEPS:
        rows.append({"tokens_per_s": rate, "first_token_s": first, "doomed": 0, "refused": 0})
    n = 0
    for trial in range(trials):
        sim = Simulation(seed + 5000 + trial)
        order = random.Random(seed + 6000 + trial)
        for row, (rate, first) in zip(rows, STEPS, strict=True):
            for _ in range(per_step):
                arrivable, called = sim.present(order.choice(all_shapes), rate, first)
                row["doomed"] += called and not arrivable
                row["refused"] += arrivable and not called
                n += 1
    return {"trials": trials, "per_step": per_step, "presentations": n, "steps": rows}


def sequences(all_shapes: list[Shape]) -> dict[str, list[str]]:
    """The pattern of the regression tests' two sequences, on the shapes the fit table
    asks (the goal-missing weekly; the daily, physique and dual cards they were
    measured with have nothing to style), real token counts, exact first tokens:
    three rounds at 77 tokens/s after 0.5 s then 0.3 s; then 8 at 77 after 0.7 s and
    one more, 8 at 110 after 0.3 s and one more."""

    def word(arrivable: bool, called: bool) -> str:
        return ("arrived" if arrivable else "timeout") if called else "refused"

    sim = Simulation(7)
    first: list[str] = []
    for _ in range(3):
        for shape in all_shapes:
            for ft in (0.5, 0.3):
                first.append(f"{shape.label} {word(*sim.present(shape, 77.0, ft))}")
    sim = Simulation(8)
    second: list[str] = []
    for shape in all_shapes:
        for rate, ft in ((77.0, 0.7), (110.0, 0.3)):
            slow = [word(*sim.present(shape, rate, ft)) for _ in range(8)]
            then = word(*sim.present(shape, rate, ft))
            arrived = slow.count("arrived")
            second.append(f"8 at {rate:.0f}/{ft} ({arrived} arrived): {shape.label} {then}")
    return {"three_rounds_77": first, "slow_then_fast": second}


def run(quick: bool, seed: int = 33) -> dict[str, Any]:
    announce.phase(
        "admission",
        "the speed model against a simulated paced provider (injected clock): interleaved first tokens at 77 and 110 t/s",
        "10 s" if quick else "1 min",
    )
    t0 = time.monotonic()
    all_shapes = shapes(20 if quick else 100, seed)
    n = 600 if quick else 3000
    out: dict[str, Any] = {
        "simulation": True,
        "seed": seed,
        "shapes": [
            {"shape": s.label, "bound": s.bound, "tokens": [s.tokens[0], s.tokens[-1]]}
            for s in all_shapes
        ],
        "steady": {
            str(int(rate)): steady(all_shapes, rate, n, seed + int(rate)).json() for rate in RATES
        },
        "low_traffic_77": steady(
            all_shapes, 77.0, 40 if quick else 120, seed + 7, gap=180.0
        ).json(),
        "readmission": readmission(all_shapes, 30 if quick else 200, 60, seed),
        "slowdown": slowdown(all_shapes, 30 if quick else 200, 60, seed),
        "stepped": stepped(all_shapes, 5 if quick else 20, 30, seed),
        "noise": {
            str(int(rate)): steady(all_shapes, rate, n, seed + int(rate), noise=0.08).json()
            for rate in RATES
        },
        "sequences": sequences(all_shapes),
    }
    out["phase_s"] = time.monotonic() - t0
    return out


def targets(result: dict[str, Any]) -> list[tuple[str, bool | None, str]]:
    out: list[tuple[str, bool | None, str]] = []

    def pc(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f} %"

    for rate, t in result["steady"].items():
        raw, decided = t["refused_arrivable_share"], t["decided_refused_arrivable_share"]
        out.append(
            (
                f"{rate} t/s: arrivable calls refused <= {TARGET_REFUSED:.0%}",
                raw is not None and raw <= TARGET_REFUSED,
                f"{pc(raw)} ({t['refused_arrivable']} of {t['arrivable']});"
                f" {pc(decided)} of those the draw does not decide;"
                f" floor {pc(t['floor_refused_arrivable_share'])}",
            )
        )
    t = result["steady"]["77"]
    raw = t["called_doomed_share"]
    out.append(
        (
            f"77 t/s: calls made that could not arrive <= {TARGET_DOOMED_77:.0%}",
            raw is not None and raw <= TARGET_DOOMED_77,
            f"{pc(raw)} ({t['called_doomed']} of {t['called']});"
            f" {pc(t['decided_called_doomed_share'])} of those the draw does not decide;"
            f" floor {pc(t['floor_called_doomed_share'])}",
        )
    )
    r = result["readmission"]
    worst = r["max"]
    out.append(
        (
            f"77 -> 110 t/s: re-admitted within {TARGET_READMIT} successful calls",
            # None: no asked shape was refused at 77 (nothing to re-admit).
            None
            if not r["with_a_refused_shape"]
            else worst is not None and worst <= TARGET_READMIT and not r["never_readmitted"],
            f"median {r['median']}, p90 {r['p90']}, max {worst} successful calls"
            f" over {r['with_a_refused_shape']} trials with a refused shape"
            f" ({r['never_readmitted']} never)",
        )
    )
    low = result["low_traffic_77"]
    out.append(
        (
            "low traffic (a call every 3 min, 77 t/s): no arrivable call refused (the cold start)",
            low["refused_arrivable"] == 0,
            f"{low['refused_arrivable']} refused of {low['arrivable']} arrivable;"
            f" {low['called_doomed']} of {low['called']} calls could not arrive",
        )
    )
    return out


def render(result: dict[str, Any]) -> str:
    lines = [
        "admission (SIMULATION: the worker's speed model, a simulated paced provider, an injected"
        f" clock; seed {result['seed']}): first tokens 0.3/0.5/0.7/0.9 s interleaved, one artifact"
        " at a time",
        "  shapes (bound; brief compact answer tokens): "
        + ", ".join(
            f"{s['shape']} ({s['bound']}; {s['tokens'][0]}-{s['tokens'][1]})"
            for s in result["shapes"]
        ),
    ]
    for rate, t in [
        *result["steady"].items(),
        ("77, a call every 3 min", result["low_traffic_77"]),
    ]:
        lines.append(
            f"  {rate} t/s: {t['presentations']} presentations, {t['arrivable']} arrivable,"
            f" {t['refused_arrivable']} of them refused; {t['called']} called,"
            f" {t['called_doomed']} of them could not arrive"
        )
        cells = []
        for shape, (n, arrivable, called, arrived) in t["by_shape"].items():
            cells.append(f"{shape} {arrivable}/{n} arrivable, {called} called, {arrived} arrived")
        lines.append("    " + "; ".join(cells))
    for rate, t in result["noise"].items():
        lines.append(
            f"  {rate} t/s, each call's rate within +-8 %: {t['arrivable']} arrivable,"
            f" {t['refused_arrivable']} refused"
            f" ({t['decided_refused_arrivable_share'] or 0:.1%} of those the draw does not decide);"
            f" {t['called']} called, {t['called_doomed']} could not arrive"
            f" ({t['decided_called_doomed_share'] or 0:.1%} of those the draw does not decide)"
        )
    sd = result["slowdown"]
    lines.append(
        f"  110 -> 77 t/s: calls made that could not arrive in the 30 presentations after the"
        f" switch: median {sd['median']}, max {sd['max']} over {sd['trials']} trials"
    )
    st = result["stepped"]
    lines.append(
        f"  speeds in steps, one first token each ({st['trials']} trials x {st['per_step']}"
        f" presentations a step): "
        + ", ".join(
            f"{r['tokens_per_s']:.0f}/{r['first_token_s']} doomed {r['doomed']} refused {r['refused']}"
            for r in st["steps"]
        )
    )
    for name, steps in result["sequences"].items():
        lines.append(f"  sequence {name}: " + ", ".join(steps))
    lines.append("  targets (figures, never asserted):")
    for target, met, measured in targets(result):
        word = "n/a" if met is None else ("met" if met else "NOT met")
        lines.append(f"    [{word}] {target}: {measured}")
    lines.append(f"  phase {result['phase_s']:.1f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    p = argparse.ArgumentParser(prog="bench/admission.py")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seed", type=int, default=33)
    a = p.parse_args(argv)
    result = run(a.quick, a.seed)
    announce.done()
    out(render(result))
    out(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``make run`` without a key: example model answers, replayed through the shim.

Without ``OPENAI_API_KEY`` the live table is all ``credential_unavailable``: a
newcomer never sees what the product does. So the demo's gateway process also
presents each sample once more, on a throwaway data root answered by
`ExampleResponder` — a stand-in for the worker that answers every request with
the example answer for its surface (``ops/examples/model-responses.json``,
hand-written in the model's answer format) after judging it with the same
contract the worker uses. The shim then does exactly what it does with a live
answer: re-validates, expands the tokens, proves every locked byte unchanged.
The output says "example, replayed" on every line: it is never presented as a
live call. Nothing here is used outside ``kexpr run``.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

if TYPE_CHECKING:
    from gateway_shim import KoreanExpressionCoordinator, PresentationCandidate
    from kexpr.spool.contract import Capsule

EXAMPLES: Final = "examples/model-responses.json"
MARK_OPEN, MARK_CLOSE = "⟦", "⟧"
_POLL_S: Final = 0.01


def load_examples() -> dict[str, dict[str, str]]:
    """surface -> slot_id -> the example answer's ``generated_ko``."""
    data = json.loads(resources.files("kexpr.ops").joinpath(EXAMPLES).read_text("utf-8"))
    responses: dict[str, dict[str, str]] = data["responses"]
    return responses


def answer_document(capsule: Capsule, generated: Mapping[str, str]) -> str:
    """The model's whole answer for ``capsule`` (`kexpr.spool.contract.answers`),
    with the example style text per slot (a slot without an example gets none,
    and the contract rejects the answer)."""
    from kexpr.spool.contract.answers import answer_json

    return answer_json(capsule, lambda slot_id: generated.get(slot_id, ""), compact=False)


class ExampleResponder:
    """Answers the spool of one throwaway data root with the example answers,
    judged by `kexpr.spool.contract.judge` as the worker judges a live one."""

    def __init__(self, data_root: Path, examples: Mapping[str, Mapping[str, str]]) -> None:
        from kexpr.spool.layout import DataRoot

        self.root = DataRoot(data_root)
        self.examples = examples
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="kexpr-example-responder", daemon=True
        )

    def __enter__(self) -> Self:
        self.root.ensure()
        self._beat()
        self._thread.start()
        return self

    def _beat(self) -> None:
        """A ``ready`` heartbeat, as the worker writes it: the shim writes a request
        only while one says a worker serves the root (coordinator rule 13)."""
        from kexpr.spool.fsio import replace_private
        from kexpr.spool.status import READY, STATUS_SCHEMA

        doc = {"schema": STATUS_SCHEMA, "state": READY, "pid": os.getpid()}
        replace_private(self.root.status_file, json.dumps(doc).encode("utf-8"))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        beat = time.monotonic()
        while not self._stop.wait(_POLL_S):
            if time.monotonic() - beat >= 1.0:
                self._beat()
                beat = time.monotonic()
            self._serve()

    def _serve(self) -> None:
        """One pass, moving files as the worker does (`DataRoot.route`): each
        request claimed, answered and removed; each report removed (this stand-in
        journals nothing, so a report ends its attempt)."""
        from kexpr.spool.lifecycle import Actor, File, Move

        requests, claimed = self.root.route(File.REQUEST, Move.CLAIM, Actor.WORKER)
        handled, _ = self.root.route(File.REQUEST, Move.HANDLED, Actor.WORKER)
        reports, _ = self.root.route(File.REPORT, Move.TERMINAL_DURABLE, Actor.WORKER)
        assert requests is not None and claimed is not None and reports is not None
        assert handled == claimed
        for path in sorted(requests.glob("*.json")):
            path = path.rename(claimed / path.name)
            data = path.read_bytes()
            path.unlink()
            self._answer(data)
        for path in sorted(reports.glob("*.json")):
            path.unlink()

    def _answer(self, data: bytes) -> None:
        from kexpr.spool.contract import Verdict, judge
        from kexpr.spool.fsio import publish
        from kexpr.spool.messages import (
            SPOOL_VERSION,
            ResponseStatus,
            SpoolResponse,
            parse_request,
        )
        from kexpr.spool.outcomes import OUTCOME_FOR_VERDICT

        request = parse_request(data)
        capsule = request.capsule
        document = answer_document(capsule, self.examples.get(capsule.surface, {}))
        verdict = judge(capsule, document)
        accepted = verdict.verdict is Verdict.ACCEPTED
        response = SpoolResponse(
            spool_version=SPOOL_VERSION,
            request_id=request.request_id,
            attempt_id=os.urandom(16).hex(),
            status=ResponseStatus.ACCEPTED if accepted else ResponseStatus.CANONICAL,
            outcome=OUTCOME_FOR_VERDICT[verdict.verdict],
            composition=verdict.composition,
        )
        from kexpr.spool.lifecycle import Actor, File, Move

        _, responses = self.root.route(
            File.ACCEPTED_ANSWER if accepted else File.ANSWER, Move.PUBLISH, Actor.WORKER
        )
        assert responses is not None
        publish(self.root.tmp, responses / f"{request.request_id}.json", response.to_bytes())


def mark_slots(body: str, locked_spans_utf16: Sequence[tuple[int, int]]) -> str:
    """``body`` with every run outside the locked spans wrapped in ⟦ ⟧."""
    units = body.encode("utf-16-le")

    def text(a: int, b: int) -> str:
        return units[2 * a : 2 * b].decode("utf-16-le")

    out, position = [], 0
    for start, end in locked_spans_utf16:
        if start > position:
            out.append(MARK_OPEN + text(position, start) + MARK_CLOSE)
        out.append(text(start, end))
        position = end
    total = len(units) // 2
    if total > position:
        out.append(MARK_OPEN + text(position, total) + MARK_CLOSE)
    return "".join(out)


@dataclass(frozen=True)
class Replayed:
    surface: str
    label: str
    outcome: str
    canonical: str
    styled: str | None


Present = Callable[["KoreanExpressionCoordinator"], "PresentationCandidate"]


def replay(samples: Iterable[tuple[str, str, Present]]) -> list[Replayed]:
    """Each ``(surface, label, present)`` in shadow mode (the canonical body and
    its locked spans) and in enabled mode (the styled body), on a throwaway
    data root answered by `ExampleResponder`."""
    from gateway_shim import (
        KoreanExpressionConfig,
        KoreanExpressionCoordinator,
        Mode,
        Outcome,
        exact_block,
    )

    out: list[Replayed] = []
    with tempfile.TemporaryDirectory(prefix="kexpr-examples-") as tmp:
        os.chmod(tmp, 0o700)
        root = Path(tmp) / "korean-expression-v1"
        with ExampleResponder(root, load_examples()):
            coords = {
                mode: KoreanExpressionCoordinator(
                    KoreanExpressionConfig.from_block(
                        exact_block(mode, daily=True, weekly=True, adaptive_operator=True)
                    ),
                    root,
                )
                for mode in (Mode.SHADOW, Mode.ENABLED)
            }
            try:
                for surface, label, present in samples:
                    shadow = present(coords[Mode.SHADOW])
                    enabled = present(coords[Mode.ENABLED])
                    styled = (
                        mark_slots(enabled.body, enabled.locked_spans_utf16)
                        if enabled.outcome is Outcome.ACCEPTED
                        else None
                    )
                    out.append(
                        Replayed(
                            surface,
                            label,
                            enabled.outcome.value,
                            mark_slots(shadow.body, shadow.canonical_locked_spans_utf16),
                            styled,
                        )
                    )
            finally:
                for coord in coords.values():
                    coord.close()
    return out


def print_replayed(results: Sequence[Replayed]) -> None:
    print()
    print("example answers, replayed (not a live call): the shim's validation and rendering")
    print(
        f"of ops/{EXAMPLES}; {MARK_OPEN}…{MARK_CLOSE} marks the slot text, every other byte is locked"
    )
    for r in results:
        print()
        print(f"[example, replayed] {r.surface} · {r.label} · {r.outcome}")
        if r.outcome == "nothing_to_style":
            from kexpr.ops.surfaces_cli import NOTHING_TO_STYLE_REASON

            print(f"  the host's text, no request: {NOTHING_TO_STYLE_REASON}")
            continue
        print("  canonical:")
        print("\n".join("    " + line for line in r.canonical.split("\n")))
        if r.styled is not None:
            print("  styled:")
            print("\n".join("    " + line for line in r.styled.split("\n")))

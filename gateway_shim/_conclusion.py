"""A presentation's last step: the answer read, judged and rendered, or none.

`Conclusion.finish` ends a published request (the coordinator's rules 1, 3):
no answer by the deadline or a closed wait ends at ``Step.PUBLISHED``; an
answer read is parsed, re-validated against the shim's own capsule, rendered
with every locked byte proven, and ends at ``Step.CONCLUDED``. The reports are
written here: the shim reports ``validation_rejected`` and ``shadow_selected`` itself;
one that could not be written is counted (rule 16). `try_read` and
`collect_late` read and collect answers as `kexpr.spool.lifecycle`'s
``SPOOL_FILE_MOVES`` says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from gateway_shim._awaiting import AwaitingReports
from gateway_shim._candidate import _PUBLISHABLE, PresentationCandidate
from gateway_shim._presentation import Pending, Step, Wait
from gateway_shim._responses import collect
from gateway_shim._setup import place
from gateway_shim.config import KoreanExpressionConfig, Mode
from gateway_shim.surfaces import RenderedBody, RenderError
from kexpr.spool.contract import Verdict, judge
from kexpr.spool.fsio import publish, read_private
from kexpr.spool.layout import DataRoot
from kexpr.spool.lifecycle import File, Move
from kexpr.spool.messages import (
    MAX_MESSAGE_BYTES,
    SPOOL_VERSION,
    MessageError,
    ResponseStatus,
    SpoolReport,
    parse_response,
)
from kexpr.spool.outcomes import Outcome, ReportOutcome, host_outcome


class Conclusion:
    """How every published request of one coordinator ends, and its reports."""

    def __init__(
        self,
        config: KoreanExpressionConfig,
        root: DataRoot,
        awaiting: AwaitingReports,
        monotonic: Callable[[], float],
    ) -> None:
        self._config = config
        self._root = root
        self._awaiting = awaiting
        self._mono = monotonic
        # Rule 16: reports that could not be written.
        self._unwritten_lock = threading.Lock()
        self.unwritten = 0

    def finish(self, p: Pending, data: bytes | Wait) -> PresentationCandidate:
        """Conclude a published request: parse, re-validate, render (rules 1, 3)."""
        try:
            return self._conclude(p, data)
        except Exception:  # noqa: BLE001 - rule 9, the last guard of the step
            return p.end(Step.PUBLISHED, Outcome.SPOOL_UNAVAILABLE)

    def _conclude(self, p: Pending, data: bytes | Wait) -> PresentationCandidate:
        if data is Wait.CLOSED:
            return p.end(Step.PUBLISHED, Outcome.CLOSED)
        if not isinstance(data, bytes):
            return p.end(Step.PUBLISHED, Outcome.TIMEOUT)
        try:
            response = parse_response(data)
            if response.request_id != p.rid:
                raise MessageError("request_id")
        except MessageError:
            response = None
        # The shim collects (removes) every answer but an accepted one: that file
        # is its attempt's durable AWAITING_REPORT, removed by the worker once
        # the terminal row is durable (spool.lifecycle `SPOOL_FILE_MOVES`).
        if response is None or response.status is not ResponseStatus.ACCEPTED:
            collect(p.response_path)
        # Judged on the monotonic clock against the host's call instant
        # (spool.lifecycle rule 6): the request's own deadline, never a later one.
        if self._mono() >= p.mono_deadline:
            return p.end(Step.CONCLUDED, Outcome.TIMEOUT)
        if response is None:
            return p.end(Step.CONCLUDED, Outcome.INVALID_RESPONSE)

        if response.status is not ResponseStatus.ACCEPTED or response.composition is None:
            return p.end(
                Step.CONCLUDED,
                response.outcome,
                attempt_id=response.attempt_id,
                permitted=_PUBLISHABLE[response.status],
            )
        attempt_id = response.attempt_id
        if attempt_id is None:
            return p.end(Step.CONCLUDED, Outcome.INVALID_RESPONSE)

        # Re-validate with our own capsule (rule 3), then render and prove locked bytes.
        verdict = judge(p.capsule, response.composition.to_json())
        rendered: RenderedBody | None = None
        generated: tuple[tuple[str, str], ...] = ()
        if verdict.verdict is Verdict.ACCEPTED and verdict.composition == response.composition:
            generated = tuple((s.slot_id, s.generated_ko) for s in response.composition.slots)
            try:
                rendered = p.surface.render(dict(generated))
            except RenderError:
                rendered = None
        if rendered is None:
            self.write_report(attempt_id, Outcome.VALIDATION_REJECTED)
            return p.end(Step.CONCLUDED, Outcome.VALIDATION_REJECTED, attempt_id=attempt_id)
        if self._config.mode is Mode.SHADOW:
            # Shadow: the expression is proven renderable, the canonical body is
            # what gets published; the shim records that itself.
            self.write_report(attempt_id, Outcome.SHADOW_SELECTED)
            return p.end(Step.CONCLUDED, Outcome.SHADOW_SELECTED, attempt_id=attempt_id)
        # Only an attempt handed out as accepted may be reported, once (rule 9).
        self._awaiting.add(attempt_id)
        return p.end(
            Step.CONCLUDED,
            Outcome.ACCEPTED,
            attempt_id=attempt_id,
            rendered=rendered,
            generated=generated,
        )

    def host_report(self, candidate: object, outcome: object) -> bool:
        """The host's `report` (coordinator rules 9, 16): the attempt of an
        ``accepted`` candidate this coordinator handed out, reported once with
        a `HostOutcome`; anything else is ``ValueError`` with an enum word
        (``not_host_outcome``, ``report_not_expected``), never the input."""
        try:
            host = host_outcome(outcome)
        except Exception:  # noqa: BLE001 - rule 9: an odd str subclass is not a word; raised below
            host = None
        if host is None:
            raise ValueError("not_host_outcome")
        try:
            attempt_id = _reportable_id(candidate)
            # Only an exact ``str`` reaches the table (rule 9): a subclass's own
            # ``__hash__`` / ``__eq__`` are never called.
            expected = attempt_id is not None and self._awaiting.take(attempt_id)
        except Exception:  # noqa: BLE001 - rule 9: a forged candidate is not ours; raised below
            attempt_id, expected = None, False
        if attempt_id is None or not expected:
            raise ValueError("report_not_expected")
        return self.write_report(attempt_id, host)

    def write_report(self, attempt_id: str, outcome: ReportOutcome) -> bool:
        """Publish one report (rule 16); False when it could not be written."""
        try:
            report = SpoolReport(
                spool_version=SPOOL_VERSION, attempt_id=attempt_id, outcome=outcome
            )
            reports = place(self._root, File.REPORT, Move.PUBLISH)
            publish(self._root.tmp, reports / f"{attempt_id}.json", report.to_bytes())
        except (OSError, ValueError):
            # Rule 16: the worker terminalizes an unreported attempt after
            # COMMIT_GRACE; the host is told now, and the count shows it.
            with self._unwritten_lock:
                self.unwritten += 1
            return False
        return True

    def after_fork_in_child(self) -> None:
        self._unwritten_lock = threading.Lock()


def _reportable_id(candidate: object) -> str | None:
    """The attempt id of an accepted candidate, only as an exact ``str`` (rule 9)."""
    if not isinstance(candidate, PresentationCandidate):
        return None
    if candidate.outcome is not Outcome.ACCEPTED:
        return None
    attempt_id = candidate.attempt_id
    return attempt_id if type(attempt_id) is str else None


def try_read(path: Path) -> bytes | Wait:
    """Read ``path`` with O_NOFOLLOW if it is there. The caller removes it
    unless it is an accepted answer (spool.lifecycle `SPOOL_FILE_MOVES`: the
    worker removes that one)."""
    try:
        return read_private(path, max_bytes=MAX_MESSAGE_BYTES)
    except FileNotFoundError:
        return Wait.NOT_YET
    except OSError:
        # Unsafe (`UnsafePath`) or unreadable (a FIFO, a directory, responses/
        # made 0755 or swapped for a symlink): canonical, and the removal may
        # fail the same way (it never raises into the host).
        collect(path)
        return Wait.EXPIRED


def collect_late(path: Path, data: bytes | Wait) -> None:
    """An answer read after its wait ended: collected as `Conclusion` collects a
    late one (removed unless it is accepted: the worker removes that one)."""
    try:
        if isinstance(data, bytes) and parse_response(data).status is ResponseStatus.ACCEPTED:
            return
    except MessageError:
        pass
    collect(path)

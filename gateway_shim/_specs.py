"""What one presentation is about, read from the host's arguments: `Spec`.

One builder per surface (the coordinator's rule 7: the plan's artifact-key
inputs): `daily_spec`, `weekly_spec` and `AdaptiveSpecs.spec`, which also
reads the dual glossary and says once when it or the named surface is
unusable (rule 15). A builder never parses: `Spec.parse` does, inside the
presentation's guard (rule 9). `Said` is the once-per-change memory of what
was said on the log.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway_shim._binding import BINDING_DIGEST_VERSION, _digest, binding_digest
from gateway_shim.config import KoreanExpressionConfig
from gateway_shim.operator_glossary import DualGlossary, GlossaryError, glossary_for_data_root
from gateway_shim.surfaces import CanonicalSurface, Ineligible, IneligibleReason
from gateway_shim.surfaces.adaptive import adaptive_card, parse_adaptive
from gateway_shim.surfaces.card import ADAPTIVE_SURFACES, DUAL_SURFACE, CardOrigin
from gateway_shim.surfaces.daily import DailyFacts, parse_daily
from gateway_shim.surfaces.weekly import parse_weekly
from kexpr.spool import log

# The candidate label of a payload that names no known adaptive schema: a
# constant, never the payload's own (unknown) schema string (telemetry rule 6).
ADAPTIVE_UNKNOWN_SURFACE: Final = "adaptive.unknown"
# A digest that no revalidation can ever match: the binding of an input that
# could not be read (rule 9).
UNREADABLE_BINDING: Final = _digest({"version": BINDING_DIGEST_VERSION, "unreadable": True})

_log = log.logger("shim")


def is_text(value: object) -> bool:
    """A ``str`` that UTF-8 can encode (no lone surrogate): rule 9."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Spec:
    """What one presentation is about, read from the host's arguments."""

    surface_version: str
    body: str
    parse: Callable[[], CanonicalSurface]
    key_fields: tuple[object, ...]
    binding: str | None = None
    enabled: bool | None = None


class Said:
    """The last state said on the log (rule 15): a change is said once, by
    whichever thread sees it first. None is "nothing wrong"."""

    __slots__ = ("_lock", "_state")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: object = None

    def change(self, state: object) -> tuple[bool, object]:
        """(changed, the state before)."""
        with self._lock:
            before = self._state
            if state == before:
                return False, before
            self._state = state
            return True, before

    def after_fork_in_child(self) -> None:
        """A fresh lock: the parent's may have been held at the fork (rule 12)."""
        self._lock = threading.Lock()


def daily_spec(
    canonical_body: str,
    *,
    finalized_event_id: str,
    facts: DailyFacts | None = None,
) -> Spec:
    """Daily check-in reply (``daily.v1``); artifact = (surface, finalized event)."""
    return Spec(
        "daily.v1",
        canonical_body,
        lambda: parse_daily(canonical_body, facts),
        (finalized_event_id,),
    )


def weekly_spec(
    canonical_body: str,
    *,
    explicit_fields: Collection[str],
    schedule_key: str,
    kind: str,
    kst_day: str,
) -> Spec:
    """Weekly report (``weekly.v1``); artifact = (surface, schedule_key, kind, kst_day)."""
    return Spec(
        "weekly.v1",
        canonical_body,
        lambda: parse_weekly(canonical_body, explicit_fields=explicit_fields),
        (schedule_key, kind, kst_day),
    )


class AdaptiveSpecs:
    """The adaptive operator cards' specs, and the dual glossary they are read
    with (``<data root>/operator-glossary.json`` plus the shipped texts)."""

    def __init__(self, config: KoreanExpressionConfig, data_root: Path) -> None:
        self._config = config
        self._data_root = data_root
        # Rule 15: what was last said about the glossary and the named surface.
        self._glossary_said = Said()
        self._surface_said = Said()

    def glossary(self) -> DualGlossary:
        """The dual glossary in force; `GlossaryError` for a present, invalid file."""
        return glossary_for_data_root(self._data_root)

    def glossary_or_ineligible(self) -> DualGlossary:
        try:
            glossary = self.glossary()
        except GlossaryError as e:
            changed, _ = self._glossary_said.change(e.problem)
            if changed:  # rule 15
                log.event(_log, logging.WARNING, "glossary_unusable", problem=e.problem)
            raise Ineligible(IneligibleReason.GLOSSARY_INVALID) from e
        changed, before = self._glossary_said.change(None)
        if changed and before is not None:
            log.event(_log, logging.INFO, "glossary_usable")
        return glossary

    def spec(
        self,
        payload: Mapping[str, object],
        callback_data: str,
        origin: CardOrigin,
        surface: str | None,
        authority_pins: tuple[str, ...],
    ) -> Spec:
        text = payload.get("text") if isinstance(payload, Mapping) else None
        label = surface if surface in ADAPTIVE_SURFACES else ADAPTIVE_UNKNOWN_SURFACE
        # Rule 15: a surface the host names that kexpr does not know (never its value).
        unknown = surface is not None and label == ADAPTIVE_UNKNOWN_SURFACE
        if self._surface_said.change(unknown)[0] and unknown:
            log.event(_log, logging.WARNING, "unknown_surface")
        key_fields: tuple[object, ...] = ()
        readable = True
        try:
            card, resolved = adaptive_card(
                payload, callback_data=callback_data, origin=origin, surface=surface
            )
            label = resolved
            key_fields = (card.session_id, card.proposal_digest, str(card.revision), resolved)
            digest = binding_digest(
                payload,
                callback_data=callback_data,
                origin=origin,
                surface=surface,
                authority_pins=authority_pins,
            )
        except Exception:  # noqa: BLE001 - rule 9: an unreadable card is ineligible, below
            # A digest that no revalidation can ever match.
            digest = UNREADABLE_BINDING
            readable = False

        def parse() -> CanonicalSurface:
            if not readable:
                raise Ineligible(IneligibleReason.NOT_TEXT)
            glossary: DualGlossary | None = None
            if label == DUAL_SURFACE:
                glossary = self.glossary_or_ineligible()
            return parse_adaptive(
                payload,
                callback_data=callback_data,
                origin=origin,
                surface=surface,
                glossary=glossary,
            )

        return Spec(
            label,
            text if isinstance(text, str) else "",
            parse,
            key_fields,
            binding=digest,
            # Both schemas share the `adaptive_operator` switch (config.SURFACE_SWITCH).
            enabled=self._config.enabled_for(DUAL_SURFACE),
        )

    def after_fork_in_child(self) -> None:
        self._glossary_said.after_fork_in_child()
        self._surface_said.after_fork_in_child()

"""Every member of the shared ``IneligibleReason`` enum is exercised by some
surface's table (a reason no test can reach is dead code or a missing case)."""

from __future__ import annotations

import test_surface_budget
import test_surface_card
import test_surface_daily
import test_surface_dual
import test_surface_physique
import test_surface_weekly

from gateway_shim.surfaces import IneligibleReason


def test_every_ineligible_reason_is_exercised() -> None:
    covered = (
        test_surface_budget.COVERED_REASONS
        | test_surface_daily.COVERED_REASONS
        | test_surface_weekly.COVERED_REASONS
        | test_surface_dual.COVERED_REASONS
        | test_surface_physique.COVERED_REASONS
        | test_surface_card.COVERED_REASONS
    )
    assert covered == set(IneligibleReason)


def test_reason_values_are_unique_snake_case() -> None:
    values = [r.value for r in IneligibleReason]
    assert len(values) == len(set(values))
    assert all(v == v.lower() and " " not in v for v in values)

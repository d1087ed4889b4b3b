"""Registers the plugin that prints the generative tallies after the run."""

from __future__ import annotations

import pytest
from adversarial.hypothesis_profiles import StatsReporter


def pytest_configure(config: pytest.Config) -> None:
    StatsReporter.register(config)

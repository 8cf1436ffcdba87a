"""Instants for tests: one way to write a UTC moment, instead of an `at()` per module.

Tests pin the clock with time-machine to these instants and never read the wall clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial

SCENARIO_YEAR = 2026


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    """A UTC instant."""
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def at(
    month: int, day: int, hour: int = 0, minute: int = 0, *, year: int = SCENARIO_YEAR
) -> datetime:
    """A UTC instant of the scenario year (2026 unless told)."""
    return utc(year, month, day, hour, minute)


def clock_of(year: int) -> Callable[..., datetime]:
    """`at` for another scenario year: `at = clock_of(2027)`; `at(1, 10, year=2026)` still works."""
    return partial(at, year=year)


def iso(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> str:
    """A UTC instant as the API reads and answers it (ISO 8601)."""
    return utc(year, month, day, hour, minute).isoformat()

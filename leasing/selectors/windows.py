"""The search and quote window: validated, time-zone aware, half-open [start, end)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from leasing.choices import PricingMode
from leasing.errors import InvalidWindow
from leasing.pricing import add_months

# A window may start a little in the past: clocks differ and requests take time (as for leases).
START_SKEW = timedelta(minutes=5)
# Longest window anyone can search or quote: ten years (the longest reserved term is 36 months).
MAX_WINDOW = timedelta(days=3660)
MAX_TERM_MONTHS = 120


@dataclass(frozen=True)
class Window:
    """A validated half-open search or quote window [start, end)."""

    start: datetime
    end: datetime

    @property
    def duration(self) -> timedelta:
        """Length of the window."""
        return self.end - self.start


def window_end(
    start: datetime, *, hours: Decimal | int | None = None, term_months: int | None = None
) -> datetime:
    """start + hours, or start + term_months; a window ending after the year 9999 is a 400."""
    try:
        if hours is not None:
            return start + timedelta(hours=float(hours))
        return add_months(start, term_months or 0)
    except (OverflowError, ValueError) as exc:  # past datetime.max, or "year 10000"
        raise InvalidWindow(
            "The window ends after the last date there is.",
            code="window_out_of_range",
            detail={"field": "start"},
        ) from exc


def window_resolve(
    *,
    start: datetime | None,
    end: datetime | None = None,
    hours: Decimal | int | None = None,
    term_months: int | None = None,
    pricing_mode: str = PricingMode.ON_DEMAND,
    now: datetime | None = None,
) -> Window:
    """The window from start + end, start + hours, or (reserved) start + term_months.

    Raises InvalidWindow (400) with a stable code: window_required, ambiguous_window,
    naive_datetime, invalid_window (end not after start), window_in_past, window_too_long.
    """
    now = now or timezone.now()
    if start is None:
        raise InvalidWindow(
            "Give the window: start and end, or start and hours.",
            code="window_required",
            detail={"field": "start"},
        )
    if end is not None and hours is not None:
        raise InvalidWindow(
            "Give end or hours, not both.", code="ambiguous_window", detail={"field": "hours"}
        )
    for name, moment in (("start", start), ("end", end)):
        if moment is not None and timezone.is_naive(moment):
            raise InvalidWindow(
                f"{name} needs a time zone (e.g. 2026-03-01T00:00:00Z).",
                code="naive_datetime",
                detail={"field": name},
            )
    if hours is not None:
        if hours <= 0:
            raise InvalidWindow(
                "hours must be positive.", code="invalid_hours", detail={"field": "hours"}
            )
        if hours > MAX_WINDOW.total_seconds() / 3600:
            raise InvalidWindow(
                "The window is longer than ten years.",
                code="window_too_long",
                detail={"field": "hours"},
            )
        end = window_end(start, hours=hours)
    if end is None and pricing_mode == PricingMode.RESERVED and term_months:
        end = window_end(start, term_months=term_months)
    if end is None:
        raise InvalidWindow(
            "Give end or hours (or term_months for reserved pricing).",
            code="window_required",
            detail={"field": "end"},
        )
    if end <= start:
        raise InvalidWindow(
            "The window must end after it starts.",
            detail={"field": "end", "start": start.isoformat(), "end": end.isoformat()},
        )
    if start < now - START_SKEW:
        raise InvalidWindow(
            "The window starts in the past.",
            code="window_in_past",
            detail={"field": "start", "now": now.isoformat()},
        )
    if end - start > MAX_WINDOW:
        raise InvalidWindow(
            "The window is longer than ten years.",
            code="window_too_long",
            detail={"field": "end"},
        )
    return Window(start=start, end=end)

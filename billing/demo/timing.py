"""The demo quarter's calendar and settings: which months are simulated, when each job runs,
the demo's names, clauses and market figures."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from typing import Any

from leasing.pricing import add_months

ACTOR = "demo"
PROVIDER = "demo-provider"
CUSTOMER = "demo-customer"
GPU_MODEL = "h200-sxm"
SITE = "Melbourne MEL1"
# The seed's marker: when this offer exists, the quarter has been simulated already.
OFFER_NAME = "NVIDIA H200 SXM at Melbourne MEL1, accepted and price-protected blocks"
MONTHS = 3
# The cycle runs this long after a month's end: past the finalization grace (1 h by default).
CYCLE_DELAY = timedelta(hours=2)
ROLLUP_DELAY = timedelta(hours=1, minutes=50)
# Each day's usage is reported shortly after midnight, well inside the grace window.
REPORT_DELAY = timedelta(minutes=10)
# The nightly job fixes the market index of the day before (the beat runs it at 00:10 UTC).
FIXING_DELAY = timedelta(minutes=10)

# The rate steps 15 % down from the period after the H200 market falls 10 % below the rate
# quoted when the lease was signed (a successor's GA date would not fall inside a demo window).
MARKET_STEP: dict[str, Any] = {
    "kind": "generational_price_step",
    "successor_model": "b200",
    "trigger": "market_drop",
    "market_drop_pct": "10",
    "step": "percent",
    "step_pct": "15",
    "floor_rate": "1.20",
    "min_months_between_steps": 6,
}
RESERVED_LADDER = {"1": "5", "3": "10", "6": "15", "12": "25"}
# The demo inventory's synthetic quote sources, and how far each sits from the middle one.
QUOTE_SOURCES = (
    ("demo-index: lister A", Decimal("0.96")),
    ("demo-index: lister B", Decimal("1.00")),
    ("demo-index: lister C", Decimal("1.07")),
)
FALLBACK_MARKET_RATE = Decimal("3.40")
PRICE_CUT = Decimal("0.85")

EVENTS_PER_DAY = 48
# Two requests a day above the committed throughput, refused because of the caller.
CALLER_REJECTED = frozenset({7, 31})
STUCK_EVENTS = 30
EXIT_AFTER = timedelta(days=31)


def month_start(moment: datetime) -> datetime:
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def simulated_months(now: datetime) -> list[tuple[datetime, datetime]]:
    """The last MONTHS whole UTC calendar months whose billing cycle has run by `now`."""
    end = month_start(now.astimezone(UTC) - CYCLE_DELAY - timedelta(hours=1))
    starts = [add_months(end, -back) for back in range(MONTHS, -1, -1)]
    return list(pairwise(starts))


def at_offset(day: datetime, days: int = 0, hours: int = 0, minutes: int = 0) -> datetime:
    return day + timedelta(days=days, hours=hours, minutes=minutes)


def off_index_day(day: date, today: date) -> date:
    """The day, or the next one the demo inventory's weekly index has no quote on."""
    while (today - day).days % 7 == 0:
        day += timedelta(days=1)
    return day

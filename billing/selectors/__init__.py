"""Reads of billing: billing periods and rating facts."""

from billing.selectors.periods import (
    BILLABLE_STATUSES,
    billable_periods,
    contract_ends_at,
    due_periods,
    open_period,
    period_of,
    rating_input,
)

__all__ = [
    "BILLABLE_STATUSES",
    "billable_periods",
    "contract_ends_at",
    "due_periods",
    "open_period",
    "period_of",
    "rating_input",
]

"""Monthly billing periods on the contract's anchor day, clipped to the term."""

from __future__ import annotations

from datetime import UTC, datetime

from contracts.engine._common import _add_months, _utc
from contracts.engine.terms import ContractTerms, Period
from core.errors import SemanticError


def _anchor_at_or_before(terms: ContractTerms, at: datetime) -> datetime:
    """The latest anchor-day midnight at or before `at`."""
    candidate = datetime(at.year, at.month, terms.billing_anchor_day, tzinfo=UTC)
    return candidate if candidate <= at else _add_months(candidate, -1)


def _anchor_after(terms: ContractTerms, at: datetime) -> datetime:
    """The first anchor-day midnight strictly after `at`."""
    return _add_months(_anchor_at_or_before(terms, at), 1)


def billing_periods(terms: ContractTerms) -> tuple[Period, ...]:
    """The term's monthly billing periods on the anchor day; the first and last may be partial."""
    periods: list[Period] = []
    start = terms.term_start
    while start < terms.term_end:
        end = min(_anchor_after(terms, start), terms.term_end)
        periods.append(Period(start, end))
        start = end
    return tuple(periods)


def period_containing(terms: ContractTerms, at: datetime) -> Period:
    """The billing period that contains `at`; SemanticError("outside_term") outside the term."""
    at = _utc(at, "at")
    if not terms.term_start <= at < terms.term_end:
        raise SemanticError(f"{at.isoformat()} is outside the contract term.", code="outside_term")
    start = max(terms.term_start, _anchor_at_or_before(terms, at))
    return Period(start, min(terms.term_end, _anchor_after(terms, at)))


def next_period_start(terms: ContractTerms, at: datetime) -> datetime | None:
    """The first period start strictly after `at`, or None when no period starts after it."""
    at = _utc(at, "at")
    if at < terms.term_start:
        return terms.term_start
    start = _anchor_after(terms, at)
    return start if start < terms.term_end else None


def _period_start_at_or_after(terms: ContractTerms, at: datetime) -> datetime | None:
    """The first period start at or after `at`, or None past the term."""
    if at <= terms.term_start:
        return terms.term_start
    if at >= terms.term_end:
        return None
    if _anchor_at_or_before(terms, at) == at:
        return at
    return next_period_start(terms, at)

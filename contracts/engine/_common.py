"""Shared constants and the formatting and time helpers every clause module relies on."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_DOWN, Decimal
from typing import TYPE_CHECKING, Any

from core.errors import ValidationFailed
from core.money import CurrencyMismatch, Money, minor_unit, round_rate

if TYPE_CHECKING:
    from contracts.engine.terms import ContractTerms

HUNDRED = Decimal(100)
SECONDS_PER_HOUR = Decimal(3600)
DEFAULT_MONTHLY_GPU_HOURS = Decimal(730)


# ---------------------------------------------------------------- formatting and time helpers


def _utc(value: datetime, name: str) -> datetime:
    """The same instant in UTC; naive datetimes are refused because their instant is unknown."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationFailed(f"{name} must be timezone-aware.", code="naive_datetime")
    return value.astimezone(UTC)


def _midnight(day: date) -> datetime:
    """The start of a calendar day in UTC."""
    return datetime.combine(day, time(0), tzinfo=UTC)


def _seconds(delta: timedelta) -> Decimal:
    """Exact length of a timedelta in seconds, without going through float."""
    whole = delta.days * 86400 + delta.seconds
    return Decimal(whole) + Decimal(delta.microseconds) / Decimal(1_000_000)


def _hours(start: datetime, end: datetime) -> Decimal:
    """Exact hours in [start, end), zero when the interval is empty."""
    return max(_seconds(end - start), Decimal(0)) / SECONDS_PER_HOUR


def _add_months(value: datetime, months: int) -> datetime:
    """Same day and time `months` later, clamped to the month's last day (31 Jan + 1 = 28 Feb)."""
    year, month_index = divmod(value.month - 1 + months, 12)
    year += value.year
    day = min(value.day, calendar.monthrange(year, month_index + 1)[1])
    return value.replace(year=year, month=month_index + 1, day=day)


def _pct(value: Decimal) -> str:
    """A percentage without trailing zeros or exponent: 15, 12.5, 99.9."""
    return format(value.normalize(), "f")


def _rate(value: Decimal) -> str:
    """A unit rate with its six decimals."""
    return str(round_rate(value))


def _json_safe(value: Any) -> Any:
    """Decision inputs are stored as JSON: Decimals become strings, dates ISO strings."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Money):
        return {"amount": str(value.amount), "currency": value.currency}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    return value


def _round_down(amount: Decimal, currency: str) -> Decimal:
    """Truncate to the currency's minor unit: a cap that must not be exceeded by rounding."""
    return amount.quantize(Decimal(1).scaleb(-minor_unit(currency)), rounding=ROUND_DOWN)


def _inputs(**values: Any) -> dict[str, Any]:
    """JSON-safe inputs of a decision, in a stable key order."""
    return {key: _json_safe(values[key]) for key in sorted(values)}


def _same_currency(terms: ContractTerms, *amounts: Money) -> None:
    """Refuse amounts in another currency than the contract's: there is no silent conversion."""
    for amount in amounts:
        if amount.currency != terms.currency:
            raise CurrencyMismatch(
                f"The contract is in {terms.currency}, the amount in {amount.currency}.",
                detail={"currencies": [terms.currency, amount.currency]},
            )

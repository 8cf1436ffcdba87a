"""How the admin writes figures, for every ModelAdmin (stock ones and those still to come).

Money columns are plain `DecimalField`s with four places (core/fields.py) and ranges are
`DateTimeRangeField`s; Django's admin would print `7454.9800` and
`[2026-08-28 00:00:00+00:00, …)`. `install()` (run by core's `ready()`) puts one formatter in
front of the admin's field lookup, in lists, change pages and inlines alike:

- an amount field (core.fields' amount precision, or a two-place column of 14+ digits) with a
  currency beside it (`X_currency`, `<first word of X>_currency` or
  `currency`) reads `$7,454.98` (core.money.format_money: the currency's minor unit, separators
  and symbol);
- a rate field (six places, named as a rate or price) reads `$2.45`, or `$0.001234` when it
  needs the places;
- a period reads `2026-08-28 00:00 → 2026-09-01 00:00 UTC (4 days)`.

A field without a currency beside it, or any other field, is shown as Django shows it.
Sorting and filtering are untouched: they work on the column, not on its text.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from babel.numbers import format_currency
from django.contrib.admin import helpers
from django.contrib.admin import utils as admin_utils
from django.contrib.admin.templatetags import admin_list
from django.contrib.postgres.fields import DateTimeRangeField
from django.db import models

from core.fields import AMOUNT_DIGITS, AMOUNT_PLACES, RATE_DIGITS, RATE_PLACES
from core.money import DISPLAY_LOCALE, format_money
from core.text import counted

_RATE_PATTERN = "¤#,##0.00####"
MIN_CENTS_DIGITS = 14


def format_rate(rate: Decimal, currency: str) -> str:
    """A unit price: at least the two usual decimals, up to the six a rate keeps."""
    return format_currency(
        rate, currency.upper(), format=_RATE_PATTERN, locale=DISPLAY_LOCALE, currency_digits=False
    )


def duration_text(length: timedelta) -> str:
    """A span in whole units people use: "4 days", "1 day 6 hours", "90 minutes"."""
    minutes = int(length.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = []
    if days:
        parts.append(counted(days, "day"))
    if hours:
        parts.append(counted(hours, "hour"))
    if minutes or not parts:
        parts.append(counted(minutes, "minute"))
    return " ".join(parts)


def _instant(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M}"


def format_period(lower: datetime | None, upper: datetime | None) -> str:
    """A half-open period: "2026-08-28 00:00 → 2026-09-01 00:00 UTC (4 days)"."""
    if lower is None and upper is None:
        return "always"
    if upper is None:
        assert lower is not None
        return f"from {_instant(lower)} UTC (open-ended)"
    if lower is None:
        return f"until {_instant(upper)} UTC"
    return f"{_instant(lower)} → {_instant(upper)} UTC ({duration_text(upper - lower)})"


def _own_currency(obj: Any, name: str) -> str | None:
    for candidate in (f"{name}_currency", f"{name.split('_', 1)[0]}_currency", "currency"):
        value = getattr(obj, candidate, None)
        if isinstance(value, str) and len(value) == 3:
            return value
    return None


def _currency_of(obj: Any, name: str) -> str | None:
    """The currency beside an amount field: `X_currency`, `<first word>_currency`, `currency`;
    else the currency of a parent row already loaded with it (a credit note line's note), so
    no page pays a query per row for it."""
    own = _own_currency(obj, name)
    if own is not None:
        return own
    for field in obj._meta.concrete_fields:
        if field.many_to_one and field.is_cached(obj):
            parent = field.get_cached_value(obj)
            found = _own_currency(parent, name) if parent is not None else None
            if found is not None:
                return found
    return None


def shown_value(obj: Any, field: models.Field[Any, Any] | None) -> str | None:
    """How the admin writes `field` of `obj`, or None to let Django write it."""
    if field is None or field.auto_created:
        return None
    value = getattr(obj, field.attname, None)
    if value is None:
        return None
    if isinstance(field, DateTimeRangeField):
        return format_period(value.lower, value.upper)
    if not isinstance(field, models.DecimalField) or field.max_digits is None:
        return None
    kind = (field.max_digits, field.decimal_places)
    # Amounts: core.fields' amount precision, or whole cents in a wide column (economics,
    # capex); a narrow two-place column is a count or a size (months, terabytes).
    is_amount = kind == (AMOUNT_DIGITS, AMOUNT_PLACES) or (
        field.decimal_places == 2 and field.max_digits >= MIN_CENTS_DIGITS
    )
    # Rates: six places and named as a price per unit (fractions have six places too).
    is_rate = kind == (RATE_DIGITS, RATE_PLACES) and any(
        word in field.name for word in ("rate", "price", "per_")
    )
    if not (is_amount or is_rate):
        return None
    currency = _currency_of(obj, field.name)
    if currency is None:
        return None
    return format_money(value, currency) if is_amount else format_rate(value, currency)


_django_lookup_field = admin_utils.lookup_field


def lookup_field(name: Any, obj: Any, model_admin: Any = None) -> tuple[Any, Any, Any]:
    """Django's `lookup_field`, with money, rates and periods written as `shown_value` says.

    Answering (None, None, text) makes the admin print the text as it is, as it does for an
    admin method's result.
    """
    field, attr, value = _django_lookup_field(name, obj, model_admin)
    if model_admin is not None and name in getattr(model_admin, "list_editable", ()):
        return field, attr, value  # an input in the list, not text
    shown = shown_value(obj, field) if isinstance(field, models.Field) else None
    if shown is None:
        return field, attr, value
    return None, None, shown


def install() -> None:
    """Put `lookup_field` in front of the admin's lists and read-only fields (once)."""
    admin_list.lookup_field = lookup_field  # type: ignore[attr-defined]
    helpers.lookup_field = lookup_field  # type: ignore[attr-defined]

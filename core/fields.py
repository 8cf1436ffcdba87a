"""Model fields for money, rates, quantities and currencies: one precision per kind of figure.

Every app declares these columns through the functions below, so a kind of figure has the same
precision wherever it is stored (docs/architecture.md, "Money, rates and quantities"):

| kind     | digits | places | why                                                           |
|----------|--------|--------|---------------------------------------------------------------|
| rate     | 20     | 6      | a price per unit (GPU-hour, million tokens, kWh); DESIGN 5    |
| amount   | 20     | 4      | a sum of money; 4 places hold every ISO-4217 minor unit       |
| quantity | 24     | 6      | metered units (GPU-hours, millions of tokens)                 |
| currency | 3      |        | ISO-4217, upper case (CURRENCY_PATTERN, held by the database) |

The functions return plain `models.DecimalField` / `models.CharField`, so migrations deconstruct
them as before and a column keeps its definition unless its precision really changed.
"""

from __future__ import annotations

import operator
from functools import reduce
from typing import Any

from django.db import models
from django.db.models import Q

# The shape of a currency code, written once: the database constraints, the API's currency
# field and the query-parameter reader all use it. Whether the code exists is a rule
# (inventory.iso_codes), checked by the services.
CURRENCY_PATTERN = r"^[A-Z]{3}$"

RATE_DIGITS, RATE_PLACES = 20, 6
AMOUNT_DIGITS, AMOUNT_PLACES = 20, 4
QUANTITY_DIGITS, QUANTITY_PLACES = 24, 6


def rate_field(**kwargs: Any) -> models.DecimalField[Any, Any]:
    """A price per unit (per GPU-hour, per million tokens, per kWh): 20 digits, 6 places."""
    return models.DecimalField(max_digits=RATE_DIGITS, decimal_places=RATE_PLACES, **kwargs)


def amount_field(**kwargs: Any) -> models.DecimalField[Any, Any]:
    """A sum of money in the row's currency: 20 digits, 4 places (any ISO minor unit)."""
    return models.DecimalField(max_digits=AMOUNT_DIGITS, decimal_places=AMOUNT_PLACES, **kwargs)


def quantity_field(**kwargs: Any) -> models.DecimalField[Any, Any]:
    """A metered quantity (GPU-hours, millions of tokens): 24 digits, 6 places."""
    return models.DecimalField(max_digits=QUANTITY_DIGITS, decimal_places=QUANTITY_PLACES, **kwargs)


def currency_field(**kwargs: Any) -> models.CharField[Any, Any]:
    """An ISO-4217 currency code; pair it with `currency_is_iso` in the model's constraints."""
    return models.CharField(max_length=3, **kwargs)


def currency_is_iso(
    name: str, *, fields: tuple[str, ...] = ("currency",)
) -> models.CheckConstraint:
    """A check constraint named `name`: each of `fields` is three upper-case letters."""
    condition = reduce(
        operator.and_, (Q(**{f"{field}__regex": CURRENCY_PATTERN}) for field in fields)
    )
    return models.CheckConstraint(condition=condition, name=name)

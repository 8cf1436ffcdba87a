"""Serializer fields for money, rates and currencies: the API side of core.fields.

Money in JSON is a string decimal next to a `currency` field (DESIGN, "API conventions"):

- a rate a client sends is `RateField` (the rate columns' 20 digits and 6 places);
- a figure the API answers is `DecimalString`: exactly as stored or computed, never re-rounded
  and never a float (rates keep their 6 places, quantities theirs);
- an amount of money is answered at its currency's minor unit: stored amounts (4 places)
  through `MinorUnitMixin`, computed ones (a `core.money.Money`) through `MoneyField`;
- a currency a client sends is `CurrencyField`: three letters in either case, stored upper case.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from rest_framework import serializers

from core.fields import RATE_DIGITS, RATE_PLACES
from core.money import minor_unit, round_money

# What a client may send: the stored shape (core.fields.CURRENCY_PATTERN) in either case.
CURRENCY_INPUT_PATTERN = r"^[A-Za-z]{3}$"
# A slug, or blank: drf-spectacular documents a SlugField with the `+` pattern even when it
# allows blank, so a blank default (or answer) would fail the schema's own pattern.
SLUG_OR_BLANK_PATTERN = r"^[-a-zA-Z0-9_]*$"


def DecimalString(**kwargs: Any) -> serializers.DecimalField:
    """A read-only decimal rendered as a string exactly as stored (no rounding, no float)."""
    return serializers.DecimalField(max_digits=None, decimal_places=None, read_only=True, **kwargs)


def RateField(**kwargs: Any) -> serializers.DecimalField:
    """A rate a client sends, as the rate columns hold it (20 digits, 6 places)."""
    return serializers.DecimalField(max_digits=RATE_DIGITS, decimal_places=RATE_PLACES, **kwargs)


class MoneyField(serializers.DecimalField):
    """A computed `core.money.Money`, answered as its amount at its currency's minor unit."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", "At the currency's minor unit.")
        super().__init__(max_digits=None, decimal_places=None, read_only=True, **kwargs)

    def to_representation(self, value: Any) -> Any:
        return super().to_representation(round_money(value.amount, value.currency))


class CurrencyField(serializers.RegexField):
    """An ISO-4217-shaped code in either case, answered upper case (the service checks that the
    code exists: invalid_currency)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(CURRENCY_INPUT_PATTERN, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        return str(super().to_internal_value(data)).upper()


class SlugOrBlankField(serializers.RegexField):
    """A slug or "" (e.g. a GPU model a token contract does not lease), documented as such."""

    def __init__(self, **kwargs: Any) -> None:
        # An input must allow blank to take ""; an answer needs only the pattern (allow_blank
        # would document it a second time, as a oneOf with maxLength 0).
        if not kwargs.get("read_only"):
            kwargs.setdefault("allow_blank", True)
        super().__init__(SLUG_OR_BLANK_PATTERN, **kwargs)


class MinorUnitMixin:
    """Stored amounts (4 places) rendered at their currency's minor unit (USD 2, JPY 0).

    `money_fields` name the amounts; the currency is the row's `currency` (or its credit
    note's, for a credit note line).
    """

    money_fields: tuple[str, ...] = ()

    def to_representation(self, instance: Any) -> Any:
        data = super().to_representation(instance)  # type: ignore[misc]
        currency = getattr(instance, "currency", None) or instance.credit_note.currency
        places = Decimal(1).scaleb(-minor_unit(currency))
        for name in self.money_fields:
            if data.get(name) is not None:
                data[name] = str(Decimal(data[name]).quantize(places))
        return data

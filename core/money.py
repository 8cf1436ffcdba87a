"""Money: Decimal amounts with an ISO-4217 currency, rounded once, half-up, to the minor unit."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from babel.numbers import format_currency

from core.errors import SemanticError, ValidationFailed

# ISO-4217 minor units of the currencies the marketplace trades in; anything else uses 2.
MINOR_UNITS: dict[str, int] = {
    "AUD": 2,
    "CAD": 2,
    "CHF": 2,
    "CNY": 2,
    "EUR": 2,
    "GBP": 2,
    "HKD": 2,
    "INR": 2,
    "JPY": 0,
    "KRW": 0,
    "MYR": 2,
    "SGD": 2,
    "USD": 2,
}

# Rates (per GPU-hour, per million tokens) keep at least six decimal places.
RATE_PLACES = 6
RATE_QUANTUM = Decimal(1).scaleb(-RATE_PLACES)


class CurrencyMismatch(SemanticError):
    """Two amounts in different currencies were combined; there is no silent conversion."""

    code = "currency_mismatch"


def minor_unit(currency: str) -> int:
    """Number of decimal places of the currency's minor unit."""
    return MINOR_UNITS.get(currency.upper(), 2)


def round_money(amount: Decimal, currency: str) -> Decimal:
    """Round an amount once, half-up, to the currency's minor unit."""
    quantum = Decimal(1).scaleb(-minor_unit(currency))
    return amount.quantize(quantum, rounding=ROUND_HALF_UP)


# How amounts are written for people (admin, documents): the currency's own symbol, digits and
# separators as written in English ("$7,454.98", "€1,200.00", "¥7,455", "CA$12.00").
DISPLAY_LOCALE = "en_US"


def format_money(amount: Decimal, currency: str) -> str:
    """An amount as people read it: rounded to the minor unit, with separators and symbol."""
    return format_currency(
        round_money(amount, currency), currency.upper(), locale=DISPLAY_LOCALE, currency_digits=True
    )


def money_amount_check(
    amount: Decimal,
    currency: str,
    *,
    code: str,
    what: str,
    field: str = "amount",
) -> None:
    """A positive amount in the currency's minor unit, else 400 with `code` naming `field`."""
    if amount <= 0 or round_money(amount, currency) != amount:
        raise ValidationFailed(
            f"{what} is a positive amount in the currency's minor unit.",
            code=code,
            detail={"field": field},
        )


def round_rate(rate: Decimal) -> Decimal:
    """Round a unit rate half-up to RATE_PLACES decimals (never to the minor unit)."""
    return rate.quantize(RATE_QUANTUM, rounding=ROUND_HALF_UP)


@dataclass(frozen=True, slots=True)
class Money:
    """An exact amount in one currency."""

    amount: Decimal
    currency: str

    def __post_init__(self) -> None:
        if not isinstance(self.amount, Decimal):
            raise TypeError("Money.amount must be a Decimal, never a float")
        if len(self.currency) != 3 or not self.currency.isalpha() or not self.currency.isupper():
            raise ValueError(f"{self.currency!r} is not an ISO-4217 currency code")

    @classmethod
    def zero(cls, currency: str) -> Money:
        """A zero amount in the given currency."""
        return cls(Decimal("0"), currency)

    def _same_currency(self, other: Money) -> None:
        if other.currency != self.currency:
            raise CurrencyMismatch(
                f"Cannot combine {self.currency} and {other.currency} amounts.",
                detail={"currencies": [self.currency, other.currency]},
            )

    def __add__(self, other: Money) -> Money:
        self._same_currency(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other: Money) -> Money:
        self._same_currency(other)
        return Money(self.amount - other.amount, self.currency)

    def __mul__(self, factor: Decimal | int) -> Money:
        return Money(self.amount * Decimal(factor), self.currency)

    def rounded(self) -> Money:
        """This amount rounded half-up to the currency's minor unit."""
        return Money(round_money(self.amount, self.currency), self.currency)

    def __str__(self) -> str:
        return f"{round_money(self.amount, self.currency):,} {self.currency}"

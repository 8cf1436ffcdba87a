"""Currency conversion with the operators' recorded FX rates, and the record of each conversion."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from economics.models import FxRate


@dataclass(frozen=True, slots=True)
class Conversion:
    """How an amount was converted: which rate, recorded for which day, and the result."""

    amount: Decimal
    from_currency: str
    to_currency: str
    rate: Decimal
    rate_valid_on: date
    inverted: bool
    converted: Decimal

    def as_json(self) -> dict[str, str | bool]:
        """The conversion as shown to a provider next to the figure it changed."""
        return {
            "amount": f"{self.amount:f}",
            "from": self.from_currency,
            "to": self.to_currency,
            "rate": f"{self.rate:f}",
            "rate_valid_on": self.rate_valid_on.isoformat(),
            "inverted": self.inverted,
            "converted": f"{self.converted:f}",
        }


class FxTable:
    """Every recorded rate, loaded once; a lookup takes the latest rate valid on the day."""

    def __init__(self, rates: list[tuple[str, str, date, Decimal]]) -> None:
        self._days: dict[tuple[str, str], list[date]] = defaultdict(list)
        self._rates: dict[tuple[str, str], list[Decimal]] = defaultdict(list)
        for base, quote, valid_on, rate in sorted(rates):
            self._days[base, quote].append(valid_on)
            self._rates[base, quote].append(rate)

    @classmethod
    def load(cls) -> FxTable:
        """All rates from the database."""
        rows = FxRate.objects.values_list("base_currency", "quote_currency", "valid_on", "rate")
        return cls(list(rows))

    def _latest(self, base: str, quote: str, on: date) -> tuple[date, Decimal] | None:
        days = self._days.get((base, quote))
        if not days:
            return None
        index = bisect.bisect_right(days, on) - 1
        if index < 0:
            return None
        return days[index], self._rates[base, quote][index]

    def convert(self, amount: Decimal, source: str, target: str, on: date) -> Conversion | None:
        """`amount` in `source` as `target`, or None when no rate for the pair is valid on `on`.

        A direct rate wins; otherwise the latest inverse rate is used (1 ÷ rate). The result
        keeps full precision; the caller rounds once where the figure is shown.
        """
        direct = self._latest(source, target, on)
        if direct is not None:
            valid_on, rate = direct
            return Conversion(amount, source, target, rate, valid_on, False, amount * rate)
        inverse = self._latest(target, source, on)
        if inverse is None:
            return None
        valid_on, rate = inverse
        return Conversion(amount, source, target, rate, valid_on, True, amount / rate)

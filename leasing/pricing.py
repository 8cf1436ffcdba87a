"""Pure pricing of card-hour capacity: the rate for a pricing mode and the total for a window."""

from __future__ import annotations

import calendar
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from core.errors import SemanticError, ValidationFailed
from core.money import round_money, round_rate
from core.text import counted

HUNDRED = Decimal(100)
SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True, slots=True)
class OfferPrices:
    """The price list of an offer, as plain values."""

    on_demand: Decimal
    currency: str
    reserved_ladder: dict[int, Decimal]
    interruptible: Decimal | None
    per_node_month: Decimal | None = None


@dataclass(frozen=True, slots=True)
class PriceBreakdown:
    """How a rate and total were reached, line by line."""

    price_per_gpu_hour: Decimal
    gpu_hours: Decimal
    total: Decimal
    currency: str
    explanation: str
    inputs: dict[str, Any]


def ladder_from_json(raw: dict[str, Any]) -> dict[int, Decimal]:
    """{"1": "5", "12": "25"} → {1: Decimal(5), 12: Decimal(25)}, validated."""
    ladder: dict[int, Decimal] = {}
    for months, discount in (raw or {}).items():
        try:
            term, pct = int(months), Decimal(str(discount))
        except (ValueError, ArithmeticError) as exc:
            raise ValidationFailed(
                "reserved_ladder maps whole months to a discount percent.",
                code="invalid_ladder",
                detail={"reserved_ladder": {str(months): str(discount)}},
            ) from exc
        if term < 1 or not Decimal(0) <= pct < HUNDRED:
            raise ValidationFailed(
                "Ladder terms are >= 1 month and discounts 0 <= x < 100 %.",
                code="invalid_ladder",
                detail={"reserved_ladder": {str(months): str(discount)}},
            )
        ladder[term] = pct
    return dict(sorted(ladder.items()))


def add_months(moment: datetime, months: int) -> datetime:
    """The same day-of-month `months` later (clamped to the month's last day)."""
    month_index = moment.month - 1 + months
    year, month = moment.year + month_index // 12, month_index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def gpu_hours(*, gpu_count: int, start: datetime, end: datetime) -> Decimal:
    """GPU-hours in [start, end), exact to the second."""
    seconds = Decimal(int((end - start).total_seconds()))
    return gpu_count * seconds / SECONDS_PER_HOUR


def rate_for(prices: OfferPrices, *, mode: str, term_months: int | None) -> tuple[Decimal, str]:
    """The GPU-hour rate for a pricing mode, and a sentence saying why."""
    if mode == "on_demand":
        return prices.on_demand, f"on-demand rate {prices.on_demand:f} {prices.currency}/GPU-h"
    if mode == "interruptible":
        if prices.interruptible is None:
            raise SemanticError(
                "This offer has no interruptible capacity.", code="no_interruptible_capacity"
            )
        return (
            prices.interruptible,
            f"interruptible rate {prices.interruptible:f} {prices.currency}/GPU-h (preemptible)",
        )
    if mode == "reserved":
        if not term_months:
            raise ValidationFailed(
                "A reserved lease needs term_months.",
                code="term_required",
                detail={"term_months": "required for reserved pricing"},
            )
        rungs = [months for months in prices.reserved_ladder if months <= term_months]
        if not rungs:
            raise SemanticError(
                f"The offer has no reserved price for {counted(term_months, 'month')}.",
                code="no_reserved_price",
                detail={"ladder_months": sorted(prices.reserved_ladder)},
            )
        rung = max(rungs)
        discount = prices.reserved_ladder[rung]
        rate = round_rate(prices.on_demand * (HUNDRED - discount) / HUNDRED)
        return rate, (
            f"reserved {counted(term_months, 'month')}: {discount:f} % off the on-demand rate "
            f"{prices.on_demand:f} (ladder rung {counted(rung, 'month')}) = "
            f"{rate:f} {prices.currency}/GPU-h"
        )
    raise ValidationFailed(f"Unknown pricing mode {mode!r}.", code="invalid_pricing_mode")


def rent_for(prices: OfferPrices, *, mode: str, term_months: int | None) -> tuple[Decimal, str]:
    """The monthly rent of one whole node for a pricing mode (the reserved ladder discounts it
    as it discounts the GPU-hour rate), and a sentence saying why."""
    rent = prices.per_node_month
    if rent is None:
        raise SemanticError("This offer is not priced per node-month.", code="not_node_month")
    if mode == "on_demand":
        return rent, f"monthly rent {rent.normalize():f} {prices.currency} per node"
    if mode == "interruptible":
        raise SemanticError(
            "Whole-server monthly rent is not sold interruptible.",
            code="no_interruptible_capacity",
        )
    discounted = replace(prices, on_demand=rent)
    monthly, _ = rate_for(discounted, mode=mode, term_months=term_months)
    rung = max(months for months in prices.reserved_ladder if months <= (term_months or 0))
    discount = prices.reserved_ladder[rung]
    return monthly, (
        f"reserved {counted(term_months or 0, 'month')}: {discount:f} % off the monthly rent "
        f"{rent.normalize():f} (ladder rung {counted(rung, 'month')}) = {monthly.normalize():f} "
        f"{prices.currency} per node"
    )


def price_window(
    prices: OfferPrices,
    *,
    mode: str,
    term_months: int | None,
    gpu_count: int,
    start: datetime,
    end: datetime,
) -> PriceBreakdown:
    """Rate x GPU-hours for the window, rounded once to the currency's minor unit."""
    rate, why = rate_for(prices, mode=mode, term_months=term_months)
    hours = gpu_hours(gpu_count=gpu_count, start=start, end=end)
    total = round_money(rate * hours, prices.currency)
    return PriceBreakdown(
        price_per_gpu_hour=rate,
        gpu_hours=hours,
        total=total,
        currency=prices.currency,
        explanation=(
            f"{counted(gpu_count, 'GPU')} x {hours / gpu_count:f} h = {hours:f} GPU-h at {why}: "
            f"{total:,} {prices.currency}"
        ),
        inputs={
            "mode": mode,
            "term_months": term_months,
            "gpu_count": gpu_count,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "price_per_gpu_hour": str(rate),
            "gpu_hours": str(hours),
            "total": str(total),
        },
    )


def offer_prices(offer: Any) -> OfferPrices:
    """The price list of an Offer row (read attribute by attribute; no ORM needed here)."""
    return OfferPrices(
        on_demand=offer.price_per_gpu_hour,
        currency=offer.currency,
        reserved_ladder=ladder_from_json(offer.reserved_ladder),
        interruptible=offer.interruptible_price_per_gpu_hour,
        per_node_month=offer.price_per_node_month,
    )

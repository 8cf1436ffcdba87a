"""Asset economics as plain arithmetic: one month of a node, its payback, and unit costs.

No ORM here. The nightly job gathers the facts of every node-month in SQL and hands them to
`asset_months`; `payback_summary` reads the resulting series; `unit_costs` divides a period's
cost by what it delivered. Money is rounded once per figure, half-up, to the currency's minor
unit; a division that has no denominator gives `None` with a reason, never an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from core.money import round_money

ZERO = Decimal("0")
ONE = Decimal("1")
MILLION = Decimal("1000000")
# Utilization and shares are kept as fractions with six decimals (0.800000 = 80 %).
FRACTION = Decimal("0.000001")
# Months (payback, projection) with two decimals: 27.51.
MONTHS = Decimal("0.01")
TRAILING_MONTHS = 3


@dataclass(frozen=True, slots=True)
class Ratio:
    """A quotient, or `None` with the reason there is none (a zero or missing denominator)."""

    value: Decimal | None
    reason: str = ""


def ratio(numerator: Decimal, denominator: Decimal, *, reason: str, places: Decimal) -> Ratio:
    """numerator ÷ denominator rounded to `places`; a zero denominator answers the reason."""
    if denominator == 0:
        return Ratio(None, reason)
    return Ratio((numerator / denominator).quantize(places))


@dataclass(frozen=True, slots=True)
class Asset:
    """What does not change from month to month: the node's purchase and power draw."""

    capex: Decimal
    salvage: Decimal
    service_life_months: int
    currency: str
    power_idle_kw: Decimal
    power_full_kw: Decimal


@dataclass(frozen=True, slots=True)
class MonthFacts:
    """One calendar month of one node, every amount already in the asset's currency.

    `in_service_hours` are the hours of the month the node was owned and not retired;
    `opex_per_month` is the site's full-month charge per node (prorated here by service hours).
    """

    month: date
    hours_in_month: Decimal
    in_service_hours: Decimal
    available_gpu_hours: Decimal
    allocated_gpu_hours: Decimal
    pue: Decimal
    power_price_per_kwh: Decimal
    opex_per_month: Decimal
    revenue: Decimal


@dataclass(frozen=True, slots=True)
class MonthFigures:
    """The computed month: costs, cash flow and what is left of the book value."""

    month: date
    utilization: Ratio
    energy_kwh: Decimal
    energy_cost: Decimal
    opex: Decimal
    depreciation: Decimal
    revenue: Decimal
    net_cash_flow: Decimal
    cumulative_net_cash_flow: Decimal
    accumulated_depreciation: Decimal
    book_value: Decimal

    @property
    def total_cost(self) -> Decimal:
        """Total cost of ownership for the month: depreciation is a cost, though not cash."""
        return self.depreciation + self.energy_cost + self.opex


def straight_line_depreciation(capex: Decimal, salvage: Decimal, life_months: int) -> Decimal:
    """(capex - salvage) ÷ service life, per full month; 300,000 over 72 months is 4,166.67."""
    return (capex - salvage) / Decimal(life_months)


def energy_kwh(
    *, idle_kw: Decimal, full_kw: Decimal, utilization: Decimal, hours: Decimal, pue: Decimal
) -> Decimal:
    """Facility energy: the draw between idle and full load by utilization, times PUE."""
    draw = idle_kw + (full_kw - idle_kw) * utilization
    return draw * hours * pue


@dataclass(frozen=True, slots=True)
class Progress:
    """Where the months before the first one to figure left off (all zero at acquisition)."""

    cumulative_net_cash_flow: Decimal = ZERO
    accumulated_depreciation: Decimal = ZERO
    life_elapsed_months: Decimal = ZERO


def progress_after(facts: Sequence[MonthFacts], figures: Sequence[MonthFigures]) -> Progress:
    """The state after already figured months, summed in the same order `asset_months` does."""
    life_elapsed = ZERO
    for month in facts:
        life_elapsed += month.in_service_hours / month.hours_in_month
    if not figures:
        return Progress(life_elapsed_months=life_elapsed)
    last = figures[-1]
    return Progress(last.cumulative_net_cash_flow, last.accumulated_depreciation, life_elapsed)


def asset_months(
    asset: Asset, months: Sequence[MonthFacts], *, start: Progress | None = None
) -> list[MonthFigures]:
    """Figure each month in order; depreciation stops once capex - salvage is written off.

    `start` continues a series whose earlier months are already figured (the nightly job
    recomputes only from the first month whose inputs changed).
    """
    monthly = straight_line_depreciation(asset.capex, asset.salvage, asset.service_life_months)
    depreciable = asset.capex - asset.salvage
    start = start or Progress()
    cumulative = start.cumulative_net_cash_flow
    accumulated = start.accumulated_depreciation
    life_elapsed = start.life_elapsed_months
    figures = []
    for facts in months:
        utilization = ratio(
            facts.allocated_gpu_hours,
            facts.available_gpu_hours,
            reason="no_available_gpu_hours",
            places=FRACTION,
        )
        service_share = facts.in_service_hours / facts.hours_in_month
        kwh = energy_kwh(
            idle_kw=asset.power_idle_kw,
            full_kw=asset.power_full_kw,
            utilization=utilization.value or ZERO,
            hours=facts.in_service_hours,
            pue=facts.pue,
        )
        energy_cost = round_money(kwh * facts.power_price_per_kwh, asset.currency)
        opex = round_money(facts.opex_per_month * service_share, asset.currency)
        # The month that completes the life takes the remainder, so the total written off is
        # exactly capex - salvage; after it nothing more is depreciated.
        life_elapsed += service_share
        remainder = depreciable - accumulated
        if life_elapsed >= asset.service_life_months:
            depreciation = remainder
        else:
            depreciation = min(round_money(monthly * service_share, asset.currency), remainder)
        accumulated += depreciation
        revenue = round_money(facts.revenue, asset.currency)
        net = revenue - energy_cost - opex
        cumulative += net
        figures.append(
            MonthFigures(
                month=facts.month,
                utilization=utilization,
                energy_kwh=kwh.quantize(Decimal("0.001")),
                energy_cost=energy_cost,
                opex=opex,
                depreciation=depreciation,
                revenue=revenue,
                net_cash_flow=net,
                cumulative_net_cash_flow=cumulative,
                accumulated_depreciation=accumulated,
                book_value=asset.capex - accumulated,
            )
        )
    return figures


@dataclass(frozen=True, slots=True)
class Payback:
    """Where the asset stands against its price.

    `paid_back_in_month` is the 1-based month of life in which cumulative net cash flow first
    reached capex; until then `projected_months` extrapolates the trailing three-month average.
    """

    months_of_life: int
    capex: Decimal
    cumulative_net_cash_flow: Decimal
    paid_back_in_month: int | None
    paid_back_on: date | None
    projected_months: Ratio
    roi_to_date: Ratio
    revenue_per_gpu_hour: Ratio
    break_even_rate_per_gpu_hour: Ratio
    trailing_utilization: Ratio
    book_value: Decimal


@dataclass(frozen=True, slots=True)
class Earlier:
    """Months before the ones handed to `payback_summary`, as much of them as it reads: how
    many, their sums, the payback month among them (1-based month of life) and their last
    months, whole ones and any (up to TRAILING_MONTHS of each), in order."""

    months: int = 0
    allocated_gpu_hours: Decimal = ZERO
    revenue: Decimal = ZERO
    paid_back: tuple[int, MonthFigures] | None = None
    last_whole: Sequence[tuple[MonthFacts, MonthFigures]] = ()
    last: Sequence[tuple[MonthFacts, MonthFigures]] = ()


def payback_summary(
    asset: Asset,
    facts: Sequence[MonthFacts],
    figures: Sequence[MonthFigures],
    *,
    earlier: Earlier | None = None,
) -> Payback:
    """Actual payback month, or the projection from the trailing whole months; ROI, unit rates.

    ROI to date is (cumulative net cash flow - capex) ÷ capex: -100 % on day one, 0 at payback.
    Revenue per GPU-hour divides all revenue by all allocated GPU-hours. The break-even rate is
    what a GPU-hour must earn to cover the trailing months' total cost (depreciation included)
    at their utilization.
    """
    earlier = earlier or Earlier()
    capex = asset.capex
    paid_back_month = earlier.paid_back
    if paid_back_month is None:
        paid_back_month = next(
            (
                (earlier.months + i, month)
                for i, month in enumerate(figures, 1)
                if month.cumulative_net_cash_flow >= capex
            ),
            None,
        )
    paid_back = paid_back_month[0] if paid_back_month else None
    last = figures[-1] if figures else (earlier.last[-1][1] if earlier.last else None)
    cumulative = last.cumulative_net_cash_flow if last else ZERO
    months_of_life = earlier.months + len(figures)
    # The trailing average is taken over whole months in service: a running month (or the
    # acquisition month) would drag it down only because it is short.
    months = [*earlier.last, *zip(facts, figures, strict=True)]
    whole = [
        *earlier.last_whole,
        *(
            (f, m)
            for f, m in zip(facts, figures, strict=True)
            if f.in_service_hours == f.hours_in_month
        ),
    ]
    trailing = (whole or months)[-TRAILING_MONTHS:]
    if paid_back_month is not None:
        # Interpolate inside the payback month: 27 full months and 0.51 of the 28th.
        month = paid_back_month[1]
        before = month.cumulative_net_cash_flow - month.net_cash_flow
        projected = Ratio(
            (Decimal(paid_back_month[0] - 1) + (capex - before) / month.net_cash_flow).quantize(
                MONTHS
            )
            if month.net_cash_flow > 0
            else Decimal(paid_back_month[0])
        )
    elif not trailing:
        projected = Ratio(None, "no_months_yet")
    else:
        average = sum((f.net_cash_flow for _, f in trailing), ZERO) / len(trailing)
        if average <= 0:
            projected = Ratio(None, "trailing_net_cash_flow_not_positive")
        else:
            projected = Ratio(
                (Decimal(months_of_life) + (capex - cumulative) / average).quantize(MONTHS)
            )
    allocated = earlier.allocated_gpu_hours + sum((f.allocated_gpu_hours for f in facts), ZERO)
    revenue = earlier.revenue + sum((f.revenue for f in figures), ZERO)
    trailing_allocated = sum((f.allocated_gpu_hours for f, _ in trailing), ZERO)
    trailing_available = sum((f.available_gpu_hours for f, _ in trailing), ZERO)
    trailing_cost = sum((m.total_cost for _, m in trailing), ZERO)
    return Payback(
        months_of_life=months_of_life,
        capex=capex,
        cumulative_net_cash_flow=cumulative,
        paid_back_in_month=paid_back,
        paid_back_on=paid_back_month[1].month if paid_back_month else None,
        projected_months=projected,
        roi_to_date=ratio(cumulative - capex, capex, reason="no_capex", places=FRACTION),
        revenue_per_gpu_hour=ratio(
            revenue, allocated, reason="no_allocated_gpu_hours", places=FRACTION
        ),
        break_even_rate_per_gpu_hour=ratio(
            trailing_cost, trailing_allocated, reason="no_allocated_gpu_hours", places=FRACTION
        ),
        trailing_utilization=ratio(
            trailing_allocated, trailing_available, reason="no_available_gpu_hours", places=FRACTION
        ),
        book_value=last.book_value if last else capex,
    )


@dataclass(frozen=True, slots=True)
class UnitCosts:
    """What one successful request and one million successful tokens cost in a period."""

    total_cost: Decimal
    requests_total: int
    requests_successful: int
    tokens_successful: int
    cost_per_successful_request: Ratio
    cost_per_million_successful_tokens: Ratio
    failed_request_share: Ratio
    cost_of_failed_requests: Decimal | None


def unit_costs(
    *,
    total_cost: Decimal,
    currency: str,
    requests_total: int,
    requests_successful: int,
    tokens_successful: int,
) -> UnitCosts:
    """Cost ÷ successful requests and ÷ successful tokens; failures carry their share of cost.

    Timeouts, errors and rejected requests are not in the denominators: the compute they burnt
    is part of the total cost, and `cost_of_failed_requests` shows how much of it that was.
    """
    failed = requests_total - requests_successful
    share = ratio(Decimal(failed), Decimal(requests_total), reason="no_requests", places=FRACTION)
    return UnitCosts(
        total_cost=total_cost,
        requests_total=requests_total,
        requests_successful=requests_successful,
        tokens_successful=tokens_successful,
        cost_per_successful_request=ratio(
            total_cost,
            Decimal(requests_successful),
            reason="no_successful_requests",
            places=FRACTION,
        ),
        cost_per_million_successful_tokens=ratio(
            total_cost * MILLION,
            Decimal(tokens_successful),
            reason="no_successful_tokens",
            places=FRACTION,
        ),
        failed_request_share=share,
        cost_of_failed_requests=(
            round_money(total_cost * share.value, currency) if share.value is not None else None
        ),
    )

"""How the economics admin pages write figures: amounts, percentages, reasons, conversions,
the rows of an asset's monthly table and its payback summary."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from core.money import format_money
from core.text import counted
from economics.models import AssetEconomics, AssetMonth, AssetPayback
from economics.payback import TRAILING_MONTHS

NOT_AVAILABLE = "-"


def number(value: Decimal | None, places: int = 2) -> str:
    """1234.5 -> "1,234.50"; None -> "-"."""
    if value is None:
        return NOT_AVAILABLE
    return f"{value:,.{places}f}"


def money(value: Decimal | None, currency: str) -> str:
    """An amount in its currency's format: "$300,000.00", "A$620,000.00"."""
    if value is None:
        return NOT_AVAILABLE
    return format_money(value, currency)


def percent(value: Decimal | None) -> str:
    """A fraction as a percentage: 0.709677 -> "70.97 %"."""
    if value is None:
        return NOT_AVAILABLE
    return f"{value * 100:,.2f} %"


def reason_text(code: str) -> str:
    """A machine reason as words: "no_allocated_gpu_hours" -> "no allocated gpu hours"."""
    return code.replace("_", " ") if code else "not computed"


def ratio_text(value: Decimal | None, reason: str, show: Callable[[Decimal], str]) -> str:
    """A computed ratio, or why there is none."""
    return show(value) if value is not None else f"n/a ({reason_text(reason)})"


def payback_of(node: AssetEconomics) -> AssetPayback | None:
    """The node's payback row, or None before the first run."""
    try:
        return node.payback
    except AssetPayback.DoesNotExist:
        return None


def payback_status(payback: AssetPayback | None, *, short: bool = False) -> str:
    """Paid back in which month, or the projection, or why there is none; `short` for a list."""
    if payback is None:
        return "not computed yet"
    if payback.paid_back_in_month is not None and payback.paid_back_on is not None:
        return f"paid back in month {payback.paid_back_in_month} ({payback.paid_back_on:%Y-%m})"
    if payback.projected_payback_months is not None:
        projected = payback.projected_payback_months
        ahead = projected - payback.months_of_life
        if short:
            return f"month {_months(projected)} ({_months(ahead)} to go)"
        when = f"{counted(ahead, 'month', shown=_months(ahead))} from now" if ahead > 0 else "now"
        return f"projected in month {_months(projected)} of life ({when})"
    if short:
        return "no projection"
    return f"no projection ({reason_text(payback.projection_reason)})"


def _months(value: Decimal) -> str:
    """A number of months to one decimal, as written: 90, 63.5 (never 90.03 or 90.00)."""
    return f"{value.quantize(Decimal('0.1')).normalize():f}"


def conversion_text(conversion: dict[str, Any]) -> str:
    """One FX conversion of a month as a sentence, e.g.
    "revenue: 10,137.60 USD → 9,123.84 EUR at 0.9 (USD/EUR of 2027-01-01)"."""
    try:
        amount, converted = Decimal(conversion["amount"]), Decimal(conversion["converted"])
        rate = f"{Decimal(conversion['rate']).normalize():f}"
        source, target = conversion["from"], conversion["to"]
        pair, how = f"{source}/{target}", f"at {rate}"
        if conversion.get("inverted"):
            # The opposite pair was recorded: the amount was divided by it.
            pair, how = f"{target}/{source}", f"at 1/{rate}"
        return (
            f"{conversion.get('what', 'amount')}: {money(amount, source)} → "
            f"{money(converted, target)} {how} ({pair} of {conversion['rate_valid_on']})"
        )
    except (KeyError, TypeError, InvalidOperation):
        return json.dumps(conversion, sort_keys=True)


def resale_text(month: AssetMonth) -> str:
    """What buyers of resold time paid in a month and how it split, or "-" without resale."""
    if not month.resale_revenue and not month.resold_gpu_hours:
        return NOT_AVAILABLE
    return (
        f"{number(month.resale_revenue)} paid: {number(month.resale_provider_share)} provider "
        f"(in revenue), {number(month.reseller_proceeds)} resellers, "
        f"{number(month.marketplace_fee)} marketplace fee"
    )


@dataclass(frozen=True, slots=True)
class MonthRow:
    """One asset month as the table on the asset page shows it."""

    month: str
    month_of_life: int
    in_service_hours: str
    available_gpu_hours: str
    allocated_gpu_hours: str
    utilization: str
    revenue: str
    energy_cost: str
    opex: str
    depreciation: str
    net_cash_flow: str
    cumulative_net_cash_flow: str
    book_value: str
    resold_gpu_hours: str = NOT_AVAILABLE
    resale: str = NOT_AVAILABLE
    documents: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, month: AssetMonth) -> MonthRow:
        """The row of one stored month."""
        detail = month.revenue_detail if isinstance(month.revenue_detail, dict) else {}
        return cls(
            month=f"{month.month:%Y-%m}",
            month_of_life=month.month_of_life,
            in_service_hours=number(month.in_service_hours),
            available_gpu_hours=number(month.available_gpu_hours),
            allocated_gpu_hours=number(month.allocated_gpu_hours),
            utilization=percent(month.utilization),
            revenue=number(month.revenue),
            energy_cost=number(month.energy_cost),
            opex=number(month.opex),
            depreciation=number(month.depreciation),
            net_cash_flow=number(month.net_cash_flow),
            cumulative_net_cash_flow=number(month.cumulative_net_cash_flow),
            book_value=number(month.book_value),
            resold_gpu_hours=number(month.resold_gpu_hours)
            if month.resold_gpu_hours
            else NOT_AVAILABLE,
            resale=resale_text(month),
            documents=[str(number) for number in detail.get("documents", [])],
            warnings=[str(warning) for warning in month.warnings or []],
            conversions=[conversion_text(c) for c in detail.get("conversions", [])],
        )


# What each economics figure means, written once: the fleet list's legend and the asset page's
# payback table both show it (economics.payback computes the figures).
LEGEND = {
    "Capex": "what the node cost when acquired, in its capex currency.",
    "Months of life": "calendar months since acquisition, the running month included.",
    "Net cash flow (life)": (
        "revenue minus energy, opex and depreciation, summed over the node's life."
    ),
    "Payback": (
        "the month of life in which the cumulative net cash flow reached capex; until then, "
        f"the month it will at the average of the last {TRAILING_MONTHS} whole months."
    ),
    "ROI to date": (
        "(cumulative net cash flow - capex) ÷ capex: -100 % on the day of purchase, 0 % at "
        "payback, positive after."
    ),
    "Revenue per allocated GPU-hour": "all revenue ÷ all GPU-hours leased out.",
    "Break-even rate": (
        f"what a leased GPU-hour must earn to cover the last {TRAILING_MONTHS} months' total "
        "cost, depreciation included, at their utilization."
    ),
    "Utilization": f"GPU-hours leased out ÷ GPU-hours available, last {TRAILING_MONTHS} months.",
    "Book value": "capex less the depreciation so far (straight line to salvage value).",
}


# What each column of an asset's monthly table means.
MONTH_LEGEND = [
    ("In service (h)", "hours of the month the node was owned and not retired."),
    ("Available GPU-h", "GPU-hours the node could lease out (outages excluded)."),
    (
        "Allocated GPU-h",
        "GPU-hours leased out (holds excluded); resold time counts once, in its seller's lease.",
    ),
    ("Resold GPU-h", "GPU-hours a lessee resold to a buyer (part of the allocated hours)."),
    ("Utilization", "allocated ÷ available GPU-hours."),
    (
        "Revenue",
        "invoiced lines attributed to the node (documents listed under it), the provider's "
        "share of resold time's payments included.",
    ),
    (
        "Resale",
        "what buyers of resold time paid, split as billing booked it: the provider's share "
        "(in revenue), the resellers' proceeds and the marketplace fee (neither is revenue).",
    ),
    (
        "Energy",
        "kWh drawn (idle to full load by utilization, times PUE) at the site's power price.",
    ),
    ("Opex", "the site's monthly charge per node, prorated by the hours in service."),
    ("Depreciation", "straight line from capex to salvage value over the service life."),
    ("Net cash flow", "revenue - energy - opex - depreciation."),
    ("Cumulative", "the net cash flow summed since acquisition; payback when it reaches capex."),
    ("Book value", "capex less the depreciation so far, at the end of the month."),
]


def legend(label: str) -> str:
    """What a figure means (by the start of its label), or "" for one that needs none."""
    return next((text for name, text in LEGEND.items() if label.startswith(name)), "")


def payback_summary_rows(payback: AssetPayback | None) -> list[tuple[str, str, str]]:
    """The payback summary as (label, value, meaning) rows; empty before the first run."""
    return [(label, value, legend(label)) for label, value in _summary_pairs(payback)]


def _summary_pairs(payback: AssetPayback | None) -> list[tuple[str, str]]:
    """The payback summary as (label, value) pairs; empty before the first run."""
    if payback is None:
        return []
    currency = payback.currency
    per_hour = f"{currency} per GPU-hour"
    return [
        ("Capex", money(payback.capex, currency)),
        ("Months of life", str(payback.months_of_life)),
        ("Net cash flow (life)", money(payback.cumulative_net_cash_flow, currency)),
        ("Payback", payback_status(payback)),
        ("ROI to date", ratio_text(payback.roi_to_date, "no_capex", percent)),
        (
            "Revenue per allocated GPU-hour",
            ratio_text(
                payback.revenue_per_gpu_hour,
                payback.revenue_per_gpu_hour_reason,
                lambda value: f"{number(value, 4)} {per_hour}",
            ),
        ),
        (
            f"Break-even rate (trailing {TRAILING_MONTHS} months, depreciation included)",
            ratio_text(
                payback.break_even_rate_per_gpu_hour,
                payback.break_even_reason,
                lambda value: f"{number(value, 4)} {per_hour}",
            ),
        ),
        (
            f"Utilization (trailing {TRAILING_MONTHS} months)",
            ratio_text(payback.trailing_utilization, "no_available_gpu_hours", percent),
        ),
        ("Book value", money(payback.book_value, currency)),
        ("Computed at", f"{payback.computed_at:%Y-%m-%d %H:%M} UTC"),
    ]

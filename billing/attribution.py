"""Cost attribution, pure: split the amounts of rated invoice lines over groups (cost centres).

No ORM here. The caller (billing.selectors.attribution) says, for each line of an issued invoice,
how much of the line's quantity each group used; this module splits the line's amount in the
same proportions, in whole minor units, so that the parts of every line add up to the line to
the cent (largest-remainder method). Lines that price no usage (SLA credits, fees, true-ups,
prepayment draws) are split in proportion to each group's usage amount on the same invoice, and
so is the tax, in proportion to each group's taxable amount. A report built from these parts
therefore sums to the invoices it covers, line by line and in total.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import TypeVar

from core.money import minor_unit

K = TypeVar("K", bound=Hashable)

# The group of an amount nobody's usage explains (no tag, no usage on the invoice).
UNATTRIBUTED: str = ""


def apportion(
    amount: Decimal, weights: Mapping[K, Decimal | int], currency: str
) -> dict[K, Decimal]:
    """Split `amount` over the keys in proportion to their (non-negative) weights.

    Each part is a whole number of the currency's minor units; the parts add up to `amount`
    exactly. Units left after flooring go to the largest remainders (ties: the order of
    `weights`). Keys of zero weight get nothing; with no positive weight, {} (the caller picks a
    home for the amount).
    """
    positive = {key: Decimal(weight) for key, weight in weights.items() if weight > 0}
    total_weight = sum(positive.values(), Decimal(0))
    if not positive:
        return {}
    quantum = Decimal(1).scaleb(-minor_unit(currency))
    units = int((abs(amount) / quantum).to_integral_value())
    sign = -1 if amount < 0 else 1
    exact = {key: Decimal(units) * weight / total_weight for key, weight in positive.items()}
    floors = {
        key: int(value.to_integral_value(rounding=ROUND_FLOOR)) for key, value in exact.items()
    }
    left = units - sum(floors.values())
    order = sorted(positive, key=lambda key: exact[key] - floors[key], reverse=True)
    for key in order[:left]:
        floors[key] += 1
    return {key: sign * Decimal(count) * quantum for key, count in floors.items()}


@dataclass
class GroupCost:
    """What one group used and owes on the invoices of a report (one currency)."""

    card_hours: Decimal = Decimal(0)
    tokens: dict[str, int] = field(default_factory=dict)
    amount: Decimal = Decimal(0)
    tax: Decimal = Decimal(0)

    @property
    def total(self) -> Decimal:
        """The amount with its share of the tax."""
        return self.amount + self.tax


@dataclass(frozen=True, slots=True)
class LineUse:
    """One invoice line and how much of its quantity each group used.

    `usage` is True for a line that prices metered usage (card-hours, tokens); `shares` maps a
    group to its part of the line's quantity (card-hours or tokens). `token_kind` names the
    token column the quantities count in (None for card-hours and non-usage lines).
    """

    amount: Decimal
    taxable: bool
    usage: bool
    shares: Mapping[str, Decimal | int]
    token_kind: str | None = None


def invoice_costs(
    lines: list[LineUse], *, tax: Decimal, currency: str, home: str
) -> dict[str, GroupCost]:
    """Split one invoice's lines and tax over the groups; `home` takes what no usage explains."""
    costs: dict[str, GroupCost] = {}
    usage_amounts: dict[str, Decimal] = {}
    taxable_amounts: dict[str, Decimal] = {}

    def add(group: str, amount: Decimal, *, taxable: bool) -> None:
        cost = costs.setdefault(group, GroupCost())
        cost.amount += amount
        if taxable:
            taxable_amounts[group] = taxable_amounts.get(group, Decimal(0)) + amount

    for line in (line for line in lines if line.usage):
        parts = apportion(line.amount, line.shares, currency) or {home: line.amount}
        for group, part in parts.items():
            add(group, part, taxable=line.taxable)
            usage_amounts[group] = usage_amounts.get(group, Decimal(0)) + part
            cost = costs[group]
            share = line.shares.get(group, 0)
            if line.token_kind is None:
                cost.card_hours += Decimal(share)
            else:
                cost.tokens[line.token_kind] = cost.tokens.get(line.token_kind, 0) + int(share)
    # Credits, fees, true-ups and prepayment draws follow the usage they were computed on.
    usage_weights = {group: amount for group, amount in usage_amounts.items() if amount > 0}
    for line in (line for line in lines if not line.usage):
        parts = apportion(line.amount, usage_weights, currency) or {home: line.amount}
        for group, part in parts.items():
            add(group, part, taxable=line.taxable)
    if tax:
        tax_weights = {group: amount for group, amount in taxable_amounts.items() if amount > 0}
        for group, part in (apportion(tax, tax_weights, currency) or {home: tax}).items():
            costs.setdefault(group, GroupCost()).tax += part
    return costs

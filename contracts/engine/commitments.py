"""Money committed up front or as a floor: minimum-commitment true-ups and prepayments."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from contracts.engine._common import (
    HUNDRED,
    _add_months,
    _hours,
    _inputs,
    _pct,
    _rate,
    _same_currency,
    _seconds,
    _utc,
)
from contracts.engine.periods import _anchor_at_or_before
from contracts.engine.rent import rent_for_window
from contracts.engine.terms import ContractTerms, Decision
from contracts.schemas import MinimumCommitment, Prepayment
from core.errors import SemanticError
from core.money import Money, round_money

# ---------------------------------------------------------------- minimum commitment


def _period_fraction(terms: ContractTerms, start: datetime, end: datetime) -> Decimal:
    """Share of the whole monthly period around [start, end) that lies inside the term."""
    nominal_start = _anchor_at_or_before(terms, start)
    nominal_end = _add_months(nominal_start, 1)
    if end > nominal_end or end <= start:
        raise SemanticError("The period is not one billing period.", code="not_a_billing_period")
    inside = _seconds(min(end, terms.term_end) - max(start, terms.term_start))
    return max(inside, Decimal(0)) / _seconds(nominal_end - nominal_start)


def minimum_commitment_true_up(
    terms: ContractTerms,
    *,
    period_start: datetime,
    period_end: datetime,
    actual_spend: Money,
    actual_card_hours: Decimal,
    current_rate: Decimal | None = None,
) -> Decision | None:
    """The shortfall against the monthly minimum, prorated for partial periods; None if none.

    `current_rate` is needed for the card_hours basis, where missing hours are billed at it.
    """
    clause = terms.clause(MinimumCommitment)
    if clause is None:
        return None
    _same_currency(terms, actual_spend)
    start, end = _utc(period_start, "period_start"), _utc(period_end, "period_end")
    fraction = _period_fraction(terms, start, end)
    minimum = clause.monthly_minimum * fraction
    if clause.basis == "spend":
        raw = minimum - actual_spend.amount
        words = (
            f"the minimum spend {_pct(clause.monthly_minimum)} {terms.currency} x "
            f"{_pct(fraction.quantize(Decimal('0.000001')))} of the period, less the actual "
            f"{actual_spend}"
        )
    else:
        if current_rate is None:
            raise SemanticError("A card-hour true-up needs the current rate.", code="no_rate")
        raw = (minimum - actual_card_hours) * current_rate
        words = (
            f"(the minimum {_pct(clause.monthly_minimum)} card-hours x "
            f"{_pct(fraction.quantize(Decimal('0.000001')))} of the period - "
            f"{_pct(actual_card_hours)} used) x {_rate(current_rate)} {terms.rate_unit}"
        )
    amount = round_money(raw, terms.currency)
    if amount <= 0:
        return None
    shortfall = Money(amount, terms.currency)
    return Decision(
        kind="true_up",
        effective_at=end,
        amount=shortfall,
        rate=current_rate,
        explanation=(
            f"Minimum commitment for {start.date().isoformat()} to {end.date().isoformat()}: "
            f"shortfall {shortfall} = {words}."
        ),
        inputs=_inputs(
            basis=clause.basis,
            monthly_minimum=clause.monthly_minimum,
            period_start=start,
            period_end=end,
            period_fraction=fraction,
            actual_spend=actual_spend,
            actual_card_hours=actual_card_hours,
            current_rate=current_rate,
        ),
    )


# ---------------------------------------------------------------- prepayment


def contract_value(terms: ContractTerms) -> Money:
    """Committed GPUs x hours in the term x base rate, for card-hour contracts; the rent over
    the whole term (prorated by the second) for whole-server rent."""
    if terms.rent_per_node_month is not None and terms.rented_nodes is not None:
        rent = rent_for_window(
            nodes=terms.rented_nodes,
            rent_per_node_month=terms.rent_per_node_month,
            currency=terms.currency,
            start=terms.term_start,
            end=terms.term_end,
        )
        return Money(rent.total, terms.currency)
    if (
        terms.pricing_basis != "card_hour"
        or terms.committed_gpus is None
        or terms.base_rate_per_gpu_hour is None
    ):
        raise SemanticError(
            "Only a card-hour contract with committed GPUs has a fixed value.",
            code="contract_value_unknown",
        )
    hours = _hours(terms.term_start, terms.term_end)
    value = terms.committed_gpus * hours * terms.base_rate_per_gpu_hour
    return Money(round_money(value, terms.currency), terms.currency)


def prepayment_amount(terms: ContractTerms) -> Money | None:
    """The amount to prepay: a share of the contract value or a fixed amount; None without one."""
    clause = terms.clause(Prepayment)
    if clause is None:
        return None
    if clause.amount is not None:
        return Money(round_money(clause.amount, terms.currency), terms.currency)
    assert clause.share_pct is not None  # guaranteed by the schema
    value = contract_value(terms).amount * clause.share_pct / HUNDRED
    return Money(round_money(value, terms.currency), terms.currency)


def prepayment_draw(
    terms: ContractTerms,
    *,
    invoice_total: Money,
    balance_remaining: Money,
    period_end: datetime,
    is_final_period: bool,
) -> Decision | None:
    """Pay an invoice from the prepaid balance, or return a held deposit at the end; else None."""
    clause = terms.clause(Prepayment)
    if clause is None or balance_remaining.amount <= 0:
        return None
    _same_currency(terms, invoice_total, balance_remaining)
    effective_at = _utc(period_end, "period_end")
    inputs = _inputs(
        mode=clause.mode,
        invoice_total=invoice_total,
        balance_remaining=balance_remaining,
        is_final_period=is_final_period,
    )
    if clause.mode == "draw_down":
        drawn = min(invoice_total.amount, balance_remaining.amount)
        if drawn <= 0:
            return None
        amount = Money(drawn, terms.currency)
        return Decision(
            kind="prepayment_draw",
            effective_at=effective_at,
            amount=amount,
            explanation=(
                f"{amount} of the invoice total {invoice_total} is paid from the prepaid "
                f"balance of {balance_remaining}."
            ),
            inputs=inputs,
        )
    if not is_final_period:
        # A deposit is security, not payment: it is held untouched until the contract ends.
        return None
    return Decision(
        kind="deposit_return",
        effective_at=effective_at,
        amount=balance_remaining,
        explanation=f"The contract ends: the deposit of {balance_remaining} is returned.",
        inputs=inputs,
    )

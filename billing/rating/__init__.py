"""Rating, pure: contract terms, recorded decisions and metered quantities → invoice lines.

No ORM here. The caller gathers the facts (billing.selectors.rating) and stores the result
(billing.services.invoices). Every line carries quantity, unit, unit price, amount, a sentence
and the contract events that shaped it; decisions made here (SLA credit, true-up, prepayment)
come back as engine Decisions for the caller to record and link.

Money follows DESIGN.md invariant 5: each line is rounded once, half-up, to the currency's
minor unit; the subtotal is the sum of the lines; tax is rounded once on the taxable lines.
"""

from __future__ import annotations

from decimal import Decimal

from billing.rating.facts import (
    MILLION,
    QUANTITY_PLACES,
    SECONDS_PER_HOUR,
    AllocationPrice,
    LateTokens,
    LineDraft,
    RatedInvoice,
    RateStep,
    RatingInput,
    RecordedCharge,
    ServiceLevel,
    _quantity,
)
from billing.rating.hour_lines import _card_hour_lines, _rent_line, _step_key
from billing.rating.token_lines import _token_lines
from billing.tokens import TOKEN_KINDS, TokenTiers, TokenUsage, token_quantities
from contracts import engine
from core.money import Money, round_money

__all__ = [  # the token shapes live in billing.tokens; rating's callers import them from here too
    "MILLION",
    "QUANTITY_PLACES",
    "SECONDS_PER_HOUR",
    "TOKEN_KINDS",
    "AllocationPrice",
    "LateTokens",
    "LineDraft",
    "RateStep",
    "RatedInvoice",
    "RatingInput",
    "RecordedCharge",
    "ServiceLevel",
    "TokenTiers",
    "TokenUsage",
    "rate_period",
    "token_quantities",
]


def _decision_line(
    decision: engine.Decision, *, kind: str, sign: int, currency: str, taxable: bool = True
) -> LineDraft:
    """A line that states one engine decision: its amount, with the decision's sentence."""
    assert decision.amount is not None
    amount = Money(decision.amount.amount * sign, currency)
    return LineDraft(
        kind=kind,
        description=decision.explanation,
        quantity=Decimal(1),
        unit="each",
        unit_price=amount.amount,
        amount=amount,
        taxable=taxable,
        inputs=dict(decision.inputs),
        decision=decision,
    )


def _sum(lines: list[LineDraft], *, taxable_only: bool = False) -> Decimal:
    return sum(
        (line.amount.amount for line in lines if line.taxable or not taxable_only),
        Decimal(0),
    )


def rate_period(facts: RatingInput) -> RatedInvoice:
    """The invoice lines and totals of one contract period, in a fixed order.

    Usage (card-hours per rate, tokens, late tokens) → SLA credit on the period's usage →
    recorded fees → minimum-commitment true-up → tax → prepayment draw or deposit return.
    """
    terms = facts.terms
    currency = terms.currency
    period = facts.period
    rent = _rent_line(facts)
    if facts.terms.rent_per_node_month is not None:
        # Whole-server rent replaces card-hours: the nodes are paid for whether used or not.
        usage_lines = [rent] if rent is not None else []
    else:
        usage_lines = _card_hour_lines(facts) + _token_lines(facts)
    lines = list(usage_lines)
    period_usage = sum(
        (line.amount.amount for line in usage_lines if not line.kind.startswith("late_")),
        Decimal(0),
    )

    level = facts.service_level
    credit = engine.sla_credit(
        terms,
        period_start=period.start,
        period_end=period.end,
        period_charge=Money(period_usage, currency),
        uptime_pct=level.uptime_pct,
        ttft_p95_ms=level.ttft_p95_ms,
        tpot_p99_ms=level.tpot_p99_ms,
    )
    if credit is not None:
        lines.append(_decision_line(credit, kind="sla_credit", sign=-1, currency=currency))

    for charge in sorted(facts.recorded_charges, key=lambda c: (c.effective_at, c.event_id)):
        lines.append(
            LineDraft(
                kind=charge.kind,
                description=charge.explanation,
                quantity=Decimal(1),
                unit="each",
                unit_price=charge.amount.amount,
                amount=charge.amount,
                event_ids=(charge.event_id,),
            )
        )

    billable_hours = (
        Decimal(facts.card_hours.billable_seconds) / SECONDS_PER_HOUR
        if (facts.card_hours is not None)
        else Decimal(0)
    )
    current_rate = (
        next(
            (
                step.rate
                for step in sorted(facts.rate_steps, key=_step_key, reverse=True)
                if step.start < period.end
            ),
            terms.base_rate_per_gpu_hour,
        )
        if terms.pricing_basis == "card_hour"
        else None
    )
    true_up = engine.minimum_commitment_true_up(
        terms,
        period_start=period.start,
        period_end=period.end,
        actual_spend=Money(period_usage, currency),
        actual_card_hours=_quantity(billable_hours),
        current_rate=current_rate,
    )
    if true_up is not None:
        lines.append(_decision_line(true_up, kind="true_up", sign=1, currency=currency))

    taxable = _sum(lines, taxable_only=True)
    tax = round_money(taxable * facts.tax_rate_pct / Decimal(100), currency)
    before_prepayment = _sum(lines) + tax

    if facts.prepaid_balance is not None:
        prepaid = engine.prepayment_draw(
            terms,
            invoice_total=Money(max(before_prepayment, Decimal(0)), currency),
            balance_remaining=facts.prepaid_balance,
            period_end=period.end,
            is_final_period=facts.is_final_period,
        )
        if prepaid is not None:
            lines.append(
                _decision_line(
                    prepaid,
                    kind=prepaid.kind,
                    sign=-1,
                    currency=currency,
                    taxable=False,
                )
            )

    subtotal = _sum(lines)
    return RatedInvoice(
        currency=currency,
        lines=tuple(lines),
        subtotal=Money(subtotal, currency),
        taxable_amount=Money(taxable, currency),
        tax_rate_pct=facts.tax_rate_pct,
        tax=Money(tax, currency),
        total=Money(subtotal + tax, currency),
    )

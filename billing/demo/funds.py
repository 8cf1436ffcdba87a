"""Demo prepaid balance of the demo customer (docs/ledger.md, "Prepaid balances and grants").

One step of the simulated quarter and one at seeding time:

- two days before the second month is billed, the marketplace grants the customer 500 USD of
  promotional credit for card-hours (priority 10, expiring 90 days later): the second month's
  first card-hour invoice draws it down — a `balance_draw` line, and Stripe would charge only
  the rest;
- once the quarter is billed, the customer tops up 20,000 USD by bank transfer (recorded and
  vouched for by an operator), and sets a funds policy on its 12-month block: warn 60 days
  before the balance runs out. The policy job runs once, so the burn-down (the running block's
  GPUs at their rate) is there to see, with a `balance.low` warning if it runs out within 60
  days.

A card-hours-only grant keeps the token contract's small invoices out of the draw-down, so every
demo invoice of the quarter is still `finalized` (the demo's other invariants hold).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import TextIO

from django.utils import timezone

from accounts.models import Organization
from billing.models import FundsAction, GrantKind, GrantScope, InvoiceLine, LineKind
from billing.selectors.funds import burn_down
from billing.services.funds_policy import funds_policies_evaluate, funds_policy_set
from billing.services.grants import credit_grant_create
from billing.services.top_ups import top_up_record
from contracts.models import Contract

OPERATOR = "demo-operator"
PROMOTION = Decimal("500.00")
TOP_UP = Decimal("20000.00")
WARN_DAYS = 60


def grant_promotion(customer: Organization, at: datetime) -> None:
    """The marketplace's promotional card-hour credit, drawn by the next card-hour invoice."""
    credit_grant_create(
        customer=customer,
        currency="USD",
        amount=PROMOTION,
        kind=GrantKind.PROMOTIONAL,
        priority=10,
        applies_to=GrantScope.CARD_HOURS,
        expires_at=at + timedelta(days=90),
        reason="Demo: welcome credit for card-hours",
        vouched_by=f"operator {OPERATOR}",
        actor=OPERATOR,
        now=at,
    )


def fund(customer: Organization, block: Contract, out: TextIO) -> None:
    """The customer's top-up and funds policy, then one run of the policy job."""
    now = timezone.now()
    top_up_record(
        customer=customer,
        currency="USD",
        amount=TOP_UP,
        reference="Demo SEPA transfer DEMO-0001",
        actor=OPERATOR,
        now=now,
    )
    funds_policy_set(
        contract=block, action=FundsAction.WARN, threshold_days=WARN_DAYS, actor=customer.slug
    )
    funds_policies_evaluate(now=now)
    drawn = -sum(
        InvoiceLine.objects.filter(
            invoice__customer=customer, kind=LineKind.BALANCE_DRAW
        ).values_list("amount", flat=True),
        Decimal(0),
    )
    projection = burn_down(customer_id=customer.pk, currency="USD", now=now)
    out.write(
        f"  funds:              top-up {TOP_UP:,.2f} USD, promotion {PROMOTION:,.2f} USD "
        f"({drawn:,.2f} drawn by invoices); balance {projection.balance:,.2f} USD runs out "
        + (
            f"on {projection.runs_out_at:%Y-%m-%d} ({projection.days_left} days)\n"
            if projection.runs_out_at
            else "never at the current rate\n"
        )
    )

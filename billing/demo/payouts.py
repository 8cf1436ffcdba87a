"""Demo commission, payments and a payout: the marketplace's terms with the demo provider are set
before the quarter is billed (8 %, at least 25 USD an invoice), the customer pays the first
month's invoices by bank transfer ten days into the second month, and the payout run of today
states the last month and pays the provider what was collected (an export file: Stripe is off in
the demo, and the provider has no connected account)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import TextIO

from django.utils import timezone

from accounts.models import Organization
from billing.models import Invoice, InvoiceStatus, Payout, ProviderStatement
from billing.services.commission import commission_rate_set
from billing.services.documents import invoice_mark_paid
from billing.services.payout_runs import payout_run

OPERATOR = "demo:operator"
COMMISSION_PCT = Decimal("8")
COMMISSION_MINIMUM = Decimal("25")
PAID_AFTER = timedelta(days=10)


def commission_set(provider: Organization) -> None:
    """The demo provider's commission, in force before its first invoice."""
    commission_rate_set(
        provider=provider,
        percent=COMMISSION_PCT,
        minimum=COMMISSION_MINIMUM,
        minimum_currency="USD",
        actor=OPERATOR,
        reason="Demo marketplace terms: 8 % of the provider's share, at least 25 USD an invoice.",
    )


def pay_and_pay_out(
    *, provider: Organization, months: list[tuple[datetime, datetime]], out: TextIO
) -> None:
    """Mark the first month's invoices paid, run today's payout run, and report both."""
    paid_at = months[1][0] + PAID_AFTER
    first = Invoice.objects.filter(
        issuer=provider, status=InvoiceStatus.FINALIZED, issued_at__lt=months[1][0] + PAID_AFTER
    ).order_by("issued_at", "pk")
    for invoice in first:
        invoice_mark_paid(
            invoice=invoice, actor=OPERATOR, reason="Paid by bank transfer.", at=paid_at
        )
    outcome = payout_run(now=timezone.now(), actor="demo:payout-run")
    out.write(f"  payments:           {len(first)} invoices paid on {paid_at:%Y-%m-%d}\n")
    for statement in ProviderStatement.objects.filter(pk__in=outcome.statements):
        payout = Payout.objects.filter(statement=statement).first()
        out.write(
            f"  statement:          {statement.period_start:%Y-%m} {statement.currency}: gross "
            f"{statement.gross_billed:,.2f}, commission {statement.commission:,.2f}, payable "
            f"{statement.payable:,.2f}"
            + (f"; payout {payout.pk} {payout.status} ({payout.method})\n" if payout else "\n")
        )

"""Demo billing: the three calendar months that ended just before now, billed by the real jobs.

Seeding walks a quarter of the demo customer's history in time order, each step through the
service that would have run then, with that moment as its clock:

- a 12-month block of 8 x H200 in Melbourne (booked a few days before the quarter) that fails
  its first acceptance run and passes the second; its node goes down for a few hours in the
  first month (an SLA credit), and a market price cut in the second month steps its rate down
  from the third month (a `market_drop` price step);
- a 6-month block of 4 x H200 whose customer gives notice in the second month and leaves in the
  third, paying the early-termination fee;
- a token-SLA contract on the demo provider's SLA offering, with a usage batch reported after
  every day: a few thousand requests, some timing out or failing, some refused by the caller,
  a few the ingest refuses, a retried batch (duplicates), an incident in the second month (an
  SLA credit), and a batch stuck at the provider that arrives after its month was billed (late
  usage, billed on the next invoice);
- the hourly rollups sweep and the billing cycle two hours after each month's end;
- the nightly market-index job ten minutes after each midnight: the demo publishers' quotes are
  registered index sources, so the fixings carry the block's reference rate and the price cut.

The months are whole UTC calendar months counted back from now, so the demo works whatever day
`make run` starts. Finalized invoices are handed to the worker for delivery (PDF and e-mail)
once the seed commits. The marketplace takes its commission on every invoice; the first month's
invoices are paid, and today's payout run states the last month and pays the provider what was
collected (`payouts`). Seeding again changes nothing.

Modules: `timing` (the months, the job delays, names and figures), `quarter` (the steps),
`payouts` (commission, payments and the payout run), `funds` (the prepaid balance: promotional
card-hour credit drawn down by the second month's bill, a bank-transfer top-up at seeding time,
and a funds policy whose burn-down says when the balance runs out), `budgets` (a monthly budget
and a usage alert rule evaluated over the quarter); this module seeds and reports.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from functools import partial
from typing import TextIO

from celery import current_app
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounts.models import Organization
from billing.demo import budgets
from billing.demo.funds import fund
from billing.demo.payouts import commission_set, pay_and_pay_out
from billing.demo.quarter import Quarter
from billing.demo.timing import CUSTOMER, OFFER_NAME, PROVIDER, simulated_months
from billing.models import Invoice, InvoiceLine, InvoiceStatus, LineKind
from leasing.models import Offer

__all__ = ["OFFER_NAME", "seed", "simulated_months"]


def _deliver_later(invoice_ids: list[int]) -> None:
    """After commit, hand each invoice to the worker: PDF, e-mail (and Stripe when enabled)."""
    for invoice_id in invoice_ids:
        transaction.on_commit(
            partial(current_app.send_task, "billing.deliver_invoice", args=[invoice_id]),
            robust=True,
        )


def _summary(quarter: Quarter, out: TextIO) -> None:
    invoices = list(
        Invoice.objects.filter(contract__in=quarter.contracts())
        .exclude(status=InvoiceStatus.DRAFT)
        .order_by("issued_at", "sequence_number")
    )
    lines = InvoiceLine.objects.filter(invoice__in=invoices)
    credits = lines.filter(kind=LineKind.SLA_CREDIT).count()
    fees = lines.filter(kind=LineKind.EXIT_FEE).aggregate(total=Sum("amount"))["total"] or 0
    total = sum((invoice.total for invoice in invoices), Decimal(0))
    first, last = quarter.months[0][0], quarter.months[-1][1] - timedelta(days=1)
    tally = quarter.tally
    out.write(
        f"  billing:            {first:%Y-%m-%d} to {last:%Y-%m-%d} simulated: "
        f"{len(invoices)} invoices, {total:,.2f} USD, {credits} SLA credits, "
        f"exit fee {fees:,.2f} USD\n"
        f"                      usage: {tally.events} events in {tally.batches} batches "
        f"({tally.accepted} accepted, {tally.late} late, {tally.duplicate} duplicate, "
        f"{tally.refused} refused)\n"
    )
    for invoice in invoices:
        out.write(
            f"                      {invoice.number}  {invoice.contract.number}  "
            f"{invoice.period_start:%Y-%m-%d}..{invoice.period_end:%Y-%m-%d}  "
            f"{invoice.total:>12,.2f} {invoice.currency}\n"
        )


def seed(out: TextIO) -> None:
    """Simulate the demo customer's last three months of leases and token usage; bill them."""
    provider = Organization.objects.get(slug=PROVIDER)
    if Offer.objects.filter(provider=provider, name=OFFER_NAME).exists():
        out.write("  billing:            already seeded\n")
        return
    commission_set(provider)
    quarter = Quarter(
        provider=provider,
        customer=Organization.objects.get(slug=CUSTOMER),
        months=simulated_months(timezone.now()),
    )
    quarter.run()
    _summary(quarter, out)
    assert quarter.block is not None  # booked in the quarter's first step
    fund(quarter.customer, quarter.block.contract, out)
    budgets.seed(quarter.customer, months=quarter.months, tokens=quarter.tokens, out=out)
    _deliver_later(
        list(
            Invoice.objects.filter(
                contract__in=quarter.contracts(), status=InvoiceStatus.FINALIZED
            ).values_list("pk", flat=True)
        )
    )
    pay_and_pay_out(provider=provider, months=quarter.months, out=out)

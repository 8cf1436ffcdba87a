"""Issued invoices for tests of delivery, Stripe, the API and the admin, built through the same
services the billing cycle and the operators use: a lease is taken, its period is generated and
finalized, and a paid or void invoice is marked paid or voided.

The default invoice is January 2026 of a 65 x H200 lease at 2.40 USD per GPU-hour with one GPU
down the whole month: 64 x 744 = 47,616 GPU-hours (114,278.40 USD) at 98.46 % availability,
which earns a 1 % SLA credit (-1,142.78 USD): 113,135.62 USD in total.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from accounts.models import Organization
from billing.models import Invoice, InvoiceStatus
from billing.selectors import billable_periods
from billing.services.documents import invoice_finalize, invoice_mark_paid, invoice_void
from billing.services.invoices import invoice_generate
from contracts.choices import EventKind
from contracts.engine import Period
from contracts.models import Contract
from contracts.selectors import contract_terms
from contracts.services import event_record
from core.money import Money
from leasing.models import Allocation
from leasing.services.leases import lease_create, request_build
from tests.leasing.factories import EXIT_TERMS, make_offer, outage

JANUARY = datetime(2026, 1, 1, tzinfo=UTC)
# The lease runs January to April; the default invoice is January's.
LEASE_END = datetime(2026, 5, 1, tzinfo=UTC)
LEASED_GPUS = 65
# A 1 % credit below 99.5 % availability: one GPU of 65 down all month is 98.46 %.
ONE_PERCENT_SLA_CREDIT: dict[str, Any] = {
    "kind": "sla_credits",
    "availability_target_pct": "99.5",
    "ladder": [{"below_pct": "99.5", "credit_pct": "1"}],
    "max_credit_pct_per_period": "30",
}
ACTOR = "tests"


def leased_contract(lessor: Organization, lessee: Organization) -> Contract:
    """The contract of a 65 x H200 lease from January to April 2026, one GPU down in January."""
    booked_at = JANUARY - timedelta(days=1)
    offer = make_offer(
        lessor,
        nodes=9,
        gpus_per_node=8,
        price_per_gpu_hour="2.40",
        available_from=booked_at - timedelta(days=1),
        contract_template=[EXIT_TERMS, ONE_PERCENT_SLA_CREDIT],
    )
    lease = lease_create(
        customer=lessee,
        request=request_build(
            offer=offer, gpu_count=LEASED_GPUS, start=JANUARY, end=LEASE_END, now=booked_at
        ),
        actor=ACTOR,
        now=booked_at,
    )
    down = Allocation.objects.filter(lease=lease).select_related("gpu__node").order_by("pk").last()
    assert down is not None
    outage(down.gpu.node, JANUARY, datetime(2026, 2, 1, tzinfo=UTC), gpu=down.gpu)
    return lease.contract


def _period(contract: Contract, period_start: datetime | None) -> Period:
    periods = billable_periods(contract, contract_terms(contract))
    period = next((p for p in periods if period_start is None or p.start == period_start), None)
    assert period is not None, f"{contract.number} bills no period starting {period_start}"
    return period


def make_draft_invoice(
    lessor: Organization,
    lessee: Organization,
    *,
    contract: Contract | None = None,
    period_start: datetime | None = None,
) -> Invoice:
    """The draft of a contract's ended billing period, as the billing cycle generates it."""
    contract = contract or leased_contract(lessor, lessee)
    period = _period(contract, period_start)
    draft, _ = invoice_generate(
        contract=contract, period_start=period.start, now=period.end + timedelta(minutes=30)
    )
    return draft


def make_issued_invoice(
    lessor: Organization,
    lessee: Organization,
    *,
    contract: Contract | None = None,
    status: str = InvoiceStatus.FINALIZED,
    period_start: datetime | None = None,
    fees: Sequence[tuple[str, Decimal]] = (),
) -> Invoice:
    """An issued invoice of a contract's billing period, through generate and finalize.

    contract: the default lease's contract (built when not given) or any billable contract.
    period_start: the period's start (default: the contract's first billable period).
    status: finalized, paid (marked paid) or void (voided) after finalization.
    fees: (explanation, amount) early-termination fees recorded on the contract in the
        period; each becomes a line whose description is its explanation.
    """
    contract = contract or leased_contract(lessor, lessee)
    period = _period(contract, period_start)
    for explanation, amount in fees:
        event_record(
            contract,
            kind=EventKind.EXIT_FEE,
            effective_at=period.start,
            explanation=explanation,
            actor=ACTOR,
            amount=Money(amount, contract.currency),
        )
    issued_at = period.end + timedelta(hours=2)
    draft, _ = invoice_generate(contract=contract, period_start=period.start, now=issued_at)
    invoice = invoice_finalize(invoice=draft, actor=ACTOR, now=issued_at)
    if status == InvoiceStatus.PAID:
        invoice = invoice_mark_paid(
            invoice=invoice, actor=ACTOR, reason="paid by bank transfer", at=issued_at
        )
    elif status == InvoiceStatus.VOID:
        invoice = invoice_void(
            invoice=invoice, reason="issued in error", actor=ACTOR, now=issued_at
        )
    else:
        assert status == InvoiceStatus.FINALIZED, f"no builder for {status} invoices"
    invoice.refresh_from_db()
    return invoice

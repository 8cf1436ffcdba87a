"""Invoices built directly for tests of delivery, Stripe and the admin (not of rating).

Rating and the billing cycle are tested through their services; these builders give other
tests an issued invoice with known lines without walking a contract through a period.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from accounts.models import Organization
from billing.models import Invoice, InvoiceLine, InvoiceStatus, LineKind
from billing.services.documents import _next_number
from contracts.models import Contract
from tests.contracts.factories import h200_contract

DEFAULT_LINES: tuple[tuple[str, str, str, str, str], ...] = (
    # kind, description, quantity, unit, unit_price
    (LineKind.CARD_HOURS, "64 x H200, 2026-01-01 to 2026-02-01", "47616", "GPU-hour", "2.40"),
    (LineKind.SLA_CREDIT, "SLA credit: availability below 99.5 %", "1", "credit", "-1142.78"),
)


def make_issued_invoice(
    lessor: Organization,
    lessee: Organization,
    *,
    contract: Contract | None = None,
    status: str = InvoiceStatus.FINALIZED,
    period_start: datetime = datetime(2026, 1, 1, tzinfo=UTC),
    period_end: datetime = datetime(2026, 2, 1, tzinfo=UTC),
    lines: tuple[tuple[str, str, str, str, str], ...] = DEFAULT_LINES,
) -> Invoice:
    """An issued (numbered) invoice with the given lines; amounts are quantity x unit price."""
    contract = contract or h200_contract(lessor, lessee)
    issued_at = period_end + timedelta(hours=2)
    invoice = Invoice.objects.create(
        contract=contract,
        issuer=lessor,
        customer=lessee,
        period_start=period_start,
        period_end=period_end,
        currency=contract.currency,
        rated_at=issued_at,
    )
    subtotal = Decimal(0)
    for position, (kind, description, quantity, unit, unit_price) in enumerate(lines, start=1):
        amount = (Decimal(quantity) * Decimal(unit_price)).quantize(Decimal("0.01"))
        subtotal += amount
        InvoiceLine.objects.create(
            invoice=invoice,
            position=position,
            kind=kind,
            description=description,
            quantity=Decimal(quantity),
            unit=unit,
            unit_price=Decimal(unit_price),
            amount=amount,
            currency=contract.currency,
            service_start=period_start,
            service_end=period_end,
        )
    number, text = _next_number(issuer=lessor, series="invoice", year=issued_at.year)
    Invoice.objects.filter(pk=invoice.pk).update(
        status=status,
        number=text,
        sequence_year=issued_at.year,
        sequence_number=number,
        subtotal=subtotal,
        taxable_amount=subtotal,
        total=subtotal,
        issued_at=issued_at,
        due_at=issued_at + timedelta(days=30),
    )
    invoice.refresh_from_db()
    return invoice

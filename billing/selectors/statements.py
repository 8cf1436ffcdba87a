"""A provider's month in one currency, read from its documents and the ledger.

Gross billed, SLA credits and the invoices' commission come from the invoices it issued in the
period (void ones excluded); refunds are the pre-tax credit notes it issued in the period (and the
commission they gave back); payable is what the ledger says is collected and available as of the
period's end, never more than is available now (a payout made since took its part). A
sublease's invoices also owe the seller its proceeds (`resale_to_sellers`, less the give-backs
of the month's credit notes): not the provider's earnings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Q, Sum

from billing.models import (
    ISSUED_STATUSES,
    AccountKind,
    CommissionCharge,
    CreditNote,
    Invoice,
    InvoiceLine,
    LedgerAccount,
    LedgerEntry,
    LineKind,
    ResaleProceeds,
)

ZERO = Decimal(0)
# Lines that settle part of an invoice (outside prepayment, deposits, the prepaid balance) are not
# what the provider billed.
SETTLEMENT_LINE_KINDS = (LineKind.PREPAYMENT_DRAW, LineKind.DEPOSIT_RETURN, LineKind.BALANCE_DRAW)


@dataclass(frozen=True)
class StatementFigures:
    """The amounts a statement shows (all in its currency)."""

    invoices: int
    gross_billed: Decimal
    sla_credits: Decimal
    refunds: Decimal
    commission: Decimal
    payable: Decimal
    resale_to_sellers: Decimal = ZERO

    @property
    def net_earned(self) -> Decimal:
        return (
            self.gross_billed
            - self.sla_credits
            - self.refunds
            - self.commission
            - self.resale_to_sellers
        )


def _sum(queryset: object, field: str) -> Decimal:
    return queryset.aggregate(total=Sum(field))["total"] or ZERO  # type: ignore[attr-defined]


def available_account(*, provider_id: int, currency: str) -> LedgerAccount | None:
    """The provider's main `provider_available` account in a currency, if it was ever opened."""
    return LedgerAccount.objects.filter(
        organization_id=provider_id,
        currency=currency,
        kind=AccountKind.PROVIDER_AVAILABLE,
        subledger="",
    ).first()


def statement_figures(
    *, provider_id: int, currency: str, start: datetime, end: datetime
) -> StatementFigures:
    """The provider's month [start, end) in one currency."""
    invoices = Invoice.objects.filter(
        issuer_id=provider_id,
        currency=currency,
        status__in=ISSUED_STATUSES,
        issued_at__gte=start,
        issued_at__lt=end,
    )
    lines = InvoiceLine.objects.filter(invoice__in=invoices).exclude(kind__in=SETTLEMENT_LINE_KINDS)
    notes = CreditNote.objects.filter(
        issuer_id=provider_id, currency=currency, issued_at__gte=start, issued_at__lt=end
    )
    commission = CommissionCharge.objects.filter(
        Q(credit_note__isnull=True, invoice__in=invoices) | Q(credit_note__in=notes)
    )
    resale = ResaleProceeds.objects.filter(
        Q(credit_note__isnull=True, invoice__in=invoices) | Q(credit_note__in=notes)
    )
    account = available_account(provider_id=provider_id, currency=currency)
    payable = ZERO
    if account is not None:
        at_end = -_sum(
            LedgerEntry.objects.filter(account=account, transaction__effective_at__lt=end),
            "amount",
        )
        payable = max(ZERO, min(at_end, -account.balance))
    return StatementFigures(
        invoices=invoices.count(),
        gross_billed=_sum(lines.exclude(kind=LineKind.SLA_CREDIT), "amount"),
        sla_credits=-_sum(lines.filter(kind=LineKind.SLA_CREDIT), "amount"),
        refunds=_sum(notes, "subtotal"),
        commission=_sum(commission, "amount"),
        resale_to_sellers=_sum(resale, "seller_amount"),
        payable=payable,
    )


def providers_with_money(*, currency: str | None = None) -> list[tuple[int, str]]:
    """(provider, currency) of every opened `provider_available` account, in a stable order."""
    accounts = LedgerAccount.objects.filter(kind=AccountKind.PROVIDER_AVAILABLE, subledger="")
    if currency:
        accounts = accounts.filter(currency=currency)
    return [
        (organization_id, code)
        for organization_id, code in accounts.order_by("organization_id", "currency").values_list(
            "organization_id", "currency"
        )
        if organization_id is not None
    ]

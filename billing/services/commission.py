"""The marketplace's commission: the rate that applies to an invoice, what its issue charges and
what a credit note gives back (docs/ledger.md, "Commission").

The rate is the lease's offer's (`CommissionRate` with an offer), else the provider's (without),
else `BILLING_COMMISSION_PCT`. It applies to the provider's pre-tax share of the invoice (every
line but outside-paid prepayment draws; an SLA credit line lowers the base, so commission shrinks
with it), rounded half-up once; the optional minimum is per invoice, in its own currency (a
minimum in another currency does not apply), and commission never exceeds the share. A credit
note gives back the charged commission pro rata to the pre-tax amount it credits, never more
than is left. Each is stored as a `CommissionCharge` that the ledger posting carries, so the
reconciliation can restate the commission accounts from documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Sum

from accounts.models import Organization
from billing.models import CommissionCharge, CommissionRate, CreditNote, Invoice
from billing.services.resale_proceeds import RESALE_FEE_SOURCE, resale_listing_of
from core.errors import SemanticError, ValidationFailed, require_reason
from core.memo import memoized
from core.money import money_amount_check, round_money
from leasing.models import Lease, Offer

ZERO = Decimal(0)
HUNDRED = Decimal(100)


@dataclass(frozen=True)
class Rate:
    """The commission terms that apply to one invoice, and where they came from."""

    percent: Decimal
    minimum: Decimal | None
    source: str


def commission_amount(*, base: Decimal, rate: Rate, currency: str) -> Decimal:
    """Percent of a positive base, rounded once, at least the minimum, at most the base."""
    if base <= 0:
        return ZERO
    amount = round_money(base * rate.percent / HUNDRED, currency)
    if rate.minimum is not None:
        amount = max(amount, rate.minimum)
    return min(amount, base)


def commission_give_back(
    *, charged: Decimal, base: Decimal, credited: Decimal, left: Decimal, currency: str
) -> Decimal:
    """What a credit note of `credited` (pre-tax) gives back of `charged`: pro rata, at most
    what is `left` of it; a non-positive number."""
    if charged <= 0 or base <= 0 or left <= 0:
        return ZERO
    back = round_money(charged * min(credited, base) / base, currency)
    return -min(back, left)


def commission_rate_for(invoice: Invoice) -> Rate:
    """The rate of the invoice's offer, else its issuer's, else the marketplace default; a
    sublease's invoice pays its listing's marketplace fee instead (docs/ledger.md, "Resale
    proceeds")."""
    listing = resale_listing_of(invoice)
    if listing is not None:
        return Rate(percent=listing.marketplace_fee_pct, minimum=None, source=RESALE_FEE_SOURCE)
    # The issuer's rates, once per batch of the billing cycle (oldest first, as .first() reads).
    rates = memoized(
        ("commission_rates", invoice.issuer_id),
        lambda: list(CommissionRate.objects.filter(provider_id=invoice.issuer_id).order_by("pk")),
    )
    found = None
    if any(rate.offer_id is not None for rate in rates):
        lease = Lease.objects.filter(contract_id=invoice.contract_id).only("offer_id").first()
        if lease is not None:
            found = next((rate for rate in rates if rate.offer_id == lease.offer_id), None)
    source = "offer"
    if found is None:
        found = next((rate for rate in rates if rate.offer_id is None), None)
        source = "provider"
    if found is None:
        default = Decimal(settings.BILLING_COMMISSION_PCT)
        return Rate(percent=default, minimum=None, source="default")
    minimum = found.minimum if found.minimum_currency == invoice.currency else None
    return Rate(percent=found.percent, minimum=minimum, source=source)


def commission_charge_for_invoice(
    *, invoice: Invoice, base: Decimal, new: bool = False
) -> CommissionCharge:
    """The invoice's commission charge, made once at its issue (in the issue's transaction);
    `new`: the issue is happening now, no charge can exist yet."""
    if not new:
        known = CommissionCharge.objects.filter(invoice=invoice, credit_note__isnull=True).first()
        if known is not None:
            return known
    rate = commission_rate_for(invoice)
    amount = commission_amount(base=base, rate=rate, currency=invoice.currency)
    minimum = f", at least {rate.minimum} {invoice.currency}" if rate.minimum else ""
    return CommissionCharge.objects.create(
        invoice=invoice,
        provider_id=invoice.issuer_id,
        currency=invoice.currency,
        base=base,
        percent=rate.percent,
        minimum=rate.minimum,
        source=rate.source,
        amount=amount,
        explanation=(
            f"{rate.percent} % ({rate.source} rate{minimum}) of {base} {invoice.currency}, "
            f"the provider's pre-tax share of {invoice.number}: {amount} {invoice.currency}."
        ),
    )


def commission_charge_for_credit_note(*, note: CreditNote) -> CommissionCharge | None:
    """What the credit note gives back of its invoice's commission (None: nothing)."""
    known = CommissionCharge.objects.filter(credit_note=note).first()
    if known is not None:
        return known
    charge = CommissionCharge.objects.filter(
        invoice_id=note.invoice_id, credit_note__isnull=True
    ).first()
    if charge is None:
        return None
    net = CommissionCharge.objects.filter(invoice_id=note.invoice_id).aggregate(
        total=Sum("amount")
    )["total"]
    back = commission_give_back(
        charged=charge.amount,
        base=charge.base,
        credited=note.subtotal,
        left=net or ZERO,
        currency=note.currency,
    )
    if back == 0:
        return None
    return CommissionCharge.objects.create(
        invoice_id=note.invoice_id,
        credit_note=note,
        provider_id=note.issuer_id,
        currency=note.currency,
        base=note.subtotal,
        percent=charge.percent,
        minimum=None,
        source=charge.source,
        amount=back,
        explanation=(
            f"Credit note {note.number} credits {note.subtotal} of {charge.base} "
            f"{note.currency}: {-back} {note.currency} of the commission is given back."
        ),
    )


def commission_net(invoice: Invoice | int) -> Decimal:
    """The invoice's commission less what its credit notes gave back."""
    total = CommissionCharge.objects.filter(
        invoice_id=invoice if isinstance(invoice, int) else invoice.pk
    ).aggregate(total=Sum("amount"))["total"]
    return total or ZERO


@transaction.atomic
def commission_rate_set(
    *,
    provider: Organization,
    percent: Decimal,
    actor: str,
    reason: str,
    offer: Offer | None = None,
    minimum: Decimal | None = None,
    minimum_currency: str = "",
) -> CommissionRate:
    """Set (or replace) a provider's or an offer's commission; applies to invoices issued from
    now on (issued ones keep what they were charged)."""
    minimum_currency = minimum_currency.strip().upper()
    require_reason(reason, "Say why the commission is set.")
    if not provider.is_provider:
        raise SemanticError(f"{provider} is not a provider.", code="not_a_provider")
    if not ZERO <= percent <= HUNDRED:
        raise ValidationFailed(
            "A commission is between 0 and 100 percent.",
            code="invalid_commission_percent",
            detail={"percent": str(percent)},
        )
    if offer is not None and offer.provider_id != provider.pk:
        raise SemanticError(
            f"Offer {offer.pk} is not {provider}'s.", code="commission_offer_not_providers"
        )
    if (minimum is None) != (not minimum_currency):
        raise ValidationFailed(
            "A minimum needs its currency (and a currency its minimum).",
            code="commission_minimum_currency",
        )
    if minimum is not None:
        money_amount_check(
            minimum,
            minimum_currency,
            code="invalid_commission_minimum",
            what="A minimum",
            field="minimum",
        )
    rate, _ = CommissionRate.objects.update_or_create(
        provider=provider,
        offer=offer,
        defaults={
            "percent": percent,
            "minimum": minimum,
            "minimum_currency": minimum_currency,
            "set_by": actor,
            "reason": reason.strip(),
        },
    )
    return rate

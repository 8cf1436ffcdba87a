"""Resale proceeds through the ledger (docs/ledger.md, "Resale proceeds").

A sublease's invoice is issued by the provider like any other; its pre-tax base is split into
the marketplace's fee (the invoice's commission, source `resale_fee`), the provider's share and
the seller's proceeds (`billing.resale_split`). The split is stored as a `ResaleProceeds` and
posted with the issue (the seller's part: Dr `provider_pending`, Cr the seller's
`reseller_pending`); the buyer's payment turns what is left of it into a `resale_proceeds`
grant on the seller's balance, drawn down by the seller's next invoice; a credit note takes its
share back pro rata (from `reseller_pending` before payment, from the grant after it, as far
as the grant still holds it: the rest stays owed by the seller on `reseller_pending`).

Everything runs in the caller's transaction (the invoice's issue, payment or credit note).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from django.db.models import Sum

from billing.locks import ledger_accounts_lock
from billing.models import (
    PAID_PRIORITY,
    AccountKind,
    CommissionCharge,
    CreditGrant,
    CreditNote,
    GrantKind,
    GrantScope,
    Invoice,
    LedgerAccount,
    LedgerTransaction,
    ResaleProceeds,
    TransactionKind,
)
from billing.resale_split import resale_give_back, resale_split
from billing.services.ledger import Leg, ledger_account, ledger_post
from core.memo import memoized, remember
from leasing.models import ResaleListing

ZERO = Decimal(0)
RESALE_FEE_SOURCE = "resale_fee"


def resale_proceeds_key(invoice: Invoice | int) -> str:
    return f"invoice:{invoice if isinstance(invoice, int) else invoice.pk}:resale_proceeds"


def resale_listing_of(invoice: Invoice) -> ResaleListing | None:
    """The listing whose sublease the invoice's contract bills (None: not a resale invoice)."""
    return memoized(
        ("resale_listing", invoice.contract_id),
        lambda: ResaleListing.objects.filter(sublease__contract_id=invoice.contract_id).first(),
    )


def resale_listings_remember(*, contract_ids: Iterable[int]) -> None:
    """In a batch memo: which of these contracts bill a sublease, in one query."""
    ids = sorted(set(contract_ids))
    found = {
        listing.sublease.contract_id: listing
        for listing in ResaleListing.objects.filter(sublease__contract_id__in=ids).select_related(
            "sublease"
        )
        if listing.sublease is not None
    }
    for contract_id in ids:
        remember(("resale_listing", contract_id), found.get(contract_id))


def _reseller_account(seller_id: int, currency: str) -> LedgerAccount:
    return ledger_account(
        organization=seller_id, currency=currency, kind=AccountKind.RESELLER_PENDING
    )


def _grant_account(grant: CreditGrant) -> LedgerAccount:
    return ledger_account(
        organization=grant.customer_id,
        currency=grant.currency,
        kind=AccountKind.CUSTOMER_BALANCE,
        subledger=grant.subledger,
    )


def resale_split_for_invoice(
    *, invoice: Invoice, listing: ResaleListing, charge: CommissionCharge, new: bool = False
) -> ResaleProceeds:
    """The invoice's split, made once at its issue from its fee (the commission charge)."""
    if not new:
        known = ResaleProceeds.objects.filter(invoice=invoice, credit_note__isnull=True).first()
        if known is not None:
            return known
    currency = invoice.currency
    split = resale_split(
        base=charge.base,
        fee=charge.amount,
        provider_share_pct=listing.provider_share_pct,
        currency=currency,
    )
    return ResaleProceeds.objects.create(
        invoice=invoice,
        listing=listing,
        seller_id=listing.seller_id,
        provider_id=invoice.issuer_id,
        currency=currency,
        base=split.base,
        fee=split.fee,
        provider_share=split.provider_share,
        seller_amount=split.seller_amount,
        marketplace_fee_pct=listing.marketplace_fee_pct,
        provider_share_pct=listing.provider_share_pct,
        explanation=(
            f"{invoice.number} bills resold time of listing {listing.pk}: of its pre-tax "
            f"{split.base} {currency}, the marketplace's fee ({listing.marketplace_fee_pct} %) "
            f"is {split.fee}, the provider's share ({listing.provider_share_pct} %) "
            f"{split.provider_share} and the seller's proceeds (the rest) {split.seller_amount}."
        ),
    )


def resale_issue_legs(*, invoice: Invoice, split: ResaleProceeds) -> list[Leg]:
    """The seller's part leaves the provider's pending share for the seller's pending proceeds."""
    if split.seller_amount == 0:
        return []
    pending = ledger_account(
        organization=invoice.issuer_id, currency=invoice.currency, kind=AccountKind.PROVIDER_PENDING
    )
    memo = f"resale proceeds of {invoice.number} to the seller"
    return [
        Leg(pending, split.seller_amount, memo),
        Leg(_reseller_account(split.seller_id, invoice.currency), -split.seller_amount, memo),
    ]


def resale_proceeds_owed(invoice: Invoice | int) -> Decimal:
    """The seller's proceeds of the invoice less what its credit notes took back (0: none)."""
    total = ResaleProceeds.objects.filter(
        invoice_id=invoice if isinstance(invoice, int) else invoice.pk
    ).aggregate(total=Sum("seller_amount"))["total"]
    return total or ZERO


def resale_proceeds_paid_post(*, invoice: Invoice, actor: str) -> LedgerTransaction | None:
    """The buyer paid: what the seller is owed becomes a `resale_proceeds` grant on its balance
    (Dr `reseller_pending`, Cr the grant's sub-ledger); None when there is nothing to pay."""
    split = (
        ResaleProceeds.objects.filter(invoice=invoice, credit_note__isnull=True)
        .select_related("listing")
        .first()
    )
    if split is None:
        return None
    if split.grant_id is not None:
        return LedgerTransaction.objects.filter(dedupe_key=resale_proceeds_key(invoice)).first()
    owed = resale_proceeds_owed(invoice)
    if owed <= 0 or invoice.paid_at is None:
        return None
    currency = invoice.currency
    grant = CreditGrant.objects.create(
        customer_id=split.seller_id,
        currency=currency,
        kind=GrantKind.RESALE_PROCEEDS,
        amount=owed,
        priority=PAID_PRIORITY,
        applies_to=GrantScope.ANYTHING,
        granted_at=invoice.paid_at,
        reason=f"Resale proceeds of listing {split.listing_id}, billed on {invoice.number}.",
        vouched_by=f"invoice {invoice.number} paid",
        actor=actor,
    )
    split.grant = grant
    split.save(update_fields=["grant"])
    memo = f"resale proceeds of {invoice.number}"
    posted, _ = ledger_post(
        kind=TransactionKind.RESALE_PROCEEDS_PAID,
        dedupe_key=resale_proceeds_key(invoice),
        effective_at=invoice.paid_at,
        explanation=(
            f"Invoice {invoice.number} paid: the seller's proceeds of listing {split.listing_id}, "
            f"{owed} {currency}, are put on organization {split.seller_id}'s balance as grant "
            f"{grant.pk}."
        ),
        actor=actor,
        legs=[
            Leg(_reseller_account(split.seller_id, currency), owed, memo),
            Leg(_grant_account(grant), -owed, memo),
        ],
        inputs={"seller_amount": split.seller_amount, "paid_to_seller": owed},
        invoice=invoice,
        credit_grant=grant,
    )
    return posted


def resale_give_back_legs(
    *, note: CreditNote, share_account: LedgerAccount, invoice_paid: bool, fee_back: Decimal
) -> list[Leg]:
    """A credit note on a resale invoice takes the seller's proceeds back pro rata: from
    `reseller_pending` before payment; after it, from the seller's proceeds grant as far as its
    balance holds, the rest owed by the seller (a debit on `reseller_pending`). Stored as the
    note's negative `ResaleProceeds`; [] for an ordinary invoice."""
    split = (
        ResaleProceeds.objects.filter(invoice_id=note.invoice_id, credit_note__isnull=True)
        .select_related("grant")
        .first()
    )
    if split is None:
        return []
    currency = note.currency
    back = resale_give_back(
        seller_amount=split.seller_amount,
        base=split.base,
        credited=note.subtotal,
        left=resale_proceeds_owed(note.invoice_id),
        currency=currency,
    )
    reseller = _reseller_account(split.seller_id, currency)
    grant = split.grant if invoice_paid else None
    from_grant = ZERO
    legs: list[Leg] = []
    if grant is not None and back < 0:
        found = _grant_account(grant)
        held = -ledger_accounts_lock(found)[found.pk].balance
        from_grant = min(-back, held)
        legs.append(Leg(found, from_grant, f"resale proceeds taken back by {note.number}"))
    memo = f"resale proceeds given back by {note.number}"
    legs += [Leg(reseller, -back - from_grant, memo), Leg(share_account, back, memo)]
    base = -note.subtotal
    ResaleProceeds.objects.create(
        invoice_id=note.invoice_id,
        credit_note=note,
        listing_id=split.listing_id,
        seller_id=split.seller_id,
        provider_id=split.provider_id,
        currency=currency,
        base=base,
        fee=fee_back,
        provider_share=base - fee_back - back,
        seller_amount=back,
        marketplace_fee_pct=split.marketplace_fee_pct,
        provider_share_pct=split.provider_share_pct,
        grant=grant,
        from_grant=from_grant,
        explanation=(
            f"Credit note {note.number} credits {note.subtotal} of {split.base} {currency}: "
            f"{-back} {currency} of the seller's proceeds is taken back"
            + (
                f" ({from_grant} from grant {grant.pk}, {-back - from_grant} owed by the seller)."
                if grant is not None
                else " before the buyer paid."
            )
        ),
    )
    return legs

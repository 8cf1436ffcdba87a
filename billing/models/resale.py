"""Resale proceeds: how a sublease invoice's pre-tax base is split between the marketplace's fee,
the provider's share and the seller's proceeds, and what a credit note takes back of it
(docs/ledger.md, "Resale proceeds").

The split is the document the ledger's resale entries post and the reconciliation reads; the
seller's proceeds become a `resale_proceeds` grant on its balance once the buyer pays.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from billing.models.funds import CreditGrant
from billing.models.invoices import CreditNote, Invoice
from core.fields import amount_field, currency_field, currency_is_iso
from leasing.models import ResaleListing


def _pct_field(help_text: str) -> models.DecimalField[object, object]:
    return models.DecimalField(max_digits=7, decimal_places=4, help_text=help_text)


class ResaleProceeds(models.Model):
    """A sublease invoice's split (positive) or a credit note's give-back of it (negative):
    fee + provider_share + seller_amount = base, always."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="resale_proceeds")
    credit_note = models.OneToOneField(
        CreditNote,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="resale_proceeds",
    )
    listing = models.ForeignKey(ResaleListing, on_delete=models.PROTECT, related_name="+")
    seller = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    provider = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    currency = currency_field()
    base = amount_field(help_text="The invoice's pre-tax base (a give-back: what it credits).")
    fee = amount_field(help_text="The marketplace's fee (the invoice's commission).")
    provider_share = amount_field(help_text="The provider's share.")
    seller_amount = amount_field(help_text="The seller's proceeds (the remainder).")
    marketplace_fee_pct = _pct_field("The listing's marketplace fee.")
    provider_share_pct = _pct_field("The listing's provider share.")
    grant = models.ForeignKey(
        CreditGrant,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="resale_proceeds",
        help_text="The seller's proceeds grant (made at payment); a give-back after it names it.",
    )
    from_grant = amount_field(
        default=0, help_text="A give-back after payment: the part taken back from the grant."
    )
    explanation = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["invoice_id", "id"]
        verbose_name_plural = "resale proceeds"
        constraints = [
            models.UniqueConstraint(
                fields=["invoice"],
                condition=Q(credit_note__isnull=True),
                name="resale_split_once_per_invoice",
            ),
            models.UniqueConstraint(
                fields=["grant"],
                condition=Q(credit_note__isnull=True),
                name="resale_grant_pays_one_split",
            ),
            currency_is_iso("resale_proceeds_currency_iso"),
            models.CheckConstraint(
                condition=Q(base=F("fee") + F("provider_share") + F("seller_amount")),
                name="resale_parts_add_up",
            ),
            models.CheckConstraint(
                condition=Q(
                    credit_note__isnull=True, fee__gte=0, seller_amount__gte=0, from_grant=0
                )
                | Q(
                    credit_note__isnull=False,
                    base__lte=0,
                    fee__lte=0,
                    seller_amount__lte=0,
                    from_grant__gte=0,
                    from_grant__lte=-F("seller_amount"),
                ),
                name="resale_proceeds_sign",
            ),
            models.CheckConstraint(
                condition=Q(credit_note__isnull=True) | Q(from_grant=0) | Q(grant__isnull=False),
                name="resale_give_back_names_its_grant",
            ),
            models.CheckConstraint(
                condition=Q(marketplace_fee_pct__gte=0, provider_share_pct__gte=0)
                & Q(provider_share_pct__lte=100 - F("marketplace_fee_pct")),
                name="resale_proceeds_pct_range",
            ),
            models.CheckConstraint(condition=~Q(explanation=""), name="resale_proceeds_explained"),
        ]

    def __str__(self) -> str:
        what = f"credit note {self.credit_note_id}" if self.credit_note_id else "split"
        return f"resale {what} of invoice {self.invoice_id}: {self.seller_amount} {self.currency}"

    @property
    def owed_by_seller(self) -> Decimal:
        """A give-back after payment (it names the proceeds grant): what the grant no longer
        held, owed back by the seller; 0 otherwise."""
        if self.credit_note_id is None or self.grant_id is None:
            return Decimal(0)
        return -self.seller_amount - self.from_grant

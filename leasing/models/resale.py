"""Resale listings: a lessee offers some GPUs of its reserved lease for a future window."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from core.fields import currency_field, currency_is_iso, rate_field
from leasing.choices import OnParentEnd, ResaleStatus
from leasing.models.holds_leases import Lease


def _pct_field(help_text: str) -> Any:  # a DecimalField, typed as the model field it becomes
    return models.DecimalField(max_digits=7, decimal_places=4, help_text=help_text)


class ResaleListing(models.Model):
    """N GPUs of a parent lease for [start, end) at an ask per GPU-hour, with the assignment
    clause's terms frozen at listing time (they govern the sale and, in billing, the split).

    While open it owns nested allocations (Allocation.listing, parent = the seller's allocation)
    that reserve exactly that GPU-time; the sale hands them to the buyer's sublease.
    """

    seller = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="resale_listings"
    )
    parent_lease = models.ForeignKey(
        Lease, on_delete=models.PROTECT, related_name="resale_listings"
    )
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    ask_price_per_gpu_hour = rate_field()
    currency = currency_field()
    status = models.CharField(max_length=16, choices=ResaleStatus.choices)
    consent_required = models.BooleanField()
    consented_at = models.DateTimeField(null=True, blank=True)
    consented_by = models.CharField(max_length=200, blank=True)
    provider_share_pct = _pct_field("The provider's share of the buyer's payments (clause).")
    marketplace_fee_pct = _pct_field("The marketplace's fee on the buyer's payments (clause).")
    price_floor_pct = _pct_field("The floor: this % of the parent contract's rate (clause).")
    floor_rate = rate_field(help_text="The lowest ask the clause allowed when listed.")
    on_parent_end = models.CharField(max_length=32, choices=OnParentEnd.choices)
    sublease = models.OneToOneField(
        Lease,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="resale_listing",
        help_text="The buyer's lease, once sold.",
    )
    sold_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was withdrawn, cancelled or expired."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["status", "start", "end"], name="resale_listing_open_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="resale_window_order"),
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="resale_count_positive"),
            models.CheckConstraint(
                condition=Q(ask_price_per_gpu_hour__gt=0)
                & Q(ask_price_per_gpu_hour__gte=F("floor_rate")),
                name="resale_ask_positive_and_above_floor",
            ),
            models.CheckConstraint(
                condition=Q(provider_share_pct__gte=0, marketplace_fee_pct__gte=0)
                & Q(price_floor_pct__gte=0, price_floor_pct__lte=100)
                & Q(provider_share_pct__lte=100 - F("marketplace_fee_pct")),
                name="resale_shares_valid",
            ),
            models.CheckConstraint(
                condition=Q(status__in=ResaleStatus.values)
                & Q(on_parent_end__in=OnParentEnd.values),
                name="resale_status_and_rule_known",
            ),
            # Sold exactly when it has a sublease, and then when.
            models.CheckConstraint(
                condition=(
                    Q(status=ResaleStatus.SOLD, sublease__isnull=False, sold_at__isnull=False)
                )
                | (~Q(status=ResaleStatus.SOLD) & Q(sublease__isnull=True, sold_at__isnull=True)),
                name="resale_sold_iff_sublease",
            ),
            # Buyable (open) only with the provider's consent when the clause asks for it.
            models.CheckConstraint(
                condition=~Q(status=ResaleStatus.OPEN)
                | Q(consent_required=False)
                | Q(consented_at__isnull=False),
                name="resale_open_has_consent",
            ),
            currency_is_iso("resale_currency_iso"),
        ]

    def __str__(self) -> str:
        return f"resale listing {self.pk} of lease {self.parent_lease_id}"

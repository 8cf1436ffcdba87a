"""Holds (short reservations), the per-organization hold limit, and leases."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from contracts.models import Contract
from core.fields import currency_field, rate_field
from core.history import audit_history
from core.tags import tags_check, tags_field
from leasing.choices import (
    HoldStatus,
    LeaseStatus,
    PricingMode,
    Workload,
)
from leasing.models.offers import Offer
from leasing.models.quotes import Quote


class Hold(models.Model):
    """Specific GPUs reserved for a short time, closing the race between check and create."""

    customer = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="holds")
    offer = models.ForeignKey(Offer, on_delete=models.CASCADE, related_name="holds")
    quote = models.ForeignKey(Quote, null=True, blank=True, on_delete=models.SET_NULL)
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    pricing_mode = models.CharField(max_length=16, choices=PricingMode.choices)
    term_months = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=HoldStatus.choices, default=HoldStatus.ACTIVE)
    expires_at = models.DateTimeField()
    tags = tags_field()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["status", "expires_at"], name="hold_status_expiry_idx"),
            # The hold limits count an organization's active holds and its holds of the last hour.
            models.Index(fields=["customer", "created_at"], name="hold_customer_created_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="hold_window_order"),
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="hold_count_positive"),
            tags_check("tags", "hold_tags_valid"),
        ]

    def __str__(self) -> str:
        return f"hold {self.pk}"


class HoldLimit(models.Model):
    """An operator's override of one organization's hold limits; an empty field keeps the
    setting (HOLD_MAX_GPUS, HOLD_MAX_ACTIVE, HOLD_MAX_PER_HOUR). Zero allows no holds."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, related_name="hold_limit"
    )
    max_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="GPUs in its active holds at once (empty: the setting)."
    )
    max_active = models.PositiveIntegerField(
        null=True, blank=True, help_text="Active holds at once (empty: the setting)."
    )
    max_per_hour = models.PositiveIntegerField(
        null=True, blank=True, help_text="Holds created per rolling hour (empty: the setting)."
    )
    reason = models.TextField(help_text="Why this organization gets other limits.")
    updated_at = models.DateTimeField(auto_now=True)
    history = audit_history()

    class Meta:
        ordering = ["organization"]

    def __str__(self) -> str:
        return f"hold limits of {self.organization}"


class Lease(models.Model):
    """GPUs leased by a customer for a window, under a contract frozen from the offer."""

    customer = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="leases")
    offer = models.ForeignKey(Offer, on_delete=models.PROTECT, related_name="leases")
    contract = models.OneToOneField(Contract, on_delete=models.PROTECT, related_name="lease")
    hold = models.OneToOneField(Hold, null=True, blank=True, on_delete=models.SET_NULL)
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    pricing_mode = models.CharField(max_length=16, choices=PricingMode.choices)
    term_months = models.PositiveIntegerField(null=True, blank=True)
    price_per_gpu_hour = rate_field()
    price_per_node_month = rate_field(
        null=True,
        blank=True,
        help_text="Whole-node monthly rent (node_month offers); then the GPU-hour rate is 0.",
    )
    currency = currency_field()
    status = models.CharField(max_length=24, choices=LeaseStatus.choices)
    placement = models.CharField(max_length=16, help_text="single_node or multi_node.")
    workload = models.CharField(
        max_length=16,
        choices=Workload.choices,
        default=Workload.UNSPECIFIED,
        help_text="What the customer said the lease runs, when it was created.",
    )
    tags = tags_field()
    ended_at = models.DateTimeField(null=True, blank=True)
    gpus_ready_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its last GPUs are handed over, if it had to preempt interruptible "
        "capacity (the notice's end); empty: at its start.",
    )
    parent_lease = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="subleases",
        help_text="A sublease: the seller's lease whose GPU-time it bought (resale listing).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="lease_window_order"),
            models.CheckConstraint(
                condition=~Q(parent_lease=F("pk")), name="lease_not_its_own_parent"
            ),
            models.CheckConstraint(
                condition=Q(gpus_ready_at__isnull=True) | Q(gpus_ready_at__gte=F("start")),
                name="lease_gpus_ready_after_start",
            ),
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="lease_count_positive"),
            models.CheckConstraint(
                condition=Q(price_per_gpu_hour__gte=0), name="lease_price_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(price_per_node_month__isnull=True)
                | Q(price_per_node_month__gt=0, price_per_gpu_hour=0),
                name="lease_node_month_rent_alone",
            ),
            tags_check("tags", "lease_tags_valid"),
        ]

    def __str__(self) -> str:
        return f"lease {self.pk} ({self.contract.number})"

"""Offers: card-hour capacity a provider sells from a pool of one GPU model at one site."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from core.fields import currency_field, currency_is_iso, rate_field
from core.history import audit_history
from inventory.models import GpuModel, Node, Site
from leasing.choices import (
    OfferStatus,
    PriceUnit,
)


class Offer(models.Model):
    """Card-hour capacity a provider sells: a pool of one GPU model at one site (or named nodes)."""

    provider = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="offers")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="offers")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="offers")
    nodes = models.ManyToManyField(
        Node,
        blank=True,
        related_name="offers",
        help_text="Empty: every node of the model at the site.",
    )
    name = models.CharField(max_length=120)
    price_per_gpu_hour = rate_field(help_text="On-demand rate.")
    price_unit = models.CharField(
        max_length=16,
        choices=PriceUnit.choices,
        default=PriceUnit.GPU_HOUR,
        help_text="node_month: leases take whole nodes at the monthly rent per node.",
    )
    price_per_node_month = rate_field(
        null=True, blank=True, help_text="Monthly rent of one whole node (node_month offers)."
    )
    currency = currency_field()
    reserved_ladder = models.JSONField(
        default=dict, blank=True, help_text='Term months → discount %, e.g. {"1": "5", "12": "25"}.'
    )
    interruptible_price_per_gpu_hour = rate_field(
        null=True, blank=True, help_text="Empty: no interruptible capacity."
    )
    preemption_notice_minutes = models.PositiveIntegerField(default=5)
    min_term_hours = models.PositiveIntegerField(default=1)
    available_from = models.DateTimeField()
    available_until = models.DateTimeField(null=True, blank=True)
    contract_template = models.JSONField(
        default=list, blank=True, help_text="Clauses every lease of this offer gets."
    )
    index_linked_terms = models.JSONField(
        null=True,
        blank=True,
        help_text="Empty: fixed prices only. Else the index-linked option beside them: "
        '{"spread_type": "percent", "spread": "5", "floor_rate": "1.8", "cap_rate": "3", '
        '"reset_months": 1, "fixing_day": "last"} (the index_linked clause without kind and mode).',
    )
    status = models.CharField(
        max_length=16, choices=OfferStatus.choices, default=OfferStatus.PUBLISHED
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = audit_history()

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status", "gpu_model"], name="offer_status_model_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(price_per_gpu_hour__gt=0), name="offer_price_positive"
            ),
            models.CheckConstraint(
                condition=Q(interruptible_price_per_gpu_hour__isnull=True)
                | Q(interruptible_price_per_gpu_hour__gt=0),
                name="offer_interruptible_price_positive",
            ),
            models.CheckConstraint(
                condition=Q(price_unit=PriceUnit.GPU_HOUR, price_per_node_month__isnull=True)
                | Q(
                    price_unit=PriceUnit.NODE_MONTH,
                    price_per_node_month__isnull=False,  # NULL > 0 is not false in SQL
                    price_per_node_month__gt=0,
                ),
                name="offer_node_month_price_iff_unit",
            ),
            currency_is_iso("offer_currency_iso"),
            models.CheckConstraint(
                condition=Q(available_until__isnull=True)
                | Q(available_until__gt=F("available_from")),
                name="offer_availability_order",
            ),
            models.CheckConstraint(
                condition=Q(min_term_hours__gte=1), name="offer_min_term_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name

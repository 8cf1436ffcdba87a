"""Quotes and the shortfalls of quotes that found no capacity."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from accounts.models import Organization
from core.fields import amount_field, currency_field, rate_field
from inventory.models import GpuModel
from leasing.choices import (
    PricingMode,
)
from leasing.models.offers import Offer


class Quote(models.Model):
    """An exact price for a count of GPUs over a window; it holds nothing and expires."""

    customer = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="quotes")
    offer = models.ForeignKey(Offer, on_delete=models.CASCADE, related_name="quotes")
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    pricing_mode = models.CharField(max_length=16, choices=PricingMode.choices)
    term_months = models.PositiveIntegerField(null=True, blank=True)
    price_per_gpu_hour = rate_field()
    total = amount_field()
    currency = currency_field()
    breakdown = models.JSONField(default=dict)
    free_gpus_at_quote = models.PositiveIntegerField()
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="quote_window_order"),
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="quote_count_positive"),
        ]

    def __str__(self) -> str:
        return f"quote {self.pk}: {self.gpu_count} x {self.offer}"


class QuoteShortfall(models.Model):
    """A quote request that found no capacity: the queue of unmet demand capacity planning reads."""

    customer = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="quote_shortfalls"
    )
    gpu_model = models.ForeignKey(
        GpuModel, on_delete=models.PROTECT, related_name="quote_shortfalls"
    )
    gpu_count = models.PositiveIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    pricing_mode = models.CharField(max_length=16, choices=PricingMode.choices)
    country = models.CharField(max_length=2, blank=True)
    free_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="The most GPUs of one offer free for the window, if known."
    )
    largest_pool_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="Set when the count exceeded every matching pool."
    )
    requested_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        indexes = [
            models.Index(fields=["gpu_model", "requested_at"], name="quote_shortfall_model_idx")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(gpu_count__gt=0), name="quote_shortfall_count_positive"
            ),
            models.CheckConstraint(
                condition=Q(end__gt=F("start")), name="quote_shortfall_window_order"
            ),
        ]

    def __str__(self) -> str:
        return f"shortfall {self.pk}: {self.gpu_count} GPU(s) at {self.requested_at:%Y-%m-%d %H:%M}"

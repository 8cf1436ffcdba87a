"""The marketplace index: a daily fixing per GPU model and pricing mode from executed leases."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.fields import currency_field, currency_is_iso, quantity_field, rate_field
from inventory.choices import MarketplaceBasis, MarketplaceMode
from inventory.models.catalog import GpuModel
from inventory.models.market import IndexFixing


class MarketplaceFixing(models.Model):
    """The marketplace index of one GPU model, pricing mode and currency on one day; immutable.

    Computed by `cardhour-marketplace/1` (inventory.indexing.marketplace) from the leases
    executed that day, or from the external index when there were too few; `inputs` holds every
    trade (and the external fixing), so the rate can be recomputed from the row alone.
    """

    gpu_model = models.ForeignKey(
        GpuModel, on_delete=models.PROTECT, related_name="marketplace_fixings"
    )
    mode = models.CharField(max_length=16, choices=MarketplaceMode.choices)
    currency = currency_field()
    day = models.DateField()
    basis = models.CharField(max_length=20, choices=MarketplaceBasis.choices)
    rate = rate_field(null=True, blank=True, help_text="Per GPU-hour; empty when basis is none.")
    methodology = models.CharField(max_length=32)
    trade_count = models.PositiveIntegerField(help_text="Executed leases of the day behind it.")
    gpu_hours = quantity_field(help_text="Their booked GPU-hours, before the trim.")
    fallback_fixing = models.ForeignKey(
        IndexFixing,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The external fixing it fell back to.",
    )
    inputs = models.JSONField()
    dropped = models.JSONField(default=list, help_text="GPU-hours trimmed from each trade.")
    explanation = models.TextField()
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["-day", "gpu_model", "mode", "currency"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_model", "mode", "currency", "day"],
                name="marketplace_fixing_one_per_day",
            ),
            models.CheckConstraint(
                condition=(
                    Q(basis=MarketplaceBasis.TRADES)
                    & Q(rate__isnull=False)
                    & Q(rate__gt=0)
                    & Q(trade_count__gt=0)
                    & Q(fallback_fixing__isnull=True)
                )
                | (
                    Q(basis=MarketplaceBasis.EXTERNAL_FALLBACK)
                    & Q(rate__isnull=False)
                    & Q(rate__gt=0)
                    & Q(fallback_fixing__isnull=False)
                )
                | (
                    Q(basis=MarketplaceBasis.NONE)
                    & Q(rate__isnull=True)
                    & Q(fallback_fixing__isnull=True)
                ),
                name="marketplace_fixing_rate_matches_basis",
            ),
            models.CheckConstraint(
                condition=Q(gpu_hours__gte=0), name="marketplace_fixing_hours_not_negative"
            ),
            currency_is_iso("marketplace_fixing_currency_iso"),
        ]
        indexes = [
            models.Index(
                fields=["gpu_model", "mode", "currency", "day"],
                name="marketplace_fixing_series_idx",
            )
        ]

    def __str__(self) -> str:
        value = self.rate if self.rate is not None else self.basis
        return f"{self.gpu_model} {self.mode} {self.currency} {self.day}: {value}"

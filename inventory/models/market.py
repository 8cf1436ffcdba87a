"""The market index: registered sources, price observations and the daily fixings."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower

from accounts.models import Organization
from core.fields import currency_field, currency_is_iso, rate_field
from core.history import audit_history
from inventory import indexing
from inventory.choices import FixingStatus, IndexSourceKind, PriceTerm
from inventory.models.catalog import GpuModel


class IndexSource(models.Model):
    """A source of market observations an operator registered for the index, and its owner.

    Its vote counts once per independent owner: the owner organization for marketplace members
    (required for a provider's list price), else the external publisher's name.
    """

    name = models.CharField(
        max_length=200,
        help_text="Unique (case-insensitive); operators' observations name it in `source`.",
    )
    kind = models.CharField(max_length=24, choices=IndexSourceKind.choices)
    owner_organization = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="index_sources",
        help_text="The marketplace member that owns it; for a provider list price, the provider.",
    )
    owner_name = models.CharField(
        max_length=200,
        blank=True,
        help_text="The external publisher; its normalised name is the owner when no member is.",
    )
    weight = models.DecimalField(max_digits=8, decimal_places=4, default=1)
    is_active = models.BooleanField(
        default=True, help_text="Inactive sources are kept for the record but count for nothing."
    )
    notes = models.TextField(blank=True)
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    registered_by_organization = models.ForeignKey(
        Organization, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    registered_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = audit_history()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(Lower("name"), name="index_source_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="index_source_named"),
            models.CheckConstraint(condition=Q(weight__gt=0), name="index_source_weight_positive"),
            models.CheckConstraint(
                condition=Q(owner_organization__isnull=False) | ~Q(owner_name=""),
                name="index_source_owner_present",
            ),
            models.CheckConstraint(
                condition=~Q(kind=IndexSourceKind.PROVIDER_LIST_PRICE)
                | Q(owner_organization__isnull=False),
                name="index_source_list_price_of_a_member",
            ),
            # The marketplace's own trades belong to no single member: its publisher name owns it.
            models.CheckConstraint(
                condition=~Q(kind=IndexSourceKind.MARKETPLACE_TRADES)
                | (Q(owner_organization__isnull=True) & ~Q(owner_name="")),
                name="index_source_marketplace_trades_owned_by_name",
            ),
            models.UniqueConstraint(
                fields=["owner_organization"],
                condition=Q(kind=IndexSourceKind.PROVIDER_LIST_PRICE),
                name="index_source_one_list_price_per_provider",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def independence_key(self) -> str:
        """The owner whose vote this source is part of (`org:<id>` or `publisher:<name>`)."""
        return indexing.independence_key(
            organization_id=self.owner_organization_id, owner_name=self.owner_name
        )


class MarketPrice(models.Model):
    """One observed market price per GPU-hour for a model, term and currency on a day."""

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="market_prices")
    observed_on = models.DateField()
    term = models.CharField(max_length=16, choices=PriceTerm.choices, default=PriceTerm.ON_DEMAND)
    price_per_gpu_hour = rate_field()
    currency = currency_field()
    source = models.CharField(max_length=200, help_text="Who quoted it, e.g. a price list URL.")
    sample_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="How many quotes the observation summarises."
    )
    recorded_by = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="market_prices",
        help_text="The organization that posted it; empty when entered in the admin.",
    )
    index_source = models.ForeignKey(
        IndexSource,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="observations",
        help_text="The registered source it counts through; empty: it counts for nothing.",
    )
    recorded_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-observed_on", "gpu_model", "term", "currency", "source"]
        constraints = [
            # Re-posting the same source's observation corrects it instead of skewing the median.
            models.UniqueConstraint(
                fields=["gpu_model", "observed_on", "term", "currency", "source", "recorded_by"],
                name="market_price_one_per_source_and_day",
                nulls_distinct=False,
            ),
            models.CheckConstraint(
                condition=Q(price_per_gpu_hour__gt=0), name="market_price_positive"
            ),
            models.CheckConstraint(
                condition=Q(sample_size__isnull=True) | Q(sample_size__gt=0),
                name="market_price_sample_size_positive",
            ),
            currency_is_iso("market_price_currency_iso"),
        ]
        indexes = [
            models.Index(
                fields=["gpu_model", "term", "currency", "observed_on"],
                name="market_price_series_idx",
            )
        ]

    def __str__(self) -> str:
        return (
            f"{self.gpu_model} {self.term} {self.price_per_gpu_hour} {self.currency}"
            f" on {self.observed_on}"
        )

    @property
    def eligible(self) -> bool:
        """It counts for the index: tied to a registered source that is active."""
        return self.index_source is not None and self.index_source.is_active


class IndexFixing(models.Model):
    """The index of one GPU model, term and currency on one day; never changed once written.

    It stores everything it was computed from (`inputs`: parameters, observations, votes), what
    did not count (`dropped`) and a sentence, so it can be recomputed and explained.
    """

    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="index_fixings")
    term = models.CharField(max_length=16, choices=PriceTerm.choices)
    currency = currency_field()
    day = models.DateField()
    status = models.CharField(max_length=24, choices=FixingStatus.choices)
    rate = rate_field(null=True, blank=True, help_text="Per GPU-hour.")
    methodology = models.CharField(max_length=32)
    owner_count = models.PositiveSmallIntegerField(
        help_text="Independent owners that voted (before outliers were dropped)."
    )
    inputs = models.JSONField()
    dropped = models.JSONField(default=list)
    explanation = models.TextField()
    computed_at = models.DateTimeField()

    class Meta:
        ordering = ["-day", "gpu_model", "term", "currency"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_model", "term", "currency", "day"], name="index_fixing_one_per_day"
            ),
            models.CheckConstraint(
                # rate IS NOT NULL spelled out: a CHECK passes when it evaluates to NULL.
                condition=(
                    Q(status=FixingStatus.FIXED)
                    & Q(rate__isnull=False)
                    & Q(rate__gt=0)
                    & Q(owner_count__gt=0)
                )
                | (Q(status=FixingStatus.INSUFFICIENT_SOURCES) & Q(rate__isnull=True)),
                name="index_fixing_rate_when_fixed",
            ),
            currency_is_iso("index_fixing_currency_iso"),
        ]
        indexes = [
            models.Index(
                fields=["gpu_model", "term", "currency", "status", "day"],
                name="index_fixing_series_idx",
            )
        ]

    def __str__(self) -> str:
        value = self.rate if self.rate is not None else self.status
        return f"{self.gpu_model} {self.term} {self.currency} {self.day}: {value}"

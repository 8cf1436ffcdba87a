"""Asset economics: exchange rates, one row per node and month, payback, capacity signals.

The tables were created by billing (migration billing 0005) and keep their names: each model
names its `db_table`, and its constraint and index names are the ones in the database.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now

from accounts.models import Organization
from core.fields import currency_field, currency_is_iso
from inventory.models import GpuModel, Node, Site

MONEY: dict[str, Any] = {"max_digits": 20, "decimal_places": 2}
HOURS: dict[str, Any] = {"max_digits": 16, "decimal_places": 4}
FRACTION: dict[str, Any] = {"max_digits": 20, "decimal_places": 6}


class FxRate(models.Model):
    """One unit of `base_currency` is worth `rate` units of `quote_currency` from `valid_on`.

    Operators record them; the economics job converts an amount with the latest rate valid on
    the last day of its month (or the inverse of the opposite pair) and shows the conversion.
    """

    base_currency = currency_field()
    quote_currency = currency_field()
    rate = models.DecimalField(max_digits=24, decimal_places=10)
    valid_on = models.DateField()
    source = models.CharField(max_length=200, help_text="Where the rate comes from.")
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    recorded_by_organization = models.ForeignKey(
        Organization, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "billing_fxrate"
        ordering = ["base_currency", "quote_currency", "-valid_on"]
        constraints = [
            models.UniqueConstraint(
                fields=["base_currency", "quote_currency", "valid_on"], name="fx_rate_unique_day"
            ),
            models.CheckConstraint(condition=Q(rate__gt=0), name="fx_rate_positive"),
            models.CheckConstraint(
                condition=~Q(base_currency=F("quote_currency")), name="fx_rate_two_currencies"
            ),
            currency_is_iso("fx_rate_currency_iso", fields=("base_currency", "quote_currency")),
        ]

    def __str__(self) -> str:
        return f"1 {self.base_currency} = {self.rate} {self.quote_currency} ({self.valid_on})"


class AssetMonth(models.Model):
    """One calendar month of one node, in the node's capex currency; recomputed nightly.

    Net cash flow is revenue - energy - opex; depreciation is not cash and stays out of it but
    is part of the total cost of ownership. `revenue_detail` explains the revenue: the invoice
    and credit-note lines it came from, by kind and currency, and every FX conversion made.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="economics")
    month = models.DateField(help_text="First day of the month.")
    month_of_life = models.PositiveSmallIntegerField(help_text="1 for the acquisition month.")
    currency = currency_field()
    capex = models.DecimalField(**MONEY)
    hours_in_month = models.DecimalField(**HOURS)
    in_service_hours = models.DecimalField(**HOURS)
    available_gpu_hours = models.DecimalField(**HOURS, help_text="Outages excluded.")
    allocated_gpu_hours = models.DecimalField(**HOURS)
    utilization = models.DecimalField(**FRACTION, null=True, blank=True)
    energy_kwh = models.DecimalField(max_digits=18, decimal_places=3)
    energy_cost = models.DecimalField(**MONEY)
    opex = models.DecimalField(**MONEY)
    depreciation = models.DecimalField(**MONEY)
    revenue = models.DecimalField(
        **MONEY, help_text="The provider's: its own contracts' lines and its share of resale."
    )
    net_cash_flow = models.DecimalField(**MONEY)
    cumulative_net_cash_flow = models.DecimalField(**MONEY)
    book_value = models.DecimalField(**MONEY, help_text="At the end of the month.")
    # Resale (docs/architecture.md, "Economics"): what buyers of resold GPU-time on this node
    # paid under their subleases, split as billing booked it. Only the provider's share is in
    # `revenue`; the seller's proceeds and the marketplace fee are shown, never counted.
    resold_gpu_hours = models.DecimalField(
        **HOURS, default=Decimal("0"), help_text="Sold to buyers by lessees; part of allocated."
    )
    resale_revenue = models.DecimalField(
        **MONEY, default=Decimal("0"), help_text="What buyers of resold time paid (all parts)."
    )
    resale_provider_share = models.DecimalField(
        **MONEY, default=Decimal("0"), help_text="The provider's share of it (in revenue)."
    )
    reseller_proceeds = models.DecimalField(
        **MONEY, default=Decimal("0"), help_text="The sellers' part of it (not revenue)."
    )
    marketplace_fee = models.DecimalField(
        **MONEY, default=Decimal("0"), help_text="The marketplace's fee on it (not revenue)."
    )
    revenue_detail = models.JSONField(default=dict, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    inputs_fingerprint = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="Digest of what the month was computed from; the nightly job recomputes the "
        "month only when it changes.",
    )
    computed_at = models.DateTimeField(help_text="When the month's figures last changed.")

    class Meta:
        db_table = "billing_assetmonth"
        ordering = ["node_id", "month"]
        constraints = [
            models.UniqueConstraint(fields=["node", "month"], name="asset_month_unique"),
            models.CheckConstraint(condition=Q(month__day=1), name="asset_month_first_day"),
            models.CheckConstraint(
                condition=Q(in_service_hours__gte=0)
                & Q(in_service_hours__lte=F("hours_in_month"))
                & Q(allocated_gpu_hours__gte=0)
                & Q(allocated_gpu_hours__lte=F("available_gpu_hours")),
                name="asset_month_hours_consistent",
            ),
            models.CheckConstraint(
                condition=Q(utilization__isnull=True)
                | (Q(utilization__gte=0) & Q(utilization__lte=1)),
                name="asset_month_utilization_range",
            ),
            models.CheckConstraint(
                condition=Q(energy_cost__gte=0) & Q(opex__gte=0) & Q(depreciation__gte=0),
                name="asset_month_costs_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(net_cash_flow=F("revenue") - F("energy_cost") - F("opex")),
                name="asset_month_net_is_revenue_less_cash_costs",
            ),
            models.CheckConstraint(
                condition=Q(resold_gpu_hours__gte=0)
                & Q(resold_gpu_hours__lte=F("allocated_gpu_hours")),
                name="asset_month_resold_within_allocated",
            ),
            models.CheckConstraint(
                condition=Q(
                    resale_revenue=F("resale_provider_share")
                    + F("reseller_proceeds")
                    + F("marketplace_fee")
                ),
                name="asset_month_resale_split_adds_up",
            ),
            currency_is_iso("asset_month_currency_iso"),
        ]

    def __str__(self) -> str:
        return f"{self.node} {self.month:%Y-%m}"

    @property
    def total_cost(self) -> Any:
        """Depreciation + energy + opex: the month's total cost of ownership."""
        return self.depreciation + self.energy_cost + self.opex


class AssetPayback(models.Model):
    """A node's standing against its price as of the last nightly run (one row per node)."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="payback")
    currency = currency_field()
    capex = models.DecimalField(**MONEY)
    months_of_life = models.PositiveSmallIntegerField()
    cumulative_net_cash_flow = models.DecimalField(**MONEY)
    paid_back_in_month = models.PositiveSmallIntegerField(null=True, blank=True)
    paid_back_on = models.DateField(null=True, blank=True, help_text="Month of payback.")
    projected_payback_months = models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True
    )
    projection_reason = models.CharField(max_length=64, blank=True)
    roi_to_date = models.DecimalField(**FRACTION, null=True, blank=True)
    revenue_per_gpu_hour = models.DecimalField(**FRACTION, null=True, blank=True)
    revenue_per_gpu_hour_reason = models.CharField(max_length=64, blank=True)
    break_even_rate_per_gpu_hour = models.DecimalField(**FRACTION, null=True, blank=True)
    break_even_reason = models.CharField(max_length=64, blank=True)
    trailing_utilization = models.DecimalField(**FRACTION, null=True, blank=True)
    book_value = models.DecimalField(**MONEY)
    computed_at = models.DateTimeField()

    class Meta:
        db_table = "billing_assetpayback"
        ordering = ["node_id"]
        indexes = [models.Index(fields=["projected_payback_months"], name="payback_projected_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(paid_back_in_month__isnull=True)
                | Q(paid_back_in_month__lte=F("months_of_life")),
                name="payback_month_within_life",
            ),
            models.CheckConstraint(
                condition=Q(projected_payback_months__isnull=False) | ~Q(projection_reason=""),
                name="payback_projection_or_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"payback of {self.node}"


class SignalLevel(models.TextChoices):
    """How urgently a pool needs more capacity."""

    OK = "ok", "OK"
    PLAN_SCALING = "plan_scaling", "Plan scaling"
    ACT_NOW = "act_now", "Act now"


class CapacitySignal(models.Model):
    """A pool (one GPU model at one site) as the nightly job found it over the trailing week.

    A signal is raised when utilization crosses a threshold or when quote requests for the
    pool's GPU model that found no capacity grew against the week before.
    """

    provider = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="capacity_signals")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")
    evaluated_on = models.DateField()
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    gpu_count = models.PositiveIntegerField()
    available_gpu_hours = models.DecimalField(**HOURS)
    allocated_gpu_hours = models.DecimalField(**HOURS)
    utilization = models.DecimalField(**FRACTION, null=True, blank=True)
    level = models.CharField(max_length=16, choices=SignalLevel.choices)
    unmet_quotes = models.PositiveIntegerField(help_text="Refused for lack of capacity, window.")
    unmet_quotes_before = models.PositiveIntegerField(help_text="The same, the week before.")
    unmet_growing = models.BooleanField()
    raised = models.BooleanField(help_text="Level above OK or unmet quotes growing.")
    reasons = models.JSONField(default=list, blank=True)
    computed_at = models.DateTimeField()

    class Meta:
        db_table = "billing_capacitysignal"
        ordering = ["-evaluated_on", "site_id", "gpu_model_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "gpu_model", "evaluated_on"], name="capacity_signal_unique_day"
            ),
            models.CheckConstraint(
                condition=Q(allocated_gpu_hours__lte=F("available_gpu_hours")),
                name="capacity_signal_hours_consistent",
            ),
            models.CheckConstraint(
                condition=Q(window_end__gt=F("window_start")), name="capacity_signal_window"
            ),
        ]
        # The name Django derived for billing's table when the model lived there.
        indexes = [
            models.Index(fields=["provider", "evaluated_on"], name="billing_cap_provide_70d6df_idx")
        ]

    def __str__(self) -> str:
        return f"{self.site} {self.gpu_model} {self.evaluated_on}: {self.level}"


class EconomicsRun(models.Model):
    """One pass of the nightly economics job, kept for operators."""

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField()
    nodes = models.PositiveIntegerField()
    months = models.PositiveIntegerField()
    signals_raised = models.PositiveIntegerField()
    unattributed = models.JSONField(
        default=list,
        blank=True,
        help_text="Revenue lines no node could be found for (e.g. a token contract "
        "not linked to an SLA offering), so that nothing is dropped unseen.",
    )

    class Meta:
        db_table = "billing_economicsrun"
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"economics run {self.started_at:%Y-%m-%d %H:%M}"


class AssetEconomics(Node):
    """A node seen as a financial asset: the admin's fleet and per-asset payback pages.

    A proxy, so that the economics pages live in economics (inventory cannot import it).
    """

    class Meta:
        proxy = True
        verbose_name = "asset economics"
        verbose_name_plural = "asset economics (fleet)"
        permissions = [("recompute_asseteconomics", "Can recompute asset economics now")]


class DirtyMonth(models.Model):
    """A node whose months from `month` on have changed inputs since the nightly job last ran.

    Written only by the statement-level triggers of migration economics 0006 (allocations,
    outages, the node's and its site's cost columns, the node's retirement); the job takes the
    earliest row of each node and deletes what it took, in its own transaction. No foreign key:
    a row of a deleted node is simply never taken.
    """

    node_id = models.BigIntegerField()
    month = models.DateField(help_text="First day of the first month whose inputs changed.")
    marked_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "economics_dirtymonth"
        indexes = [models.Index(fields=["node_id", "month"], name="dirty_month_node_idx")]

    def __str__(self) -> str:
        return f"node {self.node_id} from {self.month:%Y-%m}"

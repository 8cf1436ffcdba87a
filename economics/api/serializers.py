"""Serializers of the economics API (output only): assets and their months, capacity signals,
unit economics and FX rates.

Amounts are in the asset's (or scope's) currency at its minor unit; ratios are fractions with
six decimals; a null ratio comes with the reason it has no value.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.fields import DecimalString, MinorUnitMixin
from economics.models import AssetMonth, CapacitySignal, FxRate
from economics.selectors import unit_economics as unit_economics_selector
from inventory.api.serializers import SiteRefSerializer
from inventory.models import Node


class ReasonField(serializers.CharField):
    """Why a figure is null (e.g. no_allocated_gpu_hours); null when the figure exists."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, allow_null=True, **kwargs)

    def to_representation(self, value: Any) -> Any:
        return str(value) if value else None


# ------------------------------------------------------------------ assets


def _payback_decimal(name: str, *, places: int, help_text: str = "") -> Any:
    """A read-only figure of the node's AssetPayback (null before the first run), at the
    model's precision."""
    return serializers.DecimalField(
        max_digits=20,
        decimal_places=places,
        source=f"payback.{name}",
        read_only=True,
        allow_null=True,
        help_text=help_text or None,
    )


class AssetSerializer(MinorUnitMixin, serializers.ModelSerializer[Node]):
    """A node and its payback as of the last nightly run (all null before the first run).

    Amounts are in the node's capex `currency`; ratios are fractions (0.25 = 25 %); each null
    ratio comes with the reason it has no value.
    """

    money_fields = ("capex", "cumulative_net_cash_flow", "book_value")

    site = SiteRefSerializer(read_only=True)
    gpu_model: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    # A plain string: the NodeStatus enum keeps its component name (NodeStatusEnum) in the schema.
    status = serializers.CharField(read_only=True, help_text="active, maintenance or retired.")
    currency = serializers.CharField(read_only=True, help_text="The capex currency.")
    months_of_life = serializers.IntegerField(
        source="payback.months_of_life", read_only=True, allow_null=True
    )
    cumulative_net_cash_flow = _payback_decimal("cumulative_net_cash_flow", places=2)
    paid_back_in_month = serializers.IntegerField(
        source="payback.paid_back_in_month",
        read_only=True,
        allow_null=True,
        help_text="Month of life in which the cumulative net cash flow reached the capex.",
    )
    paid_back_on = serializers.DateField(
        source="payback.paid_back_on", read_only=True, allow_null=True
    )
    projected_payback_months = _payback_decimal(
        "projected_payback_months",
        places=2,
        help_text="Months of life until payback at the trailing months' pace.",
    )
    projection_reason = ReasonField(source="payback.projection_reason")
    roi_to_date = _payback_decimal("roi_to_date", places=6)
    revenue_per_gpu_hour = _payback_decimal("revenue_per_gpu_hour", places=6)
    revenue_per_gpu_hour_reason = ReasonField(source="payback.revenue_per_gpu_hour_reason")
    break_even_rate_per_gpu_hour = _payback_decimal("break_even_rate_per_gpu_hour", places=6)
    break_even_reason = ReasonField(source="payback.break_even_reason")
    trailing_utilization = _payback_decimal("trailing_utilization", places=6)
    book_value = _payback_decimal("book_value", places=2)
    computed_at = serializers.DateTimeField(
        source="payback.computed_at",
        read_only=True,
        allow_null=True,
        help_text="When the nightly job computed these figures; null before its first run.",
    )

    class Meta:
        model = Node
        fields = [
            "id",
            "hostname",
            "site",
            "gpu_model",
            "gpu_count",
            "status",
            "currency",
            "capex",
            "acquired_on",
            "service_life_months",
            "months_of_life",
            "cumulative_net_cash_flow",
            "paid_back_in_month",
            "paid_back_on",
            "projected_payback_months",
            "projection_reason",
            "roi_to_date",
            "revenue_per_gpu_hour",
            "revenue_per_gpu_hour_reason",
            "break_even_rate_per_gpu_hour",
            "break_even_reason",
            "trailing_utilization",
            "book_value",
            "computed_at",
        ]
        read_only_fields = fields


ASSET_CSV_FIELDS = (
    "id",
    "hostname",
    "site_id",
    "site_name",
    *[name for name in AssetSerializer.Meta.fields if name not in {"id", "hostname", "site"}],
)


class AssetMonthSerializer(MinorUnitMixin, serializers.ModelSerializer[AssetMonth]):
    """One calendar month of a node in its capex currency.

    net_cash_flow = revenue - energy_cost - opex (depreciation is not cash);
    total_cost = depreciation + energy_cost + opex. `revenue_detail` lists the documents the
    revenue came from, by kind and currency, and every FX conversion made.

    Resale: `resold_gpu_hours` were sold by lessees to buyers (part of the allocated hours,
    counted once); `resale_revenue` is what those buyers paid, split into
    `resale_provider_share` (part of `revenue`), `reseller_proceeds` and `marketplace_fee`
    (neither is the provider's revenue).
    """

    money_fields = (
        "capex",
        "energy_cost",
        "opex",
        "depreciation",
        "total_cost",
        "revenue",
        "resale_revenue",
        "resale_provider_share",
        "reseller_proceeds",
        "marketplace_fee",
        "net_cash_flow",
        "cumulative_net_cash_flow",
        "book_value",
    )

    total_cost = serializers.DecimalField(max_digits=21, decimal_places=2, read_only=True)
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = AssetMonth
        fields = [
            "month",
            "month_of_life",
            "currency",
            "capex",
            "hours_in_month",
            "in_service_hours",
            "available_gpu_hours",
            "allocated_gpu_hours",
            "resold_gpu_hours",
            "utilization",
            "energy_kwh",
            "energy_cost",
            "opex",
            "depreciation",
            "total_cost",
            "revenue",
            "resale_revenue",
            "resale_provider_share",
            "reseller_proceeds",
            "marketplace_fee",
            "net_cash_flow",
            "cumulative_net_cash_flow",
            "book_value",
            "revenue_detail",
            "warnings",
            "computed_at",
        ]
        read_only_fields = fields


class AssetEconomicsSerializer(serializers.Serializer[Any]):
    """A node's payback summary and its months in the range asked for, oldest first."""

    asset = AssetSerializer()
    months = AssetMonthSerializer(many=True)


# ------------------------------------------------------------------ capacity signals


class SignalWindowSerializer(serializers.Serializer[CapacitySignal]):
    """The trailing week a signal was evaluated over, [start, end)."""

    start = serializers.DateTimeField(source="window_start")
    end = serializers.DateTimeField(source="window_end")


class CapacitySignalSerializer(serializers.ModelSerializer[CapacitySignal]):
    """A pool (one GPU model at one site) as the nightly job found it over the trailing week."""

    provider: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    site = SiteRefSerializer(read_only=True)
    gpu_model: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    window = SignalWindowSerializer(source="*", read_only=True)
    reasons = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = CapacitySignal
        fields = [
            "id",
            "provider",
            "site",
            "gpu_model",
            "evaluated_on",
            "window",
            "level",
            "raised",
            "reasons",
            "gpu_count",
            "available_gpu_hours",
            "allocated_gpu_hours",
            "utilization",
            "unmet_quotes",
            "unmet_quotes_before",
            "unmet_growing",
            "computed_at",
        ]
        read_only_fields = fields


SIGNAL_CSV_FIELDS = (
    "id",
    "provider",
    "site_id",
    "site_name",
    "gpu_model",
    "evaluated_on",
    "window_start",
    "window_end",
    *CapacitySignalSerializer.Meta.fields[6:],
)


# ------------------------------------------------------------------ unit economics


class RatioSerializer(serializers.Serializer[Any]):
    """A quotient, or null with the reason there is none."""

    value = serializers.DecimalField(max_digits=24, decimal_places=6, allow_null=True)
    reason = serializers.CharField(allow_null=True)


class CostBreakdownSerializer(serializers.Serializer[Any]):
    """The period's total cost of ownership by part."""

    depreciation = serializers.DecimalField(max_digits=20, decimal_places=2)
    energy = serializers.DecimalField(max_digits=20, decimal_places=2)
    opex = serializers.DecimalField(max_digits=20, decimal_places=2)


class UnitEconomicsHourSerializer(serializers.Serializer[Any]):
    """One hour of traffic, throughput utilization and latency percentiles."""

    hour = serializers.DateTimeField()
    requests_total = serializers.IntegerField()
    requests_successful = serializers.IntegerField()
    tokens_successful = serializers.IntegerField()
    utilization = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    ttft_p95_ms = serializers.FloatField(allow_null=True)
    ttft_p99_ms = serializers.FloatField(allow_null=True)
    e2e_p95_ms = serializers.FloatField(allow_null=True)
    e2e_p99_ms = serializers.FloatField(allow_null=True)


class ModeCostsSerializer(serializers.Serializer[Any]):
    """Online or batch requests of a period: their share of the cost and their unit costs."""

    compute_share = RatioSerializer(
        help_text="Share of the tokens the GPUs computed (input not from the cache + output)."
    )
    total_cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    requests_total = serializers.IntegerField()
    requests_successful = serializers.IntegerField()
    tokens_successful = serializers.IntegerField()
    cost_per_successful_request = RatioSerializer()
    cost_per_million_successful_tokens = RatioSerializer()


class UnitEconomicsPeriodSerializer(serializers.Serializer[Any]):
    """One week or month of an offering or pool: what it cost and what it delivered."""

    scope = serializers.CharField(help_text="offering or pool.")
    scope_id = serializers.CharField(help_text="The offering id, or <site_id>:<gpu_model>.")
    scope_name = serializers.CharField()
    period = serializers.ChoiceField(choices=list(unit_economics_selector.PERIODS))
    period_start = serializers.DateField()
    period_end = serializers.DateField(help_text="Exclusive.")
    currency = serializers.CharField()
    total_cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    cost_breakdown = CostBreakdownSerializer()
    available_gpu_hours = serializers.DecimalField(max_digits=16, decimal_places=4)
    allocated_gpu_hours = serializers.DecimalField(max_digits=16, decimal_places=4)
    utilization_avg = RatioSerializer()
    utilization_peak = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    requests_total = serializers.IntegerField()
    requests_successful = serializers.IntegerField()
    requests_failed = serializers.IntegerField()
    tokens_successful = serializers.IntegerField()
    cost_per_successful_request = RatioSerializer()
    cost_per_million_successful_tokens = RatioSerializer()
    failed_request_share = RatioSerializer()
    cost_of_failed_requests = serializers.DecimalField(
        max_digits=20, decimal_places=2, allow_null=True
    )
    gpu_hours_by_workload = serializers.DictField(child=serializers.CharField())
    hourly = UnitEconomicsHourSerializer(many=True)
    by_mode = serializers.DictField(
        child=ModeCostsSerializer(), help_text="online and batch, when the period had them."
    )
    conversions = serializers.ListField(child=serializers.DictField())
    warnings = serializers.ListField(child=serializers.CharField())


class UnitEconomicsSerializer(serializers.Serializer[Any]):
    """Every period of the scope between `from` and `to`, oldest first."""

    results = UnitEconomicsPeriodSerializer(many=True)


# ------------------------------------------------------------------ resale (the seller's side)


class ResaleListingEconomicsSerializer(serializers.Serializer[Any]):
    """One sold listing from its seller's side, in the listing's currency, to the cent.

    buyers_paid = provider_share + marketplace_fee + proceeds (each buyer document split as billing
    booked it: fee and provider share rounded, the seller the rest; credit notes take back pro
    rata, the last one exactly what is left); margin = proceeds
    - cost_of_resold_hours (the resold GPU-hours at the seller's own contract rate).
    """

    id = serializers.IntegerField(source="listing.pk", help_text="The resale listing.")
    parent_lease = serializers.IntegerField(source="listing.parent_lease_id")
    sublease = serializers.IntegerField(source="listing.sublease_id")
    gpu_count = serializers.IntegerField(source="listing.gpu_count")
    start = serializers.DateTimeField(source="listing.start")
    end = serializers.DateTimeField(source="listing.end")
    currency = serializers.CharField(source="listing.currency")
    ask_price_per_gpu_hour = DecimalString(source="listing.ask_price_per_gpu_hour")
    provider_share_pct = DecimalString(source="listing.provider_share_pct")
    marketplace_fee_pct = DecimalString(source="listing.marketplace_fee_pct")
    resold_gpu_hours = DecimalString()
    buyers_paid = DecimalString(source="split.total")
    provider_share = DecimalString(source="split.provider_share")
    marketplace_fee = DecimalString(source="split.marketplace_fee")
    proceeds = DecimalString(source="split.seller_proceeds")
    parent_rate_per_gpu_hour = DecimalString(source="parent_rate")
    cost_of_resold_hours = DecimalString()
    margin = DecimalString()
    documents = serializers.ListField(
        child=serializers.CharField(), help_text="The buyer's invoices and credit notes counted."
    )


class ResaleTotalSerializer(serializers.Serializer[Any]):
    """The sold listings of one currency, summed."""

    currency = serializers.CharField()
    listings_sold = serializers.IntegerField()
    resold_gpu_hours = DecimalString()
    buyers_paid = DecimalString()
    provider_share = DecimalString()
    marketplace_fee = DecimalString()
    proceeds = DecimalString()
    cost_of_resold_hours = DecimalString()
    margin = DecimalString()


class ResaleEconomicsSerializer(serializers.Serializer[Any]):
    """A seller's sold listings (oldest window first) and their totals per currency."""

    results = ResaleListingEconomicsSerializer(many=True)
    totals = ResaleTotalSerializer(many=True)


# ------------------------------------------------------------------ FX rates


class FxRateSerializer(serializers.ModelSerializer[FxRate]):
    """1 `base_currency` is worth `rate` `quote_currency` from `valid_on` on."""

    recorded_by_organization: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )

    class Meta:
        model = FxRate
        fields = [
            "id",
            "base_currency",
            "quote_currency",
            "rate",
            "valid_on",
            "source",
            "recorded_by_organization",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

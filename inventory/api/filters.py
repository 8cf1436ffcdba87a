"""FilterSets of the inventory API: every field a user would filter by, with ranges."""

from __future__ import annotations

from typing import Any

import django_filters as filters
from django.db.models import Q, QuerySet

from core.api.filters import IsoDateTimeFilter
from inventory.choices import (
    AttentionKind,
    FixingStatus,
    FormFactor,
    GpuHealth,
    IndexSourceKind,
    MarketplaceBasis,
    MarketplaceMode,
    NodeStatus,
    OutageCause,
    OutageKind,
    Precision,
    PriceTerm,
    SiteTier,
    Vendor,
)
from inventory.models import (
    Gpu,
    GpuModel,
    IndexFixing,
    IndexSource,
    LlmModel,
    MarketplaceFixing,
    MarketPrice,
    Node,
    Outage,
    Site,
)
from inventory.selectors import nodes_with_health


class GpuModelFilter(filters.FilterSet):
    """Catalog filters: vendor, form factor, generation and spec ranges."""

    vendor = filters.MultipleChoiceFilter(choices=Vendor.choices)
    form_factor = filters.MultipleChoiceFilter(choices=FormFactor.choices)
    generation = filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = GpuModel
        fields = {
            "memory_gb": ["exact", "gte", "lte"],
            "memory_bandwidth_tbps": ["gte", "lte"],
            "dense_bf16_tflops": ["gte", "lte"],
            "dense_fp8_tflops": ["gte", "lte"],
            "tdp_watts": ["gte", "lte"],
            "ga_date": ["gte", "lte"],
        }


class LlmModelFilter(filters.FilterSet):
    """Model catalogue filters: publisher, attention kind, precision and size ranges."""

    publisher = filters.CharFilter(lookup_expr="iexact")
    attention = filters.MultipleChoiceFilter(choices=AttentionKind.choices)
    default_precision = filters.MultipleChoiceFilter(choices=Precision.choices)

    class Meta:
        model = LlmModel
        fields = {
            "parameters": ["gte", "lte"],
            "active_parameters": ["gte", "lte"],
            "max_context_tokens": ["gte", "lte"],
        }


class MarketPriceFilter(filters.FilterSet):
    """Observations by model, term, currency, source, index source, eligibility and day window."""

    gpu_model = filters.CharFilter(field_name="gpu_model__slug")
    term = filters.MultipleChoiceFilter(choices=PriceTerm.choices)
    currency = filters.CharFilter(lookup_expr="iexact")
    source = filters.CharFilter(lookup_expr="icontains")
    index_source = filters.CharFilter(field_name="index_source__name", lookup_expr="iexact")
    eligible = filters.BooleanFilter(method="filter_eligible", label="Counts for the index")
    start = filters.DateFilter(field_name="observed_on", lookup_expr="gte")
    end = filters.DateFilter(field_name="observed_on", lookup_expr="lte")

    class Meta:
        model = MarketPrice
        fields = {"observed_on": ["exact", "gte", "lte"], "price_per_gpu_hour": ["gte", "lte"]}

    def filter_eligible(
        self, queryset: QuerySet[MarketPrice], name: str, value: Any
    ) -> QuerySet[MarketPrice]:
        if value is None:
            return queryset
        counts = Q(index_source__isnull=False, index_source__is_active=True)
        return queryset.filter(counts) if value else queryset.exclude(counts)


class SiteFilter(filters.FilterSet):
    """Sites by provider, place, tier and fault domain."""

    organization = filters.CharFilter(field_name="organization__slug")
    country = filters.CharFilter(lookup_expr="iexact")
    city = filters.CharFilter(lookup_expr="iexact")
    region = filters.CharFilter(lookup_expr="iexact")
    name = filters.CharFilter(lookup_expr="icontains")
    tier = filters.MultipleChoiceFilter(choices=SiteTier.choices)
    fault_domain = filters.CharFilter()

    class Meta:
        model = Site
        fields: list[str] = []


class NodeFilter(filters.FilterSet):
    """Nodes by site, place, provider, GPU model, status, GPU health and size."""

    site = filters.NumberFilter(field_name="site_id")
    site_name = filters.CharFilter(field_name="site__name", lookup_expr="iexact")
    provider = filters.CharFilter(field_name="site__organization__slug")
    country = filters.CharFilter(field_name="site__country", lookup_expr="iexact")
    city = filters.CharFilter(field_name="site__city", lookup_expr="iexact")
    region = filters.CharFilter(field_name="site__region", lookup_expr="iexact")
    gpu_model = filters.CharFilter(field_name="gpu_model__slug")
    vendor = filters.ChoiceFilter(field_name="gpu_model__vendor", choices=Vendor.choices)
    status = filters.MultipleChoiceFilter(choices=NodeStatus.choices)
    health = filters.MultipleChoiceFilter(
        choices=GpuHealth.choices, method="filter_health", label="Has a GPU in this health"
    )
    hostname = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Node
        fields = {"gpu_count": ["exact", "gte", "lte"], "nvlink": ["exact"]}

    def filter_health(self, queryset: QuerySet[Node], name: str, value: Any) -> QuerySet[Node]:
        return nodes_with_health(queryset, list(value)) if value else queryset


class GpuFilter(filters.FilterSet):
    """GPUs by node, site, model and health."""

    node = filters.NumberFilter(field_name="node_id")
    site = filters.NumberFilter(field_name="node__site_id")
    gpu_model = filters.CharFilter(field_name="node__gpu_model__slug")
    health = filters.MultipleChoiceFilter(choices=GpuHealth.choices)

    class Meta:
        model = Gpu
        fields: list[str] = []


class OutageFilter(filters.FilterSet):
    """Outages by node, GPU, kind, cause, and those meeting the window [start, end)."""

    node = filters.NumberFilter(field_name="node_id")
    gpu = filters.NumberFilter(field_name="gpu_id")
    site = filters.NumberFilter(field_name="node__site_id")
    kind = filters.ChoiceFilter(choices=OutageKind.choices)
    cause = filters.MultipleChoiceFilter(choices=OutageCause.choices)
    ongoing = filters.BooleanFilter(field_name="end", lookup_expr="isnull")
    start = IsoDateTimeFilter(method="filter_window_start", label="Meets the window from")
    end = IsoDateTimeFilter(method="filter_window_end", label="Meets the window until")

    class Meta:
        model = Outage
        fields: list[str] = []

    def filter_window_start(self, queryset: QuerySet[Outage], name: str, value: Any) -> Any:
        return queryset.filter(Q(end__isnull=True) | Q(end__gt=value))

    def filter_window_end(self, queryset: QuerySet[Outage], name: str, value: Any) -> Any:
        return queryset.filter(start__lt=value)


class IndexSourceFilter(filters.FilterSet):
    """Sources by kind, owner, activity and name."""

    kind = filters.MultipleChoiceFilter(choices=IndexSourceKind.choices)
    owner_organization = filters.CharFilter(field_name="owner_organization__slug")
    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = IndexSource
        fields = {"is_active": ["exact"], "weight": ["gte", "lte"]}


class IndexFixingFilter(filters.FilterSet):
    """Fixings by model, term, currency, status and a window of days (`from`, `to` inclusive)."""

    gpu_model = filters.CharFilter(field_name="gpu_model__slug")
    term = filters.MultipleChoiceFilter(choices=PriceTerm.choices)
    currency = filters.CharFilter(lookup_expr="iexact")
    status = filters.MultipleChoiceFilter(choices=FixingStatus.choices)

    class Meta:
        model = IndexFixing
        fields = {"day": ["exact", "gte", "lte"]}


# `from` and `to` are Python keywords, so they cannot be declared as class attributes.
IndexFixingFilter.base_filters["from"] = filters.DateFilter(
    field_name="day", lookup_expr="gte", label="First day (inclusive)"
)

IndexFixingFilter.base_filters["to"] = filters.DateFilter(
    field_name="day", lookup_expr="lte", label="Last day (inclusive)"
)


class MarketplaceFixingFilter(filters.FilterSet):
    """Marketplace fixings by model, mode, currency, basis and a window of days (inclusive)."""

    gpu_model = filters.CharFilter(field_name="gpu_model__slug")
    mode = filters.MultipleChoiceFilter(choices=MarketplaceMode.choices)
    currency = filters.CharFilter(lookup_expr="iexact")
    basis = filters.MultipleChoiceFilter(choices=MarketplaceBasis.choices)

    class Meta:
        model = MarketplaceFixing
        fields = {"day": ["exact", "gte", "lte"]}


MarketplaceFixingFilter.base_filters["from"] = filters.DateFilter(
    field_name="day", lookup_expr="gte", label="First day (inclusive)"
)
MarketplaceFixingFilter.base_filters["to"] = filters.DateFilter(
    field_name="day", lookup_expr="lte", label="Last day (inclusive)"
)

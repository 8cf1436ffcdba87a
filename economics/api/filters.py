"""Filters of the economics API: assets, capacity signals and FX rates."""

from __future__ import annotations

import django_filters

from economics.models import CapacitySignal, FxRate, SignalLevel
from inventory.choices import NodeStatus
from inventory.models import Node


class AssetFilter(django_filters.FilterSet):
    """Assets by site, GPU model, status, currency and whether they have paid back."""

    site = django_filters.NumberFilter(field_name="site_id")
    site_name = django_filters.CharFilter(field_name="site__name", lookup_expr="iexact")
    gpu_model = django_filters.CharFilter(field_name="gpu_model__slug")
    status = django_filters.MultipleChoiceFilter(choices=NodeStatus.choices)
    currency = django_filters.CharFilter(field_name="capex_currency", lookup_expr="iexact")
    paid_back = django_filters.BooleanFilter(
        field_name="payback__paid_back_in_month",
        lookup_expr="isnull",
        exclude=True,
        label="Has paid back its capex",
    )

    class Meta:
        model = Node
        fields = ["site", "gpu_model", "status"]


class CapacitySignalFilter(django_filters.FilterSet):
    """Signals by level, site, GPU model and evaluation day."""

    level = django_filters.MultipleChoiceFilter(choices=SignalLevel.choices)
    site = django_filters.NumberFilter(field_name="site_id")
    gpu_model = django_filters.CharFilter(field_name="gpu_model__slug")

    class Meta:
        model = CapacitySignal
        fields = {"evaluated_on": ["exact", "gte", "lte"]}


class FxRateFilter(django_filters.FilterSet):
    """Rates by currency pair and by a window of days they became valid."""

    base_currency = django_filters.CharFilter(lookup_expr="iexact")
    quote_currency = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = FxRate
        fields = {"valid_on": ["exact", "gte", "lte"]}

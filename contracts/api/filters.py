"""Filters of the contracts API."""

from __future__ import annotations

import django_filters

from contracts.choices import ContractStatus, EventKind, PricingBasis
from contracts.models import Contract, ContractEvent
from core.api.filters import IsoDateTimeFilter


class ContractFilter(django_filters.FilterSet):
    """Filter contracts by status, basis, parties, model and term window."""

    status = django_filters.MultipleChoiceFilter(choices=ContractStatus.choices)
    pricing_basis = django_filters.ChoiceFilter(choices=PricingBasis.choices)
    lessor = django_filters.CharFilter(field_name="lessor__slug")
    lessee = django_filters.CharFilter(field_name="lessee__slug")
    leased_model = django_filters.CharFilter(field_name="leased_model_slug")
    term_start__gte = IsoDateTimeFilter(field_name="term_start", lookup_expr="gte")
    term_start__lt = IsoDateTimeFilter(field_name="term_start", lookup_expr="lt")
    term_end__gte = IsoDateTimeFilter(field_name="term_end", lookup_expr="gte")
    term_end__lt = IsoDateTimeFilter(field_name="term_end", lookup_expr="lt")
    number = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = Contract
        fields = ["status", "pricing_basis", "currency", "number"]


class ContractEventFilter(django_filters.FilterSet):
    """Filter a contract's events by kind and effective time."""

    kind = django_filters.MultipleChoiceFilter(choices=EventKind.choices)
    start = IsoDateTimeFilter(field_name="effective_at", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="effective_at", lookup_expr="lt")

    class Meta:
        model = ContractEvent
        fields = ["kind"]

"""Filters of the leasing endpoints (holds, leases and their history)."""

from __future__ import annotations

import django_filters

from core.api.filters import IsoDateTimeFilter
from leasing.choices import LeaseEventKind
from leasing.models import LeaseEvent


class LeaseEventFilter(django_filters.FilterSet):
    """Filter a lease's history by kind and effective time."""

    kind = django_filters.MultipleChoiceFilter(choices=LeaseEventKind.choices)
    start = IsoDateTimeFilter(field_name="effective_at", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="effective_at", lookup_expr="lt")

    class Meta:
        model = LeaseEvent
        fields = ["kind"]

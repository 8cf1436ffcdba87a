"""Filters of the leasing endpoints (holds, leases and their history, acceptance runs)."""

from __future__ import annotations

import django_filters

from contracts.choices import AcceptanceRunStatus, AcceptanceSubmitter
from contracts.models import AcceptanceRun
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


class AcceptanceRunFilter(django_filters.FilterSet):
    """Filter acceptance runs by contract, status (e.g. claimed, disputed) and submitter."""

    contract = django_filters.NumberFilter(field_name="contract_id")
    status = django_filters.MultipleChoiceFilter(choices=AcceptanceRunStatus.choices)
    submitted_by_party = django_filters.ChoiceFilter(choices=AcceptanceSubmitter.choices)

    class Meta:
        model = AcceptanceRun
        fields = ["contract", "status", "submitted_by_party"]

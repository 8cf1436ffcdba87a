"""Filters of the leasing API: FilterSets for offers, SLA offerings, quotes, a lease's history and
acceptance runs, and the query-string parser of capacity search (whose filters feed one SQL
statement, not a queryset)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import django_filters as filters
from django.db.models import Q, QuerySet

from contracts.choices import AcceptanceRunStatus, AcceptanceSubmitter
from contracts.models import AcceptanceRun
from core.api.filters import IsoDateTimeFilter
from core.api.params import (
    choice_param,
    comma_list,
    currency_param,
    datetime_param,
    decimal_param,
    int_param,
    list_param,
    text_param,
)
from core.errors import FieldError, raise_if_any
from inventory.choices import Vendor
from leasing.choices import LeaseEventKind, OfferStatus, PricingMode
from leasing.models import LeaseEvent, Offer, PreemptionNotice, Quote, SlaOffering
from leasing.selectors import (
    INTERCONNECTS,
    MAX_TERM_MONTHS,
    ORDERINGS,
    CapacityFilters,
    window_resolve,
)

MAX_LIMIT = 200
DEFAULT_LIMIT = 50
MAX_OFFSET = 10000


class _SlugListFilter(filters.CharFilter):
    """One slug, or several separated by commas."""

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if not value:
            return qs
        return qs.filter(**{f"{self.field_name}__in": comma_list(value)})


class OfferFilter(filters.FilterSet):
    """Offers by provider, place, model, status, currency, price and availability."""

    provider = _SlugListFilter(field_name="provider__slug")
    site = filters.NumberFilter(field_name="site_id")
    gpu_model = _SlugListFilter(field_name="gpu_model__slug")
    vendor = filters.MultipleChoiceFilter(field_name="gpu_model__vendor", choices=Vendor.choices)
    country = filters.CharFilter(field_name="site__country", lookup_expr="iexact")
    city = filters.CharFilter(field_name="site__city", lookup_expr="iexact")
    region = filters.CharFilter(field_name="site__region", lookup_expr="iexact")
    status = filters.ChoiceFilter(choices=OfferStatus.choices)
    currency = filters.CharFilter(lookup_expr="iexact")
    interruptible = filters.BooleanFilter(
        field_name="interruptible_price_per_gpu_hour",
        lookup_expr="isnull",
        exclude=True,
        label="Sells interruptible capacity",
    )
    available_at = IsoDateTimeFilter(method="filter_available_at")
    name = filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Offer
        fields = {
            "price_per_gpu_hour": ["gte", "lte"],
            "interruptible_price_per_gpu_hour": ["gte", "lte"],
            "min_term_hours": ["lte"],
        }

    def filter_available_at(self, queryset: QuerySet[Offer], name: str, value: Any) -> Any:
        return queryset.filter(available_from__lte=value).filter(
            Q(available_until__isnull=True) | Q(available_until__gt=value)
        )


class SlaOfferingFilter(filters.FilterSet):
    """SLA offerings by provider, served model, currency, status, SLOs and prices."""

    provider = _SlugListFilter(field_name="provider__slug")
    served_model_name = filters.CharFilter(lookup_expr="icontains")
    currency = filters.CharFilter(lookup_expr="iexact")
    status = filters.ChoiceFilter(choices=OfferStatus.choices)

    class Meta:
        model = SlaOffering
        fields = {
            "price_per_million_input_tokens": ["gte", "lte"],
            "price_per_million_output_tokens": ["gte", "lte"],
            "availability_slo_pct": ["gte"],
            "ttft_p95_ms": ["lte"],
            "tpot_p99_ms": ["lte"],
            "committed_tokens_per_s": ["gte"],
        }


class QuoteFilter(filters.FilterSet):
    """The caller's quotes by offer, model, pricing mode and whether they are still valid."""

    offer = filters.NumberFilter(field_name="offer_id")
    gpu_model = _SlugListFilter(field_name="offer__gpu_model__slug")
    pricing_mode = filters.ChoiceFilter(choices=PricingMode.choices)
    valid_at = IsoDateTimeFilter(field_name="expires_at", lookup_expr="gt")
    created_at__gte = IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_at__lte = IsoDateTimeFilter(field_name="created_at", lookup_expr="lte")

    class Meta:
        model = Quote
        fields: list[str] = []  # every filter is declared above


class LeaseEventFilter(filters.FilterSet):
    """Filter a lease's history by kind and effective time."""

    kind = filters.MultipleChoiceFilter(choices=LeaseEventKind.choices)
    start = IsoDateTimeFilter(field_name="effective_at", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="effective_at", lookup_expr="lt")

    class Meta:
        model = LeaseEvent
        fields = ["kind"]


class PreemptionNoticeFilter(filters.FilterSet):
    """Filter preemption notices by lease, cut time and whether the cut was carried out."""

    lease = filters.NumberFilter(field_name="lease_id")
    cut_at__gte = IsoDateTimeFilter(field_name="cut_at", lookup_expr="gte")
    cut_at__lt = IsoDateTimeFilter(field_name="cut_at", lookup_expr="lt")
    executed = filters.BooleanFilter(field_name="executed_at", lookup_expr="isnull", exclude=True)

    class Meta:
        model = PreemptionNotice
        fields = ["lease"]


class AcceptanceRunFilter(filters.FilterSet):
    """Filter acceptance runs by contract, status (e.g. claimed, disputed) and submitter."""

    contract = filters.NumberFilter(field_name="contract_id")
    status = filters.MultipleChoiceFilter(choices=AcceptanceRunStatus.choices)
    submitted_by_party = filters.ChoiceFilter(choices=AcceptanceSubmitter.choices)

    class Meta:
        model = AcceptanceRun
        fields = ["contract", "status", "submitted_by_party"]


# ------------------------------------------------------------------ capacity search parameters


def capacity_filters_from_query(
    params: Mapping[str, str], *, now: datetime | None = None
) -> CapacityFilters:
    """Parse GET /api/v1/capacity/ parameters, or raise a 400 naming every bad field and code."""
    errors: list[FieldError] = []
    start = datetime_param(
        params,
        "start",
        errors=errors,
        message="start is an ISO-8601 date-time, e.g. 2026-03-01T00:00:00Z.",
    )
    end = datetime_param(params, "end", errors=errors, message="end is an ISO-8601 date-time.")
    hours = decimal_param(
        params, "hours", errors=errors, code="invalid", message="hours is a number."
    )
    term_months = int_param(
        params, "term_months", errors=errors, code="invalid", message="term_months is a number."
    )
    min_gpus = int_param(
        params, "min_gpus", errors=errors, code="invalid", message="min_gpus is a whole number."
    )
    memory = int_param(
        params, "memory_gb__gte", errors=errors, code="invalid", message="A whole number of GB."
    )
    price_gte = decimal_param(
        params, "price__gte", errors=errors, code="invalid", message="A decimal price."
    )
    price_lte = decimal_param(
        params, "price__lte", errors=errors, code="invalid", message="A decimal price."
    )
    limit = int_param(
        params, "limit", errors=errors, code="invalid", message="limit is a whole number."
    )
    offset = int_param(
        params, "offset", errors=errors, code="invalid", message="offset is a whole number."
    )
    mode = choice_param(
        params,
        "pricing_mode",
        PricingMode.values,
        default=PricingMode.ON_DEMAND,
        message=f"pricing_mode is one of {', '.join(PricingMode.values)}.",
        errors=errors,
    )
    if mode == PricingMode.RESERVED and term_months is None and "term_months" not in params:
        errors.append(
            FieldError("term_months", "term_required", "Reserved pricing needs term_months.")
        )
    if term_months is not None and not 1 <= term_months <= MAX_TERM_MONTHS:
        errors.append(
            FieldError("term_months", "invalid_term", f"Between 1 and {MAX_TERM_MONTHS} months.")
        )
    if min_gpus is not None and min_gpus <= 0:
        errors.append(FieldError("min_gpus", "invalid_count", "min_gpus must be positive."))
    vendors = list_param(params, "vendor")
    bad_vendors = [vendor for vendor in vendors if vendor not in Vendor.values]
    if bad_vendors:
        errors.append(
            FieldError("vendor", "invalid_choice", f"Unknown vendor(s): {', '.join(bad_vendors)}.")
        )
    interconnect = (text_param(params, "interconnect") or "").lower() or None
    if interconnect is not None and interconnect not in INTERCONNECTS:
        errors.append(
            FieldError("interconnect", "invalid_choice", "interconnect is nvlink or infiniband.")
        )
    ordering = text_param(params, "ordering") or "price"
    if ordering.lstrip("-") not in ORDERINGS:
        errors.append(
            FieldError(
                "ordering",
                "invalid_ordering",
                f"Order by one of {', '.join(ORDERINGS)} (prefix - for descending).",
            )
        )
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        errors.append(FieldError("limit", "invalid_limit", f"limit is 1 to {MAX_LIMIT}."))
    if offset is not None and not 0 <= offset <= MAX_OFFSET:
        errors.append(FieldError("offset", "invalid_offset", f"offset is 0 to {MAX_OFFSET}."))
    if price_gte is not None and price_lte is not None and price_gte > price_lte:
        errors.append(FieldError("price__gte", "invalid_range", "price__gte is above price__lte."))
    currency = currency_param(params, "currency", errors=errors)
    raise_if_any(errors)
    window = window_resolve(
        start=start, end=end, hours=hours, term_months=term_months, pricing_mode=mode, now=now
    )
    if currency is None and (price_gte is not None or price_lte is not None):
        currency = "USD"  # a price bound is in one currency; there is no silent conversion
    return CapacityFilters(
        window=window,
        pricing_mode=mode,
        term_months=term_months,
        gpu_models=list_param(params, "gpu_model"),
        vendors=vendors,
        generation=text_param(params, "generation"),
        memory_gb_gte=memory,
        min_gpus=min_gpus if min_gpus is not None else 1,
        country=text_param(params, "country"),
        city=text_param(params, "city"),
        region=text_param(params, "region"),
        providers=list_param(params, "provider"),
        interconnect=interconnect,
        price_gte=price_gte,
        price_lte=price_lte,
        currency=currency,
        ordering=ordering,
        limit=limit if limit is not None else DEFAULT_LIMIT,
        offset=offset or 0,
        now=now,
    )

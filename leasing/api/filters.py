"""Filters of the leasing API: FilterSets for offers, SLA offerings, quotes and a lease's history,
and the query-string parser of capacity search (whose filters feed one SQL statement, not a
queryset)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

import django_filters as filters
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from core.api.filters import IsoDateTimeFilter
from core.errors import FieldError, raise_if_any
from inventory.choices import Vendor
from leasing.choices import LeaseEventKind, OfferStatus, PricingMode
from leasing.models import LeaseEvent, Offer, Quote, SlaOffering
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


def _csv(value: str) -> list[str]:
    return [item.strip().lower() for item in value.split(",") if item.strip()]


class _SlugListFilter(filters.CharFilter):
    """One slug, or several separated by commas."""

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if not value:
            return qs
        return qs.filter(**{f"{self.field_name}__in": _csv(value)})


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


# ------------------------------------------------------------------ capacity search parameters

T = TypeVar("T")


def _parse(
    params: Mapping[str, str],
    name: str,
    convert: Callable[[str], T],
    errors: list[FieldError],
    *,
    code: str = "invalid",
    message: str,
) -> T | None:
    raw = params.get(name)
    if raw in (None, ""):
        return None
    try:
        return convert(str(raw).strip())
    except (ValueError, InvalidOperation, ArithmeticError):
        errors.append(FieldError(name, code, message))
        return None


def _datetime(raw: str) -> datetime:
    # "+00:00" arrives as " 00:00" when the client did not URL-encode the plus sign.
    parsed = parse_datetime(re.sub(r" (\d{2}:?\d{2})$", r"+\1", raw))
    if parsed is None:
        raise ValueError(raw)
    # In UTC: PostgreSQL takes offsets only up to ±15:59 (an OverflowError here is a 400).
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed


def _decimal(raw: str) -> Decimal:
    value = Decimal(raw)
    if not value.is_finite() or abs(value) >= Decimal(10) ** 14:
        raise ValueError(raw)
    return value


def _int(raw: str) -> int:
    value = int(raw)
    if abs(value) > 2**31 - 1:
        raise ValueError(raw)
    return value


def capacity_filters_from_query(
    params: Mapping[str, str], *, now: datetime | None = None
) -> CapacityFilters:
    """Parse GET /api/v1/capacity/ parameters, or raise a 400 naming the field and code."""
    errors: list[FieldError] = []
    start = _parse(
        params,
        "start",
        _datetime,
        errors,
        code="invalid_datetime",
        message="start is an ISO-8601 date-time, e.g. 2026-03-01T00:00:00Z.",
    )
    end = _parse(
        params,
        "end",
        _datetime,
        errors,
        code="invalid_datetime",
        message="end is an ISO-8601 date-time.",
    )
    hours = _parse(params, "hours", _decimal, errors, message="hours is a number.")
    term_months = _parse(params, "term_months", _int, errors, message="term_months is a number.")
    min_gpus = _parse(params, "min_gpus", _int, errors, message="min_gpus is a whole number.")
    memory = _parse(params, "memory_gb__gte", _int, errors, message="A whole number of GB.")
    price_gte = _parse(params, "price__gte", _decimal, errors, message="A decimal price.")
    price_lte = _parse(params, "price__lte", _decimal, errors, message="A decimal price.")
    limit = _parse(params, "limit", _int, errors, message="limit is a whole number.")
    offset = _parse(params, "offset", _int, errors, message="offset is a whole number.")
    mode = params.get("pricing_mode") or PricingMode.ON_DEMAND
    if mode not in PricingMode.values:
        errors.append(
            FieldError(
                "pricing_mode",
                "invalid_pricing_mode",
                f"pricing_mode is one of {', '.join(PricingMode.values)}.",
            )
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
    vendors = _csv(params.get("vendor", ""))
    bad_vendors = [vendor for vendor in vendors if vendor not in Vendor.values]
    if bad_vendors:
        errors.append(
            FieldError("vendor", "invalid_choice", f"Unknown vendor(s): {', '.join(bad_vendors)}.")
        )
    interconnect = (params.get("interconnect") or "").lower() or None
    if interconnect is not None and interconnect not in INTERCONNECTS:
        errors.append(
            FieldError("interconnect", "invalid_choice", "interconnect is nvlink or infiniband.")
        )
    ordering = params.get("ordering") or "price"
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
    currency = (params.get("currency") or "").upper() or None
    if currency is not None and not re.fullmatch(r"[A-Z]{3}", currency):
        errors.append(FieldError("currency", "invalid_currency", "An ISO-4217 code, e.g. USD."))
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
        gpu_models=_csv(params.get("gpu_model", "")),
        vendors=vendors,
        generation=params.get("generation") or None,
        memory_gb_gte=memory,
        min_gpus=min_gpus if min_gpus is not None else 1,
        country=params.get("country") or None,
        city=params.get("city") or None,
        region=params.get("region") or None,
        providers=_csv(params.get("provider", "")),
        interconnect=interconnect,
        price_gte=price_gte,
        price_lte=price_lte,
        currency=currency,
        ordering=ordering,
        limit=limit if limit is not None else DEFAULT_LIMIT,
        offset=offset or 0,
        now=now,
    )

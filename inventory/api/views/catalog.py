"""Views of the GPU catalog and the market observations.

The catalog is read by every caller. Market observations are a public series: everyone reads
them; providers and operators post batches, which count for the index only through registered
sources (see views/index.py); the series and fair-rate reads are informational only.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.permissions import IsProvider
from accounts.selectors import Caller
from core.api.idempotency import idempotent
from core.api.params import (
    StrictQueryParamsMixin,
    choice_param,
    currency_param,
    date_param,
    text_param,
)
from core.api.parsers import request_object
from core.errors import FieldError, NotFound, raise_if_any
from inventory import selectors, services
from inventory.api.filters import (
    GpuModelFilter,
    MarketPriceFilter,
)
from inventory.api.serializers import (
    FairRateSerializer,
    GpuModelSerializer,
    MarketPriceSerializer,
    MarketPricesRecordedSerializer,
    MarketSeriesSerializer,
)
from inventory.choices import PriceTerm
from inventory.models import GpuModel
from inventory.schemas import (
    MarketPriceBatch,
    parse,
)


class GpuModelViewSet(StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet[GpuModel]):
    """The GPU catalog, readable by every caller; /api/v1/gpu-models/{slug}/."""

    queryset = selectors.gpu_models()
    serializer_class = GpuModelSerializer
    filterset_class = GpuModelFilter
    lookup_field = "slug"
    ordering_fields = ["name", "ga_date", "memory_gb", "dense_bf16_tflops", "tdp_watts", "id"]


_SERIES_PARAMETERS = [
    OpenApiParameter("gpu_model", str, required=True, description="Catalog slug."),
    OpenApiParameter("term", str, enum=PriceTerm.values, description="Default on_demand."),
    OpenApiParameter("currency", str, description="ISO-4217; default USD."),
]


def _ineligible_notice(count: int, *, caller: Caller) -> str:
    """Why stored observations count for nothing, in a sentence; empty when they all count."""
    if not count:
        return ""
    if caller.is_operator:
        return (
            f"{count} observation(s) name no registered, active index source: they are stored "
            "but count for nothing in the market index."
        )
    return (
        f"{count} observation(s) are stored but count for nothing in the market index: "
        "your organization has no active provider_list_price index source (operators "
        "register index sources)."
    )


_RAW_NOTE = (
    " Informational: computed from every raw observation, registered or not. Nothing that moves "
    "money reads it; contracts and leases read the fixings at /api/v1/indices/."
)


class MarketPriceViewSet(OrganizationScopedMixin, viewsets.GenericViewSet[Any]):
    """Market observations: everyone reads; providers and operators post batches.

    An observation counts for the market index only through a registered index source: a
    provider's through its own `provider_list_price` source, an operator's through the source
    its `source` names. Raw observations move no price; fixings do (/api/v1/indices/).
    """

    queryset = selectors.market_prices()
    serializer_class = MarketPriceSerializer
    filterset_class = MarketPriceFilter
    permission_classes = [IsProvider]
    ordering_fields = ["observed_on", "price_per_gpu_hour", "id"]
    query_params = {
        "series": ("gpu_model", "term", "currency", "start", "end"),
        "fair_rate": ("gpu_model", "term", "currency", "day"),
    }

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset  # a public index: every organization reads all of it

    def list(self, request: Request) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=MarketPriceBatch, responses={201: MarketPricesRecordedSerializer})
    @idempotent
    def create(self, request: Request) -> Response:
        batch = parse(MarketPriceBatch, request_object(request))
        recorded = services.market_prices_record(
            observations=batch.observations, recorded_by=self.caller.organization
        )
        body = {
            "created": recorded.created,
            "updated": recorded.updated,
            "observations": MarketPriceSerializer(recorded.prices, many=True).data,
            "ineligible": recorded.ineligible,
            "notice": _ineligible_notice(recorded.ineligible, caller=self.caller),
        }
        return Response(body, status=status.HTTP_201_CREATED)

    def _series_query(self, request: Request) -> tuple[str, str, str]:
        params = request.query_params
        slug = text_param(params, "gpu_model") or ""
        errors = []
        if not GpuModel.objects.filter(slug=slug).exists():
            errors.append(
                FieldError("gpu_model", "unknown_gpu_model", f"{slug!r} is not in the catalog.")
            )
        term = choice_param(
            params,
            "term",
            PriceTerm.values,
            default=PriceTerm.ON_DEMAND,
            code="invalid_choice",
            message="{raw!r} is not a term.",
            errors=errors,
        )
        currency = currency_param(params, "currency", errors=errors) or "USD"
        raise_if_any(errors)
        return slug, term, currency

    @staticmethod
    def _day(request: Request, name: str, default: date) -> date:
        errors: list[FieldError] = []
        day = date_param(
            request.query_params,
            name,
            code="invalid",
            message="{raw!r} is not a YYYY-MM-DD date.",
            errors=errors,
        )
        raise_if_any(errors)
        return day or default

    @extend_schema(
        parameters=[
            *_SERIES_PARAMETERS,
            OpenApiParameter("start", date, description="First day; default a year before end."),
            OpenApiParameter("end", date, description="Last day (inclusive); default today."),
        ],
        responses=MarketSeriesSerializer,
        description="Median price per GPU-hour per day with observations." + _RAW_NOTE,
    )
    @action(detail=False, methods=["get"])
    def series(self, request: Request) -> Response:
        """Median price per GPU-hour per day with raw observations (informational only)."""
        slug, term, currency = self._series_query(request)
        end = self._day(request, "end", date.today())
        # (a year before end, but never before the year 1: `end=0001-01-01` was a 500)
        start = self._day(request, "start", date(max(end.year - 1, 1), end.month, 1))
        if start > end:
            raise_if_any([FieldError("start", "invalid_window", "start is after end.")])
        points = selectors.market_series(
            gpu_model_slug=slug, term=term, currency=currency, start=start, end=end
        )
        body = {
            "gpu_model": slug,
            "term": term,
            "currency": currency,
            "start": start,
            "end": end,
            "points": [
                {"day": point.day, "median_price_per_gpu_hour": point.rate} for point in points
            ],
        }
        return Response(MarketSeriesSerializer(body).data)

    @extend_schema(
        parameters=[*_SERIES_PARAMETERS, OpenApiParameter("day", date, description="Today.")],
        responses=FairRateSerializer,
        description=(
            "Median of the latest day's observations on or before `day`; 404 when none exist."
            + _RAW_NOTE
        ),
    )
    @action(detail=False, methods=["get"], url_path="fair-rate")
    def fair_rate(self, request: Request) -> Response:
        """Median of the latest day's raw observations on or before `day` (informational)."""
        slug, term, currency = self._series_query(request)
        day = self._day(request, "day", date.today())
        rate = selectors.fair_market_rate(
            gpu_model_slug=slug, day=day, term=term, currency=currency
        )
        if rate is None:
            raise NotFound(
                f"No {term} {currency} price of {slug} on or before {day}.",
                code="no_market_price",
            )
        body = {
            "gpu_model": slug,
            "day": day,
            "term": term,
            "currency": currency,
            "price_per_gpu_hour": rate,
        }
        return Response(FairRateSerializer(body).data)

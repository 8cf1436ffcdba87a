"""Views of the catalog side of leasing: offers, SLA offerings, capacity search and quotes.

Everyone reads published offers; providers also read their paused ones and change only their
own (another provider's offer answers 404 to a write); operators read and change everything.
Every write goes through leasing.services.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.models import Organization
from accounts.permissions import HasOrganizationScope, IsProvider, request_caller
from accounts.selectors import Caller
from core.api.idempotency import idempotent
from core.api.serializers import read_input
from core.errors import NotFound, ValidationFailed
from inventory.models import GpuModel
from leasing import selectors
from leasing.api.filters import (
    MAX_LIMIT,
    OfferFilter,
    QuoteFilter,
    SlaOfferingFilter,
    capacity_filters_from_query,
)
from leasing.api.serializers.catalog import (
    CapacityPageSerializer,
    OfferCreateSerializer,
    OfferSerializer,
    OfferUpdateSerializer,
    QuoteBatchSerializer,
    QuoteRequestSerializer,
    QuoteSerializer,
    SlaOfferingCreateSerializer,
    SlaOfferingSerializer,
    SlaOfferingUpdateSerializer,
)
from leasing.api.serializers.resale import ResaleOfferSerializer
from leasing.choices import PricingMode
from leasing.models import Offer, Quote, SlaOffering
from leasing.selectors.resale import resale_offers
from leasing.services.offers import (
    offer_create,
    offer_delete,
    offer_update,
    sla_offering_create,
    sla_offering_delete,
    sla_offering_update,
)
from leasing.services.quotes import (
    NoCapacity,
    QuoteRequest,
    quote_create,
    quote_resale_offers,
)


def _provider_for(caller: Caller, slug: str | None) -> Organization:
    """The provider a write acts for: the caller's own, or (operators) the one named."""
    if caller.is_operator:
        if not slug:
            raise ValidationFailed(
                "Operators name the provider organization.",
                code="provider_required",
                detail={"field": "provider"},
            )
        found = Organization.objects.filter(slug=slug, is_provider=True).first()
    else:
        assert caller.organization is not None  # IsProvider guarantees it
        found = caller.organization if slug in (None, caller.organization.slug) else None
    if found is None:
        raise NotFound(
            f"No provider {slug!r}.", code="provider_not_found", detail={"field": "provider"}
        )
    return found


class _CatalogViewSet(OrganizationScopedMixin):
    """Reads see what the caller may read; writes reach only what the caller may change."""

    def visible(self) -> QuerySet[Any]:
        raise NotImplementedError

    def writable(self) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: there is no caller
            return self.queryset  # type: ignore[attr-defined]
        reading = self.request.method in SAFE_METHODS  # type: ignore[attr-defined]
        return self.visible() if reading else self.writable()


class OfferViewSet(
    _CatalogViewSet,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Offer],
):
    """Card-hour offers: providers create, change, pause and delete their own; all read."""

    queryset = Offer.objects.none()  # the model, for the schema; rows come from selectors
    serializer_class = OfferSerializer
    filterset_class = OfferFilter
    permission_classes = [IsProvider]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    ordering_fields = ["price_per_gpu_hour", "available_from", "created_at", "id"]

    def visible(self) -> QuerySet[Offer]:
        return selectors.offers_visible(caller=self.caller)

    def writable(self) -> QuerySet[Offer]:
        return selectors.offers_writable(caller=self.caller)

    def _answer(self, offer: Offer, code: int = status.HTTP_200_OK) -> Response:
        fresh = selectors.offers_visible(caller=self.caller).get(pk=offer.pk)
        return Response(OfferSerializer(fresh).data, status=code)

    @extend_schema(request=OfferCreateSerializer, responses={201: OfferSerializer})
    def create(self, request: Request) -> Response:
        data = read_input(OfferCreateSerializer, request.data)
        provider = _provider_for(self.caller, data.pop("provider", None))
        offer = offer_create(
            provider=provider,
            site_id=data.pop("site"),
            gpu_model=data.pop("gpu_model"),
            nodes=data.pop("nodes", []),
            name=data.pop("name"),
            price_per_gpu_hour=data.pop("price_per_gpu_hour"),
            currency=data.pop("currency"),
            **data,
        )
        return self._answer(offer, status.HTTP_201_CREATED)

    @extend_schema(request=OfferUpdateSerializer, responses=OfferSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        offer = self.get_object()
        body = read_input(OfferUpdateSerializer, request.data, partial=True)
        offer = offer_update(offer=offer, changes=body)
        return self._answer(offer)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        offer_delete(offer=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class SlaOfferingViewSet(
    _CatalogViewSet,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[SlaOffering],
):
    """Token-priced inference under SLOs: providers manage their own; all read published ones."""

    queryset = SlaOffering.objects.none()  # the model, for the schema
    serializer_class = SlaOfferingSerializer
    filterset_class = SlaOfferingFilter
    permission_classes = [IsProvider]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    ordering_fields = [
        "price_per_million_output_tokens",
        "price_per_million_input_tokens",
        "availability_slo_pct",
        "ttft_p95_ms",
        "created_at",
        "id",
    ]

    def visible(self) -> QuerySet[SlaOffering]:
        return selectors.sla_offerings_visible(caller=self.caller)

    def writable(self) -> QuerySet[SlaOffering]:
        return selectors.sla_offerings_writable(caller=self.caller)

    def _answer(self, offering: SlaOffering, code: int = status.HTTP_200_OK) -> Response:
        fresh = selectors.sla_offerings_visible(caller=self.caller).get(pk=offering.pk)
        return Response(SlaOfferingSerializer(fresh).data, status=code)

    @extend_schema(request=SlaOfferingCreateSerializer, responses={201: SlaOfferingSerializer})
    def create(self, request: Request) -> Response:
        data = read_input(SlaOfferingCreateSerializer, request.data)
        provider = _provider_for(self.caller, data.pop("provider", None))
        offering = sla_offering_create(provider=provider, nodes=data.pop("nodes", []), **data)
        return self._answer(offering, status.HTTP_201_CREATED)

    @extend_schema(request=SlaOfferingUpdateSerializer, responses=SlaOfferingSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        offering = self.get_object()
        body = read_input(SlaOfferingUpdateSerializer, request.data, partial=True)
        offering = sla_offering_update(offering=offering, changes=body)
        return self._answer(offering)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        sla_offering_delete(offering=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


_CAPACITY_PARAMETERS = [
    OpenApiParameter("start", OpenApiTypes.DATETIME, required=True, description="Window start."),
    OpenApiParameter("end", OpenApiTypes.DATETIME, description="Window end (or give hours)."),
    OpenApiParameter("hours", OpenApiTypes.DECIMAL, description="Window length from start."),
    OpenApiParameter("pricing_mode", str, enum=PricingMode.values, description="on_demand."),
    OpenApiParameter("term_months", int, description="Required for reserved pricing."),
    OpenApiParameter("gpu_model", str, description="Catalog slug, or several comma-separated."),
    OpenApiParameter("vendor", str, description="nvidia, amd, … (comma-separated)."),
    OpenApiParameter("generation", str, description="e.g. Hopper, Blackwell."),
    OpenApiParameter("memory_gb__gte", int),
    OpenApiParameter("min_gpus", int, description="Free for the whole window; default 1."),
    OpenApiParameter("country", str, description="ISO-3166 alpha-2."),
    OpenApiParameter("city", str),
    OpenApiParameter("region", str),
    OpenApiParameter("provider", str, description="Provider slug(s), comma-separated."),
    OpenApiParameter("interconnect", str, enum=["nvlink", "infiniband"]),
    OpenApiParameter("price__gte", OpenApiTypes.DECIMAL, description="Per GPU-hour, for the term."),
    OpenApiParameter("price__lte", OpenApiTypes.DECIMAL, description="Per GPU-hour, for the term."),
    OpenApiParameter(
        "currency", str, description="Only offers in it; price bounds default to USD."
    ),
    OpenApiParameter(
        "ordering",
        str,
        description="price (default), price_per_tflops, bandwidth_per_dollar, reliability, "
        "free_gpus; prefix - for descending.",
    ),
    OpenApiParameter(
        "limit",
        int,
        description=f"Page size 1-{MAX_LIMIT} (default 50). Limit/offset paging, not cursors: "
        "the order is computed per request (price for the asked term, free GPUs for the window).",
    ),
    OpenApiParameter("offset", int, description="Results to skip (0-10000)."),
]


class CapacityView(OrganizationScopedMixin, APIView):
    """GET /api/v1/capacity/ — offers with GPUs free for the whole window, priced for the term."""

    permission_classes = [HasOrganizationScope]
    query_params = tuple(parameter.name for parameter in _CAPACITY_PARAMETERS)

    def _page_url(self, request: Request, offset: int | None) -> str | None:
        if offset is None:
            return None
        query = request.query_params.copy()
        query["offset"] = str(offset)
        return request.build_absolute_uri(request.path) + "?" + urlencode(query, doseq=True)

    @extend_schema(parameters=_CAPACITY_PARAMETERS, responses=CapacityPageSerializer)
    def get(self, request: Request) -> Response:
        filters = capacity_filters_from_query(request.query_params, now=timezone.now())
        if filters.gpu_models:
            known = set(
                GpuModel.objects.filter(slug__in=filters.gpu_models).values_list("slug", flat=True)
            )
            unknown = sorted(set(filters.gpu_models) - known)
            if unknown:
                raise ValidationFailed(
                    f"Not in the GPU catalog: {', '.join(unknown)}.",
                    code="unknown_gpu_model",
                    detail={"field": "gpu_model", "unknown": unknown},
                )
        page = selectors.capacity_search_page(filters=filters)
        # Resold time is a separate, marked set beside the per-node results (not in `count`).
        resale = resale_offers(
            start=filters.window.start,
            end=filters.window.end,
            now=timezone.now(),
            gpu_models=filters.gpu_models,
            min_gpus=filters.min_gpus,
            currency=filters.currency,
            price_lte=filters.price_lte,
            country=filters.country,
            exclude_organization_id=self.caller.organization_id,
        )
        following = filters.offset + filters.limit
        body = {
            "count": page.total,
            "limit": filters.limit,
            "offset": filters.offset,
            "next": self._page_url(request, following if following < page.total else None),
            "previous": self._page_url(
                request, max(filters.offset - filters.limit, 0) if filters.offset else None
            ),
            "window": {"start": filters.window.start, "end": filters.window.end},
            "pricing_mode": filters.pricing_mode,
            "term_months": filters.term_months,
            "results": page.results,
            "resale": resale,
        }
        return Response(CapacityPageSerializer(body).data)


class CapacityViewNoSlash(CapacityView):
    """/api/v1/capacity without the slash: the same view, documented once."""

    schema = None


class QuoteViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Quote],
):
    """Quotes: customers ask for prices (nothing is held) and read their own quotes."""

    queryset = Quote.objects.none()  # the model, for the schema
    serializer_class = QuoteSerializer
    filterset_class = QuoteFilter
    permission_classes = [HasOrganizationScope]
    ordering_fields = ["created_at", "expires_at", "total", "id"]

    def get_queryset(self) -> QuerySet[Quote]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: there is no caller
            return self.queryset
        return selectors.quotes_of(caller=self.caller)

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "now": timezone.now()}

    def get_permissions(self) -> list[BasePermission]:
        return [HasOrganizationScope()]

    @extend_schema(request=QuoteRequestSerializer, responses={201: QuoteBatchSerializer})
    @idempotent
    def create(self, request: Request) -> Response:
        caller = request_caller(request)
        if caller.organization is None or not caller.organization.is_customer:
            raise Forbidden("Only customers ask for quotes.", code="customer_only")
        data = read_input(QuoteRequestSerializer, request.data)
        now = timezone.now()
        quote_request = QuoteRequest(
            gpu_model=data["gpu_model"].strip().lower(),
            gpu_count=data["gpu_count"],
            start=data["start"],
            end=data.get("end"),
            hours=data.get("hours"),
            term_months=data.get("term_months"),
            pricing_mode=data["pricing_mode"],
            country=(data.get("country") or "").upper() or None,
            max_price_per_gpu_hour=data.get("max_price_per_gpu_hour"),
            currency=data.get("currency") or None,
        )
        try:
            quotes = quote_create(customer=caller.organization, request=quote_request, now=now)
        except NoCapacity:
            # No ordinary capacity: open resale listings of the whole window still answer.
            resale = quote_resale_offers(quote_request, customer_id=caller.organization.pk, now=now)
            if not resale:
                raise
            quotes = []
        else:
            resale = quote_resale_offers(quote_request, customer_id=caller.organization.pk, now=now)
        rank = {quote.pk: position for position, quote in enumerate(quotes)}  # cheapest first
        fresh = sorted(
            selectors.quotes_of(caller=caller).filter(pk__in=rank), key=lambda q: rank[q.pk]
        )
        body = {
            "quotes": QuoteSerializer(fresh, many=True, context={"now": now}).data,
            "resale": ResaleOfferSerializer(resale, many=True).data,
        }
        return Response(body, status=status.HTTP_201_CREATED)

"""Economics API: each node's payback, its monthly series, pools' capacity signals, unit
economics per SLA offering or pool, a reseller's sold listings, and the FX rates they convert
with.

Economics are the owning provider's (and operators') business: a customer-only organization gets
403 provider_only, another provider's node 404. The figures are what the nightly job stored
(economics.services); nothing is computed here. Every list and report also downloads as CSV with
`?format=csv` (all matching rows, not one page).

FX rates are market data: every organization reads them, only operators write them, through
economics.services.fx: 400 with a rule's code (invalid_currency, same_currency,
rate_not_positive), 409 fx_rate_exists for a pair and day already recorded, 403 operator_only
for anyone but operator staff.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import django_filters
from django.db.models import F, Max, QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.permissions import HasOrganizationScope, IsOperator, request_caller
from core.api.filters import NullsLastOrdering
from core.api.idempotency import idempotent
from core.api.params import (
    choice_param,
    date_param,
    exactly_one,
    flag_param,
    id_param,
    match_param,
    month_param,
    range_check,
)
from core.api.parsers import request_object
from core.api.renderers import (
    RENDERERS_WITH_CSV,
    CsvListMixin,
    CsvResponse,
    responses_with_csv,
    wants_csv,
)
from core.api.replica import ReplicaListMixin, reads_from_replica
from core.errors import NotFound
from economics.api.filters import AssetFilter, CapacitySignalFilter, FxRateFilter
from economics.api.serializers import (
    ASSET_CSV_FIELDS,
    SIGNAL_CSV_FIELDS,
    AssetEconomicsSerializer,
    AssetMonthSerializer,
    AssetSerializer,
    CapacitySignalSerializer,
    FxRateSerializer,
    ResaleEconomicsSerializer,
    UnitEconomicsSerializer,
)
from economics.models import AssetMonth, CapacitySignal, FxRate
from economics.selectors import unit_economics as unit_economics_selector
from economics.selectors.resale import resale_report, resale_totals
from economics.services.fx import FxRateInput, fx_rate_create, fx_rate_delete, fx_rate_update
from inventory.models import Node
from inventory.schemas import parse
from leasing.models import ResaleListing


class IsProviderOrOperator(HasOrganizationScope):
    """Reads included: the caller acts for a provider organization or is operator staff."""

    def has_permission(self, request: Request, view: Any) -> bool:
        super().has_permission(request, view)
        if not request_caller(request).is_provider:
            raise Forbidden(
                "Asset economics are shown to providers and operators only.",
                code="provider_only",
            )
        return True


# ------------------------------------------------------------------ assets

_MONTH_PARAMETERS = [
    OpenApiParameter("from", str, description="First month, YYYY-MM (default: the first)."),
    OpenApiParameter("to", str, description="Last month, YYYY-MM (default: the latest)."),
]


@extend_schema_view(
    list=extend_schema(responses=responses_with_csv(AssetSerializer(many=True), "One row a node.")),
    retrieve=extend_schema(responses=responses_with_csv(AssetSerializer, "One row.")),
)
class AssetViewSet(
    OrganizationScopedMixin,
    ReplicaListMixin,
    CsvListMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Node],
):
    """The caller's nodes as financial assets: what each cost and how far it has paid back."""

    queryset = Node.objects.select_related("site", "gpu_model", "payback").annotate(
        currency=F("capex_currency")
    )
    serializer_class = AssetSerializer
    permission_classes = [IsProviderOrOperator]
    renderer_classes = RENDERERS_WITH_CSV
    lookup_value_regex = r"\d+"
    tenant_fields = ("site__organization",)
    filterset_class = AssetFilter
    filter_backends = [django_filters.rest_framework.DjangoFilterBackend, NullsLastOrdering]
    nullable_ordering = {
        name: f"payback__{name}"
        for name in (
            "months_of_life",
            "cumulative_net_cash_flow",
            "paid_back_in_month",
            "projected_payback_months",
            "roi_to_date",
            "revenue_per_gpu_hour",
            "break_even_rate_per_gpu_hour",
            "trailing_utilization",
            "book_value",
        )
    }
    ordering_fields = ["id", "hostname", "acquired_on", "capex", "gpu_count", *nullable_ordering]
    ordering = ["hostname", "id"]
    csv_filename = "assets.csv"
    csv_header = ASSET_CSV_FIELDS
    query_params = {"economics": ("from", "to")}

    def csv_row(self, data: Mapping[str, Any]) -> dict[str, Any]:
        row = dict(data)
        site = row.pop("site")
        return {**row, "site_id": site["id"], "site_name": site["name"]}

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not wants_csv(request):
            return super().retrieve(request, *args, **kwargs)
        node = self.get_object()
        return CsvResponse(
            [self.csv_row(self.get_serializer(node).data)],
            header=self.csv_header,
            filename=f"asset-{node.hostname}.csv",
        )

    @extend_schema(
        parameters=_MONTH_PARAMETERS,
        responses=responses_with_csv(AssetEconomicsSerializer, "One row a month."),
    )
    @action(detail=True, methods=["get"], url_path="economics")
    def economics(self, request: Request, pk: str | None = None) -> Response:
        """The node's months between `from` and `to` (both optional), with its payback summary.

        A malformed month is a 400 invalid_month naming the parameter; `from` after `to` a 400
        invalid_range; a range without months answers an empty list.
        """
        start = month_param(request.query_params, "from")
        end = month_param(request.query_params, "to")
        range_check(start, end)
        node = self.get_object()
        months = AssetMonth.objects.filter(node=node).order_by("month")
        if start is not None:
            months = months.filter(month__gte=start)
        if end is not None:
            months = months.filter(month__lte=end)
        rows = AssetMonthSerializer(months, many=True).data
        if wants_csv(request):
            return CsvResponse(
                rows,
                header=AssetMonthSerializer.Meta.fields,
                filename=f"asset-{node.hostname}-economics.csv",
            )
        return Response({"asset": self.get_serializer(node).data, "months": rows})


# ------------------------------------------------------------------ capacity signals


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter(
                "all", bool, description="Include pools at level OK (default: raised signals only)."
            )
        ],
        responses=responses_with_csv(CapacitySignalSerializer(many=True), "One row a pool."),
    )
)
class CapacitySignalViewSet(
    OrganizationScopedMixin,
    ReplicaListMixin,
    CsvListMixin,
    mixins.ListModelMixin,
    viewsets.GenericViewSet[CapacitySignal],
):
    """Pools that need more capacity, as of the latest evaluation unless `evaluated_on` is given.

    By default only raised signals (utilization above a threshold, or quote requests that found
    no capacity growing); `?all=true` includes the pools at level OK.
    """

    queryset = CapacitySignal.objects.select_related("provider", "site", "gpu_model")
    serializer_class = CapacitySignalSerializer
    permission_classes = [IsProviderOrOperator]
    renderer_classes = RENDERERS_WITH_CSV
    tenant_fields = ("provider",)
    filterset_class = CapacitySignalFilter
    ordering_fields = ["evaluated_on", "gpu_count", "unmet_quotes", "id"]
    ordering = ["-evaluated_on", "-id"]
    csv_filename = "capacity-signals.csv"
    csv_header = SIGNAL_CSV_FIELDS
    query_params = {"list": ("all",)}

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        params = self.request.query_params
        include_ok = flag_param(params, "all")
        queryset = super().filter_queryset(queryset)
        if not include_ok:
            queryset = queryset.filter(raised=True)
        if not any(params.get(f"evaluated_on{suffix}") for suffix in ("", "__gte", "__lte")):
            # The latest evaluation the caller has, not the latest one that matched a filter:
            # an older alarm must not pass for the current state.
            latest = self.get_queryset().aggregate(latest=Max("evaluated_on"))["latest"]
            queryset = queryset.filter(evaluated_on=latest) if latest else queryset.none()
        return queryset

    def csv_row(self, data: Mapping[str, Any]) -> dict[str, Any]:
        row = dict(data)
        site, window = row.pop("site"), row.pop("window")
        return {
            **row,
            "site_id": site["id"],
            "site_name": site["name"],
            "window_start": window["start"],
            "window_end": window["end"],
        }


# ------------------------------------------------------------------ unit economics


POOL = re.compile(r"(\d{1,18}):([-a-zA-Z0-9_]{1,64})")


def _scope_params(params: Mapping[str, str]) -> tuple[int | None, tuple[int, str] | None]:
    """`offering=<id>` or `pool=<site_id>:<gpu_model>`, exactly one of them."""
    exactly_one(
        params,
        ("offering", "pool"),
        message="Give exactly one of `offering=<id>` or `pool=<site_id>:<gpu_model>`.",
        code="scope_required",
    )
    offering = id_param(params, "offering", what="the id of an SLA offering")
    pool = match_param(params, "pool", POOL, what="<site_id>:<gpu_model slug>, e.g. 12:h100-sxm")
    if pool is None:
        return offering, None
    return None, (int(pool[1]), pool[2].lower())


class UnitEconomicsView(OrganizationScopedMixin, generics.GenericAPIView[Any]):
    """What one SLA offering or one pool cost per successful request, token and GPU-hour."""

    serializer_class = UnitEconomicsSerializer
    permission_classes = [IsProviderOrOperator]
    renderer_classes = RENDERERS_WITH_CSV
    filter_backends: list[Any] = []
    pagination_class = None
    query_params = ("offering", "pool", "period", "from", "to")

    @extend_schema(
        parameters=[
            OpenApiParameter("offering", int, description="An SLA offering of yours."),
            OpenApiParameter(
                "pool", str, description="<site_id>:<gpu_model slug> of yours, e.g. 12:h100-sxm."
            ),
            OpenApiParameter(
                "period",
                str,
                enum=list(unit_economics_selector.PERIODS),
                description="Default month.",
            ),
            OpenApiParameter(
                "from", OpenApiTypes.DATE, description="Default: 90 days before `to`."
            ),
            OpenApiParameter("to", OpenApiTypes.DATE, description="Default: today."),
        ],
        responses=responses_with_csv(UnitEconomicsSerializer, "One row a period."),
    )
    @reads_from_replica
    def get(self, request: Request) -> Response:
        """Each week or month of the scope: cost, traffic, utilization and cost per unit.

        400: scope_required (neither or both of offering / pool), invalid_offering, invalid_pool,
        invalid_period, invalid_date, invalid_range, range_too_long; 404: offering_not_found,
        site_not_found, pool_not_found.
        """
        params = request.query_params
        offering_id, pool = _scope_params(params)
        start, end = date_param(params, "from"), date_param(params, "to")
        range_check(start, end)
        organization = self.caller.organization
        if organization is None:
            raise Forbidden(
                "Act for an organization (the X-Organization header) to read unit economics.",
                code="organization_required",
            )
        period = choice_param(params, "period", unit_economics_selector.PERIODS, default="month")
        periods = unit_economics_selector.unit_economics(
            caller_org=organization,
            offering_id=offering_id,
            pool=pool,
            period=period,
            start=start,
            end=end,
            now=timezone.now(),
        )
        if wants_csv(request):
            scope = f"offering-{offering_id}" if pool is None else f"pool-{pool[0]}-{pool[1]}"
            return CsvResponse(
                (period.as_row() for period in periods),
                header=unit_economics_selector.CSV_FIELDS,
                filename=f"unit-economics-{scope}.csv",
            )
        return Response({"results": [period.as_json() for period in periods]})


# ------------------------------------------------------------------ resale (the seller's side)


class ResaleEconomicsView(OrganizationScopedMixin, generics.GenericAPIView[Any]):
    """A seller's resale: each sold listing, the GPU-hours resold, what the buyer paid split as
    billing booked it (its proceeds as its balance received them), and the margin over what
    those hours cost the seller.

    Any organization reads its own sold listings (operators all); `listing=<id>` narrows to one,
    404 listing_not_found when it is not the caller's sold listing.
    """

    queryset = ResaleListing.objects.all()
    serializer_class = ResaleEconomicsSerializer
    permission_classes = [HasOrganizationScope]
    tenant_fields = ("seller",)
    filter_backends: list[Any] = []
    pagination_class = None
    query_params = ("listing",)

    @extend_schema(
        parameters=[OpenApiParameter("listing", int, description="One sold listing of yours.")],
        responses=ResaleEconomicsSerializer,
    )
    @reads_from_replica
    def get(self, request: Request) -> Response:
        """The caller's sold listings, oldest window first, and their totals per currency."""
        listing_id = id_param(request.query_params, "listing", what="the id of a resale listing")
        listings = self.get_queryset()
        if listing_id is not None:
            listings = listings.filter(pk=listing_id)
        rows = resale_report(listings)
        if listing_id is not None and not rows:
            raise NotFound(f"No sold listing {listing_id} of yours.", code="listing_not_found")
        body = {"results": rows, "totals": resale_totals(rows)}
        return Response(ResaleEconomicsSerializer(body).data)


# ------------------------------------------------------------------ FX rates


class FxRateViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[FxRate],
):
    """The FX rates the economics job converts revenue and costs with."""

    queryset = FxRate.objects.select_related("recorded_by_organization")
    serializer_class = FxRateSerializer
    lookup_value_regex = r"\d+"
    filterset_class = FxRateFilter
    ordering_fields = ["valid_on", "base_currency", "quote_currency", "rate", "id"]
    ordering = ["-valid_on", "-id"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset  # market data: every organization reads all of it

    def get_permissions(self) -> list[BasePermission]:
        if self.request.method in SAFE_METHODS:
            return [HasOrganizationScope()]
        return [IsOperator()]

    @extend_schema(request=FxRateInput, responses={201: FxRateSerializer, 409: OpenApiResponse()})
    @idempotent
    def create(self, request: Request) -> Response:
        """Record a rate (operators); the same pair and day twice is a 409 fx_rate_exists."""
        fx_rate = fx_rate_create(
            fields=parse(FxRateInput, request_object(request)),
            recorded_by_organization=self.caller.organization,
            recorded_by=request.user,
        )
        return Response(FxRateSerializer(fx_rate).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=FxRateInput, responses={200: FxRateSerializer, 409: OpenApiResponse()})
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Correct some fields of a rate (operators); send only the fields that change."""
        fx_rate = fx_rate_update(
            fx_rate=self.get_object(),
            changes=request_object(request),
            recorded_by_organization=self.caller.organization,
            recorded_by=request.user,
        )
        return Response(FxRateSerializer(fx_rate).data)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: str | None = None) -> Response:
        """Remove a rate (operators); the next nightly run converts without it."""
        fx_rate_delete(fx_rate=self.get_object(), deleted_by_organization=self.caller.organization)
        return Response(status=status.HTTP_204_NO_CONTENT)

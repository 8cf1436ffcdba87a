"""Asset economics API: each node's payback, its monthly series, pools' capacity signals, and
unit economics per SLA offering or pool.

Economics are the owning provider's (and operators') business: a customer-only organization gets
403 provider_only, another provider's node 404. The figures are what the nightly job stored
(billing.services.economics); nothing is computed here. Every list and report also downloads as
CSV with `?format=csv` (all matching rows, not one page).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import django_filters
from django.db.models import F, Max, QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.permissions import HasOrganizationScope, request_caller
from billing.api.invoices import MinorUnitMixin
from billing.models import AssetMonth, CapacitySignal, SignalLevel
from billing.selectors import unit_economics as unit_economics_selector
from core.api.filters import NullsLastOrdering
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
from core.api.renderers import (
    RENDERERS_WITH_CSV,
    CsvListMixin,
    CsvResponse,
    responses_with_csv,
    wants_csv,
)
from inventory.choices import NodeStatus
from inventory.models import Node
from leasing.api.serializers_catalog import SiteRefSerializer


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


class ReasonField(serializers.CharField):
    """Why a figure is null (e.g. no_allocated_gpu_hours); null when the figure exists."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, allow_null=True, **kwargs)

    def to_representation(self, value: Any) -> Any:
        return str(value) if value else None


# ------------------------------------------------------------------ assets


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


def _payback_decimal(name: str, *, places: int, help_text: str = "") -> Any:
    """A read-only figure of the node's AssetPayback (null before the first run), at the
    model's precision."""
    return serializers.DecimalField(
        max_digits=20,
        decimal_places=places,
        source=f"payback.{name}",
        read_only=True,
        allow_null=True,
        help_text=help_text or None,
    )


class AssetSerializer(MinorUnitMixin, serializers.ModelSerializer[Node]):
    """A node and its payback as of the last nightly run (all null before the first run).

    Amounts are in the node's capex `currency`; ratios are fractions (0.25 = 25 %); each null
    ratio comes with the reason it has no value.
    """

    money_fields = ("capex", "cumulative_net_cash_flow", "book_value")

    site = SiteRefSerializer(read_only=True)
    gpu_model: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    # A plain string: the NodeStatus enum keeps its component name (NodeStatusEnum) in the schema.
    status = serializers.CharField(read_only=True, help_text="active, maintenance or retired.")
    currency = serializers.CharField(read_only=True, help_text="The capex currency.")
    months_of_life = serializers.IntegerField(
        source="payback.months_of_life", read_only=True, allow_null=True
    )
    cumulative_net_cash_flow = _payback_decimal("cumulative_net_cash_flow", places=2)
    paid_back_in_month = serializers.IntegerField(
        source="payback.paid_back_in_month",
        read_only=True,
        allow_null=True,
        help_text="Month of life in which the cumulative net cash flow reached the capex.",
    )
    paid_back_on = serializers.DateField(
        source="payback.paid_back_on", read_only=True, allow_null=True
    )
    projected_payback_months = _payback_decimal(
        "projected_payback_months",
        places=2,
        help_text="Months of life until payback at the trailing months' pace.",
    )
    projection_reason = ReasonField(source="payback.projection_reason")
    roi_to_date = _payback_decimal("roi_to_date", places=6)
    revenue_per_gpu_hour = _payback_decimal("revenue_per_gpu_hour", places=6)
    revenue_per_gpu_hour_reason = ReasonField(source="payback.revenue_per_gpu_hour_reason")
    break_even_rate_per_gpu_hour = _payback_decimal("break_even_rate_per_gpu_hour", places=6)
    break_even_reason = ReasonField(source="payback.break_even_reason")
    trailing_utilization = _payback_decimal("trailing_utilization", places=6)
    book_value = _payback_decimal("book_value", places=2)
    computed_at = serializers.DateTimeField(
        source="payback.computed_at",
        read_only=True,
        allow_null=True,
        help_text="When the nightly job computed these figures; null before its first run.",
    )

    class Meta:
        model = Node
        fields = [
            "id",
            "hostname",
            "site",
            "gpu_model",
            "gpu_count",
            "status",
            "currency",
            "capex",
            "acquired_on",
            "service_life_months",
            "months_of_life",
            "cumulative_net_cash_flow",
            "paid_back_in_month",
            "paid_back_on",
            "projected_payback_months",
            "projection_reason",
            "roi_to_date",
            "revenue_per_gpu_hour",
            "revenue_per_gpu_hour_reason",
            "break_even_rate_per_gpu_hour",
            "break_even_reason",
            "trailing_utilization",
            "book_value",
            "computed_at",
        ]
        read_only_fields = fields


ASSET_CSV_FIELDS = (
    "id",
    "hostname",
    "site_id",
    "site_name",
    *[name for name in AssetSerializer.Meta.fields if name not in {"id", "hostname", "site"}],
)


class AssetMonthSerializer(MinorUnitMixin, serializers.ModelSerializer[AssetMonth]):
    """One calendar month of a node in its capex currency.

    net_cash_flow = revenue - energy_cost - opex (depreciation is not cash);
    total_cost = depreciation + energy_cost + opex. `revenue_detail` lists the documents the
    revenue came from, by kind and currency, and every FX conversion made.
    """

    money_fields = (
        "capex",
        "energy_cost",
        "opex",
        "depreciation",
        "total_cost",
        "revenue",
        "net_cash_flow",
        "cumulative_net_cash_flow",
        "book_value",
    )

    total_cost = serializers.DecimalField(max_digits=21, decimal_places=2, read_only=True)
    warnings = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = AssetMonth
        fields = [
            "month",
            "month_of_life",
            "currency",
            "capex",
            "hours_in_month",
            "in_service_hours",
            "available_gpu_hours",
            "allocated_gpu_hours",
            "utilization",
            "energy_kwh",
            "energy_cost",
            "opex",
            "depreciation",
            "total_cost",
            "revenue",
            "net_cash_flow",
            "cumulative_net_cash_flow",
            "book_value",
            "revenue_detail",
            "warnings",
            "computed_at",
        ]
        read_only_fields = fields


class AssetEconomicsSerializer(serializers.Serializer[Any]):
    """A node's payback summary and its months in the range asked for, oldest first."""

    asset = AssetSerializer()
    months = AssetMonthSerializer(many=True)


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


class CapacitySignalFilter(django_filters.FilterSet):
    """Signals by level, site, GPU model and evaluation day."""

    level = django_filters.MultipleChoiceFilter(choices=SignalLevel.choices)
    site = django_filters.NumberFilter(field_name="site_id")
    gpu_model = django_filters.CharFilter(field_name="gpu_model__slug")

    class Meta:
        model = CapacitySignal
        fields = {"evaluated_on": ["exact", "gte", "lte"]}


class SignalWindowSerializer(serializers.Serializer[CapacitySignal]):
    """The trailing week a signal was evaluated over, [start, end)."""

    start = serializers.DateTimeField(source="window_start")
    end = serializers.DateTimeField(source="window_end")


class CapacitySignalSerializer(serializers.ModelSerializer[CapacitySignal]):
    """A pool (one GPU model at one site) as the nightly job found it over the trailing week."""

    provider: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    site = SiteRefSerializer(read_only=True)
    gpu_model: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    window = SignalWindowSerializer(source="*", read_only=True)
    reasons = serializers.ListField(child=serializers.CharField(), read_only=True)

    class Meta:
        model = CapacitySignal
        fields = [
            "id",
            "provider",
            "site",
            "gpu_model",
            "evaluated_on",
            "window",
            "level",
            "raised",
            "reasons",
            "gpu_count",
            "available_gpu_hours",
            "allocated_gpu_hours",
            "utilization",
            "unmet_quotes",
            "unmet_quotes_before",
            "unmet_growing",
            "computed_at",
        ]
        read_only_fields = fields


SIGNAL_CSV_FIELDS = (
    "id",
    "provider",
    "site_id",
    "site_name",
    "gpu_model",
    "evaluated_on",
    "window_start",
    "window_end",
    *CapacitySignalSerializer.Meta.fields[6:],
)


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


class RatioSerializer(serializers.Serializer[Any]):
    """A quotient, or null with the reason there is none."""

    value = serializers.DecimalField(max_digits=24, decimal_places=6, allow_null=True)
    reason = serializers.CharField(allow_null=True)


class CostBreakdownSerializer(serializers.Serializer[Any]):
    """The period's total cost of ownership by part."""

    depreciation = serializers.DecimalField(max_digits=20, decimal_places=2)
    energy = serializers.DecimalField(max_digits=20, decimal_places=2)
    opex = serializers.DecimalField(max_digits=20, decimal_places=2)


class UnitEconomicsHourSerializer(serializers.Serializer[Any]):
    """One hour of traffic, throughput utilization and latency percentiles."""

    hour = serializers.DateTimeField()
    requests_total = serializers.IntegerField()
    requests_successful = serializers.IntegerField()
    tokens_successful = serializers.IntegerField()
    utilization = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    ttft_p95_ms = serializers.FloatField(allow_null=True)
    ttft_p99_ms = serializers.FloatField(allow_null=True)
    e2e_p95_ms = serializers.FloatField(allow_null=True)
    e2e_p99_ms = serializers.FloatField(allow_null=True)


class UnitEconomicsPeriodSerializer(serializers.Serializer[Any]):
    """One week or month of an offering or pool: what it cost and what it delivered."""

    scope = serializers.CharField(help_text="offering or pool.")
    scope_id = serializers.CharField(help_text="The offering id, or <site_id>:<gpu_model>.")
    scope_name = serializers.CharField()
    period = serializers.ChoiceField(choices=list(unit_economics_selector.PERIODS))
    period_start = serializers.DateField()
    period_end = serializers.DateField(help_text="Exclusive.")
    currency = serializers.CharField()
    total_cost = serializers.DecimalField(max_digits=20, decimal_places=2)
    cost_breakdown = CostBreakdownSerializer()
    available_gpu_hours = serializers.DecimalField(max_digits=16, decimal_places=4)
    allocated_gpu_hours = serializers.DecimalField(max_digits=16, decimal_places=4)
    utilization_avg = RatioSerializer()
    utilization_peak = serializers.DecimalField(max_digits=12, decimal_places=6, allow_null=True)
    requests_total = serializers.IntegerField()
    requests_successful = serializers.IntegerField()
    requests_failed = serializers.IntegerField()
    tokens_successful = serializers.IntegerField()
    cost_per_successful_request = RatioSerializer()
    cost_per_million_successful_tokens = RatioSerializer()
    failed_request_share = RatioSerializer()
    cost_of_failed_requests = serializers.DecimalField(
        max_digits=20, decimal_places=2, allow_null=True
    )
    gpu_hours_by_workload = serializers.DictField(child=serializers.CharField())
    hourly = UnitEconomicsHourSerializer(many=True)
    conversions = serializers.ListField(child=serializers.DictField())
    warnings = serializers.ListField(child=serializers.CharField())


class UnitEconomicsSerializer(serializers.Serializer[Any]):
    """Every period of the scope between `from` and `to`, oldest first."""

    results = UnitEconomicsPeriodSerializer(many=True)


POOL = re.compile(r"(\d{1,18}):([-a-zA-Z0-9_]{1,64})")


def _scope_params(params: Mapping[str, str]) -> tuple[int | None, tuple[int, str] | None]:
    """`offering=<id>` or `pool=<site_id>:<gpu_model>`, exactly one of them."""
    given = exactly_one(
        params,
        ("offering", "pool"),
        message="Give exactly one of `offering=<id>` or `pool=<site_id>:<gpu_model>`.",
        code="scope_required",
    )
    if given == "offering":
        return id_param(params, "offering", what="the id of an SLA offering"), None
    match = match_param(params, "pool", POOL, what="<site_id>:<gpu_model slug>, e.g. 12:h100-sxm")
    assert match is not None  # exactly_one saw it
    return None, (int(match[1]), match[2].lower())


class UnitEconomicsView(OrganizationScopedMixin, generics.GenericAPIView[Any]):
    """What one SLA offering or one pool cost per successful request, token and GPU-hour."""

    serializer_class = UnitEconomicsSerializer
    permission_classes = [IsProviderOrOperator]
    renderer_classes = RENDERERS_WITH_CSV
    filter_backends: list[Any] = []
    pagination_class = None

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

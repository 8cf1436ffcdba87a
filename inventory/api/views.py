"""Views of the inventory API: catalog, market prices, sites, nodes, GPUs, outages, import.

Reads are scoped by inventory.selectors.visible_condition; writes only ever reach the caller's
own rows (operators: all), so another provider's object answers 404. Input is parsed by the
pydantic schemas and every change goes through a service.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.permissions import SAFE_METHODS
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.mixins import OrganizationScopedMixin
from accounts.models import Organization
from accounts.permissions import IsProvider, request_caller
from accounts.selectors import Caller
from core.api.idempotency import idempotent
from core.api.parsers import body_size_check
from core.errors import NotFound, ValidationFailed
from inventory import selectors, services
from inventory.api.filters import (
    GpuFilter,
    GpuModelFilter,
    MarketPriceFilter,
    NodeFilter,
    OutageFilter,
    SiteFilter,
)
from inventory.api.serializers import (
    FairRateSerializer,
    GpuModelSerializer,
    GpuSerializer,
    ImportResultSerializer,
    MarketPriceSerializer,
    MarketPricesRecordedSerializer,
    MarketSeriesSerializer,
    NodeSerializer,
    OutageSerializer,
    SiteSerializer,
)
from inventory.choices import PriceTerm
from inventory.models import GpuModel, Node, Site
from inventory.rules import FieldError, raise_if_any
from inventory.schemas import (
    GpuInput,
    MarketPriceBatch,
    NodeCreateInput,
    NodeInput,
    OutageCreateInput,
    OutageInput,
    SiteInput,
    parse,
)
from inventory.services.import_files import FileFormat, ImportRows, rows_from_stream


def _body(request: Request) -> dict[str, Any]:
    """The JSON object of a request body, or a 400."""
    if not isinstance(request.data, dict):
        raise_if_any([FieldError("__root__", "invalid", "Send a JSON object.")])
    return dict(request.data)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _target_organization(caller: Caller, slug: Any) -> Organization:
    """The organization a write acts for: the caller's own, or (operators) the one named."""
    if caller.is_operator:
        if not slug:
            raise ValidationFailed(
                "Operators name the provider organization.",
                code="organization_required",
                detail={"field": "organization"},
            )
        found = Organization.objects.filter(slug=slug).first()
    else:
        assert caller.organization is not None  # HasOrganizationScope guarantees it
        found = caller.organization if slug in (None, caller.organization.slug) else None
    if found is None:
        raise NotFound(
            f"No organization {slug!r}.",
            code="organization_not_found",
            detail={"field": "organization"},
        )
    return found


class _InventoryView(OrganizationScopedMixin):
    """Scoping for inventory rows: own rows, the public ones for customers' reads."""

    owner_field = "organization"
    public: Q | None = None

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        reading = self.request.method in SAFE_METHODS  # type: ignore[attr-defined]
        condition = selectors.visible_condition(
            caller=self.caller,
            owner_field=self.owner_field,
            public=self.public if reading else None,
        )
        return queryset if condition is None else queryset.filter(condition)

    def get_serializer_context(self) -> dict[str, Any]:
        context: dict[str, Any] = super().get_serializer_context()  # type: ignore[misc]
        context["caller"] = self.caller
        return context

    def own_site(self, site_id: Any) -> Site:
        """One of the caller's sites (any site for operators), or a 404 naming the field."""
        sites = selectors.sites()
        if not self.caller.is_operator:
            sites = sites.filter(organization=self.caller.organization)
        site = sites.filter(pk=site_id).first() if _is_id(site_id) else None
        if site is None:
            raise NotFound(
                f"No site {site_id!r} of yours.", code="site_not_found", detail={"field": "site"}
            )
        return site

    def own_node(self, node_id: Any) -> Node:
        """One of the caller's nodes (any node for operators), or a 404 naming the field."""
        nodes = selectors.nodes()
        if not self.caller.is_operator:
            nodes = nodes.filter(site__organization=self.caller.organization)
        node = nodes.filter(pk=node_id).first() if _is_id(node_id) else None
        if node is None:
            raise NotFound(
                f"No node {node_id!r} of yours.", code="node_not_found", detail={"field": "node"}
            )
        return node


class GpuModelViewSet(viewsets.ReadOnlyModelViewSet[GpuModel]):
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

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset  # a public index: every organization reads all of it

    def list(self, request: Request) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=MarketPriceBatch, responses={201: MarketPricesRecordedSerializer})
    @idempotent
    def create(self, request: Request) -> Response:
        batch = parse(MarketPriceBatch, _body(request))
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
        slug = params.get("gpu_model", "")
        term = params.get("term", PriceTerm.ON_DEMAND)
        currency = params.get("currency", "USD").upper()
        errors = []
        if not GpuModel.objects.filter(slug=slug).exists():
            errors.append(
                FieldError("gpu_model", "unknown_gpu_model", f"{slug!r} is not in the catalog.")
            )
        if term not in PriceTerm.values:
            errors.append(FieldError("term", "invalid_choice", f"{term!r} is not a term."))
        raise_if_any(errors)
        return slug, term, currency

    @staticmethod
    def _date_param(request: Request, name: str, default: date) -> date:
        raw = request.query_params.get(name)
        if raw is None:
            return default
        try:
            return date.fromisoformat(raw)
        except ValueError:
            raise_if_any([FieldError(name, "invalid", f"{raw!r} is not a YYYY-MM-DD date.")])
            raise

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
        end = self._date_param(request, "end", date.today())
        # (a year before end, but never before the year 1: `end=0001-01-01` was a 500)
        start = self._date_param(request, "start", date(max(end.year - 1, 1), end.month, 1))
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
        day = self._date_param(request, "day", date.today())
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


class SiteViewSet(
    _InventoryView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Site],
):
    """A provider's sites; customers read every site without its running costs."""

    queryset = selectors.sites()
    serializer_class = SiteSerializer
    filterset_class = SiteFilter
    permission_classes = [IsProvider]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    owner_field = "organization"
    public = Q(pk__isnull=False)
    ordering_fields = ["name", "country", "city", "created_at", "id"]

    @extend_schema(request=SiteInput, responses={201: SiteSerializer})
    def create(self, request: Request) -> Response:
        data = _body(request)
        organization = _target_organization(self.caller, data.pop("organization", None))
        site = services.site_create(organization=organization, fields=parse(SiteInput, data))
        return Response(self.get_serializer(site).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=SiteInput, responses=SiteSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        site = services.site_update(site=self.get_object(), changes=_body(request))
        return Response(self.get_serializer(site).data)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        services.site_delete(site=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class NodeViewSet(
    _InventoryView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Node],
):
    """A provider's nodes with their economics; customers read serving nodes without them."""

    queryset = selectors.nodes()
    serializer_class = NodeSerializer
    filterset_class = NodeFilter
    permission_classes = [IsProvider]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    owner_field = "site__organization"
    public = selectors.PUBLIC_NODES
    ordering_fields = ["hostname", "gpu_count", "status", "created_at", "id"]

    @extend_schema(request=NodeCreateInput, responses={201: NodeSerializer})
    @idempotent
    def create(self, request: Request) -> Response:
        fields = parse(NodeCreateInput, _body(request))
        node = services.node_create(
            site=self.own_site(fields.site),
            fields=NodeInput.model_validate(fields.model_dump(exclude={"site", "gpu_uuids"})),
            gpu_uuids=fields.gpu_uuids,
        )
        node = selectors.nodes().get(pk=node.pk)
        return Response(self.get_serializer(node).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=NodeInput, responses=NodeSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        changes = _body(request)
        site = self.own_site(changes.pop("site")) if "site" in changes else None
        node = services.node_update(node=self.get_object(), changes=changes, site=site)
        return Response(self.get_serializer(selectors.nodes().get(pk=node.pk)).data)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        services.node_delete(node=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class GpuViewSet(
    _InventoryView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Any],
):
    """GPUs: read, and change health or identifiers. They come and go with their node."""

    queryset = selectors.gpus()
    serializer_class = GpuSerializer
    filterset_class = GpuFilter
    permission_classes = [IsProvider]
    http_method_names = ["get", "patch", "head", "options"]
    owner_field = "node__site__organization"
    public = Q(node__status__in=["active", "maintenance"])
    ordering_fields = ["index", "health", "id"]

    def get_queryset(self) -> QuerySet[Any]:
        return super().get_queryset().select_related("node__site")

    @extend_schema(request=GpuInput, responses=GpuSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        gpu = services.gpu_update(gpu=self.get_object(), changes=_body(request))
        return Response(self.get_serializer(selectors.gpus().get(pk=gpu.pk)).data)


class OutageViewSet(
    _InventoryView,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Any],
):
    """Outages of a provider's nodes and GPUs; visible to the provider and operators only."""

    queryset = selectors.outages()
    serializer_class = OutageSerializer
    filterset_class = OutageFilter
    permission_classes = [IsProvider]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    owner_field = "node__site__organization"
    ordering_fields = ["start", "end", "id"]

    @extend_schema(request=OutageCreateInput, responses={201: OutageSerializer})
    def create(self, request: Request) -> Response:
        fields = parse(OutageCreateInput, _body(request))
        outage = services.outage_create(
            node=self.own_node(fields.node),
            fields=OutageInput.model_validate(fields.model_dump(exclude={"node"})),
        )
        outage = selectors.outages().get(pk=outage.pk)
        return Response(self.get_serializer(outage).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=OutageInput, responses=OutageSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        outage = services.outage_update(outage=self.get_object(), changes=_body(request))
        return Response(self.get_serializer(selectors.outages().get(pk=outage.pk)).data)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        services.outage_delete(outage=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class _ImportParser(BaseParser):
    """Streams an import body into rows, stopping at NODE_IMPORT_MAX_BYTES or MAX_ROWS."""

    file_format: FileFormat = "json"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        request = (parser_context or {}).get("request")
        body_size_check(request=request, max_bytes=settings.NODE_IMPORT_MAX_BYTES)
        # The body's own syntax errors answer like every endpoint's; a file's are its own.
        return rows_from_stream(
            stream, file_format=self.file_format, syntax_error_code="malformed_request"
        )


class ImportJsonParser(_ImportParser):
    """A JSON body: a list of rows, or {"rows": [...]}."""

    media_type = "application/json"
    renderer_class = JSONRenderer


class CsvParser(_ImportParser):
    """A CSV file sent as the raw body with Content-Type: text/csv."""

    media_type = "text/csv"
    file_format = "csv"


class ImportMultiPartParser(MultiPartParser):
    """A form with a `file`, refused by its declared size before Django spools it."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        request = (parser_context or {}).get("request")
        body_size_check(request=request, max_bytes=settings.NODE_IMPORT_MAX_BYTES)
        return super().parse(stream, media_type, parser_context)


class NodeImportView(OrganizationScopedMixin, APIView):
    """POST /api/v1/nodes/import — create or update many nodes at once, all or nothing.

    Send JSON (a list of rows, or {"rows": [...]}), a CSV body (Content-Type: text/csv), or a
    multipart form with a `file` (.csv or .json). Operators add ?organization=<slug>. Bodies
    past NODE_IMPORT_MAX_BYTES answer 413; reading stops at the first row past the cap.
    """

    permission_classes = [IsProvider]
    parser_classes = [ImportJsonParser, CsvParser, ImportMultiPartParser]

    def _rows(self, request: Request) -> list[Any]:
        data = request.data
        if isinstance(data, ImportRows):
            return data
        upload = request.FILES.get("file") if hasattr(request, "FILES") else None
        if upload is not None:
            is_csv = (upload.name or "").lower().endswith(".csv")
            return rows_from_stream(upload, file_format="csv" if is_csv else "json")
        if not data:
            raise ValidationFailed(
                "The import is empty; send rows as JSON or CSV.",
                code="empty_import",
                detail={"errors": []},
            )
        raise ValidationFailed(
            "Send rows as JSON, CSV or a multipart `file`.",
            code="malformed_import",
            detail={"errors": []},
        )

    @extend_schema(
        request={"application/json": {"type": "array", "items": {"type": "object"}}},
        parameters=[OpenApiParameter("organization", str, description="Operators only.")],
        responses={200: ImportResultSerializer},
    )
    @idempotent
    def post(self, request: Request) -> Response:
        caller = request_caller(request)
        organization = _target_organization(caller, request.query_params.get("organization"))
        result = services.nodes_import(organization=organization, rows=self._rows(request))
        return Response(ImportResultSerializer(result).data, status=status.HTTP_200_OK)

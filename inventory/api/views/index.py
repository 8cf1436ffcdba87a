"""The market index API: registered index sources and the daily fixings.

- /api/v1/index-sources/: every organization reads the sources; operator staff register and
  change them (403 operator_only for anyone else). Kind and owner never change: a different
  owner is a different source (400 index_source_identity_fixed). No delete: deactivate it.
- /api/v1/indices/: the fixings, read-only, for every authenticated caller. Each carries the
  rate (null when the day had too few independent owners), its inputs (parameters, every
  observation and vote), what was dropped and why, and a sentence.
- /api/v1/indices/marketplace/: the marketplace index (`cardhour-marketplace/1`), read-only for
  every authenticated caller: per GPU model, pricing mode, currency and day, its basis (trades,
  or the external index when there were too few), rate, trade count and GPU-hours, its inputs
  (every trade) and what the trim cut.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.permissions import HasOrganizationScope, IsOperator
from core.api.idempotency import idempotent
from core.api.parsers import request_object
from core.errors import ValidationFailed
from inventory import selectors, services
from inventory.api.filters import (
    IndexFixingFilter,
    IndexSourceFilter,
    MarketplaceFixingFilter,
)
from inventory.api.serializers import (
    IndexFixingSerializer,
    IndexSourceSerializer,
    MarketplaceFixingSerializer,
)
from inventory.models import IndexFixing, IndexSource, MarketplaceFixing
from inventory.schemas import (
    IndexSourceChanges,
    IndexSourceInput,
    parse,
)

_IDENTITY_FIELDS = ("kind", "owner_organization", "owner_name")


class IndexSourceViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[IndexSource],
):
    """Sources of market observations that count for the index; operators keep them."""

    queryset = selectors.index_sources()
    serializer_class = IndexSourceSerializer
    filterset_class = IndexSourceFilter
    lookup_value_regex = r"\d+"
    ordering_fields = ["name", "kind", "weight", "registered_at", "id"]
    http_method_names = ["get", "post", "patch", "head", "options"]

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset  # the index's inputs are public: every organization reads them

    def get_permissions(self) -> list[BasePermission]:
        if self.request.method in SAFE_METHODS:
            return [HasOrganizationScope()]
        return [IsOperator()]

    @extend_schema(
        request=IndexSourceInput, responses={201: IndexSourceSerializer, 409: OpenApiResponse()}
    )
    @idempotent
    def create(self, request: Request) -> Response:
        """Register a source (operators); a name, or a provider's list price, twice is a 409."""
        source = services.index_source_register(
            fields=parse(IndexSourceInput, request_object(request)),
            registered_by=request.user,
            registered_by_organization=self.caller.organization,
        )
        source = selectors.index_sources().get(pk=source.pk)
        return Response(IndexSourceSerializer(source).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=IndexSourceChanges, responses={200: IndexSourceSerializer, 409: OpenApiResponse()}
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Change name, weight, activity or notes (operators); every change is in its history."""
        source = self.get_object()
        changes = request_object(request)
        fixed = [name for name in _IDENTITY_FIELDS if name in changes]
        if fixed:
            raise ValidationFailed(
                f"{', '.join(fixed)} cannot change: a different owner or kind is a new source.",
                code="index_source_identity_fixed",
                detail={"field": fixed[0]},
            )
        source = services.index_source_update(
            source=source,
            changes=parse(IndexSourceChanges, changes),
            changed_by=request.user,
            changed_by_organization=self.caller.organization,
        )
        source = selectors.index_sources().get(pk=source.pk)
        return Response(IndexSourceSerializer(source).data)


class IndexFixingViewSet(OrganizationScopedMixin, viewsets.ReadOnlyModelViewSet[IndexFixing]):
    """The market index: one fixing per GPU model, term, currency and day, newest first."""

    queryset = selectors.index_fixings()
    serializer_class = IndexFixingSerializer
    filterset_class = IndexFixingFilter
    lookup_value_regex = r"\d+"
    ordering_fields = ["day", "id"]
    ordering = ["-day", "-id"]

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset  # a public index: every organization reads all of it


class MarketplaceFixingViewSet(
    OrganizationScopedMixin, viewsets.ReadOnlyModelViewSet[MarketplaceFixing]
):
    """The marketplace index: one fixing per GPU model, pricing mode, currency and day."""

    queryset = selectors.marketplace_fixings()
    serializer_class = MarketplaceFixingSerializer
    filterset_class = MarketplaceFixingFilter
    lookup_value_regex = r"\d+"
    ordering_fields = ["day", "id"]
    ordering = ["-day", "-id"]

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset  # a public index: every organization reads all of it

"""FX rates API: every organization reads the rates economics convert with; operators keep them.

Writes go through billing.services.fx: 400 with a rule's code (invalid_currency, same_currency,
rate_not_positive), 409 fx_rate_exists for a pair and day already recorded, 403 operator_only
for anyone but operator staff.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.permissions import HasOrganizationScope, IsOperator
from billing.models import FxRate
from billing.services.fx import FxRateInput, fx_rate_create, fx_rate_delete, fx_rate_update
from core.api.idempotency import idempotent
from inventory.rules import FieldError, raise_if_any
from inventory.schemas import parse


class FxRateFilter(django_filters.FilterSet):
    """Rates by currency pair and by a window of days they became valid."""

    base_currency = django_filters.CharFilter(lookup_expr="iexact")
    quote_currency = django_filters.CharFilter(lookup_expr="iexact")

    class Meta:
        model = FxRate
        fields = {"valid_on": ["exact", "gte", "lte"]}


class FxRateSerializer(serializers.ModelSerializer[FxRate]):
    """1 `base_currency` is worth `rate` `quote_currency` from `valid_on` on."""

    recorded_by_organization: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )

    class Meta:
        model = FxRate
        fields = [
            "id",
            "base_currency",
            "quote_currency",
            "rate",
            "valid_on",
            "source",
            "recorded_by_organization",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


def _body(request: Request) -> dict[str, Any]:
    """The JSON object of a request body, or a 400."""
    if not isinstance(request.data, dict):
        raise_if_any([FieldError("__root__", "invalid", "Send a JSON object.")])
    return dict(request.data)


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
            fields=parse(FxRateInput, _body(request)),
            recorded_by_organization=self.caller.organization,
            recorded_by=request.user,
        )
        return Response(FxRateSerializer(fx_rate).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=FxRateInput, responses={200: FxRateSerializer, 409: OpenApiResponse()})
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Correct some fields of a rate (operators); send only the fields that change."""
        fx_rate = fx_rate_update(
            fx_rate=self.get_object(),
            changes=_body(request),
            recorded_by_organization=self.caller.organization,
            recorded_by=request.user,
        )
        return Response(FxRateSerializer(fx_rate).data)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, pk: str | None = None) -> Response:
        """Remove a rate (operators); the next nightly run converts without it."""
        fx_rate_delete(fx_rate=self.get_object(), deleted_by_organization=self.caller.organization)
        return Response(status=status.HTTP_204_NO_CONTENT)

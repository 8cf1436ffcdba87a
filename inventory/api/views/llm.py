"""The model catalogue API: /api/v1/llm-models/{slug}/.

Every authenticated caller reads it (reference data, like the GPU catalog); operator staff add
models and correct their figures (403 operator_only for anyone else). No delete over the API:
operators remove a model in the admin. Input is parsed by inventory.schemas and every write goes
through inventory.services.llm_models.
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
from inventory import selectors, services
from inventory.api.filters import LlmModelFilter
from inventory.api.serializers import LlmModelSerializer
from inventory.models import LlmModel
from inventory.schemas import LlmModelChanges, LlmModelInput, parse


class LlmModelViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[LlmModel],
):
    """Open language models with the architecture figures sizing reads; operators keep them."""

    queryset = selectors.llm_models()
    serializer_class = LlmModelSerializer
    filterset_class = LlmModelFilter
    lookup_field = "slug"
    ordering_fields = ["name", "publisher", "parameters", "max_context_tokens", "id"]
    http_method_names = ["get", "post", "patch", "head", "options"]

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset  # reference data: every organization reads all of it

    def get_permissions(self) -> list[BasePermission]:
        if self.request.method in SAFE_METHODS:
            return [HasOrganizationScope()]
        return [IsOperator()]

    def _who(self) -> str:
        organization = self.caller.organization
        return f"api:{organization.slug}" if organization is not None else "api"

    @extend_schema(
        request=LlmModelInput, responses={201: LlmModelSerializer, 409: OpenApiResponse()}
    )
    @idempotent
    def create(self, request: Request) -> Response:
        """Add a model (operators); its figures are checked as sizing will read them."""
        model = services.llm_model_create(
            fields=parse(LlmModelInput, request_object(request)), created_by=self._who()
        )
        return Response(LlmModelSerializer(model).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=LlmModelChanges, responses={200: LlmModelSerializer, 409: OpenApiResponse()}
    )
    def partial_update(self, request: Request, slug: str | None = None) -> Response:
        """Correct a model's figures (operators); the slug never changes."""
        model = services.llm_model_update(
            model=self.get_object(),
            changes=parse(LlmModelChanges, request_object(request)),
            changed_by=self._who(),
        )
        return Response(LlmModelSerializer(model).data)

"""Webhooks API: the caller's organization's endpoints, their deliveries, and redelivery.

Endpoints belong to one organization and only it sees them (operators included: an endpoint's
URL and failures are its organization's business); another organization's endpoint is 404.
The signing secret is in the answer to the create only. Bad URLs and event-type lists are 400s
with the codes of webhooks.rules and webhooks.services.addresses (url_scheme_not_allowed,
url_address_not_allowed, url_host_not_allowed, url_unresolvable, invalid_url,
event_types_required, too_many_event_types, unknown_event_type, duplicate_event_type,
invalid_event_types).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from core.api.serializers import read_input
from core.errors import NotFound
from webhooks.api.serializers import (
    DeliverySerializer,
    WebhookEndpointCreatedSerializer,
    WebhookEndpointCreateSerializer,
    WebhookEndpointSerializer,
    WebhookEndpointUpdateSerializer,
)
from webhooks.models import Delivery, WebhookEndpoint
from webhooks.services.deliveries import delivery_redeliver
from webhooks.services.endpoints import (
    EndpointChanges,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_update,
)


class OwnOrganizationMixin(OrganizationScopedMixin):
    """Rows of the caller's own organization only: operators get no view of others' endpoints."""

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(**{self.tenant_fields[0]: self.caller.organization_id})


class WebhookEndpointViewSet(
    OwnOrganizationMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[WebhookEndpoint],
):
    """GET/POST /api/v1/webhook-endpoints/, GET/PATCH/DELETE /api/v1/webhook-endpoints/{id}/."""

    queryset = WebhookEndpoint.objects.all()
    serializer_class = WebhookEndpointSerializer
    ordering_fields = ["created_at", "id"]
    ordering = ["id"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    @extend_schema(
        request=WebhookEndpointCreateSerializer, responses={201: WebhookEndpointCreatedSerializer}
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Register an endpoint; the answer holds its signing secret, shown this once."""
        organization = self.caller.organization
        if organization is None:
            raise Forbidden(
                "Act for an organization to register its endpoints.", code="no_organization"
            )
        body = read_input(WebhookEndpointCreateSerializer, request.data)
        endpoint = webhook_endpoint_create(organization=organization, **body)
        return Response(
            WebhookEndpointCreatedSerializer(endpoint).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(request=WebhookEndpointUpdateSerializer, responses=WebhookEndpointSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Change the URL, event types, description, or enable/disable the endpoint."""
        endpoint = self.get_object()
        body = read_input(WebhookEndpointUpdateSerializer, request.data)
        endpoint = webhook_endpoint_update(endpoint=endpoint, changes=EndpointChanges(**body))
        return Response(WebhookEndpointSerializer(endpoint).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Remove the endpoint with its delivery log."""
        webhook_endpoint_delete(endpoint=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveryViewSet(
    OwnOrganizationMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Delivery],
):
    """GET /api/v1/webhook-endpoints/{id}/deliveries/ — newest first, each with its attempts;
    POST …/deliveries/{id}/redeliver — send it again now (same webhook-id)."""

    queryset = Delivery.objects.select_related("event").prefetch_related("attempts")
    serializer_class = DeliverySerializer
    tenant_fields = ("endpoint__organization",)
    ordering_fields = ["created_at", "id"]
    ordering = ["-id"]

    def get_queryset(self) -> QuerySet[Delivery]:
        endpoint_id = str(self.kwargs["endpoint_pk"])
        found = (
            endpoint_id.isdigit()
            and self.caller.organization_id is not None
            and WebhookEndpoint.objects.filter(
                pk=int(endpoint_id), organization_id=self.caller.organization_id
            ).exists()
        )
        if not found:
            raise NotFound("No such webhook endpoint.", code="webhook_endpoint_not_found")
        return super().get_queryset().filter(endpoint_id=int(endpoint_id))

    @extend_schema(request=None, responses=DeliverySerializer)
    @action(detail=True, methods=["post"])
    def redeliver(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Send the delivery again now, with a fresh retry schedule; 409 endpoint_disabled."""
        delivery = delivery_redeliver(delivery=self.get_object())
        return Response(DeliverySerializer(self.get_queryset().get(pk=delivery.pk)).data)

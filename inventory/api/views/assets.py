"""Views of a provider's assets: sites, nodes, GPUs and outages.

Reads are scoped by inventory.selectors.visible_condition; writes only ever reach the caller's
own rows (operators: all), so another provider's object answers 404. Input is parsed by the
pydantic schemas and every change goes through a service.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.models import Organization
from accounts.permissions import IsProvider
from accounts.selectors import Caller
from core.api.idempotency import idempotent
from core.api.parsers import request_object
from core.errors import NotFound, ValidationFailed
from inventory import selectors, services
from inventory.api.filters import (
    GpuFilter,
    NodeFilter,
    OutageFilter,
    SiteFilter,
)
from inventory.api.serializers import (
    GpuSerializer,
    NodeSerializer,
    OutageSerializer,
    SiteSerializer,
)
from inventory.models import Node, Site
from inventory.schemas import (
    GpuInput,
    NodeCreateInput,
    NodeInput,
    OutageCreateInput,
    OutageInput,
    SiteInput,
    parse,
)


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
        data = request_object(request)
        organization = _target_organization(self.caller, data.pop("organization", None))
        site = services.site_create(organization=organization, fields=parse(SiteInput, data))
        return Response(self.get_serializer(site).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=SiteInput, responses=SiteSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        site = services.site_update(site=self.get_object(), changes=request_object(request))
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
        fields = parse(NodeCreateInput, request_object(request))
        node = services.node_create(
            site=self.own_site(fields.site),
            fields=NodeInput.model_validate(fields.model_dump(exclude={"site", "gpu_uuids"})),
            gpu_uuids=fields.gpu_uuids,
        )
        node = selectors.nodes().get(pk=node.pk)
        return Response(self.get_serializer(node).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=NodeInput, responses=NodeSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        changes = request_object(request)
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
        gpu = services.gpu_update(gpu=self.get_object(), changes=request_object(request))
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
        fields = parse(OutageCreateInput, request_object(request))
        outage = services.outage_create(
            node=self.own_node(fields.node),
            fields=OutageInput.model_validate(fields.model_dump(exclude={"node"})),
        )
        outage = selectors.outages().get(pk=outage.pk)
        return Response(self.get_serializer(outage).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=OutageInput, responses=OutageSerializer)
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        outage = services.outage_update(outage=self.get_object(), changes=request_object(request))
        return Response(self.get_serializer(selectors.outages().get(pk=outage.pk)).data)

    def destroy(self, request: Request, pk: str | None = None) -> Response:
        services.outage_delete(outage=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

"""Views of resale listings: lessees list and withdraw, providers consent, customers buy."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from core.api.idempotency import idempotent
from core.api.serializers import read_input
from core.errors import NotFound
from leasing.api.serializers.leases import LeaseSerializer
from leasing.api.serializers.resale import ResaleListingInputSerializer, ResaleListingSerializer
from leasing.api.views.leases import LeaseViewSet, _actor, _require_customer
from leasing.choices import ResaleStatus
from leasing.models import Lease, ResaleListing
from leasing.selectors.resale import resale_listings_with_relations
from leasing.services.resale import (
    resale_listing_buy,
    resale_listing_consent,
    resale_listing_create,
    resale_listing_withdraw,
)


class ResaleListingViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[ResaleListing],
):
    """Resale listings: sellers see theirs, providers those on their capacity, buyers the ones
    they bought, operators all. Open listings reach buyers through capacity search and quotes
    (marked `resale`); POST .../{id}/buy/ buys one whole."""

    queryset = resale_listings_with_relations()
    serializer_class = ResaleListingSerializer
    tenant_fields = ("seller", "parent_lease__offer__provider", "sublease__customer")
    ordering_fields = ["id", "start", "ask_price_per_gpu_hour", "created_at"]
    filterset_fields = ["status", "parent_lease"]

    @extend_schema(request=ResaleListingInputSerializer, responses={201: ResaleListingSerializer})
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        seller = _require_customer(request)
        data = read_input(ResaleListingInputSerializer, request.data)
        lease = Lease.objects.filter(pk=data["lease"], customer=seller).first()
        if lease is None:
            raise NotFound("No such lease.", code="lease_not_found")
        listing = resale_listing_create(
            seller=seller,
            parent_lease=lease,
            gpu_count=data["gpu_count"],
            start=data["start"],
            end=data["end"],
            ask_price_per_gpu_hour=data["ask_price_per_gpu_hour"],
            currency=data["currency"],
            actor=_actor(request),
        )
        return Response(
            ResaleListingSerializer(self.get_queryset().get(pk=listing.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=None, responses=ResaleListingSerializer)
    @action(detail=True, methods=["post"])
    def withdraw(self, request: Request, pk: str | None = None) -> Response:
        """The seller takes an unsold listing back (409 listing_closed once sold or closed)."""
        listing = self.get_object()
        if not self.caller.is_operator and listing.seller_id != self.caller.organization_id:
            raise Forbidden("Only the seller can withdraw its listing.", code="seller_only")
        resale_listing_withdraw(listing=listing, actor=_actor(request))
        return Response(ResaleListingSerializer(self.get_queryset().get(pk=listing.pk)).data)

    @extend_schema(request=None, responses=ResaleListingSerializer)
    @action(detail=True, methods=["post"])
    def consent(self, request: Request, pk: str | None = None) -> Response:
        """The provider consents to a listing its contract's clause makes wait for consent."""
        listing = self.get_object()
        provider_id = listing.parent_lease.offer.provider_id
        if not self.caller.is_operator and provider_id != self.caller.organization_id:
            raise Forbidden("Only the provider can consent.", code="provider_only")
        resale_listing_consent(listing=listing, actor=_actor(request))
        return Response(ResaleListingSerializer(self.get_queryset().get(pk=listing.pk)).data)

    def _buyable(self) -> ResaleListing:
        # An open listing is on offer to every customer (search shows it); any other listing
        # the caller may not see is 404, like every other tenant's object.
        pk = str(self.kwargs["pk"])
        visible = self.scope(ResaleListing.objects.all()) | ResaleListing.objects.filter(
            Q(status=ResaleStatus.OPEN)
        )
        listing = visible.filter(pk=int(pk)).first() if pk.isdigit() else None
        if listing is None:
            raise NotFound("No such resale listing.", code="resale_listing_not_found")
        return listing

    @extend_schema(request=None, responses={201: LeaseSerializer})
    @action(detail=True, methods=["post"])
    @idempotent
    def buy(self, request: Request, pk: str | None = None) -> Response:
        """Buy the whole listing: a sublease (its own contract at the ask) on exactly its
        GPU-time. 409 listing_not_available when another buyer was first."""
        buyer = _require_customer(request)
        sublease = resale_listing_buy(listing=self._buyable(), buyer=buyer, actor=_actor(request))
        leases: QuerySet[Lease] = LeaseViewSet.queryset
        return Response(
            LeaseSerializer(leases.get(pk=sublease.pk)).data, status=status.HTTP_201_CREATED
        )

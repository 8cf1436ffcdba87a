"""Views of the accounts API: who am I, and the caller's API keys."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api.mixins import OrganizationScopedMixin
from accounts.api.serializers import (
    ApiKeyCreatedSerializer,
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    BillingProfileSerializer,
    BillingProfileUpdateSerializer,
    MeSerializer,
)
from accounts.choices import Role
from accounts.errors import Forbidden
from accounts.models import ApiKey, BillingProfile, Membership
from accounts.permissions import request_caller
from accounts.services import api_key_create, api_key_revoke, billing_profile_update
from core.api.params import StrictQueryParamsMixin
from core.api.serializers import read_input
from core.errors import NotFound


class MeView(StrictQueryParamsMixin, APIView):
    """GET /api/v1/organizations/me/ — the organization this key or session acts for."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        caller = request_caller(request)
        data = {
            "organization": caller.organization,
            "is_operator": caller.is_operator,
            "can_write": caller.can_write,
            "api_key_prefix": caller.api_key.prefix if caller.api_key else None,
        }
        return Response(MeSerializer(data).data)


class BillingProfileView(StrictQueryParamsMixin, APIView):
    """GET/PUT/PATCH /api/v1/organizations/me/billing-profile/ — who the caller's organization is
    on invoices and credit notes (legal name, address, tax id, billing e-mail).

    Reading needs any key of the organization; changing it a write key or, for a person, the
    organization's admin role. Documents issued afterwards print the new values.
    """

    def _organization(self, request: Request) -> Any:
        caller = request_caller(request)
        if caller.organization is None:
            raise Forbidden(
                "Act for an organization (X-Organization) to see its billing profile.",
                code="no_organization",
            )
        return caller.organization

    @extend_schema(responses=BillingProfileSerializer)
    def get(self, request: Request) -> Response:
        profile = BillingProfile.objects.filter(organization=self._organization(request)).first()
        if profile is None:
            raise NotFound(
                "This organization has no billing profile yet; PUT one.",
                code="billing_profile_missing",
            )
        return Response(BillingProfileSerializer(profile).data)

    def _write(self, request: Request, *, partial: bool) -> Response:
        organization = self._organization(request)
        caller = request_caller(request)
        if caller.api_key is None and not caller.is_operator:
            # A person changes who the organization is on invoices only as one of its admins.
            memberships = Membership.objects.filter(organization=organization, role=Role.ADMIN)
            is_admin = memberships.filter(user__pk=int(request.user.pk or 0)).exists()
            if not is_admin:
                raise Forbidden(
                    "Only the organization's admins change its billing profile.",
                    code="admin_only",
                )
        changes = read_input(BillingProfileUpdateSerializer, request.data, partial=partial)
        profile = billing_profile_update(organization=organization, changes=changes)
        return Response(BillingProfileSerializer(profile).data)

    @extend_schema(request=BillingProfileUpdateSerializer, responses=BillingProfileSerializer)
    def put(self, request: Request) -> Response:
        return self._write(request, partial=False)

    @extend_schema(request=BillingProfileUpdateSerializer, responses=BillingProfileSerializer)
    def patch(self, request: Request) -> Response:
        return self._write(request, partial=True)


class ApiKeyViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[ApiKey],
):
    """The caller's organization's API keys: list, create (raw key shown once), revoke."""

    queryset = ApiKey.objects.select_related("organization")
    serializer_class = ApiKeySerializer
    ordering_fields = ["created_at", "name", "id"]

    @extend_schema(request=ApiKeyCreateSerializer, responses={201: ApiKeyCreatedSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        caller = self.caller
        if caller.organization is None:
            raise Forbidden("Act for an organization to create its keys.", code="no_organization")
        body = read_input(ApiKeyCreateSerializer, request.data)
        # A key creating a key bounds it (scope, expiry); a session user follows their role.
        issued = api_key_create(
            organization=caller.organization,
            created_by=request.user,
            created_by_key=caller.api_key,
            **body,
        )
        body = ApiKeyCreatedSerializer(issued.api_key).data
        body["key"] = issued.raw_key
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=ApiKeySerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        """Revoke a key now, and the keys it created; they never authenticate again."""
        api_key = api_key_revoke(api_key=self.get_object())
        return Response(ApiKeySerializer(api_key).data)

"""Views of customer funds: credit grants, top-ups, the burn-down and funds policies.

Customers read their own grants, top-ups, burn-down and policies; operators read everyone's.
A customer tops up by card (Stripe); an operator records a payment that arrived another way,
and grants promotional credit. A contract's funds policy is set by its lessee or an operator.
Another tenant's object answers 404.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.models import Organization
from accounts.permissions import HasOrganizationScope, IsOperator
from billing.api.filters import (
    BurnDownFilter,
    CreditGrantFilter,
    FundsPolicyFilter,
    TopUpFilter,
)
from billing.api.serializers_funds import (
    CreditGrantCreateSerializer,
    CreditGrantSerializer,
    CustomerBurnDownSerializer,
    FundsPolicySerializer,
    FundsPolicySetSerializer,
    TopUpCreateSerializer,
    TopUpSerializer,
)
from billing.models import CreditGrant, FundsPolicy, GrantKind, TopUp
from billing.selectors.funds import grants_with_balances
from billing.services.funds_policy import funds_policy_set
from billing.services.grants import credit_grant_create
from billing.services.top_ups import top_up_record, top_up_start
from contracts.models import Contract
from core.api.idempotency import idempotent
from core.api.serializers import read_input
from core.errors import NotFound, ValidationFailed


def _actor(request: Request) -> str:
    return str(request.user)


def _customer(organization_id: int) -> Organization:
    """The customer an operator names; 404 when there is none by that id."""
    customer = Organization.objects.filter(pk=organization_id, is_customer=True).first()
    if customer is None:
        raise NotFound("No customer organization has that id.", code="unknown_customer")
    return customer


class CreditGrantViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[CreditGrant],
):
    """Grants on the caller's prepaid balance (operators: everyone's; they create grants)."""

    queryset = grants_with_balances(CreditGrant.objects.select_related("top_up"))
    serializer_class = CreditGrantSerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("customer",)
    filterset_class = CreditGrantFilter
    ordering_fields = ["id", "granted_at", "priority", "expires_at", "amount"]
    ordering = ["-id"]

    def get_permissions(self) -> list[BasePermission]:
        if self.action == "create":
            return [IsOperator()]
        return [HasOrganizationScope()]

    @extend_schema(request=CreditGrantCreateSerializer, responses={201: CreditGrantSerializer})
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """An operator grants promotional credit (the operator vouches for it)."""
        data = read_input(CreditGrantCreateSerializer, request.data)
        actor = _actor(request)
        grant = credit_grant_create(
            customer=_customer(data.pop("customer")),
            kind=GrantKind.PROMOTIONAL,
            vouched_by=f"operator {actor}",
            actor=actor,
            **data,
        )
        return Response(
            CreditGrantSerializer(
                grants_with_balances(CreditGrant.objects.select_related("top_up")).get(pk=grant.pk)
            ).data,
            status=status.HTTP_201_CREATED,
        )


class TopUpViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[TopUp],
):
    """Top-ups of the caller's prepaid balance; customers pay by card, operators record."""

    queryset = TopUp.objects.all()
    serializer_class = TopUpSerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("customer",)
    filterset_class = TopUpFilter
    ordering_fields = ["id", "requested_at", "amount"]
    ordering = ["-id"]

    @extend_schema(
        request=TopUpCreateSerializer,
        responses={201: TopUpSerializer},
        description=(
            "A customer's card top-up (Stripe; `payment_method` required) or an operator's "
            "recorded payment (`customer` and `reference` required). 402 top_up_declined when "
            "the card is declined (the failed top-up is kept)."
        ),
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = read_input(TopUpCreateSerializer, request.data)
        caller = self.caller
        actor = _actor(request)
        if caller.is_operator:
            if "customer" not in data:
                raise ValidationFailed(
                    "Name the customer whose payment you record.",
                    code="customer_required",
                    detail={"field": "customer"},
                )
            top_up = top_up_record(
                customer=_customer(data["customer"]),
                currency=data["currency"],
                amount=data["amount"],
                reference=data.get("reference", ""),
                actor=actor,
            )
        else:
            customer = caller.organization
            if customer is None or not customer.is_customer:
                raise Forbidden("Top-ups are a customer's.", code="customer_only")
            if "customer" in data or "reference" in data:
                raise Forbidden(
                    "Only operators record payments for a customer.", code="operator_only"
                )
            top_up = top_up_start(
                customer=customer,
                currency=data["currency"],
                amount=data["amount"],
                payment_method=data.get("payment_method", ""),
                actor=actor,
            )
        return Response(TopUpSerializer(top_up).data, status=status.HTTP_201_CREATED)


class BurnDownViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Organization],
):
    """Per customer with a prepaid balance: when it runs out at the current run rate, one row
    per currency (the caller's own; operators: every customer's)."""

    queryset = Organization.objects.filter(
        pk__in=CreditGrant.objects.values("customer_id")
    ).order_by("pk")
    serializer_class = CustomerBurnDownSerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("pk",)
    filterset_class = BurnDownFilter
    ordering_fields = ["id"]
    ordering = ["id"]

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "now": timezone.now()}


class FundsPolicyViewSet(
    OrganizationScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[FundsPolicy],
):
    """Funds policies of the caller's contracts as lessee; the lessee (or an operator) sets one
    with POST (again to change it)."""

    queryset = FundsPolicy.objects.select_related("contract")
    serializer_class = FundsPolicySerializer
    lookup_value_regex = r"\d+"
    tenant_fields = ("contract__lessee",)
    filterset_class = FundsPolicyFilter
    ordering_fields = ["id", "contract"]
    ordering = ["id"]

    @extend_schema(request=FundsPolicySetSerializer, responses={200: FundsPolicySerializer})
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = read_input(FundsPolicySetSerializer, request.data)
        contracts = self.scope_contracts(Contract.objects.all())
        contract = get_object_or_404(contracts, pk=data["contract"])
        policy = funds_policy_set(
            contract=contract,
            action=data["action"],
            threshold_days=data["threshold_days"],
            actor=_actor(request),
        )
        return Response(FundsPolicySerializer(policy).data, status=status.HTTP_200_OK)

    def scope_contracts(self, contracts: QuerySet[Contract]) -> QuerySet[Contract]:
        """The lessee's own contracts (operators: all); another's answers 404."""
        if self.caller.is_operator:
            return contracts
        return contracts.filter(lessee_id=self.caller.organization_id)

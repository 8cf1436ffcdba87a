"""Views of budgets and usage alerts: the caller's organization's own, for its members.

Budgets and alert rules belong to one organization and only it sees them (operators use the
admin); another organization's answers 404. Writes need a write key. A budget answers with its
running month's spend as last evaluated (`evaluated_at`): creating or changing a budget
evaluates it at once, usage and invoices trigger evaluations, beat catches up every 15 minutes.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api.mixins import OrganizationScopedMixin
from accounts.errors import Forbidden
from accounts.models import Organization
from billing.api.budgets.filters import BudgetFilter, UsageAlertFilter, UsageAlertRuleFilter
from billing.api.budgets.serializers import (
    BudgetCreateSerializer,
    BudgetSerializer,
    BudgetUpdateSerializer,
    UsageAlertRuleCreateSerializer,
    UsageAlertRuleSerializer,
    UsageAlertRuleUpdateSerializer,
    UsageAlertSerializer,
)
from billing.models import Budget, BudgetCrossing, BudgetMonth, UsageAlert, UsageAlertRule
from billing.selectors.spend import month_start
from billing.services.budgets import BudgetChanges, budget_create, budget_delete, budget_update
from billing.services.usage_alerts import (
    RuleChanges,
    usage_alert_rule_create,
    usage_alert_rule_delete,
    usage_alert_rule_update,
)
from contracts.models import Contract
from core.api.serializers import read_input
from core.errors import NotFound


class OwnOrganizationMixin(OrganizationScopedMixin):
    """Rows of the caller's own organization only (operators included: no view of others')."""

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(**{self.tenant_fields[0]: self.caller.organization_id})

    def own_organization(self) -> Organization:
        """The organization a write acts for."""
        organization = self.caller.organization
        if organization is None:
            raise Forbidden("Act for an organization.", code="no_organization")
        return organization


def _contract(contract_id: int | None) -> Contract | None:
    """The contract a body names (the service checks it is the caller's: 404 otherwise)."""
    if contract_id is None:
        return None
    contract = Contract.objects.filter(pk=contract_id).first()
    if contract is None:
        raise NotFound("No such contract.", code="contract_not_found", detail={"field": "contract"})
    return contract


class BudgetViewSet(
    OwnOrganizationMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Budget],
):
    """GET/POST /api/v1/budgets/, GET/PATCH/DELETE /api/v1/budgets/{id}/."""

    queryset = Budget.objects.select_related("contract")
    serializer_class = BudgetSerializer
    filterset_class = BudgetFilter
    lookup_value_regex = r"\d+"
    ordering_fields = ["created_at", "id", "amount"]
    ordering = ["id"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Budget]:
        month = month_start(timezone.now())
        return (
            super()
            .get_queryset()
            .prefetch_related(
                Prefetch(
                    "months",
                    queryset=BudgetMonth.objects.filter(month=month),
                    to_attr="running_month",
                ),
                Prefetch(
                    "crossings",
                    queryset=BudgetCrossing.objects.filter(month=month).order_by("threshold_pct"),
                    to_attr="running_crossings",
                ),
            )
        )

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "month": month_start(timezone.now())}

    def _answer(self, budget: Budget, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=budget.pk)
        return Response(self.get_serializer(fresh).data, status=code)

    @extend_schema(request=BudgetCreateSerializer, responses={201: BudgetSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Create a budget; its running month is evaluated at once."""
        organization = self.own_organization()
        data = read_input(BudgetCreateSerializer, request.data)
        data["contract"] = _contract(data.get("contract"))
        budget = budget_create(organization=organization, **data)
        return self._answer(budget, status.HTTP_201_CREATED)

    @extend_schema(request=BudgetUpdateSerializer, responses=BudgetSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Change the name, amount, thresholds, action, or (de)activate; evaluated again."""
        budget = self.get_object()
        body = read_input(BudgetUpdateSerializer, request.data)
        budget = budget_update(budget=budget, changes=BudgetChanges(**body))
        return self._answer(budget)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Remove the budget with its months and crossings."""
        budget_delete(budget=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class UsageAlertRuleViewSet(
    OwnOrganizationMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[UsageAlertRule],
):
    """GET/POST /api/v1/usage-alert-rules/, GET/PATCH/DELETE /api/v1/usage-alert-rules/{id}/."""

    queryset = UsageAlertRule.objects.select_related("contract")
    serializer_class = UsageAlertRuleSerializer
    filterset_class = UsageAlertRuleFilter
    lookup_value_regex = r"\d+"
    ordering_fields = ["created_at", "id"]
    ordering = ["id"]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    @extend_schema(
        request=UsageAlertRuleCreateSerializer, responses={201: UsageAlertRuleSerializer}
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Create a rule over one token-SLA contract of the organization, or all of them."""
        organization = self.own_organization()
        data = read_input(UsageAlertRuleCreateSerializer, request.data)
        data["contract"] = _contract(data.get("contract"))
        rule = usage_alert_rule_create(organization=organization, **data)
        return Response(UsageAlertRuleSerializer(rule).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=UsageAlertRuleUpdateSerializer, responses=UsageAlertRuleSerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Change the hours, the threshold (null empties it) or whether the rule is active."""
        rule = self.get_object()
        data = read_input(UsageAlertRuleUpdateSerializer, request.data)
        clear = "threshold" in data and data["threshold"] is None
        changes = RuleChanges(
            hours=data.get("hours"),
            threshold=data.get("threshold"),
            clear_threshold=clear,
            active=data.get("active"),
        )
        rule = usage_alert_rule_update(rule=rule, changes=changes)
        return Response(UsageAlertRuleSerializer(self.get_queryset().get(pk=rule.pk)).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Remove the rule with its alerts."""
        usage_alert_rule_delete(rule=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class UsageAlertViewSet(
    OwnOrganizationMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[UsageAlert],
):
    """GET /api/v1/usage-alerts/ — alerts fired by the organization's rules, newest first."""

    queryset = UsageAlert.objects.select_related("rule", "contract")
    serializer_class = UsageAlertSerializer
    filterset_class = UsageAlertFilter
    tenant_fields = ("rule__organization",)
    lookup_value_regex = r"\d+"
    ordering_fields = ["fired_at", "first_hour", "id"]
    ordering = ["-fired_at", "-id"]

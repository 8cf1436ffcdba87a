"""Serializers of budgets (with the running month's spend, percent and state) and of usage alert
rules and their alerts. Input serializers check shape only; billing.rules and the services
answer the rules with their own codes (invalid_thresholds, too_many_thresholds, …)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from billing.models import (
    Budget,
    BudgetAction,
    BudgetCrossing,
    UsageAlert,
    UsageAlertKind,
    UsageAlertRule,
)
from billing.rules import MAX_THRESHOLD_PCT, MAX_THRESHOLDS
from billing.services.budgets import budget_state, percent_of
from core.api.fields import CurrencyField, MinorUnitMixin
from core.api.serializers import StrictInputSerializer
from core.fields import AMOUNT_DIGITS, AMOUNT_PLACES
from core.money import round_money

ID_MAX = 2**63 - 1


@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "integer", "minimum": 1, "maximum": MAX_THRESHOLD_PCT},
        "maxItems": MAX_THRESHOLDS,
        "uniqueItems": True,
        "description": "Percents of the amount; 100 is added if missing. Default [50, 80, 100].",
    }
)
class ThresholdsField(serializers.Field):
    """A list of percents, passed on as sent: billing.rules.budget_thresholds answers each bad
    list with its own code."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return list(value)


class BudgetCrossingSerializer(MinorUnitMixin, serializers.ModelSerializer[BudgetCrossing]):
    """A threshold the month's spend crossed, when, and the sentence sent with it."""

    money_fields = ("spend", "amount")

    class Meta:
        model = BudgetCrossing
        fields = ["threshold_pct", "crossed_at", "spend", "amount", "currency", "explanation"]
        read_only_fields = fields


class BudgetSerializer(MinorUnitMixin, serializers.ModelSerializer[Budget]):
    """A budget and its running month: spend, percent of the amount, state and crossings."""

    money_fields = ("amount",)

    scope = serializers.CharField(read_only=True, help_text="organization, contract or tag.")
    contract_number = serializers.CharField(
        source="contract.number", read_only=True, allow_null=True, default=None
    )
    thresholds = ThresholdsField(read_only=True)
    month = serializers.SerializerMethodField(help_text="The running UTC month, YYYY-MM.")
    spend = serializers.SerializerMethodField(help_text="At the currency's minor unit.")
    percent = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField(
        help_text="ok, warning (a threshold under 100 % crossed) or exhausted (100 % reached)."
    )
    evaluated_at = serializers.SerializerMethodField()
    crossings = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = [
            "id",
            "name",
            "scope",
            "contract",
            "contract_number",
            "tag_key",
            "tag_value",
            "amount",
            "currency",
            "thresholds",
            "action",
            "active",
            "month",
            "spend",
            "percent",
            "state",
            "evaluated_at",
            "crossings",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def _spend(self, budget: Budget) -> Decimal | None:
        months = getattr(budget, "running_month", [])
        return months[0].spend if months else None

    def get_month(self, budget: Budget) -> str:
        return f"{self.context['month']:%Y-%m}"

    def get_spend(self, budget: Budget) -> str:
        return str(round_money(self._spend(budget) or Decimal(0), budget.currency))

    def get_percent(self, budget: Budget) -> str:
        return str(percent_of(self._spend(budget) or Decimal(0), budget.amount))

    def get_state(self, budget: Budget) -> str:
        return budget_state(budget, self._spend(budget) or Decimal(0))

    def get_evaluated_at(self, budget: Budget) -> Any:
        months = getattr(budget, "running_month", [])
        return (
            serializers.DateTimeField().to_representation(months[0].evaluated_at)
            if months
            else None
        )

    @extend_schema_field(BudgetCrossingSerializer(many=True))
    def get_crossings(self, budget: Budget) -> Any:
        return BudgetCrossingSerializer(getattr(budget, "running_crossings", []), many=True).data


class BudgetCreateSerializer(StrictInputSerializer):
    """A new budget: organization-wide, for one contract, or for one cost tag (key and value,
    core.tags rules: its share of the invoices as the cost report splits them)."""

    name = serializers.CharField(max_length=100)
    amount = serializers.DecimalField(max_digits=AMOUNT_DIGITS, decimal_places=AMOUNT_PLACES)
    currency = CurrencyField()
    thresholds = ThresholdsField(required=False, allow_null=True)
    action = serializers.ChoiceField(choices=BudgetAction.choices)
    contract = serializers.IntegerField(
        min_value=1, max_value=ID_MAX, required=False, allow_null=True
    )
    tag_key = serializers.CharField(
        max_length=64, required=False, allow_null=True, trim_whitespace=False
    )
    tag_value = serializers.CharField(
        max_length=200, required=False, allow_null=True, trim_whitespace=False
    )


class BudgetUpdateSerializer(StrictInputSerializer):
    """Changes to a budget; its scope and currency stay (create another budget instead)."""

    name = serializers.CharField(max_length=100, required=False)
    amount = serializers.DecimalField(
        max_digits=AMOUNT_DIGITS, decimal_places=AMOUNT_PLACES, required=False
    )
    thresholds = ThresholdsField(required=False)
    action = serializers.ChoiceField(choices=BudgetAction.choices, required=False)
    active = serializers.BooleanField(required=False)


# ---------------------------------------------------------------- usage alerts


class UsageAlertRuleSerializer(serializers.ModelSerializer[UsageAlertRule]):
    """A rule: what it watches, over how many consecutive hours, against which threshold."""

    contract_number = serializers.CharField(
        source="contract.number", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = UsageAlertRule
        fields = [
            "id",
            "kind",
            "contract",
            "contract_number",
            "hours",
            "threshold",
            "active",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


THRESHOLD_HELP = (
    "ttft_p95_over_slo: milliseconds (empty: the contract's SLO); error_rate_over: percent "
    "(required); throughput_under_commitment: percent of the committed rate (empty: 100)."
)


class UsageAlertRuleCreateSerializer(StrictInputSerializer):
    """A new rule over one token-SLA contract of the organization, or all of them."""

    kind = serializers.ChoiceField(choices=UsageAlertKind.choices)
    contract = serializers.IntegerField(
        min_value=1, max_value=ID_MAX, required=False, allow_null=True
    )
    hours = serializers.IntegerField(required=False, default=1, min_value=-32768, max_value=32767)
    threshold = serializers.DecimalField(
        max_digits=12, decimal_places=3, required=False, allow_null=True, help_text=THRESHOLD_HELP
    )


class UsageAlertRuleUpdateSerializer(StrictInputSerializer):
    """Changes to a rule (its kind and contract stay); threshold null empties it."""

    hours = serializers.IntegerField(required=False, min_value=-32768, max_value=32767)
    threshold = serializers.DecimalField(
        max_digits=12, decimal_places=3, required=False, allow_null=True, help_text=THRESHOLD_HELP
    )
    active = serializers.BooleanField(required=False)


class UsageAlertSerializer(serializers.ModelSerializer[UsageAlert]):
    """One firing: the run of breaching hours, the limit, each hour's value and the sentence."""

    kind = serializers.CharField(source="rule.kind", read_only=True)
    contract_number = serializers.CharField(source="contract.number", read_only=True)

    class Meta:
        model = UsageAlert
        fields = [
            "id",
            "rule",
            "kind",
            "contract",
            "contract_number",
            "first_hour",
            "last_hour",
            "fired_at",
            "limit",
            "values",
            "explanation",
        ]
        read_only_fields = fields

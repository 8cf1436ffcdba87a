"""Filters of budgets, usage alert rules and usage alerts."""

from __future__ import annotations

import django_filters

from billing.models import Budget, BudgetAction, UsageAlert, UsageAlertKind, UsageAlertRule
from core.api.filters import IsoDateTimeFilter


class BudgetFilter(django_filters.FilterSet):
    """Filter budgets by action, whether active, contract, currency and cost tag key."""

    action = django_filters.ChoiceFilter(choices=BudgetAction.choices)
    contract = django_filters.NumberFilter(field_name="contract_id")
    currency = django_filters.CharFilter(lookup_expr="iexact")
    tag_key = django_filters.CharFilter()

    class Meta:
        model = Budget
        fields = ["action", "active", "contract", "currency", "tag_key"]


class UsageAlertRuleFilter(django_filters.FilterSet):
    """Filter rules by kind, whether active and contract."""

    kind = django_filters.ChoiceFilter(choices=UsageAlertKind.choices)
    contract = django_filters.NumberFilter(field_name="contract_id")

    class Meta:
        model = UsageAlertRule
        fields = ["kind", "active", "contract"]


class UsageAlertFilter(django_filters.FilterSet):
    """Filter alerts by rule, kind, contract and a [start, end) window of firing times."""

    rule = django_filters.NumberFilter(field_name="rule_id")
    kind = django_filters.ChoiceFilter(field_name="rule__kind", choices=UsageAlertKind.choices)
    contract = django_filters.NumberFilter(field_name="contract_id")
    start = IsoDateTimeFilter(field_name="fired_at", lookup_expr="gte")
    end = IsoDateTimeFilter(field_name="fired_at", lookup_expr="lt")

    class Meta:
        model = UsageAlert
        fields = ["rule", "kind", "contract"]

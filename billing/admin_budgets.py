"""Budgets and usage alert rules in the admin: operators create, change and remove them through
the services (same rules and wording as the API); each budget shows its months' spend and the
thresholds crossed, each rule the alerts it fired. Months, crossings and alerts are read-only."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone

from billing.models import Budget, BudgetCrossing, BudgetMonth, UsageAlert, UsageAlertRule
from billing.rules import (
    budget_errors,
    budget_scope_errors,
    budget_thresholds,
    usage_alert_rule_errors,
)
from billing.selectors.spend import month_start
from billing.services.budgets import (
    BudgetChanges,
    budget_create,
    budget_delete,
    budget_state,
    budget_update,
    percent_of,
)
from billing.services.usage_alerts import (
    RuleChanges,
    usage_alert_rule_create,
    usage_alert_rule_delete,
    usage_alert_rule_update,
)
from core.admin import ServiceAdminMixin, add_field_errors


class ReadOnlyInlineMixin:
    """Rows written by evaluations only."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class BudgetMonthInline(ReadOnlyInlineMixin, admin.TabularInline[BudgetMonth, Budget]):
    """The spend of each month evaluated."""

    model = BudgetMonth
    fields = readonly_fields = ("month", "spend", "evaluated_at")


class BudgetCrossingInline(ReadOnlyInlineMixin, admin.TabularInline[BudgetCrossing, Budget]):
    """Each threshold crossed, once per month, with its sentence."""

    model = BudgetCrossing
    fields = readonly_fields = ("month", "threshold_pct", "spend", "crossed_at", "explanation")


class BudgetForm(forms.ModelForm[Budget]):
    """A budget, checked with billing.rules (the API's wording) before the service saves it."""

    class Meta:
        model = Budget
        fields = [
            "organization",
            "name",
            "contract",
            "tag_key",
            "tag_value",
            "amount",
            "currency",
            "thresholds",
            "action",
            "active",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.instance.pk is None:
            for field in ("tag_key", "tag_value"):
                data[field] = data.get(field) or None  # an empty box is no tag
            add_field_errors(
                self,
                budget_scope_errors(
                    has_contract=data.get("contract") is not None,
                    tag_key=data["tag_key"],
                    tag_value=data["tag_value"],
                ),
            )
        if data.get("currency"):
            data["currency"] = data["currency"].strip().upper()
        currency = str(data.get("currency") or self.instance.currency or "")
        if data.get("amount") is not None and data.get("action"):
            add_field_errors(
                self,
                budget_errors(
                    name=data.get("name", ""),
                    amount=data["amount"],
                    currency=currency,
                    action=data["action"],
                ),
            )
        if data.get("thresholds") is not None:
            thresholds, errors = budget_thresholds(list(data["thresholds"]))
            if errors:
                add_field_errors(self, errors)
            else:
                data["thresholds"] = thresholds
        return data


@admin.register(Budget)
class BudgetAdmin(ServiceAdminMixin[Budget]):
    """Monthly budgets of organizations: spend of the running month, percent and state."""

    form = BudgetForm
    inlines = [BudgetCrossingInline, BudgetMonthInline]
    list_display = [
        "id",
        "name",
        "organization",
        "scope",
        "amount",
        "currency",
        "action",
        "active",
        "running_spend",
        "running_percent",
        "running_state",
    ]
    list_filter = ["action", "active", "currency"]
    list_select_related = ["organization", "contract"]
    search_fields = [
        "name",
        "organization__name",
        "organization__slug",
        "contract__number",
        "tag_key",
        "tag_value",
    ]
    raw_id_fields = ["contract"]

    def get_readonly_fields(self, request: HttpRequest, obj: Budget | None = None) -> list[str]:
        if obj is None:
            return []
        return ["organization", "contract", "tag_key", "tag_value", "currency"]

    def _spend(self, budget: Budget) -> Decimal:
        month = budget.months.filter(month=month_start(timezone.now())).first()
        return month.spend if month is not None else Decimal(0)

    @admin.display(description="Spend this month")
    def running_spend(self, budget: Budget) -> Decimal:
        """The running month's spend as last evaluated."""
        return self._spend(budget)

    @admin.display(description="%")
    def running_percent(self, budget: Budget) -> Decimal:
        """The running month's spend as a percent of the amount."""
        return percent_of(self._spend(budget), budget.amount)

    @admin.display(description="State")
    def running_state(self, budget: Budget) -> str:
        """ok, warning or exhausted."""
        return budget_state(budget, self._spend(budget))

    def save_model(self, request: HttpRequest, obj: Budget, form: Any, change: bool) -> None:
        """Create or change the budget through the service (it evaluates the month at once)."""
        data = form.cleaned_data
        if change:
            saved = budget_update(
                budget=obj,
                changes=BudgetChanges(
                    name=data["name"],
                    amount=data["amount"],
                    thresholds=list(data["thresholds"]),
                    action=data["action"],
                    active=data["active"],
                ),
            )
        else:
            saved = budget_create(
                organization=data["organization"],
                name=data["name"],
                amount=data["amount"],
                currency=data["currency"],
                action=data["action"],
                thresholds=list(data["thresholds"]),
                contract=data.get("contract"),
                tag_key=data.get("tag_key"),
                tag_value=data.get("tag_value"),
            )
            if not data["active"]:
                saved = budget_update(budget=saved, changes=BudgetChanges(active=False))
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: Budget) -> None:
        budget_delete(budget=obj)


class UsageAlertInline(ReadOnlyInlineMixin, admin.TabularInline[UsageAlert, UsageAlertRule]):
    """The alerts a rule fired, newest first."""

    model = UsageAlert
    fields = readonly_fields = ("contract", "first_hour", "last_hour", "fired_at", "explanation")


class UsageAlertRuleForm(forms.ModelForm[UsageAlertRule]):
    """A usage alert rule, checked with billing.rules before the service saves it."""

    class Meta:
        model = UsageAlertRule
        fields = ["organization", "contract", "kind", "hours", "threshold", "active"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind") or self.instance.kind
        if kind and data.get("hours") is not None:
            errors = usage_alert_rule_errors(
                kind=kind, hours=data["hours"], threshold=data.get("threshold")
            )
            add_field_errors(self, errors)
        return data


@admin.register(UsageAlertRule)
class UsageAlertRuleAdmin(ServiceAdminMixin[UsageAlertRule]):
    """Usage alert rules of organizations over their token-SLA contracts' hourly rollups."""

    form = UsageAlertRuleForm
    inlines = [UsageAlertInline]
    list_display = ["id", "organization", "kind", "contract", "hours", "threshold", "active"]
    list_filter = ["kind", "active"]
    list_select_related = ["organization", "contract"]
    search_fields = ["organization__name", "organization__slug", "contract__number"]
    raw_id_fields = ["contract"]

    def get_readonly_fields(
        self, request: HttpRequest, obj: UsageAlertRule | None = None
    ) -> list[str]:
        return [] if obj is None else ["organization", "contract", "kind"]

    def save_model(
        self, request: HttpRequest, obj: UsageAlertRule, form: Any, change: bool
    ) -> None:
        """Create or change the rule through the service."""
        data = form.cleaned_data
        if change:
            saved = usage_alert_rule_update(
                rule=obj,
                changes=RuleChanges(
                    hours=data["hours"],
                    threshold=data.get("threshold"),
                    clear_threshold=data.get("threshold") is None,
                    active=data["active"],
                ),
            )
        else:
            saved = usage_alert_rule_create(
                organization=data["organization"],
                kind=data["kind"],
                hours=data["hours"],
                threshold=data.get("threshold"),
                contract=data.get("contract"),
            )
            if not data["active"]:
                saved = usage_alert_rule_update(rule=saved, changes=RuleChanges(active=False))
        obj.pk = saved.pk

    def delete_model(self, request: HttpRequest, obj: UsageAlertRule) -> None:
        usage_alert_rule_delete(rule=obj)


@admin.register(UsageAlert)
class UsageAlertAdmin(admin.ModelAdmin[UsageAlert]):
    """Every alert fired: the run of breaching hours and its sentence (read-only)."""

    list_display = ["id", "rule", "contract", "first_hour", "last_hour", "fired_at"]
    list_filter = ["rule__kind"]
    list_select_related = ["rule", "contract"]
    date_hierarchy = "fired_at"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

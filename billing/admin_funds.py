"""Prepaid balances in the admin: operators grant promotional credit and record payments that
arrived outside Stripe (both through the services, posted at once, vouched for by the operator);
grants show what is left on them, customers their burn-down; contracts' funds policies are set
through `funds_policy_set`. Grants and top-ups are never edited or deleted (the database refuses
too); expiry takes back what a grant has left.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from billing.admin import ReadOnlyAdmin
from billing.models import (
    CreditGrant,
    FundsAlert,
    FundsPolicy,
    GrantKind,
    LeaseDeposit,
    TopUp,
    TopUpMethod,
)
from billing.selectors.funds import burn_down, grants_with_balances
from billing.services.funds_policy import funds_policy_set
from billing.services.grants import credit_grant_create
from billing.services.top_ups import top_up_record
from core.admin import ServiceAdminMixin, add_service_error
from core.errors import ApplicationError
from core.money import money_amount_check


def _remaining(grant: CreditGrant) -> str:
    """From the changelist's annotation (grants_with_balances): no query a row."""
    balance = getattr(grant, "subledger_balance", None)
    return f"{-balance if balance is not None else 0} {grant.currency}"


class CreditGrantForm(forms.ModelForm[CreditGrant]):
    """A promotional grant: who, how much, for what, in which order and until when."""

    class Meta:
        model = CreditGrant
        fields = [
            "customer",
            "currency",
            "amount",
            "priority",
            "applies_to",
            "expires_at",
            "reason",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("currency"):
            data["currency"] = data["currency"].strip().upper()
        if data.get("amount") is not None and data.get("currency"):
            try:
                money_amount_check(
                    data["amount"], data["currency"], code="invalid_grant_amount", what="A grant"
                )
            except ApplicationError as error:
                add_service_error(self, error)
        return data


@admin.register(CreditGrant)
class CreditGrantAdmin(ServiceAdminMixin[CreditGrant]):
    """Grants on customers' prepaid balances; operators add promotional credit here."""

    form = CreditGrantForm
    list_display = [
        "id",
        "customer",
        "kind",
        "amount",
        "currency",
        "remaining",
        "priority",
        "applies_to",
        "expires_at",
        "expired_amount",
        "vouched_by",
    ]
    list_filter = ["kind", "applies_to", "currency"]
    list_select_related = ["customer"]
    search_fields = ["customer__slug", "customer__name", "reason", "vouched_by"]
    readonly_fields = ["remaining", "burn_down"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[CreditGrant]:
        return grants_with_balances(super().get_queryset(request))

    @admin.display(description="Remaining")
    def remaining(self, grant: CreditGrant) -> str:
        return _remaining(grant) if grant.pk else "-"

    @admin.display(description="Burn-down")
    def burn_down(self, grant: CreditGrant) -> str:
        if not grant.pk:
            return "-"
        return burn_down(
            customer_id=grant.customer_id, currency=grant.currency, now=timezone.now()
        ).explanation

    def save_model(self, request: HttpRequest, obj: CreditGrant, form: Any, change: bool) -> None:
        """Grant promotional credit through the service: posted at once, vouched for by you."""
        data = form.cleaned_data
        actor = self.actor(request)
        saved = credit_grant_create(
            customer=data["customer"],
            currency=data["currency"],
            amount=data["amount"],
            kind=GrantKind.PROMOTIONAL,
            priority=data.get("priority"),
            applies_to=data["applies_to"],
            expires_at=data.get("expires_at"),
            reason=data["reason"],
            vouched_by=f"operator {actor}",
            actor=actor,
        )
        obj.pk = saved.pk


class TopUpForm(forms.ModelForm[TopUp]):
    """A payment received outside Stripe (a bank transfer): who paid, how much, its reference."""

    class Meta:
        model = TopUp
        fields = ["customer", "currency", "amount", "reference"]


@admin.register(TopUp)
class TopUpAdmin(ServiceAdminMixin[TopUp]):
    """Top-ups; operators record payments received outside Stripe here."""

    form = TopUpForm
    list_display = [
        "id",
        "customer",
        "amount",
        "currency",
        "method",
        "status",
        "reference",
        "vouched_by",
        "requested_at",
        "settled_at",
        "grant",
    ]
    list_filter = ["method", "status", "currency"]
    list_select_related = ["customer", "grant"]
    search_fields = ["customer__slug", "reference", "stripe_payment_intent_id"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: TopUp, form: Any, change: bool) -> None:
        """Record the payment through the service; it is on the balance at once."""
        data = form.cleaned_data
        saved = top_up_record(
            customer=data["customer"],
            currency=data["currency"],
            amount=data["amount"],
            reference=data.get("reference") or "",
            actor=self.actor(request),
        )
        obj.pk = saved.pk
        obj.method = TopUpMethod.RECORDED


class FundsPolicyForm(forms.ModelForm[FundsPolicy]):
    class Meta:
        model = FundsPolicy
        fields = ["contract", "action", "threshold_days"]


@admin.register(FundsPolicy)
class FundsPolicyAdmin(ServiceAdminMixin[FundsPolicy]):
    """Per contract: warn, stop new leases, pause interruptible leases, or nothing."""

    form = FundsPolicyForm
    list_display = [
        "contract",
        "action",
        "threshold_days",
        "days_left",
        "triggered_at",
        "evaluated_at",
        "set_by",
    ]
    list_filter = ["action"]
    list_select_related = ["contract"]
    search_fields = ["contract__number"]
    readonly_fields = ["days_left", "triggered_at", "evaluated_at", "set_by"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: FundsPolicy, form: Any, change: bool) -> None:
        data = form.cleaned_data
        saved = funds_policy_set(
            contract=data["contract"],
            action=data["action"],
            threshold_days=data["threshold_days"],
            actor=self.actor(request),
        )
        obj.pk = saved.pk


@admin.register(FundsAlert)
class FundsAlertAdmin(ReadOnlyAdmin):
    """Each day a funds policy fired: the projection and what was done."""

    list_display = [
        "policy",
        "evaluated_on",
        "balance",
        "currency",
        "daily_burn",
        "days_left",
        "runs_out_at",
        "action",
        "leases_paused",
    ]
    list_filter = ["action", "currency"]
    list_select_related = ["policy__contract"]


@admin.register(LeaseDeposit)
class LeaseDepositAdmin(ReadOnlyAdmin):
    """Deposits held per lease (taken from the paid balance when the lease is made, released
    when it ends less what its contract's overdue invoices owe); never edited here."""

    list_display = [
        "lease",
        "contract",
        "customer",
        "amount",
        "currency",
        "status",
        "held_at",
        "released_at",
        "returned_amount",
        "withheld_amount",
    ]
    list_filter = ["status", "currency"]
    list_select_related = ["contract", "customer", "lease"]
    search_fields = ["contract__number", "customer__name"]

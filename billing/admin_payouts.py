"""Commission and payouts in the admin: operators set commission rates and payout destinations
(through the services, as the operator who vouches for them), read statements and payouts, and
move payouts on — make one from a statement, submit it, confirm an exported one as paid, or mark
one failed. Statements, charges and payouts are never edited by hand."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from billing.admin import ReadOnlyAdmin, ReadOnlyMixin
from billing.models import (
    CommissionCharge,
    CommissionRate,
    Payout,
    PayoutEvent,
    PayoutProfile,
    ProviderStatement,
)
from billing.services.commission import commission_rate_set
from billing.services.payouts import (
    payout_confirm,
    payout_create,
    payout_fail,
    payout_profile_set,
    payout_submit,
)
from core.admin import ServiceAdminMixin


@admin.register(CommissionRate)
class CommissionRateAdmin(ServiceAdminMixin[CommissionRate]):
    """A provider's commission (no offer) or an offer's; applies to invoices issued afterwards."""

    fields = ["provider", "offer", "percent", "minimum", "minimum_currency", "reason"]
    list_display = ["provider", "offer", "percent", "minimum", "minimum_currency", "set_by"]
    list_select_related = ["provider", "offer"]
    search_fields = ["provider__slug", "provider__name", "offer__name"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [] if obj is None else ["provider", "offer"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # set the percent instead: charged invoices keep what they were charged

    def save_model(
        self, request: HttpRequest, obj: CommissionRate, form: Any, change: bool
    ) -> None:
        data = form.cleaned_data
        saved = commission_rate_set(
            provider=obj.provider,
            offer=obj.offer,
            percent=data["percent"],
            minimum=data.get("minimum"),
            minimum_currency=data.get("minimum_currency") or "",
            reason=data["reason"],
            actor=self.actor(request),
        )
        obj.pk = saved.pk


@admin.register(CommissionCharge)
class CommissionChargeAdmin(ReadOnlyAdmin):
    """Commission each invoice was charged at issue, and what credit notes gave back."""

    list_display = ["id", "invoice", "credit_note", "provider", "amount", "currency", "source"]
    list_filter = ["currency", "source"]
    list_select_related = ["invoice", "credit_note", "provider"]
    search_fields = ["invoice__number", "credit_note__number", "provider__slug"]


@admin.register(PayoutProfile)
class PayoutProfileAdmin(ServiceAdminMixin[PayoutProfile]):
    """Where a provider is paid: its Stripe connected account, or (empty) the export file."""

    fields = ["provider", "stripe_account_id"]
    list_display = ["provider", "stripe_account_id", "set_by", "updated_at"]
    list_select_related = ["provider"]
    search_fields = ["provider__slug", "provider__name", "stripe_account_id"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [] if obj is None else ["provider"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: PayoutProfile, form: Any, change: bool) -> None:
        saved = payout_profile_set(
            provider=obj.provider,
            stripe_account_id=form.cleaned_data.get("stripe_account_id") or "",
            actor=self.actor(request),
        )
        obj.pk = saved.pk


@admin.register(ProviderStatement)
class ProviderStatementAdmin(ReadOnlyMixin, ServiceAdminMixin[ProviderStatement]):
    """Monthly provider statements (made by the payout run); an operator may make the payout."""

    list_display = [
        "id",
        "provider",
        "period_start",
        "currency",
        "gross_billed",
        "commission",
        "resale_to_sellers",
        "net_earned",
        "payable",
        "payout",
        "pdf_link",
    ]
    list_filter = ["currency", "period_start"]
    list_select_related = ["provider", "payout"]
    search_fields = ["provider__slug", "provider__name"]
    actions = ["make_payouts"]

    @admin.display(description="PDF")
    def pdf_link(self, statement: ProviderStatement) -> str:
        return format_html('<a href="{}">PDF</a>', statement.pdf.url) if statement.pdf else "-"

    @admin.action(description="Make the payout of the selected statements (what is payable)")
    def make_payouts(self, request: HttpRequest, queryset: QuerySet[ProviderStatement]) -> None:
        actor = self.actor(request)
        done = self.service_calls(
            request,
            queryset.order_by("pk"),
            lambda statement: payout_create(statement=statement, actor=actor),
        )
        self.message_user(request, f"{done} payout(s) made.", messages.SUCCESS)


class PayoutEventInline(ReadOnlyMixin, admin.TabularInline[PayoutEvent, Payout]):
    model = PayoutEvent
    fields = readonly_fields = ("from_status", "to_status", "effective_at", "actor", "explanation")
    extra = 0


@admin.register(Payout)
class PayoutAdmin(ReadOnlyMixin, ServiceAdminMixin[Payout]):
    """Payouts and their history; operators submit them, confirm exported ones as paid once the
    bank transfer went out, or mark them failed (the money is payable again)."""

    list_display = [
        "id",
        "provider",
        "period_start",
        "currency",
        "amount",
        "method",
        "status",
        "stripe_transfer_id",
        "export_file",
    ]
    list_filter = ["status", "method", "currency"]
    list_select_related = ["provider"]
    search_fields = ["provider__slug", "provider__name", "stripe_transfer_id"]
    inlines = [PayoutEventInline]
    actions = ["submit", "confirm_paid", "mark_failed"]

    @admin.action(description="Submit (Stripe transfer or export file)")
    def submit(self, request: HttpRequest, queryset: QuerySet[Payout]) -> None:
        actor = self.actor(request)
        done = self.service_calls(
            request, queryset.order_by("pk"), lambda p: payout_submit(payout=p, actor=actor)
        )
        self.message_user(request, f"{done} payout(s) submitted.", messages.SUCCESS)

    @admin.action(description="Confirm paid (the bank transfer went out)")
    def confirm_paid(self, request: HttpRequest, queryset: QuerySet[Payout]) -> None:
        actor = self.actor(request)
        done = self.service_calls(
            request,
            queryset.order_by("pk"),
            lambda p: payout_confirm(
                payout=p, actor=actor, reason=f"Bank transfer confirmed by {actor}."
            ),
        )
        self.message_user(request, f"{done} payout(s) paid.", messages.SUCCESS)

    @admin.action(description="Mark failed (the money is payable again)")
    def mark_failed(self, request: HttpRequest, queryset: QuerySet[Payout]) -> None:
        actor = self.actor(request)
        done = self.service_calls(
            request,
            queryset.order_by("pk"),
            lambda p: payout_fail(payout=p, actor=actor, reason=f"Marked failed by {actor}."),
        )
        self.message_user(request, f"{done} payout(s) failed.", messages.SUCCESS)

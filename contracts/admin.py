"""Admin for contracts: clauses inline with per-kind validation, events timeline, history, actions.

Every change goes through contracts.services; the admin only collects input and shows results.
"""

from __future__ import annotations

from datetime import date
from functools import partial
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from simple_history.admin import SimpleHistoryAdmin

from accounts.admin import CustomerListFilter, ProviderListFilter
from contracts.admin_clauses import ClauseForm, ClauseFormBase, clause_fieldsets
from contracts.admin_index import index_chart_context
from contracts.choices import AcceptanceSubmitter, ContractStatus, EndReason, Party
from contracts.models import AcceptanceRun, Clause, Contract, ContractEvent
from contracts.schemas import validate_clause_set
from contracts.services import (
    AMENDABLE_FIELDS,
    acceptance_run_record,
    contract_activate,
    contract_amend,
    contract_create,
    contract_flag_insolvency,
    contract_request_exit,
    contract_termination_quote,
    contract_transition,
)
from core.admin import ServiceAdminMixin
from core.errors import ApplicationError


class ClauseFormSet(BaseInlineFormSet[Clause, Contract, ClauseFormBase]):
    """The clause set as a whole: each kind at most once."""

    def clean(self) -> None:
        super().clean()
        clauses = [
            {"kind": f.cleaned_data["kind"], **f.cleaned_data.get("params", {})}
            for f in self.forms
            if f.cleaned_data and f.cleaned_data.get("kind") and not f.cleaned_data.get("DELETE")
        ]
        if any(form.errors for form in self.forms):
            return  # each clause's own errors are shown on its inputs first
        try:
            validate_clause_set(clauses)
        except ApplicationError as error:
            raise ValidationError(error.message) from error


class ClauseInline(admin.StackedInline[Clause, Contract]):
    """The clauses: typed inputs per kind, generated from the schemas (contracts.admin_clauses)."""

    model = Clause
    form = ClauseForm
    fieldsets = clause_fieldsets()
    formset = ClauseFormSet  # type: ignore[assignment]  # stubs expect the base form type
    extra = 0

    class Media:
        js = ["contracts/clause_form.js"]


class ContractEventInline(admin.TabularInline[ContractEvent, Contract]):
    """The events timeline: read-only, oldest first."""

    model = ContractEvent
    extra = 0
    can_delete = False
    ordering = ["effective_at", "id"]
    fields = readonly_fields = (
        "effective_at",
        "kind",
        "explanation",
        "amount",
        "currency",
        "rate",
        "actor",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AcceptanceRunInline(admin.TabularInline[AcceptanceRun, Contract]):
    model = AcceptanceRun
    extra = 0
    can_delete = False
    fields = readonly_fields = (
        "ran_at",
        "metric",
        "measured_value",
        "quality_delta_pct",
        "status",
        "passed",
        "submitted_by_party",
        "submitted_by_organization",
        "claim_expires_at",
        "run_by",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AcceptanceForm(forms.Form):
    """Record an acceptance measurement."""

    metric = forms.ChoiceField(
        choices=[(m, m) for m in ("output_tokens_per_s", "bf16_tflops", "allreduce_busbw_gbps")]
    )
    measured_value = forms.DecimalField(max_digits=20, decimal_places=6, min_value=0)
    quality_delta_pct = forms.DecimalField(max_digits=9, decimal_places=4, required=False)
    ran_at = forms.DateTimeField(initial=timezone.now)


class NoticeForm(forms.Form):
    """Give notice to exit on a date, on behalf of a party."""

    party = forms.ChoiceField(choices=Party.choices)
    exit_date = forms.DateField(initial=date.today)
    confirmed = forms.BooleanField(required=False, widget=forms.HiddenInput)


class TerminateForm(forms.Form):
    """End a contract now (operator decision)."""

    reason = forms.CharField(max_length=200)
    confirmed = forms.BooleanField(required=False, widget=forms.HiddenInput)


@admin.register(Contract)
class ContractAdmin(ServiceAdminMixin[Contract], SimpleHistoryAdmin):
    list_display = [
        "number",
        "lessor",
        "lessee",
        "status",
        "pricing_basis",
        "leased_model_slug",
        "term_start",
        "term_end",
        "version",
    ]
    list_filter = [
        "status",
        ("lessor", ProviderListFilter),
        ("lessee", CustomerListFilter),
        "pricing_basis",
        "currency",
        "end_reason",
    ]
    search_fields = ["number", "lessor__name", "lessee__name", "leased_model_slug"]
    list_select_related = ["lessor", "lessee"]
    autocomplete_fields = ["lessor", "lessee"]
    inlines = [ClauseInline, AcceptanceRunInline, ContractEventInline]
    actions = ["activate_contracts", "flag_insolvency"]
    history_list_display = ["version", "status", "base_rate_per_gpu_hour"]
    change_form_template = "admin/contracts/contract/change_form.html"
    readonly_on_change = [
        "number",
        "lessor",
        "lessee",
        "term_start",
        "currency",
        "pricing_basis",
        "status",
        "end_reason",
        "ended_at",
        "billing_start",
        "exit_party",
        "exit_effective_at",
        "provider_insolvency_flagged",
        "version",
    ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        contract = Contract.objects.filter(pk=object_id).first() if object_id.isdigit() else None
        context = index_chart_context(contract) if contract is not None else {}
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), **context}
        )

    def locked_reason(self, obj: Contract) -> str | None:
        """An ended contract is kept as it ended; a live one changes only by amendment."""
        if obj.status == ContractStatus.ENDED:
            return "This contract has ended: it is kept as it was and cannot change."
        return None

    def delete_locked_reason(self, obj: Contract) -> str | None:
        """Only a draft may be deleted: a contract once in force ends, and its history stays."""
        if obj.status != ContractStatus.DRAFT:
            return (
                self.locked_reason(obj)
                or "A contract in force is never deleted: give notice or terminate it instead."
            )
        return None

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return ["number", "status", "version"]
        return self.readonly_on_change

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return [
                "end_reason",
                "ended_at",
                "billing_start",
                "exit_party",
                "exit_effective_at",
                "provider_insolvency_flagged",
            ]
        return []

    # Saving goes through the services: create or amend the contract, then set its clauses.
    def save_model(self, request: HttpRequest, obj: Contract, form: Any, change: bool) -> None:
        actor = self.actor(request)
        if not change:
            created = contract_create(
                lessor=obj.lessor,
                lessee=obj.lessee,
                term_start=obj.term_start,
                term_end=obj.term_end,
                currency=obj.currency,
                pricing_basis=obj.pricing_basis,
                base_rate_per_gpu_hour=obj.base_rate_per_gpu_hour,
                rate_per_million_input_tokens=obj.rate_per_million_input_tokens,
                rate_per_million_output_tokens=obj.rate_per_million_output_tokens,
                committed_gpus=obj.committed_gpus,
                committed_tokens_per_s=obj.committed_tokens_per_s,
                leased_model_slug=obj.leased_model_slug,
                reference_market_rate=obj.reference_market_rate,
                billing_anchor_day=obj.billing_anchor_day,
                actor=actor,
            )
            obj.pk, obj.number = created.pk, created.number
            return
        changes = {
            name: form.cleaned_data[name] for name in form.changed_data if name in AMENDABLE_FIELDS
        }
        if changes:
            contract_amend(contract=obj, changes=changes, actor=actor)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        # The change message reads these; rows are written by the service, not the formset.
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        if formset.model is not Clause or not formset.has_changed():
            return
        clauses = [
            {"kind": f.cleaned_data["kind"], **f.cleaned_data["params"]}
            for f in formset.forms
            if f.cleaned_data and not f.cleaned_data.get("DELETE")
        ]
        contract = Contract.objects.get(pk=form.instance.pk)
        contract_amend(contract=contract, changes={}, clauses=clauses, actor=self.actor(request))

    # Admin actions without `permissions` are offered to anyone who may merely view the list.
    @admin.action(description="Activate the selected draft contracts", permissions=["change"])
    def activate_contracts(self, request: HttpRequest, queryset: QuerySet[Contract]) -> None:
        for contract in queryset.order_by("pk"):
            done = self.service_call(
                request, partial(contract_activate, contract=contract, actor=self.actor(request))
            )
            if done is not None:
                self.message_user(request, f"{done.number} is now {done.status}.")

    @admin.action(
        description="Flag the provider as insolvent (lessee may exit without fee)",
        permissions=["change"],
    )
    def flag_insolvency(self, request: HttpRequest, queryset: QuerySet[Contract]) -> None:
        done = self.service_calls(
            request,
            queryset.order_by("pk"),
            lambda contract: contract_flag_insolvency(contract=contract, actor=self.actor(request)),
        )
        self.message_user(request, f"Flagged {done} contract(s).")

    # ------------------------------------------------------------ per-contract tools

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "<int:contract_id>/record-acceptance/",
                self.admin_site.admin_view(self.record_acceptance_view),
                name="contracts_contract_record_acceptance",
            ),
            path(
                "<int:contract_id>/give-notice/",
                self.admin_site.admin_view(self.give_notice_view),
                name="contracts_contract_give_notice",
            ),
            path(
                "<int:contract_id>/terminate/",
                self.admin_site.admin_view(self.terminate_view),
                name="contracts_contract_terminate",
            ),
        ]
        return own + super().get_urls()

    def _back(self, contract: Contract) -> HttpResponseRedirect:
        return HttpResponseRedirect(reverse("admin:contracts_contract_change", args=[contract.pk]))

    def _render(
        self, request: HttpRequest, contract: Contract, title: str, form: forms.Form, **extra: Any
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": contract,
            "title": f"{title}: {contract.number}",
            "form": form,
            **extra,
        }
        return TemplateResponse(request, "admin/contracts/contract/action_form.html", context)

    def _changeable(self, request: HttpRequest, contract_id: int) -> Contract:
        """The contract, if this admin user may change contracts (admin access alone is not)."""
        contract = get_object_or_404(Contract, pk=contract_id)
        if not self.has_change_permission(request, contract):
            raise PermissionDenied
        return contract

    def record_acceptance_view(self, request: HttpRequest, contract_id: int) -> HttpResponse:
        contract = self._changeable(request, contract_id)
        form = AcceptanceForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            result = self.service_call(
                request,
                lambda: acceptance_run_record(
                    contract=contract,
                    party=AcceptanceSubmitter.OPERATOR,
                    organization=None,
                    actor=self.actor(request),
                    run_by=str(request.user),
                    **form.cleaned_data,
                ),
            )
            if result is not None:
                self.message_user(request, result[1].explanation)
                return self._back(contract)
        return self._render(request, contract, "Record acceptance run", form)

    def give_notice_view(self, request: HttpRequest, contract_id: int) -> HttpResponse:
        contract = self._changeable(request, contract_id)
        form = NoticeForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            party, exit_date = form.cleaned_data["party"], form.cleaned_data["exit_date"]
            if not form.cleaned_data["confirmed"]:
                quote = self.service_call(
                    request,
                    lambda: contract_termination_quote(
                        contract=contract, party=party, exit_date=exit_date
                    ),
                )
                if quote is not None:
                    confirm = NoticeForm(
                        initial={"party": party, "exit_date": exit_date, "confirmed": True}
                    )
                    return self._render(request, contract, "Confirm notice", confirm, quote=quote)
            else:
                result = self.service_call(
                    request,
                    lambda: contract_request_exit(
                        contract=contract,
                        party=party,
                        exit_date=exit_date,
                        actor=self.actor(request),
                    ),
                )
                if result is not None:
                    self.message_user(request, result[1].explanation)
                    return self._back(contract)
        return self._render(request, contract, "Give notice", form)

    def terminate_view(self, request: HttpRequest, contract_id: int) -> HttpResponse:
        contract = self._changeable(request, contract_id)
        form = TerminateForm(request.POST or None)
        quote = None
        if contract.status != ContractStatus.ENDED and contract.term_end > timezone.now():
            quote = self.service_call(
                request,
                lambda: contract_termination_quote(
                    contract=contract, party=Party.LESSEE, exit_date=timezone.now().date()
                ),
            )
        if request.method == "POST" and form.is_valid() and form.cleaned_data["confirmed"]:
            done = self.service_call(
                request,
                lambda: contract_transition(
                    contract=contract,
                    to_status=ContractStatus.ENDED,
                    end_reason=EndReason.TERMINATED,
                    reason=form.cleaned_data["reason"],
                    actor=self.actor(request),
                ),
            )
            if done is not None:
                self.message_user(request, f"{done.number} terminated.")
                return self._back(contract)
        if request.method == "POST" and form.is_valid():
            form = TerminateForm(initial={"reason": form.cleaned_data["reason"], "confirmed": True})
        return self._render(request, contract, "Terminate", form, quote=quote, terminate=True)


@admin.register(ContractEvent)
class ContractEventAdmin(admin.ModelAdmin[ContractEvent]):
    list_display = ["contract", "kind", "effective_at", "amount", "currency", "rate", "actor"]
    list_filter = ["kind"]
    search_fields = ["contract__number", "explanation"]
    list_select_related = ["contract"]
    readonly_fields = [f.name for f in ContractEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

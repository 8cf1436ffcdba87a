"""Admin for acceptance runs: every run with who submitted it, its status and a claim's deadline,
and the one change made here — an operator's decision of a disputed claim, pass or fail with a
reason (`contracts.change_acceptancerun`). It goes through leasing.services.acceptance, so a
lease follows its contract when the decision starts billing.

Imported by leasing/admin.py (the contract's lease has to follow, which the contracts app cannot
reach).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from contracts.choices import AcceptanceRunStatus
from contracts.models import AcceptanceRun
from contracts.selectors import acceptance_run_attestation
from core.admin import ServiceAdminMixin
from leasing.services.acceptance import lease_acceptance_dispute_decide

DECIDE_PERMISSION = "contracts.change_acceptancerun"


class DecisionForm(forms.Form):
    """An operator's decision of a disputed claim: it then counts as an attempt."""

    verdict = forms.ChoiceField(
        choices=[
            ("pass", "Passed: it counts as a passing attempt (billing starts at the run)"),
            ("fail", "Failed: it counts as a failed attempt"),
        ],
        widget=forms.RadioSelect,
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), max_length=2000)


@admin.register(AcceptanceRun)
class AcceptanceRunAdmin(ServiceAdminMixin[AcceptanceRun]):
    """Acceptance runs, read-only; disputed claims link to the decision page."""

    list_display = [
        "id",
        "contract",
        "status",
        "submitted_by_party",
        "submitted_by_organization",
        "metric",
        "measured_value",
        "ran_at",
        "claim_expires_at",
        "passed",
        "decide_link",
    ]
    list_filter = ["status", "submitted_by_party", "metric"]
    search_fields = ["contract__number", "submitted_by_organization__name", "run_by"]
    list_select_related = ["contract", "submitted_by_organization"]
    readonly_fields = [field.name for field in AcceptanceRun._meta.fields]
    change_form_template = "admin/contracts/acceptancerun/change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # runs come from the parties (API) or the contract's "record acceptance"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # nothing is edited; the decision has its own page and permission

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Decision")
    def decide_link(self, run: AcceptanceRun) -> str:
        if run.status != AcceptanceRunStatus.DISPUTED:
            return ""
        url = reverse("admin:contracts_acceptancerun_decide", args=[run.pk])
        return format_html('<a href="{}">Decide</a>', url)

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "<int:run_id>/decide/",
                self.admin_site.admin_view(self.decide_view),
                name="contracts_acceptancerun_decide",
            )
        ]
        return own + super().get_urls()

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "can_decide": request.user.has_perm(DECIDE_PERMISSION)}
        return super().change_view(request, object_id, form_url, extra)

    def decide_view(self, request: HttpRequest, run_id: int) -> HttpResponse:
        """Pass or fail a disputed claim, with a reason (the lease follows its contract)."""
        if not request.user.has_perm(DECIDE_PERMISSION):
            raise PermissionDenied
        run = get_object_or_404(
            AcceptanceRun.objects.select_related(
                "contract__lessor", "contract__lessee", "submitted_by_organization"
            ),
            pk=run_id,
        )
        form = DecisionForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            result = self.service_call(
                request,
                lambda: lease_acceptance_dispute_decide(
                    run=run,
                    passed=form.cleaned_data["verdict"] == "pass",
                    reason=form.cleaned_data["reason"],
                    actor=self.actor(request),
                ),
            )
            if result is not None:
                decided, outcome = result
                self.message_user(request, f"Run {decided.pk} decided. {outcome.explanation}")
                return HttpResponseRedirect(
                    reverse("admin:contracts_acceptancerun_change", args=[decided.pk])
                )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": run,
            "title": f"Decide acceptance run {run.pk}",
            "disputed": run.status == AcceptanceRunStatus.DISPUTED,
            "attestation": acceptance_run_attestation(run),
            "form": form,
        }
        return TemplateResponse(request, "admin/contracts/acceptancerun/decide.html", context)

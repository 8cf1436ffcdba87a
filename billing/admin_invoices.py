"""Billing admin for invoices and credit notes: read-only documents with their lines, contract
events and status history, and the actions (finalize, void, credit note, send again) that
collect input and call billing.services; a domain error becomes an admin error message.

Imported by billing/admin.py.
"""

from __future__ import annotations

from decimal import Decimal
from functools import partial

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from accounts.admin import CustomerListFilter, ProviderListFilter
from billing.admin import ReadOnlyAdmin, ReadOnlyMixin
from billing.models import (
    CreditNote,
    Invoice,
    InvoiceEvent,
    InvoiceLine,
    InvoiceStatus,
)
from billing.rendering import CostCentres, invoice_html, invoice_pdf
from billing.selectors.attribution import grouping_parse, invoice_cost_groups
from billing.services.cycle import invoice_issue
from billing.services.delivery import credit_note_email, invoice_deliver, invoice_pdf_present
from billing.services.documents import credit_note_issue, invoice_mark_paid, invoice_void
from contracts.models import ContractEvent
from core.admin import ServiceAdminMixin, error_text
from core.errors import ApplicationError
from core.money import format_money


def _event_links(admin_site: admin.AdminSite, events: list[ContractEvent]) -> SafeString:
    """Each contract event's explanation, linked to its admin page (or its contract's)."""
    if not events:
        return format_html("{}", "-")
    event_admin = admin_site.is_registered(ContractEvent)

    def url(event: ContractEvent) -> str:
        """The event's admin page, or its contract's when events have no admin."""
        if event_admin:
            return reverse(f"{admin_site.name}:contracts_contractevent_change", args=[event.pk])
        return reverse(f"{admin_site.name}:contracts_contract_change", args=[event.contract_id])

    return format_html(
        "<ul style='margin:0;padding-left:1em'>{}</ul>",
        format_html_join(
            "", "<li><a href='{}'>{}</a></li>", ((url(e), e.explanation) for e in events)
        ),
    )


class InvoiceLineInline(ReadOnlyMixin, admin.TabularInline[InvoiceLine, Invoice]):
    """The invoice's lines as rating made them, with the contract events behind each."""

    model = InvoiceLine
    extra = 0
    can_delete = False
    ordering = ["position"]
    fields = readonly_fields = (
        "position",
        "kind",
        "description",
        "quantity",
        "unit",
        "unit_price",
        "amount",
        "taxable",
        "service_start",
        "service_end",
        "contract_events",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[InvoiceLine]:
        """Lines with their events fetched in one query for the whole invoice."""
        return super().get_queryset(request).prefetch_related("events")

    @admin.display(description="Contract events")
    def contract_events(self, line: InvoiceLine) -> SafeString:
        """The explanations of the events that priced this line, linked."""
        return _event_links(self.admin_site, list(line.events.all()))


class InvoiceEventInline(ReadOnlyMixin, admin.TabularInline[InvoiceEvent, Invoice]):
    """The invoice's status history: every move, when, by whom and why."""

    model = InvoiceEvent
    extra = 0
    can_delete = False
    ordering = ["effective_at", "id"]
    verbose_name = "status change"
    verbose_name_plural = "status history"
    fields = readonly_fields = ("effective_at", "from_status", "to_status", "actor", "explanation")


class VoidForm(forms.Form):
    """Why the selected invoices are voided (kept on each invoice)."""

    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}))


class PaymentForm(forms.Form):
    """A payment received outside Stripe (a bank transfer), recorded by an operator."""

    reference = forms.CharField(
        max_length=200, help_text="The bank's reference of the transfer, kept on the invoice."
    )


class CreditNoteForm(forms.Form):
    """A credit note against one invoice: an amount before tax and the reason."""

    amount = forms.DecimalField(
        max_digits=20, decimal_places=4, min_value=Decimal("0.0001"), help_text="Before tax."
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}))
    send_email = forms.BooleanField(
        required=False, initial=True, label="E-mail the credit note to the billing contacts"
    )


@admin.register(Invoice)
class InvoiceAdmin(ServiceAdminMixin[Invoice], ReadOnlyAdmin):
    """Invoices: read-only documents; the actions move them through billing.services."""

    # The issuer is a filter; amounts carry their currency; e-mail delivery is on the page.
    list_display = [
        "__str__",
        "contract_number",
        "customer",
        "period",
        "status",
        "total",
        "credited_total",
        "due_at",
        "documents",
    ]
    list_filter = [
        "status",
        "currency",
        ("issuer", ProviderListFilter),
        ("customer", CustomerListFilter),
        "period_start",
    ]
    search_fields = ["number", "contract__number"]
    list_select_related = ["contract", "issuer", "customer"]
    date_hierarchy = "period_start"
    inlines = [InvoiceLineInline, InvoiceEventInline]
    actions = ["finalize", "mark_paid", "void", "issue_credit_note", "send_again"]
    change_form_template = "admin/billing/invoice/change_form.html"
    fieldsets = [
        (
            None,
            {
                "fields": [
                    ("number", "status"),
                    "contract",
                    ("issuer", "customer"),
                    ("period_start", "period_end"),
                    ("issued_at", "due_at", "rated_at"),
                    "documents",
                ]
            },
        ),
        (
            "Amounts",
            {
                "fields": [
                    "currency",
                    ("subtotal", "taxable_amount"),
                    ("tax_rate_pct", "tax"),
                    ("total", "credited_total"),
                ]
            },
        ),
        (
            "Delivery and payment",
            {
                "fields": [
                    "pdf",
                    ("emailed_at", "emailed_to"),
                    ("stripe_invoice_id", "stripe_pushed_at"),
                    ("payment_failed_at", "paid_at"),
                    ("voided_at", "void_reason"),
                ]
            },
        ),
    ]
    readonly_fields = ["documents"]

    @admin.display(description="Period", ordering="period_start")
    def period(self, invoice: Invoice) -> str:
        """The billed month(s) as dates: "2026-11-01 → 2026-12-01"."""
        return f"{invoice.period_start:%Y-%m-%d} → {invoice.period_end:%Y-%m-%d}"

    @admin.display(description="Contract", ordering="contract__number")
    def contract_number(self, invoice: Invoice) -> str:
        """The contract the invoice bills."""
        return invoice.contract.number

    @admin.display(description="Documents")
    def documents(self, invoice: Invoice) -> SafeString:
        """Links to the invoice as PDF and as HTML."""
        return format_html(
            "<a href='{}'>PDF</a> | <a href='{}' target='_blank'>HTML</a>",
            reverse(f"{self.admin_site.name}:billing_invoice_pdf", args=[invoice.pk]),
            reverse(f"{self.admin_site.name}:billing_invoice_html", args=[invoice.pk]),
        )

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Who may run the invoice actions: users allowed to change invoices at all."""
        return request.user.has_perm("billing.change_invoice")

    def _action_form(
        self,
        request: HttpRequest,
        queryset: QuerySet[Invoice],
        *,
        action: str,
        title: str,
        form: forms.Form,
        submit: str,
    ) -> TemplateResponse:
        """The intermediate page of an action that needs input (it posts back to the action)."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "invoices": list(queryset.select_related("customer")),
            "form": form,
            "action": action,
            "submit": submit,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/billing/invoice/action_form.html", context)

    # ---------------------------------------------------------------- actions

    @admin.action(description="Finalize the selected drafts (number them)", permissions=["operate"])
    def finalize(self, request: HttpRequest, queryset: QuerySet[Invoice]) -> None:
        """Give each selected draft its number; issued ones are left as they are."""
        for invoice in queryset.order_by("pk"):
            if invoice.status != InvoiceStatus.DRAFT:
                self.message_user(
                    request, f"{invoice} is already {invoice.status}.", level=messages.WARNING
                )
                continue
            done = self.service_call(
                request,
                partial(invoice_issue, invoice=invoice, actor=self.actor(request)),
            )
            if done is not None:
                self.message_user(
                    request,
                    f"Finalized {done.number}; it is being delivered (PDF, e-mail, Stripe).",
                    level=messages.SUCCESS,
                )

    @admin.action(description="Record a payment received outside Stripe…", permissions=["operate"])
    def mark_paid(
        self, request: HttpRequest, queryset: QuerySet[Invoice]
    ) -> TemplateResponse | None:
        """Ask for the transfer's reference, then record each selected invoice paid with it (the
        ledger collects it; a deposit withheld against it comes back)."""
        form = PaymentForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return self._action_form(
                request,
                queryset,
                action="mark_paid",
                title="Record payments",
                form=form,
                submit="Record paid",
            )
        reference = form.cleaned_data["reference"].strip()
        for invoice in queryset.order_by("pk"):
            done = self.service_call(
                request,
                partial(
                    invoice_mark_paid,
                    invoice=invoice,
                    actor=self.actor(request),
                    reason=f"paid outside Stripe, reference {reference}",
                ),
            )
            if done is not None:
                self.message_user(
                    request, f"Recorded {done} paid ({reference}).", level=messages.SUCCESS
                )
        return None

    @admin.action(description="Void the selected invoices…", permissions=["operate"])
    def void(self, request: HttpRequest, queryset: QuerySet[Invoice]) -> TemplateResponse | None:
        """Ask for a reason, then void each selected invoice with it."""
        form = VoidForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return self._action_form(
                request,
                queryset,
                action="void",
                title="Void invoices",
                form=form,
                submit="Void",
            )
        for invoice in queryset.order_by("pk"):
            done = self.service_call(
                request,
                partial(
                    invoice_void,
                    invoice=invoice,
                    reason=form.cleaned_data["reason"],
                    actor=self.actor(request),
                ),
            )
            if done is not None:
                self.message_user(request, f"Voided {done}.", level=messages.SUCCESS)
        return None

    @admin.action(description="Issue a credit note…", permissions=["operate"])
    def issue_credit_note(
        self, request: HttpRequest, queryset: QuerySet[Invoice]
    ) -> TemplateResponse | None:
        """Ask for an amount and a reason, then credit the one selected invoice."""
        if queryset.count() != 1:
            self.message_user(
                request, "Select exactly one invoice to credit.", level=messages.ERROR
            )
            return None
        invoice = queryset.get()
        form = CreditNoteForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            note = self.service_call(
                request,
                lambda: credit_note_issue(
                    invoice=invoice,
                    amount=form.cleaned_data["amount"],
                    reason=form.cleaned_data["reason"],
                    actor=self.actor(request),
                ),
            )
            if note is not None:
                self.message_user(
                    request,
                    f"Issued credit note {note.number} for "
                    f"{format_money(note.total, note.currency)}.",
                    level=messages.SUCCESS,
                )
                if form.cleaned_data["send_email"]:
                    self._email_credit_note(request, note)
                return None
        remaining = invoice.total - invoice.credited_total
        return self._action_form(
            request,
            queryset,
            action="issue_credit_note",
            title=(
                f"Credit note for {invoice} "
                f"({format_money(remaining, invoice.currency)} left to credit)"
            ),
            form=form,
            submit="Issue credit note",
        )

    def _email_credit_note(self, request: HttpRequest, note: CreditNote) -> None:
        """Send a just-issued credit note; failing to send does not undo the note."""
        try:
            credit_note_email(note=note)
        except ApplicationError as error:
            self.message_user(request, f"Not e-mailed: {error_text(error)}", level=messages.WARNING)
        else:
            self.message_user(request, f"E-mailed {note.number}.", level=messages.SUCCESS)

    @admin.action(
        description="Send / send again (PDF by e-mail, Stripe if enabled)", permissions=["operate"]
    )
    def send_again(self, request: HttpRequest, queryset: QuerySet[Invoice]) -> None:
        """Run the delivery pipeline with resend: e-mail again, push to Stripe if not yet."""
        for invoice in queryset.order_by("pk"):
            # Not wrapped in a transaction: each delivery step commits on its own and the run
            # log must survive a failed step.
            result = invoice_deliver(invoice_id=invoice.pk, resend=True, actor=self.actor(request))
            if result["failures"]:
                for failure in result["failures"]:
                    self.message_user(
                        request,
                        f"{invoice}: {failure['message']} ({failure['code']})",
                        level=messages.ERROR,
                    )
            else:
                self.message_user(request, f"Sent {invoice}.", level=messages.SUCCESS)

    # ---------------------------------------------------------------- document views

    def get_urls(self) -> list[URLPattern]:
        """The PDF and HTML views of one invoice, before the default admin URLs."""
        own = [
            path(
                "<int:invoice_id>/pdf/",
                self.admin_site.admin_view(self.pdf_view),
                name="billing_invoice_pdf",
            ),
            path(
                "<int:invoice_id>/html/",
                self.admin_site.admin_view(self.html_view),
                name="billing_invoice_html",
            ),
        ]
        return own + super().get_urls()

    def _viewable(self, request: HttpRequest, invoice_id: int) -> Invoice:
        """The invoice, if this admin user may see it (else 403/404)."""
        invoice = get_object_or_404(
            Invoice.objects.select_related("contract", "issuer", "customer"), pk=invoice_id
        )
        if not self.has_view_permission(request, invoice):
            raise PermissionDenied
        return invoice

    def pdf_view(self, request: HttpRequest, invoice_id: int) -> HttpResponse:
        """The stored PDF (the document sent), or a fresh rendering when none is stored."""
        invoice = self._viewable(request, invoice_id)
        if invoice_pdf_present(invoice):
            with invoice.pdf.open("rb") as stored:
                content = stored.read()
        else:
            content = invoice_pdf(invoice)
        response = HttpResponse(content, content_type="application/pdf")
        filename = f"{invoice.number or f'draft-{invoice.pk}'}.pdf"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response

    def html_view(self, request: HttpRequest, invoice_id: int) -> HttpResponse:
        """The invoice as the HTML page the customer's e-mail shows; `?group_by=tag:<key>`
        (or contract, model, mode) adds its amounts by cost centre."""
        invoice = self._viewable(request, invoice_id)
        raw = request.GET.get("group_by")
        if not raw:
            return HttpResponse(invoice_html(invoice))
        try:
            grouping = grouping_parse(raw)
        except ApplicationError as error:
            return HttpResponseBadRequest(error_text(error), content_type="text/plain")
        centres = CostCentres(
            title=f"Cost centres by {grouping.key or grouping.kind}",
            groups=invoice_cost_groups(invoice, grouping),
        )
        return HttpResponse(invoice_html(invoice, centres))

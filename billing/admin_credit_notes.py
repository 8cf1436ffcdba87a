"""Credit notes in the admin: issued from the invoice admin (admin_invoices), never edited; each
has its PDF."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from accounts.admin import CustomerListFilter, ProviderListFilter
from billing.admin import ReadOnlyAdmin, ReadOnlyMixin
from billing.models import CreditNote, CreditNoteLine
from billing.rendering import credit_note_pdf


class CreditNoteLineInline(ReadOnlyMixin, admin.TabularInline[CreditNoteLine, CreditNote]):
    """What a credit note credits, optionally against an invoice line."""

    model = CreditNoteLine
    extra = 0
    can_delete = False
    fields = readonly_fields = ("description", "invoice_line", "amount")


@admin.register(CreditNote)
class CreditNoteAdmin(ReadOnlyAdmin):
    """Credit notes: issued from the invoice admin, never edited."""

    list_display = [
        "number",
        "invoice",
        "customer",
        "total",
        "currency",
        "issued_at",
        "issued_by",
        "document",
    ]
    list_filter = [
        "currency",
        ("issuer", ProviderListFilter),
        ("customer", CustomerListFilter),
    ]
    search_fields = ["number", "invoice__number", "invoice__contract__number"]
    list_select_related = ["invoice", "customer"]
    date_hierarchy = "issued_at"
    inlines = [CreditNoteLineInline]
    readonly_fields = ["document"]

    @admin.display(description="Document")
    def document(self, note: CreditNote) -> SafeString:
        """A link to the credit note as PDF."""
        url = reverse(f"{self.admin_site.name}:billing_creditnote_pdf", args=[note.pk])
        return format_html("<a href='{}'>Download PDF</a>", url)

    def get_urls(self) -> list[URLPattern]:
        """The PDF view of one credit note, before the default admin URLs."""
        own = [
            path(
                "<int:note_id>/pdf/",
                self.admin_site.admin_view(self.pdf_view),
                name="billing_creditnote_pdf",
            )
        ]
        return own + super().get_urls()

    def pdf_view(self, request: HttpRequest, note_id: int) -> HttpResponse:
        """The credit note rendered as PDF."""
        note = get_object_or_404(
            CreditNote.objects.select_related("invoice__contract", "issuer", "customer"),
            pk=note_id,
        )
        if not self.has_view_permission(request, note):
            raise PermissionDenied
        response = HttpResponse(credit_note_pdf(note), content_type="application/pdf")
        response["Content-Disposition"] = f'attachment; filename="{note.number}.pdf"'
        return response

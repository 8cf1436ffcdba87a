"""Provider statements as PDF, with the invoice documents' page, fonts and formatting
(billing.rendering): a header, the month's figures, the invoices behind them and the payout."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.utils import timezone

from accounts.models import Organization
from billing.models import Invoice, ProviderStatement
from billing.parties import document_party
from billing.pdf import DocumentPdf, ascii_safe, pdf_bytes, pdf_text, pdf_totals, plain_table
from billing.rendering import format_amount, format_date

MARKETPLACE_NAME = "Cardhour marketplace"


def _payout_sentence(statement: ProviderStatement, currency: str) -> str:
    """The statement's payout and its state as of rendering."""
    payout = getattr(statement, "payout", None)
    as_of = f"(as of {format_date(timezone.now())})"
    if payout is None:
        return f"No payout yet {as_of}."
    return (
        f"Payout {payout.pk}: {format_amount(payout.amount, currency)}, "
        f"{payout.get_status_display().lower()} by {payout.get_method_display().lower()} {as_of}."
    )


def marketplace_party() -> dict[str, Any]:
    """The marketplace as a statement's issuer: the operator organization's billing profile."""
    operator = (
        Organization.objects.filter(is_operator=True)
        .select_related("billing_profile")
        .order_by("pk")
        .first()
    )
    if operator is None:
        return {"name": MARKETPLACE_NAME, "country": "", "lines": [], "tax_id": ""}
    return document_party(operator)


def statement_document(statement: ProviderStatement) -> dict[str, Any]:
    """Everything a statement shows, preformatted."""
    currency = statement.currency

    def money(amount: Decimal) -> str:
        return format_amount(amount, currency)

    invoices = Invoice.objects.filter(
        issuer_id=statement.provider_id,
        currency=currency,
        issued_at__gte=statement.period_start,
        issued_at__lt=statement.period_end,
    ).order_by("issued_at", "pk")
    return {
        "title": "Provider statement",
        "number": f"ST-{statement.provider_id}-{statement.period_start:%Y-%m}-{currency}",
        "provider": statement.provider.name,
        "issuer": marketplace_party(),
        "customer": document_party(statement.provider),
        "period": (f"{format_date(statement.period_start)} to {format_date(statement.period_end)}"),
        "currency": currency,
        "created_on": format_date(statement.created_at),
        "invoices": [
            (
                invoice.number or "",
                format_date(invoice.issued_at),
                invoice.get_status_display(),
                money(invoice.subtotal),
            )
            for invoice in invoices
        ],
        "rows": [
            ("Gross billed", money(statement.gross_billed), False),
            ("SLA credits", money(-statement.sla_credits), False),
            ("Refunds (credit notes)", money(-statement.refunds), False),
            ("Marketplace commission", money(-statement.commission), False),
            *(
                [("Resale proceeds to sellers", money(-statement.resale_to_sellers), False)]
                if statement.resale_to_sellers
                else []
            ),
            ("Net earned", money(statement.net_earned), True),
            ("Payable (collected)", money(statement.payable), True),
        ],
        "payout": _payout_sentence(statement, currency),
    }


def statement_pdf(statement: ProviderStatement, *, compress: bool = True) -> bytes:
    """The statement as a PDF: who and when, the figures, the invoices, the payout."""
    doc = statement_document(statement)
    pdf = DocumentPdf(f"{doc['title']} {doc['number']} - {MARKETPLACE_NAME}")
    pdf.set_title(ascii_safe(f"{doc['title']} {doc['number']}"))
    pdf.set_author(ascii_safe(doc["issuer"]["name"]))
    pdf.set_creation_date(statement.created_at)
    pdf.add_page()
    # Both parties: the marketplace that pays out, and the provider it owes.
    pdf_text(pdf, doc["issuer"]["name"], size=15, style="B", height=7)
    for line in doc["issuer"]["lines"]:
        pdf_text(pdf, line)
    pdf.ln(2)
    pdf_text(pdf, "Statement for", style="B")
    pdf_text(pdf, doc["customer"]["name"], style="B")
    for line in doc["customer"]["lines"]:
        pdf_text(pdf, line)
    pdf.ln(2)
    pdf_text(pdf, doc["title"].upper(), size=12, style="B", height=6)
    pdf.ln(2)
    for label, value in (
        ("Statement", doc["number"]),
        ("Provider", doc["provider"]),
        ("Period", doc["period"]),
        ("Currency", doc["currency"]),
        ("Created", doc["created_on"]),
    ):
        pdf_text(pdf, f"{label}: {value}")
    pdf.ln(3)
    plain_table(
        pdf,
        col_widths=(75, 30, 35, 40),
        text_align=("LEFT", "LEFT", "LEFT", "RIGHT"),
        headings=("Invoice", "Issued", "Status", "Pre-tax"),
        rows=doc["invoices"],
    )
    pdf_totals(pdf, doc["rows"])
    pdf.ln(4)
    pdf_text(pdf, doc["payout"])
    return pdf_bytes(pdf, compress=compress)
